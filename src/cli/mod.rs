//! The command line: argument parsing (clap) and dispatch to one module per command.
//!
//! - `assemble`: builds the agent (stores, LLM pools, tools) from the configuration.
//! - `agent`: `squidbot agent` (REPL) and `squidbot agent -m TEXT` (one shot).
//! - `gateway`: `squidbot gateway`, the daemon.
//! - `cron`: `squidbot cron list|add|remove|enable|disable`, editing `cron/jobs.json`.
//! - `status`: `squidbot status`, the resolved configuration in brief.
//! - `onboard`: `squidbot onboard`, writes a starter configuration and workspace.
//! - `skills`: `squidbot skills list`, the skills and whether they are usable.
//! - `doctor`: `squidbot doctor`, checks config, LLM, channels, paths and the listen address.
//! - `import`: `squidbot import DIR`, brings an original (Python) squidbot home over.
//! - `service`: `squidbot service install|uninstall|status`, the gateway as a systemd unit.
//! - `matrix`: `squidbot matrix verify`, the owner confirms the bot's emoji verification.
//! - `usage`: `squidbot usage`, the usage ledger summed by day, session, model or purpose.
//! - `voice`: the transcriber of voice notes the gateway hands the Matrix and email channels.

/// `println!` that never panics (see `squidbot::console::out`): a closed stdout drops the line,
/// any other write failure is the `io::Result` it evaluates to.
macro_rules! say {
    ($($arg:tt)*) => {
        squidbot::console::out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics (see `squidbot::console::err`).
macro_rules! tell {
    ($($arg:tt)*) => {
        squidbot::console::err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod agent;
mod assemble;
mod cron;
mod doctor;
mod gateway;
mod import;
#[cfg(feature = "matrix")]
mod matrix;
mod onboard;
mod private;
mod service;
mod service_env;
mod skills;
mod status;
mod usage;
mod voice;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use squidbot::core::error_chain::Chain;

/// squidbot: a personal AI assistant with memory that never forgets and never bloats.
#[derive(Debug, Parser)]
#[command(name = "squidbot", version, about)]
struct Cli {
    /// Configuration file (else $SQUIDBOT_CONFIG, else $SQUIDBOT_HOME/squidbot.yaml).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,

    /// Log filter for stderr (error, warn, info, debug, trace, or a tracing filter);
    /// RUST_LOG is used when this is not given.
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Talk to the agent in the terminal (session cli:local).
    Agent(agent::AgentArgs),
    /// Run the daemon: HTTP API, heartbeat, cron and the configured channels.
    Gateway,
    /// Print the resolved configuration in brief.
    Status,
    /// Write a starter configuration and workspace.
    Onboard(onboard::OnboardArgs),
    /// Manage scheduled jobs (cron/jobs.json).
    Cron(cron::CronArgs),
    /// Inspect skills.
    Skills(skills::SkillsArgs),
    /// Check that the configuration, LLM, channels and paths work; exit 1 on any failure.
    Doctor,
    /// Import an original (Python) squidbot home: history, MEMORY.md, cron jobs, config.
    Import(import::ImportArgs),
    /// Run the gateway as a systemd service: install, uninstall, status.
    Service(service::ServiceArgs),
    /// Sum the LLM usage ledger by day, session, model, purpose or pool.
    Usage(usage::UsageArgs),
    /// Matrix: confirm the bot's verification from your client.
    #[cfg(feature = "matrix")]
    Matrix(matrix::MatrixArgs),
}

/// The most threads doing blocking file work at once.
const BLOCKING_THREADS: usize = 16;

/// Parses arguments, runs the command and maps its result to an exit code.
pub fn main() -> ExitCode {
    private::restrict_umask();
    let cli = Cli::parse();
    // matrix-sdk logs a warning for every message when no key backup is set up, and an error
    // for each expected 404 while it probes account data at start; the Matrix channel reports
    // real failures itself, so by default those two are kept quiet.
    let default_level = if matches!(cli.command, Command::Gateway) {
        "info,matrix_sdk_crypto::backups=error,matrix_sdk::http_client=off"
    } else {
        "error"
    };
    init_logging(cli.log_level.as_deref(), default_level);
    // One thread runs every task: squidbot waits on the network and the LLM far more than it
    // computes, and what blocks (files, SQLite) goes to the blocking pool. A worker per core
    // woke another thread for most wake-ups of a turn (0.1 ms more CPU per HTTP turn on 2
    // cores). The blocking pool is small, so a burst of file work queues instead of spawning
    // hundreds of threads; every thread keeps a malloc arena.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tell!("squidbot: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Agent(args) => agent::run(cli.config.as_deref(), args).await,
            Command::Gateway => gateway::run(cli.config.as_deref()).await,
            Command::Status => status::run(cli.config.as_deref()),
            Command::Onboard(args) => onboard::run(cli.config.as_deref(), args),
            Command::Cron(args) => cron::run(cli.config.as_deref(), args).await,
            Command::Skills(args) => skills::run(cli.config.as_deref(), args),
            Command::Doctor => doctor::run(cli.config.as_deref()).await,
            Command::Import(args) => import::run(cli.config.as_deref(), args).await,
            Command::Service(args) => service::run(cli.config.as_deref(), args),
            Command::Usage(args) => usage::run(cli.config.as_deref(), args),
            #[cfg(feature = "matrix")]
            Command::Matrix(args) => matrix::run(cli.config.as_deref(), args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            tell!("squidbot: {}", describe(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, each said once ([`Chain`]): an error that prints
/// its cause does not return it, but anyhow's context layers and foreign errors still chain.
fn describe(error: &anyhow::Error) -> String {
    Chain(error.as_ref()).to_string()
}

/// Logs go to stderr, coloured only on a terminal. A failed write (a log reader that died) is
/// dropped: tracing-subscriber's default reports it with `eprintln!`, which panics on the same
/// broken pipe, in whatever task was logging (once, the one that turns SIGTERM into a shutdown).
fn init_logging(level: Option<&str>, default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => EnvFilter::try_new(level),
        None => EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(default_level)),
    }
    .unwrap_or_else(|_| EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| RedactingStderr)
        .with_ansi(squidbot::console::log_colour())
        .log_internal_errors(false)
        .init();
}

/// The secrets the log redacts, known once the configuration is assembled (lines logged before
/// then are not redacted; nothing logged before holds a resolved secret).
static LOG_REDACTOR: std::sync::OnceLock<std::sync::Arc<squidbot::core::redact::Redactor>> =
    std::sync::OnceLock::new();

/// Redacts known secrets from every log line from now on: a secret that reached a log field
/// (an error quoting a header, a model's text) is replaced like anywhere else.
pub fn redact_logs(redactor: std::sync::Arc<squidbot::core::redact::Redactor>) {
    let _ = LOG_REDACTOR.set(redactor);
}

/// stderr, with [`LOG_REDACTOR`]'s secrets replaced. The fmt layer writes each event with one
/// `write_all` of the whole formatted line, and this writer takes all of it in one `write`, so
/// a secret is never split between two writes.
struct RedactingStderr;

impl std::io::Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut stderr = std::io::stderr().lock();
        match LOG_REDACTOR.get() {
            Some(redactor) if !redactor.is_empty() => {
                let text = String::from_utf8_lossy(buf);
                stderr.write_all(redactor.redact(&text).as_bytes())?;
            }
            _ => stderr.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
