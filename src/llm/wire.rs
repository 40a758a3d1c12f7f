//! The OpenAI Chat Completions wire format: the request body and the response shapes.
//!
//! Serialization follows what the strictest servers accept: `content` is always a string (an
//! empty one rather than `null`, which llama.cpp rejects with HTTP 500), tool-call arguments are
//! sent as a JSON *string*, and `tools` is left out when there are none. Tool definitions are
//! borrowed, and their schemas embedded as the bytes [`ToolSpec`] serialized once at start,
//! not serialized again on every turn. The response types are
//! lenient: every field is optional, so extra or missing fields from one server or another never
//! break parsing.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::message::{Message, Role, ToolCall};
use crate::core::ports::tool::ToolSpec;
use crate::core::ports::usage::TokenUsage;
use crate::llm::profile::{Profile, SKIP_SIGNATURE, TokenLimit, tool_call_id};

/// The body of `POST /chat/completions`.
#[derive(Debug, Serialize)]
pub(crate) struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    /// Flipped to `false` for the non-streamed retry.
    pub(crate) stream: bool,
    /// `{"include_usage": true}`, so a streamed answer ends with its token counts; dropped
    /// for a non-streamed request (OpenAI rejects it there) and for a server that rejects it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

impl<'a> RequestBody<'a> {
    /// A streamed request shaped as `profile` says (see [`Profile`]).
    pub(crate) fn new(
        model: &'a str,
        messages: &'a [Arc<Message>],
        tools: &'a [&'a ToolSpec],
        max_tokens: Option<u32>,
        profile: &Profile,
        images: &'a HashMap<String, String>,
    ) -> Self {
        let (max_tokens, max_completion_tokens) = match profile.token_limit {
            TokenLimit::MaxTokens => (max_tokens, None),
            TokenLimit::MaxCompletionTokens => (None, max_tokens),
            TokenLimit::Omit => (None, None),
        };
        Self {
            model,
            messages: wire_messages(messages, profile, images),
            stream: true,
            stream_options: Some(StreamOptions {
                include_usage: true,
            }),
            tools: if profile.tools {
                tools.iter().map(|spec| WireTool::new(spec)).collect()
            } else {
                Vec::new()
            },
            max_tokens,
            max_completion_tokens,
        }
    }
}

/// The messages of a request. Chat Completions take image parts only from the user, so the
/// images that tool results show (`read_file` of a PNG) follow the run of results they belong
/// to as one user message of image parts, said to be the tools' own.
fn wire_messages<'a>(
    messages: &'a [Arc<Message>],
    profile: &Profile,
    images: &'a HashMap<String, String>,
) -> Vec<WireMessage<'a>> {
    let mut wire = Vec::with_capacity(messages.len() + 1);
    let mut shown: Vec<&'a str> = Vec::new();
    for (position, message) in messages.iter().enumerate() {
        wire.push(WireMessage::new(message, profile, images));
        if message.role != Role::Tool {
            continue;
        }
        shown.extend(
            message
                .images
                .iter()
                .filter_map(|path| images.get(path).map(String::as_str)),
        );
        let run_ends = messages
            .get(position + 1)
            .is_none_or(|next| next.role != Role::Tool);
        if run_ends && !shown.is_empty() {
            wire.push(WireMessage::tool_images(std::mem::take(&mut shown)));
        }
    }
    wire
}

/// The text before the images tool results showed.
pub(crate) const TOOL_IMAGES: &str = "[The images the tool results above read, in their order. They are \
                           the files' content, not a message from anyone.]";

/// The `stream_options` of a streamed request.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: WireContent<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
}

/// A message's content: its text, or (with images for a model that reads them) the text and
/// the images as parts.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum WireContent<'a> {
    Text(&'a str),
    Parts(Vec<WirePart<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: WireImage<'a> },
}

#[derive(Debug, Serialize)]
struct WireImage<'a> {
    url: &'a str,
}

