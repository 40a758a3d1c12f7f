//! The REPL's input: rustyline (history, editing) on a thread of its own, one line per prompt.
//!
//! It is a plain thread, not a tokio blocking task: a read of stdin cannot be interrupted, and
//! the runtime waits for its blocking tasks when it shuts down, so leaving on Ctrl-C while a
//! pipe is being read would hang. A thread blocked in `read` simply ends with the process.
//!
//! rustyline shows no prompt when stdin is not a terminal; the thread then writes it to stderr
//! (as Python's REPL does), so a program driving the REPL through pipes sees when it may type
//! and stdout carries only replies.

use std::io::{IsTerminal, Write};

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use tokio::sync::mpsc;

use super::TerminalError;

/// Asks the input thread for lines.
pub(super) struct LineReader {
    asks: mpsc::Sender<&'static str>,
    lines: mpsc::Receiver<Result<String, ReadlineError>>,
    /// A line was asked for and not yet received (a cancelled read keeps its place).
    pending: bool,
    /// The chat prompt.
    prompt: &'static str,
}

impl LineReader {
    /// Starts the input thread; it reads a line each time [`LineReader::read_line`] asks.
    pub(super) fn start(prompt: &'static str) -> Result<Self, TerminalError> {
        let mut editor = DefaultEditor::new().map_err(TerminalError::Input)?;
        let prompt_on_stderr = !std::io::stdin().is_terminal();
        let (asks, mut asked) = mpsc::channel::<&'static str>(1);
        let (answers, lines) = mpsc::channel(1);
        std::thread::Builder::new()
            .name("squidbot-input".to_owned())
            .spawn(move || {
                while let Some(prompt) = asked.blocking_recv() {
                    if prompt_on_stderr {
                        let mut stderr = std::io::stderr().lock();
                        let _ = stderr.write_all(prompt.as_bytes());
                        let _ = stderr.flush();
                    }
                    let line = editor.readline(prompt);
                    if let Ok(text) = &line {
                        let _ = editor.add_history_entry(text.as_str());
                    }
                    if answers.blocking_send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(TerminalError::StartInput)?;
        Ok(Self {
            asks,
            lines,
            pending: false,
            prompt,
        })
    }

    /// The next line the user typed (or why there is none). Cancel-safe: dropped while
    /// waiting, the next call receives the line already asked for.
    pub(super) async fn read_line(
        &mut self,
    ) -> Result<Result<String, ReadlineError>, TerminalError> {
        self.read_line_after(self.prompt).await
    }

    /// Like [`Self::read_line`] with another prompt (the approval's `[y/N] `).
    pub(super) async fn read_line_after(
        &mut self,
        prompt: &'static str,
    ) -> Result<Result<String, ReadlineError>, TerminalError> {
        if !self.pending {
            self.asks
                .send(prompt)
                .await
                .map_err(|_| TerminalError::InputThread)?;
            self.pending = true;
        }
        let line = self.lines.recv().await.ok_or(TerminalError::InputThread)?;
        self.pending = false;
        Ok(line)
    }
}
