//! Turning a chat-completions response (an SSE stream, or a plain JSON completion) into a
//! [`ChatResponse`].
//!
//! The accumulator is pure, so the fiddly parts — tool calls assembled from fragments by
//! `index`, arguments that are empty or invalid JSON — are unit-tested without a server. The
//! reader on top applies the idle timeout to the raw body (so SSE comments and keep-alives count
//! as activity) and decides how the stream ended: `[DONE]`, a finish reason, nothing at all (the
//! llama.cpp empty-body quirk, retried by the caller without streaming) or cut short.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use serde_json::Value;

use crate::core::message::ToolCall;
use crate::core::ports::llm::{ChatResponse, LlmError, StreamEvent, StreamObserver};
use crate::core::ports::usage::TokenUsage;
use crate::llm::wire::{Chunk, Completion, Delta, ToolCallDelta, error_payload, usage_of};

/// How many bytes of a bad payload go into an error's detail.
const DETAIL_BYTES: usize = 300;
/// The highest tool-call `index` accepted, so a hostile server cannot make us allocate wildly.
const MAX_TOOL_CALLS: usize = 256;

/// A tool call being assembled from stream fragments.
#[derive(Debug, Default, Clone, PartialEq)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Collects the pieces of one answer.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    text: String,
    reasoning: String,
    calls: Vec<PartialCall>,
    finished: bool,
    usage: Option<TokenUsage>,
}

impl Accumulator {
    /// Applies one streamed chunk, reporting new text to the observer.
    pub(crate) fn apply_chunk(&mut self, chunk: Chunk, observer: StreamObserver<'_>) {
        if let Some(usage) = chunk.usage.as_ref().and_then(usage_of) {
            self.usage = Some(usage);
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                self.apply_delta(delta, observer);
            }
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
        }
    }

    fn apply_delta(&mut self, delta: Delta, observer: StreamObserver<'_>) {
        if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
            self.text.push_str(&text);
            observer(StreamEvent::TextDelta(text));
        }
        if let Some(reasoning) = delta.reasoning_content.or(delta.reasoning) {
            self.reasoning.push_str(&reasoning);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            self.apply_tool_call(call, position);
        }
    }

    /// Adds a tool-call fragment; `position` stands in for a missing `index`.
    fn apply_tool_call(&mut self, fragment: ToolCallDelta, position: usize) {
        let index = fragment.index.unwrap_or(position);
        if index >= MAX_TOOL_CALLS {
            tracing::debug!(index, "Tool-call fragment with an absurd index ignored.");
            return;
        }
        if self.calls.len() <= index {
            self.calls.resize(index + 1, PartialCall::default());
        }
        let call = &mut self.calls[index];
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            // OpenAI sends the name once; llama.cpp's server (llama-cpp-python) repeats the
            // whole name in every fragment, which must not be appended again. See: #7.
            if let Some(name) = function.name.filter(|name| *name != call.name) {
                call.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    /// Whether a finish reason was seen.
    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    /// The finished response, with each call's arguments parsed.
    pub(crate) fn finish(self, model: &str) -> ChatResponse {
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, call)| !call.name.is_empty() || !call.arguments.is_empty())
            .map(|(index, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}_{:08x}", fastrand::u32(..))
                } else {
                    call.id
                },
                name: call.name,
                arguments: parse_arguments(&call.arguments),
            })
            .collect();
        ChatResponse {
            text: self.text,
            tool_calls,
            reasoning_content: Some(self.reasoning).filter(|r| !r.is_empty()),
            model: model.to_owned(),
            usage: self.usage,
        }
    }
}

/// Parses a tool call's arguments: empty or a bare JSON `null` means no arguments, `{}`; invalid
/// JSON is kept as a string value so the tool layer can tell the model what was wrong.
///
/// Public (as [`crate::llm::parse_tool_arguments`]) because it is the first half of tool-argument
/// validation: what this returns is what a tool's `call` receives, so checks of that pipeline
/// (the fuzz targets of `fuzz/`) must start from the same function.
pub fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str(raw) {
        // `null` would be stored as null but go back to the provider as `{}` (what a stored
        // call without arguments sends): normalised here, history and provider agree. See: #7
        Ok(Value::Null) => Value::Object(Default::default()),
        // A bare JSON string is kept as the text the model wrote (quotes included), like invalid
        // JSON: a parsed string could not be told apart from raw text and would go back to the
        // provider without its quotes. See: #7.
        Ok(Value::String(_)) | Err(_) => Value::String(raw.to_owned()),
        Ok(value) => value,
    }
}

