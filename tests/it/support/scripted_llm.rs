//! A scripted OpenAI-compatible server for tests: every reply is chosen by the test.
//!
//! It serves `POST /v1/chat/completions` (and, for canned bodies, `POST /v1/responses` and
//! Anthropic's `POST /v1/messages`) on `127.0.0.1:0` with TCP_NODELAY (without it a client that reuses connections stalls ~40 ms
//! per call on loopback). Replies come from a
//! per-model queue, then a shared queue, then a handler, then the default (streamed "ok"). Each
//! reply is rendered as SSE for `stream: true` and as a plain `chat.completion` otherwise, and the
//! fault replies reproduce what real servers do: statuses with `Retry-After`, connections reset
//! mid-stream, stalls before headers or between chunks, malformed SSE and llama.cpp's empty body.
//!
//! With [`ScriptedLlm::report_usage`] every answer carries `usage` the way OpenAI sends it: in
//! the completion, or streamed as a last chunk with no choices, only when the request asked with
//! `stream_options.include_usage`. The counts differ per call (prompt from the request's size,
//! completion from the answer's) and are kept in [`ScriptedLlm::reported`], so a test compares
//! squidbot's ledger against what the server really said.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Text streamed in about 3 chunks, then `finish_reason: "stop"` and `[DONE]`.
    Text(String),
    /// Reasoning (as `reasoning_content`) streamed before the text.
    TextWithReasoning { text: String, reasoning: String },
    /// Optional text, then tool calls `(id, name, raw arguments)` whose arguments are streamed
    /// in fragments, interleaved across the calls.
    ToolCalls {
        text: String,
        calls: Vec<(String, String, String)>,
    },
    /// An HTTP error status with a body and an optional `Retry-After` header.
    Status {
        status: u16,
        body: String,
        retry_after: Option<String>,
    },
    /// Streams `text`, then drops the connection abruptly (no finish reason, no `[DONE]`).
    ResetAfter { text: String },
    /// Streams `text`, sends nothing for `for_ms`, then finishes normally.
    Stall { text: String, for_ms: u64 },
    /// Waits `for_ms` before sending the response headers, then answers "ok".
    StallHeaders { for_ms: u64 },
    /// `data: {not json` and the end of the stream.
    Malformed,
    /// A 200 `text/event-stream` with an empty body (llama.cpp with tools and streaming).
    EmptyBody,
    /// A 200 with this content type and body, verbatim.
    Raw { content_type: String, body: String },
    /// Waits `ms`, then answers with `then`.
    Delay { ms: u64, then: Box<Reply> },
    /// Waits until as many requests as `gate` counts reached it (requests of different
    /// processes, released together), then answers with `then`.
    Gated {
        gate: Arc<tokio::sync::Barrier>,
        then: Box<Reply>,
    },
    /// Streams `text`, waits until the test opens `gate` (`Notify::notify_one`), then streams
    /// `rest` and finishes: a test can see what a client shows while the stream is still open.
    Hold {
        text: String,
        gate: Arc<Notify>,
        rest: String,
    },
}

impl Reply {
    /// `text`, answered after `ms` milliseconds.
    pub fn text_after(ms: u64, text: &str) -> Reply {
        Reply::Delay {
            ms,
            then: Box::new(Reply::Text(text.to_owned())),
        }
    }
}

type Handler = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// The usage the server reported for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reported {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
    /// Prompt tokens written to the cache (OpenRouter's `cache_write_tokens`).
    pub cache_written: u64,
}

#[derive(Default)]
struct Script {
    queue: VecDeque<Reply>,
    per_model: HashMap<String, VecDeque<Reply>>,
    handler: Option<Handler>,
    requests: Vec<Value>,
    /// The headers of each request, in order, names in lower case.
    headers: Vec<Vec<(String, String)>>,
    /// Whether answers carry `usage`.
    usage: bool,
    /// Whether a request with `stream_options` is refused with a 400 naming it.
    reject_stream_options: bool,
    reported: Vec<(String, Reported)>,
}

