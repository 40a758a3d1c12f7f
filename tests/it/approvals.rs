//! The owner's approval of risky commands through the real binary (#16 item 2): an approved
//! command runs once, a refused, expired or restart-orphaned one never runs, the rest of a
//! refused turn is refused without asking, and scheduled jobs and the heartbeat never ask.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::config::TestConfig;
use crate::support::daemon::{Gateway, TOKEN};
use crate::support::gateway::{Events, decide, last_result, say_later, shell, shell_then_result};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

#[tokio::test]
async fn an_approved_command_runs_once_and_a_refusal_ends_the_asking() {
    let llm = ScriptedLlm::start().await;
    let gw = Gateway::start(&llm.url(), "", &[]).await;
    let workspace = gw.home().join("workspace");
    llm.enqueue(shell("echo ran >> ran.txt"));
    llm.enqueue(shell("echo again >> ran.txt"));
    llm.enqueue(shell("touch later.txt"));
    llm.enqueue(Reply::Text("done".to_owned()));
    let mut events = Events::open(&gw, "ops").await;
    let turn = say_later(&gw, "ops", "write the file");

    let first = events.next("approval").await;
    // The session as /status names it, and how to answer, for a client that read no docs.
    assert_eq!(first["session"], "http:ops");
    let path = format!(
        "/v1/sessions/ops/approvals/{}",
        first["id"].as_str().unwrap()
    );
    assert_eq!(first["answer"]["path"], path.as_str(), "{first}");
    assert_eq!(first["answer"]["approve"], json!({"decision": "approve"}));
    // The plain POST answers at once with the same question, while it is still open.
    let (code, asked) = turn.await.unwrap();
    assert_eq!(code, 202, "{asked}");
    assert_eq!(asked["approval"]["id"], first["id"], "{asked}");
    assert_eq!(asked["events"], "/v1/sessions/ops/events", "{asked}");
    assert_eq!(first["tool"], "shell");
    assert_eq!(first["command"], "echo ran >> ran.txt");
    assert!(first["expires_at"].as_str().is_some(), "{first}");
    assert!(!workspace.join("ran.txt").exists(), "ran before approval");
    let status = gw.get_json("/status").await;
    assert_eq!(status["approvals"][0]["id"], first["id"], "{status}");
    // Without the token: health only, no sessions, approvals or commands.
    let open: serde_json::Value = gw.get_anonymous("/status").await.json().await.unwrap();
    assert_eq!(
        open["channels"]["http"]["state"],
        status["channels"]["http"]["state"]
    );
    for private in ["approvals", "sessions", "cron", "usage"] {
        assert!(
            open.get(private).is_none(),
            "{private} without the token: {open}"
        );
    }
    let shown = open.to_string();
    for private in ["ran.txt", "\"ops\"", "http:ops"] {
        assert!(
            !shown.contains(private),
            "{private} without the token: {open}"
        );
    }
    let id = first["id"].as_str().unwrap();
    let (code, body) = decide(&gw, "ops", id, json!({"decision": "approve"})).await;
    assert_eq!(
        (code, &body["decision"]),
        (200, &json!("approve")),
        "{body}"
    );
    let (code, body) = decide(&gw, "ops", id, json!({"decision": "deny"})).await;
    assert_eq!(
        code, 409,
        "an answered request cannot be answered again: {body}"
    );
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("already answered: approved"),
        "{body}"
    );

    let second = events.next("approval").await;
    assert_eq!(second["command"], "echo again >> ran.txt");
    let (code, _) = decide(
        &gw,
        "other",
        second["id"].as_str().unwrap(),
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(code, 404, "another session cannot answer it");
    let (code, _) = decide(
        &gw,
        "ops",
        second["id"].as_str().unwrap(),
        json!({"decision": "maybe"}),
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = decide(
        &gw,
        "ops",
        second["id"].as_str().unwrap(),
        json!({"decision": "deny"}),
    )
    .await;
    assert_eq!(code, 200);

    // The turn's reply, after the answers, on the session's events.
    assert_eq!(events.next("reply").await["reply"], "done");
    assert_eq!(
        std::fs::read_to_string(workspace.join("ran.txt")).unwrap(),
        "ran\n"
    );
    assert!(!workspace.join("later.txt").exists());
    let requests = llm.requests();
    assert_eq!(last_result(&requests[1]), "exit code 0\n(no output)");
    let refused = last_result(&requests[2]);
    assert!(
        refused.contains("the owner refused") && refused.contains("Do not try"),
        "{refused}"
    );
    let after = last_result(&requests[3]);
    assert!(
        after.contains("refused earlier in this turn"),
        "asked again after a no: {after}"
    );
    assert_eq!(gw.get_json("/status").await["approvals"], json!([]));
}

/// After `/new` the turn runs in another session, but the client keeps its API session id:
/// the request names that id and is answered under it.
#[tokio::test]
async fn after_new_an_approval_is_answered_under_the_id_the_client_uses() {
    let llm = ScriptedLlm::start().await;
    let gw = Gateway::start(&llm.url(), "", &[]).await;
    let (code, body) = gw.say("ops", "/new").await;
    assert_eq!(code, 200, "{body}");
    llm.enqueue(shell("echo ran >> ran.txt"));
    llm.enqueue(Reply::Text("done".to_owned()));
    let mut events = Events::open(&gw, "ops").await;
    let turn = say_later(&gw, "ops", "write the file");
    let request = events.next("approval").await;
    assert_eq!(request["session"], "http:ops", "{request}");
    assert_eq!(
        request["answer"]["path"],
        format!(
            "/v1/sessions/ops/approvals/{}",
            request["id"].as_str().unwrap()
        ),
        "{request}"
    );
    let id = request["id"].as_str().unwrap();
    let (code, body) = decide(&gw, "ops", id, json!({"decision": "approve"})).await;
    assert_eq!(code, 200, "{body}");
    let (code, asked) = turn.await.unwrap();
    assert_eq!(code, 202, "{asked}");
    assert_eq!(asked["approval"]["session"], "http:ops", "{asked}");
    assert_eq!(asked["events"], "/v1/sessions/ops/events", "{asked}");
    assert_eq!(events.next("reply").await["reply"], "done");
    assert!(gw.home().join("workspace/ran.txt").exists());
    assert!(gw.session_file("ops#2").exists());
    assert!(
        !gw.session_file("ops").exists(),
        "the turn ran in the new session"
    );
}

#[tokio::test]
async fn an_unanswered_request_expires_and_the_owner_answers_in_words() {
    let llm = ScriptedLlm::start().await;
    let extra = "tools:\n  shell:\n    approval_timeout_seconds: 1\n";
    let gw = Gateway::start(&llm.url(), extra, &[]).await;
    let workspace = gw.home().join("workspace");
    llm.enqueue(shell("touch expired.txt"));
    llm.enqueue(Reply::Text("gave up".to_owned()));
    let mut events = Events::open(&gw, "ops").await;
    let turn = say_later(&gw, "ops", "touch it");
    let approval = events.next("approval").await;
    assert_eq!(turn.await.unwrap().0, 202);
    assert_eq!(events.next("reply").await["reply"], "gave up");
    let result = last_result(&llm.requests()[1]);
    assert!(result.contains("did not approve in time"), "{result}");
    let id = approval["id"].as_str().unwrap();
    let (code, _) = decide(&gw, "ops", id, json!({"decision": "approve"})).await;
    assert_eq!(code, 410, "an expired request answers Gone");
    let (code, _) = decide(
        &gw,
        "ops",
        "0000000000000000",
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(code, 404);
    assert!(!workspace.join("expired.txt").exists());

    // `yes CODE` in a message is an answer, handled beside the waiting turn's queue; the code
    // is read from the question the owner was shown.
    llm.enqueue(shell("touch worded.txt"));
    llm.enqueue(Reply::Text("done".to_owned()));
    let gw_slow = Gateway::start(&llm.url(), "", &[]).await;
    let mut events = Events::open(&gw_slow, "ops").await;
    let turn = say_later(&gw_slow, "ops", "touch it");
    let approval = events.next("approval").await;
    let code = code_of(&gw_slow, approval["id"].as_str().unwrap()).await;
    let (status, body) = gw_slow
        .say("ops", &format!("yes {}", code.to_lowercase()))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["reply"].as_str().unwrap().starts_with("Approved"),
        "{body}"
    );
    assert_eq!(turn.await.unwrap().0, 202);
    assert_eq!(events.next("reply").await["reply"], "done");
    assert!(gw_slow.home().join("workspace/worded.txt").exists());
    let history = std::fs::read_to_string(gw_slow.session_file("ops")).unwrap();
    assert!(
        !history.contains(&format!("yes {}", code.to_lowercase())),
        "an answer is not a turn"
    );
}

/// The one-time code of open request `id`, from the gateway's file of open requests (a
/// Matrix or mail owner reads it in the question; `/status` leaves codes out).
async fn code_of(gw: &Gateway, id: &str) -> String {
    let kept = std::fs::read_to_string(gw.home().join("state/approvals.json")).unwrap();
    let open: Vec<Value> = serde_json::from_str(&kept).unwrap();
    let request = open.iter().find(|r| r["id"] == id).unwrap();
    assert!(
        gw.get_text("/status")
            .await
            .find(request["code"].as_str().unwrap())
            .is_none()
    );
    request["code"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_request_open_at_a_crash_never_runs_and_the_owner_is_told() {
    let llm = ScriptedLlm::start().await;
    let mut gw = Gateway::start(&llm.url(), "", &[]).await;
    llm.enqueue(shell("touch orphan.txt"));
    let mut events = Events::open(&gw, "ops").await;
    let turn = say_later(&gw, "ops", "touch it");
    let approval = events.next("approval").await;
    let id = approval["id"].as_str().unwrap().to_owned();
    let kept = std::fs::read_to_string(gw.home().join("state/approvals.json")).unwrap();
    assert!(kept.contains(&id), "{kept}");
    turn.abort();
    gw.child.kill().await.unwrap();
    drop(events);

    // The same home and port again.
    gw.respawn().await;
    let (code, _) = decide(&gw, "ops", &id, json!({"decision": "approve"})).await;
    assert_eq!(code, 410, "a request of the previous run is expired");
    let mut events = Events::open(&gw, "ops").await;
    let note = events.next("message").await;
    let text = note["text"].as_str().unwrap();
    assert!(
        text.contains("touch orphan.txt") && text.contains("did not run"),
        "{text}"
    );
    assert!(!gw.home().join("workspace/orphan.txt").exists());
    let kept = std::fs::read_to_string(gw.home().join("state/approvals.json")).unwrap();
    assert!(!kept.contains(&id), "{kept}");
    assert_eq!(llm.request_count(), 1, "the turn was not resumed");
    gw.terminate().await;
}

#[tokio::test]
async fn a_scheduled_job_never_asks_and_never_runs_what_is_not_allowed() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(shell_then_result("touch cron.txt"));
    let gw = Gateway::start(&llm.url(), "", &[]).await;
    gw.cron(&[
        "add",
        "touch",
        "touch the file",
        "every 1",
        "--target",
        "http:jobs",
    ]);
    let mut events = Events::open(&gw, "jobs").await;
    let delivered = events.next("message").await;
    let text = delivered["text"].as_str().unwrap();
    assert!(text.contains("scheduled jobs never ask"), "{text}");
    assert!(!gw.home().join("workspace/cron.txt").exists());
    assert!(!events.seen.contains("event: approval"), "{}", events.seen);
    assert_eq!(gw.get_json("/status").await["approvals"], json!([]));
}

#[tokio::test]
async fn a_heartbeat_never_asks_and_never_runs_what_is_not_allowed() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(shell_then_result("touch heartbeat.txt"));
    let url = llm.url();
    // The shortest interval is a minute: the first tick comes a minute after the start.
    let config = move |port: u16| {
        TestConfig::new(&url)
            .agents_line(
                "heartbeat:\n    enabled: true\n    interval_minutes: 1\n    target: \"http:beat\"",
            )
            .gateway_line("shutdown_grace_seconds: 10")
            .http(&format!("127.0.0.1:{port}"), Some(TOKEN))
            .yaml()
    };
    let gw = Gateway::start_with_config(config, &[], Stdio::null()).await;
    let workspace = gw.home().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("HEARTBEAT.md"), "- touch heartbeat.txt\n").unwrap();
    let mut events = Events::open(&gw, "beat").await;
    let delivered = events
        .next_within("message", Duration::from_secs(100))
        .await;
    let text = delivered["text"].as_str().unwrap();
    assert!(text.contains("heartbeat turns never ask"), "{text}");
    assert!(!workspace.join("heartbeat.txt").exists());
    assert!(!events.seen.contains("event: approval"), "{}", events.seen);
}

