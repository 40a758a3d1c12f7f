//! `squidbot doctor` through the binary: all checks pass against the scripted LLM, an LLM
//! that is down (in any pool), an unwritable workspace, a listen address taken by something
//! else. Logins checked against the real servers: `tests/servers/doctor.rs`.

use crate::support::bin::{squidbot, stdout};
use std::path::Path;
use std::process::Output;

use crate::support::config::TestConfig;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// The config of a working setup: the scripted LLM at `url` with a key, listening on `listen`.
fn write_config(home: &Path, url: &str, listen: &str) {
    TestConfig::new(url)
        .api_key("test-key")
        .http(listen, None)
        .write(home);
}

/// `squidbot doctor` on `home`.
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
    // Doctor looks; it makes no directory (#40).
    for dir in ["sessions", "workspace"] {
        assert!(!home.path().join(dir).exists(), "doctor created {dir}");
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
    assert!(out.contains("fix the file"), "{out}");
}

/// A key variable that is set but empty (`KEY=` in an env file) is named as such, and the fix
/// points at the environment, not at the file (#40).
#[tokio::test]
async fn an_empty_key_variable_is_told_as_empty_and_the_fix_is_the_environment() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("squidbot.yaml"),
        "llm:
  providers:
    local:
      api_base: \"http://127.0.0.1:9/v1\"
      api_key_env: SQUIDBOT_TEST_EMPTY_KEY
  models:
    small:
      provider: local
      model: m
  pools:
    default: [small]
",
    )
    .unwrap();
    let output = squidbot(home.path())
        .arg("doctor")
        .env("SQUIDBOT_TEST_EMPTY_KEY", "")
        .output()
        .await
        .unwrap();
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.contains("environment variable SQUIDBOT_TEST_EMPTY_KEY is set but empty"),
        "{out}"
    );
    assert!(out.contains("set the variable in this shell"), "{out}");
    assert!(!out.contains("fix the file"), "{out}");
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

#[tokio::test]
async fn every_pool_is_checked_not_only_the_default() {
    let llm = ScriptedLlm::start().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let home = tempfile::tempdir().unwrap();
    let url = llm.url();
    let text = format!(
        "llm:\n  default_pool: default\n  providers:\n    local:\n      api_base: \"{url}\"\n    night:\n      api_base: \"{dead}\"\n  models:\n    small:\n      provider: local\n      model: scripted-model\n    backup:\n      provider: night\n      model: other-model\n  pools:\n    default: [small]\n    heartbeat: [backup, small]\n  retry:\n    max_retries: 0\ngateway:\n  http:\n    listen: \"127.0.0.1:0\"\n"
    );
    std::fs::write(home.path().join("squidbot.yaml"), text).unwrap();
    let output = doctor(home.path()).await;
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    let small = out
        .lines()
        .find(|line| line.contains("llm model small"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        small.starts_with("ok  ") && small.contains("pools: default, heartbeat"),
        "{small}"
    );
    let backup = out
        .lines()
        .find(|line| line.contains("llm model backup"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        backup.starts_with("FAIL") && backup.contains(&dead) && backup.contains("pools: heartbeat"),
        "{backup}"
    );
    // Each model is called once, even when it serves two pools.
    assert_eq!(llm.requests().len(), 1);
}

/// #25: a model's settings that its provider is known to refuse are named, with the fix.
#[tokio::test]
async fn settings_a_provider_refuses_are_named_with_the_fix() {
    let llm = ScriptedLlm::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &llm.url(), "127.0.0.1:0");
    let path = home.path().join("squidbot.yaml");
    let config = std::fs::read_to_string(&path).unwrap().replace(
        "      model: scripted-model\n",
        "      model: o3-mini\n      token_limit: max_tokens\n",
    );
    std::fs::write(&path, config).unwrap();
    let output = doctor(home.path()).await;
    let out = stdout(&output);
    assert!(!output.status.success(), "{out}");
    assert!(
        out.lines()
            .any(|line| line.starts_with("FAIL llm model small settings")
                && line.contains("token_limit: max_completion_tokens")),
        "{out}"
    );
    // Without the setting, `auto` sends what the model wants.
    let config = std::fs::read_to_string(&path)
        .unwrap()
        .replace("      token_limit: max_tokens\n", "");
    std::fs::write(&path, config).unwrap();
    let output = doctor(home.path()).await;
    assert!(output.status.success(), "{}", stdout(&output));
    let request = llm.requests().pop().unwrap();
    assert_eq!(request["max_completion_tokens"], 1, "{request}");
    assert!(request.get("max_tokens").is_none(), "{request}");
}

/// A listen address other machines can reach is said so, by doctor and at the gateway's
/// start (#40).
#[tokio::test]
async fn a_listen_address_open_to_other_machines_is_warned_about() {
    let llm = ScriptedLlm::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &llm.url(), "0.0.0.0:0");
    let output = doctor(home.path()).await;
    let out = stdout(&output);
    let line = out.lines().find(|l| l.contains("http listen")).unwrap();
    assert!(
        line.starts_with("ok  http listen 0.0.0.0:0 (warning: reachable from other machines"),
        "{out}"
    );
    write_config(home.path(), &llm.url(), "127.0.0.1:0");
    let out = stdout(&doctor(home.path()).await);
    assert!(!out.contains("warning: reachable"), "{out}");
}

/// A web page where the LLM API should be (a proxy's 502, a web server at the wrong path) is
/// named by its title and URL, not pasted into doctor's one line (#40).
#[tokio::test]
async fn a_web_page_instead_of_an_llm_api_is_named_with_its_url() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|_| Reply::Status {
        status: 502,
        body: "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>".to_owned(),
        retry_after: None,
    });
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &llm.url(), "127.0.0.1:0");
    let out = stdout(&doctor(home.path()).await);
    let line = out.lines().find(|l| l.contains("llm model small")).unwrap();
    assert!(
        line.starts_with("FAIL")
            && line.contains(&format!(
                "{}/chat/completions answered with a web page (\"502 Bad Gateway\")",
                llm.url()
            ))
            && line.contains("check `api_base`")
            && !line.contains('<'),
        "{line}"
    );
}
