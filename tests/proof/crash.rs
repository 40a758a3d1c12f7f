//! Crash consistency: the gateway is killed with SIGKILL at random moments while clients talk
//! to it over the HTTP API and consolidations and `memory_write` calls happen, then restarted,
//! 200 times (`SQUIDBOT_PROOF_KILLS` to change). After every kill the files on disk are checked:
//!
//! - every history file loads through the store; a line torn by a kill stays isolated (the
//!   next append closes it), so it hides no other message;
//! - every acknowledged message (HTTP 200 with its reply) is in its session, with its reply;
//! - no user message and no reply is in any session twice (nothing answered twice);
//! - the cursor never points past what summary.md covers: the summary names the last user
//!   message the cursor covers (the scripted summarizer writes "through <text>");
//! - MEMORY.md, when present, is one whole document the agent wrote, never empty or torn.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use squidbot::core::ports::store::HistoryStore;
use squidbot::core::session::SessionId;
use squidbot::storage::{JsonlStore, safe_id};
use tokio::process::Child;

use crate::summaries::{read_history, said, summarized, summary_reply};
use crate::support::bin::{squidbot, wait_ready_polling};
use crate::support::config::TestConfig;
use crate::support::daemon::TOKEN;
use crate::support::free_port;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

const SESSIONS: usize = 6;
const CLIENTS: usize = 8;
/// The body of every MEMORY.md the agent writes: big enough that a torn write would show.
const MEMORY_FILL: usize = 4_000;

