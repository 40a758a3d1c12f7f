//! Chat commands through a real gateway: `/help`, `/status` and `/stop` are answered by
//! squidbot itself, never reach the LLM and are not written to the history; `/stop` cancels
//! the session's running turn, which the history then records. `/model` switches one
//! conversation's model (across restarts), `/new` gives the conversation an empty session
//! while the old one stays on disk and searchable, `/compact` summarizes now, `/usage` reports
//! the ledger's figures for the conversation and the day.

use std::process::Stdio;
use std::time::Duration;

use crate::harness::default_reply;
use crate::support::config::TestConfig;
use crate::support::daemon::Gateway;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

#[tokio::test]
async fn help_and_status_are_answered_without_the_llm_or_the_history() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), "", &[]).await;

    let help = gw.reply("cmds", "/help").await;
    for command in ["/help", "/stop", "/status"] {
        assert!(help.contains(command), "{help}");
    }
    assert_eq!(llm.request_count(), 0, "a command never reaches the LLM");
    assert!(!gw.session_file("cmds").exists(), "nor the history");

    let (status, body) = gw.say("cmds", "hello there").await;
    assert_eq!(status, 200, "{body}");
    let line = gw.reply("cmds", " /STATUS ").await;
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
    // Someone else's /stop ended it: a conflict, not a failure upstream.
    assert_eq!(slow_status, 409, "{slow_body}");
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

/// A gateway whose LLM has two models, `small` (the default pool's) and `big`, and keeps the
/// newest 2 messages when it summarizes.
async fn two_models(llm: &ScriptedLlm) -> Gateway {
    let url = llm.url();
    let config = move |port: u16| {
        TestConfig::new(&url)
            .more_model("big", "big-model")
            .pool("both", "[big, small]")
            .agents_line("keep_recent: 2")
            .gateway_on(port)
            .gateway_line("shutdown_grace_seconds: 10")
            .yaml()
    };
    Gateway::start_with_config(config, &[], Stdio::piped()).await
}

/// The model the LLM was last asked for.
fn last_model(llm: &ScriptedLlm) -> String {
    let requests = llm.requests();
    requests.last().unwrap()["model"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The records of a JSONL history.
fn records(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn model_lists_switches_this_conversation_survives_a_restart_and_goes_back() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let mut gw = two_models(&llm).await;

    let list = gw.reply("m", "/model").await;
    for line in [
        "* default (pool: small), the default",
        "- both (pool: big, small)",
        "- big (model: big-model)",
        "- small (model: scripted-model)",
    ] {
        assert!(list.contains(line), "{line:?} in {list}");
    }

    let unknown = gw.reply("m", "/model huge").await;
    assert!(
        unknown.starts_with("There is no model or pool named huge; nothing changed.")
            && unknown.contains("- big (model: big-model)"),
        "{unknown}"
    );
    assert_eq!(
        gw.reply("m", "/model big").await,
        "This conversation now uses big (model: big-model)."
    );
    assert_eq!(llm.request_count(), 0, "commands never reach the LLM");

    gw.say("m", "hello").await;
    assert_eq!(last_model(&llm), "big-model");
    gw.say("other", "hello").await;
    assert_eq!(last_model(&llm), "scripted-model", "only this conversation");

    gw.restart().await;
    gw.say("m", "still there?").await;
    assert_eq!(
        last_model(&llm),
        "big-model",
        "the choice survives a restart"
    );
    let list = gw.reply("m", "/model").await;
    assert!(list.contains("* big (model: big-model)"), "{list}");
    let status = gw.reply("m", "/status").await;
    assert!(status.starts_with("model: big"), "{status}");

    assert_eq!(
        gw.reply("m", "/model default").await,
        "This conversation is back on the default, default."
    );
    gw.say("m", "and now?").await;
    assert_eq!(last_model(&llm), "scripted-model");
    let history = records(&gw.session_file("m"));
    assert_eq!(history.len(), 6, "only the three turns: {history:?}");
    assert!(
        history
            .iter()
            .all(|r| !r["content"].as_str().unwrap().starts_with('/'))
    );
}

#[tokio::test]
async fn new_starts_an_empty_session_and_the_old_one_stays_searchable() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let mut gw = two_models(&llm).await;
    gw.say("n", "/model big").await;
    gw.say("n", "my fruit is the kumquat").await;
    let old = gw.session_file("n");
    let old_history = std::fs::read_to_string(&old).unwrap();
    assert_eq!(old_history.lines().count(), 2);

    assert_eq!(
        gw.reply("n", "/new").await,
        "New conversation started. The previous one stays in the history as http:n; search_history finds it."
    );
    let before = llm.request_count();
    gw.say("n", "what is my fruit?").await;
    let request = &llm.requests()[before];
    let messages = request["messages"].as_array().unwrap();
    assert!(
        !request["messages"].to_string().contains("kumquat"),
        "the new session starts empty: {messages:?}"
    );
    assert_eq!(messages.iter().filter(|m| m["role"] == "user").count(), 1);
    assert_eq!(request["model"], "big-model", "/new keeps the model");
    assert_eq!(std::fs::read_to_string(&old).unwrap(), old_history);
    let fresh = gw.session_file("n#2");
    assert_eq!(records(&fresh).len(), 2);

    // The key stays on the new session after a restart, and the old one is found.
    gw.restart().await;
    llm.enqueue(Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            "call_1".into(),
            "search_history".into(),
            serde_json::json!({"query": "kumquat"}).to_string(),
        )],
    });
    llm.enqueue(Reply::Text("found it".into()));
    let before = llm.request_count();
    let (status, body) = gw.say("n", "search for my fruit").await;
    assert_eq!(status, 200, "{body}");
    let result = llm.requests()[before + 1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(result["role"], "tool");
    let text = result["content"].as_str().unwrap();
    assert!(
        text.contains("session http:n ")
            || text.contains("session http:n\n")
            || text.contains("http:n ·"),
        "{text}"
    );
    assert!(text.contains("my fruit is the kumquat"), "{text}");
    assert_eq!(records(&fresh).len(), 6, "the turn went to the new session");
    assert_eq!(std::fs::read_to_string(&old).unwrap(), old_history);
}