impl<'a> WireContent<'a> {
    /// The content of `message`, with those of its images that `images` holds (a tool
    /// result's go in a message after it, see [`wire_messages`]).
    fn of(message: &'a Message, images: &'a HashMap<String, String>) -> Self {
        if message.role == Role::Tool {
            return Self::Text(&message.content);
        }
        let urls: Vec<&'a str> = message
            .images
            .iter()
            .filter_map(|path| images.get(path).map(String::as_str))
            .collect();
        if urls.is_empty() {
            return Self::Text(&message.content);
        }
        let mut parts = vec![WirePart::Text {
            text: &message.content,
        }];
        parts.extend(urls.into_iter().map(|url| WirePart::ImageUrl {
            image_url: WireImage { url },
        }));
        Self::Parts(parts)
    }
}

impl<'a> WireMessage<'a> {
    /// The user message that carries the images of a run of tool results, as data URLs.
    fn tool_images(urls: Vec<&'a str>) -> Self {
        let mut parts = vec![WirePart::Text { text: TOOL_IMAGES }];
        parts.extend(urls.into_iter().map(|url| WirePart::ImageUrl {
            image_url: WireImage { url },
        }));
        Self {
            role: Role::User,
            content: WireContent::Parts(parts),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning_content: None,
        }
    }

    fn new(message: &'a Message, profile: &Profile, images: &'a HashMap<String, String>) -> Self {
        let tool_calls: Vec<WireToolCall<'a>> = match (&message.role, &message.tool_calls) {
            (Role::Assistant, Some(calls)) => calls
                .iter()
                .enumerate()
                .map(|(position, call)| WireToolCall::new(call, position, profile))
                .collect(),
            _ => Vec::new(),
        };
        let tool_call_id = match message.role {
            Role::Tool => message
                .tool_call_id
                .as_deref()
                .map(|id| tool_call_id(id, profile.tool_call_ids)),
            _ => None,
        };
        // A provider that wants reasoning back on tool-call turns rejects one without it, so
        // a turn that had none sends an empty string.
        let reasoning_content = match message.role {
            Role::Assistant if profile.echo_reasoning => message
                .reasoning_content
                .as_deref()
                .or((!tool_calls.is_empty()).then_some("")),
            _ => None,
        };
        Self {
            role: message.role,
            content: WireContent::of(message, images),
            tool_calls,
            tool_call_id,
            reasoning_content,
        }
    }
}

#[derive(Debug, Serialize)]
struct WireToolCall<'a> {
    id: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra_content: Option<Cow<'a, Value>>,
}

impl<'a> WireToolCall<'a> {
    /// The `position`-th call of its message.
    fn new(call: &'a ToolCall, position: usize, profile: &Profile) -> Self {
        // Gemini wants each step's first call signed; a call another model made gets the
        // documented placeholder.
        let extra_content = match &call.provider_state {
            _ if !profile.echo_signatures => None,
            Some(state) => Some(Cow::Borrowed(state)),
            None if position == 0 => Some(Cow::Owned(
                serde_json::json!({"google": {"thought_signature": SKIP_SIGNATURE}}),
            )),
            None => None,
        };
        Self {
            id: tool_call_id(&call.id, profile.tool_call_ids),
            kind: "function",
            function: WireFunctionCall {
                name: &call.name,
                arguments: arguments_string(&call.arguments),
            },
            extra_content,
        }
    }
}

#[derive(Debug, Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: String,
}

/// The arguments as the API wants them: a JSON string. Arguments the model sent as invalid JSON
/// are stored as a string value and go back raw, exactly as the model wrote them.
///
/// Public (as [`crate::llm::tool_arguments_text`]) for the same reason as
/// [`crate::llm::parse_tool_arguments`]: the two together are the round trip a tool call makes
/// through history and back to the provider.
pub fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

