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

/// `squidbot gateway` on `home` (its config written), logging at `rust_log` to
/// `home/gateway.log`, appended (a restarted gateway's log follows the last one's, and
/// [`wait_ready`] shows it when the gateway never gets ready); killed when dropped.
#[allow(dead_code)] // only the server suites (tests/servers) use it so far
pub fn gateway_logging_to_home(home: &Path, rust_log: &str) -> tokio::process::Command {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.join("gateway.log"))
        .unwrap();
    let mut command = squidbot(home);
    command
        .arg("gateway")
        .env("RUST_LOG", rust_log)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true);
    command
}

/// Starts `command` with its stdin, stdout and stderr piped to the test and killed when
/// dropped: a process the test talks to while it runs.
pub fn spawn_piped(command: &mut tokio::process::Command) -> tokio::process::Child {
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Sends `signal` (`TERM`, `INT`, …) to a running child with the `kill` command.
pub fn send_signal(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().expect("the child is still running");
    let status = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Adds a cron job firing once, 2 s from now, at `session`, through `squidbot cron add` on
/// `home`; fails the test when the command fails.
#[allow(dead_code)] // only the server suites (tests/servers) use it so far
pub async fn cron_once(home: &Path, name: &str, message: &str, session: &str) {
    let at = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let output = squidbot(home)
        .args(["cron", "add", name, message, &format!("at {at}")])
        .args(["--target", session])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
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

/// Waits (up to 30 s) until the gateway at `base` answers `/readyz` with 200; fails the test
/// with the gateway's log (`home/gateway.log`) if it never does.
pub async fn wait_ready(http: &reqwest::Client, base: &str, home: &Path) {
    wait_ready_polling(http, base, home, std::time::Duration::from_millis(50)).await;
}

/// [`wait_ready`], asking every `every`: finer where the time to ready is what a test
/// measures (the crash proof's restarts).
pub async fn wait_ready_polling(
    http: &reqwest::Client,
    base: &str,
    home: &Path,
    every: std::time::Duration,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(response) = http.get(format!("{base}/readyz")).send().await
            && response.status().is_success()
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "gateway not ready: {}",
            std::fs::read_to_string(home.join("gateway.log")).unwrap_or_default()
        );
        tokio::time::sleep(every).await;
    }
}

/// The MCP server example (`examples/mcp_echo.rs`) that `cargo test` builds beside the binary.
pub fn mcp_echo() -> std::path::PathBuf {
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_squidbot"));
    let echo = exe.parent().unwrap().join("examples").join("mcp_echo");
    assert!(
        echo.exists(),
        "{} is missing: `cargo test` builds it",
        echo.display()
    );
    echo
}