#[tokio::test]
async fn compact_summarizes_now_or_says_there_is_nothing_to_do() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = two_models(&llm).await;
    assert_eq!(
        gw.reply("c", "/compact").await,
        "Nothing to summarize: 0 messages since the last summary, and the newest 2 always stay as they are."
    );
    for text in ["one", "two", "three"] {
        gw.say("c", text).await;
    }
    let before = llm.request_count();
    assert_eq!(
        gw.reply("c", "/compact").await,
        "Summarized 4 messages; the newest 2 stay as they are."
    );
    let summarized = crate::harness::summarized_lines(&llm.requests()[before..]);
    assert_eq!(summarized, ["user: one", "user: two"]);
    let status = gw.reply("c", "/status").await;
    assert!(
        status.contains("6 messages, 2 since the last summary"),
        "{status}"
    );
    let compacted = gw.reply("c", "/compact").await;
    assert!(
        compacted.starts_with("Nothing to summarize: 2 messages since the last summary"),
        "{compacted}"
    );
}

#[tokio::test]
async fn usage_shows_this_conversation_and_today_with_cache_hits() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    llm.report_usage();
    let gw = two_models(&llm).await;
    gw.say("u", "hello").await;
    gw.say("u", "again").await;
    gw.say("elsewhere", "hi").await;
    let reported = llm.reported();
    assert_eq!(reported.len(), 3);
    let sum = |calls: &[(String, crate::support::scripted_llm::Reported)]| {
        calls.iter().fold((0, 0, 0, 0), |(p, c, k, w), (_, r)| {
            (
                p + r.prompt,
                c + r.completion,
                k + r.cached,
                w + r.cache_written,
            )
        })
    };
    let line = |(prompt, completion, cached, written): (u64, u64, u64, u64), calls: usize| {
        format!(
            "{calls} calls, {prompt} prompt tokens ({cached} cached, {written} written to the cache, {:.0} % cache hits), {completion} completion tokens, cost 0.0000",
            cached as f64 * 100.0 / prompt as f64
        )
    };
    let usage = gw.reply("u", "/usage").await;
    assert_eq!(
        usage,
        format!(
            "this conversation (this month and the last): {}\ntoday, all conversations: {}",
            line(sum(&reported[..2]), 2),
            line(sum(&reported), 3)
        )
    );
    assert_eq!(llm.request_count(), 3, "/usage never reaches the LLM");
}
