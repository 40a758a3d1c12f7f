//! Token usage, the ledger and budgets through the real binary and the scripted LLM: the
//! ledger, `/metrics`, `/status` and `squidbot usage` equal what the server reported
//! (consolidation and sub-agent calls included), estimates where it reported nothing, servers
//! that refuse `stream_options`, and budgets that stop the next call and hold across restarts.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::default_reply;
use crate::support::bin::{stderr, stdout};
use crate::support::config::TestConfig;
use crate::support::daemon::{Gateway, sse_events};
use crate::support::gateway::Events;
use crate::support::home::Home;
use crate::support::scripted_llm::{Reply, Reported, ScriptedLlm};

/// Every record of the ledger under `home`, in file order.
fn ledger(home: &Path) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(home.join("usage")) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("20")
        })
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|path| {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str::<Value>(line).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A fresh home whose config talks to `llm`, with `extra` YAML appended.
fn home_on(llm: &ScriptedLlm, extra: &str) -> Home {
    let home = Home::new();
    home.write_config(&llm.url(), extra);
    home
}

/// Runs `squidbot agent -m text` on `home`; it must print the scripted model's "ok".
async fn agent_says_ok(home: &Home, text: &str) {
    let output = home.run(&["agent", "-m", text]).await;
    assert_eq!(stdout(&output), "ok\n", "{}", stderr(&output));
}

/// Fails unless `request` was sent without `stream_options` (asked again, or from the start,
/// of a server that refuses them or cannot stream).
fn assert_no_stream_options(request: &Value) {
    assert!(request.get("stream_options").is_none(), "{request}");
}

/// Sums of what the server reported.
fn reported_sum(reported: &[(String, Reported)]) -> (u64, u64, u64) {
    reported.iter().fold((0, 0, 0), |(p, c, k), (_, r)| {
        (p + r.prompt, c + r.completion, k + r.cached)
    })
}

/// Sums of the ledger's records.
fn ledger_sum(records: &[Value]) -> (u64, u64, u64) {
    records.iter().fold((0, 0, 0), |(p, c, k), r| {
        (
            p + r["prompt_tokens"].as_u64().unwrap(),
            c + r["completion_tokens"].as_u64().unwrap(),
            k + r["cached_tokens"].as_u64().unwrap(),
        )
    })
}

/// The sum of every sample of `metric` whose labels contain `label`.
fn metric_sum(text: &str, metric: &str, label: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(&format!("{metric}{{")) && line.contains(label))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// Waits until the ledger holds `n` records (consolidation runs after the reply is sent).
async fn wait_for_records(home: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let records = ledger(home);
        if records.len() >= n || Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn config(url: &str, extra: &str) -> String {
    TestConfig::new(url)
        .model_line("price: {input: 2.0, output: 8.0, cached_input: 0.5, cache_write: 2.5}")
        .extra(extra)
        .yaml()
}

/// The parent turn delegates to a sub-agent (spawn, then spawn_await), the rest echo.
/// A gateway (no heartbeat) with a daily budget of 20 tokens and `more` budget settings, whose
/// first answer ("hello" in session `a`) has used the budget up; the model reports usage.
async fn spent_gateway(more: &str) -> (ScriptedLlm, Gateway) {
    let llm = ScriptedLlm::start().await;
    llm.report_usage();
    llm.set_handler(default_reply);
    let extra =
        format!("agents:\n  heartbeat:\n    enabled: false\nbudgets:\n  daily_tokens: 20\n{more}");
    let gateway = Gateway::start_yaml(&config(&llm.url(), &extra)).await;
    assert_eq!(gateway.reply("a", "hello").await, "re: hello");
    (llm, gateway)
}

fn delegating_reply(request: &Value) -> Reply {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    let calls = |id: &str, name: &str, args: String| Reply::ToolCalls {
        text: String::new(),
        calls: vec![(id.to_owned(), name.to_owned(), args)],
    };
    match (last["role"].as_str(), last["tool_call_id"].as_str()) {
        (Some("user"), _) if last["content"] == "look it up" => Reply::Text("sub answer".into()),
        (Some("user"), _) if last["content"] == "delegate" => {
            calls("c1", "spawn", json!({"task": "look it up"}).to_string())
        }
        (Some("tool"), Some("c1")) => {
            let id = last["content"].as_str().unwrap_or_default();
            calls("c2", "spawn_await", json!({"job_ids": id}).to_string())
        }
        (Some("tool"), _) => Reply::Text("delegated".into()),
        _ => default_reply(request),
    }
}

#[tokio::test]
async fn ledger_metrics_status_and_cli_equal_what_the_server_reported() {
    let llm = ScriptedLlm::start().await;
    llm.report_usage();
    llm.set_handler(delegating_reply);
    let extra = "agents:\n  heartbeat:\n    enabled: false\n  consolidation_threshold: 4\n  keep_recent: 2\ntools:\n  spawn:\n    enabled: true\n";
    let gateway = Gateway::start_yaml(&config(&llm.url(), extra)).await;
    assert_eq!(gateway.reply("u", "delegate").await, "delegated");
    for i in 0..4 {
        let (status, _) = gateway.say("u", &format!("m{i}")).await;
        assert_eq!(status, 200);
    }
    let reported = llm.reported();
    let records = wait_for_records(gateway.home(), reported.len()).await;
    let reported = llm.reported();
    assert_eq!(records.len(), reported.len(), "{records:#?}");
    assert_eq!(reported.len(), llm.request_count(), "every call reported");
    assert_eq!(ledger_sum(&records), reported_sum(&reported));
    let purposes: Vec<&str> = records
        .iter()
        .map(|r| r["purpose"].as_str().unwrap())
        .collect();
    for purpose in ["turn", "spawn", "consolidation"] {
        assert!(purposes.contains(&purpose), "{purpose} in {purposes:?}");
    }
    assert!(records.iter().all(|r| r["estimated"] == false));
    assert!(
        records
            .iter()
            .all(|r| r["model"] == "small" && r["pool"] == "default")
    );
    let spawned = records.iter().find(|r| r["purpose"] == "spawn").unwrap();
    assert!(
        spawned["session"].as_str().unwrap().starts_with("spawn:"),
        "{spawned}"
    );
    let consolidated = records
        .iter()
        .find(|r| r["purpose"] == "consolidation")
        .unwrap();
    assert_eq!(consolidated["session"], "http:u");

    let (prompt, completion, cached) = reported_sum(&reported);
    let metrics = gateway.get_text("/metrics").await;
    let tokens = |kind: &str| {
        metric_sum(
            &metrics,
            "squidbot_llm_tokens_total",
            &format!("kind=\"{kind}\""),
        )
    };
    assert_eq!(tokens("prompt"), prompt as f64, "{metrics}");
    assert_eq!(tokens("completion"), completion as f64);
    assert_eq!(tokens("cached"), cached as f64);
    // #36: cache writes are counted and priced apart, and the hit ratio is exported.
    let written: u64 = reported.iter().map(|(_, r)| r.cache_written).sum();
    assert!(written > 0 && cached > 0);
    assert_eq!(tokens("cache_write"), written as f64, "{metrics}");
    let ratio = metric_sum(&metrics, "squidbot_llm_cache_hit_ratio", "model=\"small\"");
    assert!(
        (ratio - cached as f64 / prompt as f64).abs() < 1e-9,
        "{ratio}: {metrics}"
    );
    assert!(
        metric_sum(
            &metrics,
            "squidbot_llm_tokens_total",
            "purpose=\"consolidation\",kind=\"prompt\""
        ) > 0.0,
        "{metrics}"
    );
    let cost = ((prompt - cached - written) as f64 * 2.0
        + cached as f64 * 0.5
        + written as f64 * 2.5
        + completion as f64 * 8.0)
        / 1_000_000.0;
    let metric_cost = metric_sum(&metrics, "squidbot_llm_cost_total", "model=\"small\"");
    assert!((metric_cost - cost).abs() < 1e-9, "{metric_cost} vs {cost}");

    let status = gateway.get_json("/status").await;
    let today = &status["usage"]["today"];
    assert_eq!(today["prompt_tokens"], prompt, "{status:#}");
    assert_eq!(today["completion_tokens"], completion);
    assert_eq!(today["calls"], reported.len());
    assert_eq!(status["usage"]["month"]["cached_tokens"], cached);
    assert_eq!(status["usage"]["month"]["cache_written_tokens"], written);

    let home = Home::at(gateway.home());
    let output = home.run(&["usage", "--by", "purpose", "--json"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let table: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(table["total"]["prompt_tokens"], prompt);
    assert_eq!(table["total"]["completion_tokens"], completion);
    assert_eq!(table["total"]["cached_tokens"], cached, "{table}");
    assert_eq!(table["total"]["cache_written_tokens"], written, "{table}");
    let rate = table["total"]["cache_hit_rate"].as_f64().unwrap();
    assert!(
        (rate - cached as f64 / prompt as f64).abs() < 1e-9,
        "{table}"
    );
    let output = home.run(&["usage", "--by", "session"]).await;
    let text = stdout(&output);
    assert!(text.contains("http:u") && text.contains("spawn:"), "{text}");
}

#[tokio::test]
async fn a_daily_budget_stops_the_next_call_says_so_and_holds_across_a_restart() {
    let (llm, mut gateway) = spent_gateway("  timezone: Europe/Berlin\n").await;
    assert!(
        reported_sum(&llm.reported()).0 >= 20,
        "the first call used the budget up"
    );
    let calls = llm.request_count();
    // A failed turn answers the API with its message as `error`.
    let (_, body) = gateway.say("a", "again").await;
    let reply = body["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        reply.starts_with("Stopped: the daily token budget is used up")
            && reply.contains("budgets.daily_tokens")
            && reply.contains("resets at midnight (Europe/Berlin)"),
        "{body}"
    );
    assert_eq!(llm.request_count(), calls, "no call after the budget");
    let status = gateway.get_json("/status").await;
    assert_eq!(
        status["usage"]["budgets"]["budgets.daily_tokens"]["reached"], true,
        "{status:#}"
    );

    gateway.restart().await;
    let (_, body) = gateway.say("b", "after the restart").await;
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Stopped: the daily token budget"),
        "{body}"
    );
    assert_eq!(
        llm.request_count(),
        calls,
        "the budget held across the restart"
    );
    // Another process on the same home is stopped too, without calling the LLM.
    let output = Home::at(gateway.home())
        .run(&["agent", "-m", "from the terminal"])
        .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("Stopped: the daily token budget"),
        "{}",
        stderr(&output)
    );
    assert_eq!(llm.request_count(), calls);
}

#[tokio::test]
async fn a_turn_budget_ends_the_turn_before_the_next_round() {
    let llm = ScriptedLlm::start().await;
    llm.report_usage();
    llm.enqueue(Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            "c1".into(),
            "list_files".into(),
            json!({"path": "."}).to_string(),
        )],
    });
    let home = home_on(&llm, "budgets:\n  turn_tokens: 5\n");
    let output = home.run(&["agent", "-m", "look around"]).await;
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(
        text.contains("token budget of one turn") && text.contains("budgets.turn_tokens"),
        "{text}"
    );
    assert_eq!(llm.request_count(), 1, "the second round was not asked for");
    // The next turn is a new turn with a fresh budget.
    agent_says_ok(&home, "hello").await;
}

