//! `squidbot doctor` through the binary: all checks pass against the scripted LLM, an LLM
//! that is down, an unwritable workspace and a listen address taken by something else.

use crate::support::bin::{squidbot, stdout};
use std::path::Path;
use std::process::Output;

use crate::support::scripted_llm::ScriptedLlm;

fn write_config(home: &Path, url: &str, listen: &str) {
    let text = format!(
        "llm:\n  default_pool: default\n  providers:\n    local:\n      api_base: \"{url}\"\n      api_key: test-key\n  models:\n    small:\n      provider: local\n      model: scripted-model\n  pools:\n    default: [small]\n  retry:\n    max_retries: 0\ngateway:\n  http:\n    listen: \"{listen}\"\n"
    );
    std::fs::write(home.join("squidbot.yaml"), text).unwrap();
}

async fn doctor(home: &Path) -> Output {
    squidbot(home).arg("doctor").output().await.unwrap()
}

#[tokio::test]
async fn all_checks_pass_against_a_working_setup() {
    let llm = ScriptedLlm::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &llm.url(), "127.0.0.1:0");
    let output = doctor(home.path()).await;
    let out = stdout(&output);
    assert!(output.status.success(), "stdout: {out}");
    assert!(!out.contains("FAIL"), "{out}");
    for what in [
        "config",
        "llm model small",
        "home",
        "sessions",
        "workspace",
        "cron",
        "http listen",
    ] {
        assert!(
            out.lines()
                .any(|line| line.starts_with("ok  ") && line.contains(what)),
            "no ok line for {what}: {out}"
        );
    }
    let request = &llm.requests()[0];
    assert_eq!(request["max_tokens"], 1);
    assert_eq!(request["messages"][0]["content"], "ping");
}

#[tokio::test]
async fn an_llm_that_is_down_fails_naming_the_model_and_api_base() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &url, "127.0.0.1:0");
    let output = doctor(home.path()).await;
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    let line = out
        .lines()
        .find(|line| line.starts_with("FAIL llm model small"))
        .unwrap_or_else(|| panic!("no FAIL line: {out}"));
    assert!(line.contains(&url), "{line}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("ok  ") && l.contains("workspace"))
    );
}

#[tokio::test]
async fn an_invalid_config_fails_with_the_config_error() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("squidbot.yaml"),
        "llm:\n  no_such_field: 1\n",
    )
    .unwrap();
    let output = doctor(home.path()).await;
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.starts_with("FAIL config: "), "{out}");
    assert!(out.contains("no_such_field"), "{out}");
}

#[tokio::test]
async fn a_listen_address_taken_by_something_else_fails() {
    let llm = ScriptedLlm::start().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &llm.url(), &addr);
    let output = doctor(home.path()).await;
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains(&format!("FAIL http listen {addr}: ")), "{out}");
    drop(taken);
}

#[tokio::test]
async fn an_unwritable_workspace_fails() {
    // A regular file where the workspace directory should be: no directory can be made or
    // written there, not even by root (tests and CI run as root, so permission bits prove nothing).
    let llm = ScriptedLlm::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &llm.url(), "127.0.0.1:0");
    std::fs::write(home.path().join("workspace"), b"not a directory").unwrap();
    let output = doctor(home.path()).await;
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("FAIL workspace")),
        "{out}"
    );
}
