//! The message record: one line of a session's JSONL history and one entry of an LLM prompt.
//!
//! The field names and shapes match the original squidbot's records so its files load unchanged:
//! `{"role", "content", "timestamp", "tool_calls"?, "tool_call_id"?, "reasoning_content"?,
//! "channel"?, "sender_id"?}`, plus squidbot's own optional fields (`reasoning_state`,
//! `source_id`, `images`), which the original ignores. Timestamps are written as RFC 3339 with an offset; the original's
//! naive local timestamps are read as UTC rather than rejected, because refusing a whole history
//! over a timestamp format would lose the user's data.

use chrono::{DateTime, FixedOffset, NaiveDateTime};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Who speaks in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions assembled by squidbot (never persisted in history).
    System,
    /// A person (or heartbeat / cron, told apart by `sender_id`).
    User,
    /// The model: a reply, or a request to run tools.
    Assistant,
    /// The result of one tool call.
    Tool,
}

/// One tool invocation requested by the model.
///
/// `arguments` is the parsed JSON object when the model produced valid JSON; when it did not,
/// it holds the raw text as a JSON string so the record is still faithful and loadable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id that links the call to its result.
    pub id: String,
    /// Name of the tool.
    pub name: String,
    /// Arguments as the model sent them.
    #[serde(default)]
    pub arguments: Value,
    /// State the provider attached to the call and wants back with it in the next request
    /// (Gemini's `extra_content.google.thought_signature`), kept verbatim; `None` for most.
    #[serde(
        default,
        rename = "extra_content",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_state: Option<Value>,
}

/// Reasoning kept for the provider that made it: opaque to squidbot, stored in the history with
/// the assistant message it belongs to and sent back only to the same API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningState {
    /// The wire API that produced it (`responses`, `anthropic`).
    pub api: String,
    /// The provider's items, verbatim.
    pub items: Vec<Value>,
}

/// A message of a conversation, as stored and as sent to the LLM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The text; tool-call-only assistant messages have an empty string.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub content: String,
    /// When the message was created.
    #[serde(deserialize_with = "lenient_timestamp")]
    pub timestamp: DateTime<FixedOffset>,
    /// Tool calls requested by an assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// For a tool result: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning text some providers return and require back on tool-call turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Reasoning a provider's own API returned in a form it wants back verbatim in the next
    /// round (the Responses API's reasoning items with their encrypted content, Anthropic's
    /// thinking blocks with their signatures), tagged with the API that made it (see
    /// [`ReasoningState`]); an adapter of another API leaves it out of its requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_state: Option<ReasoningState>,
    /// The channel the message came through (`cli`, `matrix`, `email`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Who sent it: a user id, `assistant`, `heartbeat`, `cron:<job>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
    /// The channel's id of what was received (a mailbox entry), on a user message: a turn
    /// handed over again after a crash finds it and resumes instead of starting twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// Images it carries, as paths: on a user message those the channel saved the person's
    /// images at, on a tool result those the tool read (`read_file` of a PNG). A model that
    /// reads images gets them as image parts, read when the request is built; the history
    /// keeps the reference, never the bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
}

impl Message {
    /// A message with the given role and text and no optional fields.
    pub fn new(role: Role, content: impl Into<String>, timestamp: DateTime<FixedOffset>) -> Self {
        Self {
            role,
            content: content.into(),
            timestamp,
            tool_calls: None,
            tool_call_id: None,
            reasoning_content: None,
            reasoning_state: None,
            channel: None,
            sender_id: None,
            source_id: None,
            images: Vec::new(),
        }
    }

    /// Whether this is an assistant message that requests at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.role == Role::Assistant && self.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
    }

    /// A rough size of the message in characters, for token estimates.
    pub fn approx_chars(&self) -> usize {
        let calls: usize = self
            .tool_calls
            .iter()
            .flatten()
            .map(|c| c.name.len() + c.id.len() + c.arguments.to_string().len())
            .sum();
        self.content.len() + calls + 16
    }
}

fn null_as_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

fn lenient_timestamp<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<DateTime<FixedOffset>, D::Error> {
    let text = String::deserialize(deserializer)?;
    if let Ok(parsed) = DateTime::parse_from_rfc3339(&text) {
        return Ok(parsed);
    }
    // chrono's own parser, the inverse of how it writes years RFC 3339 cannot hold (before 0 or
    // after 9999, with a sign), which the naive format below accepts without an offset: without
    // this, such a record loads once and cannot be read back after being written. See: #7.
    if let Ok(parsed) = text.parse::<DateTime<FixedOffset>>() {
        return Ok(parsed);
    }
    NaiveDateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f")
        .map(|naive| naive.and_utc().fixed_offset())
        .map_err(serde::de::Error::custom)
}

/// The media type of an image a model may be shown, told by its first bytes (not its name):
/// PNG, JPEG, GIF and WebP, the formats the OpenAI-style APIs accept; `None` for anything else.
pub fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signed five-digit year loads through the naive format; once written back (chrono adds
    /// the offset) it must still load. Found while writing the `jsonl_history` fuzz target's
    /// round-trip invariant. See: #7
    #[test]
    fn formats_are_told_by_their_bytes() {
        assert_eq!(image_type(b"GIF89a..."), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_type(b"<svg"), None);
    }

    #[test]
    fn issue_7_a_far_future_timestamp_survives_a_round_trip() {
        let line = r#"{"role":"user","content":"x","timestamp":"+10000-01-01T00:00:00"}"#;
        let message: Message = serde_json::from_str(line).unwrap();
        let written = serde_json::to_string(&message).unwrap();
        let again: Message =
            serde_json::from_str(&written).unwrap_or_else(|error| panic!("{written}: {error}"));
        assert_eq!(again, message, "{written}");
    }

    #[test]
    fn original_record_loads() {
        let line = r#"{"role":"assistant","content":null,"timestamp":"2026-02-24T10:00:00.123456","tool_calls":[{"id":"c1","name":"shell","arguments":{"command":"ls"}}],"channel":"cli","sender_id":"assistant"}"#;
        let message: Message = serde_json::from_str(line).unwrap();
        assert_eq!(message.content, "");
        assert!(message.has_tool_calls());
        assert_eq!(message.timestamp.offset().local_minus_utc(), 0);
    }

    #[test]
    fn round_trip_keeps_offset_and_omits_absent_fields() {
        let ts = DateTime::parse_from_rfc3339("2026-11-22T10:00:00+01:00").unwrap();
        let message = Message::new(Role::User, "hi", ts);
        let json = serde_json::to_string(&message).unwrap();
        assert_eq!(
            json,
            r#"{"role":"user","content":"hi","timestamp":"2026-11-22T10:00:00+01:00"}"#
        );
        assert_eq!(serde_json::from_str::<Message>(&json).unwrap(), message);
    }
}