/// The running server; dropping it stops accepting connections.
pub struct ScriptedLlm {
    addr: SocketAddr,
    // A std mutex: it is held only for quick queue operations, never across an await.
    script: Arc<Mutex<Script>>,
    task: JoinHandle<()>,
}

impl ScriptedLlm {
    /// Starts a server whose every request is answered with streamed "ok" until told otherwise.
    pub async fn start() -> ScriptedLlm {
        let script = Arc::new(Mutex::new(Script::default()));
        let router = Router::new()
            .route("/v1/chat/completions", post(complete))
            // The Responses and Messages APIs' tests serve recordings verbatim (`Reply::Raw`).
            .route("/v1/responses", post(complete))
            .route("/v1/messages", post(complete))
            .with_state(Arc::clone(&script));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the scripted LLM server");
        let addr = listener.local_addr().expect("scripted server address");
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        ScriptedLlm { addr, script, task }
    }

    /// The API base to configure: `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a reply for the next request of any model (after the per-model queues).
    pub fn enqueue(&self, reply: Reply) {
        self.lock().queue.push_back(reply);
    }

    /// Queues a reply for the next request whose `model` is `model`; checked first.
    pub fn enqueue_for(&self, model: &str, reply: Reply) {
        self.lock()
            .per_model
            .entry(model.to_owned())
            .or_default()
            .push_back(reply);
    }

    /// Answers requests with `f` whenever the queues are empty.
    pub fn set_handler(&self, f: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        self.lock().handler = Some(Arc::new(f));
    }

    /// From now on every answer reports its `usage` (as OpenAI does; see the module doc).
    pub fn report_usage(&self) {
        self.lock().usage = true;
    }

    /// From now on a request carrying `stream_options` gets the HTTP 400 strict servers send.
    pub fn reject_stream_options(&self) {
        self.lock().reject_stream_options = true;
    }

    /// Every usage reported, with the model asked, in order.
    pub fn reported(&self) -> Vec<(String, Reported)> {
        self.lock().reported.clone()
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.lock().requests.clone()
    }

