//! The memory system end to end: consolidation with the cursor, the prompt layout, restarts,
//! failures, meta-consolidation, the warning, memory_write, concurrency and torn lines.

use std::collections::HashSet;
use std::sync::Arc;

use squidbot::core::memory_manager::{CONSOLIDATION_WARNING, Consolidation, MemorySettings};
use squidbot::core::message::Role;
use squidbot::core::session::SessionId;

use crate::harness::{BASE_PROMPT, Harness, META_MARK, SUMMARY_MARK, system_text};
use crate::support::scripted_llm::Reply;

fn settings(threshold: usize, keep_recent: usize) -> MemorySettings {
    MemorySettings {
        consolidation_threshold: threshold,
        keep_recent,
        summary_word_limit: 10_000,
    }
}

fn session(key: &str) -> SessionId {
    SessionId::new("test", key).unwrap()
}

/// The user texts covered by every summary request, in order.
/// A model whose requests with a system prompt starting with `mark` fail (500); it gives
/// every other request the harness's default reply.
fn failing(mark: &'static str) -> impl Fn(&serde_json::Value) -> Reply + Send + Sync + 'static {
    move |request| {
        if system_text(request).starts_with(mark) {
            Reply::Status {
                status: 500,
                body: "boom".into(),
                retry_after: None,
            }
        } else {
            crate::harness::default_reply(request)
        }
    }
}

fn summarized_lines(h: &Harness) -> Vec<String> {
    crate::harness::summarized_lines(&h.llm.requests())
}

#[tokio::test]
async fn consolidation_fires_only_when_unconsolidated_exceeds_threshold() {
    let h = Harness::start(settings(10, 4)).await;
    let s = session("threshold");
    for i in 0..5 {
        let (result, _) = h.say(&s, &format!("m{i}")).await;
        assert_eq!(
            result.unwrap().consolidation,
            Consolidation::NotDue,
            "turn {i}"
        );
    }
    assert_eq!(h.history(&s).len(), 10);
    assert!(h.requests_marked(SUMMARY_MARK).is_empty());

    let (result, _) = h.say(&s, "m5").await;
    assert_eq!(
        result.unwrap().consolidation,
        Consolidation::Done {
            messages: 8,
            cursor: 8,
            compressed: false
        }
    );
    assert_eq!(h.cursor(&s), 8);
    assert_eq!(h.summary(&s), "Summary of m0, m1, m2, m3.");
    assert_eq!(
        summarized_lines(&h),
        ["user: m0", "user: m1", "user: m2", "user: m3"]
    );
}

#[tokio::test]
async fn prompt_holds_exactly_memory_summary_and_the_tail() {
    let h = Harness::start(settings(10, 4)).await;
    let s = session("layout");
    std::fs::write(h.workspace.join("MEMORY.md"), "- likes tea\n").unwrap();
    for i in 0..6 {
        h.say(&s, &format!("m{i}")).await.0.unwrap();
    }
    h.say(&s, "now").await.0.unwrap();

    let last = h.chat_requests().pop().unwrap();
    let system = system_text(&last);
    assert_eq!(
        system,
        format!(
            "{BASE_PROMPT}\n\n{}\n\n## Your Memory\n\n- likes tea\n\n## Conversation Summary\n\nSummary of m0, m1, m2, m3.",
            squidbot::core::untrusted::SYSTEM_RULE
        )
    );
    let sent: Vec<(String, String)> = last["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let history = h.history(&s);
    // The tail at the time of the call: everything after the cursor up to the new message.
    let expected: Vec<(String, String)> = history[8..history.len() - 1]
        .iter()
        .map(|m| (format!("{:?}", m.role).to_lowercase(), m.content.clone()))
        .collect();
    assert_eq!(sent, expected);
    assert_eq!(sent.last().unwrap(), &("user".to_owned(), "now".to_owned()));
}

#[tokio::test]
async fn each_message_is_summarized_at_most_once_across_restarts() {
    let mut h = Harness::start(settings(10, 4)).await;
    let s = session("restarts");
    let mut n = 0;
    for _round in 0..3 {
        for _ in 0..17 {
            h.say(&s, &format!("m{n}")).await.0.unwrap();
            n += 1;
        }
        h.restart();
    }
    let lines = summarized_lines(&h);
    let unique: HashSet<&String> = lines.iter().collect();
    assert_eq!(
        unique.len(),
        lines.len(),
        "a message was summarized twice: {lines:?}"
    );
    let cursor = h.cursor(&s) as usize;
    let history = h.history(&s);
    let user_before_cursor = history[..cursor]
        .iter()
        .filter(|m| m.role == Role::User)
        .count();
    assert_eq!(
        lines.len(),
        user_before_cursor,
        "every consolidated user message is in exactly one summary"
    );
    assert!(
        history.len() - cursor <= 10,
        "tail {} stays within the threshold",
        history.len() - cursor
    );
}

#[tokio::test]
async fn a_failed_summary_changes_nothing_and_the_reply_still_arrives() {
    let h = Harness::start(settings(4, 2)).await;
    let s = session("failure");
    h.llm.set_handler(failing(SUMMARY_MARK));
    for i in 0..3 {
        let (result, delivered) = h.say(&s, &format!("m{i}")).await;
        let outcome = result.unwrap();
        assert_eq!(delivered, [format!("re: m{i}")]);
        if i == 2 {
            assert_eq!(outcome.consolidation, Consolidation::Failed);
        }
    }
    assert_eq!(h.cursor(&s), 0);
    assert_eq!(h.summary(&s), "");
    assert!(
        !h.home
            .join("sessions")
            .join(format!("{}.meta.json", h.stem(&s)))
            .exists()
    );

    // The next turn tries again and, with a healthy LLM, succeeds.
    h.llm.set_handler(crate::harness::default_reply);
    let (result, _) = h.say(&s, "m3").await;
    assert!(matches!(
        result.unwrap().consolidation,
        Consolidation::Done { .. }
    ));
    assert_eq!(h.cursor(&s), 6);
}

#[tokio::test]
async fn meta_consolidation_keeps_the_summary_within_the_limit() {
    let limit = 12;
    let h = Harness::start(MemorySettings {
        consolidation_threshold: 4,
        keep_recent: 2,
        summary_word_limit: limit,
    })
    .await;
    let s = session("meta");
    for i in 0..20 {
        h.say(&s, &format!("m{i}")).await.0.unwrap();
        let words = h.summary(&s).split_whitespace().count();
        assert!(
            words <= limit,
            "turn {i}: summary has {words} words: {:?}",
            h.summary(&s)
        );
    }
    assert!(
        !h.requests_marked(META_MARK).is_empty(),
        "meta-consolidation ran"
    );

    // A failing meta call keeps the long summary (nothing lost) and is retried next time.
    h.llm.set_handler(failing(META_MARK));
    let before = h.summary(&s);
    for i in 20..26 {
        h.say(&s, &format!("m{i}")).await.0.unwrap();
    }
    assert!(
        h.summary(&s).starts_with(&before),
        "the long summary is kept"
    );
    assert!(h.summary(&s).split_whitespace().count() > limit);
}

#[tokio::test]
async fn the_warning_appears_at_threshold_minus_two() {
    let h = Harness::start(settings(10, 4)).await;
    let s = session("warning");
    for i in 0..6 {
        h.say(&s, &format!("m{i}")).await.0.unwrap();
    }
    // Unconsolidated messages at each call (the new user message included): 1, 3, 5, 7, 9, 11.
    // The warning rides with the user message that was newest when it fell due (so the system
    // prompt, and the prefix a provider cached, stay as they were).
    let warned: Vec<bool> = h
        .chat_requests()
        .iter()
        .map(|r| {
            assert!(!system_text(r).contains(CONSOLIDATION_WARNING));
            r["messages"].as_array().unwrap().iter().any(|m| {
                m["role"] == "user"
                    && m["content"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("m4") && c.contains(CONSOLIDATION_WARNING))
            })
        })
        .collect();
    assert_eq!(warned, [false, false, false, false, true, true]);
}

#[tokio::test]
async fn memory_write_replaces_keeps_the_previous_version_and_refuses_empty() {
    let h = Harness::start(settings(100, 20)).await;
    let s = session("memory");
    let write = |id: &str, content: &str| Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            id.to_owned(),
            "memory_write".to_owned(),
            serde_json::json!({ "content": content }).to_string(),
        )],
    };
    h.llm.enqueue(write("c1", "- first fact"));
    h.llm.enqueue(Reply::Text("saved".into()));
    h.say(&s, "remember one").await.0.unwrap();
    h.llm.enqueue(write("c2", "- first fact\n- second fact"));
    h.llm.enqueue(Reply::Text("saved".into()));
    h.say(&s, "remember two").await.0.unwrap();
    assert_eq!(
        std::fs::read_to_string(h.workspace.join("MEMORY.md")).unwrap(),
        "- first fact\n- second fact"
    );
    assert_eq!(
        std::fs::read_to_string(h.workspace.join("MEMORY.md.prev")).unwrap(),
        "- first fact"
    );

    h.llm.enqueue(write("c3", "   "));
    h.llm.enqueue(Reply::Text("hm".into()));
    h.say(&s, "forget everything").await.0.unwrap();
    assert_eq!(
        std::fs::read_to_string(h.workspace.join("MEMORY.md")).unwrap(),
        "- first fact\n- second fact"
    );
    let refusal = h
        .history(&s)
        .into_iter()
        .find(|m| m.tool_call_id.as_deref() == Some("c3"))
        .unwrap();
    assert!(refusal.content.contains("refused"), "{}", refusal.content);

    // Global memory reaches every session's prompt.
    h.say(&session("other"), "hello").await.0.unwrap();
    let last = h.chat_requests().pop().unwrap();
    assert!(system_text(&last).contains("## Your Memory\n\n- first fact\n- second fact"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_turns_on_one_session_stay_ordered_and_consolidate_once_per_crossing() {
    let h = Arc::new(Harness::start(settings(10, 4)).await);
    let s = session("busy");
    let turns: Vec<_> = (0..50)
        .map(|i| {
            let h = h.clone();
            let s = s.clone();
            tokio::spawn(async move { h.say(&s, &format!("m{i}")).await.0.unwrap() })
        })
        .collect();
    let mut consolidations = 0;
    for turn in turns {
        if matches!(
            turn.await.unwrap().consolidation,
            Consolidation::Done { .. }
        ) {
            consolidations += 1;
        }
    }
    let history = h.history(&s);
    assert_eq!(history.len(), 100);
    for pair in history.chunks(2) {
        assert_eq!(pair[0].role, Role::User);
        assert_eq!(
            pair[1].content,
            format!("re: {}", pair[0].content),
            "a reply follows its own message"
        );
    }
    // Simulate the crossings: the tail grows by 2 a turn and drops to keep_recent above 10.
    let (mut tail, mut expected) = (0, 0);
    for _ in 0..50 {
        tail += 2;
        if tail > 10 {
            tail = 4;
            expected += 1;
        }
    }
    assert_eq!(consolidations, expected);
    assert_eq!(h.requests_marked(SUMMARY_MARK).len(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_sessions_run_in_parallel() {
    let h = Arc::new(Harness::start(settings(100, 20)).await);
    h.llm.set_handler(|request| Reply::Delay {
        ms: 3_000,
        then: Box::new(crate::harness::default_reply(request)),
    });
    let turns: Vec<_> = (0..50)
        .map(|i| {
            let h = h.clone();
            tokio::spawn(async move { h.say(&session(&format!("p{i}")), "hi").await.0.unwrap() })
        })
        .collect();
    // Serialized sessions would deliver one request every 3 s; parallel ones deliver all 50
    // before the first answer.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(2_500);
    while h.llm.request_count() < 50 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(h.llm.request_count(), 50);
    assert!(turns.iter().all(|t| !t.is_finished()));
    for turn in turns {
        turn.await.unwrap();
    }
}

#[tokio::test]
async fn a_torn_last_line_is_skipped_and_the_session_goes_on() {
    let h = Harness::start(settings(100, 20)).await;
    let s = session("torn");
    h.say(&s, "before").await.0.unwrap();
    let path = h
        .home
        .join("sessions")
        .join(format!("{}.jsonl", h.stem(&s)));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"role":"user","content":"half a li"#);
    std::fs::write(&path, bytes).unwrap();

    let store = squidbot::storage::JsonlStore::new(&h.home);
    let tail = squidbot::core::ports::store::HistoryStore::load_tail(&store, &s)
        .await
        .unwrap();
    assert_eq!(tail.messages.len(), 2);
    assert_eq!(tail.skipped_lines, 1);

    let (result, delivered) = h.say(&s, "after").await;
    result.unwrap();
    assert_eq!(delivered, ["re: after"]);
    let history = h.history(&s);
    let contents: Vec<&str> = history.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["before", "re: before", "after", "re: after"]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.lines().count(),
        5,
        "the torn fragment stays on a line of its own"
    );
}

#[tokio::test]
async fn the_token_budget_triggers_consolidation_before_the_threshold() {
    // A 300-token model with a 50-token reply reserve; each message is ~125 tokens.
    let h = Harness::start_with(settings(100, 2), Some(300)).await;
    let s = session("budget");
    h.llm.set_handler(|request| {
        if system_text(request).starts_with(SUMMARY_MARK) {
            Reply::Text("Short summary.".into())
        } else {
            crate::harness::default_reply(request)
        }
    });
    let long = "word ".repeat(100);
    for i in 0..4 {
        h.say(&s, &format!("{i} {long}")).await.0.unwrap();
    }
    assert!(
        !h.requests_marked(SUMMARY_MARK).is_empty(),
        "the budget forced a consolidation"
    );
    assert!(h.cursor(&s) > 0);
    for request in h.chat_requests() {
        let chars: usize = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap_or("").len())
            .sum();
        assert!(
            chars / 4 <= 300,
            "a prompt of ~{} tokens was sent",
            chars / 4
        );
    }
}

/// #36 item 2: a memory change leaves the system prompt a provider cached as it was; the
/// current MEMORY.md rides with the newest message until a consolidation takes it in.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_memory_change_keeps_the_cached_prefix_until_the_next_consolidation() {
    let h = Harness::start(settings(8, 2)).await;
    let s = session("cached");
    std::fs::write(h.workspace.join("MEMORY.md"), "- likes tea\n").unwrap();
    h.say(&s, "first").await.0.unwrap();
    let before = system_text(&h.chat_requests().pop().unwrap());
    assert!(before.contains("## Your Memory\n\n- likes tea"), "{before}");

    // Another session (or the owner by hand) changes the memory.
    std::fs::write(h.workspace.join("MEMORY.md"), "- likes coffee now\n").unwrap();
    h.say(&s, "second").await.0.unwrap();
    let request = h.chat_requests().pop().unwrap();
    assert_eq!(system_text(&request), before, "the system prompt changed");
    let messages = request["messages"].as_array().unwrap();
    let last = messages.last().unwrap()["content"].as_str().unwrap();
    assert!(last.starts_with("second"), "{last}");
    assert!(
        last.contains("MEMORY.md changed") && last.contains("- likes coffee now"),
        "{last}"
    );
    // Only the newest message carries it, and the history never does.
    let noted = messages
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("MEMORY.md changed"))
        })
        .count();
    assert_eq!(noted, 1);
    // (The scripted model echoes what it was sent; the person's own message is stored as sent.)
    assert!(
        h.history(&s)
            .iter()
            .filter(|m| m.role == Role::User)
            .all(|m| !m.content.contains("MEMORY.md changed"))
    );

    // Turns until a consolidation: then the system prompt shows the memory of then.
    for i in 0..4 {
        h.say(&s, &format!("more {i}")).await.0.unwrap();
    }
    let request = h.chat_requests().pop().unwrap();
    let after = system_text(&request);
    assert!(
        after.contains("## Conversation Summary"),
        "no consolidation yet: {after}"
    );
    assert!(after.contains("- likes coffee now"), "{after}");
    let last = request["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(!last.contains("MEMORY.md changed"), "{last}");
}
