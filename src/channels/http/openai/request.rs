//! The request shapes of `POST /v1/chat/completions`, read leniently as the apps send them and
//! checked against the limits.
//!
//! Apps send what the OpenAI API accepts: `content` as a string or as an array of parts (text,
//! `image_url` with a data URL), `system` or `developer` messages, `stream_options`, and many
//! fields squidbot has no use for (temperature, `max_tokens`, `n`...), which are ignored: the
//! owner's configuration decides those, not the app. What squidbot cannot honour is refused
//! with an OpenAI-style error naming the parameter: client-side `tools` (squidbot's tools run in
//! its own jail), `n` above 1, audio or file parts, image URLs that are not data URLs (fetching
//! them would be a way around `fetch_url`'s checks).
//!
//! The limits tell a photo from a flood of text: a body may be large (a phone photo as a data
//! URL is several megabytes of base64), but the new message's text, and the text of the whole
//! conversation the app resends, may not be what no model's context could hold.

use base64::Engine;
use serde_json::Value;

use super::error::ApiError;
use crate::core::message::image_type;

/// The largest body read, a few photos as data URLs.
pub const MAX_BODY: usize = 40 * 1024 * 1024;
/// The most text the new message may carry (about 64k tokens).
pub const MAX_MESSAGE_TEXT: usize = 256 * 1024;
/// The most text all the messages of a request may carry together: the app resends the whole
/// conversation each time, and squidbot reads only its last message, but a body of megabytes
/// of text is a mistake or an attack either way.
pub const MAX_TOTAL_TEXT: usize = 4 * 1024 * 1024;
/// The largest image, decoded.
pub const MAX_IMAGE: usize = 20 * 1024 * 1024;
/// The most images one message may carry.
pub const MAX_IMAGES: usize = 8;

/// Who speaks in a message of the app's conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    /// The person.
    User,
    /// The assistant, as the app shows it.
    Assistant,
}

/// One message of the conversation the app sent (system messages aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// Who speaks.
    pub speaker: Speaker,
    /// Its text parts, joined by blank lines.
    pub text: String,
}

/// An image of the new message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Its media type, told by its bytes.
    pub media_type: &'static str,
    /// The decoded bytes.
    pub bytes: Vec<u8>,
}

/// A chat completion request, as squidbot uses it.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The model or pool asked for.
    pub model: String,
    /// Whether the answer is streamed as server-sent events.
    pub stream: bool,
    /// Whether a streamed answer ends with a usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
    /// The app's `user` field, which may name the conversation.
    pub user: Option<String>,
    /// The system and developer messages, joined.
    pub system: String,
    /// The conversation, the new message last.
    pub turns: Vec<Turn>,
    /// The images of the new message.
    pub images: Vec<Image>,
}

impl ChatRequest {
    /// The new message's text.
    pub fn text(&self) -> &str {
        self.turns.last().map_or("", |turn| turn.text.as_str())
    }
}

/// Reads `body` as a chat completion request.
pub fn parse(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::invalid(format!("the body is not valid JSON: {error}"), None))?;
    let Value::Object(fields) = value else {
        return Err(ApiError::invalid("the body must be a JSON object", None));
    };
    refuse_unsupported(&fields)?;
    let model = match fields.get("model") {
        Some(Value::String(model)) if !model.trim().is_empty() => model.trim().to_owned(),
        _ => {
            return Err(ApiError::invalid(
                "`model` is required: one of GET /v1/models",
                Some("model"),
            ));
        }
    };
    let stream = match fields.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => *stream,
        Some(_) => {
            return Err(ApiError::invalid(
                "`stream` must be a boolean",
                Some("stream"),
            ));
        }
    };
    let include_usage = fields
        .get("stream_options")
        .and_then(|options| options.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let user = fields
        .get("user")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|user| !user.is_empty())
        .map(str::to_owned);
    let Some(messages) = fields.get("messages").and_then(Value::as_array) else {
        return Err(ApiError::invalid(
            "`messages` must be an array of messages",
            Some("messages"),
        ));
    };
    let Conversation {
        system,
        turns,
        images,
    } = conversation(messages)?;
    match turns.last() {
        Some(turn) if turn.speaker == Speaker::User => {}
        _ => {
            return Err(ApiError::invalid(
                "the last message must be the person's (role `user`)",
                Some("messages"),
            ));
        }
    }
    let text = turns.last().map_or(0, |turn| turn.text.len());
    if text > MAX_MESSAGE_TEXT {
        return Err(ApiError::too_large(format!(
            "the message has {text} bytes of text; at most {MAX_MESSAGE_TEXT} are taken"
        )));
    }
    if text == 0 && images.is_empty() {
        return Err(ApiError::invalid("the message is empty", Some("messages")));
    }
    Ok(ChatRequest {
        model,
        stream,
        include_usage,
        user,
        system: system.join("\n\n"),
        turns,
        images,
    })
}

