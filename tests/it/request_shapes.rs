//! #25: the JSON squidbot sends, checked against each provider's documented rules.
//!
//! One conversation that crossed providers (a tool call whose id another provider made, no
//! reasoning and no signature recorded with it, an image the person sent) is sent by the real
//! client over real HTTP to the scripted server, once per provider profile, and the request
//! body the server received is checked against the rules each provider documents:
//!
//! - OpenAI reasoning models (o-series, gpt-5): `max_tokens` is refused ("Unsupported
//!   parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'
//!   instead."); the limit goes in `max_completion_tokens`.
//! - Mistral: tool-call ids are 9 characters of `[a-zA-Z0-9]`, on the call and on its result
//!   alike (the recorded 400 in `data/provider-replays/mistral-tool-call-id.400.json`: "must
//!   be a-z, A-Z, 0-9, with a length of 9").
//! - DeepSeek thinking mode: an assistant message with tool calls carries `reasoning_content`
//!   back (api-docs.deepseek.com, "Thinking Mode: tool calls": it must be passed back in the
//!   tool-call turn, or the API answers 400).
//! - Gemini's OpenAI endpoint (Gemini 3): each tool call sent back carries
//!   `extra_content.google.thought_signature`; for a call that has none (made by another
//!   model) the documented placeholder `skip_thought_signature_validator`
//!   (ai.google.dev/gemini-api/docs/thought-signatures).
//! - A model that reads no images gets none (`image_url` parts are refused by text-only
//!   servers); one that does gets the image as a data URL part.
//! - A model configured without tools gets no `tools` key.
//!
//! Every request also obeys the shape all of them share: each `tool` message answers a call
//! id of the assistant message before it, and nothing of squidbot's own bookkeeping (sender,
//! channel, timestamps) is sent.

use std::sync::Arc;

use serde_json::{Value, json};
use squidbot::core::message::{Message, ReasoningState, Role, ToolCall};
use squidbot::core::ports::llm::{ChatRequest, ChatResponse, LlmClient};
use squidbot::core::ports::tool::ToolSpec;
use squidbot::core::ports::usage::{CallTag, Purpose};
use squidbot::llm::{Endpoint, OpenAiCompatLlm, Timeouts, http_client};

use crate::support::scripted_llm::ScriptedLlm;

/// The id another provider gave the call (OpenAI's shape).
const FOREIGN_ID: &str = "call_Xy12abcdefghijkLMNOPqrs";

/// The request `model` (a provider's model id) gets for the crossed conversation, as received.
async fn sent(model: &str, adjust: impl FnOnce(&mut Endpoint)) -> Value {
    let server = ScriptedLlm::start().await;
    let mut endpoint = Endpoint::new(model, model, server.url());
    endpoint.max_tokens = Some(1000);
    adjust(&mut endpoint);
    let timeouts = Timeouts::default();
    let client = OpenAiCompatLlm::new(http_client(&timeouts).unwrap(), endpoint, timeouts);
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("photo.png");
    std::fs::write(&image, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let now = chrono::Utc::now().fixed_offset();
    let mut asked = Message::new(
        Role::User,
        "what is in this picture, and what time is it?",
        now,
    );
    asked.images = vec![image.to_string_lossy().into_owned()];
    asked.sender_id = Some("@owner:example.org".into());
    asked.channel = Some("matrix".into());
    let mut call = Message::new(Role::Assistant, "", now);
    call.tool_calls = Some(vec![shell_call(FOREIGN_ID)]);
    let result = shell_result(FOREIGN_ID);
    let messages: Vec<Arc<Message>> = [
        Message::new(Role::System, "You are squidbot.", now),
        asked,
        call,
        result,
        Message::new(Role::User, "and now?", now),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    ask_with_shell(&client, &messages).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].clone();
    shared_rules(&body, model);
    body
}

/// A call of the `shell` tool (`date`) with the id `id`, as a history records it.
pub(crate) fn shell_call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "shell".into(),
        arguments: json!({"command": "date"}),
        provider_state: None,
    }
}

/// The result of the `shell` call `id`.
pub(crate) fn shell_result(id: &str) -> Message {
    let mut result = Message::new(
        Role::Tool,
        "Thu Nov 26 10:00:00 UTC 2026",
        chrono::Utc::now().fixed_offset(),
    );
    result.tool_call_id = Some(id.into());
    result
}

/// An assistant message saying `text` that made the `shell` calls `ids` after reasoning
/// `items` recorded by the API `api` (`anthropic`, `responses`): how a history that crossed
/// APIs holds each one's reasoning.
pub(crate) fn reasoned_calls(text: &str, api: &str, items: Vec<Value>, ids: &[&str]) -> Message {
    let mut message = Message::new(Role::Assistant, text, chrono::Utc::now().fixed_offset());
    message.reasoning_state = Some(ReasoningState {
        api: api.into(),
        items,
    });
    message.tool_calls = Some(ids.iter().map(|id| shell_call(id)).collect());
    message
}