    /// The headers of every request received, in order: (name in lower case, value).
    pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        self.lock().headers.clone()
    }

    /// The text of every user message the LLM was sent, joined by newlines: what reached the
    /// agent, for "this never got through" checks.
    #[allow(dead_code)] // only the server suites (tests/servers) ask it so far
    pub fn user_texts(&self) -> String {
        self.requests()
            .iter()
            .flat_map(|request| request["messages"].as_array().cloned().unwrap_or_default())
            .filter(|m| m["role"] == "user")
            .map(|m| match &m["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// How many requests arrived.
    pub fn request_count(&self) -> usize {
        self.lock().requests.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The text of the last user message of a recorded chat request ("" when it has none): what
/// a handler answers to, and what a test asks the model was sent.
#[allow(dead_code)] // only the server and proof suites ask it so far
pub fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

async fn complete(
    State(script): State<Arc<Mutex<Script>>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let request: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let model = request["model"].as_str().unwrap_or("").to_owned();
    let stream = request["stream"].as_bool().unwrap_or(false);
    let (reply, usage) = {
        let mut script = script.lock().unwrap_or_else(|poison| poison.into_inner());
        script.requests.push(request.clone());
        script.headers.push(
            headers
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                    (name.as_str().to_owned(), value)
                })
                .collect(),
        );
        if script.reject_stream_options && request.get("stream_options").is_some() {
            let body = json!({"error": {"message": "Unrecognized request argument supplied: stream_options", "type": "invalid_request_error", "code": 400}});
            return plain_status(400, body.to_string());
        }
        let queued = script
            .per_model
            .get_mut(&model)
            .and_then(VecDeque::pop_front)
            .or_else(|| script.queue.pop_front());
        let reply = match (queued, &script.handler) {
            (Some(reply), _) => reply,
            (None, Some(handler)) => handler(&request),
            (None, None) => Reply::Text("ok".to_owned()),
        };
        let asked = !stream || request["stream_options"]["include_usage"] == true;
        let usage = match answer_size(&reply) {
            Some(size) if script.usage && asked => {
                let prompt = request["messages"].to_string().len() as u64 / 4 + 3;
                let reported = Reported {
                    prompt,
                    completion: size as u64 / 4 + 1,
                    cached: prompt / 3,
                    cache_written: prompt / 4,
                };
                script.reported.push((model.clone(), reported));
                Some(json!({
                    "prompt_tokens": reported.prompt,
                    "completion_tokens": reported.completion,
                    "total_tokens": reported.prompt + reported.completion,
                    "prompt_tokens_details": {"cached_tokens": reported.cached,
                        "cache_write_tokens": reported.cache_written},
                }))
            }
            _ => None,
        };
        (reply, usage)
    };
    render(reply, model, stream, usage).await
}

/// The size of an answer's text and calls, for the answers that report usage.
fn answer_size(reply: &Reply) -> Option<usize> {
    match reply {
        Reply::Text(text) => Some(text.len()),
        Reply::TextWithReasoning { text, reasoning } => Some(text.len() + reasoning.len()),
        Reply::ToolCalls { text, calls } => Some(
            text.len()
                + calls
                    .iter()
                    .map(|(_, name, args)| name.len() + args.len())
                    .sum::<usize>(),
        ),
        Reply::Delay { then, .. } | Reply::Gated { then, .. } => answer_size(then),
        _ => None,
    }
}

fn plain_status(status: u16, body: String) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("status response")
}

/// One piece of a scripted body.
enum Step {
    Send(String),
    Sleep(u64),
    Wait(Arc<Notify>),
    Fail,
}

fn render(
    reply: Reply,
    model: String,
    stream: bool,
    usage: Option<Value>,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        match reply {
            Reply::Delay { ms, then } => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                render(*then, model, stream, usage).await
            }
            Reply::Gated { gate, then } => {
                gate.wait().await;
                render(*then, model, stream, usage).await
            }
            Reply::StallHeaders { for_ms } => {
                tokio::time::sleep(Duration::from_millis(for_ms)).await;
                render(Reply::Text("ok".to_owned()), model, stream, None).await
            }
            Reply::Status {
                status,
                body,
                retry_after,
            } => {
                let mut builder = Response::builder()
                    .status(
                        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    )
                    .header(header::CONTENT_TYPE, "application/json");
                if let Some(value) = retry_after {
                    builder = builder.header(header::RETRY_AFTER, value);
                }
                builder.body(Body::from(body)).expect("status response")
            }
            Reply::Raw { content_type, body } => plain(&content_type, body),
            Reply::EmptyBody => plain("text/event-stream", String::new()),
            Reply::Malformed if stream => {
                plain("text/event-stream", "data: {not json\n\n".to_owned())
            }
            Reply::Malformed => plain("application/json", "{not json".to_owned()),
            Reply::ResetAfter { text } => {
                let mut steps = if stream {
                    text_events(&model, &text)
                } else {
                    Vec::new()
                };
                // Pause so what was sent is flushed before the reset (hyper would otherwise
                // drop the buffered response, headers included).
                steps.push(Step::Sleep(20));
                steps.push(Step::Fail);
                streamed(stream, steps)
            }
            Reply::Stall { text, for_ms } if stream => {
                let mut steps = text_events(&model, &text);
                steps.push(Step::Sleep(for_ms));
                steps.extend(finish_events(&model, "stop"));
                streamed(true, steps)
            }
            Reply::Stall { text, for_ms } => {
                tokio::time::sleep(Duration::from_millis(for_ms)).await;
                plain("application/json", completion(&model, &text, None, &[]))
            }
            Reply::Hold { text, gate, rest } if stream => {
                let mut steps = text_events(&model, &text);
                steps.push(Step::Wait(gate));
                steps.extend(
                    split3(&rest)
                        .into_iter()
                        .map(|piece| event(&model, json!({"content": piece}), None)),
                );
                steps.extend(finish_events(&model, "stop"));
                streamed(true, steps)
            }
            Reply::Hold { text, gate, rest } => {
                gate.notified().await;
                let whole = format!("{text}{rest}");
                plain("application/json", completion(&model, &whole, None, &[]))
            }
            Reply::Text(text) => answer(&model, stream, &text, None, &[], usage),
            Reply::TextWithReasoning { text, reasoning } => {
                answer(&model, stream, &text, Some(&reasoning), &[], usage)
            }
            Reply::ToolCalls { text, calls } => answer(&model, stream, &text, None, &calls, usage),
        }
    })
}