#[tokio::test]
async fn a_provider_without_usage_gets_estimates_marked_as_such() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let home = home_on(&llm, "");
    let output = home.run(&["agent", "-m", "hello there"]).await;
    assert_eq!(stdout(&output), "re: hello there\n", "{}", stderr(&output));
    let records = ledger(home.path());
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["estimated"], true);
    assert_eq!(record["purpose"], "turn");
    assert_eq!(record["session"], "cli:local");
    assert!(record["prompt_tokens"].as_u64().unwrap() > 0, "{record}");
    assert!(
        record["completion_tokens"].as_u64().unwrap() > 0,
        "{record}"
    );
    let output = home.run(&["usage", "--by", "model"]).await;
    let text = stdout(&output);
    assert!(
        text.contains("~ 1 of 1 calls have estimated tokens"),
        "{text}"
    );
}

#[tokio::test]
async fn a_non_streamed_answer_reports_usage_too() {
    let llm = ScriptedLlm::start().await;
    llm.report_usage();
    // llama.cpp's empty streamed body makes the client ask again without streaming.
    llm.enqueue(Reply::EmptyBody);
    let home = home_on(&llm, "");
    agent_says_ok(&home, "hi").await;
    let requests = llm.requests();
    assert_eq!(requests[1]["stream"], false);
    assert_no_stream_options(&requests[1]);
    let records = ledger(home.path());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["estimated"], false);
    assert_eq!(ledger_sum(&records), reported_sum(&llm.reported()));
}

