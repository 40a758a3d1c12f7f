//! Chat commands through a real gateway: `/help`, `/status` and `/stop` are answered by
//! squidbot itself, never reach the LLM and are not written to the history; `/stop` cancels
//! the session's running turn, which the history then records.

use std::time::Duration;

use crate::daemon::Gateway;
use crate::harness::default_reply;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

#[tokio::test]
async fn help_and_status_are_answered_without_the_llm_or_the_history() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), "", &[]).await;

    let (status, body) = gw.say("cmds", "/help").await;
    assert_eq!(status, 200, "{body}");
    let help = body["reply"].as_str().unwrap();
    for command in ["/help", "/stop", "/status"] {
        assert!(help.contains(command), "{help}");
    }
    assert_eq!(llm.request_count(), 0, "a command never reaches the LLM");
    assert!(!gw.session_file("cmds").exists(), "nor the history");

    let (status, body) = gw.say("cmds", "hello there").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = gw.say("cmds", " /STATUS ").await;
    assert_eq!(status, 200, "{body}");
    let line = body["reply"].as_str().unwrap();
    assert!(
        line.starts_with("model: default: small (scripted-model) · conversation: 2 messages"),
        "{line}"
    );
    // Then today's LLM usage: the one turn's call, estimated (the server reports none).
    assert!(
        line.contains("never summarized · usage today: ") && line.contains(" · this month: "),
        "{line}"
    );
    assert_eq!(llm.request_count(), 1);
    let history = std::fs::read_to_string(gw.session_file("cmds")).unwrap();
    assert_eq!(history.lines().count(), 2, "only the real turn: {history}");

    // A command with more words is a message like any other.
    let (status, _) = gw.say("cmds", "/status please").await;
    assert_eq!(status, 200);
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test]
async fn stop_cancels_the_running_turn_and_the_history_says_so() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|request| {
        // Long enough that only a cancellation ends the turn before the test's bound.
        Reply::Delay {
            ms: 60_000,
            then: Box::new(default_reply(request)),
        }
    });
    let gw = Gateway::start(&llm.url(), "", &[]).await;

    let (status, body) = gw.say("busy", "/stop").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["reply"],
        "Nothing to stop: no reply is being worked on."
    );

    let slow = gw.say("busy", "think about it for a long time");
    let stop = async {
        while llm.request_count() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gw.say("busy", "/stop").await
    };
    let ((slow_status, slow_body), (stop_status, stop_body)) =
        tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(slow, stop) })
            .await
            .expect("/stop ends the turn long before its reply would come");
    assert_eq!(stop_status, 200, "{stop_body}");
    assert_eq!(
        stop_body["reply"],
        "Stopped: the reply I was working on is cancelled."
    );
    assert_eq!(slow_status, 502, "{slow_body}");
    assert!(
        slow_body["error"].as_str().unwrap().contains("/stop"),
        "{slow_body}"
    );

    let history = std::fs::read_to_string(gw.session_file("busy")).unwrap();
    let records: Vec<serde_json::Value> = history
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{history}");
    assert_eq!(records[0]["content"], "think about it for a long time");
    assert_eq!(records[1]["role"], "assistant");
    assert_eq!(
        records[1]["content"],
        squidbot::core::agent_loop::CANCELLED_NOTE
    );
    let metrics = gw.get_text("/metrics").await;
    assert!(
        metrics.contains("squidbot_turns_total{outcome=\"cancelled\"} 1"),
        "{metrics}"
    );
}
