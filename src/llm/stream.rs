//! Turning a chat-completions response (an SSE stream, or a plain JSON completion) into a
//! [`ChatResponse`].
//!
//! The accumulator is pure, so the fiddly parts — tool calls assembled from fragments by
//! `index`, arguments that are empty or invalid JSON — are unit-tested without a server. The
//! reader on top applies the idle timeout to the raw body (so SSE comments and keep-alives count
//! as activity) and decides how the stream ended: `[DONE]`, a finish reason, nothing at all (the
//! llama.cpp empty-body quirk, retried by the caller without streaming) or cut short.

use std::pin::pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use crate::core::ports::llm::{ChatResponse, LlmError, StreamEvent, StreamObserver};
use crate::core::ports::usage::TokenUsage;
use crate::llm::assemble::CallAssembler;
use crate::llm::http::{head, parse_json, sse_error, sse_events};
use crate::llm::think::{Split, TagSplitter};
use crate::llm::wire::{Chunk, Completion, Delta, error_payload, usage_of};

/// Said after a reply the provider cut at its token limit (`finish_reason: "length"`).
pub(crate) const CUT_NOTE: &str =
    "[The answer was cut short: it reached the model's token limit (`max_tokens`).]";
/// Said for a reply the provider's content filter stopped (`finish_reason: "content_filter"`).
pub(crate) const FILTERED_NOTE: &str = "[The provider's content filter stopped this answer.]";

/// Collects the pieces of one answer.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    text: String,
    reasoning: String,
    refusal: String,
    calls: CallAssembler,
    /// `<think>` and `<tool_call>` taken out of `content`.
    tags: TagSplitter,
    /// The last finish reason seen; `Some` once the answer is whole.
    finish_reason: Option<String>,
    /// Provider state sent on the message (Gemini 2.5): it goes back on the first call.
    message_state: Option<Value>,
    usage: Option<TokenUsage>,
}

impl Accumulator {
    /// Applies one streamed chunk, reporting new text to the observer.
    pub(crate) fn apply_chunk(&mut self, chunk: Chunk, model: &str, observer: StreamObserver<'_>) {
        if let Some(usage) = chunk.usage.as_ref().and_then(usage_of) {
            self.usage = Some(usage);
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                self.apply_delta(delta, model, observer);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
    }

    fn apply_delta(&mut self, delta: Delta, model: &str, observer: StreamObserver<'_>) {
        let parts = content_parts(delta.content.as_ref());
        self.reasoning.push_str(&parts.thinking);
        if !parts.text.is_empty() {
            let split = self.tags.push(&parts.text);
            self.take_split(split, model, observer);
        }
        for reasoning in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            self.reasoning.push_str(&reasoning);
        }
        if let Some(refusal) = delta.refusal.filter(|r| !r.is_empty()) {
            observer(StreamEvent::TextDelta(refusal.clone()));
            self.refusal.push_str(&refusal);
        }
        for call in delta.tool_calls.into_iter().flatten() {
            self.calls.apply(call);
        }
        if delta.extra_content.is_some() {
            self.message_state = delta.extra_content;
        }
    }

    fn take_split(&mut self, split: Split, model: &str, observer: StreamObserver<'_>) {
        take_split(split, &mut self.text, &mut self.reasoning, model, observer);
    }

    /// `error`, with the usage reported before it (see [`billed`]).
    pub(crate) fn failed(&self, error: LlmError, observer: StreamObserver<'_>) -> LlmError {
        billed(error, self.usage, observer)
    }

    /// Whether a finish reason was seen.
    pub(crate) fn is_finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// The finished response, with each call's arguments parsed. A finish reason of `error`
    /// is an error a pool may fall back on; a refusal is the answer; a reply cut at the token
    /// limit or stopped by a content filter says so.
    pub(crate) fn finish(
        mut self,
        model: &str,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let rest = self.tags.finish();
        self.take_split(rest, model, observer);
        markup_calls(&mut self.tags, &mut self.calls, &mut self.text, observer);
        if self.text.trim().is_empty() && !self.refusal.is_empty() {
            self.text = std::mem::take(&mut self.refusal);
        }
        let note = match self.finish_reason.as_deref() {
            Some("error") => {
                let error = LlmError::Server {
                    model: model.to_owned(),
                    status: 502,
                    detail: "the provider ended the answer with finish_reason \"error\"".to_owned(),
                };
                return Err(self.failed(error, observer));
            }
            Some("length") => Some(CUT_NOTE),
            Some("content_filter") => Some(FILTERED_NOTE),
            _ => None,
        };
        if let Some(note) = note {
            append_note(&mut self.text, note, observer);
        }
        let mut tool_calls = self.calls.finish();
        if let Some(first) = tool_calls.first_mut()
            && first.provider_state.is_none()
        {
            first.provider_state = self.message_state;
        }
        Ok(ChatResponse {
            text: self.text,
            tool_calls,
            reasoning_content: Some(self.reasoning).filter(|r| !r.is_empty()),
            // Chat Completions carries reasoning back as text only (`reasoning_content`).
            reasoning_state: None,
            model: model.to_owned(),
            usage: self.usage,
        })
    }
}

