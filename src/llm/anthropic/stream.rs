//! Anthropic's streamed Messages events into a [`ChatResponse`]
//! (<https://docs.anthropic.com/en/docs/build-with-claude/streaming>).
//!
//! A message streams as numbered content blocks: `content_block_start` names the block's kind
//! (text, a `tool_use` with its id and name, `thinking`, `redacted_thinking`, or a server
//! tool's block, which is not squidbot's and is skipped), `content_block_delta`s fill it in
//! (text, the tool input as fragments of JSON, thinking text, the thinking block's
//! signature), and `message_delta` ends the message with its stop reason and final usage. The
//! accumulator is pure, so every event kind is unit-tested without a server; the reader on top
//! shares the idle timeout and SSE parsing with Chat Completions.
//!
//! An answer cut at `max_tokens` or refused says so the way a Chat Completions answer cut at
//! `length` or refused does. An `error` event is classified like an HTTP status, so an
//! `overloaded_error` mid-stream is retried or falls back like a 529.

use std::collections::BTreeMap;
use std::pin::pin;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::core::message::{ReasoningState, ToolCall};
use crate::core::ports::llm::{ChatResponse, LlmError, StreamEvent, StreamObserver};
use crate::core::ports::usage::TokenUsage;
use crate::llm::anthropic::request::API;
use crate::llm::assemble::parse_arguments;
use crate::llm::http::{classify_status, head, parse_json, sse_error, sse_events};
use crate::llm::stream::{CUT_NOTE, append_note};

/// Said for an answer the model declined with no words of its own (`stop_reason: refusal`).
const REFUSED_NOTE: &str = "[The model declined to answer this request.]";

/// One content block as it fills in.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    /// A thinking or redacted_thinking block, kept whole: it goes back verbatim.
    Thinking(Value),
    /// A block squidbot does not act on (server tools and their results).
    Other,
}

/// The usage figures, each as the latest event said it.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    input: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    output: Option<u64>,
}

impl Usage {
    /// Takes the figures `usage` holds; `message_delta` repeats or updates those of
    /// `message_start`.
    fn update(&mut self, usage: &Value) {
        let number = |key: &str| usage.get(key).and_then(Value::as_u64);
        self.input = number("input_tokens").or(self.input);
        self.cache_creation = number("cache_creation_input_tokens").or(self.cache_creation);
        self.cache_read = number("cache_read_input_tokens").or(self.cache_read);
        self.output = number("output_tokens").or(self.output);
    }

    /// As squidbot counts, as OpenAI does: every input token is a prompt token (fresh, written
    /// to the cache, read from it), the cache reads are the cached ones, and the cache writes
    /// are kept apart because Anthropic prices them above fresh input.
    fn tokens(&self) -> Option<TokenUsage> {
        if self.input.is_none() && self.output.is_none() {
            return None;
        }
        let cached = self.cache_read.unwrap_or(0);
        let cache_written = self.cache_creation.unwrap_or(0);
        Some(TokenUsage {
            prompt: self.input.unwrap_or(0) + cache_written + cached,
            completion: self.output.unwrap_or(0),
            cached,
            cache_written,
        })
    }
}

/// Collects the events of one message.
#[derive(Debug, Default)]
pub(crate) struct MessageAccumulator {
    blocks: BTreeMap<u64, Block>,
    text: String,
    reasoning: String,
    usage: Usage,
    stop_reason: Option<String>,
    /// What the API said about a refusal (`stop_details.explanation`).
    refusal: Option<String>,
    stopped: bool,
}

