//! Tidy: keeps the code-base rules true on every `cargo test`.
//!
//! - Every Rust file (`src/`, `tests/`, `benches/`, `examples/`, `fuzz/`, `scripts/`, `build.rs`)
//!   starts with a `//!` doc and stays under 800 lines.
//! - `src/core` imports no adapter, no config and no I/O crate, however the `use` is written
//!   (grouped, nested, over several lines) and wherever a path names one.
//! - Library, binary and example code has no `unwrap()`/`expect(` outside test code: the whole
//!   file is read, `#[cfg(test)]` items are skipped wherever they are, and comments and string
//!   literals are blanked first, so `"http://…"` hides nothing and a comment finds nothing.
//!   Fuzz targets are exempt: a panic is how they report a finding.
//! - `anyhow` appears only at the binary's edge (`src/main.rs`, `src/cli/`).
//! - `src/` prints nothing with `println!`/`eprintln!`/`print!`/`eprint!` outside test code:
//!   they panic on a closed pipe, so output goes through `squidbot::console`.
//! - No two files of `src/` import each other, directly or round a loop (a `mod.rs` naming its
//!   own children aside): a cycle means two modules are one, or a type lives on the wrong side.
//! - ARCHITECTURE.md names every module and every path it names exists.
//! - Sizes (`tidy/size.rs`): core's production code, production functions and the agent loop
//!   stay under their limits.
//! - Errors (`tidy/error_sources.rs`): no thiserror message prints a field the error also
//!   returns as its source.
//!
//! Each check is a function from file text to problems, and `the_checks_catch_planted_violations`
//! feeds each one a violation it must report, so a rule cannot be broken and still pass.
//! Doc comments on public items are enforced by the compiler (`missing_docs` in Cargo.toml).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

#[path = "tidy/channel_names.rs"]
mod channel_names;
// Each error prints its cause or returns it, never both (issue 37).
#[path = "tidy/error_sources.rs"]
mod error_sources;
// The size rules of issue 37 (core's size, function length, the agent loop).
#[path = "tidy/size.rs"]
mod size;