/// Takes what the tag splitter released into `text` and `reasoning`: text shown as it comes,
/// reasoning kept, text shown so far withdrawn (with [`StreamEvent::Restart`]) when it turned
/// out to be reasoning. Shared by every adapter whose text may carry tags.
pub(crate) fn take_split(
    split: Split,
    text: &mut String,
    reasoning: &mut String,
    model: &str,
    observer: StreamObserver<'_>,
) {
    if split.reclassified {
        text.clear();
        observer(StreamEvent::Restart {
            model: model.to_owned(),
        });
    }
    reasoning.push_str(&split.reasoning);
    if !split.text.is_empty() {
        text.push_str(&split.text);
        observer(StreamEvent::TextDelta(split.text));
    }
}

/// Adds the `<tool_call>` blocks the splitter took out of the text to `calls`; a block that
/// is not a call after all goes back into `text`, shown as the model wrote it.
pub(crate) fn markup_calls(
    tags: &mut TagSplitter,
    calls: &mut CallAssembler,
    text: &mut String,
    observer: StreamObserver<'_>,
) {
    for body in tags.take_calls() {
        if !calls.add_markup(&body) {
            let markup = format!("<tool_call>{body}</tool_call>");
            text.push_str(&markup);
            observer(StreamEvent::TextDelta(markup));
        }
    }
}

/// A message's `content`: a string, or (Mistral's Magistral, some relays) an array of parts
/// whose `text` parts are the reply and whose `thinking` parts are reasoning.
#[derive(Debug, Default)]
struct ContentParts {
    text: String,
    thinking: String,
}

fn content_parts(content: Option<&Value>) -> ContentParts {
    let mut parts = ContentParts::default();
    match content {
        Some(Value::String(text)) => parts.text.push_str(text),
        Some(Value::Array(items)) => {
            for item in items {
                match item.get("type").and_then(Value::as_str) {
                    Some("thinking") => collect_text(item.get("thinking"), &mut parts.thinking),
                    Some("text") | None => collect_text(item.get("text"), &mut parts.text),
                    Some(_) => {}
                }
            }
        }
        _ => {}
    }
    parts
}

/// Appends the text in `value`: a string, or a list of `{"type": "text", "text": …}` parts.
fn collect_text(value: Option<&Value>, into: &mut String) {
    match value {
        Some(Value::String(text)) => into.push_str(text),
        Some(Value::Array(items)) => {
            for item in items {
                collect_text(item.get("text"), into);
            }
        }
        _ => {}
    }
}

/// Appends `note` (a reply cut, filtered or refused) to the answer's `text` and streams it:
/// after a blank line when there is text, alone when there is none. Every API ends its
/// answers this way.
pub(crate) fn append_note(text: &mut String, note: &str, observer: StreamObserver<'_>) {
    let note = if text.trim().is_empty() {
        note.to_owned()
    } else {
        format!("\n\n{note}")
    };
    text.push_str(&note);
    observer(StreamEvent::TextDelta(note));
}

/// `error`, after telling `observer` the `usage` the provider reported before the call
/// failed ([`StreamEvent::Usage`]): the provider bills those tokens, so the accounting layer
/// records them. Every adapter returns its failures through this once it has seen usage.
pub(crate) fn billed(
    error: LlmError,
    usage: Option<TokenUsage>,
    observer: StreamObserver<'_>,
) -> LlmError {
    if let Some(usage) = usage {
        observer(StreamEvent::Usage(usage));
    }
    error
}

/// How a streamed response ended.
#[derive(Debug)]
pub(crate) enum StreamOutcome {
    /// A whole answer.
    Complete(ChatResponse),
    /// A 200 with no body at all: retry without streaming.
    Empty,
}

