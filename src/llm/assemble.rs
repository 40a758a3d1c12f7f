//! [`CallAssembler`]: streamed tool-call fragments into whole calls, keyed by what identifies a
//! call on the wire as providers really write it.
//!
//! OpenAI numbers a response's calls with `index` and sends each call's `id` and name once,
//! then arguments in pieces. Others do not: Ollama (≥ 0.20), Gemini 3 and some relays give every
//! call `index: 0`, or no index at all, each call whole in one fragment; llama-cpp-python repeats
//! the name (and id) in every fragment of the same call. Keyed by `index` alone, parallel calls
//! merged into one with a glued name and `{…}{…}` arguments. So a fragment starts a new call
//! when it brings an id not seen yet, or a name after the current call's arguments are already
//! complete JSON; otherwise it continues the call its index (or, without one, the last call)
//! names.

use std::collections::HashMap;

use serde_json::Value;

use crate::core::message::ToolCall;
use crate::llm::wire::ToolCallDelta;

/// The most calls one response may assemble, so a hostile server cannot make us allocate wildly.
const MAX_TOOL_CALLS: usize = 256;

/// A tool call being assembled from stream fragments.
#[derive(Debug, Default, Clone, PartialEq)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    provider_state: Option<Value>,
}

impl PartialCall {
    /// Whether the arguments so far are a whole JSON value (so a new name starts a new call).
    fn is_complete(&self) -> bool {
        !self.name.is_empty()
            && !self.arguments.trim().is_empty()
            && serde_json::from_str::<serde::de::IgnoredAny>(&self.arguments).is_ok()
    }
}

/// Assembles the tool calls of one response.
#[derive(Debug, Default)]
pub(crate) struct CallAssembler {
    calls: Vec<PartialCall>,
    /// The wire's `index` → the position of the latest call that used it.
    by_index: HashMap<usize, usize>,
}

