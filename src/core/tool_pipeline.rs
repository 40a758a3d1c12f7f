//! [`CallPipeline`]: the one ordered way every tool call of a turn takes.
//!
//! A call passes, in this order: the **loop breaker** (a call repeated too often is refused
//! before anything runs), **who may call it** (a tool whose effects last needs the owner's
//! authority, the owner's private tools need an owner-only audience), **parse** (the arguments
//! against the tool's own type), **approval** (the tool asks the turn's gate when what it is
//! about to do needs the owner: the shell), **run** (panics become error results),
//! **redact** (known secrets out of the result), **cap** (at most
//! [`CallPipeline::result_cap`] bytes, so one result cannot crowd out the conversation), and
//! **fence** (text from outside marked as untrusted data, after the cap so the cap never cuts
//! the closing marker). Stages two to six live in [`ToolSet::call`] and the tools; this type
//! puts them in one sequence with the first and the last two, so no path skips one.

use crate::core::loop_breaker::{self, Verdict};
use crate::core::message::ToolCall;
use crate::core::ports::tool::{ToolContext, ToolOutput};
use crate::core::tool_registry::ToolSet;
use crate::core::untrusted;

/// The tool calls of one turn.
pub struct CallPipeline<'a> {
    tools: &'a ToolSet<'a>,
    context: &'a ToolContext,
    result_cap: usize,
}

impl<'a> CallPipeline<'a> {
    /// Calls through `tools` with `context`, results capped at `result_cap` bytes.
    pub fn new(tools: &'a ToolSet<'a>, context: &'a ToolContext, result_cap: usize) -> Self {
        Self {
            tools,
            context,
            result_cap,
        }
    }

    /// The cap on one result, in bytes.
    pub fn result_cap(&self) -> usize {
        self.result_cap
    }

    /// Takes `call` through every stage; `verdict` is the loop breaker's on it. Returns what
    /// the model reads as the call's result.
    pub async fn run(&self, call: &ToolCall, verdict: Verdict) -> CallResult {
        let output = match verdict {
            Verdict::Refuse => ToolOutput::error(loop_breaker::refusal(&call.name)),
            _ => {
                self.tools
                    .call(&call.name, call.arguments.clone(), self.context)
                    .await
            }
        };
        let mut content = cap(output.content, self.result_cap);
        if output.untrusted {
            content = untrusted::fence(&call.name, &content);
        }
        CallResult {
            content,
            is_error: output.is_error,
            images: output.images,
        }
    }
}

/// What one call gave the model, after every stage.
#[derive(Debug)]
pub struct CallResult {
    /// The text, capped and fenced.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// The images the result shows, by path (see [`ToolOutput::images`]).
    pub images: Vec<String>,
}

/// Cuts `text` to at most `limit` bytes (on a char boundary), saying how much was cut.
pub fn cap(text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... {} more bytes cut ...]",
        &text[..end],
        text.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_respects_char_boundaries() {
        assert_eq!(cap("short".into(), 10), "short");
        let capped = cap("ééééé".into(), 3);
        assert!(capped.starts_with('é'));
        assert!(capped.contains("8 more bytes"));
    }
}