/// What the scripted model does: summaries say how far they reach, some user messages make the
/// agent call `memory_write`, every other turn echoes.
fn handler(request: &Value) -> Reply {
    if let Some(summary) = summary_reply(request) {
        return summary;
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    let user = said(request);
    if last["role"] == "user" && user.ends_with("-remember") {
        let content = format!("memory {user}\n{}\nEND\n", "m".repeat(MEMORY_FILL));
        return Reply::ToolCalls {
            text: String::new(),
            calls: vec![(
                "call_1".to_owned(),
                "memory_write".to_owned(),
                json!({ "content": content }).to_string(),
            )],
        };
    }
    Reply::Text(format!("re: {user}"))
}

fn write_config(home: &Path, llm_url: &str, port: u16) {
    TestConfig::new(llm_url)
        .agents_line("consolidation_threshold: 12")
        .agents_line("keep_recent: 4")
        .agents_line("summary_word_limit: 100000")
        .gateway_on(port)
        .extra("tools:\n  search_history:\n    enabled: false\n")
        .write(home);
}

async fn start_gateway(home: &Path, llm_url: &str) -> (Child, String, Duration) {
    let port = free_port();
    write_config(home, llm_url, port);
    let started = Instant::now();
    let child = squidbot(home)
        .arg("gateway")
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    wait_ready_polling(
        &reqwest::Client::new(),
        &base,
        home,
        Duration::from_millis(5),
    )
    .await;
    (child, base, started.elapsed())
}

/// `(session id, user text)` of every message whose HTTP answer carried its reply.
type Acked = Arc<Mutex<Vec<(String, String)>>>;

async fn client(base: String, round: usize, client: usize, acked: Acked) {
    let http = reqwest::Client::new();
    for n in 0.. {
        let session = format!("s{}", fastrand::usize(..SESSIONS));
        let remember = if fastrand::u8(..8) == 0 {
            "-remember"
        } else {
            ""
        };
        let text = format!("r{round}-c{client}-n{n}{remember}");
        let sent = http
            .post(format!("{base}/v1/sessions/{session}/messages"))
            .bearer_auth(TOKEN)
            .json(&json!({ "text": text }))
            .send()
            .await;
        let Ok(response) = sent else { return };
        // A kill cuts requests off; a refusal means the suite itself is wrong (its token, its
        // route), which must not pass as a quiet round.
        assert!(
            !response.status().is_client_error(),
            "refused: {}",
            response.status()
        );
        if !response.status().is_success() {
            return;
        }
        let Ok(body) = response.json::<Value>().await else {
            return;
        };
        assert_eq!(body["reply"], format!("re: {text}"), "{body}");
        acked.lock().unwrap().push((session, text));
    }
}

struct Totals {
    consolidated: u64,
    summaries: usize,
    memory_writes: bool,
    torn_lines: usize,
}

/// Every invariant of the module docs, over the files in `home`.
async fn check(home: &Path, acked: &[(String, String)]) -> Totals {
    let store = JsonlStore::new(home);
    let mut sessions: HashMap<String, Vec<Value>> = HashMap::new();
    let mut totals = Totals {
        consolidated: 0,
        summaries: 0,
        memory_writes: false,
        torn_lines: 0,
    };
    for s in 0..SESSIONS {
        let id = format!("s{s}");
        let session = SessionId::new("http", &id).unwrap();
        let path = store.history_path(&session);
        if !path.exists() {
            continue;
        }
        // A torn line is no loss: its message was not yet durable, so it was never
        // acknowledged (which the acknowledged-messages check proves).
        let (messages, torn) = read_history(&path);
        totals.torn_lines += torn;
        store
            .load_tail(&session)
            .await
            .unwrap_or_else(|e| panic!("{}: the store cannot load it: {e}", path.display()));

        // No user message and no reply twice.
        let mut seen: HashMap<(String, String), usize> = HashMap::new();
        for m in &messages {
            let role = m["role"].as_str().unwrap_or_default().to_owned();
            let content = m["content"].as_str().unwrap_or_default().to_owned();
            if role == "user" || (role == "assistant" && content.starts_with("re: ")) {
                *seen.entry((role, content)).or_default() += 1;
            }
        }
        if let Some(((role, content), n)) = seen.iter().find(|(_, n)| **n > 1) {
            panic!("{id}: {role} message {content:?} is there {n} times");
        }

        // The cursor never points past what the summary covers.
        let covered = summarized(home, &session, &messages);
        if covered > 0 {
            totals.consolidated += covered;
            totals.summaries += 1;
        }
        sessions.insert(id, messages);
    }

    // Every acknowledged message is there, with its reply right after it (or after its tool
    // round).
    let positions: HashMap<(&str, &str), usize> = sessions
        .iter()
        .flat_map(|(id, messages)| {
            messages.iter().enumerate().filter_map(move |(i, m)| {
                (m["role"] == "user")
                    .then(|| (id.as_str(), m["content"].as_str().unwrap_or("")))
                    .map(|key| (key, i))
            })
        })
        .collect();
    for (session, text) in acked {
        let messages = sessions
            .get(session)
            .unwrap_or_else(|| panic!("acknowledged {text:?} but {session} has no history"));
        let at = *positions
            .get(&(session.as_str(), text.as_str()))
            .unwrap_or_else(|| panic!("acknowledged {text:?} is not in {session}"));
        let reply = format!("re: {text}");
        assert!(
            messages[at + 1..]
                .iter()
                .take(4)
                .any(|m| m["role"] == "assistant" && m["content"] == reply.as_str()),
            "acknowledged {text:?} has no reply in {session}"
        );
    }

    // MEMORY.md is whole.
    let memory = home.join("workspace").join("MEMORY.md");
    if let Ok(text) = std::fs::read_to_string(&memory) {
        assert!(
            text.starts_with("memory r") && text.ends_with("\nEND\n") && text.len() > MEMORY_FILL,
            "MEMORY.md is empty or torn ({} bytes): {:?}…",
            text.len(),
            &text[..text.len().min(60)]
        );
        totals.memory_writes = true;
    }
    totals
}

fn kills() -> usize {
    std::env::var("SQUIDBOT_PROOF_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow proof suite: scripts/proof crash"]
async fn sigkill_at_random_moments_loses_and_duplicates_nothing() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(handler);
    let dir = tempfile::tempdir().unwrap();
    let home: PathBuf = dir.path().to_owned();
    let acked: Acked = Arc::default();
    let kills = kills();
    let started = Instant::now();
    let mut ready_ms = Vec::with_capacity(kills);
    let mut last = None;
    for round in 0..kills {
        let (mut child, base, ready) = start_gateway(&home, &llm.url()).await;
        ready_ms.push(ready.as_secs_f64() * 1000.0);
        let before = acked.lock().unwrap().len();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| tokio::spawn(client(base.clone(), round, c, acked.clone())))
            .collect();
        tokio::time::sleep(Duration::from_millis(fastrand::u64(10..300))).await;
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        for c in clients {
            c.await.unwrap();
        }
        let acked_now = acked.lock().unwrap().clone();
        let totals = check(&home, &acked_now).await;
        if round % 20 == 0 || round + 1 == kills {
            println!(
                "kill {:>3}: {} messages acknowledged this round, {} in all; {} sessions \
                 consolidated ({} messages summarized); MEMORY.md written: {}; torn lines \
                 left by kills: {}",
                round + 1,
                acked_now.len() - before,
                acked_now.len(),
                totals.summaries,
                totals.consolidated,
                totals.memory_writes,
                totals.torn_lines
            );
        }
        last = Some(totals);
    }
    let totals = last.unwrap();
    ready_ms.sort_by(f64::total_cmp);
    let acked_total = acked.lock().unwrap().len();
    println!(
        "crash suite: {kills} SIGKILLs in {:.1} s; {acked_total} acknowledged messages, 0 lost, \
         0 duplicated; exec → /readyz after a kill: median {:.1} ms, max {:.1} ms",
        started.elapsed().as_secs_f64(),
        ready_ms[ready_ms.len() / 2],
        ready_ms[ready_ms.len() - 1]
    );
    assert!(acked_total > kills, "too little load to prove anything");
    assert!(totals.summaries > 0, "no consolidation happened");
    assert!(totals.memory_writes, "memory_write never ran");
}

