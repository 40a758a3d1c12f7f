//! Turning a Responses API answer (its SSE events, or a plain JSON response object) into a
//! [`ChatResponse`].
//!
//! The events name their items: a function call is announced by
//! `response.output_item.added` (with its `call_id` and name), its arguments stream as
//! `response.function_call_arguments.delta` keyed by the item's id, and
//! `response.output_item.done` gives the finished item, which wins over the pieces. Reasoning
//! items are kept whole as they are done (their `encrypted_content` must go back verbatim);
//! their summaries are the reasoning text. The answer ends with `response.completed`,
//! `response.incomplete` (a reply cut at `max_output_tokens` or by a content filter, shown
//! with a note as for Chat Completions) or `response.failed` / `error` (an [`LlmError`] the
//! pool can act on). The accumulator is pure, so all of this is unit-tested without a server.

use std::pin::pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use crate::core::message::{ReasoningState, ToolCall};
use crate::core::ports::llm::{ChatResponse, LlmError, StreamEvent, StreamObserver};
use crate::core::ports::usage::TokenUsage;
use crate::llm::assemble::{CallAssembler, parse_arguments};
use crate::llm::http::{head, parse_json, sse_error, sse_events};
use crate::llm::responses::request::API;
use crate::llm::stream::{CUT_NOTE, FILTERED_NOTE, append_note, billed, markup_calls, take_split};
use crate::llm::think::TagSplitter;
use crate::llm::wire::usage_of;

/// Error codes of a failed response that another try may not meet: the pool retries them.
const RETRYABLE_CODES: [&str; 3] = ["server_error", "server_is_overloaded", "slow_down"];

/// A function call being streamed.
#[derive(Debug, Default)]
struct PendingCall {
    /// The item's id, which the argument deltas name.
    item_id: String,
    call_id: String,
    name: String,
    arguments: String,
}

/// How the answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Completed,
    /// Cut at the token limit.
    Cut,
    /// Stopped by a content filter.
    Filtered,
}

/// Collects the pieces of one answer.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    text: String,
    refusal: String,
    reasoning: String,
    /// Reasoning items, whole, for the next round.
    items: Vec<Value>,
    calls: Vec<PendingCall>,
    /// The text as the model wrote it, tags and all: what a message's done item is compared
    /// with.
    written: String,
    /// The messages whose text is in `written`, each with where its text starts there.
    streamed: Vec<(String, usize)>,
    /// `<think>` and `<tool_call>` taken out of the text (a local server's Responses API
    /// passes them through as a Chat Completions one does), held back from the person until
    /// known to be text.
    tags: TagSplitter,
    usage: Option<TokenUsage>,
    ending: Option<Ending>,
}

