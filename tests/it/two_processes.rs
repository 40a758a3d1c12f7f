//! Two processes on one home (#15): a second gateway is refused and names the first; MEMORY.md
//! written by a gateway and `squidbot agent -m` at the same moment loses no version.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::bin::{squidbot, stderr};
use crate::support::daemon::Gateway;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

// See: #15
#[tokio::test]
async fn issue_15_a_second_gateway_on_one_home_exits_1_naming_the_first() {
    let llm = ScriptedLlm::start().await;
    let first = Gateway::start(&llm.url(), "", &[]).await;
    let pid = first.child.id().unwrap();
    let mut second = squidbot(first.home());
    second.arg("gateway").kill_on_drop(true);
    // Without the lock the second gateway never exits (it retries the busy port); the limit
    // only turns that hang into a failure.
    let output = tokio::time::timeout(Duration::from_secs(60), second.output())
        .await
        .expect("the second gateway exits instead of running beside the first")
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!("another gateway (pid {pid})")),
        "{}",
        stderr(&output)
    );
    let (status, body) = first.say("still", "hi").await;
    assert_eq!(status, 200, "the first gateway still serves: {body}");
}

/// How many times each process replaces MEMORY.md.
const WRITES: usize = 100;

/// The `memory_write` calls of one writer: its `i`-th content has `2i + 1` words (writer 0) or
/// `2i + 2` words (writer 1), so every version written is known by its word count alone.
fn writes(writer: usize) -> Vec<(String, String, String)> {
    (0..WRITES)
        .map(|i| {
            let words = 2 * i + 1 + writer;
            let content = vec![format!("w{writer}v{i}"); words].join(" ");
            let arguments = json!({ "content": content }).to_string();
            (
                format!("w{writer}-{i}"),
                "memory_write".to_owned(),
                arguments,
            )
        })
        .collect()
}

/// The number in `(N words)` after `marker` in a tool result.
fn words_after(text: &str, marker: &str) -> Option<usize> {
    let rest = &text[text.find(marker)? + marker.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

// See: #15
#[tokio::test]
async fn issue_15_memory_written_by_a_gateway_and_an_agent_at_once_loses_no_version() {
    let llm = ScriptedLlm::start().await;
    // Both processes get their 100 writes only once both asked, so the writes overlap.
    let gate = Arc::new(tokio::sync::Barrier::new(2));
    llm.set_handler(move |request| {
        let last = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or(Value::Null);
        let text = last["content"].as_str().unwrap_or_default();
        let writer = (last["role"] == "user")
            .then(|| (0..2).find(|w| text.contains(&format!("write as {w}"))))
            .flatten();
        match writer {
            Some(writer) => Reply::Gated {
                gate: gate.clone(),
                then: Box::new(Reply::ToolCalls {
                    text: String::new(),
                    calls: writes(writer),
                }),
            },
            None => Reply::Text("done".into()),
        }
    });
    let gateway = Gateway::start(&llm.url(), "", &[]).await;
    let mut agent = squidbot(gateway.home());
    agent.args(["agent", "-m", "write as 1"]).kill_on_drop(true);
    let (said, output) = tokio::time::timeout(
        Duration::from_secs(120),
        futures_util::future::join(gateway.say("writer", "write as 0"), agent.output()),
    )
    .await
    .expect("both turns finish");
    assert_eq!(said.0, 200, "{}", said.1);
    let output = output.unwrap();
    assert!(output.status.success(), "{}", stderr(&output));

    // Every write as (words written, words of the version it replaced), from the calls and
    // their results in the requests that carried the results back.
    let mut written = HashMap::new();
    let mut results = Vec::new();
    for request in llm.requests() {
        for message in request["messages"].as_array().into_iter().flatten() {
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                let arguments: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                let words = arguments["content"]
                    .as_str()
                    .unwrap()
                    .split_whitespace()
                    .count();
                written.insert(call["id"].as_str().unwrap().to_owned(), words);
            }
            if message["role"] == "tool" {
                let text = message["content"].as_str().unwrap().to_owned();
                results.push((message["tool_call_id"].as_str().unwrap().to_owned(), text));
            }
        }
    }
    results.sort();
    results.dedup();
    assert_eq!(results.len(), 2 * WRITES, "{results:?}");
    let mut replaced_by: HashMap<Option<usize>, usize> = HashMap::new();
    for (id, text) in &results {
        assert!(text.starts_with("Memory updated"), "{id}: {text}");
        let new = written[id];
        assert_eq!(words_after(text, "Memory updated ("), Some(new), "{text}");
        let old = words_after(text, "previous version (");
        if let Some(other) = replaced_by.insert(old, new) {
            panic!(
                "the versions of {new} and {other} words both replaced {old:?}: one of the two \
                 was never kept as MEMORY.md.prev, a version lost"
            );
        }
    }
    // The writes form one chain from "no memory" to the final document.
    let (mut version, mut previous) = (None, None);
    for _ in 0..2 * WRITES {
        let next = replaced_by.get(&version).copied();
        assert!(next.is_some(), "no write replaced {version:?}");
        (previous, version) = (version, next);
    }
    let count = |name: &str| {
        std::fs::read_to_string(gateway.home().join("workspace").join(name))
            .unwrap()
            .split_whitespace()
            .count()
    };
    assert_eq!(Some(count("MEMORY.md")), version);
    assert_eq!(Some(count("MEMORY.md.prev")), previous);
}
