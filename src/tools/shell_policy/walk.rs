//! The walk over a parsed command line: every simple command, unwrapped, against the allow list.
//!
//! Each check returns `Err(reason)` at the first thing that needs the owner, so the reason the
//! owner reads names it.

use brush_parser::ast::{
    AndOr, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Pipeline, Program, SimpleCommand,
};
use brush_parser::word::{self, Parameter, ParameterExpr, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

use super::AllowList;

/// Nested command lines (`sh -c`, `eval`, `$(…)`) judged at most this deep.
const MAX_DEPTH: usize = 8;

/// Why a command must be asked for.
type Reason = String;

/// Redirection targets that writing to changes nothing.
const HARMLESS_TARGETS: [&str; 3] = ["/dev/null", "/dev/stdout", "/dev/stderr"];

/// One judgement in progress.
pub(super) struct Judge<'a> {
    allow: &'a AllowList,
    options: ParserOptions,
}

/// A word as far as it is known before the command runs.
enum Value {
    /// Only literal text (quotes removed).
    Literal(String),
    /// Text that depends on expansions (variables, globs, tildes): harmless as an argument,
    /// unknown as a command name.
    Dynamic,
}

impl<'a> Judge<'a> {
    pub(super) fn new(allow: &'a AllowList) -> Self {
        Self {
            allow,
            options: ParserOptions::default(),
        }
    }

    /// Judges a whole command line.
    pub(super) fn line(&self, text: &str, depth: usize) -> Result<(), Reason> {
        if depth > MAX_DEPTH {
            return Err("commands nested too deeply".to_owned());
        }
        if let Some(c) = text.chars().find(|&c| invisible(c)) {
            return Err(format!(
                "it contains an invisible or control character (U+{:04X})",
                u32::from(c)
            ));
        }
        // Every text parsed, the whole line and an unwrapped `sh -c` argument alike, is bounded
        // first (see `too_hard`).
        super::too_hard(text)?;
        let mut parser = Parser::new(std::io::Cursor::new(text.as_bytes()), &self.options);
        let program: Program = parser
            .parse_program()
            .map_err(|error| format!("the shell parser could not read it ({error})"))?;
        for complete in &program.complete_commands {
            self.list(complete, depth)?;
        }
        Ok(())
    }

    fn list(&self, list: &CompoundList, depth: usize) -> Result<(), Reason> {
        for item in &list.0 {
            let and_or = &item.0;
            self.pipeline(&and_or.first, depth)?;
            for next in &and_or.additional {
                let (AndOr::And(pipeline) | AndOr::Or(pipeline)) = next;
                self.pipeline(pipeline, depth)?;
            }
        }
        Ok(())
    }

    fn pipeline(&self, pipeline: &Pipeline, depth: usize) -> Result<(), Reason> {
        for command in &pipeline.seq {
            self.command(command, depth)?;
        }
        Ok(())
    }

    fn command(&self, command: &Command, depth: usize) -> Result<(), Reason> {
        match command {
            Command::Simple(simple) => self.simple(simple, depth),
            Command::Compound(compound, redirects) => {
                for redirect in redirects.iter().flat_map(|list| &list.0) {
                    self.redirect(redirect, depth)?;
                }
                self.compound(compound, depth)
            }
            Command::Function(_) => Err("it defines a shell function".to_owned()),
            Command::ExtendedTest(..) => Err("it uses a [[ … ]] test".to_owned()),
        }
    }