/// Reads an SSE response to its end, streaming text to `observer`.
pub(crate) async fn read_sse(
    response: reqwest::Response,
    idle: Duration,
    model: &str,
    observer: StreamObserver<'_>,
) -> Result<StreamOutcome, LlmError> {
    let (events, received) = sse_events(response, idle);
    let mut events = pin!(events);
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
            Err(error) => return Err(accumulator.failed(sse_error(error, model), observer)),
        };
        n_events += 1;
        let data = event.data.trim();
        if data == "[DONE]" {
            return accumulator
                .finish(model, observer)
                .map(StreamOutcome::Complete);
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Chunk = parse_json(data.as_bytes(), "SSE data", model)
            .map_err(|error| accumulator.failed(error, observer))?;
        if let Some(error) = &chunk.error {
            // OpenRouter sends the usage in the error chunk itself.
            if let Some(usage) = chunk.usage.as_ref().and_then(usage_of) {
                accumulator.usage = Some(usage);
            }
            let (status, detail) = error_payload(error);
            let error = LlmError::Server {
                model: model.to_owned(),
                status,
                detail: head(&detail),
            };
            return Err(accumulator.failed(error, observer));
        }
        accumulator.apply_chunk(chunk, model, observer);
    }
    if accumulator.is_finished() {
        accumulator
            .finish(model, observer)
            .map(StreamOutcome::Complete)
    } else if n_events == 0 && received.load(Ordering::Relaxed) == 0 {
        Ok(StreamOutcome::Empty)
    } else if n_events == 0 {
        Err(protocol("the response held no SSE events".to_owned()))
    } else {
        Err(accumulator.failed(protocol("stream ended early".to_owned()), observer))
    }
}

