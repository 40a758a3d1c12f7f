//! Fault injection end to end: a real gateway whose LLM misbehaves on purpose, at random, for
//! 1 000 turns over 20 sessions (`SQUIDBOT_PROOF_TURNS` to change).
//!
//! The pool's first model is an address that refuses connections; the second is the scripted
//! server, which answers each request with one of: a good streamed reply, 429 with
//! `Retry-After`, 500, a reset mid-stream, a stall past the idle timeout, headers later than
//! the first-byte timeout, malformed SSE, a tool call with broken argument JSON, or (in one
//! session) a tool call on every round, an endless tool loop. Consolidation requests get the
//! same faults. Checked:
//!
//! - every turn ends with a reply or a clear error (HTTP 200 with exactly the expected text, or
//!   502 or 504 with a non-empty error), never a hang: each request has a deadline;
//! - no duplicated text: a good reply is exactly `re: <message>`, even after a reset mid-stream
//!   and a fallback;
//! - no cursor movement on a failed summary: whenever the cursor covers messages, summary.md
//!   names the last user message it covers;
//! - no panic: the gateway's log holds none, and it is still ready at the end.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use squidbot::core::session::SessionId;
use squidbot::storage::safe_id;
use tokio::io::AsyncReadExt;

use crate::summaries::{read_history, said, summarized, summary_reply};
use crate::support::bin::{squidbot, wait_ready};
use crate::support::free_port;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

const TOKEN: &str = "faults-token-41c2";
const SESSIONS: usize = 20;

