//! The body of `POST /responses`: the history as input items, the tools, and the settings that
//! keep the conversation in squidbot's hands.
//!
//! Nothing is stored at OpenAI (`store: false`), so every request carries the whole history,
//! and the model's reasoning travels with it: the reasoning items an earlier answer returned
//! (with `encrypted_content`, asked for by `include`) go back verbatim, before the calls they
//! led to, as the API requires for reasoning models that call tools. Reasoning another API
//! produced is left out; it would mean nothing here.
//!
//! System messages at the start become `instructions`; a later one (a summary, a note from the
//! agent loop) stays in place as a `developer` message. Text and tool calls borrow from the
//! history; only the tools' schemas are re-read (as raw JSON, not re-serialized).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::core::message::{Message, Role, ToolCall};
use crate::core::ports::tool::ToolSpec;
use crate::llm::wire::{TOOL_IMAGES, arguments_string};

/// What `include` asks for: the reasoning, encrypted, so it can be sent back next round.
const INCLUDE: [&str; 1] = ["reasoning.encrypted_content"];

/// The `api` a [`crate::core::message::ReasoningState`] made by this API is tagged with.
pub(crate) const API: &str = "responses";

/// The body of `POST /responses`.
#[derive(Debug, Serialize)]
pub(crate) struct RequestBody<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "String::is_empty")]
    instructions: String,
    input: Vec<Input<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    stream: bool,
    store: bool,
    include: [&'static str; 1],
}

impl<'a> RequestBody<'a> {
    /// A streamed, unstored request for `model`; `images` holds the `data:` URL of each image
    /// that goes out, by its saved path (see [`crate::llm::images::load`]).
    pub(crate) fn new(
        model: &'a str,
        messages: &'a [Arc<Message>],
        tools: &'a [&'a ToolSpec],
        max_output_tokens: Option<u32>,
        images: &'a HashMap<String, String>,
    ) -> Self {
        let (instructions, input) = input_items(messages, images);
        Self {
            model,
            instructions,
            input,
            tools: tools.iter().filter_map(|spec| Tool::new(spec)).collect(),
            max_output_tokens,
            stream: true,
            store: false,
            include: INCLUDE,
        }
    }
}

