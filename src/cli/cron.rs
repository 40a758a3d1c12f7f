//! `squidbot cron list | add | remove | enable | disable`: managing jobs from the shell.
//!
//! It edits the same `$SQUIDBOT_HOME/cron/jobs.json` as a running gateway (the home comes from
//! the loaded configuration, so `--config` and `SQUIDBOT_HOME` are honoured), through the same
//! locked updates, so an edit made here while the daemon runs is neither lost nor loses one.
//! A Matrix target gets its room from the session id, so jobs added here are deliverable.
//! Without `--target` a job goes to the owner's own conversation (`squidbot::channels::owner_target`, each enabled
//! channel saying where its owner talks),
//! and the output says which; jobs are named by id or by name.

use std::process::ExitCode;

use anyhow::Result;
use chrono::Utc;
use clap::{Args, Subcommand};

use squidbot::channels::{Routes, owner_target};
use squidbot::core::session::SessionId;
use squidbot::cron::admin::{self, shell_quoted, target_metadata};
use squidbot::cron::store::{CronJobs, NewJob};
use squidbot::cron::{CronError, format_jobs};

/// `squidbot cron` arguments.
#[derive(Debug, Args)]
pub struct CronArgs {
    #[command(subcommand)]
    command: CronCommand,
}

#[derive(Debug, Subcommand)]
enum CronCommand {
    /// List the jobs.
    #[command(alias = "list-jobs")]
    List,
    /// Add a job: the MESSAGE is a prompt to the agent, whose reply goes to the target session.
    Add {
        /// A short name.
        name: String,
        /// The prompt the agent gets when the job fires.
        message: String,
        /// `"0 9 * * 1-5"` (5-field cron), `"every N"` (seconds) or `"at <RFC 3339 time>"`.
        schedule: String,
        /// The target session, e.g. 'matrix:!room:server' or email:you@example.org.
        /// Default: your own conversation (Matrix if configured, else email).
        #[arg(long, alias = "channel", value_name = "SESSION")]
        target: Option<String>,
        /// The zone cron expressions are read in (IANA name, UTC, local or ±HH:MM).
        #[arg(long, value_name = "TZ", default_value = "local")]
        timezone: String,
    },
    /// Remove a job.
    Remove {
        /// The job id or name.
        id: String,
    },
    /// Enable a job.
    Enable {
        /// The job id or name.
        id: String,
    },
    /// Disable a job.
    Disable {
        /// The job id or name.
        id: String,
    },
}

/// Exit code for invalid input (bad schedule, zone or target), as in the original.
const USAGE: u8 = 2;

/// Runs `squidbot cron`.
pub async fn run(config_path: Option<&std::path::Path>, args: CronArgs) -> Result<ExitCode> {
    let loaded = squidbot::config::load(config_path)?;
    let store = CronJobs::new(&loaded.home);
    let now = Utc::now();
    let result = match args.command {
        CronCommand::List => {
            let jobs = store.load().await?;
            say!("{}", format_jobs(&jobs, now))?;
            return Ok(ExitCode::SUCCESS);
        }
        CronCommand::Add {
            name,
            message,
            schedule,
            target,
            timezone,
        } => add(&loaded, &store, name, message, schedule, target, timezone).await,
        CronCommand::Remove { id } => admin::remove_job(&store, &id)
            .await
            .map(|job| format!("Removed job '{}'", job.id)),
        CronCommand::Enable { id } => admin::set_enabled(&store, &id, true, now)
            .await
            .map(|job| format!("Enabled job '{}'", job.id)),
        CronCommand::Disable { id } => admin::set_enabled(&store, &id, false, now)
            .await
            .map(|job| format!("Disabled job '{}'", job.id)),
    };
    match result {
        Ok(text) => {
            say!("{text}")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(CronError::Store(error)) => Err(error.into()),
        Err(error @ (CronError::UnknownJob { .. } | CronError::AmbiguousName { .. })) => {
            tell!("squidbot: {error}");
            Ok(ExitCode::FAILURE)
        }
        Err(error) => {
            tell!("squidbot: {error}");
            Ok(ExitCode::from(USAGE))
        }
    }
}

async fn add(
    loaded: &squidbot::config::LoadedConfig,
    store: &CronJobs,
    name: String,
    message: String,
    schedule: String,
    target: Option<String>,
    timezone: String,
) -> Result<String, CronError> {
    let (session, chosen) = match target {
        Some(target) => {
            let session =
                SessionId::parse(target.trim()).map_err(|error| CronError::InvalidTarget {
                    target: target.clone(),
                    reason: error.to_string(),
                })?;
            (session, None)
        }
        None => {
            let found = owner_target(&loaded.config, &loaded.home).map_err(|reason| {
                CronError::InvalidTarget {
                    target: String::new(),
                    reason,
                }
            })?;
            (found.session, Some(found.why))
        }
    };
    let metadata = target_metadata(&Routes::new(), &session, &name, None)?;
    let new = NewJob {
        name,
        message,
        schedule: schedule.trim().to_owned(),
        channel: session.to_string(),
        timezone,
        metadata,
        created_by: Some("squidbot cron".to_owned()),
        created_in: None,
    };
    let job = admin::add_job(store, new, Utc::now()).await?;
    let target = shell_quoted(&job.channel);
    Ok(match chosen {
        Some(why) => format!(
            "Added cron job '{}' (id={}) for {why}: --target {target}",
            job.name, job.id
        ),
        None => format!("Added cron job '{}' (id={})", job.name, job.id),
    })
}