    fn compound(&self, compound: &CompoundCommand, depth: usize) -> Result<(), Reason> {
        match compound {
            CompoundCommand::BraceGroup(group) => self.list(&group.list, depth),
            CompoundCommand::Subshell(subshell) => self.list(&subshell.list, depth),
            CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.word(&value.value, depth)?;
                }
                self.list(&clause.body.list, depth)
            }
            CompoundCommand::CaseClause(clause) => {
                self.word(&clause.value.value, depth)?;
                for case in &clause.cases {
                    for pattern in &case.patterns {
                        self.word(&pattern.value, depth)?;
                    }
                    if let Some(body) = &case.cmd {
                        self.list(body, depth)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition, depth)?;
                self.list(&clause.then, depth)?;
                for branch in clause.elses.iter().flatten() {
                    if let Some(condition) = &branch.condition {
                        self.list(condition, depth)?;
                    }
                    self.list(&branch.body, depth)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
                self.list(&clause.0, depth)?;
                self.list(&clause.1.list, depth)
            }
            CompoundCommand::Arithmetic(_) | CompoundCommand::ArithmeticForClause(_) => {
                Err("it uses shell arithmetic".to_owned())
            }
            CompoundCommand::Coprocess(_) => Err("it starts a coprocess".to_owned()),
        }
    }

