//! The body of `POST /v1/messages`: squidbot's history in the shape Anthropic's Messages API
//! documents (<https://docs.anthropic.com/en/api/messages>), with prompt-caching breakpoints.
//!
//! The API differs from Chat Completions in ways that each fail a request when missed: the
//! system prompt is a top-level `system` list, not a message; roles strictly alternate between
//! `user` and `assistant`, so consecutive messages of one role are merged; a tool result is a
//! `tool_result` block of a user message; tool-call ids must match `^[a-zA-Z0-9_-]+$`; text
//! blocks must not be empty; and `max_tokens` is required. Thinking blocks go back first in
//! their assistant message, exactly as they were received, or a tool turn with extended
//! thinking is refused.
//!
//! Caching (<https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching>): a
//! `cache_control` breakpoint caches the prompt up to and including its block. Three are set:
//! on the last tool (the tools rarely change), on the last system block, and on the last block
//! of the conversation, so the next turn reads the whole previous prompt from the cache. The
//! API allows four.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::core::message::{Message, Role, ToolCall};
use crate::core::ports::tool::ToolSpec;
use crate::llm::profile::stable_hash;

/// The reply limit sent when the model has none configured: the API requires one.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The `api` of the [`crate::core::message::ReasoningState`] this adapter makes and reads.
pub(crate) const API: &str = "anthropic";

/// The body of `POST /messages`.
#[derive(Debug, Serialize)]
pub(crate) struct MessagesBody<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Value>,
    messages: Vec<Turn>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolDefinition<'a>>,
    stream: bool,
}

/// One message of the conversation: a role and its content blocks.
#[derive(Debug, Serialize)]
struct Turn {
    role: &'static str,
    content: Vec<Value>,
}

/// A tool as the API takes it; the schema goes out as the bytes [`ToolSpec`] serialized once.
#[derive(Debug, Serialize)]
struct ToolDefinition<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Value>,
}

/// The breakpoint: cache the prompt up to here for the default five minutes.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

impl<'a> MessagesBody<'a> {
    /// A streamed request for `model`; `images` holds the `data:` URL of each image that goes
    /// out, by its saved path (see [`crate::llm::images`]).
    pub(crate) fn new(
        model: &'a str,
        messages: &[Arc<Message>],
        tools: &'a [&'a ToolSpec],
        max_tokens: Option<u32>,
        images: &HashMap<String, String>,
    ) -> Self {
        let mut system = Vec::new();
        let mut turns: Vec<Turn> = Vec::with_capacity(messages.len());
        let mut called: HashSet<&str> = HashSet::new();
        for message in messages {
            let (role, blocks) = match message.role {
                Role::System => {
                    if !message.content.trim().is_empty() {
                        system.push(json!({"type": "text", "text": message.content}));
                    }
                    continue;
                }
                Role::User => ("user", user_blocks(message, images)),
                // A result whose call is not in the request (history cut between them) would
                // be refused: every `tool_result` answers a `tool_use` of the turn before.
                Role::Tool
                    if !message
                        .tool_call_id
                        .as_deref()
                        .is_some_and(|id| called.contains(id)) =>
                {
                    continue;
                }
                Role::Tool => ("user", vec![tool_result(message, images)]),
                Role::Assistant => {
                    let calls = message.tool_calls.iter().flatten();
                    called.extend(calls.map(|call| call.id.as_str()));
                    ("assistant", assistant_blocks(message))
                }
            };
            match turns.last_mut() {
                Some(last) if last.role == role => last.content.extend(blocks),
                _ if blocks.is_empty() => {}
                _ => turns.push(Turn {
                    role,
                    content: blocks,
                }),
            }
        }
        if let Some(last) = system.last_mut() {
            last["cache_control"] = ephemeral();
        }
        // Thinking blocks cannot carry a breakpoint: the last block that can gets it.
        if let Some(block) = turns.last_mut().and_then(|turn| {
            turn.content
                .iter_mut()
                .rev()
                .find(|block| !is_thinking(block))
        }) {
            block["cache_control"] = ephemeral();
        }
        let mut tools: Vec<ToolDefinition<'a>> = tools
            .iter()
            .filter_map(|spec| match serde_json::from_str(spec.parameters()) {
                Ok(input_schema) => Some(ToolDefinition {
                    name: spec.name(),
                    description: spec.description(),
                    input_schema,
                    cache_control: None,
                }),
                // Never the case for a schema `ToolSpec` serialized itself.
                Err(error) => {
                    tracing::error!(tool = spec.name(), error = %error, "Tool schema is not JSON; the tool is not offered.");
                    None
                }
            })
            .collect();
        if let Some(last) = tools.last_mut() {
            last.cache_control = Some(ephemeral());
        }
        Self {
            model,
            max_tokens: max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            system,
            messages: turns,
            tools,
            stream: true,
        }
    }
}

