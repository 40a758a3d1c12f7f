//! Running the real `squidbot` binary in a test: a command with its own home and none of the
//! caller's squidbot settings, and the output read back as text.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

/// The binary, with `SQUIDBOT_HOME` and `HOME` set to `home`, no inherited `SQUIDBOT_CONFIG` or
/// `RUST_LOG`, and no stdin.
pub fn squidbot(home: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_squidbot"));
    command
        .env("SQUIDBOT_HOME", home)
        .env("HOME", home)
        .env_remove("SQUIDBOT_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null());
    command
}

/// Standard output as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The tool names offered in a recorded chat request.
pub fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}
