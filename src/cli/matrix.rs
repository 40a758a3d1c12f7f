//! `squidbot matrix verify`: the owner confirms the bot's emoji verification on the server.
//!
//! The owner starts verifying the bot from their Matrix client; the running gateway answers and
//! publishes the emoji (see `squidbot::channels::matrix::verification_desk`). This command waits
//! for them, shows them, and asks whether the owner's client shows the same; the answer goes
//! back to the gateway, which confirms or cancels. It needs no access to the gateway's process
//! or its HTTP API, only to the home.

use std::io::BufRead as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};

use squidbot::channels::matrix::verification_desk::{Desk, Pending, Stage};

/// How often the command looks at the desk.
const POLL: Duration = Duration::from_millis(200);
/// A verification published longer ago than this belongs to an earlier attempt (Matrix clients
/// cancel one after ten minutes).
const STALE: chrono::TimeDelta = chrono::TimeDelta::minutes(10);
/// How long the command waits for the gateway to say how it ended, after the answer.
const OUTCOME_WAIT: Duration = Duration::from_secs(60);

/// `squidbot matrix` arguments.
#[derive(Debug, Args)]
pub struct MatrixArgs {
    #[command(subcommand)]
    command: MatrixCommand,
}

#[derive(Debug, Subcommand)]
enum MatrixCommand {
    /// Confirm the emoji when you verify the bot from your Matrix client (the gateway must
    /// be running): start the verification in your client, then run this.
    Verify {
        /// How long to wait for a verification to start, in seconds.
        #[arg(long, default_value_t = 300)]
        wait: u64,
    },
}

/// Runs a `squidbot matrix` command.
pub async fn run(config_path: Option<&Path>, args: MatrixArgs) -> Result<ExitCode> {
    let loaded = squidbot::config::load(config_path)?;
    let matrix = &loaded.config.channels.matrix;
    if !matrix.enabled {
        bail!(
            "channels.matrix is not enabled in {}",
            loaded.path.display()
        );
    }
    let desk = Desk::new(&loaded.home.join(&matrix.store_dir));
    match args.command {
        MatrixCommand::Verify { wait } => verify(desk, Duration::from_secs(wait)).await,
    }
}

async fn verify(desk: Desk, wait: Duration) -> Result<ExitCode> {
    say!(
        "Waiting for a verification: in your Matrix client, open the bot's profile (or its \
         device in your security settings) and choose Verify, then compare emoji."
    )?;
    let deadline = Instant::now() + wait;
    let pending = loop {
        if let Some(pending) = desk.pending().filter(is_open) {
            break pending;
        }
        if Instant::now() >= deadline {
            say!("No verification started within {} s.", wait.as_secs())?;
            return Ok(ExitCode::FAILURE);
        }
        tokio::time::sleep(POLL).await;
    };
    say!(
        "{} asks to verify the bot. Your client should show:",
        pending.sender
    )?;
    for emoji in &pending.emoji {
        say!("    {emoji}")?;
    }
    say!("(or the numbers {})", pending.decimals)?;
    let matches = ask("Do they match, in the same order? [y/N] ").await?;
    desk.answer(&pending.flow, matches)
        .context("writing the answer for the gateway")?;
    if matches {
        say!("Confirmed; now confirm on your client too.")?;
    } else {
        say!("Cancelling the verification.")?;
    }
    let deadline = Instant::now() + OUTCOME_WAIT;
    while Instant::now() < deadline {
        match desk.pending().filter(|p| p.flow == pending.flow) {
            Some(Pending {
                stage: Stage::Done, ..
            }) => {
                say!("Verified: your client now trusts the bot, and the bot trusts your device.")?;
                return Ok(ExitCode::SUCCESS);
            }
            Some(Pending {
                stage: Stage::Cancelled,
                reason,
                ..
            }) => {
                let reason = reason.unwrap_or_default();
                say!("The verification was cancelled: {reason}")?;
                return Ok(ExitCode::FAILURE);
            }
            _ => tokio::time::sleep(POLL).await,
        }
    }
    say!(
        "The gateway did not say how the verification ended within {} s; look at its log.",
        OUTCOME_WAIT.as_secs()
    )?;
    Ok(ExitCode::FAILURE)
}

/// A verification waiting for the owner's answer, published recently.
fn is_open(pending: &Pending) -> bool {
    let recent = chrono::DateTime::parse_from_rfc3339(&pending.published)
        .is_ok_and(|at| chrono::Utc::now().signed_duration_since(at) < STALE);
    pending.stage == Stage::Compare && recent
}

/// Asks a yes/no question on the terminal; anything but "y"/"yes" (or end of input) is no.
async fn ask(question: &str) -> Result<bool> {
    squidbot::console::out(format_args!("{question}"))?;
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    })
    .await
    .context("reading the answer")?
    .context("reading the answer")?;
    let answer = line.trim().to_lowercase();
    Ok(answer == "y" || answer == "yes")
}