const MAX_LINES: usize = 800;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn files_under(dirs: &[&str]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for dir in dirs {
        rust_files(&root().join(dir), &mut files);
    }
    files
        .into_iter()
        .map(|path| (relative(&path), fs::read_to_string(&path).unwrap()))
        .collect()
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

/// `text` with every comment and the contents of every string and char literal replaced by
/// spaces (newlines kept), so rules see only code, line for line.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !chars
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string r"…" or r#"…"#: ends at a quote followed by as many #.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            i += 2 + hashes;
            while i < chars.len() {
                if chars[i] == '"'
                    && chars[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push('"');
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if let Some(&inner) = chars.get(i) {
                    out.push(blank(inner));
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a): only the former closes.
            let close = if next == Some('\\') {
                chars[i + 2..]
                    .iter()
                    .position(|&q| q == '\'')
                    .map(|p| i + 2 + p)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push('\'');
                    out.extend(std::iter::repeat_n(' ', end - i - 1));
                    out.push('\'');
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` (from [`code_only`]) with every `#[cfg(test)]` item blanked: the item after the
/// attribute runs to its matching `}` (a module or function) or to its `;`.
fn without_test_items(code: &str) -> String {
    let mut out: Vec<char> = code.chars().collect();
    let text: String = out.iter().collect();
    let mut from = 0;
    while let Some(found) = text[from..].find("#[cfg(test)]") {
        let start = from + found;
        let start_char = text[..start].chars().count();
        let mut i = start_char;
        let mut depth = 0usize;
        while i < out.len() {
            match out[i] {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            i += 1;
        }
        let end = i.min(out.len().saturating_sub(1));
        for c in &mut out[start_char..=end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        from = start + "#[cfg(test)]".len();
    }
    out.into_iter().collect()
}

/// Problems: no `//!` at the top, or too long.
fn check_doc_and_length(rel: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if !text.starts_with("//!") {
        problems.push(format!("{rel}: does not start with a //! doc comment"));
    }
    let lines = text.lines().count();
    if lines > MAX_LINES {
        problems.push(format!("{rel}: {lines} lines (limit {MAX_LINES})"));
    }
    problems
}

/// Problems: `unwrap()` or `expect(` in code that is not test code.
fn check_unwrap(rel: &str, text: &str) -> Vec<String> {
    lines_with(rel, text, &[".unwrap()", ".expect("])
}

/// Problems: the printing macros that panic on a closed pipe, in code that is not test code.
fn check_printing(rel: &str, text: &str) -> Vec<String> {
    lines_with(rel, text, &["println!", "print!", "eprintln!", "eprint!"])
}

/// The lines of code (not comments, strings or test items) containing any of `needles`.
fn lines_with(rel: &str, text: &str, needles: &[&str]) -> Vec<String> {
    let code = without_test_items(&code_only(text));
    code.lines()
        .enumerate()
        .filter(|(_, line)| needles.iter().any(|needle| line.contains(needle)))
        .map(|(n, _)| {
            format!(
                "{rel}:{}: {}",
                n + 1,
                text.lines().nth(n).unwrap_or("").trim()
            )
        })
        .collect()
}

/// Every path a `use` tree names: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn use_paths(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let inner = tree[open + 1..]
        .strip_suffix('}')
        .unwrap_or(&tree[open + 1..]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.is_empty())
        .flat_map(|part| use_paths(&format!("{prefix}{part}")))
        .collect()
}

/// What `src/core` may not name: adapters, the config, the binary's crate path, I/O crates.
const CORE_FORBIDDEN: &[&str] = &[
    "crate::accounting",
    "crate::approval",
    "crate::channels",
    "crate::tools",
    "crate::llm",
    "crate::storage",
    "crate::skills",
    "crate::config",
    "crate::gateway",
    "crate::cli",
    "squidbot",
    "reqwest",
    "axum",
    "matrix_sdk",
    "async_imap",
    "lettre",
    "hyper",
    "rusqlite",
];

/// Every `use` in `code` (already blanked by [`code_only`]), which may span lines, as the
/// 1-based line it starts on and each path it names.
fn use_statements(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut rest = code;
    let mut offset = 0;
    while let Some(at) = rest.find("use ") {
        let start = offset + at;
        let before = code[..start].chars().next_back();
        let is_keyword = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let end = code[start..].find(';').map_or(code.len(), |e| start + e);
        if is_keyword {
            let line = code[..start].lines().count().max(1);
            for path in use_paths(&code[start + 4..end]) {
                found.push((line, path.trim_start_matches("::").to_owned()));
            }
        }
        offset = end.max(start + 4);
        rest = &code[offset..];
    }
    found
}

/// Problems: a `src/core` file names an adapter or an I/O crate, in a `use` (grouped or not) or
/// in a path anywhere in its code.
fn check_core_imports(rel: &str, text: &str) -> Vec<String> {
    let code = code_only(text);
    let forbidden = |path: &str| {
        CORE_FORBIDDEN
            .iter()
            .find(|word| path == **word || path.starts_with(&format!("{word}::")))
    };
    let mut problems = Vec::new();
    for (line, path) in use_statements(&code) {
        if let Some(word) = forbidden(&path) {
            problems.push(format!("{rel}:{line}: core uses {word} ({path})"));
        }
    }
    // Paths written inline (`crate::storage::JsonlStore::new(…)`, `reqwest::Client`).
    for (n, line) in code.lines().enumerate() {
        for word in CORE_FORBIDDEN {
            let named = line.match_indices(word).any(|(i, _)| {
                let before = line[..i].chars().next_back();
                let after = &line[i + word.len()..];
                before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    && after.starts_with("::")
            });
            if named && !line.trim_start().starts_with("use ") {
                problems.push(format!("{rel}:{}: core names {word}", n + 1));
            }
        }
    }
    problems
}

/// The module a file under `src/` is, as `::`-joined segments: `src/core/ports/tool.rs` →
/// `core::ports::tool`, `src/config/mod.rs` → `config`, `src/lib.rs` and `src/main.rs` → ``
/// (the library's and the binary's modules have distinct names, so one namespace holds both).
fn module_of(rel: &str) -> String {
    let path = rel.trim_start_matches("src/").trim_end_matches(".rs");
    let path = path.trim_end_matches("/mod");
    if path == "lib" || path == "main" {
        return String::new();
    }
    path.replace('/', "::")
}

/// The files `rel` imports through `crate::`, `squidbot::`, `super::` or `self::` paths outside
/// its test code: for each path, the file of its longest prefix that is a module.
fn imported_files(rel: &str, text: &str, files: &BTreeMap<String, String>) -> BTreeSet<String> {
    let here_path = module_of(rel);
    let here: Vec<&str> = here_path.split("::").filter(|s| !s.is_empty()).collect();
    let mut imported = BTreeSet::new();
    for (_, path) in use_statements(&without_test_items(&code_only(text))) {
        let mut segments = path.split("::").peekable();
        let mut module: Vec<&str> = match segments.next() {
            Some("crate" | "squidbot") => Vec::new(),
            Some("self") => here.clone(),
            Some("super") => {
                let mut up = here.clone();
                up.pop();
                while segments.next_if_eq(&"super").is_some() {
                    up.pop();
                }
                up
            }
            _ => continue,
        };
        let mut target = None;
        for segment in segments {
            module.push(segment);
            if let Some(file) = files.get(&module.join("::")) {
                target = Some(file.clone());
            }
        }
        if let Some(file) = target.filter(|file| file != rel) {
            imported.insert(file);
        }
    }
    imported
}

/// Problems: files that import each other, directly or round a loop. A `mod.rs` naming its
/// own submodules does not count: declaring and re-exporting children is what it is for.
fn check_cycles(sources: &[(String, String)]) -> Vec<String> {
    let files: BTreeMap<String, String> = sources
        .iter()
        .map(|(rel, _)| (module_of(rel), rel.clone()))
        .collect();
    let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in sources {
        let module = module_of(rel);
        let parent_of = |file: &String| {
            let target = module_of(file);
            (rel.ends_with("/mod.rs") || rel.ends_with("lib.rs") || rel.ends_with("main.rs"))
                && (module.is_empty() || target.starts_with(&format!("{module}::")))
        };
        let imports = imported_files(rel, text, &files);
        edges.insert(rel, imports.into_iter().filter(|f| !parent_of(f)).collect());
    }
    let mut cycles = BTreeSet::new();
    for (from, targets) in &edges {
        for to in targets {
            // Breadth-first from `to` back to `from`, remembering each file's predecessor.
            let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([to.as_str()]);
            while let Some(file) = queue.pop_front() {
                if file == *from {
                    let mut cycle = vec![file];
                    let mut at = file;
                    while at != to.as_str() {
                        at = previous[at];
                        cycle.push(at);
                    }
                    cycle.reverse();
                    let start = cycle
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, f)| **f)
                        .map(|(i, _)| i);
                    cycle.rotate_left(start.unwrap_or(0));
                    let first = cycle[0];
                    cycle.push(first);
                    cycles.insert(cycle.join(" → "));
                    break;
                }
                for next in edges.get(file).into_iter().flatten() {
                    if next != to && !previous.contains_key(next.as_str()) {
                        previous.insert(next.as_str(), file);
                        queue.push_back(next.as_str());
                    }
                }
            }
        }
    }
    cycles
        .into_iter()
        .map(|cycle| format!("import cycle: {cycle}"))
        .collect()
}

/// Problems: `anyhow` used outside the binary's edge.
fn check_anyhow(rel: &str, text: &str) -> Vec<String> {
    if rel == "src/main.rs" || rel.starts_with("src/cli/") {
        return Vec::new();
    }
    code_only(text)
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            line.match_indices("anyhow").any(|(i, _)| {
                let before = line[..i].chars().next_back();
                before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
            })
        })
        .map(|(n, _)| format!("{rel}:{}: anyhow outside src/main.rs and src/cli/", n + 1))
        .collect()
}

/// Whether `rel` is a test file inside `src/` (a `tests.rs` or a `tests/` directory).
fn is_test_file(rel: &str) -> bool {
    rel.ends_with("/tests.rs") || rel.contains("/tests/")
}

fn report(what: &str, problems: Vec<String>) {
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

#[test]
fn every_file_is_documented_and_short() {
    let mut files = files_under(&["src", "tests", "benches", "examples", "fuzz", "scripts"]);
    files.push((
        "build.rs".into(),
        fs::read_to_string(root().join("build.rs")).unwrap(),
    ));
    let problems = files
        .iter()
        .flat_map(|(rel, text)| check_doc_and_length(rel, text))
        .collect();
    report("tidy problems", problems);
}

#[test]
fn core_imports_no_adapter() {
    let problems = files_under(&["src/core"])
        .iter()
        .flat_map(|(rel, text)| check_core_imports(rel, text))
        .collect();
    report("core must not depend on adapters", problems);
}

#[test]
fn no_unwrap_outside_tests() {
    let problems = files_under(&["src", "examples"])
        .iter()
        .filter(|(rel, _)| !is_test_file(rel))
        .flat_map(|(rel, text)| check_unwrap(rel, text))
        .collect();
    report("unwrap/expect outside tests", problems);
}

#[test]
fn no_printing_that_panics_on_a_closed_pipe() {
    let problems = files_under(&["src"])
        .iter()
        .filter(|(rel, _)| !is_test_file(rel))
        .flat_map(|(rel, text)| check_printing(rel, text))
        .collect();
    report(
        "println!/eprintln! panic on a closed pipe; use squidbot::console",
        problems,
    );
}

#[test]
fn no_import_cycles_between_files() {
    let sources: Vec<(String, String)> = files_under(&["src"])
        .into_iter()
        .filter(|(rel, _)| !is_test_file(rel))
        .collect();
    report("files that import each other", check_cycles(&sources));
}

#[test]
fn anyhow_only_at_the_binary_edge() {
    let problems = files_under(&["src"])
        .iter()
        .flat_map(|(rel, text)| check_anyhow(rel, text))
        .collect();
    report("anyhow belongs to the binary", problems);
}

#[test]
fn the_checks_catch_planted_violations() {
    // Production code after a test module, and code after a URL in a string.
    let after_tests = "//! x\nfn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() { x.unwrap(); }\n}\nfn b() { y.unwrap(); }\n";
    assert_eq!(
        check_unwrap("f.rs", after_tests).len(),
        1,
        "{:?}",
        check_unwrap("f.rs", after_tests)
    );
    assert!(check_unwrap("f.rs", after_tests)[0].starts_with("f.rs:7:"));
    let url = "let u = \"http://example.org\"; z.expect(\"no\");\n";
    assert_eq!(check_unwrap("f.rs", url).len(), 1);
    let raw = "let u = r#\"a \" // b\"#; z.unwrap();\n";
    assert_eq!(check_unwrap("f.rs", raw).len(), 1);
    let lifetimes = "fn f<'a>(x: &'a str) -> char { let c = '\"'; x.unwrap() }\n";
    assert_eq!(check_unwrap("f.rs", lifetimes).len(), 1);
    // Not code: comments, doc comments, strings; a test function.
    let quiet = "// x.unwrap()\n/// y.expect(\"z\")\n/* a.unwrap() */\nlet s = \".unwrap()\";\n#[cfg(test)]\nfn t() { q.unwrap(); }\n";
    assert!(
        check_unwrap("f.rs", quiet).is_empty(),
        "{:?}",
        check_unwrap("f.rs", quiet)
    );

    // Printing macros in code; comments, strings and tests may name them.
    let printing = "fn f() { println!(\"x\"); }\n// eprintln!(\"y\")\nlet s = \"print!(\";\n#[cfg(test)]\nfn t() { eprintln!(\"z\"); }\n";
    assert_eq!(check_printing("f.rs", printing).len(), 1);

    // Grouped, nested and multi-line imports of adapters, and inline paths.
    for planted in [
        "use crate::{channels, core::message::Message};",
        "use crate::{\n    core::x,\n    storage::{JsonlStore, atomic},\n};",
        "use crate::tools::shell::ShellTool;",
        "pub use crate::config::Config;",
        "use ::reqwest::Client;",
        "fn f() { let s = crate::storage::JsonlStore::new(); }",
        "fn f() -> reqwest::Client { todo!() }",
    ] {
        assert!(
            !check_core_imports("src/core/x.rs", planted).is_empty(),
            "{planted}"
        );
    }
    for fine in [
        "use crate::core::message::{Message, Role};",
        "use super::{ports, session};",
        "// use crate::storage::JsonlStore;",
        "let s = \"crate::tools are adapters\";",
        "use crate::core::ports::tool::ToolOutput; // not crate::tools",
    ] {
        assert!(
            check_core_imports("src/core/x.rs", fine).is_empty(),
            "{fine}"
        );
    }

    // Two files importing each other, a loop of three, and what is not a cycle.
    let planted = |files: &[(&str, &str)]| {
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(rel, text)| (rel.to_string(), format!("//! x\n{text}\n")))
            .collect();
        check_cycles(&files)
    };
    let pair = planted(&[
        (
            "src/config/mod.rs",
            "mod load;\nmod validate;\npub use load::load;",
        ),
        ("src/config/load.rs", "use super::validate::validate;"),
        (
            "src/config/validate.rs",
            "use super::{load::EnvLookup, Problem};",
        ),
    ]);
    assert_eq!(
        pair,
        ["import cycle: src/config/load.rs → src/config/validate.rs → src/config/load.rs"]
    );
    let loop_of_three = planted(&[
        ("src/core/a.rs", "use crate::core::b::B;"),
        ("src/core/b.rs", "use crate::{\n    core::c::C,\n};"),
        ("src/core/c.rs", "use squidbot::core::a;"),
    ]);
    assert_eq!(loop_of_three.len(), 1, "{loop_of_three:?}");
    let fine = planted(&[
        ("src/core/mod.rs", "pub use self::a::A;"),
        (
            "src/core/a.rs",
            "use super::B;\n#[cfg(test)]\nmod tests { use crate::core::b::x; }",
        ),
        (
            "src/core/b.rs",
            "use crate::core::a::A; // use crate::core::c::C;",
        ),
        ("src/core/c.rs", "use crate::core::b;"),
    ]);
    assert!(fine.is_empty(), "{fine:?}");

    // anyhow in library code; allowed in the binary.
    assert_eq!(
        check_anyhow("src/storage/x.rs", "use anyhow::Result;\n").len(),
        1
    );
    assert_eq!(
        check_anyhow("src/llm/x.rs", "fn f() -> anyhow::Result<()> { Ok(()) }\n").len(),
        1
    );
    assert!(check_anyhow("src/cli/agent.rs", "use anyhow::Result;\n").is_empty());
    assert!(check_anyhow("src/storage/x.rs", "// anyhow is for the binary\n").is_empty());

    // Missing top doc, and a file over the limit.
    assert_eq!(check_doc_and_length("a.rs", "fn main() {}\n").len(), 1);
    let long = format!("//! x\n{}", "fn f() {}\n".repeat(MAX_LINES));
    assert_eq!(check_doc_and_length("a.rs", &long).len(), 1);
    assert!(check_doc_and_length("a.rs", "//! fine\nfn main() {}\n").is_empty());
}

#[test]
fn the_compiler_requires_docs_on_public_items() {
    // `cargo clippy -D warnings` (scripts/test) turns the lint's warnings into errors.
    let manifest = fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let lints = manifest
        .split("[lints.rust]")
        .nth(1)
        .expect("Cargo.toml has a [lints.rust] table");
    let table = lints.split("\n[").next().unwrap_or(lints);
    assert!(
        table.lines().any(|l| {
            let l = l.replace(' ', "");
            l == "missing_docs=\"warn\"" || l == "missing_docs=\"deny\""
        }),
        "[lints.rust] must set missing_docs:\n{table}"
    );
}

/// The module paths a reader of ARCHITECTURE.md must find: every file under src/, with a
/// directory's `mod.rs` standing for the directory.
fn module_paths() -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files
        .iter()
        .map(|f| {
            let rel = relative(f);
            match rel.strip_suffix("/mod.rs") {
                Some(dir) => format!("{dir}/"),
                None => rel,
            }
        })
        .collect()
}