impl Accumulator {
    /// Applies one event; an `Err` is the answer's failure.
    pub(crate) fn apply(
        &mut self,
        event: &Value,
        model: &str,
        observer: StreamObserver<'_>,
    ) -> Result<(), LlmError> {
        let text = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "response.output_item.added" => {
                if let Some(item) = event.get("item") {
                    self.item_added(item);
                }
            }
            "response.output_text.delta" => {
                let delta = text("delta");
                if !delta.is_empty() {
                    self.mark_streamed(text("item_id"), model, observer);
                    self.write(delta, model, observer);
                }
            }
            "response.refusal.delta" => {
                let delta = text("delta");
                if !delta.is_empty() {
                    self.mark_streamed(text("item_id"), model, observer);
                    self.refusal.push_str(delta);
                    observer(StreamEvent::TextDelta(delta.to_owned()));
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(call) = self.call_mut(text("item_id")) {
                    call.arguments.push_str(text("delta"));
                }
            }
            "response.function_call_arguments.done" => {
                if let (Some(call), Some(arguments)) = (
                    self.call_mut(text("item_id")),
                    event.get("arguments").and_then(Value::as_str),
                ) {
                    arguments.clone_into(&mut call.arguments);
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.get("item") {
                    self.item_done(item, model, observer);
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                if let Some(response) = event.get("response") {
                    self.ended(response, model)?;
                }
            }
            "error" => return Err(failure(event.get("error").unwrap_or(event), model)),
            _ => {}
        }
        Ok(())
    }

    /// Applies a whole response object (a server that answered without streaming).
    pub(crate) fn apply_response(
        &mut self,
        response: &Value,
        model: &str,
        observer: StreamObserver<'_>,
    ) -> Result<(), LlmError> {
        for item in response
            .get("output")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.item_added(item);
            self.item_done(item, model, observer);
        }
        self.ended(response, model)
    }

    /// Notes that the message `item_id` streams; a second message (a commentary, then the
    /// final answer) starts a new paragraph.
    fn mark_streamed(&mut self, item_id: &str, model: &str, observer: StreamObserver<'_>) {
        if self.streamed.iter().any(|(seen, _)| seen == item_id) {
            return;
        }
        if !self.written.is_empty() {
            self.write("\n\n", model, observer);
        }
        self.streamed.push((item_id.to_owned(), self.written.len()));
    }

    /// Text the model wrote: through the tag splitter, which shows what is known to be text.
    fn write(&mut self, piece: &str, model: &str, observer: StreamObserver<'_>) {
        self.written.push_str(piece);
        let split = self.tags.push(piece);
        take_split(split, &mut self.text, &mut self.reasoning, model, observer);
    }

    /// A finished message. Its done item holds its whole text: what the deltas did not bring
    /// (all of it, when none came) is added, so an answer that lost deltas is still whole.
    fn message_done(&mut self, id: &str, item: &Value, model: &str, observer: StreamObserver<'_>) {
        let (mut full, mut refusal) = (String::new(), String::new());
        for part in item
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text = |key: &str| part.get(key).and_then(Value::as_str).unwrap_or_default();
            match part.get("type").and_then(Value::as_str) {
                Some("output_text") => full.push_str(text("text")),
                Some("refusal") => refusal.push_str(text("refusal")),
                _ => {}
            }
        }
        if self.refusal.is_empty() {
            self.refusal = refusal;
        }
        if full.is_empty() {
            return;
        }
        self.mark_streamed(id, model, observer);
        let Some((last, start)) = self.streamed.last() else {
            return;
        };
        if last != id {
            // Another message streamed after this one: its text cannot be amended in place.
            return;
        }
        let have = self.written.get(*start..).unwrap_or_default();
        if let Some(rest) = full.strip_prefix(have).filter(|rest| !rest.is_empty()) {
            let rest = rest.to_owned();
            self.write(&rest, model, observer);
        }
    }

    fn call_mut(&mut self, item_id: &str) -> Option<&mut PendingCall> {
        self.calls.iter_mut().find(|call| call.item_id == item_id)
    }