/// Asks `client` once with `messages` and a `shell` tool, as a turn does; the client must
/// answer.
pub(crate) async fn ask_with_shell(
    client: &dyn LlmClient,
    messages: &[Arc<Message>],
) -> ChatResponse {
    let shell = ToolSpec::new(
        "shell",
        "Run a command.",
        &json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    );
    let request = ChatRequest {
        messages,
        tools: &[&shell],
        call: CallTag::new(Purpose::Turn),
    };
    client.chat(request, &|_| {}).await.unwrap()
}

/// What every provider's request must look like.
fn shared_rules(body: &Value, model: &str) {
    assert_eq!(body["model"], model);
    assert_eq!(body["stream"], true);
    let messages = body["messages"].as_array().unwrap();
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap();
        assert!(
            ["system", "user", "assistant", "tool"].contains(&role),
            "{message}"
        );
        for field in ["sender_id", "channel", "timestamp", "images", "source_id"] {
            assert!(message.get(field).is_none(), "{field} sent: {message}");
        }
        match role {
            "assistant" => {
                open = message["tool_calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| c["id"].as_str().unwrap().to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap();
                assert!(open.iter().any(|open| open == id), "{id} answers no call");
            }
            _ => open.clear(),
        }
    }
}

/// The assistant message with the tool call, as sent.
fn call_message(body: &Value) -> &Value {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap()
}

/// The parts of the first user message (a string when it has no image).
fn image_parts(body: &Value) -> usize {
    body["messages"][1]["content"]
        .as_array()
        .map_or(0, |parts| {
            parts.iter().filter(|p| p["type"] == "image_url").count()
        })
}

#[tokio::test]
async fn openai_reasoning_models_get_max_completion_tokens_only() {
    for model in ["o3-mini", "gpt-5-mini", "openai/o4-mini"] {
        let body = sent(model, |_| {}).await;
        assert!(body.get("max_tokens").is_none(), "{model}: {body}");
        assert_eq!(body["max_completion_tokens"], 1000, "{model}");
    }
    let body = sent("gpt-4o", |_| {}).await;
    assert_eq!(body["max_tokens"], 1000);
    // gpt-4o reads images: the picture goes as a data URL part.
    assert_eq!(image_parts(&body), 1, "{body}");
    let url = body["messages"][1]["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"));
    assert!(url.starts_with("data:image/png;base64,"), "{url}");
}

#[tokio::test]
async fn mistral_gets_nine_alphanumeric_tool_call_ids_on_call_and_result() {
    for model in ["mistral-large-latest", "magistral-medium-latest"] {
        let body = sent(model, |_| {}).await;
        let id = call_message(&body)["tool_calls"][0]["id"].as_str().unwrap();
        assert!(
            id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric()),
            "{model}: {id}"
        );
        let result = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .unwrap();
        assert_eq!(result["tool_call_id"], id, "{model}");
    }
}

#[tokio::test]
async fn deepseek_thinking_gets_reasoning_content_back_on_tool_call_turns() {
    let body = sent("deepseek-reasoner", |_| {}).await;
    let call = call_message(&body);
    assert!(call["reasoning_content"].is_string(), "{call}");
    // A model without thinking mode gets no such field.
    let body = sent("deepseek-chat", |_| {}).await;
    assert!(call_message(&body).get("reasoning_content").is_none());
}

#[tokio::test]
async fn gemini_gets_a_thought_signature_on_every_tool_call() {
    let body = sent("gemini-3-pro-preview", |_| {}).await;
    let call = &call_message(&body)["tool_calls"][0];
    assert_eq!(
        call["extra_content"]["google"]["thought_signature"], "skip_thought_signature_validator",
        "{call}"
    );
    // Others get no `extra_content`.
    let body = sent("llama3.1", |_| {}).await;
    assert!(
        call_message(&body)["tool_calls"][0]
            .get("extra_content")
            .is_none()
    );
}

#[tokio::test]
async fn a_model_without_images_or_tools_gets_neither() {
    let body = sent("llama3.1", |_| {}).await;
    assert_eq!(image_parts(&body), 0, "{body}");
    assert!(body["tools"].is_array());
    let body = sent("phi3", |endpoint| endpoint.profile.tools = false).await;
    assert!(body.get("tools").is_none(), "{body}");
    assert!(body.get("tool_choice").is_none(), "{body}");
}
