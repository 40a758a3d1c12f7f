//! Writing to stdout, stderr and the log without ever panicking, and colour only on a terminal.
//!
//! Rust ignores SIGPIPE, so a write to a pipe whose reader has gone fails with `EPIPE`, and
//! `println!`/`eprintln!` turn that failure into a panic: `squidbot onboard | head -3` panicked,
//! and a gateway whose log reader died (`squidbot gateway 2>&1 | tail`, then Ctrl-C) panicked
//! inside the task that turns SIGTERM into a shutdown, so it could no longer be stopped.
//! Every line the binary prints goes through here instead. A closed stdout means nobody is
//! reading: the rest of the output is dropped and the command still finishes its work and
//! reports its own exit code. Stderr is the last resort for errors, so a failed write there is
//! ignored. The log writer itself never panics (see [`log_colour`] for its other half).

use std::ffi::OsStr;
use std::fmt;
use std::io::{self, IsTerminal, Write};

/// Writes `args` to stdout and flushes it. A reader that went away (`EPIPE`) is not an error:
/// the output is dropped. Any other failure (a full disk behind a redirect) is returned.
pub fn out(args: fmt::Arguments<'_>) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes `args` to stderr, ignoring failure: there is nowhere left to report it.
pub fn err(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// Whether log lines on stderr get ANSI colours: only when stderr is a terminal, and never when
/// `NO_COLOR` is set to anything (<https://no-color.org>). Files, pipes and journald get plain
/// text.
pub fn log_colour() -> bool {
    wants_colour(
        io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// The rule behind [`log_colour`]; an empty `NO_COLOR` counts as unset, as the convention says.
fn wants_colour(terminal: bool, no_color: Option<&OsStr>) -> bool {
    terminal && no_color.is_none_or(OsStr::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        let check = |terminal: bool, no_color: Option<&str>, expected: bool| {
            let no_color = no_color.map(OsStr::new);
            assert_eq!(
                wants_colour(terminal, no_color),
                expected,
                "{terminal} {no_color:?}"
            );
        };
        check(true, None, true);
        check(true, Some(""), true);
        check(true, Some("1"), false);
        check(false, None, false);
        check(false, Some("1"), false);
    }
}