    fn item_added(&mut self, item: &Value) {
        if item.get("type").and_then(Value::as_str) != Some("function_call") {
            return;
        }
        let field = |key: &str| {
            item.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let item_id = field("id");
        if self.call_mut(&item_id).is_none() {
            self.calls.push(PendingCall {
                call_id: field("call_id"),
                name: field("name"),
                arguments: field("arguments"),
                item_id,
            });
        }
    }

    fn item_done(&mut self, item: &Value, model: &str, observer: StreamObserver<'_>) {
        let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                self.item_added(item);
                if let Some(call) = self.call_mut(id) {
                    for (key, into) in [
                        ("call_id", &mut call.call_id),
                        ("name", &mut call.name),
                        ("arguments", &mut call.arguments),
                    ] {
                        if let Some(value) = item.get(key).and_then(Value::as_str) {
                            value.clone_into(into);
                        }
                    }
                }
            }
            Some("reasoning") => {
                for part in item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(text) = part.get("text").and_then(Value::as_str) {
                        if !self.reasoning.is_empty() {
                            self.reasoning.push_str("\n\n");
                        }
                        self.reasoning.push_str(text);
                    }
                }
                self.items.push(item.clone());
            }
            Some("message") => self.message_done(id, item, model, observer),
            _ => {}
        }
    }

    /// The final response object: its usage, and how it ended.
    fn ended(&mut self, response: &Value, model: &str) -> Result<(), LlmError> {
        if let Some(usage) = response.get("usage").and_then(usage_of) {
            self.usage = Some(usage);
        }
        match response.get("status").and_then(Value::as_str) {
            Some("failed") => {
                let error = response.get("error").filter(|error| !error.is_null());
                return Err(failure(error.unwrap_or(&Value::Null), model));
            }
            Some("incomplete") => {
                let reason = response
                    .pointer("/incomplete_details/reason")
                    .and_then(Value::as_str);
                self.ending = Some(if reason == Some("content_filter") {
                    Ending::Filtered
                } else {
                    Ending::Cut
                });
            }
            _ => self.ending = Some(Ending::Completed),
        }
        Ok(())
    }

    /// Whether the answer's end was seen.
    pub(crate) fn is_finished(&self) -> bool {
        self.ending.is_some()
    }

    /// The usage reported so far (a failed answer may have sent it before failing).
    pub(crate) fn usage(&self) -> Option<TokenUsage> {
        self.usage
    }

    /// The finished response: the text (a refusal when there is no text; a note when cut or
    /// filtered), the calls in the order the model made them, the reasoning to send back.
    pub(crate) fn finish(mut self, model: &str, observer: StreamObserver<'_>) -> ChatResponse {
        let rest = self.tags.finish();
        take_split(rest, &mut self.text, &mut self.reasoning, model, observer);
        let mut markup = CallAssembler::default();
        markup_calls(&mut self.tags, &mut markup, &mut self.text, observer);
        if self.text.trim().is_empty() && !self.refusal.is_empty() {
            self.text = std::mem::take(&mut self.refusal);
        }
        let note = match self.ending {
            Some(Ending::Cut) => Some(CUT_NOTE),
            Some(Ending::Filtered) => Some(FILTERED_NOTE),
            _ => None,
        };
        if let Some(note) = note {
            append_note(&mut self.text, note, observer);
        }
        let mut tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|call| ToolCall {
                id: if call.call_id.is_empty() {
                    call.item_id
                } else {
                    call.call_id
                },
                name: call.name,
                arguments: parse_arguments(&call.arguments),
                provider_state: None,
            })
            .collect();
        tool_calls.extend(markup.finish());
        ChatResponse {
            text: self.text,
            tool_calls,
            reasoning_content: Some(self.reasoning).filter(|r| !r.is_empty()),
            reasoning_state: (!self.items.is_empty()).then(|| ReasoningState {
                api: API.to_owned(),
                items: self.items,
            }),
            model: model.to_owned(),
            usage: self.usage,
        }
    }
}

/// The error a failed response or an `error` event reports (`{code, message}`): a rate limit,
/// a server fault the pool retries, or a refusal with the provider's words.
fn failure(error: &Value, model: &str) -> LlmError {
    let code = error.get("code").and_then(Value::as_str);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the response failed without a message");
    let model = model.to_owned();
    let detail = head(&match code {
        Some(code) => format!("{code}: {message}"),
        None => message.to_owned(),
    });
    match code {
        Some("rate_limit_exceeded") => LlmError::RateLimited {
            model,
            retry_after: None,
        },
        // An unexplained failure counts as the server's, as for Chat Completions.
        None => LlmError::Server {
            model,
            status: 500,
            detail,
        },
        Some(code) if RETRYABLE_CODES.contains(&code) => LlmError::Server {
            model,
            status: 503,
            detail,
        },
        Some(_) => LlmError::Server {
            model,
            status: 400,
            detail,
        },
    }
}

