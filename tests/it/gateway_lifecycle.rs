//! The gateway's start and stop at their edges (#40): a second gateway on a taken port stops
//! with the reason, and a stop past the grace period tells the client, records the call it
//! cut and exits non-zero.

use std::time::Duration;

use crate::support::config::TestConfig;
use crate::support::daemon::{Gateway, TOKEN, sse_events};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// A second gateway on a port the first one holds stops at once with the reason (#40),
/// instead of retrying the bind forever without HTTP while the first answers.
#[tokio::test]
async fn a_second_gateway_on_a_taken_port_exits_with_the_reason() {
    let llm = ScriptedLlm::start().await;
    let first = Gateway::start(&llm.url(), "", &[]).await;
    let address = first.base.trim_start_matches("http://").to_owned();
    let home = tempfile::tempdir().unwrap();
    TestConfig::new(&llm.url())
        .no_heartbeat()
        .http(&address, Some(TOKEN))
        .write(home.path());
    let second = tokio::process::Command::new(env!("CARGO_BIN_EXE_squidbot"))
        .arg("gateway")
        .env("SQUIDBOT_HOME", home.path())
        .env("HOME", home.path())
        .env_remove("SQUIDBOT_CONFIG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), second)
        .await
        .expect("the second gateway kept running on a taken port")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {address} (gateway.http.listen)"))
            && stderr.contains("another squidbot gateway answers"),
        "{stderr}"
    );
    // The first one never noticed.
    assert_eq!(
        first.get_json("/status").await["channels"]["http"]["state"],
        "running"
    );
}

/// SIGTERM past the grace period (#40): the streaming client gets a last `error` event saying
/// why, the call cut short is in the usage ledger, and the exit is non-zero.
#[tokio::test]
async fn sigterm_past_the_grace_period_tells_the_client_records_the_call_and_fails() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|_| Reply::Stall {
        text: "a long answer begins".to_owned(),
        for_ms: 60_000,
    });
    let url = llm.url();
    let mut gw = Gateway::start_with_config(
        move |port| {
            TestConfig::new(&url)
                .gateway_on(port)
                .gateway_line("shutdown_grace_seconds: 1")
                .yaml()
        },
        &[],
        std::process::Stdio::piped(),
    )
    .await;
    let mut stream = gw
        .http
        .post(format!("{}/v1/sessions/cut/messages", gw.base))
        .bearer_auth(TOKEN)
        .header("Accept", "text/event-stream")
        .json(&serde_json::json!({ "text": "tell me everything" }))
        .send()
        .await
        .unwrap();
    while llm.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The provider has begun answering (its first words are on the wire).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut seen = String::new();
    let ledger = gw.home().join("usage");
    let recorded = || {
        std::fs::read_dir(&ledger)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| std::fs::read_to_string(entry.path()).unwrap_or_default())
            .collect::<String>()
    };
    assert!(
        !recorded().contains("\"session\":\"http:cut\""),
        "nothing recorded yet"
    );

    assert_eq!(
        gw.terminate().await,
        Some(1),
        "turns were cut: not a clean stop"
    );
    while let Ok(Some(chunk)) = stream.chunk().await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let events = sse_events(&seen);
    let (name, data) = events.last().expect("events");
    assert_eq!(name, "error", "{seen}");
    assert!(
        data["error"]
            .as_str()
            .unwrap()
            .contains("grace period ran out"),
        "{data}"
    );
    assert!(
        recorded().contains("\"session\":\"http:cut\"")
            && recorded().contains("\"estimated\":true"),
        "the call cut short is in the ledger: {}",
        recorded()
    );
}
