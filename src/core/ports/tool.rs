//! **API Boundary.** The tool port: something the model can call.
//!
//! A tool describes itself with a JSON Schema and executes with JSON arguments. Every outcome is
//! a [`ToolOutput`]: bad arguments, failures and even panics become error results the model can
//! read, never errors that end the turn.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::core::session::SessionId;

/// The definition sent to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Unique name (`[a-zA-Z0-9_-]+`).
    pub name: String,
    /// What it does and when to use it: paid for on every turn, so short.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text the model reads.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
        }
    }

    /// A failed result; the text is prefixed with `Error: ` unless it already is.
    pub fn error(content: impl Into<String>) -> Self {
        let content = content.into();
        let content = if content.starts_with("Error") {
            content
        } else {
            format!("Error: {content}")
        };
        Self {
            content,
            is_error: true,
        }
    }
}

/// What a tool knows about the turn that calls it.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The session whose turn this is.
    pub session: SessionId,
    /// The channel's routing data for the turn (room, thread, mail headers).
    pub metadata: serde_json::Map<String, Value>,
    /// Where the session's unconsolidated tail starts (a byte offset in its history). Those
    /// messages, and the summary, are already in this turn's prompt, so a history search
    /// leaves them out. `None` when the call comes from outside a turn.
    pub prompt_tail: Option<u64>,
}

/// Something the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The definition offered to the model.
    fn spec(&self) -> &ToolSpec;

    /// Runs the tool. Must not panic on bad input: validate `arguments` and return
    /// [`ToolOutput::error`] with a message that says what was wrong.
    async fn call(&self, arguments: Value, context: &ToolContext) -> ToolOutput;
}

/// Parses `arguments` into `T`, turning a mismatch into a clear error result.
///
/// Tools declare their argument struct with `#[serde(deny_unknown_fields)]`, so this is the
/// schema check: missing fields, wrong types and unknown fields are all named.
pub fn parse_arguments<T: serde::de::DeserializeOwned>(
    tool: &str,
    arguments: Value,
) -> Result<T, ToolOutput> {
    let arguments = if arguments.is_null() {
        Value::Object(Default::default())
    } else {
        arguments
    };
    if let Value::String(raw) = &arguments {
        let what = if serde_json::from_str::<Value>(raw).is_ok() {
            "not a JSON object"
        } else {
            "not valid JSON"
        };
        return Err(ToolOutput::error(format!(
            "Error: arguments for {tool} are {what}: {}",
            raw.chars().take(200).collect::<String>()
        )));
    }
    // serde reads a struct from an array too (fields by position): `[""]` would pass as a
    // call of a tool whose first field is a string. Arguments are an object, by name. See: #7
    let kind = match &arguments {
        Value::Object(_) => None,
        Value::Array(_) => Some("an array"),
        Value::Number(_) => Some("a number"),
        Value::Bool(_) => Some("a boolean"),
        Value::Null | Value::String(_) => Some("not an object"),
    };
    if let Some(kind) = kind {
        return Err(ToolOutput::error(format!(
            "Error: arguments for {tool} must be a JSON object with named fields, not {kind}"
        )));
    }
    serde_json::from_value(arguments)
        .map_err(|error| ToolOutput::error(format!("Error: invalid arguments for {tool}: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Arguments {
        #[allow(dead_code)]
        path: String,
    }

    fn error_of(arguments: Value) -> String {
        parse_arguments::<Arguments>("list_files", arguments)
            .unwrap_err()
            .content
    }

    #[test]
    fn named_fields_parse() {
        assert_eq!(
            parse_arguments::<Arguments>("t", json!({"path": "a"}))
                .unwrap()
                .path,
            "a"
        );
    }

    /// Found by the `tool_arguments` fuzz target (seed `positional.json`): `[""]` was accepted
    /// as `{"path": ""}`, because serde reads a struct from an array by position.
    #[test]
    fn issue_7_positional_and_scalar_arguments_are_refused() {
        assert!(error_of(json!([""])).contains("not an array"));
        assert!(error_of(json!(3)).contains("not a number"));
        assert!(error_of(json!(true)).contains("not a boolean"));
        assert!(error_of(json!("{\"path\":1}")).contains("not a JSON object"));
        assert!(error_of(json!("{broken")).contains("not valid JSON"));
        assert!(error_of(json!({"path": "a", "x": 1})).contains("unknown field"));
    }
}
