//! The terminal's reply sink: streamed text is printed the moment it arrives, so a long reply
//! is read while it is written.
//!
//! On a terminal the raw text of a finished reply is then replaced in place by the reply
//! rendered as Markdown (termimad): the cursor goes back up over the rows the raw text took and
//! clears them. A reply taller than the screen has partly scrolled out of reach, so it stays as
//! it streamed. Anywhere else (a pipe, a file) the text is written exactly as the model sent it.

use std::io::Write;
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::mpsc;
use unicode_width::UnicodeWidthStr;

use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::channel::{DeliveryError, ReplySink};

/// Prints one turn at a time to stdout.
#[derive(Debug)]
pub(super) struct TerminalSink {
    /// Whether stdout is a terminal: Markdown rendering and cursor movement.
    tty: bool,
    /// The text streamed in this turn so far. A std mutex: held only while writing to stdout,
    /// never across an await.
    shown: Mutex<String>,
    /// Where approval requests go: the chat loop asks y/N with the input it owns.
    asks: mpsc::UnboundedSender<ApprovalRequest>,
}

impl TerminalSink {
    /// A sink for stdout; `tty` says whether it is a terminal. Approval requests are sent to
    /// `asks`.
    pub(super) fn new(tty: bool, asks: mpsc::UnboundedSender<ApprovalRequest>) -> Self {
        Self {
            tty,
            shown: Mutex::new(String::new()),
            asks,
        }
    }

    /// Ends a turn's output: closes a streamed line that no delivery closed (a turn that
    /// failed or was cancelled midway) and says when the turn was cancelled.
    pub(super) fn end_turn(&self, cancelled: bool) {
        let shown = self.take_shown();
        let mut out = std::io::stdout().lock();
        if !shown.is_empty() {
            let _ = writeln!(out);
        }
        if cancelled {
            let _ = writeln!(out, "[cancelled]");
        }
        let _ = out.flush();
    }

    fn take_shown(&self) -> String {
        std::mem::take(&mut *self.shown.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Clears the rows `text` took, streamed from the first column, when all of them are still
    /// on screen; returns whether it did.
    fn erase(&self, out: &mut impl Write, text: &str) -> bool {
        let (width, height) = termimad::terminal_size();
        let rows = rows(text, usize::from(width));
        if !self.tty || rows >= usize::from(height) {
            return false;
        }
        // Back to the first column, up to the first row, then clear to the end of the screen.
        let up = match rows - 1 {
            0 => String::new(),
            n => format!("\x1b[{n}A"),
        };
        write!(out, "\r{up}\x1b[J").is_ok()
    }
}

#[async_trait]
impl ReplySink for TerminalSink {
    fn streaming(&self) -> bool {
        true
    }

    async fn delta(&self, text: &str) {
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = std::io::stdout().lock();
        if shown.is_empty() && self.tty {
            // A blank line between the prompt and the reply.
            let _ = writeln!(out);
        }
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        shown.push_str(text);
    }

    async fn reset(&self) {
        let shown = self.take_shown();
        if shown.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        if !self.erase(&mut out, &shown) {
            let _ = writeln!(out, "\n[another model starts the reply over]");
        }
        let _ = out.flush();
    }

    async fn ask(&self, request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        // A line streamed before the question is closed, so the question starts a line.
        if !self.take_shown().is_empty() {
            let _ = writeln!(std::io::stdout().lock());
        }
        Ok(self.asks.send(request.clone()).is_ok())
    }

    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        let shown = self.take_shown();
        let mut out = std::io::stdout().lock();
        let written = if shown == text {
            if self.erase(&mut out, &shown) {
                let skin = termimad::MadSkin::default();
                writeln!(out, "{}", skin.term_text(text))
            } else {
                writeln!(out)
            }
        } else {
            // Not what streamed (an error text, or a reply that did not stream): a line of its
            // own.
            if !shown.is_empty() {
                let _ = writeln!(out);
            }
            if self.tty {
                let skin = termimad::MadSkin::default();
                writeln!(out, "\n{}", skin.term_text(text))
            } else {
                writeln!(out, "{text}")
            }
        };
        written
            .and_then(|()| out.flush())
            .map_err(|error| DeliveryError::new("terminal", error))
    }
}

/// How many terminal rows `text` takes when written from the first column of a terminal
/// `width` columns wide (each line at least one row; long lines wrap).
fn rows(text: &str, width: usize) -> usize {
    let width = width.max(1);
    text.split('\n')
        .map(|line| line.width().div_ceil(width).max(1))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::rows;

    #[test]
    fn rows_count_lines_and_wrapping() {
        assert_eq!(rows("", 80), 1);
        assert_eq!(rows("hello", 80), 1);
        assert_eq!(rows("a\nb\n\nc", 80), 4);
        assert_eq!(rows(&"x".repeat(80), 80), 1, "a full row does not wrap yet");
        assert_eq!(rows(&"x".repeat(81), 80), 2);
        assert_eq!(rows("line\n", 80), 2, "a trailing newline starts a row");
        // Wide characters take two columns each.
        assert_eq!(rows(&"日".repeat(41), 80), 2);
    }
}