/// One input item: a typed one, or a reasoning item sent back as the API returned it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Input<'a> {
    Item(Item<'a>),
    Verbatim(&'a Value),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item<'a> {
    Message {
        role: &'static str,
        content: Vec<Part<'a>>,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: String,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: &'a str,
    },
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    InputText { text: &'a str },
    InputImage { image_url: &'a str },
    OutputText { text: &'a str },
}

/// `{"type": "function", "name", "description", "parameters", "strict": false}`: not strict,
/// since squidbot's schemas have optional fields, which strict mode forbids.
#[derive(Debug, Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a RawValue,
    strict: bool,
}

impl<'a> Tool<'a> {
    /// The definition of `spec`; `None` (logged) for a schema that is not JSON, which
    /// [`ToolSpec`] never makes.
    fn new(spec: &'a ToolSpec) -> Option<Self> {
        match serde_json::from_str::<&RawValue>(spec.parameters()) {
            Ok(parameters) => Some(Self {
                kind: "function",
                name: spec.name(),
                description: spec.description(),
                parameters,
                strict: false,
            }),
            Err(error) => {
                tracing::error!(tool = spec.name(), error = %error, "Tool schema is not JSON; tool left out.");
                None
            }
        }
    }
}

/// The instructions (the leading system messages, joined) and the input items of `messages`.
fn input_items<'a>(
    messages: &'a [Arc<Message>],
    images: &'a HashMap<String, String>,
) -> (String, Vec<Input<'a>>) {
    let leading = messages
        .iter()
        .take_while(|message| message.role == Role::System)
        .count();
    let instructions = messages[..leading]
        .iter()
        .map(|message| message.content.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut input = Vec::with_capacity(messages.len());
    let mut called: HashSet<&'a str> = HashSet::new();
    let mut shown: Vec<&'a str> = Vec::new();
    let rest = &messages[leading..];
    for (position, message) in rest.iter().enumerate() {
        match message.role {
            Role::System => input.push(Input::Item(text_message(
                "developer",
                &message.content,
                Vec::new(),
            ))),
            Role::User => input.push(Input::Item(text_message(
                "user",
                &message.content,
                image_urls(message, images),
            ))),
            Role::Assistant => assistant_items(message, &mut input, &mut called),
            Role::Tool => {
                // A result whose call is not in the request (history cut between them) would
                // be refused; the API pairs every output with its call by `call_id`.
                let Some(call_id) = message.tool_call_id.as_deref() else {
                    continue;
                };
                if !called.contains(call_id) {
                    continue;
                }
                input.push(Input::Item(Item::FunctionCallOutput {
                    call_id,
                    output: &message.content,
                }));
                shown.extend(image_urls(message, images));
                let run_ends = rest
                    .get(position + 1)
                    .is_none_or(|next| next.role != Role::Tool);
                if run_ends && !shown.is_empty() {
                    input.push(Input::Item(text_message(
                        "user",
                        TOOL_IMAGES,
                        std::mem::take(&mut shown),
                    )));
                }
            }
        }
    }
    (instructions, input)
}

/// The `data:` URLs of the images of `message` that go out.
fn image_urls<'a>(message: &'a Message, images: &'a HashMap<String, String>) -> Vec<&'a str> {
    message
        .images
        .iter()
        .filter_map(|path| images.get(path).map(String::as_str))
        .collect()
}

/// A message of `role` holding `text` and the images at `urls`.
fn text_message<'a>(role: &'static str, text: &'a str, urls: Vec<&'a str>) -> Item<'a> {
    let mut content = vec![Part::InputText { text }];
    content.extend(
        urls.into_iter()
            .map(|image_url| Part::InputImage { image_url }),
    );
    Item::Message { role, content }
}

/// An assistant message as items: its reasoning (this API's only), its text, its calls.
fn assistant_items<'a>(
    message: &'a Message,
    input: &mut Vec<Input<'a>>,
    called: &mut HashSet<&'a str>,
) {
    if let Some(state) = message
        .reasoning_state
        .as_ref()
        .filter(|state| state.api == API)
    {
        input.extend(state.items.iter().map(Input::Verbatim));
    }
    if !message.content.is_empty() {
        input.push(Input::Item(Item::Message {
            role: "assistant",
            content: vec![Part::OutputText {
                text: &message.content,
            }],
        }));
    }
    for call in message.tool_calls.iter().flatten() {
        called.insert(&call.id);
        input.push(Input::Item(function_call(call)));
    }
}

fn function_call(call: &ToolCall) -> Item<'_> {
    Item::FunctionCall {
        call_id: &call.id,
        name: &call.name,
        arguments: arguments_string(&call.arguments),
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use serde_json::json;

    use super::*;
    use crate::core::message::ReasoningState;

    fn message(role: Role, content: &str) -> Message {
        let ts = DateTime::parse_from_rfc3339("2026-11-28T10:00:00+00:00").unwrap();
        Message::new(role, content, ts)
    }

    fn body(messages: Vec<Message>, tools: &[&ToolSpec]) -> Value {
        let messages: Vec<Arc<Message>> = messages.into_iter().map(Arc::new).collect();
        let images = HashMap::new();
        serde_json::to_value(RequestBody::new(
            "gpt-5.4",
            &messages,
            tools,
            Some(64),
            &images,
        ))
        .unwrap()
    }

    #[test]
    fn a_tool_turn_goes_out_as_items_with_its_reasoning_first() {
        let reasoning =
            json!({"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAA", "summary": []});
        let mut assistant = message(Role::Assistant, "");
        assistant.reasoning_state = Some(ReasoningState {
            api: API.to_owned(),
            items: vec![reasoning.clone()],
        });
        assistant.tool_calls = Some(vec![ToolCall {
            id: "call_1".into(),
            name: "shell".into(),
            arguments: json!({"command": "ls"}),
            provider_state: None,
        }]);
        let mut result = message(Role::Tool, "a.txt");
        result.tool_call_id = Some("call_1".into());
        let mut orphan = message(Role::Tool, "lost");
        orphan.tool_call_id = Some("call_0".into());
        let spec = ToolSpec::new("shell", "Runs a command.", &json!({"type": "object"}));
        let sent = body(
            vec![
                message(Role::System, "Be brief."),
                message(Role::User, "list"),
                assistant,
                result,
                orphan,
                message(Role::System, "A note."),
            ],
            &[&spec],
        );
        assert_eq!(sent["instructions"], "Be brief.");
        assert_eq!(sent["store"], false);
        assert_eq!(sent["stream"], true);
        assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(sent["max_output_tokens"], 64);
        assert_eq!(
            sent["input"],
            json!([
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list"}]},
                reasoning,
                {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":\"ls\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "A note."}]},
            ])
        );
        assert_eq!(
            sent["tools"],
            json!([{"type": "function", "name": "shell", "description": "Runs a command.",
                "parameters": {"type": "object"}, "strict": false}])
        );
    }

    #[test]
    fn reasoning_of_another_api_and_assistant_text_are_kept_apart() {
        let mut assistant = message(Role::Assistant, "Hello.");
        assistant.reasoning_state = Some(ReasoningState {
            api: "anthropic".to_owned(),
            items: vec![json!({"type": "thinking", "signature": "x"})],
        });
        let sent = body(vec![message(Role::User, "hi"), assistant], &[]);
        assert!(sent.get("instructions").is_none());
        assert!(sent.get("tools").is_none());
        assert_eq!(
            sent["input"][1],
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]})
        );
        assert_eq!(sent["input"].as_array().unwrap().len(), 2);
    }
}
