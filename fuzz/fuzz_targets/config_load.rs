//! Fuzzes configuration loading, `squidbot::config::load_from_str`: YAML (or JSON) text through
//! deserialization, validation and path resolution, as `squidbot` does at startup.
//!
//! Invariants checked on every input, beyond "never panics":
//! - a rejected configuration names at least one problem;
//! - every problem with a line names a line that exists in the input (1-based, counting lines
//!   as YAML does, at most one past the last line, where an unexpected end of input is
//!   reported);
//! - the rendered error starts with the file's path, so the user knows which file to open;
//! - an accepted configuration has absolute paths (the workspace is resolved under the home).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use squidbot::config::{ConfigError, load_from_str};

const PATH: &str = "/fuzz/squidbot.yaml";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return; // The loader takes the file as read by read_to_string, which rejects non-UTF-8.
    };
    match load_from_str(text, Path::new(PATH), Path::new("/fuzz/home")) {
        Ok(loaded) => {
            assert!(
                loaded.config.agents.workspace.is_absolute(),
                "workspace {:?} is not absolute",
                loaded.config.agents.workspace
            );
        }
        Err(ConfigError::Invalid { path, problems }) => {
            assert_eq!(path, Path::new(PATH));
            assert!(!problems.is_empty(), "rejected without naming a problem");
            // YAML breaks lines at `\n`, `\r\n` and a lone `\r` (found by this target: a problem
            // on "line 8" of a 6-line input that had two lone CRs), so count lines the same way.
            let lines = text
                .replace("\r\n", "\n")
                .split(['\n', '\r'])
                .count()
                .max(1);
            for problem in &problems {
                if let Some(line) = problem.line {
                    assert!(
                        (1..=lines + 1).contains(&line),
                        "problem at line {line} of a {lines}-line input: {problem:?}"
                    );
                }
            }
            let rendered = ConfigError::Invalid { path, problems }.to_string();
            assert!(
                rendered.starts_with(PATH),
                "error does not name the file: {rendered}"
            );
        }
        Err(other) => panic!("load_from_str does no I/O, yet returned {other:?}"),
    }
});
