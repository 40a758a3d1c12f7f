//! The LLM adapter over real HTTP against the scripted server: streaming, reasoning, tool calls,
//! request serialization, status mapping, retries and fallback, timeouts and server quirks.
//!
//! Timeouts and backoffs are small so the whole file runs in a few seconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::DateTime;
use serde_json::{Value, json};
use squidbot::core::message::{Message, Role, ToolCall};
use squidbot::core::ports::llm::{
    ChatRequest, ChatResponse, ContextBudget, LlmClient, LlmError, StreamEvent,
};
use squidbot::core::ports::tool::ToolSpec;
use squidbot::llm::{Endpoint, LlmPool, OpenAiCompatLlm, RetryPolicy, Timeouts, http_client};

use crate::support::scripted_llm::{Reply, ScriptedLlm};

fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(1),
        first_byte: Duration::from_secs(2),
        idle: Duration::from_secs(2),
        total: Duration::from_secs(10),
    }
}

fn endpoint(url: &str, model: &str) -> Endpoint {
    Endpoint::new(model, model, url)
}

fn model_with(endpoint: Endpoint, timeouts: Timeouts) -> Arc<OpenAiCompatLlm> {
    let client = http_client(&timeouts).unwrap();
    Arc::new(OpenAiCompatLlm::new(client, endpoint, timeouts))
}

fn model(server: &ScriptedLlm, name: &str) -> Arc<OpenAiCompatLlm> {
    model_with(endpoint(&server.url(), name), timeouts())
}

fn retry(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_secs(3),
    }
}

fn pool(members: Vec<Arc<dyn LlmClient>>, max_retries: u32) -> LlmPool {
    LlmPool::new("default", members, retry(max_retries))
}

fn user(text: &str) -> Vec<Message> {
    let ts = DateTime::parse_from_rfc3339("2026-11-22T10:00:00+00:00").unwrap();
    vec![Message::new(Role::User, text, ts)]
}

fn text(s: &str) -> Reply {
    Reply::Text(s.to_owned())
}

fn status(status: u16, body: &str) -> Reply {
    Reply::Status {
        status,
        body: body.to_owned(),
        retry_after: None,
    }
}

/// Runs one call with no tools, returning the result and every stream event.
async fn chat(
    client: &dyn LlmClient,
    messages: &[Message],
    tools: &[ToolSpec],
) -> (Result<ChatResponse, LlmError>, Vec<StreamEvent>) {
    let events = Mutex::new(Vec::new());
    let tools: Vec<&ToolSpec> = tools.iter().collect();
    let messages: Vec<Arc<Message>> = messages.iter().cloned().map(Arc::new).collect();
    let request = ChatRequest {
        messages: &messages,
        tools: &tools,
        call: squidbot::core::ports::usage::CallTag::new(
            squidbot::core::ports::usage::Purpose::Turn,
        ),
    };
    let result = client
        .chat(request, &|event| events.lock().unwrap().push(event))
        .await;
    (result, events.into_inner().unwrap())
}

fn deltas(events: &[StreamEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(text) => Some(text.as_str()),
            StreamEvent::Restart { .. } | StreamEvent::Usage(_) => None,
        })
        .collect()
}

#[tokio::test]
async fn streamed_text_arrives_as_deltas() {
    let server = ScriptedLlm::start().await;
    server.enqueue(text("Hello from the scripted server"));
    let (result, events) = chat(model(&server, "gpt").as_ref(), &user("hi"), &[]).await;
    let response = result.unwrap();
    assert_eq!(response.text, "Hello from the scripted server");
    assert_eq!(response.model, "gpt");
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.reasoning_content, None);
    assert!(deltas(&events).len() >= 2, "{events:?}");
    assert_eq!(deltas(&events).concat(), response.text);
}

#[tokio::test]
async fn reasoning_is_captured() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::TextWithReasoning {
        text: "42".into(),
        reasoning: "six times seven".into(),
    });
    // Some servers call the field `reasoning`.
    server.enqueue(Reply::Raw {
        content_type: "text/event-stream".into(),
        body: "data: {\"choices\":[{\"delta\":{\"reasoning\":\"hmm\"}}]}\n\n\
               data: {\"choices\":[{\"delta\":{\"content\":\"yes\"},\"finish_reason\":\"stop\"}]}\n\n\
               data: [DONE]\n\n"
            .into(),
    });
    let llm = model(&server, "r1");
    let (result, events) = chat(llm.as_ref(), &user("q"), &[]).await;
    let response = result.unwrap();
    assert_eq!(response.text, "42");
    assert_eq!(
        response.reasoning_content.as_deref(),
        Some("six times seven")
    );
    assert_eq!(deltas(&events).concat(), "42");
    let response = chat(llm.as_ref(), &user("q"), &[]).await.0.unwrap();
    assert_eq!(response.reasoning_content.as_deref(), Some("hmm"));
    assert_eq!(response.text, "yes");
}