#[tokio::test]
async fn a_server_that_rejects_stream_options_is_asked_again_without_them() {
    let llm = ScriptedLlm::start().await;
    llm.report_usage();
    llm.reject_stream_options();
    let home = home_on(&llm, "");
    agent_says_ok(&home, "hi").await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["stream_options"]["include_usage"], true);
    assert_no_stream_options(&requests[1]);
    // Streamed without `include_usage`, the server reports nothing: the tokens are estimated.
    let records = ledger(home.path());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["estimated"], true);
    // The next process knows it from the home: its first request goes without them.
    agent_says_ok(&home, "again").await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "no wasted request");
    assert_no_stream_options(&requests[2]);
}

/// A server that sends an empty stream when tools are offered (llama.cpp without a tool-call
/// parser) is asked again without streaming, and later processes ask it so from the start.
#[tokio::test]
async fn a_server_that_cannot_stream_tools_is_asked_unstreamed_from_then_on() {
    let llm = ScriptedLlm::start().await;
    llm.enqueue(Reply::EmptyBody);
    let home = home_on(&llm, "");
    agent_says_ok(&home, "hi").await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0]["tools"].as_array().unwrap().is_empty());
    assert_eq!(
        (&requests[0]["stream"], &requests[1]["stream"]),
        (&json!(true), &json!(false))
    );
    agent_says_ok(&home, "again").await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "no wasted request");
    assert_eq!(requests[2]["stream"], false);
}