impl MessageAccumulator {
    /// Applies one event's data, reporting text to the observer; an `error` event is the
    /// call's error.
    pub(crate) fn apply(
        &mut self,
        event: &Value,
        model: &str,
        observer: StreamObserver<'_>,
    ) -> Result<(), LlmError> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(usage) = event.pointer("/message/usage") {
                    self.usage.update(usage);
                }
            }
            Some("content_block_start") => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                let started = self.start(block, observer);
                self.blocks.insert(index, started);
            }
            Some("content_block_delta") => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                self.delta(index, delta, observer);
            }
            Some("message_delta") => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(explanation) = event
                    .pointer("/delta/stop_details/explanation")
                    .and_then(Value::as_str)
                {
                    self.refusal = Some(explanation.to_owned());
                }
                if let Some(usage) = event.get("usage") {
                    self.usage.update(usage);
                }
            }
            Some("message_stop") => self.stopped = true,
            Some("error") => return Err(stream_error(event, model)),
            // `ping`, `content_block_stop` and kinds added later.
            _ => {}
        }
        Ok(())
    }

    fn start(&mut self, block: &Value, observer: StreamObserver<'_>) -> Block {
        let text = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                self.push_text(&text("text"), observer);
                Block::Text
            }
            Some("tool_use") => {
                // The input streams as JSON fragments; one sent whole at the start is kept.
                let input = match block.get("input") {
                    Some(Value::Object(map)) if !map.is_empty() => block["input"].to_string(),
                    _ => String::new(),
                };
                Block::ToolUse {
                    id: text("id"),
                    name: text("name"),
                    input,
                }
            }
            Some("thinking") => {
                self.reasoning.push_str(&text("thinking"));
                Block::Thinking(block.clone())
            }
            Some("redacted_thinking") => Block::Thinking(block.clone()),
            _ => Block::Other,
        }
    }

    fn delta(&mut self, index: u64, delta: &Value, observer: StreamObserver<'_>) {
        let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let kind = delta.get("type").and_then(Value::as_str);
        if kind == Some("text_delta") {
            self.push_text(piece("text"), observer);
            return;
        }
        match (self.blocks.get_mut(&index), kind) {
            (Some(Block::ToolUse { input, .. }), Some("input_json_delta")) => {
                input.push_str(piece("partial_json"));
            }
            (Some(Block::Thinking(block)), Some("thinking_delta")) => {
                let thinking = piece("thinking");
                self.reasoning.push_str(thinking);
                append(block, "thinking", thinking);
            }
            (Some(Block::Thinking(block)), Some("signature_delta")) => {
                append(block, "signature", piece("signature"));
            }
            _ => {}
        }
    }

    fn push_text(&mut self, text: &str, observer: StreamObserver<'_>) {
        if !text.is_empty() {
            self.text.push_str(text);
            observer(StreamEvent::TextDelta(text.to_owned()));
        }
    }

    /// Whether the message was ended (a stop reason or `message_stop`).
    pub(crate) fn is_finished(&self) -> bool {
        self.stopped || self.stop_reason.is_some()
    }

    /// The finished response: tool calls in block order, thinking blocks kept for the next
    /// round, a note on a cut or refused answer.
    pub(crate) fn finish(mut self, model: &str, observer: StreamObserver<'_>) -> ChatResponse {
        let note = match self.stop_reason.as_deref() {
            Some("max_tokens") => Some(CUT_NOTE.to_owned()),
            Some("refusal") if self.text.trim().is_empty() => Some(
                self.refusal
                    .take()
                    .unwrap_or_else(|| REFUSED_NOTE.to_owned()),
            ),
            _ => None,
        };
        if let Some(note) = note {
            append_note(&mut self.text, &note, observer);
        }
        let mut tool_calls = Vec::new();
        let mut items = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: parse_arguments(&input),
                    provider_state: None,
                }),
                Block::Thinking(item) => items.push(item),
                Block::Text | Block::Other => {}
            }
        }
        ChatResponse {
            text: self.text,
            tool_calls,
            reasoning_content: Some(self.reasoning).filter(|r| !r.is_empty()),
            reasoning_state: (!items.is_empty()).then(|| ReasoningState {
                api: API.to_owned(),
                items,
            }),
            model: model.to_owned(),
            usage: self.usage.tokens(),
        }
    }

    /// The usage reported so far, for a call that then failed.
    pub(crate) fn usage(&self) -> Option<TokenUsage> {
        self.usage.tokens()
    }
}

/// Appends `piece` to the string at `key` of a block (creating it).
fn append(block: &mut Value, key: &str, piece: &str) {
    match block.get_mut(key) {
        Some(Value::String(text)) => text.push_str(piece),
        _ => block[key] = json!(piece),
    }
}

/// The error an `error` event stands for, classified as its HTTP status would be
/// (<https://docs.anthropic.com/en/api/errors>): `overloaded_error` as 529 and `api_error` as
/// 500, both retryable; a rate limit as 429; the rest as the request's fault.
fn stream_error(event: &Value, model: &str) -> LlmError {
    let kind = event
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = event
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map_or_else(|| head(&event.to_string()), head);
    let status = match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 500,
    };
    classify_status(model, "", status, None, format!("{kind}: {message}"))
}

/// Reads a streamed Messages response to its end, streaming text to `observer`. When the
/// stream fails after the usage was reported, the error comes with it: the provider bills it.
pub(crate) async fn read_stream(
    response: reqwest::Response,
    idle: Duration,
    model: &str,
    observer: StreamObserver<'_>,
) -> Result<ChatResponse, (LlmError, Option<TokenUsage>)> {
    let (events, _) = sse_events(response, idle);
    let mut events = pin!(events);
    let mut accumulator = MessageAccumulator::default();
    let failure = loop {
        match events.next().await {
            None => break None,
            // A message whose stop reason came is whole, even if the connection then broke.
            Some(Err(_)) if accumulator.is_finished() => break None,
            Some(Err(error)) => break Some(sse_error(error, model)),
            Some(Ok(event)) => {
                if let Err(error) = apply_data(&mut accumulator, &event.data, model, observer) {
                    break Some(error);
                }
                if accumulator.stopped {
                    break None;
                }
            }
        }
    };
    match failure {
        None if accumulator.is_finished() => Ok(accumulator.finish(model, observer)),
        None => {
            let error = LlmError::Protocol {
                model: model.to_owned(),
                detail: "stream ended early".to_owned(),
            };
            Err((error, accumulator.usage()))
        }
        Some(error) => Err((error, accumulator.usage())),
    }
}