#[tokio::test]
async fn parallel_tool_calls_with_fragmented_arguments() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::ToolCalls {
        text: "Let me look.".into(),
        calls: vec![
            (
                "call_1".into(),
                "shell".into(),
                r#"{"command": "ls -la /tmp"}"#.into(),
            ),
            (
                "call_2".into(),
                "read_file".into(),
                r#"{"path": "notes.md", "limit": 10}"#.into(),
            ),
        ],
    });
    let (result, events) = chat(model(&server, "gpt").as_ref(), &user("look"), &[]).await;
    let response = result.unwrap();
    assert_eq!(response.text, "Let me look.");
    assert_eq!(deltas(&events).concat(), "Let me look.");
    assert_eq!(
        response.tool_calls,
        vec![
            ToolCall {
                id: "call_1".into(),
                name: "shell".into(),
                arguments: json!({"command": "ls -la /tmp"}),
                provider_state: None,
            },
            ToolCall {
                id: "call_2".into(),
                name: "read_file".into(),
                arguments: json!({"path": "notes.md", "limit": 10}),
                provider_state: None,
            },
        ]
    );
}

#[tokio::test]
async fn invalid_tool_call_json_is_kept_as_a_string() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::ToolCalls {
        text: String::new(),
        calls: vec![
            ("c1".into(), "shell".into(), "{'command': 'ls'".into()),
            ("c2".into(), "list_files".into(), String::new()),
        ],
    });
    let response = chat(model(&server, "gpt").as_ref(), &user("x"), &[])
        .await
        .0
        .unwrap();
    assert_eq!(response.text, "");
    assert_eq!(
        response.tool_calls[0].arguments,
        Value::String("{'command': 'ls'".into())
    );
    assert_eq!(response.tool_calls[1].arguments, json!({}));
}

fn conversation() -> Vec<Message> {
    let ts = DateTime::parse_from_rfc3339("2026-11-22T10:00:00+00:00").unwrap();
    let mut assistant = Message::new(Role::Assistant, "", ts);
    assistant.tool_calls = Some(vec![
        ToolCall {
            id: "c1".into(),
            name: "shell".into(),
            arguments: json!({"command": "ls"}),
            provider_state: None,
        },
        ToolCall {
            id: "c2".into(),
            name: "shell".into(),
            arguments: Value::String("{bad".into()),
            provider_state: None,
        },
    ]);
    assistant.reasoning_content = Some("I should list".into());
    let mut result = Message::new(Role::Tool, "a.txt", ts);
    result.tool_call_id = Some("c1".into());
    vec![
        Message::new(Role::System, "be brief", ts),
        Message::new(Role::User, "list", ts),
        assistant,
        result,
    ]
}

#[tokio::test]
async fn request_is_serialized_for_strict_servers() {
    let server = ScriptedLlm::start().await;
    let messages = conversation();
    let tool = ToolSpec::new(
        "shell",
        "Run a command.",
        &json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    );
    let mut plain = endpoint(&server.url(), "plain");
    plain.model = "api-plain".into();
    let mut reasoning = endpoint(&server.url(), "reasoning");
    reasoning.profile.echo_reasoning = true;
    reasoning.max_tokens = Some(512);
    reasoning.api_key = Some("sk-test".into());
    chat(model_with(plain, timeouts()).as_ref(), &messages, &[])
        .await
        .0
        .unwrap();
    chat(
        model_with(reasoning, timeouts()).as_ref(),
        &messages,
        std::slice::from_ref(&tool),
    )
    .await
    .0
    .unwrap();

    let requests = server.requests();
    let first = &requests[0];
    assert_eq!(first["model"], "api-plain");
    assert_eq!(first["stream"], true);
    assert!(first.get("tools").is_none(), "tools omitted when empty");
    assert!(first.get("max_tokens").is_none());
    assert_eq!(
        first["messages"][2],
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"ls\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{bad"}}
        ]})
    );
    assert_eq!(
        first["messages"][3],
        json!({"role": "tool", "content": "a.txt", "tool_call_id": "c1"})
    );
    assert_eq!(
        first["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );

    let second = &requests[1];
    assert_eq!(second["max_tokens"], 512);
    assert_eq!(second["messages"][2]["reasoning_content"], "I should list");
    assert_eq!(
        second["tools"],
        json!([{"type": "function", "function": {
            "name": "shell",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}
        }}])
    );
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::Status {
        status: 429,
        body: r#"{"error":{"message":"slow down"}}"#.into(),
        retry_after: Some("1".into()),
    });
    server.enqueue(text("after the wait"));
    let pool = pool(vec![model(&server, "gpt")], 2);
    let started = Instant::now();
    let (result, events) = chat(&pool, &user("hi"), &[]).await;
    assert_eq!(result.unwrap().text, "after the wait");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.request_count(), 2);
    assert_eq!(
        events[0],
        StreamEvent::Restart {
            model: "gpt".into()
        }
    );
}