fn is_thinking(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

/// A text block, or none for empty text (which the API refuses).
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// The image blocks of `message`'s images that `images` holds.
fn image_blocks<'i>(
    message: &'i Message,
    images: &'i HashMap<String, String>,
) -> impl Iterator<Item = Value> + 'i {
    message
        .images
        .iter()
        .filter_map(|path| images.get(path))
        .filter_map(|url| {
            let (media_type, data) = url.strip_prefix("data:")?.split_once(";base64,")?;
            Some(json!({
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            }))
        })
}

/// A person's message: its text, then its images.
fn user_blocks(message: &Message, images: &HashMap<String, String>) -> Vec<Value> {
    text_block(&message.content)
        .into_iter()
        .chain(image_blocks(message, images))
        .collect()
}

/// A tool result as a `tool_result` block answering its call; the images a tool read go inside
/// it. squidbot stores a failed tool's result as text starting with "Error" (see
/// `ToolOutput::error`), which is what `is_error` is told from.
fn tool_result(message: &Message, images: &HashMap<String, String>) -> Value {
    let content: Vec<Value> = text_block(&message.content)
        .into_iter()
        .chain(image_blocks(message, images))
        .collect();
    json!({
        "type": "tool_result",
        "tool_use_id": tool_use_id(message.tool_call_id.as_deref().unwrap_or_default()),
        "content": content,
        "is_error": message.content.starts_with("Error"),
    })
}

/// An assistant message: its own thinking blocks first (only those this API made), then its
/// text, then its tool calls.
fn assistant_blocks(message: &Message) -> Vec<Value> {
    let thinking = message
        .reasoning_state
        .iter()
        .filter(|state| state.api == API)
        .flat_map(|state| state.items.iter().cloned());
    let calls = message.tool_calls.iter().flatten().map(tool_use);
    thinking
        .chain(text_block(&message.content))
        .chain(calls)
        .collect()
}

fn tool_use(call: &ToolCall) -> Value {
    // The API wants an object; arguments the model sent as invalid JSON are kept as a string
    // (see `parse_tool_arguments`) and go back as no arguments.
    let input = match &call.arguments {
        Value::Object(_) => call.arguments.clone(),
        _ => Value::Object(Map::new()),
    };
    json!({
        "type": "tool_use",
        "id": tool_use_id(&call.id),
        "name": call.name,
        "input": input,
    })
}