/// The folders whose paths ARCHITECTURE.md names and must keep true: a path in backquotes that
/// starts with one of them must exist.
const DOCUMENTED_DIRS: [&str; 11] = [
    "src/",
    "tests/",
    "benches/",
    "deploy/",
    "config/",
    "docs/",
    ".ci/",
    "scripts/",
    "build/",
    "fuzz/",
    "examples/",
];

/// The paths `doc` names in backquotes under [`DOCUMENTED_DIRS`] that do not `exist`.
fn dead_paths(doc: &str, exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, piece) in doc.split('`').enumerate() {
        let is_code = i % 2 == 1;
        let looks_like_path = DOCUMENTED_DIRS.iter().any(|p| piece.starts_with(p));
        if is_code && looks_like_path && !piece.contains(' ') && !piece.contains('*') {
            let path = piece.split("::").next().unwrap_or(piece);
            if !exists(path) {
                problems.push(format!(
                    "ARCHITECTURE.md names `{piece}`, which does not exist"
                ));
            }
        }
    }
    problems
}

#[test]
fn the_dead_path_check_reads_every_documented_folder() {
    for dir in DOCUMENTED_DIRS {
        let doc = format!("see `{dir}gone.rs` and `{dir}here.rs::f`, not `{dir}a b` or `{dir}*`");
        let dead = dead_paths(&doc, &|path| path.ends_with("here.rs"));
        assert_eq!(
            dead,
            vec![format!(
                "ARCHITECTURE.md names `{dir}gone.rs`, which does not exist"
            )],
            "{dir}"
        );
    }
    // Outside those folders a name is not taken for a path.
    assert!(dead_paths("`gone/x.rs`", &|_| false).is_empty());
}

#[test]
fn architecture_lists_every_module_and_no_dead_path() {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut problems = Vec::new();
    for module in module_paths() {
        if !doc.contains(&format!("`{module}`")) {
            problems.push(format!("ARCHITECTURE.md does not mention `{module}`"));
        }
    }
    problems.extend(dead_paths(&doc, &|path| root().join(path).exists()));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