#[tokio::test]
async fn server_errors_are_retried_on_the_same_model() {
    let server = ScriptedLlm::start().await;
    server.enqueue(status(500, "boom"));
    server.enqueue(status(502, "bad gateway"));
    server.enqueue(text("third time"));
    let pool = pool(vec![model(&server, "a"), model(&server, "b")], 2);
    let (result, events) = chat(&pool, &user("hi"), &[]).await;
    let response = result.unwrap();
    assert_eq!(response.text, "third time");
    assert_eq!(response.model, "a");
    let models: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r["model"].clone())
        .collect();
    assert_eq!(models, vec!["a", "a", "a"]);
    let restarts = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Restart { .. }))
        .count();
    assert_eq!(restarts, 2);
}

#[tokio::test]
async fn auth_failure_moves_to_the_next_model_without_retry() {
    let server = ScriptedLlm::start().await;
    server.enqueue_for("a", status(401, r#"{"error":"invalid api key"}"#));
    server.enqueue_for("b", text("from b"));
    let a = model(&server, "a");
    let error = {
        server.enqueue_for("a", status(403, "forbidden: no access"));
        // The queue for `a` now holds 401 then 403; this direct call takes the 401.
        chat(a.as_ref(), &user("hi"), &[]).await.0.unwrap_err()
    };
    match &error {
        LlmError::Auth { model, detail } => {
            assert_eq!(model, "a");
            assert!(detail.contains("invalid api key"), "{detail}");
        }
        other => panic!("expected Auth, got {other:?}"),
    }
    let pool = pool(vec![a, model(&server, "b")], 3);
    let (result, events) = chat(&pool, &user("hi"), &[]).await;
    assert_eq!(result.unwrap().model, "b");
    assert_eq!(server.request_count(), 3, "the 403 was not retried");
    assert_eq!(events[0], StreamEvent::Restart { model: "b".into() });
    assert_eq!(events.len(), 1 + deltas(&events).len(), "one restart only");
    assert_eq!(deltas(&events).concat(), "from b");
}

#[tokio::test]
async fn all_models_failing_returns_the_last_error() {
    let server = ScriptedLlm::start().await;
    server.enqueue_for("a", status(401, "bad key"));
    server.enqueue_for("b", status(500, "first"));
    server.enqueue_for("b", status(503, "second"));
    let pool = pool(vec![model(&server, "a"), model(&server, "b")], 1);
    let error = chat(&pool, &user("hi"), &[]).await.0.unwrap_err();
    match error {
        LlmError::Server {
            model,
            status,
            detail,
        } => assert_eq!(
            (model.as_str(), status, detail.as_str()),
            ("b", 503, "second")
        ),
        other => panic!("expected Server, got {other:?}"),
    }
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn connection_refused_is_unreachable_then_falls_back() {
    let server = ScriptedLlm::start().await;
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/v1", unused.local_addr().unwrap());
    drop(unused);
    let dead = model_with(endpoint(&dead_url, "dead"), timeouts());
    let error = chat(dead.as_ref(), &user("hi"), &[]).await.0.unwrap_err();
    assert!(
        matches!(error, LlmError::Unreachable { ref model, .. } if model == "dead"),
        "{error:?}"
    );
    let pool = pool(vec![dead, model(&server, "live")], 1);
    let response = chat(&pool, &user("hi"), &[]).await.0.unwrap();
    assert_eq!(
        (response.model.as_str(), response.text.as_str()),
        ("live", "ok")
    );
}

#[tokio::test]
async fn reset_mid_stream_falls_back_without_duplicating_text() {
    let server = ScriptedLlm::start().await;
    server.enqueue_for(
        "a",
        Reply::ResetAfter {
            text: "partial answer".into(),
        },
    );
    server.enqueue_for(
        "a",
        Reply::ResetAfter {
            text: "partial answer".into(),
        },
    );
    server.enqueue_for("b", text("complete answer"));
    let a = model(&server, "a");
    let error = chat(a.as_ref(), &user("hi"), &[]).await.0.unwrap_err();
    assert!(matches!(error, LlmError::Protocol { .. }), "{error:?}");

    let pool = pool(vec![a, model(&server, "b")], 0);
    let (result, events) = chat(&pool, &user("hi"), &[]).await;
    let response = result.unwrap();
    assert_eq!(response.text, "complete answer");
    assert_eq!(response.model, "b");
    let restart = events
        .iter()
        .position(|e| *e == StreamEvent::Restart { model: "b".into() })
        .expect("a restart event");
    assert_eq!(deltas(&events[..restart]).concat(), "partial answer");
    assert_eq!(deltas(&events[restart..]).concat(), "complete answer");
}

/// One call to model "m" on `server` under `limits`: the timeout tests differ only in which
/// limit they shorten and which phase the error must name.
async fn chat_under(
    server: &ScriptedLlm,
    limits: Timeouts,
) -> (Result<ChatResponse, LlmError>, Vec<StreamEvent>) {
    chat(
        model_with(endpoint(&server.url(), "m"), limits).as_ref(),
        &user("hi"),
        &[],
    )
    .await
}

/// The error model "m" must give when the limit of `phase` runs out.
fn timed_out(phase: &'static str) -> LlmError {
    LlmError::Timeout {
        model: "m".into(),
        phase,
    }
}

#[tokio::test]
async fn idle_stall_times_out() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::Stall {
        text: "thinking".into(),
        for_ms: 1500,
    });
    let short = Timeouts {
        idle: Duration::from_millis(200),
        ..timeouts()
    };
    let started = Instant::now();
    let (result, events) = chat_under(&server, short).await;
    assert_eq!(result.unwrap_err(), timed_out("idle"));
    assert_eq!(deltas(&events).concat(), "thinking");
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn slow_headers_time_out_on_first_byte_and_total() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::StallHeaders { for_ms: 1500 });
    server.enqueue(Reply::Delay {
        ms: 1500,
        then: Box::new(text("late")),
    });
    let first_byte = Timeouts {
        first_byte: Duration::from_millis(200),
        ..timeouts()
    };
    let started = Instant::now();
    let error = chat_under(&server, first_byte).await.0.unwrap_err();
    assert_eq!(error, timed_out("first byte"));
    let total = Timeouts {
        total: Duration::from_millis(300),
        ..timeouts()
    };
    let error = chat_under(&server, total).await.0.unwrap_err();
    assert_eq!(error, timed_out("total"));
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn malformed_sse_is_a_protocol_error() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::Malformed);
    let error = chat(model(&server, "m").as_ref(), &user("hi"), &[])
        .await
        .0
        .unwrap_err();
    match error {
        LlmError::Protocol { detail, .. } => assert!(detail.contains("{not json"), "{detail}"),
        other => panic!("expected Protocol, got {other:?}"),
    }
}