/// Reads an SSE response to its end, streaming text to `observer`.
pub(crate) async fn read_sse(
    response: reqwest::Response,
    idle: Duration,
    model: &str,
    observer: StreamObserver<'_>,
) -> Result<ChatResponse, LlmError> {
    let (events, received) = sse_events(response, idle);
    let mut events = pin!(events);
    let mut accumulator = Accumulator::default();
    let protocol = |detail: String| LlmError::Protocol {
        model: model.to_owned(),
        detail,
    };
    while let Some(item) = events.next().await {
        let event = match item {
            Ok(event) => event,
            // A server that finished its answer and then broke the connection still answered.
            Err(_) if accumulator.is_finished() => break,
            Err(error) => {
                return Err(billed(
                    sse_error(error, model),
                    accumulator.usage(),
                    observer,
                ));
            }
        };
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            continue;
        }
        let value: Value = parse_json(data.as_bytes(), "SSE data", model)?;
        if let Err(error) = accumulator.apply(&value, model, observer) {
            return Err(billed(error, accumulator.usage(), observer));
        }
        if accumulator.is_finished() {
            break;
        }
    }
    if accumulator.is_finished() {
        Ok(accumulator.finish(model, observer))
    } else if received.load(Ordering::Relaxed) == 0 {
        Err(protocol("the response was empty".to_owned()))
    } else {
        let error = protocol("stream ended early".to_owned());
        Err(billed(error, accumulator.usage(), observer))
    }
}