// See: #23 (item 9)
#[tokio::test]
async fn a_request_open_at_sigterm_is_refused_and_the_asker_told() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(shell_then_result("touch late.txt"));
    let mut gw = Gateway::start(&llm.url(), "", &[]).await;
    let mut events = Events::open(&gw, "ops").await;
    let turn = say_later(&gw, "ops", "touch it");
    let approval = events.next("approval").await;
    let started = tokio::time::Instant::now();
    assert_eq!(gw.terminate().await, Some(0));
    // Refused at once, not held for the grace period (10 s here) nor cut off by it.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let (status, body) = turn.await.unwrap();
    assert_eq!(status, 202, "{body}");
    // The asker's POST was answered with the question; the refusal is the turn's reply, kept
    // in the history (the events stream ends with the gateway).
    let history = std::fs::read_to_string(gw.session_file("ops")).unwrap();
    assert!(
        history.contains("squidbot is stopping") && history.contains("did not run"),
        "the asker is told: {history}"
    );
    assert!(!gw.home().join("workspace/late.txt").exists());
    let kept = std::fs::read_to_string(gw.home().join("state/approvals.json")).unwrap();
    assert!(
        !kept.contains(approval["id"].as_str().unwrap()),
        "nothing is left open for the next run: {kept}"
    );
}