#[tokio::test]
async fn error_payload_in_the_stream_is_a_server_error() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::Raw {
        content_type: "text/event-stream".into(),
        body: "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n\
               data: {\"error\":{\"message\":\"upstream died\",\"code\":502}}\n\n"
            .into(),
    });
    let error = chat(model(&server, "m").as_ref(), &user("hi"), &[])
        .await
        .0
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::Server {
            model: "m".into(),
            status: 502,
            detail: "upstream died".into()
        }
    );
}

#[tokio::test]
async fn stream_ending_without_finish_is_a_protocol_error() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::Raw {
        content_type: "text/event-stream".into(),
        body: "data: {\"choices\":[{\"delta\":{\"content\":\"cut\"}}]}\n\n".into(),
    });
    // A finish reason without `[DONE]` is a whole answer.
    server.enqueue(Reply::Raw {
        content_type: "text/event-stream".into(),
        body: "data: {\"choices\":[{\"delta\":{\"content\":\"whole\"},\"finish_reason\":\"stop\"}]}\n\n".into(),
    });
    let llm = model(&server, "m");
    let error = chat(llm.as_ref(), &user("hi"), &[]).await.0.unwrap_err();
    assert_eq!(
        error,
        LlmError::Protocol {
            model: "m".into(),
            detail: "stream ended early".into()
        }
    );
    assert_eq!(
        chat(llm.as_ref(), &user("hi"), &[]).await.0.unwrap().text,
        "whole"
    );
}