    fn simple(&self, simple: &SimpleCommand, depth: usize) -> Result<(), Reason> {
        let items = simple
            .prefix
            .iter()
            .flat_map(|prefix| &prefix.0)
            .chain(simple.suffix.iter().flat_map(|suffix| &suffix.0));
        let mut argv: Vec<Value> = Vec::new();
        if let Some(name) = &simple.word_or_name {
            argv.push(self.word(&name.value, depth)?);
        }
        for item in items {
            match item {
                CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
                    self.redirect(redirect, depth)?
                }
                CommandPrefixOrSuffixItem::Word(word) => argv.push(self.word(&word.value, depth)?),
                CommandPrefixOrSuffixItem::AssignmentWord(..) => {
                    return Err("it sets a shell variable".to_owned());
                }
                CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                    return Err("it uses process substitution".to_owned());
                }
            }
        }
        if argv.is_empty() {
            // Only redirections (`> file` truncates; judged above) or nothing at all.
            return Ok(());
        }
        self.argv(&argv, depth)
    }

    /// Judges one command's words after expansion-free reading: unwraps what runs another
    /// command, then checks the allow list and the arguments that make an allowed command
    /// write or run something.
    fn argv(&self, argv: &[Value], depth: usize) -> Result<(), Reason> {
        let Some((Value::Literal(name), args)) = argv.split_first() else {
            return Err("its command name is only known when it runs (an expansion)".to_owned());
        };
        if !plain_name(name) {
            return Err(format!("`{name}` is not a plain command name"));
        }
        match name.as_str() {
            "sudo" | "doas" | "su" | "pkexec" => return Err(format!("it runs `{name}`")),
            "." | "source" => return Err("it sources a script".to_owned()),
            "env" => return self.wrapped(name, args, env_skip(args)?, depth),
            "nice" => return self.wrapped(name, args, skip_options(args, &["-n"]), depth),
            "nohup" | "builtin" => return self.wrapped(name, args, Some(0), depth),
            "stdbuf" => return self.wrapped(name, args, skip_options(args, &[]), depth),
            "timeout" => {
                // Options, then the duration, then the command.
                let skip = skip_options(args, &["-s", "-k", "--signal", "--kill-after"]);
                return self.wrapped(name, args, skip.map(|s| s + 1), depth);
            }
            "exec" => return self.wrapped(name, args, skip_options(args, &["-a"]), depth),
            "command" => {
                if args
                    .iter()
                    .any(|a| literal(a).is_some_and(|a| a == "-v" || a == "-V"))
                {
                    return Ok(());
                }
                return self.wrapped(name, args, skip_options(args, &[]), depth);
            }
            "xargs" => return self.xargs(args, depth),
            "sh" | "bash" | "dash" | "zsh" | "ksh" | "busybox" => {
                return self.shell(name, args, depth);
            }
            "eval" => {
                let words: Option<Vec<&str>> = args.iter().map(literal).collect();
                let Some(words) = words else {
                    return Err("it evaluates text only known when it runs".to_owned());
                };
                return self.line(&words.join(" "), depth + 1);
            }
            _ => {}
        }
        let literal_args: Option<Vec<String>> =
            args.iter().map(|a| literal(a).map(str::to_owned)).collect();
        let mut full = vec![name.clone()];
        full.extend(literal_args.clone().unwrap_or_default());
        let allowed = if literal_args.is_some() {
            self.allow.allows(&full)
        } else {
            // Expanded arguments cannot match a subcommand entry; only a bare entry allows them.
            self.allow.allows_name(name)
        };
        if !allowed {
            return Err(format!("`{name}` is not on the allow list"));
        }
        writes_or_runs(name, args)
    }

    /// A wrapper (`env`, `nice`, …) whose command starts after `skip` arguments; the wrapper
    /// alone is judged as itself.
    fn wrapped(
        &self,
        name: &str,
        args: &[Value],
        skip: Option<usize>,
        depth: usize,
    ) -> Result<(), Reason> {
        let Some(skip) = skip else {
            return Err(format!(
                "`{name}` is used with options that are not understood"
            ));
        };
        match args.get(skip..) {
            Some(rest) if !rest.is_empty() => self.argv(rest, depth),
            _ if self.allow.allows_name(name) => Ok(()),
            _ => Err(format!("`{name}` is not on the allow list")),
        }
    }

    /// `xargs [options] command args…`: the command also gets arguments from its input, which
    /// nobody has seen, so only a command no argument can make write or run anything passes.
    fn xargs(&self, args: &[Value], depth: usize) -> Result<(), Reason> {
        let with_value = [
            "-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a", "-e", "-l", "-i",
        ];
        let Some(skip) = skip_options(args, &with_value) else {
            return Err("`xargs` is used with options that are not understood".to_owned());
        };
        let rest = &args[skip.min(args.len())..];
        let Some(Value::Literal(name)) = rest.first() else {
            return if rest.is_empty() && self.allow.allows_name("echo") {
                Ok(())
            } else {
                Err("`xargs` runs a command only known when it runs".to_owned())
            };
        };
        if GUARDED.contains(&name.as_str()) {
            return Err(format!("`xargs` gives `{name}` arguments nobody has seen"));
        }
        self.argv(rest, depth)
    }

    /// `sh -c 'line'` is judged as `line`; a shell reading a script or its input is asked for.
    fn shell(&self, name: &str, args: &[Value], depth: usize) -> Result<(), Reason> {
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let Some(arg) = literal(arg) else { break };
            if arg == "-c" {
                let Some(line) = rest.next().and_then(literal) else {
                    return Err(format!("`{name} -c` runs text only known when it runs"));
                };
                return self.line(line, depth + 1);
            }
            // Flags such as -e or -x change nothing about what runs; anything else (a script
            // file, -s, -i) is a shell reading commands nobody has seen.
            if !(arg.len() == 2 && arg.starts_with('-') && "euxv".contains(&arg[1..])) {
                break;
            }
        }
        Err(format!(
            "it runs `{name}` on commands that are not in the line"
        ))
    }

    fn redirect(&self, redirect: &IoRedirect, depth: usize) -> Result<(), Reason> {
        match redirect {
            IoRedirect::File(_, kind, target) => match (kind, target) {
                (_, IoFileRedirectTarget::ProcessSubstitution(..)) => {
                    Err("it uses process substitution".to_owned())
                }
                (IoFileRedirectKind::Read, IoFileRedirectTarget::Filename(word)) => {
                    self.word(&word.value, depth).map(drop)
                }
                (
                    IoFileRedirectKind::DuplicateInput | IoFileRedirectKind::DuplicateOutput,
                    IoFileRedirectTarget::Fd(_),
                ) => Ok(()),
                (
                    _,
                    IoFileRedirectTarget::Duplicate(word) | IoFileRedirectTarget::Filename(word),
                ) => self.harmless_target(&word.value, depth),
                (_, IoFileRedirectTarget::Fd(_)) => Ok(()),
            },
            IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    let pieces = word::parse_heredoc(&doc.doc.value, &self.options)
                        .map_err(|error| format!("the shell parser could not read it ({error})"))?;
                    self.pieces(&pieces, depth)?;
                }
                Ok(())
            }
            IoRedirect::HereString(_, word) => self.word(&word.value, depth).map(drop),
            IoRedirect::OutputAndError(word, _) => self.harmless_target(&word.value, depth),
        }
    }

    /// A redirection that writes: allowed only into the void (or a descriptor: `2>&1`).
    fn harmless_target(&self, raw: &str, depth: usize) -> Result<(), Reason> {
        match self.word(raw, depth)? {
            Value::Literal(target)
                if HARMLESS_TARGETS.contains(&target.as_str())
                    || target == "-"
                    || (!target.is_empty() && target.bytes().all(|b| b.is_ascii_digit())) =>
            {
                Ok(())
            }
            Value::Literal(target) => Err(format!("it writes to the file `{target}`")),
            Value::Dynamic => Err("it writes to a file only known when it runs".to_owned()),
        }
    }

    /// Reads a word: judges the commands substituted into it and returns its literal text if
    /// it has no expansions.
    fn word(&self, raw: &str, depth: usize) -> Result<Value, Reason> {
        let pieces = word::parse(raw, &self.options)
            .map_err(|error| format!("the shell parser could not read a word ({error})"))?;
        let value = self.pieces(&pieces, depth)?;
        if raw.contains('{') && has_brace_expansion(raw, &self.options) {
            // Harmless as an argument (`echo {a,b}`); as a command name it hides the command.
            return Ok(Value::Dynamic);
        }
        Ok(value)
    }

    fn pieces(&self, pieces: &[WordPieceWithSource], depth: usize) -> Result<Value, Reason> {
        let mut text = String::new();
        let mut dynamic = false;
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(part) => {
                    if part.contains(['*', '?', '[']) {
                        dynamic = true;
                    }
                    text.push_str(part);
                }
                WordPiece::SingleQuotedText(part) => text.push_str(part),
                WordPiece::EscapeSequence(part) => text.push_str(part.trim_start_matches('\\')),
                WordPiece::AnsiCQuotedText(_) | WordPiece::TildeExpansion(_) => dynamic = true,
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    match self.pieces(inner, depth)? {
                        Value::Literal(part) => text.push_str(&part),
                        Value::Dynamic => dynamic = true,
                    }
                }
                WordPiece::ParameterExpansion(expr) => {
                    if !plain_parameter(expr) {
                        return Err("it uses a parameter expansion with an operator".to_owned());
                    }
                    dynamic = true;
                }
                WordPiece::CommandSubstitution(inner) => {
                    self.line(inner, depth + 1)?;
                    dynamic = true;
                }
                WordPiece::BackquotedCommandSubstitution(_) => {
                    return Err("it uses a backquoted command substitution".to_owned());
                }
                WordPiece::ArithmeticExpression(_) => {
                    return Err("it uses shell arithmetic".to_owned());
                }
            }
        }
        Ok(if dynamic {
            Value::Dynamic
        } else {
            Value::Literal(text)
        })
    }
}