/// The first [`DETAIL_BYTES`] of a text, cut at a character boundary.
pub(crate) fn head(text: &str) -> String {
    let mut end = text.len().min(DETAIL_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// How a streamed response ended.
#[derive(Debug)]
pub(crate) enum StreamOutcome {
    /// A whole answer.
    Complete(ChatResponse),
    /// A 200 with no body at all: retry without streaming.
    Empty,
}

/// Why the body stopped before the SSE parser saw its end.
#[derive(Debug, thiserror::Error)]
enum BodyFailure {
    /// No bytes for longer than the idle timeout.
    #[error("idle timeout")]
    Idle,
    /// The connection broke.
    #[error("{0}")]
    Transport(#[from] reqwest::Error),
}

/// Reads an SSE response to its end, streaming text to `observer`.
pub(crate) async fn read_sse(
    response: reqwest::Response,
    idle: Duration,
    model: &str,
    observer: StreamObserver<'_>,
) -> Result<StreamOutcome, LlmError> {
    let received = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&received);
    let bytes = Box::pin(response.bytes_stream());
    let body = futures_util::stream::unfold((bytes, false), move |(mut bytes, failed)| {
        let counter = Arc::clone(&counter);
        async move {
            if failed {
                return None;
            }
            match tokio::time::timeout(idle, bytes.next()).await {
                Ok(Some(Ok(chunk))) => {
                    counter.fetch_add(chunk.len(), Ordering::Relaxed);
                    Some((Ok(chunk), (bytes, false)))
                }
                Ok(Some(Err(error))) => Some((Err(BodyFailure::from(error)), (bytes, true))),
                Ok(None) => None,
                Err(_) => Some((Err(BodyFailure::Idle), (bytes, true))),
            }
        }
    });
    let mut events = pin!(body.eventsource());
    let mut accumulator = Accumulator::default();
    let mut n_events = 0usize;
    let protocol = |detail: String| LlmError::Protocol {
        model: model.to_owned(),
        detail,
    };
    while let Some(item) = events.next().await {
        let event = match item {
            Ok(event) => event,
            // A server that finished its answer but keeps the connection open, or drops it
            // without `[DONE]`, still gave a whole answer.
            Err(_) if accumulator.is_finished() => break,
            Err(EventStreamError::Transport(BodyFailure::Idle)) => {
                return Err(LlmError::Timeout {
                    model: model.to_owned(),
                    phase: "idle",
                });
            }
            Err(EventStreamError::Transport(BodyFailure::Transport(error))) => {
                return Err(protocol(format!("stream broken: {error}")));
            }
            Err(error) => return Err(protocol(format!("invalid SSE: {error}"))),
        };
        n_events += 1;
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(StreamOutcome::Complete(accumulator.finish(model)));
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|error| {
            protocol(format!(
                "invalid JSON in SSE data ({error}): {}",
                head(data)
            ))
        })?;
        if let Some(error) = &chunk.error {
            let (status, detail) = error_payload(error);
            return Err(LlmError::Server {
                model: model.to_owned(),
                status,
                detail: head(&detail),
            });
        }
        accumulator.apply_chunk(chunk, observer);
    }
    if accumulator.is_finished() {
        Ok(StreamOutcome::Complete(accumulator.finish(model)))
    } else if n_events == 0 && received.load(Ordering::Relaxed) == 0 {
        Ok(StreamOutcome::Empty)
    } else if n_events == 0 {
        Err(protocol("the response held no SSE events".to_owned()))
    } else {
        Err(protocol("stream ended early".to_owned()))
    }
}

/// Parses a non-streamed completion, reporting its text to `observer` as one delta.
pub(crate) fn parse_completion(
    body: &[u8],
    model: &str,
    observer: StreamObserver<'_>,
) -> Result<ChatResponse, LlmError> {
    let completion: Completion =
        serde_json::from_slice(body).map_err(|error| LlmError::Protocol {
            model: model.to_owned(),
            detail: format!(
                "invalid JSON completion ({error}): {}",
                head(&String::from_utf8_lossy(body))
            ),
        })?;
    if let Some(error) = &completion.error {
        let (status, detail) = error_payload(error);
        return Err(LlmError::Server {
            model: model.to_owned(),
            status,
            detail: head(&detail),
        });
    }
    let message = completion
        .choices
        .into_iter()
        .next()
        .and_then(|choice| choice.message)
        .ok_or_else(|| LlmError::Protocol {
            model: model.to_owned(),
            detail: "the completion has no message".to_owned(),
        })?;
    let mut accumulator = Accumulator {
        usage: completion.usage.as_ref().and_then(usage_of),
        ..Accumulator::default()
    };
    accumulator.apply_delta(
        Delta {
            content: message.content,
            reasoning_content: message.reasoning_content,
            reasoning: message.reasoning,
            tool_calls: message.tool_calls,
        },
        observer,
    );
    Ok(accumulator.finish(model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    fn chunk(value: Value) -> Chunk {
        serde_json::from_value(value).unwrap()
    }

    /// Seen in llama.cpp's raw stream while building the compat suite: llama-cpp-python repeats the
    /// function name in every streamed fragment, which made `list_fileslist_files…`. See: #7
    #[test]
    fn issue_7_a_name_repeated_in_every_fragment_is_kept_once() {
        let mut accumulator = Accumulator::default();
        for arguments in ["{", "\"path\": \"a\"", "}"] {
            let fragment = json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x",
                "type":"function","function":{"name":"list_files","arguments":arguments}}]}}]});
            accumulator.apply_chunk(serde_json::from_value(fragment).unwrap(), &|_| {});
        }
        let response = accumulator.finish("m");
        assert_eq!(response.tool_calls.len(), 1);
        assert_eq!(response.tool_calls[0].name, "list_files");
        assert_eq!(response.tool_calls[0].arguments, json!({"path": "a"}));
    }

    /// Found while writing the `tool_arguments` fuzz target's round-trip invariant (its seed
    /// `string.json`): `"ls"` went back to the provider as `ls`. See: #7
    #[test]
    fn issue_7_a_json_string_argument_round_trips_verbatim() {
        for raw in [r#""ls""#, "{broken", r#"{"a":"b"}"#, "[1,2]"] {
            let value = parse_arguments(raw);
            let sent = crate::llm::tool_arguments_text(&value);
            assert_eq!(
                serde_json::from_str::<Value>(&sent).ok(),
                serde_json::from_str(raw).ok()
            );
            if value.is_string() {
                assert_eq!(sent, raw);
            }
        }
    }

    /// Found by the `tool_arguments` fuzz target (input `null`, kept as seed `null.json`): the
    /// model's `null` was stored as null but sent back as `{}`.
    #[test]
    fn issue_7_null_arguments_mean_none_in_history_and_back() {
        let value = parse_arguments(" null ");
        assert_eq!(value, json!({}));
        assert_eq!(crate::llm::tool_arguments_text(&value), "{}");
    }

    /// Found by the `tool_arguments` fuzz target: without serde_json's `float_roundtrip`, a
    /// long number came back to the provider as a slightly different number.
    #[test]
    fn issue_7_a_long_number_argument_round_trips_exactly() {
        let raw = r#"{"n": 33333333333333333333333333333333, "x": 0.30000000000000004}"#;
        let value = parse_arguments(raw);
        let sent = crate::llm::tool_arguments_text(&value);
        assert_eq!(serde_json::from_str::<Value>(&sent).unwrap(), value);
    }

    #[test]
    fn tool_calls_are_assembled_by_index() {
        let seen = Mutex::new(Vec::new());
        let observer = |event: StreamEvent| seen.lock().unwrap().push(event);
        let mut accumulator = Accumulator::default();
        let chunks = [
            json!({"choices":[{"delta":{"content":"Hi"}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"sh","arguments":"{\"c"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"read","arguments":""}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"md\":1}"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{oops"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":2,"id":"c","function":{"name":"x"}}]}}]}),
            json!({"choices":[{"delta":{"reasoning":"hm"},"finish_reason":"tool_calls"}]}),
        ];
        for value in chunks {
            accumulator.apply_chunk(chunk(value), &observer);
        }
        assert!(accumulator.is_finished());
        let response = accumulator.finish("m");
        assert_eq!(response.text, "Hi");
        assert_eq!(response.reasoning_content.as_deref(), Some("hm"));
        let calls: Vec<_> = response
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("a", "sh", json!({"cmd": 1})),
                ("b", "read", Value::String("{oops".into())),
                ("c", "x", json!({})),
            ]
        );
        assert_eq!(
            *seen.lock().unwrap(),
            vec![StreamEvent::TextDelta("Hi".into())]
        );
    }

    #[test]
    fn usage_comes_from_the_last_chunk_that_has_it() {
        let mut accumulator = Accumulator::default();
        let chunks = [
            json!({"choices":[{"delta":{"content":"Hi"}}],"usage":null}),
            json!({"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}),
            json!({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":3,
                "prompt_tokens_details":{"cached_tokens":32}}}),
        ];
        for value in chunks {
            accumulator.apply_chunk(chunk(value), &|_| {});
        }
        let usage = accumulator.finish("m").usage.unwrap();
        assert_eq!((usage.prompt, usage.completion, usage.cached), (40, 3, 32));
        let mut silent = Accumulator::default();
        silent.apply_chunk(
            chunk(json!({"choices":[{"delta":{"content":"x"}}]})),
            &|_| {},
        );
        assert_eq!(silent.finish("m").usage, None);
        let body = json!({"choices":[{"message":{"content":"done"}}],
            "usage":{"prompt_tokens":7,"completion_tokens":1}});
        let response = parse_completion(body.to_string().as_bytes(), "m", &|_| {}).unwrap();
        assert_eq!(response.usage.map(|u| u.total()), Some(8));
    }

    #[test]
    fn missing_ids_and_indexes_are_filled_in() {
        let mut accumulator = Accumulator::default();
        accumulator.apply_chunk(
            chunk(json!({"choices":[{"delta":{"tool_calls":[
                {"function":{"name":"a","arguments":"{}"}},
                {"function":{"name":"b","arguments":"{}"}}
            ]}}]})),
            &|_| {},
        );
        accumulator.apply_chunk(
            chunk(json!({"choices":[{"delta":{"tool_calls":[
                {"index": 4_000_000_000u64, "function":{"name":"huge"}}
            ]}}]})),
            &|_| {},
        );
        let response = accumulator.finish("m");
        assert_eq!(response.tool_calls.len(), 2);
        assert!(response.tool_calls[0].id.starts_with("call_0_"));
        assert_eq!(response.tool_calls[1].name, "b");
    }

    #[test]
    fn completion_parses_text_tools_and_errors() {
        let body = json!({"choices":[{"message":{"content":"done","reasoning_content":"r",
            "tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{\"a\":2}"}}]}}]});
        let response = parse_completion(body.to_string().as_bytes(), "m", &|_| {}).unwrap();
        assert_eq!(response.text, "done");
        assert_eq!(response.reasoning_content.as_deref(), Some("r"));
        assert_eq!(response.tool_calls[0].arguments, json!({"a": 2}));
        let error = parse_completion(br#"{"error":{"message":"no","code":401}}"#, "m", &|_| {});
        assert!(matches!(error, Err(LlmError::Server { status: 401, .. })));
        let error = parse_completion(b"<html>", "m", &|_| {});
        assert!(matches!(error, Err(LlmError::Protocol { .. })));
    }

    #[test]
    fn head_cuts_at_a_char_boundary() {
        let text = "é".repeat(200);
        let cut = head(&text);
        assert!(cut.len() <= DETAIL_BYTES && cut.len() >= DETAIL_BYTES - 1);
    }
}
