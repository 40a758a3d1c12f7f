//! #36: Anthropic's own Messages API (`api: anthropic`), over real HTTP into the real binary.
//!
//! The answers are recordings of Anthropic's API (origin and licence of each file in
//! `data/provider-replays/SOURCES.md`; the few written from Anthropic's documentation say so
//! there), served verbatim at `/v1/messages`. The requests are checked against the API's
//! documented rules: the system prompt at the top, roles alternating, each `tool_use`
//! answered by a `tool_result` in the next message, at most four cache breakpoints, the key in
//! `x-api-key` with `anthropic-version` and no `Authorization`.

use std::sync::Arc;

use serde_json::{Value, json};
use squidbot::core::message::{Message, Role};
use squidbot::llm::{AnthropicLlm, Endpoint, Timeouts, http_client};

use crate::provider_replays::{ledger, recording, replay};
use crate::request_shapes::{ask_with_shell, reasoned_calls, shell_result};
use crate::support::bin::{stderr, stdout};
use crate::support::home::Home;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// The model id the recordings were made with.
const CLAUDE: &str = "claude-sonnet-4-20250514";

/// A home whose one model is Claude at the scripted server, over the Messages API.
fn anthropic_home(llm: &ScriptedLlm) -> Home {
    let home = Home::new();
    home.write_config(&llm.url(), "");
    let config = std::fs::read_to_string(home.config()).unwrap();
    let config = config
        .replace("    local:\n", "    local:\n      api: anthropic\n")
        .replace("model: scripted-model", &format!("model: {CLAUDE}"));
    std::fs::write(home.config(), config).unwrap();
    home
}

/// Counts the `cache_control` breakpoints anywhere in a request.
fn breakpoints(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key("cache_control"))
                + map.values().map(breakpoints).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(breakpoints).sum(),
        _ => 0,
    }
}

/// Asserts the documented shape of a Messages request: the system prompt only at the top,
/// strict alternation starting with the user, every `tool_use` answered by a `tool_result`
/// at the start of the next message, ids of the allowed pattern, at most four breakpoints.
fn assert_documented_shape(request: &Value) {
    assert!(request["max_tokens"].as_u64().is_some_and(|n| n > 0));
    assert_eq!(request["stream"], true);
    assert!(request["system"].as_array().is_some_and(|s| !s.is_empty()));
    let turns = request["messages"].as_array().unwrap();
    assert_eq!(turns[0]["role"], "user", "{request}");
    for (position, turn) in turns.iter().enumerate() {
        let role = turn["role"].as_str().unwrap();
        assert!(role == "user" || role == "assistant", "{role}");
        if let Some(next) = turns.get(position + 1) {
            assert_ne!(next["role"], turn["role"], "roles alternate: {request}");
        }
        let blocks = turn["content"].as_array().unwrap();
        assert!(!blocks.is_empty());
        for block in blocks {
            if block["type"] == "text" {
                assert!(!block["text"].as_str().unwrap().is_empty());
            }
        }
        let uses: Vec<&str> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap())
            .collect();
        for id in &uses {
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{id}"
            );
        }
        if !uses.is_empty() {
            let next = turns[position + 1]["content"].as_array().unwrap();
            let answered: Vec<&str> = next
                .iter()
                .take(uses.len())
                .map(|b| {
                    assert_eq!(b["type"], "tool_result");
                    b["tool_use_id"].as_str().unwrap()
                })
                .collect();
            assert_eq!(answered, uses);
        }
    }
    assert!(breakpoints(request) <= 4, "{request}");
}

#[tokio::test]
async fn issue_36_text_answers_and_usage_with_cache_figures() {
    // See: #36
    let llm = ScriptedLlm::start().await;
    let cases: &[(&str, &[&str], (u64, u64))] = &[
        (
            "anthropic-text.sse",
            &[
                "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?",
            ],
            (12, 30),
        ),
        // Server tools' blocks are not squidbot's: skipped, the text after them shown. The
        // usage counts every input token: 6 + 3337 written to the cache + 6289 read from it.
        (
            "anthropic-cache-usage.sse",
            &["The sum of the squares of the numbers 1 through 12 is **650**."],
            (9632, 198),
        ),
        (
            "anthropic-max-tokens.sse",
            &["Once upon a time, in a", "cut short", "token limit"],
            (25, 8),
        ),
        (
            "anthropic-refusal.sse",
            &["This request triggered restrictions on violative cyber content"],
            (18, 5),
        ),
    ];
    for (file, shown, (prompt, completion)) in cases {
        let home = anthropic_home(&llm);
        llm.enqueue(replay(file));
        let output = home.run(&["agent", "-m", "hello"]).await;
        let (out, err) = (stdout(&output), stderr(&output));
        assert!(output.status.success(), "{file}: {err}");
        for text in *shown {
            assert!(out.contains(text), "{file}: {text:?} not in {out:?}");
        }
        assert_eq!(ledger(&home), vec![(*prompt, *completion, false)], "{file}");
        if *file == "anthropic-cache-usage.sse" {
            let output = home.run(&["usage", "--json"]).await;
            let table: Value = serde_json::from_str(&stdout(&output)).unwrap();
            assert_eq!(table["total"]["prompt_tokens"], 9632, "{table}");
            assert_eq!(table["total"]["cached_tokens"], 6289, "{table}");
            assert_eq!(table["total"]["cache_written_tokens"], 3337, "{table}");
            assert_eq!(table["total"]["completion_tokens"], 198, "{table}");
        }
    }
}