#[tokio::test]
async fn empty_body_is_retried_without_streaming() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::EmptyBody);
    server.enqueue(Reply::ToolCalls {
        text: "calling".into(),
        calls: vec![("t1".into(), "shell".into(), r#"{"command":"date"}"#.into())],
    });
    let (result, events) = chat(model(&server, "llama").as_ref(), &user("hi"), &[]).await;
    let response = result.unwrap();
    assert_eq!(response.text, "calling");
    assert_eq!(events, vec![StreamEvent::TextDelta("calling".into())]);
    assert_eq!(response.tool_calls[0].arguments, json!({"command": "date"}));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["stream"], true);
    assert_eq!(requests[1]["stream"], false);
    assert_eq!(requests[0]["messages"], requests[1]["messages"]);
}

#[tokio::test]
async fn json_answer_to_a_streamed_request_is_accepted() {
    let server = ScriptedLlm::start().await;
    server.enqueue(Reply::Raw {
        content_type: "application/json".into(),
        body: json!({"choices": [{"message": {"role": "assistant", "content": "plain"}}]})
            .to_string(),
    });
    let response = chat(model(&server, "m").as_ref(), &user("hi"), &[])
        .await
        .0
        .unwrap();
    assert_eq!(response.text, "plain");
}

#[tokio::test]
async fn pool_budget_is_the_tightest_member() {
    let server = ScriptedLlm::start().await;
    let budgeted = |name: &str, context: Option<u32>, reply: Option<u32>| {
        let mut endpoint = endpoint(&server.url(), name);
        endpoint.max_context_tokens = context;
        endpoint.max_tokens = reply;
        model_with(endpoint, timeouts()) as Arc<dyn LlmClient>
    };
    let big = budgeted("big", Some(128_000), Some(8_000));
    assert_eq!(
        big.context_budget(),
        Some(ContextBudget {
            max_context_tokens: 128_000,
            max_reply_tokens: 8_000
        })
    );
    let pool = pool(
        vec![
            big,
            budgeted("none", None, Some(100)),
            budgeted("small", Some(8_192), None),
        ],
        0,
    );
    assert_eq!(pool.name(), "pool:default");
    assert_eq!(
        pool.context_budget(),
        Some(ContextBudget {
            max_context_tokens: 8_192,
            max_reply_tokens: 0
        })
    );
    let unbudgeted = LlmPool::new("x", vec![budgeted("none", None, None)], retry(0));
    assert_eq!(unbudgeted.context_budget(), None);
}

#[tokio::test]
async fn scripted_replies_come_from_model_queue_then_queue_then_handler() {
    let server = ScriptedLlm::start().await;
    server.set_handler(|request| {
        let last = request["messages"][0]["content"].as_str().unwrap_or("");
        Reply::Text(format!("echo: {last}"))
    });
    server.enqueue(text("queued"));
    server.enqueue_for("b", text("for b"));
    let a = model(&server, "a");
    let b = model(&server, "b");
    let answer = |client: Arc<OpenAiCompatLlm>, message: &'static str| async move {
        chat(client.as_ref(), &user(message), &[])
            .await
            .0
            .unwrap()
            .text
    };
    assert_eq!(answer(a.clone(), "1").await, "queued");
    assert_eq!(answer(b.clone(), "2").await, "for b");
    assert_eq!(answer(b, "3").await, "echo: 3");
    assert_eq!(answer(a, "4").await, "echo: 4");
    assert_eq!(server.request_count(), 4);
}

#[tokio::test]
async fn bearer_header_is_sent_only_when_a_key_is_set() {
    use axum::http::HeaderMap;
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let record = Arc::clone(&seen);
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |headers: HeaderMap| {
            let record = Arc::clone(&record);
            async move {
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_owned());
                record.lock().unwrap().push(auth);
                axum::Json(json!({"choices": [{"message": {"content": "hi"}}]}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let mut keyed = endpoint(&url, "keyed");
    keyed.api_key = Some("sk-secret".into());
    chat(model_with(keyed, timeouts()).as_ref(), &user("x"), &[])
        .await
        .0
        .unwrap();
    chat(
        model_with(endpoint(&url, "open"), timeouts()).as_ref(),
        &user("x"),
        &[],
    )
    .await
    .0
    .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![Some("Bearer sk-secret".to_owned()), None]
    );
    server.abort();
}