#[tokio::test]
async fn a_torn_ledger_line_is_skipped_and_the_budget_still_counts_the_rest() {
    let llm = ScriptedLlm::start().await;
    llm.report_usage();
    let home = home_on(&llm, "budgets:\n  daily_tokens: 1000000\n");
    let output = home.run(&["agent", "-m", "one"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    // A crash mid-append leaves half a line.
    let file = std::fs::read_dir(home.path().join("usage"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("{\"time\":\"2026-");
    std::fs::write(&file, text).unwrap();
    let output = home.run(&["agent", "-m", "two"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let output = home.run(&["usage", "--json"]).await;
    let table: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let (prompt, _, _) = reported_sum(&llm.reported());
    assert_eq!(table["total"]["calls"], 2, "{table}");
    assert_eq!(table["total"]["prompt_tokens"], prompt);
}

#[tokio::test]
async fn cron_runs_over_budget_are_skipped_visibly_and_the_owner_told_once() {
    let (llm, mut gateway) = spent_gateway("").await;
    let calls = llm.request_count();

    let mut events = Events::open(&gateway, "inbox").await;
    gateway.cron_every_second("ping", "say pong", "http:inbox");

    // The first skipped run tells the owner; later ones are only counted.
    events.next_within("message", Duration::from_secs(40)).await;
    let deadline = Instant::now() + Duration::from_secs(40);
    let status = loop {
        let status = gateway.get_json("/status").await;
        if status["usage"]["skipped"]["cron"]["count"]
            .as_u64()
            .unwrap_or(0)
            >= 3
            || Instant::now() > deadline
        {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let skipped = &status["usage"]["skipped"]["cron"];
    assert!(skipped["count"].as_u64().unwrap() >= 3, "{status:#}");
    assert_eq!(skipped["last_budget"], "budgets.daily_tokens");
    // Whatever else arrived on the stream meanwhile: no second notice.
    events.drain(Duration::from_millis(200)).await;
    let notices: Vec<(String, Value)> = sse_events(&events.seen)
        .into_iter()
        .filter(|(name, _)| name == "message")
        .collect();
    assert_eq!(notices.len(), 1, "{}", events.seen);
    let text = notices[0].1["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Stopped: the daily token budget"),
        "{text}"
    );
    assert_eq!(llm.request_count(), calls, "no LLM call for a skipped run");
    assert!(
        !gateway.session_file("inbox").exists(),
        "a skipped run writes nothing to the history"
    );

    // After a restart the budget still holds, and the owner, told today, is not told again.
    gateway.restart().await;
    let mut events = Events::open(&gateway, "inbox").await;
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let status = gateway.get_json("/status").await;
        let count = status["usage"]["skipped"]["cron"]["count"].as_u64();
        if count.unwrap_or(0) >= 2 || Instant::now() > deadline {
            assert!(count.unwrap_or(0) >= 2, "{status:#}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    events.drain(Duration::from_millis(200)).await;
    assert!(!events.seen.contains("event: message"), "{}", events.seen);
    assert_eq!(llm.request_count(), calls);
}