/// `{"type": "function", "function": spec}`; the spec's schema goes out as its stored bytes.
#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a ToolSpec,
}

impl<'a> WireTool<'a> {
    fn new(spec: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            function: spec,
        }
    }
}

/// One `data:` payload of a streamed response.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Chunk {
    pub(crate) choices: Vec<ChunkChoice>,
    pub(crate) error: Option<Value>,
    /// Token counts: in the last chunk (`include_usage`), or in every chunk (vLLM's continuous
    /// usage), so the last one seen wins. A value, read by [`usage_of`], so an odd shape can
    /// never fail the chunk.
    pub(crate) usage: Option<Value>,
}

/// One choice of a streamed chunk.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ChunkChoice {
    pub(crate) delta: Option<Delta>,
    pub(crate) finish_reason: Option<String>,
}

/// The new part of the message in a streamed chunk (and, whole, the message of a completion).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Delta {
    /// A string, or an array of parts (`text`, `thinking`): a value, read by the stream.
    pub(crate) content: Option<Value>,
    pub(crate) reasoning_content: Option<String>,
    pub(crate) reasoning: Option<String>,
    /// Why the model declined (OpenAI's structured refusal): shown as the answer.
    pub(crate) refusal: Option<String>,
    pub(crate) tool_calls: Option<Vec<ToolCallDelta>>,
    /// Provider state on the message rather than on a call (Gemini 2.5's thought signature).
    pub(crate) extra_content: Option<Value>,
}

/// A fragment of one tool call (see `assemble` for which fragments belong together).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ToolCallDelta {
    pub(crate) index: Option<usize>,
    pub(crate) id: Option<String>,
    pub(crate) function: Option<FunctionDelta>,
    /// Provider state to send back with the call (Gemini's thought signature).
    pub(crate) extra_content: Option<Value>,
}

/// A fragment of a tool call's function.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct FunctionDelta {
    pub(crate) name: Option<String>,
    pub(crate) arguments: Option<String>,
}

/// A complete, non-streamed response.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Completion {
    pub(crate) choices: Vec<CompletionChoice>,
    pub(crate) error: Option<Value>,
    /// Token counts, read by [`usage_of`].
    pub(crate) usage: Option<Value>,
}

/// One choice of a non-streamed response.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CompletionChoice {
    pub(crate) message: Option<Delta>,
    pub(crate) finish_reason: Option<String>,
}

/// The token counts of a `usage` object, in the spellings servers use: OpenAI's
/// `prompt_tokens` / `completion_tokens` with `prompt_tokens_details.cached_tokens`; the
/// Responses-style `input_tokens` / `output_tokens` with `input_tokens_details.cached_tokens`;
/// DeepSeek's `prompt_cache_hit_tokens`; Anthropic-style `cache_read_input_tokens`; a bare
/// `cached_tokens`. `None` when it holds neither prompt nor completion tokens.
pub(crate) fn usage_of(usage: &Value) -> Option<TokenUsage> {
    let number = |keys: &[&str]| keys.iter().find_map(|key| number_at(usage, key));
    let prompt = number(&["prompt_tokens", "input_tokens"]);
    let completion = number(&["completion_tokens", "output_tokens"]);
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    let cached = ["prompt_tokens_details", "input_tokens_details"]
        .iter()
        .find_map(|details| {
            usage
                .get(details)
                .and_then(|d| number_at(d, "cached_tokens"))
        })
        .or_else(|| {
            number(&[
                "prompt_cache_hit_tokens",
                "cache_read_input_tokens",
                "cached_tokens",
            ])
        })
        .unwrap_or(0);
    Some(TokenUsage {
        prompt: prompt.unwrap_or(0),
        completion: completion.unwrap_or(0),
        cached,
        cache_written: 0,
    })
}

/// A non-negative count at `key`, written as an integer or a float.
fn number_at(value: &Value, key: &str) -> Option<u64> {
    let number = value.get(key)?;
    number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n as u64)
    })
}

