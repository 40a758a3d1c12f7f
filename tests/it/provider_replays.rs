//! #25: what real providers sent, replayed over real HTTP into the real binary.
//!
//! Each recording in `tests/it/data/provider-replays/` (origin and licence of every file in
//! its `SOURCES.md`) is served verbatim by the scripted server as the answer to
//! `squidbot agent -m`. For each the test asserts what the person is shown, which tools ran with
//! which arguments, what the usage ledger recorded, and what the next request sent back (the
//! calls with their ids, results paired to them, provider state echoed where the provider
//! wants it). The expectations come from the recordings themselves, as SOURCES.md describes
//! them, not from what squidbot happens to do.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::bin::{stderr, stdout};
use crate::support::home::Home;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// A recording's body.
pub(crate) fn recording(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/data/provider-replays")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The recording served as the 200 answer it was.
pub(crate) fn replay(name: &str) -> Reply {
    let content_type = if name.ends_with(".sse") {
        "text/event-stream"
    } else {
        "application/json"
    };
    Reply::Raw {
        content_type: content_type.to_owned(),
        body: recording(name),
    }
}

/// A home whose one model is `model` (the id sent to the API, which decides its profile).
fn home_for(llm: &ScriptedLlm, model: &str) -> Home {
    let home = Home::new();
    home.write_config(&llm.url(), "");
    let config = std::fs::read_to_string(home.config()).unwrap();
    std::fs::write(
        home.config(),
        config.replace("model: scripted-model", &format!("model: \"{model}\"")),
    )
    .unwrap();
    home
}

/// The usage records of the home's ledger: (prompt, completion, estimated).
pub(crate) fn ledger(home: &Home) -> Vec<(u64, u64, bool)> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(home.path().join("usage")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            records.push((
                record["prompt_tokens"].as_u64().unwrap(),
                record["completion_tokens"].as_u64().unwrap(),
                record["estimated"].as_bool().unwrap_or(false),
            ));
        }
    }
    records
}

/// One answer that ends the turn: what the person reads, what is never shown, the usage.
struct TextCase {
    file: &'static str,
    model: &'static str,
    shown: &'static [&'static str],
    hidden: &'static [&'static str],
    usage: Option<(u64, u64)>,
}

const TEXT_CASES: &[TextCase] = &[
    TextCase {
        file: "openai-stream-usage.sse",
        model: "gpt-4o",
        shown: &["The capital of Mexico is Mexico City."],
        hidden: &[],
        usage: Some((14, 8)),
    },
    TextCase {
        file: "openai-refusal.sse",
        model: "gpt-4o",
        shown: &["I'm sorry, I can't assist with that request."],
        hidden: &["could not be used"],
        usage: Some((79, 11)),
    },
    TextCase {
        file: "openai-length.sse",
        model: "gpt-4o",
        shown: &["{\"", "cut short", "token limit"],
        hidden: &[],
        usage: Some((79, 1)),
    },
    TextCase {
        file: "azure-stream-filter-annotations.sse",
        model: "gpt-5-mini",
        shown: &["Oi!"],
        hidden: &[],
        usage: Some((19, 76)),
    },
    TextCase {
        file: "azure-completion-filter-results.json",
        model: "gpt-4o",
        shown: &["The capital of France is **Paris**."],
        hidden: &[],
        usage: Some((14, 9)),
    },
    TextCase {
        file: "azure-content-filter-stream.sse",
        model: "gpt-4o",
        shown: &["Hey Jude, better", "content filter stopped"],
        hidden: &[],
        usage: None,
    },
    TextCase {
        file: "openrouter-reasoning-stream.sse",
        model: "anthropic/claude-sonnet-4",
        shown: &["2 + 2 = 4"],
        hidden: &["simple arithmetic question", "OPENROUTER"],
        usage: Some((43, 36)),
    },
    TextCase {
        file: "deepseek-reasoner-stream.sse",
        model: "deepseek-reasoner",
        shown: &["Hello there! 😊 How can I help you today?"],
        hidden: &["Hmm, the user"],
        usage: Some((6, 212)),
    },
    TextCase {
        file: "deepseek-reasoner.json",
        model: "deepseek-reasoner",
        shown: &["Crossing the street safely involves careful observation"],
        hidden: &["Okay, the user is asking"],
        usage: Some((12, 789)),
    },
    TextCase {
        file: "groq-stream.sse",
        model: "llama-3.3-70b-versatile",
        shown: &["Olá!"],
        hidden: &[],
        usage: Some((20, 4)),
    },
    TextCase {
        file: "mistral-magistral-thinking.json",
        model: "magistral-medium-latest",
        shown: &["Crossing a river is quite different from crossing a street"],
        hidden: &["Analogizing crossing a river", "thinking"],
        usage: Some((664, 747)),
    },
    TextCase {
        file: "mistral-magistral-stream.sse",
        model: "magistral-small-latest",
        shown: &["To cross the street safely, follow these steps:"],
        hidden: &["Okay, the user is asking"],
        usage: Some((10, 232)),
    },
    TextCase {
        file: "think-together-deepseek-r1.json",
        model: "deepseek-ai/DeepSeek-R1",
        shown: &["Hello! 👋 How can I help you today?"],
        hidden: &["<think>", "</think>", "the user just said"],
        usage: Some((4, 197)),
    },
    TextCase {
        file: "think-together-deepseek-r1-stream.sse",
        model: "deepseek-ai/DeepSeek-R1",
        shown: &["Crossing the street safely"],
        hidden: &["<think>", "</think>"],
        usage: Some((10, 955)),
    },
];

