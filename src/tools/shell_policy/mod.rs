//! Which shell commands run without asking the owner.
//!
//! A command line runs unasked only when every simple command in it is on the allow list
//! (`tools.shell.allow`), judged on the syntax tree a real shell parser (brush-parser, the
//! parser of the brush shell) builds, never on the string: `ls; rm -rf x` is two commands,
//! `'r'm` is `rm`, `$(rm x)` inside an argument is a command of its own. What hides a command is
//! unwrapped first (`sudo` is never unwrapped: it always asks), and anything whose meaning is
//! only known when it runs asks: a command name built from expansions (`${X}m`, `$'\x72m'`,
//! brace expansion), a path (`/bin/rm`), a variable assignment (`LD_PRELOAD=…`), a redirection
//! that writes a file, a function definition, arithmetic (bash evaluates array subscripts in it,
//! which may run commands), backquotes, invisible characters, or a line the parser cannot read.
//!
//! The judgement is deliberately one-sided: a false "ask" costs the owner one reply, a false
//! "allow" runs something they never saw. The sandbox holds either way; this decides only
//! whether the owner is asked first.

mod walk;

#[cfg(test)]
mod tests;

use std::fmt;

/// The read-only commands that run without asking when `tools.shell.allow` is not set.
///
/// Left out on purpose: `git` (a repository's own config can make `git status` or `git diff`
/// run programs: `core.fsmonitor`, `diff.external`, pagers), `sed` and `awk` (`w`, `e`,
/// `system()`), `xxd` and `tee` (write files), `less` (`!` runs a shell), `rg` (`--pre`).
pub const DEFAULT_ALLOW: &[&str] = &[
    "basename",
    "cat",
    "cd",
    "cmp",
    "column",
    "cut",
    "date",
    "df",
    "diff",
    "dirname",
    "du",
    "echo",
    "env",
    "false",
    "file",
    "find",
    "free",
    "grep",
    "head",
    "id",
    "jq",
    "ls",
    "md5sum",
    "nl",
    "od",
    "printf",
    "ps",
    "pwd",
    "readlink",
    "realpath",
    "seq",
    "sha1sum",
    "sha256sum",
    "sleep",
    "sort",
    "stat",
    "tail",
    "test",
    "tr",
    "tree",
    "true",
    "uname",
    "uniq",
    "uptime",
    "wc",
    "which",
    "whoami",
    "[",
];

/// Longest command line the parser is given, in bytes; longer ones ask.
pub const MAX_JUDGED_LEN: usize = 16 * 1024;

/// Deepest nesting of `(` the parser is given; deeper lines ask (see [`judge`]).
const MAX_PAREN_DEPTH: usize = 12;

/// Deepest nesting of `{` the parser is given (brace expansion grows faster than `(`).
const MAX_BRACE_DEPTH: usize = 8;

/// Why `text` is too long or nested too deeply to give the parser: brush-parser's time grows
/// exponentially with the depth of unclosed `(` and `{` (found by the `shell_jail` fuzz
/// target: 25 `(` took 10 s, 18 `{` two minutes). Such lines are not predicted; the owner
/// decides.
fn too_hard(text: &str) -> Result<(), String> {
    if text.len() > MAX_JUDGED_LEN {
        return Err("the command line is too long to judge; the owner decides".to_owned());
    }
    if depth(text, '(', ')') > MAX_PAREN_DEPTH || depth(text, '{', '}') > MAX_BRACE_DEPTH {
        return Err("the command is nested too deeply to judge; the owner decides".to_owned());
    }
    // brush-parser 0.4 panics on numbers too large for its integers: a file descriptor
    // (`99999999999>x`) and a brace sequence bound (`{1..99999999999999999999}`), both found
    // by the fuzz target. No real descriptor has ten digits; no number the judge needs has 19.
    let mut digits = 0usize;
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            digits += 1;
            continue;
        }
        if digits >= 19 || (digits >= 10 && matches!(c, '<' | '>')) {
            return Err("it holds a number too large to judge; the owner decides".to_owned());
        }
        digits = 0;
    }
    Ok(())
}

/// The deepest nesting of `open`/`close` in `text`, quotes ignored (an over-estimate only
/// makes a line ask).
fn depth(text: &str, open: char, close: char) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in text.chars() {
        if c == open {
            depth += 1;
            deepest = deepest.max(depth);
        } else if c == close {
            depth = depth.saturating_sub(1);
        }
    }
    deepest
}

/// The verdict on one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Every simple command in it is allowed: it runs without asking.
    Allowed,
    /// The owner must approve it first; the reason names what was not allowed.
    Ask(String),
}

impl Judgement {
    /// Whether the command needs the owner's approval.
    pub fn needs_approval(&self) -> bool {
        matches!(self, Self::Ask(_))
    }
}

/// One entry of the allow list: a command name and the arguments it must start with
/// (`git status` allows `git status -s`, not `git push`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: String,
    leading: Vec<String>,
}

/// The commands that run without asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<Entry>,
}

impl Default for AllowList {
    fn default() -> Self {
        Self::new(DEFAULT_ALLOW.iter().copied())
    }
}

impl AllowList {
    /// An allow list of `entries` (`ls`, `git status`); empty entries are ignored.
    pub fn new<'a>(entries: impl IntoIterator<Item = &'a str>) -> Self {
        let entries = entries
            .into_iter()
            .filter_map(|entry| {
                let mut words = entry.split_whitespace().map(str::to_owned);
                let name = words.next()?;
                Some(Entry {
                    name,
                    leading: words.collect(),
                })
            })
            .collect();
        Self { entries }
    }

    /// Whether `argv` (a command name and its literal arguments) is allowed.
    fn allows(&self, argv: &[String]) -> bool {
        let Some((name, args)) = argv.split_first() else {
            return false;
        };
        self.entries.iter().any(|entry| {
            entry.name == *name
                && entry.leading.len() <= args.len()
                && entry
                    .leading
                    .iter()
                    .zip(args)
                    .all(|(want, got)| want == got)
        })
    }

    /// Whether the list allows the bare command `name` with any arguments.
    fn allows_name(&self, name: &str) -> bool {
        self.entries
            .iter()
            .any(|entry| entry.name == name && entry.leading.is_empty())
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, entry) in self.entries.iter().enumerate() {
            if position > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&entry.name)?;
            for word in &entry.leading {
                write!(f, " {word}")?;
            }
        }
        Ok(())
    }
}

/// Judges `command` (a `bash -c` command line: the shell whose grammar brush-parser reads)
/// against `allow`.
pub fn judge(command: &str, allow: &AllowList) -> Judgement {
    // Where brush-parser's reading was found to differ from bash's (comments inside `$( )`,
    // here-documents and their quoted tags), nothing is predicted: the owner is asked.
    if command.contains("<<") {
        return Judgement::Ask("here-documents are not judged; the owner decides".to_owned());
    }
    if command.contains('#') && (command.contains("$(") || command.contains('`')) {
        return Judgement::Ask(
            "a `#` beside command substitution is not judged; the owner decides".to_owned(),
        );
    }
    // The parser is another crate's: should it panic on some input, the line asks instead of
    // the panic ending the tool call.
    let judged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        walk::Judge::new(allow).line(command, 0)
    }));
    match judged {
        Ok(Ok(())) => Judgement::Allowed,
        Ok(Err(reason)) => Judgement::Ask(reason),
        Err(_) => Judgement::Ask("the shell parser failed on it; the owner decides".to_owned()),
    }
}