/// One request's fate, drawn at random; the caller counts them.
fn faulty(request: &Value, counts: &Mutex<Vec<(&'static str, usize)>>) -> Reply {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let system = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let user = said(request);
    let good = if let Some(summary) = summary_reply(request) {
        summary
    } else if user.starts_with("loop") {
        // The endless tool loop: every round asks for another tool call.
        bump(counts, "endless tool loop round");
        return Reply::ToolCalls {
            text: String::new(),
            calls: vec![(
                format!("call_{}", fastrand::u32(..)),
                "list_files".to_owned(),
                "{}".to_owned(),
            )],
        };
    } else {
        Reply::Text(format!("re: {user}"))
    };
    let (name, reply) = match fastrand::u8(..20) {
        0..=8 => ("good", good),
        9 => (
            "429",
            Reply::Status {
                status: 429,
                body: "slow down".into(),
                retry_after: Some("0".into()),
            },
        ),
        10 => (
            "500",
            Reply::Status {
                status: 500,
                body: "boom".into(),
                retry_after: None,
            },
        ),
        11 | 12 => (
            "reset mid-stream",
            Reply::ResetAfter {
                text: "re: partial text that must not be dup".into(),
            },
        ),
        13 => (
            "idle stall",
            Reply::Stall {
                text: "re: ".into(),
                for_ms: 1_600,
            },
        ),
        14 => ("late headers", Reply::StallHeaders { for_ms: 2_600 }),
        15 => ("malformed SSE", Reply::Malformed),
        16 | 17 if !system.starts_with("You are a memory") => (
            "bad tool-call JSON",
            Reply::ToolCalls {
                text: String::new(),
                calls: vec![(
                    format!("call_{}", fastrand::u32(..)),
                    "read_file".to_owned(),
                    "{\"path\": \"x".to_owned(),
                )],
            },
        ),
        _ => ("good", good),
    };
    bump(counts, name);
    reply
}

fn bump(counts: &Mutex<Vec<(&'static str, usize)>>, name: &'static str) {
    let mut counts = counts.lock().unwrap();
    match counts.iter_mut().find(|(n, _)| *n == name) {
        Some((_, c)) => *c += 1,
        None => counts.push((name, 1)),
    }
}

fn turns() -> usize {
    std::env::var("SQUIDBOT_PROOF_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000)
}

/// How many sessions have consolidated, after checking each one's cursor stays within what
/// its summary.md covers.
fn check_cursors(home: &Path) -> usize {
    let mut consolidated = 0;
    for s in 0..SESSIONS {
        let session = SessionId::new("http", &format!("f{s}")).unwrap();
        let stem = safe_id::encode(&session);
        let (messages, _) = read_history(&home.join("sessions").join(format!("{stem}.jsonl")));
        if summarized(home, &session, &messages) > 0 {
            consolidated += 1;
        }
    }
    consolidated
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow proof suite: scripts/proof faults"]
async fn every_turn_ends_cleanly_under_random_llm_faults() {
    let counts = Arc::new(Mutex::new(Vec::new()));
    let llm = ScriptedLlm::start().await;
    llm.set_handler({
        let counts = counts.clone();
        move |request| faulty(request, &counts)
    });
    let refused = format!("http://127.0.0.1:{}/v1", free_port());
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = format!(
        "llm:\n  providers:\n    dead:\n      api_base: \"{refused}\"\n    local:\n      api_base: \"{}\"\n  models:\n    gone:\n      provider: dead\n      model: gone\n    small:\n      provider: local\n      model: scripted-model\n  pools:\n    default: [gone, small]\n  retry:\n    max_retries: 1\n    base_delay_ms: 10\n    max_delay_ms: 50\n  timeouts:\n    connect_seconds: 1\n    first_byte_seconds: 2\n    idle_seconds: 1\n    total_seconds: 5\nagents:\n  consolidation_threshold: 10\n  keep_recent: 4\n  summary_word_limit: 100000\n  heartbeat:\n    enabled: false\ngateway:\n  http:\n    listen: 127.0.0.1:{port}\n    token: {TOKEN}\n",
        llm.url()
    );
    std::fs::write(home.path().join("squidbot.yaml"), config).unwrap();
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    let mut child = squidbot(home.path())
        .arg("gateway")
        .env("RUST_LOG", "warn")
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let log = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    wait_ready(&http, &base, home.path()).await;

    let turns = turns();
    let next = Arc::new(AtomicUsize::new(0));
    let outcomes = Arc::new(Mutex::new((0usize, 0usize)));
    let started = Instant::now();
    let clients: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let (http, base, next, outcomes) =
                (http.clone(), base.clone(), next.clone(), outcomes.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= turns {
                        return;
                    }
                    let text = if s == 0 && n % 10 == 0 {
                        format!("loop {n}")
                    } else {
                        format!("m{n}")
                    };
                    let response = tokio::time::timeout(
                        Duration::from_secs(60),
                        http.post(format!("{base}/v1/sessions/f{s}/messages"))
                            .bearer_auth(TOKEN)
                            .json(&json!({ "text": text }))
                            .send(),
                    )
                    .await
                    .unwrap_or_else(|_| panic!("turn {text:?} hung"))
                    .unwrap();
                    let status = response.status().as_u16();
                    let body: Value = response.json().await.unwrap();
                    match status {
                        200 if text.starts_with("loop") => {
                            assert!(body["reply"].as_str().is_some_and(|r| !r.is_empty()));
                            outcomes.lock().unwrap().0 += 1;
                        }
                        200 => {
                            assert_eq!(body["reply"], format!("re: {text}"), "{body}");
                            outcomes.lock().unwrap().0 += 1;
                        }
                        // 502 when the models failed, 504 when they stopped answering.
                        502 | 504 => {
                            let error = body["error"].as_str().unwrap_or_default();
                            assert!(error.len() > 10, "an unclear error: {body}");
                            outcomes.lock().unwrap().1 += 1;
                        }
                        other => panic!("{text:?}: unexpected status {other}: {body}"),
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let elapsed = started.elapsed();
    assert!(
        http.get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );
    let consolidated = check_cursors(home.path());
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let log = log.await.unwrap();
    assert!(!log.contains("panicked"), "the gateway panicked:\n{log}");
    let (replied, failed) = *outcomes.lock().unwrap();
    println!(
        "fault suite: {turns} turns in {:.1} s: {replied} replies, {failed} clear errors, 0 \
         hangs, 0 duplicated text, 0 panics; {consolidated} sessions consolidated with the \
         cursor within the summary",
        elapsed.as_secs_f64()
    );
    println!("  LLM replies drawn: {:?}", counts.lock().unwrap());
    assert_eq!(replied + failed, turns);
    assert!(replied > turns / 2 && failed > 0, "the faults did not bite");
    assert!(consolidated > 0, "no consolidation happened");
}
