//! `squidbot agent`: the interactive REPL, or one message with `-m`.
//!
//! The one-shot mode prints the reply on stdout and exits 0; on failure the short error goes to
//! stderr and the exit code is 1. Either way a due consolidation has finished before exit,
//! because the turn awaits it.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;

use squidbot::channels::terminal;
use squidbot::core::agent_loop::TurnRequest;
use squidbot::core::audience::Readers;
use squidbot::core::origin::Origin;
use squidbot::core::ports::channel::CollectingSink;
use squidbot::core::session::SessionId;
use squidbot::gateway::command::ChatCommand;
use squidbot::gateway::command_answer;

use super::assemble::Assembly;

/// Arguments of `squidbot agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Send one message, print the reply and exit.
    #[arg(short = 'm', long = "message", value_name = "TEXT")]
    message: Option<String>,
}

/// Runs the agent command.
pub async fn run(config: Option<&Path>, args: AgentArgs) -> Result<ExitCode> {
    let assembly = Assembly::from_config(config).await?;
    let extra = assembly.extra_tools();
    match args.message {
        Some(text) => {
            let key = SessionId::cli_local();
            // A command is answered as in the REPL, without the LLM or the history.
            if let Some(command) = ChatCommand::parse(&text) {
                say!(
                    "{}",
                    command_answer::answer(&assembly.agent, &key, &command).await
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            let session = assembly.agent.current_session(&key);
            let mut request = TurnRequest::new(session, text, Origin::owner());
            // The terminal is the owner's (see `Owner`): the owner alone reads its replies.
            request.readers = Readers::Owner;
            request.extra_tools = extra(&key);
            let sink = Arc::new(CollectingSink::new());
            let result = assembly.agent.run(request, sink.clone()).await;
            match result {
                Ok(outcome) => {
                    say!("{}", outcome.reply)?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    match sink.delivered().last() {
                        Some(told) => tell!("{told}"),
                        None => tell!("squidbot: {error}"),
                    }
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        None => {
            // The REPL lives long enough for a late MCP server to matter; the retries stop,
            // and are waited for, when the session ends.
            let stop = tokio_util::sync::CancellationToken::new();
            let tasks = tokio_util::task::TaskTracker::new();
            assembly.retry_mcp(stop.clone(), &tasks);
            assembly.warm_up();
            let banner = format!(
                "squidbot {} · pool: {}",
                env!("CARGO_PKG_VERSION"),
                assembly.pool_name
            );
            let ended = terminal::run_interactive(
                assembly.agent.clone(),
                assembly.approvals.clone(),
                extra.as_ref(),
                &banner,
            )
            .await;
            stop.cancel();
            tasks.close();
            tasks.wait().await;
            ended?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