fn plain(content_type: &str, body: String) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .expect("plain response")
}

fn streamed(sse: bool, steps: Vec<Step>) -> Response {
    let steps: VecDeque<Step> = steps.into();
    let body = futures_util::stream::unfold(steps, |mut steps| async move {
        loop {
            match steps.pop_front()? {
                Step::Send(data) => return Some((Ok(Bytes::from(data)), steps)),
                Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Step::Wait(gate) => gate.notified().await,
                Step::Fail => {
                    let error = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
                    return Some((Err(error), steps));
                }
            }
        }
    });
    let content_type = if sse {
        "text/event-stream"
    } else {
        "application/json"
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from_stream(body))
        .expect("streamed response")
}

fn answer(
    model: &str,
    stream: bool,
    text: &str,
    reasoning: Option<&str>,
    calls: &[(String, String, String)],
    usage: Option<Value>,
) -> Response {
    if !stream {
        let mut body: Value =
            serde_json::from_str(&completion(model, text, reasoning, calls)).expect("completion");
        if let Some(usage) = usage {
            body["usage"] = usage;
        }
        return plain("application/json", body.to_string());
    }
    let mut steps = Vec::new();
    if let Some(reasoning) = reasoning {
        for piece in split3(reasoning) {
            steps.push(event(model, json!({"reasoning_content": piece}), None));
        }
    }
    steps.extend(text_events(model, text));
    // Every call's header first, then the argument fragments round-robin across the calls.
    for (index, (id, name, _)) in calls.iter().enumerate() {
        steps.push(event(
            model,
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
    }
    let fragments: Vec<Vec<String>> = calls.iter().map(|(_, _, args)| split3(args)).collect();
    for round in 0..3 {
        for (index, pieces) in fragments.iter().enumerate() {
            if let Some(piece) = pieces.get(round) {
                steps.push(event(
                    model,
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
    }
    let reason = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let mut finish = finish_events(model, reason);
    if let Some(usage) = usage {
        let chunk = json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": usage,
        });
        finish.insert(1, Step::Send(format!("data: {chunk}\n\n")));
    }
    steps.extend(finish);
    streamed(true, steps)
}

fn text_events(model: &str, text: &str) -> Vec<Step> {
    let mut steps = vec![event(
        model,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for piece in split3(text) {
        steps.push(event(model, json!({"content": piece}), None));
    }
    steps
}

fn finish_events(model: &str, reason: &str) -> Vec<Step> {
    vec![
        event(model, json!({}), Some(reason)),
        Step::Send("data: [DONE]\n\n".to_owned()),
    ]
}

fn event(model: &str, delta: Value, finish_reason: Option<&str>) -> Step {
    let chunk = json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    });
    Step::Send(format!("data: {chunk}\n\n"))
}

fn completion(
    model: &str,
    text: &str,
    reasoning: Option<&str>,
    calls: &[(String, String, String)],
) -> String {
    let mut message = json!({"role": "assistant", "content": text});
    if let Some(reasoning) = reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
    }
    let reason = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
    })
    .to_string()
}

/// Splits text into at most 3 non-empty pieces at character boundaries.
fn split3(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(3);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}