#[tokio::test]
async fn text_answers_are_shown_as_providers_sent_them() {
    let llm = ScriptedLlm::start().await;
    for case in TEXT_CASES {
        let home = home_for(&llm, case.model);
        llm.enqueue(replay(case.file));
        let output = home.run(&["agent", "-m", "hello"]).await;
        let (out, err) = (stdout(&output), stderr(&output));
        assert!(output.status.success(), "{}: {err}", case.file);
        assert!(!out.trim().is_empty(), "{}: nothing shown", case.file);
        for shown in case.shown {
            assert!(
                out.contains(shown),
                "{}: {shown:?} not in {out:?}",
                case.file
            );
        }
        for hidden in case.hidden {
            assert!(
                !out.contains(hidden),
                "{}: {hidden:?} in {out:?}",
                case.file
            );
        }
        if let Some((prompt, completion)) = case.usage {
            assert_eq!(
                ledger(&home),
                vec![(prompt, completion, false)],
                "{}",
                case.file
            );
        }
    }
}

/// An answer calling tools: the calls sent back in the next request, as (id, name,
/// arguments), and the usage of the first call.
struct ToolCase {
    file: &'static str,
    model: &'static str,
    calls: &'static [(&'static str, &'static str, &'static str)],
    usage: Option<(u64, u64)>,
}