/// Allowed commands whose arguments can make them write files or run programs; they are
/// checked argument by argument in [`writes_or_runs`], and `xargs` may not feed them.
const GUARDED: [&str; 6] = ["find", "sort", "uniq", "tree", "file", "date"];

/// Refuses the arguments that turn an allowed, read-only command into one that writes or runs.
fn writes_or_runs(name: &str, args: &[Value]) -> Result<(), Reason> {
    let literal_args: Vec<&str> = args.iter().filter_map(literal).collect();
    let dynamic = literal_args.len() != args.len();
    let flag = |flags: &[&str]| {
        literal_args.iter().find(|arg| {
            flags.iter().any(|flag| {
                **arg == *flag || (flag.starts_with("--") && arg.starts_with(&format!("{flag}=")))
            })
        })
    };
    let refuse = |arg: &str| Err(format!("`{name} {arg}` writes files or runs programs"));
    match name {
        "find" => {
            let risky = [
                "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
                "-fls",
            ];
            if let Some(arg) = flag(&risky) {
                return refuse(arg);
            }
        }
        "sort" => {
            if let Some(arg) = literal_args.iter().find(|arg| {
                arg.starts_with("-o")
                    || arg.starts_with("--output")
                    || arg.starts_with("--compress-program")
            }) {
                return refuse(arg);
            }
        }
        "tree" => {
            if let Some(arg) = literal_args.iter().find(|arg| arg.starts_with("-o")) {
                return refuse(arg);
            }
        }
        "file" => {
            if let Some(arg) = flag(&["-C", "--compile"]) {
                return refuse(arg);
            }
        }
        "date" => {
            if let Some(arg) = literal_args
                .iter()
                .find(|arg| arg.starts_with("-s") || arg.starts_with("--set"))
            {
                return refuse(arg);
            }
        }
        "uniq" => {
            // `uniq IN OUT` writes OUT.
            let operands = literal_args
                .iter()
                .filter(|arg| !arg.starts_with('-'))
                .count();
            if operands > 1 || dynamic {
                return Err("`uniq` with two files writes the second".to_owned());
            }
        }
        _ => {}
    }
    if dynamic && GUARDED.contains(&name) {
        return Err(format!("`{name}` gets arguments only known when it runs"));
    }
    Ok(())
}