/// A tool call expected in the next request: (id, name, input).
type ExpectedCall = (&'static str, &'static str, Value);

#[tokio::test]
async fn issue_36_tool_uses_run_and_go_back_paired_in_the_documented_shape() {
    // See: #36
    let llm = ScriptedLlm::start().await;
    let cases: &[(&str, &[ExpectedCall])] = &[
        (
            "anthropic-tool-use.sse",
            &[(
                "toolu_01N2eM4V43kGCDkq2Lw7ChWQ",
                "weather",
                json!({"location": "Florence,Italy"}),
            )],
        ),
        (
            "anthropic-parallel-tool-use.sse",
            &[
                (
                    "toolu_01UYxUYC2zRPY8wiutnF48eP",
                    "add",
                    json!({"a": 2, "b": 3}),
                ),
                (
                    "toolu_01VaRx1jpWCvPhi7L4kywAcd",
                    "multiply",
                    json!({"a": 2, "b": 3}),
                ),
            ],
        ),
    ];
    for (file, calls) in cases {
        let home = anthropic_home(&llm);
        let before = llm.requests().len();
        llm.enqueue(replay(file));
        llm.enqueue(replay("anthropic-text.sse"));
        let output = home.run(&["agent", "-m", "hello"]).await;
        assert!(output.status.success(), "{file}: {}", stderr(&output));
        assert!(
            stdout(&output).contains("How are you doing today?"),
            "{file}"
        );
        let requests = llm.requests();
        assert_eq!(requests.len() - before, 2, "{file}");
        for request in &requests[before..] {
            assert_documented_shape(request);
        }
        let next = &requests[before + 1];
        let turns = next["messages"].as_array().unwrap();
        let assistant = &turns[turns.len() - 2];
        assert_eq!(assistant["role"], "assistant");
        let sent: Vec<(&str, &str, &Value)> = assistant["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| {
                (
                    b["id"].as_str().unwrap(),
                    b["name"].as_str().unwrap(),
                    &b["input"],
                )
            })
            .collect();
        let expected: Vec<(&str, &str, &Value)> = calls
            .iter()
            .map(|(id, name, input)| (*id, *name, input))
            .collect();
        assert_eq!(sent, expected, "{file}");
        // The tools are not squidbot's: each result says so, as an error.
        let results = turns[turns.len() - 1]["content"].as_array().unwrap();
        assert_eq!(results.len(), calls.len(), "{file}");
        assert!(results.iter().all(|r| r["is_error"] == true), "{file}");
    }
}

#[tokio::test]
async fn issue_36_thinking_goes_back_signed_and_first_in_the_tool_turn() {
    // See: #36
    let llm = ScriptedLlm::start().await;
    let home = anthropic_home(&llm);
    llm.enqueue(replay("anthropic-thinking-tool-use.sse"));
    llm.enqueue(replay("anthropic-thinking-tool-use.2.sse"));
    let output = home
        .run(&["agent", "-m", "What's the weather in Florence, Italy?"])
        .await;
    let out = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        out.contains("The current weather in Florence, Italy is 40°C"),
        "{out}"
    );
    assert!(!out.contains("The user is asking"), "{out}");
    // The thinking block, as recorded: its text and signature joined from their deltas.
    let (mut thinking, mut signature) = (String::new(), String::new());
    for line in recording("anthropic-thinking-tool-use.sse").lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let event: Value = serde_json::from_str(data).unwrap();
        match event["delta"]["type"].as_str() {
            Some("thinking_delta") => {
                thinking.push_str(event["delta"]["thinking"].as_str().unwrap())
            }
            Some("signature_delta") => {
                signature.push_str(event["delta"]["signature"].as_str().unwrap())
            }
            _ => {}
        }
    }
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_documented_shape(&requests[1]);
    let turns = requests[1]["messages"].as_array().unwrap();
    let assistant = turns[turns.len() - 2]["content"].as_array().unwrap();
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": thinking, "signature": signature})
    );
    assert_eq!(assistant[1]["type"], "tool_use");
    assert_eq!(assistant[1]["id"], "toolu_01Js4AMfx5qpTLhwTusnvT68");
    assert_eq!(
        assistant[1]["input"],
        json!({"location": "Florence, Italy"})
    );
}

