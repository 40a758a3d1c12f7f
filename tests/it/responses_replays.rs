//! #36: OpenAI's Responses API, recorded streams replayed over real HTTP into the real binary,
//! and the request shape checked against the API's documented rules.
//!
//! The recordings in `tests/it/data/provider-replays/openai-responses-*.sse` (origin and
//! licence in its `SOURCES.md`; the `.doc.sse` ones are written from the documented event
//! format, since no public recording of them was found) are served verbatim at
//! `/v1/responses` as the answer to `squidbot agent -m`, with the provider configured as
//! `api: responses`. The expectations come from the recordings themselves.
//!
//! The documented rules a request must keep (platform.openai.com, "Reasoning models",
//! "Function calling", "Conversation state"): nothing is stored (`store: false`), so the
//! reasoning is asked for encrypted (`include: ["reasoning.encrypted_content"]`) and every
//! reasoning item goes back verbatim, before the function calls it led to; every
//! `function_call_output` answers a `function_call` before it, by `call_id`.

use std::sync::Arc;

use serde_json::{Value, json};
use squidbot::core::message::{Message, Role};
use squidbot::llm::{Endpoint, ResponsesLlm, Timeouts, http_client};

use crate::provider_replays::recording;
use crate::request_shapes::{ask_with_shell, reasoned_calls, shell_result};
use crate::support::bin::{stderr, stdout};
use crate::support::home::Home;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// The recording served as the 200 SSE answer it was.
fn replay(name: &str) -> Reply {
    Reply::Raw {
        content_type: "text/event-stream".to_owned(),
        body: recording(name),
    }
}

/// The `data:` events of a recording, parsed.
fn events(name: &str) -> Vec<Value> {
    recording(name)
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// A home whose pool `default` is the models `models` (ids sent to the API) in order, all at
/// one provider speaking the Responses API, with no retries (a failure falls back at once).
fn home_for(llm: &ScriptedLlm, models: &[&str]) -> Home {
    let home = Home::new();
    let mut text = format!(
        "llm:\n  default_pool: default\n  providers:\n    openai:\n      api_base: \"{}\"\n      \
         api_key: test-key\n      api: responses\n  models:\n",
        llm.url()
    );
    for (n, model) in models.iter().enumerate() {
        text.push_str(&format!(
            "    m{n}:\n      provider: openai\n      model: \"{model}\"\n"
        ));
    }
    let names: Vec<String> = (0..models.len()).map(|n| format!("m{n}")).collect();
    text.push_str(&format!(
        "  pools:\n    default: [{}]\n  retry:\n    max_retries: 0\n",
        names.join(", ")
    ));
    std::fs::write(home.config(), text).unwrap();
    home
}

/// `squidbot usage --json`'s totals: (prompt, completion, cached).
async fn usage_totals(home: &Home) -> (u64, u64, u64) {
    let output = home.run(&["usage", "--json"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let table: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let total = &table["total"];
    let number = |key: &str| {
        total[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {table}"))
    };
    (
        number("prompt_tokens"),
        number("completion_tokens"),
        number("cached_tokens"),
    )
}

/// The documented rules every request keeps.
fn documented_rules(body: &Value) {
    assert_eq!(body["stream"], true, "{body}");
    assert_eq!(body["store"], false, "{body}");
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert!(body.get("messages").is_none(), "{body}");
    let input = body["input"].as_array().unwrap();
    let mut called: Vec<&str> = Vec::new();
    for (at, item) in input.iter().enumerate() {
        match item["type"].as_str().unwrap() {
            "reasoning" => {
                // A reasoning item goes back with the item it led to, right after it.
                assert!(item["encrypted_content"].is_string(), "{item}");
                let next = input
                    .get(at + 1)
                    .expect("reasoning without its following item");
                let follows = next["type"] == "function_call"
                    || (next["type"] == "message" && next["role"] == "assistant");
                assert!(follows, "reasoning followed by {next}");
            }
            "function_call" => called.push(item["call_id"].as_str().unwrap()),
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap();
                assert!(called.contains(&id), "{id} answers no call before it");
                assert!(item["output"].is_string(), "{item}");
            }
            "message" => {
                let role = item["role"].as_str().unwrap();
                assert!(["user", "assistant", "developer"].contains(&role), "{item}");
            }
            other => panic!("unexpected input item {other}: {item}"),
        }
    }
}

#[tokio::test]
async fn text_streams_and_cached_usage_reaches_the_ledger() {
    let llm = ScriptedLlm::start().await;
    let home = home_for(&llm, &["gpt-5.3-codex"]);
    llm.enqueue(replay("openai-responses-phase-cached.sse"));
    let output = home.run(&["agent", "-m", "AI news today?"]).await;
    let (out, err) = (stdout(&output), stderr(&output));
    assert!(output.status.success(), "{err}");
    assert!(out.starts_with("Got it — I’ll quickly check"), "{out}");
    assert!(
        out.contains("with links.\n\nHere are a few **AI headlines for today"),
        "{out}"
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    documented_rules(&requests[0]);
    assert_eq!(requests[0]["model"], "gpt-5.3-codex");
    assert_eq!(
        requests[0]["input"][0],
        json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "AI news today?"}]})
    );
    // The system prompt is the instructions, not an input item.
    assert!(!requests[0]["instructions"].as_str().unwrap().is_empty());
    assert_eq!(usage_totals(&home).await, (7112, 463, 3072));
}