/// Refuses what squidbot does not do: client-side tools (it runs its own, in its jail) and more
/// than one choice.
fn refuse_unsupported(fields: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    if fields
        .get("tools")
        .is_some_and(|tools| tools.as_array().is_none_or(|t| !t.is_empty()))
        || fields.get("functions").is_some_and(|f| !f.is_null())
    {
        return Err(ApiError::unsupported(
            "client-side tools are not supported: squidbot runs its own tools (shell, files, \
             web, memory) in its jail; switch the app's tools or function calling off",
            "tools",
        ));
    }
    if fields
        .get("n")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 1)
    {
        return Err(ApiError::unsupported(
            "only one choice per request (n = 1) is supported",
            "n",
        ));
    }
    Ok(())
}

/// What the messages of a request carry.
struct Conversation {
    /// The system (and developer) texts.
    system: Vec<String>,
    /// The person's and the assistant's turns, in order.
    turns: Vec<Turn>,
    /// The images of the new message.
    images: Vec<Image>,
}

/// The system text, the turns and the new message's images of `messages`, refused when they
/// carry tool results, unknown roles or more text than any model's context holds.
fn conversation(messages: &[Value]) -> Result<Conversation, ApiError> {
    let mut system = Vec::new();
    let mut turns = Vec::new();
    let mut images = Vec::new();
    let mut total = 0usize;
    for (index, message) in messages.iter().enumerate() {
        let param = format!("messages[{index}]");
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let last = index + 1 == messages.len();
        let (text, parts_images) = content(message.get("content"), &param, last)?;
        total += text.len();
        if total > MAX_TOTAL_TEXT {
            return Err(ApiError::too_large(format!(
                "the messages carry more than {} MiB of text, more than any model's context holds",
                MAX_TOTAL_TEXT / (1024 * 1024)
            )));
        }
        match role {
            "system" | "developer" => system.push(text),
            "user" => {
                turns.push(Turn {
                    speaker: Speaker::User,
                    text,
                });
                images = parts_images;
            }
            "assistant" => turns.push(Turn {
                speaker: Speaker::Assistant,
                text,
            }),
            "tool" | "function" => {
                return Err(ApiError::unsupported(
                    "tool results are not supported: squidbot runs its own tools",
                    &param,
                ));
            }
            other => {
                return Err(ApiError::invalid(
                    format!(
                        "unknown role {other:?} (expected system, developer, user or assistant)"
                    ),
                    Some(&format!("{param}.role")),
                ));
            }
        }
    }
    Ok(Conversation {
        system,
        turns,
        images,
    })
}

/// The text and images of a message's `content` (a string, an array of parts, or null).
/// Images are decoded only for the `last` message: earlier ones are squidbot's record already.
fn content(
    content: Option<&Value>,
    param: &str,
    last: bool,
) -> Result<(String, Vec<Image>), ApiError> {
    let parts = match content {
        None | Some(Value::Null) => return Ok((String::new(), Vec::new())),
        Some(Value::String(text)) => return Ok((text.clone(), Vec::new())),
        Some(Value::Array(parts)) => parts,
        Some(_) => {
            return Err(ApiError::invalid(
                "`content` must be a string or an array of parts",
                Some(&format!("{param}.content")),
            ));
        }
    };
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let param = format!("{param}.content[{index}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text" | "input_text") => match part.get("text").and_then(Value::as_str) {
                Some(text) => texts.push(text.to_owned()),
                None => return Err(ApiError::invalid("a text part needs `text`", Some(&param))),
            },
            Some("image_url" | "input_image") => {
                if !last {
                    continue;
                }
                if images.len() == MAX_IMAGES {
                    return Err(ApiError::too_large(format!(
                        "at most {MAX_IMAGES} images per message"
                    )));
                }
                let url = part
                    .get("image_url")
                    .and_then(|image| image.get("url").or(Some(image)))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                images.push(data_url(url, &param)?);
            }
            Some(other) => {
                return Err(ApiError::unsupported(
                    format!(
                        "content parts of type {other:?} are not supported (text and images are)"
                    ),
                    &param,
                ));
            }
            None => {
                return Err(ApiError::invalid(
                    "a content part needs a `type`",
                    Some(&param),
                ));
            }
        }
    }
    Ok((texts.join("\n\n"), images))
}

/// Decodes an image given as `data:<type>;base64,<data>`.
fn data_url(url: &str, param: &str) -> Result<Image, ApiError> {
    let Some((header, data)) = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
        .filter(|(header, _)| header.ends_with(";base64"))
    else {
        return Err(ApiError::unsupported(
            "images must be sent as base64 data URLs (data:image/png;base64,...); squidbot does \
             not fetch image links",
            param,
        ));
    };
    let _ = header;
    if data.len() / 4 * 3 > MAX_IMAGE {
        return Err(ApiError::too_large(format!(
            "an image is larger than {} MiB",
            MAX_IMAGE / (1024 * 1024)
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|error| {
            ApiError::invalid(
                format!("the image's base64 is broken: {error}"),
                Some(param),
            )
        })?;
    let Some(media_type) = image_type(&bytes) else {
        return Err(ApiError::unsupported(
            "only PNG, JPEG, GIF and WebP images are read",
            param,
        ));
    };
    Ok(Image { media_type, bytes })
}