/// Applies one event's `data` (blank data, which SSE allows, is nothing).
fn apply_data(
    accumulator: &mut MessageAccumulator,
    data: &str,
    model: &str,
    observer: StreamObserver<'_>,
) -> Result<(), LlmError> {
    let data = data.trim();
    if data.is_empty() {
        return Ok(());
    }
    let event: Value = parse_json(data.as_bytes(), "SSE data", model)?;
    accumulator.apply(&event, model, observer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn run(events: &[Value]) -> (Result<ChatResponse, LlmError>, String) {
        let shown = Mutex::new(String::new());
        let observer = |event: StreamEvent| {
            if let StreamEvent::TextDelta(text) = event {
                shown.lock().unwrap().push_str(&text);
            }
        };
        let mut accumulator = MessageAccumulator::default();
        let mut result = Ok(());
        for event in events {
            result = accumulator.apply(event, "m", &observer);
            if result.is_err() {
                break;
            }
        }
        let response = result.map(|()| accumulator.finish("m", &observer));
        let shown = shown.into_inner().unwrap();
        (response, shown)
    }

    fn start(usage: Value) -> Value {
        json!({"type": "message_start", "message": {"usage": usage}})
    }

    #[test]
    fn tool_uses_thinking_and_cache_usage_are_assembled() {
        let events = [
            start(
                json!({"input_tokens": 10, "cache_creation_input_tokens": 20,
                "cache_read_input_tokens": 300, "output_tokens": 1}),
            ),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "Two tools."}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "signature_delta", "signature": "c2ln"}}),
            json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "redacted_thinking", "data": "opaque"}}),
            json!({"type": "content_block_start", "index": 2,
                "content_block": {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {}}}),
            json!({"type": "content_block_start", "index": 3,
                "content_block": {"type": "tool_use", "id": "toolu_b", "name": "mul", "input": {}}}),
            json!({"type": "content_block_delta", "index": 3,
                "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
            json!({"type": "content_block_delta", "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": "{\"a\": 2}"}}),
            json!({"type": "content_block_delta", "index": 3,
                "delta": {"type": "input_json_delta", "partial_json": "3}"}}),
            json!({"type": "ping"}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 40}}),
            json!({"type": "message_stop"}),
        ];
        let (response, shown) = run(&events);
        let response = response.unwrap();
        assert_eq!(shown, "");
        let calls: Vec<(&str, &str, &Value)> = response
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), &c.arguments))
            .collect();
        assert_eq!(
            calls,
            [
                ("toolu_a", "add", &json!({"a": 2})),
                ("toolu_b", "mul", &json!({"a": 3}))
            ]
        );
        assert_eq!(response.reasoning_content.as_deref(), Some("Two tools."));
        let state = response.reasoning_state.unwrap();
        assert_eq!(state.api, "anthropic");
        assert_eq!(
            state.items,
            [
                json!({"type": "thinking", "thinking": "Two tools.", "signature": "c2ln"}),
                json!({"type": "redacted_thinking", "data": "opaque"}),
            ]
        );
        assert_eq!(
            response.usage,
            Some(TokenUsage {
                prompt: 330,
                completion: 40,
                cached: 300,
                cache_written: 20,
            })
        );
    }

    #[test]
    fn cut_and_refused_answers_say_so() {
        let text = |t: &str| {
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": t}})
        };
        let stop =
            |reason: &str| json!({"type": "message_delta", "delta": {"stop_reason": reason}});
        let (response, shown) = run(&[text("Once upon"), stop("max_tokens")]);
        let response = response.unwrap();
        assert!(response.text.starts_with("Once upon\n\n") && response.text.contains("cut short"));
        assert_eq!(shown, response.text);
        let (response, _) = run(&[stop("refusal")]);
        assert_eq!(response.unwrap().text, REFUSED_NOTE);
        let (response, _) = run(&[text("No."), stop("refusal")]);
        assert_eq!(response.unwrap().text, "No.");
    }

    #[test]
    fn error_events_are_classified_like_statuses() {
        let error = |kind: &str| {
            let event = json!({"type": "error", "error": {"type": kind, "message": "said"}});
            run(&[event]).0.unwrap_err()
        };
        let overloaded = error("overloaded_error");
        assert!(matches!(overloaded, LlmError::Server { status: 529, .. }));
        assert!(overloaded.is_retryable());
        assert!(error("api_error").is_retryable());
        assert!(matches!(
            error("rate_limit_error"),
            LlmError::RateLimited { .. }
        ));
        let invalid = error("invalid_request_error");
        assert!(!invalid.is_retryable());
        assert!(invalid.to_string().contains("said"));
    }
}
