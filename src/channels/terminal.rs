//! The terminal channel: `squidbot agent`, session `cli:local`.
//!
//! Interactive mode reads lines with rustyline (history, editing; Ctrl-D or an exit word ends
//! it) on a blocking thread and renders replies as Markdown with termimad when stdout is a
//! terminal. One-shot mode (`-m TEXT`) collects the reply with `CollectingSink` (a core port type) and leaves
//! printing and the exit code to the caller.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use crate::console;
use crate::core::agent_loop::{AgentLoop, TurnError, TurnRequest};
use crate::core::origin::Origin;
use crate::core::ports::channel::{DeliveryError, ReplySink};
use crate::core::ports::tool::Tool;
use crate::core::session::SessionId;

/// Words that end an interactive session (case-insensitive).
pub const EXIT_WORDS: [&str; 5] = ["exit", "quit", "/exit", "/quit", ":q"];

/// Why the terminal channel stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    /// The line editor could not be set up or failed while reading.
    #[error("terminal input failed: {0}")]
    Input(#[from] ReadlineError),
    /// The input thread died.
    #[error("terminal input thread stopped unexpectedly")]
    InputThread,
    /// Stdout could not be written (other than its reader going away, which is ignored).
    #[error("terminal output failed: {0}")]
    Output(#[from] std::io::Error),
}

/// Prints replies to stdout, as rendered Markdown when stdout is a terminal.
#[derive(Debug)]
struct PrintingSink {
    markdown: bool,
}

#[async_trait]
impl ReplySink for PrintingSink {
    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        let printed = if self.markdown {
            let skin = termimad::MadSkin::default();
            console::out(format_args!("\n{}\n", skin.term_text(text)))
        } else {
            console::out(format_args!("{text}\n"))
        };
        printed.map_err(|error| DeliveryError::new("terminal", error))
    }
}

/// Builds the per-turn tools (e.g. `memory_write`) for a session.
pub type ExtraTools = dyn Fn(&SessionId) -> Vec<Arc<dyn Tool>> + Send + Sync;

/// Runs the interactive REPL until an exit word, Ctrl-D or Ctrl-C.
pub async fn run_interactive(
    agent: Arc<AgentLoop>,
    extra_tools: &ExtraTools,
    banner: &str,
) -> Result<(), TerminalError> {
    let tty = std::io::stdout().is_terminal();
    console::out(format_args!("{banner}\n"))?;
    if tty {
        console::out(format_args!("Type a message; 'exit' or Ctrl-D quits.\n"))?;
    }
    let editor = Arc::new(Mutex::new(DefaultEditor::new()?));
    let session = SessionId::cli_local();
    let sink = PrintingSink { markdown: tty };
    loop {
        let reader = editor.clone();
        let line = tokio::task::spawn_blocking(move || {
            let mut editor = reader.lock().unwrap_or_else(|p| p.into_inner());
            let line = editor.readline("You: ");
            if let Ok(text) = &line {
                let _ = editor.add_history_entry(text.as_str());
            }
            line
        })
        .await
        .map_err(|_| TerminalError::InputThread)?;
        let text = match line {
            Ok(text) => text,
            Err(ReadlineError::Eof | ReadlineError::Interrupted) => return Ok(()),
            Err(error) => return Err(error.into()),
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
        let mut request = TurnRequest::new(session.clone(), text, Origin::owner());
        request.extra_tools = extra_tools(&session);
        match agent.run(request, &sink).await {
            Ok(_) | Err(TurnError::Llm(_) | TurnError::TooManyToolRounds(_)) => {}
            Err(error) => console::err(format_args!("squidbot: {error}\n")),
        }
    }
}