/// Parses a response object sent without streaming.
pub(crate) fn parse_response(
    body: &[u8],
    model: &str,
    observer: StreamObserver<'_>,
) -> Result<ChatResponse, LlmError> {
    let response: Value = parse_json(body, "a response", model)?;
    let mut accumulator = Accumulator::default();
    if let Err(error) = accumulator.apply_response(&response, model, observer) {
        return Err(billed(error, accumulator.usage(), observer));
    }
    Ok(accumulator.finish(model, observer))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(events: &[Value]) -> Result<ChatResponse, LlmError> {
        let mut accumulator = Accumulator::default();
        for event in events {
            accumulator.apply(event, "m", &|_| {})?;
        }
        assert!(accumulator.is_finished());
        Ok(accumulator.finish("m", &|_| {}))
    }

    fn added(index: u64, id: &str, call_id: &str, name: &str) -> Value {
        json!({"type": "response.output_item.added", "output_index": index,
            "item": {"type": "function_call", "id": id, "call_id": call_id, "name": name, "arguments": ""}})
    }

    fn delta(id: &str, piece: &str) -> Value {
        json!({"type": "response.function_call_arguments.delta", "item_id": id, "delta": piece})
    }

    #[test]
    fn interleaved_calls_keep_their_order_and_arguments() {
        let response = run(&[
            added(0, "fc_a", "call_a", "read_file"),
            added(1, "fc_b", "call_b", "shell"),
            delta("fc_b", "{\"command\":"),
            delta("fc_a", "{\"path\":\"a\"}"),
            delta("fc_b", "\"ls\"}"),
            json!({"type": "response.completed", "response": {"status": "completed",
                "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3}}}),
        ])
        .unwrap();
        let calls: Vec<(&str, &str, Value)> = response
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("call_a", "read_file", json!({"path": "a"})),
                ("call_b", "shell", json!({"command": "ls"})),
            ]
        );
        assert_eq!(
            response.usage,
            Some(TokenUsage {
                prompt: 10,
                completion: 3,
                cached: 4,
                cache_written: 0,
            })
        );
    }

    #[test]
    fn failures_are_classified_by_code() {
        let failed = |code: Value| {
            run(&[
                json!({"type": "response.failed", "response": {"status": "failed",
                "error": {"code": code, "message": "boom"}}}),
            ])
            .unwrap_err()
        };
        assert!(matches!(
            failed(json!("rate_limit_exceeded")),
            LlmError::RateLimited { .. }
        ));
        assert!(failed(json!("server_error")).is_retryable());
        assert!(failed(Value::Null).is_retryable());
        let refused = failed(json!("invalid_prompt"));
        assert!(!refused.is_retryable());
        assert!(refused.to_string().contains("invalid_prompt: boom"));
        let error =
            run(&[json!({"type": "error", "code": "server_is_overloaded", "message": "busy"})])
                .unwrap_err();
        assert!(error.is_retryable());
    }

    #[test]
    fn a_failed_response_tells_the_usage_it_was_billed() {
        let body = json!({"status": "failed", "error": {"code": "server_error", "message": "boom"},
            "usage": {"input_tokens": 210, "input_tokens_details": {"cached_tokens": 128},
                "output_tokens": 41}});
        let seen = std::sync::Mutex::new(Vec::new());
        let error = parse_response(body.to_string().as_bytes(), "m", &|event| {
            seen.lock().unwrap().push(event)
        });
        assert!(error.unwrap_err().is_retryable());
        let usage = TokenUsage {
            prompt: 210,
            completion: 41,
            cached: 128,
            cache_written: 0,
        };
        assert_eq!(*seen.lock().unwrap(), [StreamEvent::Usage(usage)]);
    }

    #[test]
    fn markup_in_the_text_is_held_back_and_becomes_a_call() {
        let shown = std::sync::Mutex::new(String::new());
        let observer = |event: StreamEvent| {
            if let StreamEvent::TextDelta(text) = event {
                shown.lock().unwrap().push_str(&text);
            }
        };
        let mut accumulator = Accumulator::default();
        let whole = "Sure, 1 < 2.<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}</tool_call>";
        for piece in whole.split_inclusive(['<', '"', '_']) {
            let event =
                json!({"type": "response.output_text.delta", "item_id": "msg_1", "delta": piece});
            accumulator.apply(&event, "m", &observer).unwrap();
            assert!(!shown.lock().unwrap().contains("<t"), "{shown:?}");
        }
        // The done item repeats the whole text: nothing is shown twice.
        let done = json!({"type": "response.output_item.done", "item": {"type": "message",
            "id": "msg_1", "content": [{"type": "output_text", "text": whole}]}});
        accumulator.apply(&done, "m", &observer).unwrap();
        let completed = json!({"type": "response.completed", "response": {"status": "completed"}});
        accumulator.apply(&completed, "m", &observer).unwrap();
        let response = accumulator.finish("m", &observer);
        assert_eq!(*shown.lock().unwrap(), "Sure, 1 < 2.");
        assert_eq!(response.text, "Sure, 1 < 2.");
        assert_eq!(response.tool_calls.len(), 1);
        assert_eq!(response.tool_calls[0].name, "shell");
        assert_eq!(response.tool_calls[0].arguments, json!({"command": "ls"}));
    }

    #[test]
    fn an_incomplete_reply_says_it_was_cut() {
        let response = run(&[
            json!({"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Once upon"}),
            json!({"type": "response.incomplete", "response": {"status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"}}}),
        ])
        .unwrap();
        assert_eq!(response.text, format!("Once upon\n\n{CUT_NOTE}"));
    }

    #[test]
    fn a_message_done_completes_the_text_its_deltas_missed() {
        let message = |text: &str| {
            json!({"type": "response.output_item.done", "item": {"type": "message", "id": "msg_1",
                "content": [{"type": "output_text", "text": text}]}})
        };
        let shown = std::sync::Mutex::new(String::new());
        let mut accumulator = Accumulator::default();
        for event in [
            json!({"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Got"}),
            message("Got it, done."),
            json!({"type": "response.completed", "response": {"status": "completed"}}),
        ] {
            accumulator
                .apply(&event, "m", &|e| {
                    if let StreamEvent::TextDelta(text) = e {
                        shown.lock().unwrap().push_str(&text);
                    }
                })
                .unwrap();
        }
        let response = accumulator.finish("m", &|_| {});
        assert_eq!(response.text, "Got it, done.");
        assert_eq!(*shown.lock().unwrap(), "Got it, done.");
    }

    #[test]
    fn a_plain_response_object_is_read_whole() {
        let body = json!({"status": "completed", "output": [
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": [{"type": "summary_text", "text": "Think."}]},
            {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "Hi."}]},
        ]});
        let response = parse_response(body.to_string().as_bytes(), "m", &|_| {}).unwrap();
        assert_eq!(response.text, "Hi.");
        assert_eq!(response.reasoning_content.as_deref(), Some("Think."));
        let state = response.reasoning_state.unwrap();
        assert_eq!(state.api, "responses");
        assert_eq!(state.items[0]["encrypted_content"], "gAAA");
    }
}
