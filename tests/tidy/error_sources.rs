//! The rule that each error prints its cause or returns it, never both (issue 37): no
//! thiserror `#[error(...)]` message interpolates a field the same variant returns as its
//! `source` (`#[source]`, `#[from]`, or a field named `source`, which thiserror returns
//! unasked). Otherwise a reader that walks the chain (anyhow's `{:#}`, a log of causes) says
//! the cause twice; ARCHITECTURE.md ("Errors") says which of the two an error does, and why.
//! `#[error(transparent)]` prints nothing of its own, so it is always fine.

use super::{code_only, files_under, report};

/// The index of the bracket closing the one at `open` (`(`, `[` or `{`), skipping string and
/// char literals; `None` when it is never closed.
fn closing(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < chars.len() {
        match chars[i] {
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            '\'' if chars.get(i + 2) == Some(&'\'') => i += 2,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `text` split at its top-level commas (not inside brackets, generics or strings).
fn split_top(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            in_string = c != '"' || escaped;
            escaped = c == '\\' && !escaped;
            current.push(c);
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        parts.push(current);
    }
    parts
}

/// The identifiers and tuple indexes in `expr` (`path.display()` → `path`, `display`;
/// `.0` → `0`): every name a format argument may read a field by.
fn names_in(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut current = String::new();
    let mut previous = ' ';
    for c in expr.chars().chain([' ']) {
        if c.is_alphanumeric() || c == '_' {
            current.push(c);
            continue;
        }
        let is_path_segment = previous == ':';
        let is_index = current.chars().all(|d| d.is_ascii_digit());
        if !current.is_empty() && !is_path_segment && (!is_index || previous == '.') {
            names.push(std::mem::take(&mut current));
        }
        current.clear();
        previous = c;
    }
    names
}

/// The fields an `#[error(...)]` attribute's message reads: `{name}` and `{0}` in the format
/// string and the names its further arguments use, less those arguments' own names.
fn interpolated(attribute: &str) -> Vec<String> {
    let parts = split_top(attribute);
    let Some((format, args)) = parts.split_first() else {
        return Vec::new();
    };
    let mut own = Vec::new();
    let mut read = Vec::new();
    for arg in args {
        let expr = match arg.split_once('=') {
            Some((name, expr)) if !expr.starts_with('=') && names_in(name).len() == 1 => {
                own.push(name.trim().to_owned());
                expr
            }
            _ => arg.as_str(),
        };
        read.extend(names_in(expr));
    }
    let mut rest = format.as_str();
    while let Some(open) = rest.find('{') {
        if rest[open + 1..].starts_with('{') {
            rest = &rest[open + 2..];
            continue;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let inside = &rest[open + 1..open + close];
        let name = inside.split(':').next().unwrap_or("").trim();
        if !name.is_empty() && !own.iter().any(|arg| arg == name) {
            read.push(name.to_owned());
        }
        rest = &rest[open + close + 1..];
    }
    read
}

/// The fields of the variant or struct starting at `from` in `chars` that thiserror returns as
/// its source: `#[source]`, `#[from]`, or named `source`.
fn source_fields(chars: &[char], from: usize) -> Vec<String> {
    let mut i = from;
    // Past other attributes and comments, to the item's name.
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if chars.get(i) == Some(&'#') && chars.get(i + 1) == Some(&'[') {
            i = closing(chars, i + 1).map_or(chars.len(), |end| end + 1);
        } else if chars.get(i) == Some(&'/') && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else {
            break;
        }
    }
    let Some(open) = (i..chars.len()).find(|&j| matches!(chars[j], '(' | '{' | ',' | ';' | '}'))
    else {
        return Vec::new();
    };
    let head: String = chars[i..open].iter().collect();
    let is_tuple = chars[open] == '(';
    if !is_tuple && chars[open] != '{' || head.contains('=') {
        return Vec::new();
    }
    let Some(close) = closing(chars, open) else {
        return Vec::new();
    };
    let body: String = chars[open + 1..close].iter().collect();
    let body: String = body
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut sources = Vec::new();
    for (index, field) in split_top(&body).iter().enumerate() {
        let marked = field.contains("#[source]") || field.contains("#[from]");
        let mut declaration = field.as_str();
        while let Some(end) = declaration.find(']').filter(|_| declaration.contains("#[")) {
            declaration = &declaration[end + 1..];
        }
        let mut declaration = declaration.trim();
        if let Some(rest) = declaration.strip_prefix("pub(") {
            declaration = rest.split_once(')').map_or(rest, |(_, rest)| rest);
        }
        let declaration = declaration.trim().trim_start_matches("pub ").trim();
        let name = if is_tuple {
            index.to_string()
        } else {
            declaration
                .split(':')
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        };
        if marked || name == "source" {
            sources.push(name);
        }
    }
    sources
}

/// Problems: an `#[error(...)]` whose message prints a field the variant returns as source.
fn check_error_sources(rel: &str, text: &str) -> Vec<String> {
    let code = code_only(text);
    let chars: Vec<char> = text.chars().collect();
    let mut line_starts = vec![0];
    line_starts.extend(
        chars
            .iter()
            .enumerate()
            .filter(|(_, c)| **c == '\n')
            .map(|(i, _)| i + 1),
    );
    let mut problems = Vec::new();
    for (n, code_line) in code.lines().enumerate() {
        let Some(column) = code_line.find("#[error(") else {
            continue;
        };
        let column = code_line[..column].chars().count();
        let start = line_starts[n] + column;
        let open = start + "#[error".len();
        let Some(close) = closing(&chars, open) else {
            continue;
        };
        let attribute: String = chars[open + 1..close].iter().collect();
        if attribute.trim() == "transparent" {
            continue;
        }
        let read = interpolated(&attribute);
        let after = closing(&chars, start + 1).map_or(close + 1, |end| end + 1);
        for field in source_fields(&chars, after) {
            if read.contains(&field) {
                problems.push(format!(
                    "{rel}:{}: the message prints `{field}`, which is also returned as the \
                     source; print it (a plain field named otherwise) or return it, not both",
                    n + 1
                ));
            }
        }
    }
    problems
}

#[test]
fn errors_print_their_source_or_return_it_not_both() {
    let problems = files_under(&["src"])
        .iter()
        .flat_map(|(rel, text)| check_error_sources(rel, text))
        .collect();
    report(
        "an error that prints its source and returns it (ARCHITECTURE.md, Errors)",
        problems,
    );
}

#[test]
fn the_error_source_check_catches_planted_violations() {
    for planted in [
        "enum E {\n    #[error(\"read {path}: {source}\")]\n    Io { path: String, source: io::Error },\n}",
        "enum E {\n    #[error(\"failed: {0}\")]\n    X(#[from] io::Error),\n}",
        "enum E {\n    /// Doc.\n    #[error(\"failed: {0:?}\")]\n    X(#[source] io::Error),\n}",
        "enum E {\n    #[error(\"{}: {}\", path.display(), Chain(error))]\n    Y {\n        /// The file.\n        path: PathBuf,\n        #[source]\n        error: io::Error,\n    },\n}",
        "enum E {\n    #[error(\"{}\", .0.to_string())]\n    X(#[source] io::Error),\n}",
        "#[derive(Debug, thiserror::Error)]\n#[error(\"seccomp: {0}\")]\npub struct FilterError(#[from] BackendError);",
        "#[error(\n    \"cannot listen on {address}: {source}{}\",\n    hint(source)\n)]\nListen { address: SocketAddr, source: io::Error },",
    ] {
        assert_eq!(
            check_error_sources("src/x.rs", planted).len(),
            1,
            "{planted}"
        );
    }
    for fine in [
        "enum E {\n    #[error(transparent)]\n    X(#[from] io::Error),\n}",
        "enum E {\n    #[error(\"read {path}\")]\n    Io { path: String, source: io::Error },\n}",
        "enum E {\n    #[error(\"read {path}: {error}\")]\n    Io { path: String, error: io::Error },\n}",
        "enum E {\n    #[error(\"stopped after {0} rounds\")]\n    N(usize),\n    #[error(\"x\")]\n    M(#[from] io::Error),\n}",
        "enum E {\n    #[error(\"ended: {0} {stop}\", stop = STOP)]\n    R(String, #[source] io::Error),\n}",
        "enum E {\n    // #[error(\"{source}\")]\n    #[error(\"{0}\")]\n    R(String),\n}",
        "enum E {\n    #[error(\"{}\", crate::source::describe(.0))]\n    R(String),\n}",
    ] {
        assert!(check_error_sources("src/x.rs", fine).is_empty(), "{fine}");
    }
}