/// Parses a non-streamed completion, reporting its text to `observer` as one delta.
pub(crate) fn parse_completion(
    body: &[u8],
    model: &str,
    observer: StreamObserver<'_>,
) -> Result<ChatResponse, LlmError> {
    let completion: Completion = parse_json(body, "a completion", model)?;
    if let Some(error) = &completion.error {
        let (status, detail) = error_payload(error);
        let error = LlmError::Server {
            model: model.to_owned(),
            status,
            detail: head(&detail),
        };
        return Err(billed(
            error,
            completion.usage.as_ref().and_then(usage_of),
            observer,
        ));
    }
    let choice = completion.choices.into_iter().next();
    let finish_reason = choice.as_ref().and_then(|c| c.finish_reason.clone());
    let message = choice
        .and_then(|choice| choice.message)
        .ok_or_else(|| LlmError::Protocol {
            model: model.to_owned(),
            detail: "the completion has no message".to_owned(),
        })?;
    let mut accumulator = Accumulator {
        usage: completion.usage.as_ref().and_then(usage_of),
        finish_reason,
        ..Accumulator::default()
    };
    accumulator.apply_delta(message, model, observer);
    accumulator.finish(model, observer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::assemble::parse_arguments;
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
            accumulator.apply_chunk(serde_json::from_value(fragment).unwrap(), "m", &|_| {});
        }
        let response = accumulator.finish("m", &|_| {}).unwrap();
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
            accumulator.apply_chunk(chunk(value), "m", &observer);
        }
        assert!(accumulator.is_finished());
        let response = accumulator.finish("m", &|_| {}).unwrap();
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
            accumulator.apply_chunk(chunk(value), "m", &|_| {});
        }
        let usage = accumulator.finish("m", &|_| {}).unwrap().usage.unwrap();
        assert_eq!((usage.prompt, usage.completion, usage.cached), (40, 3, 32));
        let mut silent = Accumulator::default();
        silent.apply_chunk(
            chunk(json!({"choices":[{"delta":{"content":"x"}}]})),
            "m",
            &|_| {},
        );
        assert_eq!(silent.finish("m", &|_| {}).unwrap().usage, None);
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
            "m",
            &|_| {},
        );
        // A huge index costs nothing: indexes are keys, not positions.
        accumulator.apply_chunk(
            chunk(json!({"choices":[{"delta":{"tool_calls":[
                {"index": 4_000_000_000u64, "function":{"name":"huge"}}
            ]}}]})),
            "m",
            &|_| {},
        );
        let response = accumulator.finish("m", &|_| {}).unwrap();
        assert_eq!(response.tool_calls.len(), 3);
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

    /// Feeds `chunks` and finishes, returning the response and the events the observer saw.
    fn stream(chunks: &[Value]) -> (Result<ChatResponse, LlmError>, Vec<StreamEvent>) {
        let seen = Mutex::new(Vec::new());
        let observer = |event: StreamEvent| seen.lock().unwrap().push(event);
        let mut accumulator = Accumulator::default();
        for value in chunks {
            accumulator.apply_chunk(chunk(value.clone()), "m", &observer);
        }
        let response = accumulator.finish("m", &observer);
        (response, seen.into_inner().unwrap())
    }

    #[test]
    fn finish_reasons_are_honoured() {
        let (cut, _) = stream(&[
            json!({"choices":[{"delta":{"content":"The list: 1, 2,"}}]}),
            json!({"choices":[{"delta":{},"finish_reason":"length"}]}),
        ]);
        let cut = cut.unwrap().text;
        assert!(
            cut.starts_with("The list: 1, 2,") && cut.ends_with(CUT_NOTE),
            "{cut}"
        );
        let (filtered, _) =
            stream(&[json!({"choices":[{"delta":{},"finish_reason":"content_filter"}]})]);
        assert_eq!(filtered.unwrap().text, FILTERED_NOTE);
        let (error, _) = stream(&[
            json!({"choices":[{"delta":{"content":"junk"}}]}),
            json!({"choices":[{"delta":{},"finish_reason":"error"}]}),
        ]);
        let error = error.unwrap_err();
        assert!(error.is_retryable(), "{error}");
    }

    #[test]
    fn a_failed_answer_tells_the_usage_it_was_billed() {
        let (error, seen) = stream(&[
            json!({"choices":[{"delta":{"content":"junk"}}]}),
            json!({"choices":[{"delta":{},"finish_reason":"error"}],
                "usage":{"prompt_tokens":43,"completion_tokens":10}}),
        ]);
        assert!(error.is_err());
        let usage = TokenUsage {
            prompt: 43,
            completion: 10,
            cached: 0,
            cache_written: 0,
        };
        assert_eq!(seen.last(), Some(&StreamEvent::Usage(usage)));
        // An answer's usage is in the response, never an event.
        let (response, seen) = stream(&[json!({"choices":[{"delta":{"content":"ok"},
            "finish_reason":"stop"}],"usage":{"prompt_tokens":43,"completion_tokens":10}})]);
        assert_eq!(response.unwrap().usage, Some(usage));
        assert!(!seen.iter().any(|e| matches!(e, StreamEvent::Usage(_))));
        let seen = Mutex::new(Vec::new());
        let body = br#"{"error":{"message":"no","code":400},"usage":{"prompt_tokens":43,"completion_tokens":10}}"#;
        let error = parse_completion(body, "m", &|event| seen.lock().unwrap().push(event));
        assert!(error.is_err());
        assert_eq!(*seen.lock().unwrap(), [StreamEvent::Usage(usage)]);
    }

    #[test]
    fn a_refusal_is_the_answer() {
        let (response, seen) = stream(&[
            json!({"choices":[{"delta":{"refusal":"I can't help"}}]}),
            json!({"choices":[{"delta":{"refusal":" with that."},"finish_reason":"stop"}]}),
        ]);
        assert_eq!(response.unwrap().text, "I can't help with that.");
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn content_arrays_and_think_tags_keep_reasoning_out_of_the_text() {
        let (response, _) = stream(&[
            json!({"choices":[{"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hmm"}]}]}}]}),
            json!({"choices":[{"delta":{"content":[{"type":"text","text":"Paris."}]},"finish_reason":"stop"}]}),
        ]);
        let response = response.unwrap();
        assert_eq!(
            (
                response.text.as_str(),
                response.reasoning_content.as_deref()
            ),
            ("Paris.", Some("hmm"))
        );
        let (response, seen) = stream(&[
            json!({"choices":[{"delta":{"content":"<thi"}}]}),
            json!({"choices":[{"delta":{"content":"nk>plan</think>\n\nDone."},"finish_reason":"stop"}]}),
        ]);
        let response = response.unwrap();
        assert_eq!(response.text, "\nDone.");
        assert_eq!(response.reasoning_content.as_deref(), Some("plan"));
        assert_eq!(seen, vec![StreamEvent::TextDelta("\nDone.".into())]);
        let (response, _) = stream(&[json!({"choices":[{"delta":{"content":
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>"},
            "finish_reason":"stop"}]})]);
        let response = response.unwrap();
        assert_eq!(response.text, "");
        assert_eq!(response.tool_calls[0].name, "read_file");
        assert_eq!(response.tool_calls[0].arguments, json!({"path": "a"}));
    }

    #[test]
    fn head_cuts_at_a_char_boundary() {
        let text = "é".repeat(200);
        let cut = head(&text);
        assert!(
            cut.len() <= crate::llm::http::DETAIL_BYTES
                && cut.len() >= crate::llm::http::DETAIL_BYTES - 1
        );
    }
}
