//! Tidy: keeps the code-base rules true on every `cargo test`.
//!
//! Every source file starts with a `//!` doc and stays under 800 lines; `src/core` imports no
//! adapter, no config and no I/O crate; library and binary code has no `unwrap()`/`expect()`
//! outside tests; ARCHITECTURE.md names every module and every path it names exists.

use std::fs;
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 800;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

#[test]
fn every_file_is_documented_and_short() {
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&root().join(dir), &mut files);
    }
    files.push(root().join("build.rs"));
    let mut problems = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        if !text.starts_with("//!") {
            problems.push(format!(
                "{}: does not start with a //! doc comment",
                relative(file)
            ));
        }
        let lines = text.lines().count();
        if lines > MAX_LINES {
            problems.push(format!(
                "{}: {lines} lines (limit {MAX_LINES})",
                relative(file)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "tidy problems:\n{}",
        problems.join("\n")
    );
}

#[test]
fn core_imports_no_adapter() {
    let forbidden = [
        "crate::channels",
        "crate::tools",
        "crate::llm",
        "crate::storage",
        "crate::skills",
        "crate::config",
        "crate::gateway",
        "squidbot::",
        "reqwest",
        "axum",
        "matrix_sdk",
        "async_imap",
        "lettre",
        "hyper",
    ];
    let mut files = Vec::new();
    rust_files(&root().join("src/core"), &mut files);
    let mut problems = Vec::new();
    for file in &files {
        for (n, line) in fs::read_to_string(file).unwrap().lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in forbidden {
                if code.contains(word) {
                    problems.push(format!(
                        "{}:{}: core mentions {word}",
                        relative(file),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "core must not depend on adapters:\n{}",
        problems.join("\n")
    );
}

#[test]
fn no_unwrap_outside_tests() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let rel = relative(file);
        if rel.ends_with("/tests.rs") || rel.contains("/tests/") {
            continue;
        }
        for (n, line) in fs::read_to_string(file).unwrap().lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break; // Inline test modules sit at the end of a file.
            }
            let code = line.split("//").next().unwrap_or("");
            if code.contains(".unwrap()") || code.contains(".expect(") {
                problems.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "unwrap/expect outside tests:\n{}",
        problems.join("\n")
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

#[test]
fn architecture_lists_every_module_and_no_dead_path() {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut problems = Vec::new();
    for module in module_paths() {
        if !doc.contains(&format!("`{module}`")) {
            problems.push(format!("ARCHITECTURE.md does not mention `{module}`"));
        }
    }
    for (i, piece) in doc.split('`').enumerate() {
        let is_code = i % 2 == 1;
        let looks_like_path = [
            "src/", "tests/", "benches/", "deploy/", "config/", "docs/", ".ci/",
        ]
        .iter()
        .any(|p| piece.starts_with(p));
        if is_code && looks_like_path && !piece.contains(' ') && !piece.contains('*') {
            let path = piece.split("::").next().unwrap_or(piece);
            if !root().join(path).exists() {
                problems.push(format!(
                    "ARCHITECTURE.md names `{piece}`, which does not exist"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