/// `id` as the API accepts it (`^[a-zA-Z0-9_-]+$`): unchanged when it fits, else its allowed
/// characters with a hash of the whole id, so ids from another provider (Kimi's
/// `functions.add:0`) are rewritten the same way for a call and for its result, and two ids
/// never become one.
pub(crate) fn tool_use_id(id: &str) -> Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(allowed) {
        return Cow::Borrowed(id);
    }
    let kept: String = id.chars().filter(|&c| allowed(c)).collect();
    Cow::Owned(format!("{kept}_{:016x}", stable_hash(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::message::ReasoningState;
    use chrono::Utc;

    fn message(role: Role, content: &str) -> Message {
        Message::new(role, content, Utc::now().fixed_offset())
    }

    fn body(messages: Vec<Message>, tools: &[&ToolSpec]) -> Value {
        let messages: Vec<Arc<Message>> = messages.into_iter().map(Arc::new).collect();
        let body = MessagesBody::new("claude", &messages, tools, None, &HashMap::new());
        serde_json::to_value(&body).unwrap()
    }

    #[test]
    fn history_alternates_with_results_paired_and_thinking_first() {
        let mut assistant = message(Role::Assistant, "Let me look.");
        assistant.tool_calls = Some(vec![
            ToolCall {
                id: "functions.add:0".into(),
                name: "add".into(),
                arguments: json!({"a": 2}),
                provider_state: None,
            },
            ToolCall {
                id: "toolu_1".into(),
                name: "multiply".into(),
                arguments: Value::String("{broken".into()),
                provider_state: None,
            },
        ]);
        let thinking = json!({"type": "thinking", "thinking": "hm", "signature": "c2ln"});
        assistant.reasoning_state = Some(ReasoningState {
            api: API.into(),
            items: vec![thinking.clone()],
        });
        let mut first = message(Role::Tool, "5");
        first.tool_call_id = Some("functions.add:0".into());
        let mut second = message(Role::Tool, "Error: no such tool");
        second.tool_call_id = Some("toolu_1".into());
        let mut foreign = message(Role::Assistant, "earlier");
        foreign.reasoning_state = Some(ReasoningState {
            api: "responses".into(),
            items: vec![json!({"type": "reasoning"})],
        });
        let mut orphan = message(Role::Tool, "lost");
        orphan.tool_call_id = Some("call_0".into());
        let spec = ToolSpec::new("add", "Adds.", &json!({"type": "object"}));
        let sent = body(
            vec![
                message(Role::System, "Be brief."),
                orphan,
                message(Role::User, "hi"),
                foreign,
                message(Role::User, "add"),
                message(Role::User, "please"),
                assistant,
                first,
                second,
            ],
            &[&spec],
        );
        assert_eq!(sent["system"][0]["text"], "Be brief.");
        assert!(!sent.to_string().contains("lost"), "{sent}");
        let turns = sent["messages"].as_array().unwrap();
        let roles: Vec<&str> = turns.iter().map(|t| t["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        assert_eq!(
            turns[1]["content"],
            json!([{"type": "text", "text": "earlier"}])
        );
        assert_eq!(turns[2]["content"].as_array().unwrap().len(), 2);
        let reply = turns[3]["content"].as_array().unwrap();
        assert_eq!(reply[0], thinking);
        let rewritten = tool_use_id("functions.add:0").into_owned();
        assert!(rewritten.starts_with("functionsadd0_"), "{rewritten}");
        assert_eq!(reply[2]["id"], rewritten.as_str());
        assert_eq!(reply[3]["input"], json!({}));
        let results = turns[4]["content"].as_array().unwrap();
        assert_eq!(results[0]["tool_use_id"], rewritten.as_str());
        assert_eq!(results[0]["is_error"], false);
        assert_eq!(results[1]["tool_use_id"], "toolu_1");
        assert_eq!(results[1]["is_error"], true);
        assert_eq!(results[1]["cache_control"], json!({"type": "ephemeral"}));
        assert_eq!(sent["tools"][0]["input_schema"], json!({"type": "object"}));
        assert_eq!(
            sent["tools"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(
            sent["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(sent.to_string().matches("cache_control").count(), 3);
        assert_eq!(sent["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(sent["stream"], true);
    }

    #[test]
    fn ids_are_rewritten_only_when_the_api_would_refuse_them() {
        assert_eq!(tool_use_id("toolu_01A-b"), "toolu_01A-b");
        assert_ne!(tool_use_id("a.b"), tool_use_id("a:b"));
        assert_eq!(tool_use_id("a.b"), tool_use_id("a.b"));
        let empty = tool_use_id("");
        assert!(!empty.is_empty() && empty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }
}
