//! `squidbot import DIR`: brings an original (Python) squidbot home over, without loss and
//! idempotently; the work is done by [`squidbot::storage::import`], this is the glue and the
//! summary. Everything it writes is inside `$SQUIDBOT_HOME` (and the config file, when
//! `--config` names one elsewhere); it may run beside a gateway on the same home.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use squidbot::storage::import::{self, FileOutcome, Rehome};

/// Arguments of `squidbot import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The original squidbot's home (usually ~/.squidbot of the Python version).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// Runs the import and prints a summary.
pub async fn run(config_path: Option<&Path>, args: ImportArgs) -> Result<ExitCode> {
    let source = args.dir;
    if !source.is_dir() {
        bail!("{}: not a directory", source.display());
    }
    let location = squidbot::config::resolve_path(config_path)?;
    let home = location.home.clone();
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let _import = import::lock(&home)?;
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let rehome = Rehome::new(&source, &home, user_home.as_deref());
    let config = import::import_config(&rehome, &location.path)?;
    let workspace = match squidbot::config::load(config_path) {
        Ok(loaded) => loaded.config.agents.workspace,
        Err(_) => home.join("workspace"),
    };
    let history = import::import_history(&source, &home).await?;
    let jobs = import::import_jobs(&source, &home).await?;
    let memory = import::import_memory(&source, &home, &workspace)?;

    say!("imported from {}", source.display())?;
    if history.absent {
        say!("history:  no history.jsonl")?;
    } else if history.already_imported {
        say!("history:  already imported, nothing new")?;
    } else {
        say!(
            "history:  {} messages into {} sessions, {} malformed lines skipped",
            history.messages(),
            history.sessions.len(),
            history.skipped_lines
        )?;
        for (session, count) in &history.sessions {
            say!("  {session}: {count}")?;
        }
    }
    say!(
        "jobs:     {} added, {} already present",
        jobs.added,
        jobs.kept
    )?;
    say!("memory:   {}", describe(&memory))?;
    say!("config:   {}", describe(&config.outcome))?;
    for field in config.mapped {
        say!("  moved {field}")?;
    }
    for field in config.dropped {
        say!("  dropped {field}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(outcome: &FileOutcome) -> String {
    match outcome {
        FileOutcome::Absent => "nothing to import".to_owned(),
        FileOutcome::Written(path) => format!("written to {}", path.display()),
        FileOutcome::WrittenBeside(path) => {
            format!(
                "ours differs and was kept; theirs written to {}",
                path.display()
            )
        }
        FileOutcome::Unchanged => "already imported".to_owned(),
    }
}
