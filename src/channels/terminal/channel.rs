//! The interactive REPL of `squidbot agent`.
//!
//! SIGINT is caught for the whole session, because the default action (death, exit 130) would
//! leave the question of the running turn unanswered in the history. During a turn Ctrl-C
//! cancels it: the agent loop records the cancellation in the history and the REPL asks for the
//! next message. At the prompt Ctrl-C leaves, like Ctrl-D: on a terminal rustyline reads it as
//! a key, and through a pipe it arrives as SIGINT. A SIGINT that lands after a turn has ended
//! stays queued in the signal stream, so the prompt sees it and leaves.

use std::io::IsTerminal;
use std::sync::Arc;

use rustyline::error::ReadlineError;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::input::LineReader;
use super::sink::TerminalSink;
use super::{EXIT_WORDS, TerminalError};
use crate::approval::{Approvals, Decision};
use crate::console;
use crate::core::agent_loop::{AgentLoop, TurnError, TurnRequest};
use crate::core::audience::Readers;
use crate::core::origin::Origin;
use crate::core::ports::approvals::{ApprovalRequest, visible};
use crate::core::ports::tool::Tool;
use crate::core::session::SessionId;
use crate::gateway::command::ChatCommand;
use crate::gateway::command_answer;

/// Asks y/N for `request` on the terminal; anything but `y` or `yes` (Ctrl-C and Ctrl-D too)
/// is a no.
async fn approve(
    input: &mut LineReader,
    request: &ApprovalRequest,
) -> Result<Decision, TerminalError> {
    // Escapes shown, not interpreted: a carriage return or an escape sequence in the command
    // must not hide its start from the owner.
    console::out(format_args!(
        "\nApproval needed: `{}` wants to run\n  {}\n({}.)\n",
        request.tool,
        visible(&request.command).replace('\n', "\n  "),
        visible(&request.reason)
    ))
    .map_err(TerminalError::Output)?;
    let answer = input
        .read_line_after("Run it once? [y/N] ")
        .await?
        .unwrap_or_default();
    let yes = matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    Ok(if yes {
        Decision::Approve
    } else {
        Decision::Deny
    })
}

/// Builds the per-turn tools (e.g. `memory_write`) for a session.
pub type ExtraTools = dyn Fn(&SessionId) -> Vec<Arc<dyn Tool>> + Send + Sync;

/// Runs the interactive REPL until an exit word, or Ctrl-D or Ctrl-C at the prompt.
pub async fn run_interactive(
    agent: Arc<AgentLoop>,
    approvals: Arc<Approvals>,
    extra_tools: &ExtraTools,
    banner: &str,
) -> Result<(), TerminalError> {
    let tty = std::io::stdout().is_terminal();
    console::out(format_args!("{banner}\n")).map_err(TerminalError::Output)?;
    if tty {
        console::out(format_args!(
            "Type a message; 'exit', Ctrl-D or Ctrl-C quits; Ctrl-C during a reply cancels it.\n"
        ))
        .map_err(TerminalError::Output)?;
    }
    let mut interrupts = signal(SignalKind::interrupt()).map_err(TerminalError::Signal)?;
    let mut input = LineReader::start("You: ")?;
    // The conversation's key; each message goes to its current session, which `/new` changes.
    let key = SessionId::cli_local();
    let (asks, mut asked) = mpsc::unbounded_channel();
    let sink = Arc::new(TerminalSink::new(tty, asks));
    loop {
        let line = tokio::select! {
            line = input.read_line() => line?,
            _ = interrupts.recv() => return Ok(()),
        };
        let text = match line {
            Ok(text) => text,
            Err(ReadlineError::Eof | ReadlineError::Interrupted) => return Ok(()),
            Err(error) => return Err(TerminalError::Input(error)),
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if EXIT_WORDS
            .iter()
            .any(|word| word.eq_ignore_ascii_case(text))
        {
            return Ok(());
        }
        if let Some(command) = ChatCommand::parse(text) {
            let answer = match command {
                // A turn holds the prompt until it ends; Ctrl-C is this channel's /stop.
                ChatCommand::Stop => {
                    "Nothing to stop: no reply is being worked on (Ctrl-C cancels one).".to_owned()
                }
                command => command_answer::answer(&agent, &key, &command).await,
            };
            console::out(format_args!("{answer}\n")).map_err(TerminalError::Output)?;
            continue;
        }
        let cancel = CancellationToken::new();
        let session = agent.current_session(&key);
        let mut request = TurnRequest::new(session.clone(), text, Origin::owner());
        // The terminal is the owner's (see `Owner`): the owner alone reads its replies.
        request.readers = Readers::Owner;
        request.extra_tools = extra_tools(&key);
        request.cancel = cancel.clone();
        let turn = agent.run(request, sink.clone());
        tokio::pin!(turn);
        let result = loop {
            tokio::select! {
                result = &mut turn => break result,
                // Once cancelled the turn ends by itself; a second Ctrl-C waits for the prompt.
                _ = interrupts.recv(), if !cancel.is_cancelled() => cancel.cancel(),
                Some(request) = asked.recv() => {
                    let decision = approve(&mut input, &request).await?;
                    if let Err(error) = approvals.resolve_id(&session, &request.id, decision)
                    {
                        console::out(format_args!("Nothing changed: {error}.\n"))
                            .map_err(TerminalError::Output)?;
                    }
                }
            }
        };
        match result {
            Ok(_)
            | Err(TurnError::Llm(_) | TurnError::TooManyToolRounds(_) | TurnError::Repeating(_)) => {
                sink.end_turn(false);
            }
            Err(TurnError::Cancelled) => sink.end_turn(true),
            Err(error) => {
                sink.end_turn(false);
                console::err(format_args!("squidbot: {error}\n"));
            }
        }
    }
}