/// The provider's own message in an error response's body: the `message` (or `detail`) of
/// its `{"error": …}` or of the body itself, the string an `error` holds, else the body as it
/// is; at most 200 characters. What a person is shown of a failed call.
pub(crate) fn error_message(body: &str) -> String {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let message = parsed.as_ref().and_then(|body| {
        let error = body.get("error").unwrap_or(body);
        match error {
            Value::String(text) => Some(text.as_str()),
            _ => ["message", "detail"]
                .iter()
                .find_map(|key| error.get(key).and_then(Value::as_str)),
        }
    });
    let message = message.unwrap_or(body).trim();
    match message.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &message[..end]),
        None => message.to_owned(),
    }
}

/// A server-reported error payload (`{"error": ...}`): its message and an HTTP-like code.
///
/// The code defaults to 500 so an unexplained mid-stream error counts as retryable.
pub(crate) fn error_payload(error: &Value) -> (u16, String) {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    let code = error
        .get("code")
        .and_then(|code| {
            code.as_u64()
                .or_else(|| code.as_str().and_then(|s| s.parse().ok()))
        })
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..600).contains(code))
        .unwrap_or(500);
    (code, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use serde_json::json;

    #[test]
    fn assistant_tool_calls_are_serialized_as_strings_with_empty_content() {
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
                arguments: Value::String("{broken".into()),
                provider_state: None,
            },
        ]);
        assistant.reasoning_content = Some("think".into());
        let mut tool = Message::new(Role::Tool, "out", ts);
        tool.tool_call_id = Some("c1".into());
        let messages = [Arc::new(assistant), Arc::new(tool)];
        let none = HashMap::new();
        let body = RequestBody::new("m", &messages, &[], None, &Profile::default(), &none);
        let value = serde_json::to_value(&body).unwrap();
        assert_eq!(
            value,
            json!({
                "model": "m",
                "stream": true,
                "stream_options": {"include_usage": true},
                "messages": [
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"ls\"}"}},
                        {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{broken"}}
                    ]},
                    {"role": "tool", "content": "out", "tool_call_id": "c1"}
                ]
            })
        );
        let echo = Profile {
            echo_reasoning: true,
            ..Profile::default()
        };
        let with =
            serde_json::to_value(RequestBody::new("m", &messages, &[], Some(9), &echo, &none))
                .unwrap();
        assert_eq!(with["messages"][0]["reasoning_content"], "think");
        assert_eq!(with["max_tokens"], 9);
    }

    #[test]
    fn images_tool_results_show_follow_their_run_of_results_from_the_user() {
        let ts = DateTime::parse_from_rfc3339("2026-11-22T10:00:00+00:00").unwrap();
        let mut call = Message::new(Role::Assistant, "", ts);
        call.tool_calls = Some(
            ["a", "b"]
                .iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "read_file".into(),
                    arguments: json!({}),
                    provider_state: None,
                })
                .collect(),
        );
        let mut first = Message::new(Role::Tool, "a.png is an image", ts);
        first.tool_call_id = Some("a".into());
        first.images = vec!["/w/a.png".into()];
        let mut second = Message::new(Role::Tool, "b.png is an image", ts);
        second.tool_call_id = Some("b".into());
        second.images = vec!["/w/b.png".into(), "/w/too-big.png".into()];
        let messages = [
            call,
            first,
            second,
            Message::new(Role::Assistant, "two", ts),
        ]
        .map(Arc::new);
        let loaded: HashMap<String, String> = [("/w/a.png", "data:A"), ("/w/b.png", "data:B")]
            .iter()
            .map(|(path, url)| ((*path).to_owned(), (*url).to_owned()))
            .collect();
        let body = RequestBody::new("m", &messages, &[], None, &Profile::default(), &loaded);
        let sent = serde_json::to_value(&body).unwrap();
        let roles: Vec<&str> = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["assistant", "tool", "tool", "user", "assistant"]);
        assert_eq!(sent["messages"][1]["content"], "a.png is an image");
        assert_eq!(
            sent["messages"][3]["content"],
            json!([
                {"type": "text", "text": TOOL_IMAGES},
                {"type": "image_url", "image_url": {"url": "data:A"}},
                {"type": "image_url", "image_url": {"url": "data:B"}},
            ])
        );
        // None loaded (a model that reads no images): no message is added.
        let none = HashMap::new();
        let body = RequestBody::new("m", &messages, &[], None, &Profile::default(), &none);
        let sent = serde_json::to_value(&body).unwrap();
        assert_eq!(sent["messages"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn tool_schemas_go_out_as_the_bytes_serialized_at_start() {
        let spec = ToolSpec::new(
            "shell",
            "Run \"it\".",
            &json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        );
        let specs = [&spec];
        let none = HashMap::new();
        let body = serde_json::to_string(&RequestBody::new(
            "m",
            &[],
            &specs,
            None,
            &Profile::default(),
            &none,
        ))
        .unwrap();
        let expected = format!(
            r#""tools":[{{"type":"function","function":{{"name":"shell","description":"Run \"it\".","parameters":{}}}}}]"#,
            spec.parameters()
        );
        assert!(body.contains(&expected), "{body}");
    }

    #[test]
    fn usage_is_read_in_every_common_spelling() {
        let check = |usage: Value, expected: Option<(u64, u64, u64)>| {
            let got = usage_of(&usage).map(|u| (u.prompt, u.completion, u.cached));
            assert_eq!(got, expected, "{usage}");
        };
        check(
            json!({"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
                "prompt_tokens_details": {"cached_tokens": 100}}),
            Some((120, 30, 100)),
        );
        check(
            json!({"input_tokens": 50, "output_tokens": 5,
                "input_tokens_details": {"cached_tokens": 7}}),
            Some((50, 5, 7)),
        );
        check(
            json!({"prompt_tokens": 9, "completion_tokens": 1, "prompt_cache_hit_tokens": 8,
                "prompt_cache_miss_tokens": 1}),
            Some((9, 1, 8)),
        );
        check(
            json!({"prompt_tokens": 9, "completion_tokens": 1, "cache_read_input_tokens": 4}),
            Some((9, 1, 4)),
        );
        check(
            json!({"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": null}),
            Some((9, 2, 0)),
        );
        check(
            json!({"prompt_tokens": 9.0, "completion_tokens": "x"}),
            Some((9, 0, 0)),
        );
        check(json!({"total_tokens": 9}), None);
        check(json!(null), None);
        check(json!("weird"), None);
    }

    #[test]
    fn error_messages_are_the_providers_words() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad model","code":"model_not_found"}}"#),
            "bad model"
        );
        assert_eq!(error_message(r#"{"object":"error","message":"no"}"#), "no");
        assert_eq!(error_message(r#"{"error":"plain"}"#), "plain");
        // Mistral's 422: the message is an object, so the body stands (it names the field).
        let mistral =
            r#"{"object":"error","message":{"detail":[{"loc":["body","stream_options"]}]}}"#;
        assert_eq!(error_message(mistral), mistral);
        assert_eq!(error_message(" <html>oops</html> "), "<html>oops</html>");
        assert_eq!(error_message(&"x".repeat(300)).chars().count(), 201);
    }

    #[test]
    fn error_payload_code_defaults_to_retryable() {
        assert_eq!(
            error_payload(&json!({"message": "boom", "code": 429})),
            (429, "boom".to_owned())
        );
        assert_eq!(
            error_payload(&json!({"message": "x", "code": "weird"})).0,
            500
        );
        assert_eq!(
            error_payload(&json!("plain")),
            (500, "\"plain\"".to_owned())
        );
    }
}
