//! The real servers the channel suites talk to, as started by `scripts/testenv/up`.
//!
//! `scripts/test` starts them and exports `DIR/env`; a test that needs one reads it here. A
//! missing variable is a failure with instructions, never a skip: a suite that passes because
//! its server was absent proves nothing.

use std::path::PathBuf;
use std::process::Command;

/// A variable from `scripts/testenv/up`'s env file, or a panic that says how to get it.
pub fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: this test needs the real test servers. Run the whole suite with \
             scripts/test, or start them with `scripts/testenv/up /tmp/squidbot-testenv` and \
             `set -a; . /tmp/squidbot-testenv/env; set +a` before `cargo test --test servers`."
        )
    })
}

/// The directory holding the testenv scripts (`synapse.sh`, `mail.sh`).
pub fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/testenv")
}

/// Runs a testenv script with `args`, panicking with its output when it fails.
pub fn run_script(script: &str, args: &[&str]) -> String {
    let output = Command::new(scripts_dir().join(script))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    assert!(
        output.status.success(),
        "{script} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