#[tokio::test]
async fn issue_36_headers_carry_the_key_and_version_and_no_bearer() {
    // See: #36
    let llm = ScriptedLlm::start().await;
    let home = anthropic_home(&llm);
    llm.enqueue(replay("anthropic-text.sse"));
    let output = home.run(&["agent", "-m", "hello"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let headers = llm.request_headers();
    let header = |name: &str| {
        headers[0]
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(header("x-api-key"), Some("test-key"));
    assert_eq!(header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(header("content-type"), Some("application/json"));
    assert_eq!(header("authorization"), None);
    let request = &llm.requests()[0];
    assert_documented_shape(request);
    assert_eq!(request["model"], CLAUDE);
    // The tools, the system prompt and the conversation's tail are each cached.
    assert_eq!(breakpoints(request), 3, "{request}");
    let tools = request["tools"].as_array().unwrap();
    assert!(tools.last().unwrap().get("cache_control").is_some());
    assert!(tools[0].get("input_schema").is_some());
}

#[tokio::test]
async fn issue_36_overloaded_falls_back_to_the_next_model() {
    // See: #36
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    let config = format!(
        "llm:\n  providers:\n    claude:\n      api: anthropic\n      api_base: \"{url}\"\n      api_key: k\n  models:\n    first:\n      provider: claude\n      model: claude-first\n    second:\n      provider: claude\n      model: claude-second\n  pools:\n    default: [first, second]\n  retry:\n    max_retries: 0\n",
        url = llm.url()
    );
    std::fs::write(home.config(), config).unwrap();
    // A 529 before the answer, and an `overloaded_error` in the middle of one.
    let overloaded = [
        Reply::Status {
            status: 529,
            body: recording("anthropic-overloaded.529.json"),
            retry_after: None,
        },
        replay("anthropic-overloaded-stream.sse"),
    ];
    for reply in overloaded {
        llm.enqueue_for("claude-first", reply);
        llm.enqueue_for("claude-second", replay("anthropic-text.sse"));
        let before = llm.requests().len();
        let output = home.run(&["agent", "-m", "hello"]).await;
        let out = stdout(&output);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(out.contains("How are you doing today?"), "{out}");
        let models: Vec<Value> = llm.requests()[before..]
            .iter()
            .map(|r| r["model"].clone())
            .collect();
        assert_eq!(models, [json!("claude-first"), json!("claude-second")]);
    }
    // The 529 billed nothing; the stream that broke had reported 25 input tokens and 1 output
    // token, which the provider bills: recorded beside the two answers (#36 item 4).
    let ledger = ledger(&home);
    assert_eq!(ledger.len(), 3, "{ledger:?}");
    assert!(ledger.contains(&(25, 1, false)), "{ledger:?}");
}

#[tokio::test]
async fn issue_36_a_pool_mixing_apis_falls_back_from_responses_to_messages() {
    // See: #36
    let llm = ScriptedLlm::start().await;
    let home = Home::new();
    let config = format!(
        "llm:\n  providers:\n    openai:\n      api: responses\n      api_base: \"{url}\"\n      api_key: k\n    claude:\n      api: anthropic\n      api_base: \"{url}\"\n      api_key: k\n  models:\n    gpt:\n      provider: openai\n      model: gpt-5.4\n    sonnet:\n      provider: claude\n      model: {CLAUDE}\n  pools:\n    default: [gpt, sonnet]\n  retry:\n    max_retries: 0\n",
        url = llm.url()
    );
    std::fs::write(home.config(), config).unwrap();
    llm.enqueue_for(
        "gpt-5.4",
        Reply::Status {
            status: 503,
            body: "unavailable".into(),
            retry_after: None,
        },
    );
    llm.enqueue_for(CLAUDE, replay("anthropic-text.sse"));
    let output = home.run(&["agent", "-m", "hello"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("How are you doing today?"));
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    // The same history, once as Responses input items, once as alternating messages.
    assert!(requests[0].get("input").is_some(), "{}", requests[0]);
    assert!(requests[0].get("messages").is_none());
    assert_documented_shape(&requests[1]);
    let headers = llm.request_headers();
    let has = |n: usize, name: &str| headers[n].iter().any(|(h, _)| h == name);
    assert!(has(0, "authorization") && !has(0, "x-api-key"));
    assert!(has(1, "x-api-key") && !has(1, "authorization"));
    assert_eq!(ledger(&home), vec![(12, 30, false)]);
}

/// A history that crossed APIs, sent by the real client: Anthropic's thinking goes back first
/// and verbatim, the Responses API's reasoning is left out, another provider's ids are
/// rewritten alike on call and result, a result without its call is dropped.
#[tokio::test]
async fn issue_36_a_crossed_history_keeps_the_documented_shape() {
    // See: #36
    let server = ScriptedLlm::start().await;
    server.enqueue(replay("anthropic-text.sse"));
    let mut endpoint = Endpoint::new("claude", CLAUDE, server.url());
    endpoint.api_key = Some("k".into());
    endpoint.max_tokens = Some(1000);
    let timeouts = Timeouts::default();
    let client = AnthropicLlm::new(http_client(&timeouts).unwrap(), endpoint, timeouts);
    let now = chrono::Utc::now().fixed_offset();
    let thinking = json!({"type": "thinking", "thinking": "hm", "signature": "sig"});
    let redacted = json!({"type": "redacted_thinking", "data": "opaque"});
    let reasoned = reasoned_calls(
        "",
        "responses",
        vec![json!({"type": "reasoning", "encrypted_content": "gAAAA-1"})],
        &["functions.shell:0"],
    );
    let thought = reasoned_calls(
        "Checking again.",
        "anthropic",
        vec![thinking.clone(), redacted.clone()],
        &["toolu_01"],
    );
    let messages: Vec<Arc<Message>> = [
        Message::new(Role::System, "You are squidbot.", now),
        shell_result("call_lost"),
        Message::new(Role::User, "what time is it?", now),
        reasoned,
        shell_result("functions.shell:0"),
        thought,
        shell_result("toolu_01"),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let response = ask_with_shell(&client, &messages).await;
    assert!(response.text.contains("How are you doing today?"));
    let usage = response.usage.unwrap();
    assert_eq!(
        (usage.prompt, usage.cached, usage.cache_written),
        (12, 0, 0)
    );
    let body = &server.requests()[0];
    assert_documented_shape(body);
    assert_eq!(body["max_tokens"], 1000);
    assert_eq!(body["system"][0]["text"], "You are squidbot.");
    let text = body.to_string();
    assert!(
        !text.contains("call_lost") && !text.contains("gAAAA"),
        "{body}"
    );
    let turns = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = turns.iter().map(|t| t["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    let rewritten = turns[1]["content"][0]["id"].as_str().unwrap();
    assert!(rewritten.starts_with("functionsshell0_"), "{rewritten}");
    assert_eq!(turns[2]["content"][0]["tool_use_id"], rewritten);
    let blocks = turns[3]["content"].as_array().unwrap();
    assert_eq!(blocks[0], thinking);
    assert_eq!(blocks[1], redacted);
    assert_eq!(
        blocks[2],
        json!({"type": "text", "text": "Checking again."})
    );
    assert_eq!(blocks[3]["id"], "toolu_01");
    // The conversation's tail carries the third breakpoint.
    assert_eq!(
        turns[4]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[tokio::test]
async fn issue_36_doctor_says_when_a_model_needs_the_other_api() {
    // See: #36
    let llm = ScriptedLlm::start().await;
    // Anthropic's answer to a request without `x-api-key`, asked through Chat Completions.
    let home = Home::new();
    home.write_config(&llm.url(), "");
    llm.enqueue(Reply::Status {
        status: 401,
        body: json!({"type": "error", "error": {"type": "authentication_error",
            "message": "x-api-key header is required"}})
        .to_string(),
        retry_after: None,
    });
    let output = home.run(&["doctor"]).await;
    let out = stdout(&output);
    assert!(
        out.lines().any(|line| line.starts_with("FAIL")
            && line.contains("llm model small")
            && line.contains("set `api: anthropic` in llm.providers.local")),
        "{out}"
    );
    // A server with no Messages API answers 404 at `/messages`.
    let home = Home::new();
    home.write_config(&format!("{}/none", llm.url()), "");
    let config = std::fs::read_to_string(home.config()).unwrap();
    let config = config.replace("    local:\n", "    local:\n      api: anthropic\n");
    std::fs::write(home.config(), config).unwrap();
    let output = home.run(&["doctor"]).await;
    let out = stdout(&output);
    assert!(
        out.lines().any(|line| line.starts_with("FAIL")
            && line.contains("no Anthropic Messages API: set `api: chat`")),
        "{out}"
    );
}