const TOOL_CASES: &[ToolCase] = &[
    ToolCase {
        file: "openai-tool-call-fragments.sse",
        model: "gpt-4o",
        calls: &[(
            "call_c91SqDXlYFuETYv8mUHzz6pp",
            "GetWeatherArgs",
            r#"{"city":"Edinburgh","country":"UK","units":"c"}"#,
        )],
        usage: Some((76, 24)),
    },
    ToolCase {
        file: "openai-parallel-tool-calls.sse",
        model: "gpt-4o",
        calls: &[
            (
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                r#"{"city":"Edinburgh","country":"GB","units":"c"}"#,
            ),
            (
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                r#"{"ticker":"AAPL","exchange":"NASDAQ"}"#,
            ),
        ],
        usage: Some((149, 60)),
    },
    ToolCase {
        file: "ollama-tool-call.json",
        model: "qwen3:8b",
        calls: &[(
            "call_o2vnpxrw",
            "final_result",
            r#"{"city":"Paris","country":"France"}"#,
        )],
        usage: Some((206, 194)),
    },
    ToolCase {
        file: "ollama-parallel-index-zero.sse",
        model: "qwen3:8b",
        calls: &[
            ("call_a1b2c3d4", "run_command", r#"{"command":"ls"}"#),
            ("call_e5f6g7h8", "run_command", r#"{"command":"ls -l"}"#),
        ],
        usage: None,
    },
    ToolCase {
        file: "llamacpp-tool-call-stream.sse",
        model: "qwen3",
        calls: &[(
            "g2KOIWzn722hzEaZQmNVP4roUPEiYafL",
            "weather",
            r#"{"location":"Florence, Italy"}"#,
        )],
        usage: Some((139, 41)),
    },
    ToolCase {
        file: "llamacpp-tool-call.json",
        model: "qwen3",
        calls: &[(
            "mvVq65j66dyGRizURhbdNCEnSO56GhXx",
            "weather",
            r#"{"location":"Florence,Italy"}"#,
        )],
        usage: Some((139, 58)),
    },
    ToolCase {
        file: "openrouter-parallel-tool-calls.sse",
        model: "google/gemini-2.5-flash",
        calls: &[
            ("tool_add_kZJN6iFNozVOBiXBMA2Y", "add", r#"{"a":2,"b":3}"#),
            (
                "tool_multiply_7Pq02EcannPbKks8kXlA",
                "multiply",
                r#"{"a":2,"b":3}"#,
            ),
        ],
        usage: Some((157, 32)),
    },
    ToolCase {
        file: "deepseek-reasoner-tool-call.sse",
        model: "deepseek-reasoner",
        calls: &[(
            "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF",
            "weather",
            r#"{"location":"San Francisco"}"#,
        )],
        usage: Some((339, 83)),
    },
    ToolCase {
        file: "groq-parallel-tool-calls.sse",
        model: "moonshotai/kimi-k2-instruct",
        calls: &[
            ("functions.add:0", "add", r#"{"a":2,"b":3}"#),
            ("functions.multiply:1", "multiply", r#"{"a":2,"b":3}"#),
        ],
        usage: Some((201, 58)),
    },
    ToolCase {
        file: "mistral-tool-call.json",
        model: "mistral-large-latest",
        calls: &[("KikbB849t", "get_weather", r#"{"city":"Paris"}"#)],
        usage: Some((77, 12)),
    },
    ToolCase {
        file: "mistral-tool-call-stream.sse",
        model: "mistral-large-latest",
        calls: &[("gSIMJiOkT", "weather", r#"{"location":"San Francisco"}"#)],
        usage: Some((124, 22)),
    },
    ToolCase {
        file: "think-ollama-hermes-tool-call-leak.json",
        model: "hermes3",
        calls: &[],
        usage: None,
    },
];

/// The assistant message with tool calls and the tool results of a request.
fn sent_back(request: &Value) -> (Vec<Value>, Vec<Value>) {
    let messages = request["messages"].as_array().unwrap();
    let calls = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .cloned()
        .collect();
    let results = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect();
    (calls, results)
}

#[tokio::test]
async fn tool_calls_run_as_the_provider_meant_them_and_go_back_paired() {
    let llm = ScriptedLlm::start().await;
    for case in TOOL_CASES {
        let home = home_for(&llm, case.model);
        let before = llm.requests().len();
        llm.enqueue(replay(case.file));
        llm.enqueue(Reply::Text("done".into()));
        let output = home.run(&["agent", "-m", "hello"]).await;
        let (out, err) = (stdout(&output), stderr(&output));
        assert!(output.status.success(), "{}: {err}", case.file);
        assert_eq!(out, "done\n", "{}", case.file);
        let requests = llm.requests();
        assert_eq!(requests.len() - before, 2, "{}", case.file);
        let (calls, results) = sent_back(&requests[before + 1]);
        if case.calls.is_empty() {
            // Leaked markup: the calls were read out of the text, never shown as it.
            let named: Vec<(&str, Value)> = calls
                .iter()
                .map(|c| {
                    let arguments = c["function"]["arguments"].as_str().unwrap();
                    (
                        c["function"]["name"].as_str().unwrap(),
                        serde_json::from_str(arguments).unwrap(),
                    )
                })
                .collect();
            assert_eq!(
                named,
                vec![
                    ("get_current_time", json!({"timezone": "Europe/Paris"})),
                    ("get_current_time", json!({"timezone": "America/New_York"})),
                ],
                "{}",
                case.file
            );
            let assistant = &requests[before + 1]["messages"];
            assert!(
                !assistant.to_string().contains("<tool_call>"),
                "{}: markup went back as text",
                case.file
            );
            continue;
        }
        assert_eq!(calls.len(), case.calls.len(), "{}: {calls:?}", case.file);
        for ((id, name, arguments), sent) in case.calls.iter().zip(&calls) {
            assert_eq!(sent["id"], *id, "{}", case.file);
            assert_eq!(sent["function"]["name"], *name, "{}", case.file);
            let sent_arguments: Value =
                serde_json::from_str(sent["function"]["arguments"].as_str().unwrap()).unwrap();
            let expected: Value = serde_json::from_str(arguments).unwrap();
            assert_eq!(sent_arguments, expected, "{}", case.file);
        }
        // Each result answers its call, and each names the tool squidbot does not have.
        let ids: Vec<&Value> = calls.iter().map(|c| &c["id"]).collect();
        let answered: Vec<&Value> = results.iter().map(|r| &r["tool_call_id"]).collect();
        assert_eq!(answered, ids, "{}", case.file);
        if let Some((prompt, completion)) = case.usage {
            assert_eq!(
                ledger(&home).first(),
                Some(&(prompt, completion, false)),
                "{}",
                case.file
            );
        }
    }
}

#[tokio::test]
async fn deepseek_gets_its_reasoning_back_and_gemini_its_signatures() {
    let llm = ScriptedLlm::start().await;
    let home = home_for(&llm, "deepseek-reasoner");
    llm.enqueue(replay("deepseek-reasoner-tool-call.sse"));
    llm.enqueue(Reply::Text("done".into()));
    let output = home.run(&["agent", "-m", "weather?"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = llm.requests();
    let assistant = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap()
        .clone();
    assert!(
        assistant["reasoning_content"]
            .as_str()
            .unwrap()
            .starts_with("The user is asking for the weather in San Francisco."),
        "{assistant}"
    );
    // #36: Chat Completions' `prompt_tokens_details.cached_tokens` is the cache read.
    let output = home.run(&["usage", "--json"]).await;
    let table: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(table["total"]["cached_tokens"], 320, "{table}");

    let home = home_for(&llm, "gemini-3-pro-preview");
    llm.enqueue(replay("gemini-parallel-tool-calls.json"));
    llm.enqueue(Reply::Text("done".into()));
    let output = home.run(&["agent", "-m", "temperatures?"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = llm.requests();
    let (calls, _) = sent_back(&requests[3]);
    let recorded: Value =
        serde_json::from_str(&recording("gemini-parallel-tool-calls.json")).unwrap();
    let recorded_calls = recorded["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), recorded_calls.len());
    for (sent, got) in calls.iter().zip(recorded_calls) {
        assert_eq!(sent["extra_content"], got["extra_content"], "{sent}");
    }

    // Gemini 2.5 put the signature on the message: it goes back on the call.
    let home = home_for(&llm, "gemini-2.5-flash");
    llm.enqueue(replay("gemini-tool-call-signature.json"));
    llm.enqueue(Reply::Text("done".into()));
    let output = home.run(&["agent", "-m", "time?"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let (calls, results) = sent_back(&llm.requests()[5]);
    let recorded: Value =
        serde_json::from_str(&recording("gemini-tool-call-signature.json")).unwrap();
    let message = &recorded["choices"][0]["message"];
    assert_eq!(calls[0]["function"]["name"], "get_current_time");
    assert_eq!(calls[0]["extra_content"], message["extra_content"]);
    // Its id was empty: one was made up, and the result answers it.
    assert!(!calls[0]["id"].as_str().unwrap().is_empty());
    assert_eq!(results[0]["tool_call_id"], calls[0]["id"]);

    // A call from another provider, going to Gemini 3: the documented placeholder.
    let home = home_for(&llm, "gpt-4o");
    llm.enqueue(replay("openai-tool-call-fragments.sse"));
    llm.enqueue(Reply::Text("done".into()));
    assert!(home.run(&["agent", "-m", "one"]).await.status.success());
    let config = std::fs::read_to_string(home.config()).unwrap();
    std::fs::write(
        home.config(),
        config.replace("model: \"gpt-4o\"", "model: \"gemini-3-pro-preview\""),
    )
    .unwrap();
    llm.enqueue(Reply::Text("fine".into()));
    assert!(home.run(&["agent", "-m", "two"]).await.status.success());
    let (calls, _) = sent_back(&llm.requests().pop().unwrap());
    assert_eq!(
        calls[0]["extra_content"],
        json!({"google": {"thought_signature": "skip_thought_signature_validator"}})
    );
}

/// Streams that end in the provider's error: the person reads the provider's words.
#[tokio::test]
async fn an_error_inside_a_stream_is_reported_with_the_providers_words() {
    let llm = ScriptedLlm::start().await;
    for (file, model, words) in [
        (
            "openrouter-stream-error.sse",
            "openai/gpt-oss-20b",
            "Token limit reached",
        ),
        (
            "groq-stream-tool-use-failed.sse",
            "openai/gpt-oss-20b",
            "Tool call validation failed",
        ),
    ] {
        let home = home_for(&llm, model);
        llm.enqueue(replay(file));
        let output = home.run(&["agent", "-m", "hi"]).await;
        let shown = format!("{}{}", stdout(&output), stderr(&output));
        assert!(shown.contains(words), "{file}: {shown}");
        assert!(
            !shown.contains("We need to respond"),
            "{file}: reasoning shown: {shown}"
        );
    }
}

/// A stream that ends in the provider's error after it reported usage was billed: the ledger
/// records the provider's tokens, and `squidbot usage` shows them.
/// See: #36
#[tokio::test]
async fn issue_36_an_errored_streams_usage_is_recorded() {
    let llm = ScriptedLlm::start().await;
    let home = home_for(&llm, "openai/gpt-oss-20b");
    llm.enqueue(replay("openrouter-stream-error.sse"));
    let output = home.run(&["agent", "-m", "hi"]).await;
    let shown = format!("{}{}", stdout(&output), stderr(&output));
    assert!(shown.contains("Token limit reached"), "{shown}");
    // The error chunk's usage: 43 prompt and 10 completion tokens, as reported.
    assert_eq!(ledger(&home), vec![(43, 10, false)]);
    let output = home.run(&["usage", "--json"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let table: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(table["total"]["calls"], 1, "{table}");
    assert_eq!(table["total"]["prompt_tokens"], 43, "{table}");
    assert_eq!(table["total"]["completion_tokens"], 10, "{table}");
}

#[tokio::test]
async fn mistral_gets_ids_it_accepts_and_its_422_to_stream_options_is_retried() {
    let llm = ScriptedLlm::start().await;
    // A history from another provider: the call ids OpenAI wrote go to Mistral rewritten.
    let home = home_for(&llm, "gpt-4o");
    llm.enqueue(replay("openai-parallel-tool-calls.sse"));
    llm.enqueue(Reply::Text("done".into()));
    let output = home.run(&["agent", "-m", "one"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let config = std::fs::read_to_string(home.config()).unwrap();
    std::fs::write(
        home.config(),
        config.replace("model: \"gpt-4o\"", "model: \"mistral-large-latest\""),
    )
    .unwrap();
    llm.enqueue(Reply::Status {
        status: 422,
        body: recording("mistral-stream-options.422.json"),
        retry_after: None,
    });
    llm.enqueue(Reply::Text("fine".into()));
    let output = home.run(&["agent", "-m", "two"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "fine\n");
    let requests = llm.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests[2].get("stream_options").is_some());
    assert!(
        requests[3].get("stream_options").is_none(),
        "retried without it"
    );
    let (calls, results) = sent_back(&requests[3]);
    for call in &calls {
        let id = call["id"].as_str().unwrap();
        assert!(
            id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{id}"
        );
    }
    let ids: Vec<&Value> = calls.iter().map(|c| &c["id"]).collect();
    let answered: Vec<&Value> = results.iter().map(|r| &r["tool_call_id"]).collect();
    assert_eq!(answered, ids);
    assert_ne!(ids[0], ids[1]);
}

#[tokio::test]
async fn reasoning_models_get_max_completion_tokens() {
    let llm = ScriptedLlm::start().await;
    for (model, field, absent) in [
        ("o3-mini", "max_completion_tokens", "max_tokens"),
        ("gpt-5", "max_completion_tokens", "max_tokens"),
        ("gpt-4o", "max_tokens", "max_completion_tokens"),
    ] {
        let home = home_for(&llm, model);
        llm.enqueue(Reply::Text("ok".into()));
        let output = home.run(&["agent", "-m", "hi"]).await;
        assert!(output.status.success(), "{}", stderr(&output));
        let request = llm.requests().pop().unwrap();
        assert_eq!(request[field], json!(8192), "{model}: {request}");
        assert!(request.get(absent).is_none(), "{model}: {request}");
    }
}

/// Error bodies: the person reads the provider's own words and whether retrying helps.
#[tokio::test]
async fn provider_errors_say_what_the_provider_said() {
    let llm = ScriptedLlm::start().await;
    for (file, status, words) in [
        (
            "openai-context-length-exceeded.400.json",
            400,
            "maximum context length is 4097 tokens",
        ),
        (
            "vllm-auto-tool-choice.400.json",
            400,
            "--enable-auto-tool-choice",
        ),
        (
            "mistral-tool-call-id.400.json",
            400,
            "Tool call id was 2968-LWy3uasib",
        ),
        (
            "openai-model-not-found.404.json",
            404,
            "does not exist or you do not have access to it",
        ),
        (
            "azure-content-filter-prompt.400.json",
            400,
            "The response was filtered due to the prompt",
        ),
        (
            "groq-tool-use-failed.400.json",
            400,
            "Tool call validation failed",
        ),
        (
            "groq-model-not-found.404.json",
            404,
            "llama-3.3-70b-versatlie` does not exist",
        ),
        (
            "openrouter-rate-limit.429.json",
            429,
            "rate limit was reached",
        ),
    ] {
        let home = home_for(&llm, "gpt-4o");
        llm.enqueue(Reply::Status {
            status,
            body: recording(file),
            retry_after: None,
        });
        let output = home.run(&["agent", "-m", "hi"]).await;
        let shown = format!("{}{}", stdout(&output), stderr(&output));
        assert!(shown.contains(words), "{file}: {shown}");
        if status == 400 {
            assert!(shown.contains("Retrying will not help"), "{file}: {shown}");
        }
    }
}