/// The checker itself must catch what it looks for, or the suite proves nothing.
#[tokio::test]
async fn the_checker_catches_loss_duplicates_torn_lines_and_a_runaway_cursor() {
    async fn fails(setup: impl FnOnce(&Path), acked: &[(String, String)]) -> bool {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sessions")).unwrap();
        setup(dir.path());
        let home = dir.path().to_owned();
        let acked = acked.to_vec();
        tokio::spawn(async move { check(&home, &acked).await })
            .await
            .is_err()
    }
    let session = SessionId::new("http", "s0").unwrap();
    let stem = safe_id::encode(&session);
    let line = |role: &str, content: &str| {
        format!(
            "{}\n",
            json!({"role": role, "content": content, "timestamp": "2026-11-22T00:00:00Z"})
        )
    };
    let write = move |home: &Path, text: String| {
        std::fs::write(home.join("sessions").join(format!("{stem}.jsonl")), text).unwrap();
    };
    let ok = line("user", "a") + line("assistant", "re: a").as_str();
    let acked = [("s0".to_owned(), "a".to_owned())];
    assert!(
        !fails(|h| write(h, ok.clone()), &acked).await,
        "a good home passes"
    );
    assert!(fails(|_| {}, &acked).await, "a lost message");
    let twice = ok.clone() + line("assistant", "re: a").as_str();
    assert!(fails(|h| write(h, twice), &[]).await, "a reply sent twice");
    // A torn line left by a kill is skipped, but a message lost in one is caught.
    let torn = line("user", "b").trim_end()[..10].to_owned() + "\n" + ok.as_str();
    assert!(
        !fails(|h| write(h, torn), &acked).await,
        "an isolated torn line"
    );
    let hidden = line("user", "a").trim_end()[..10].to_owned() + ok.as_str();
    assert!(
        fails(|h| write(h, hidden), &acked).await,
        "a message merged into a torn line"
    );
    let stem = safe_id::encode(&session);
    let runaway = ok.clone();
    assert!(
        fails(
            move |h| {
                write(h, runaway);
                std::fs::write(
                    h.join("sessions").join(format!("{stem}.meta.json")),
                    r#"{"last_consolidated": 2}"#,
                )
                .unwrap();
            },
            &[]
        )
        .await,
        "a cursor past what summary.md covers"
    );
    assert!(
        fails(
            |h| {
                std::fs::create_dir_all(h.join("workspace")).unwrap();
                std::fs::write(h.join("workspace/MEMORY.md"), "memory r1\nmmm").unwrap();
            },
            &[]
        )
        .await,
        "a torn MEMORY.md"
    );
}
