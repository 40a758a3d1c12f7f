//! The terminal channel: `squidbot agent`, session `cli:local`.
//!
//! - `channel.rs`: the interactive REPL, [`run_interactive`]. Ctrl-C during a turn cancels the
//!   turn (the REPL goes on); Ctrl-C or Ctrl-D at the prompt, or an exit word, ends it.
//! - `input.rs`: rustyline on an input thread of its own, one line per prompt.
//! - `sink.rs`: the reply sink that prints streamed text as it arrives and, on a terminal,
//!   shows the finished reply as rendered Markdown.
//!
//! One-shot mode (`-m TEXT`) collects the reply with `CollectingSink` (a core port type) and
//! leaves printing and the exit code to the caller.

mod channel;
mod input;
mod sink;

pub use channel::{ExtraTools, run_interactive};

use rustyline::error::ReadlineError;

/// Words that end an interactive session (case-insensitive).
pub const EXIT_WORDS: [&str; 5] = ["exit", "quit", "/exit", "/quit", ":q"];

/// Why the terminal channel stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    /// The line editor could not be set up or failed while reading.
    #[error("terminal input failed: {0}")]
    Input(ReadlineError),
    /// The input thread could not be started.
    #[error("cannot start the terminal input thread: {0}")]
    StartInput(std::io::Error),
    /// The input thread died.
    #[error("terminal input thread stopped unexpectedly")]
    InputThread,
    /// SIGINT could not be caught, so Ctrl-C could not cancel a turn.
    #[error("cannot catch Ctrl-C (SIGINT): {0}")]
    Signal(std::io::Error),
    /// Stdout could not be written (other than its reader going away, which is ignored).
    #[error("terminal output failed: {0}")]
    Output(std::io::Error),
}