/// How many arguments of `env` come before its command: options and no assignments.
fn env_skip(args: &[Value]) -> Result<Option<usize>, Reason> {
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        let Some(arg) = literal(arg) else {
            return Ok(None);
        };
        match arg {
            "-i" | "--ignore-environment" | "-0" | "--null" | "-" => index += 1,
            "-u" | "--unset" => index += 2,
            "--" => return Ok(Some(index + 1)),
            _ if arg.starts_with("--unset=") => index += 1,
            _ if arg.starts_with('-') => return Ok(None),
            _ if arg.contains('=') => return Err("it sets an environment variable".to_owned()),
            _ => return Ok(Some(index)),
        }
    }
    Ok(Some(index))
}

/// The index of the first argument after the options of a wrapper; `with_value` lists the
/// options that take the next argument. `None` when an option is not literal.
fn skip_options(args: &[Value], with_value: &[&str]) -> Option<usize> {
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        let arg = literal(arg)?;
        if arg == "--" {
            return Some(index + 1);
        }
        if !arg.starts_with('-') || arg == "-" {
            return Some(index);
        }
        index += if with_value.contains(&arg) { 2 } else { 1 };
    }
    Some(index)
}

fn literal(value: &Value) -> Option<&str> {
    match value {
        Value::Literal(text) => Some(text),
        Value::Dynamic => None,
    }
}

/// A command name that is exactly what runs: no path, no quoting tricks left over.
fn plain_name(name: &str) -> bool {
    name == "["
        || (!name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'+')))
}

/// `$NAME`, `${NAME}`, `$1`, `$?`: expansions that only read a value.
fn plain_parameter(expr: &ParameterExpr) -> bool {
    matches!(
        expr,
        ParameterExpr::Parameter {
            parameter: Parameter::Named(_) | Parameter::Positional(_) | Parameter::Special(_),
            indirect: false,
        }
    )
}

fn has_brace_expansion(raw: &str, options: &ParserOptions) -> bool {
    match word::parse_brace_expansions(raw, options) {
        Ok(Some(pieces)) => pieces
            .iter()
            .any(|piece| !matches!(piece, word::BraceExpressionOrText::Text(_))),
        Ok(None) => false,
        // Unreadable: treat as an expansion, which is never trusted as a name.
        Err(_) => true,
    }
}

/// Characters a person cannot see in the approval message or the log: controls (but tab and
/// newline), zero-width and direction marks, the soft hyphen, the byte-order mark.
fn invisible(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
            | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
            | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}' | '\u{E0000}'..='\u{E0FFF}')
}