impl CallAssembler {
    /// Applies one fragment (without an index, it continues the last call unless it starts a
    /// new one).
    pub(crate) fn apply(&mut self, fragment: ToolCallDelta) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let (name, arguments) = fragment
            .function
            .map(|function| (function.name.filter(|n| !n.is_empty()), function.arguments))
            .unwrap_or_default();
        let current = match fragment.index {
            Some(index) => self.by_index.get(&index).copied(),
            None => self.calls.len().checked_sub(1),
        };
        let known_id = id
            .as_deref()
            .and_then(|id| self.calls.iter().position(|call| call.id == id));
        let target = match (known_id, current) {
            (Some(position), _) => Some(position),
            (None, Some(position)) => {
                let call = &self.calls[position];
                let new_id = id.is_some() && !call.id.is_empty() && name.is_some();
                let new_name = name.is_some()
                    && call.is_complete()
                    && (name.as_deref() != Some(call.name.as_str())
                        || arguments.as_deref().is_some_and(|a| !a.is_empty()));
                (!new_id && !new_name).then_some(position)
            }
            (None, None) => None,
        };
        let position = match target {
            Some(position) => position,
            None => {
                if self.calls.len() >= MAX_TOOL_CALLS {
                    tracing::debug!("Tool-call fragment past the limit ignored.");
                    return;
                }
                self.calls.push(PartialCall::default());
                self.calls.len() - 1
            }
        };
        if let Some(index) = fragment.index {
            self.by_index.insert(index, position);
        }
        let call = &mut self.calls[position];
        if let Some(id) = id {
            call.id = id;
        }
        // OpenAI sends the name once; llama-cpp-python repeats the whole name in every
        // fragment, which must not be appended again. See: #7.
        if let Some(name) = name.filter(|name| *name != call.name) {
            call.name.push_str(&name);
        }
        if let Some(arguments) = arguments {
            call.arguments.push_str(&arguments);
        }
        if fragment.extra_content.is_some() {
            call.provider_state = fragment.extra_content;
        }
    }

    /// Adds a call the model wrote into its text as `<tool_call>{"name", "arguments"}</tool_call>`
    /// (Hermes format); returns `false` when `body` is not such a call.
    pub(crate) fn add_markup(&mut self, body: &str) -> bool {
        let Ok(Value::Object(call)) = serde_json::from_str::<Value>(body.trim()) else {
            return false;
        };
        let Some(name) = call.get("name").and_then(Value::as_str) else {
            return false;
        };
        let arguments = match call.get("arguments").or_else(|| call.get("parameters")) {
            Some(Value::String(raw)) => raw.clone(),
            Some(value) => value.to_string(),
            None => String::new(),
        };
        self.calls.push(PartialCall {
            name: name.to_owned(),
            arguments,
            ..PartialCall::default()
        });
        true
    }

    /// The calls, with arguments parsed and an id made up for any call that had none.
    pub(crate) fn finish(self) -> Vec<ToolCall> {
        self.calls
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
                provider_state: call.provider_state,
            })
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assemble(fragments: &[Value]) -> Vec<(String, String, Value)> {
        let mut assembler = CallAssembler::default();
        for fragment in fragments {
            assembler.apply(serde_json::from_value(fragment.clone()).unwrap());
        }
        assembler
            .finish()
            .into_iter()
            .map(|call| (call.id, call.name, call.arguments))
            .collect()
    }

    fn call(id: &str, name: &str, arguments: Value) -> (String, String, Value) {
        (id.to_owned(), name.to_owned(), arguments)
    }

    #[test]
    fn parallel_calls_all_at_index_zero_stay_apart() {
        let calls = assemble(&[
            json!({"index":0,"id":"call_a","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}),
            json!({"index":0,"id":"call_b","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}),
        ]);
        assert_eq!(
            calls,
            vec![
                call("call_a", "get_weather", json!({"city":"Paris"})),
                call("call_b", "get_weather", json!({"city":"Rome"})),
            ]
        );
    }

    #[test]
    fn whole_calls_without_ids_or_indexes_stay_apart() {
        let calls = assemble(&[
            json!({"function":{"name":"a","arguments":"{\"x\":1}"}}),
            json!({"function":{"name":"a","arguments":"{\"x\":2}"}}),
            json!({"function":{"name":"b","arguments":"{}"}}),
        ]);
        let named: Vec<_> = calls.iter().map(|c| (c.1.as_str(), c.2.clone())).collect();
        assert_eq!(
            named,
            vec![
                ("a", json!({"x":1})),
                ("a", json!({"x":2})),
                ("b", json!({}))
            ]
        );
    }

    #[test]
    fn fragments_of_one_call_still_join_however_they_repeat_themselves() {
        // OpenAI: id and name once, arguments in pieces, by index.
        let calls = assemble(&[
            json!({"index":0,"id":"c1","function":{"name":"sh","arguments":""}}),
            json!({"index":0,"function":{"arguments":"{\"cmd\""}}),
            json!({"index":0,"function":{"arguments":":\"ls\"}"}}),
        ]);
        assert_eq!(calls, vec![call("c1", "sh", json!({"cmd":"ls"}))]);
        // llama-cpp-python: id and name in every fragment.
        let calls = assemble(&[
            json!({"index":0,"id":"x","function":{"name":"list","arguments":"{"}}),
            json!({"index":0,"id":"x","function":{"name":"list","arguments":"\"p\":1"}}),
            json!({"index":0,"id":"x","function":{"name":"list","arguments":"}"}}),
        ]);
        assert_eq!(calls, vec![call("x", "list", json!({"p":1}))]);
    }

    #[test]
    fn provider_state_and_markup_calls_are_kept() {
        let mut assembler = CallAssembler::default();
        assembler.apply(
            serde_json::from_value(
                json!({"index":0,"id":"g1","function":{"name":"f","arguments":"{}"},
                "extra_content":{"google":{"thought_signature":"SIG"}}}),
            )
            .unwrap(),
        );
        assert!(assembler.add_markup("{\"name\": \"g\", \"arguments\": {\"q\": 1}}"));
        assert!(!assembler.add_markup("not json"));
        let calls = assembler.finish();
        assert_eq!(
            calls[0].provider_state,
            Some(json!({"google":{"thought_signature":"SIG"}}))
        );
        assert_eq!(
            (calls[1].name.as_str(), &calls[1].arguments),
            ("g", &json!({"q":1}))
        );
    }
}