#[tokio::test]
async fn reasoning_goes_back_verbatim_before_its_call_in_the_next_round() {
    let llm = ScriptedLlm::start().await;
    let home = home_for(&llm, &["gpt-5.1-codex-max"]);
    llm.enqueue(replay("openai-responses-reasoning-tool-call.sse"));
    llm.enqueue(replay("openai-responses-reasoning-final.sse"));
    let output = home.run(&["agent", "-m", "(12 + 7) * 3 * 10?"]).await;
    let (out, err) = (stdout(&output), stderr(&output));
    assert!(output.status.success(), "{err}");
    assert_eq!(out, "The final result is **570**.\n");
    assert!(
        !out.contains("Calculating step-by-step"),
        "reasoning shown: {out}"
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        documented_rules(request);
    }
    // The reasoning item as `response.output_item.done` gave it, then the call it led to.
    let recorded = events("openai-responses-reasoning-tool-call.sse");
    let done: Vec<&Value> = recorded
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| &e["item"])
        .collect();
    let input = requests[1]["input"].as_array().unwrap();
    let at = input.iter().position(|i| i["type"] == "reasoning").unwrap();
    assert_eq!(&input[at], done[0]);
    assert_eq!(input[at + 1]["type"], "function_call");
    assert_eq!(input[at + 1]["call_id"], "call_AB6AaRZ1FYZB2RwS6A5vbdqn");
    assert_eq!(input[at + 1]["name"], "calculator");
    let arguments: Value =
        serde_json::from_str(input[at + 1]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"a": 12, "b": 7, "op": "add"}));
    // squidbot has no calculator: the call is answered, paired, with the error.
    assert_eq!(input[at + 2]["type"], "function_call_output");
    assert_eq!(input[at + 2]["call_id"], "call_AB6AaRZ1FYZB2RwS6A5vbdqn");
    assert!(
        input[at + 2]["output"]
            .as_str()
            .unwrap()
            .contains("calculator")
    );
    assert_eq!(usage_totals(&home).await, (134 + 299, 28 + 12, 0));
}

#[tokio::test]
async fn fragmented_parallel_calls_run_in_order_and_go_back_paired() {
    let llm = ScriptedLlm::start().await;
    let home = home_for(&llm, &["gpt-5.4"]);
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    std::fs::write(home.path().join("workspace/notes.txt"), "squid ink recipe").unwrap();
    llm.enqueue(replay("openai-responses-parallel-calls.doc.sse"));
    llm.enqueue(replay("openai-responses-reasoning-final.sse"));
    let output = home.run(&["agent", "-m", "read my notes"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    documented_rules(&requests[1]);
    let input = requests[1]["input"].as_array().unwrap();
    let calls: Vec<(&str, &str)> = input
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| (i["call_id"].as_str().unwrap(), i["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_doc_read", "read_file"),
            ("call_doc_list", "list_files")
        ]
    );
    let outputs: Vec<(&str, &str)> = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| {
            (
                i["call_id"].as_str().unwrap(),
                i["output"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(outputs.len(), 2, "{input:?}");
    assert_eq!(outputs[0].0, "call_doc_read");
    assert!(outputs[0].1.contains("squid ink recipe"), "{outputs:?}");
    assert_eq!(outputs[1].0, "call_doc_list");
    assert!(outputs[1].1.contains("notes.txt"), "{outputs:?}");
    assert_eq!(usage_totals(&home).await, (210 + 299, 41 + 12, 128));
}

#[tokio::test]
async fn an_incomplete_reply_is_shown_cut_short() {
    let llm = ScriptedLlm::start().await;
    let home = home_for(&llm, &["gpt-5.4"]);
    llm.enqueue(replay("openai-responses-incomplete.doc.sse"));
    let output = home.run(&["agent", "-m", "tell me a story"]).await;
    let out = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(out.starts_with("Once upon a time, in a far"), "{out}");
    assert!(
        out.contains("cut short") && out.contains("token limit"),
        "{out}"
    );
    assert_eq!(usage_totals(&home).await, (12, 16, 0));
}

#[tokio::test]
async fn failures_in_the_stream_are_reported_or_fallen_back_from() {
    // The recorded quota error: the person reads OpenAI's words; no retry can help.
    let llm = ScriptedLlm::start().await;
    let home = home_for(&llm, &["gpt-5-nano"]);
    llm.enqueue(replay("openai-responses-error.sse"));
    let output = home.run(&["agent", "-m", "hi"]).await;
    let shown = format!("{}{}", stdout(&output), stderr(&output));
    assert!(shown.contains("exceeded your current quota"), "{shown}");
    assert_eq!(llm.requests().len(), 1);

    // A server error is retryable: the pool falls back to its next model.
    let llm = ScriptedLlm::start().await;
    let home = home_for(&llm, &["gpt-5.4", "gpt-5.4-mini"]);
    llm.enqueue_for("gpt-5.4", replay("openai-responses-server-error.doc.sse"));
    llm.enqueue_for(
        "gpt-5.4-mini",
        replay("openai-responses-reasoning-final.sse"),
    );
    let output = home.run(&["agent", "-m", "hi"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "The final result is **570**.\n");
    assert_eq!(llm.requests().len(), 2);
}

/// A history that crossed APIs, sent by the real client: the Responses API's reasoning goes
/// back before its call, another API's is left out, a result without its call is dropped.
#[tokio::test]
async fn a_crossed_history_keeps_the_documented_shape() {
    let server = ScriptedLlm::start().await;
    server.enqueue(replay("openai-responses-reasoning-final.sse"));
    let mut endpoint = Endpoint::new("gpt", "gpt-5.4", server.url());
    endpoint.max_tokens = Some(1000);
    let timeouts = Timeouts::default();
    let client = ResponsesLlm::new(http_client(&timeouts).unwrap(), endpoint, timeouts);
    let now = chrono::Utc::now().fixed_offset();
    let reasoning =
        json!({"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAA-1", "summary": []});
    let thinking = reasoned_calls(
        "",
        "anthropic",
        vec![json!({"type": "thinking", "thinking": "hm", "signature": "sig"})],
        &["toolu_01"],
    );
    let reasoned = reasoned_calls(
        "Checking twice.",
        "responses",
        vec![reasoning.clone()],
        &["call_a", "call_b"],
    );
    let messages: Vec<Arc<Message>> = [
        Message::new(Role::System, "You are squidbot.", now),
        shell_result("call_lost"),
        Message::new(Role::User, "what time is it?", now),
        thinking,
        shell_result("toolu_01"),
        reasoned,
        shell_result("call_a"),
        shell_result("call_b"),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let response = ask_with_shell(&client, &messages).await;
    assert_eq!(response.text, "The final result is **570**.");
    let body = &server.requests()[0];
    documented_rules(body);
    assert_eq!(body["instructions"], "You are squidbot.");
    assert_eq!(body["max_output_tokens"], 1000);
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "shell", "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            "strict": false}])
    );
    let kinds: Vec<String> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{} {}",
                i["type"].as_str().unwrap(),
                i["call_id"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message ",
            "function_call toolu_01",
            "function_call_output toolu_01",
            "reasoning ",
            "message ",
            "function_call call_a",
            "function_call call_b",
            "function_call_output call_a",
            "function_call_output call_b",
        ]
    );
    assert_eq!(body["input"][3], reasoning);
    assert!(!body.to_string().contains("\"signature\""), "{body}");
}
