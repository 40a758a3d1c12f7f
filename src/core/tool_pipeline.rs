//! [`CallPipeline`]: the one ordered way every tool call of a turn takes.
//!
//! A model's answer first passes **response redaction** ([`CallPipeline::redact`]: a secret
//! the model repeats in its text, its reasoning or a call's arguments is neither kept in the
//! history nor used, so the call runs with `[redacted]`). Each call of a round then passes, in
//! this order: the **loop breaker** (a call repeated too often is refused before anything
//! runs, and one repeated [`loop_breaker::STOP_AT`] times stops the round, [`Round::Stop`]),
//! **who may call it** (a tool whose effects last needs the owner's authority, the owner's
//! private tools need an owner-only audience), **parse** (the arguments against the tool's own
//! type), **approval** (the tool asks the turn's gate when what it is about to do needs the
//! owner: the shell), **run** (panics become error results), **redact** (known secrets out of
//! the result), **cap** (at most [`CallPipeline::result_cap`] bytes, so one result cannot
//! crowd out the conversation), and **fence** (text from outside marked as untrusted data,
//! after the cap so the cap never cuts the closing marker). Who may call, parse, approval, run
//! and redact live in [`ToolSet::call`] and the tools; this type puts them in one sequence with
//! the others, so no path skips one and the agent loop relays no stage.

use std::borrow::Cow;

use futures_util::future::join_all;

use crate::core::loop_breaker::{self, LoopBreaker, Verdict};
use crate::core::message::ToolCall;
use crate::core::ports::llm::ChatResponse;
use crate::core::ports::tool::{ToolContext, ToolOutput, ToolSpec};
use crate::core::redact::Redactor;
use crate::core::tool_registry::ToolSet;
use crate::core::untrusted;

/// The tool calls of one turn.
pub struct CallPipeline<'a> {
    tools: ToolSet<'a>,
    context: ToolContext,
    result_cap: usize,
    redactor: &'a Redactor,
    breaker: LoopBreaker,
}

/// What one round of calls came to.
#[derive(Debug)]
pub enum Round {
    /// Every call went through; their results, in the calls' order.
    Ran(Vec<CallResult>),
    /// The loop breaker stopped the turn: `tool` was called with the same arguments
    /// [`loop_breaker::STOP_AT`] times. No call of the round ran.
    Stop {
        /// The repeated tool.
        tool: String,
    },
}

impl<'a> CallPipeline<'a> {
    /// Calls through `tools` with `context`, results capped at `result_cap` bytes, secrets
    /// known to `redactor` kept out of what the model sent.
    pub fn new(
        tools: ToolSet<'a>,
        context: ToolContext,
        result_cap: usize,
        redactor: &'a Redactor,
    ) -> Self {
        Self {
            tools,
            context,
            result_cap,
            redactor,
            breaker: LoopBreaker::default(),
        }
    }

    /// The cap on one result, in bytes.
    pub fn result_cap(&self) -> usize {
        self.result_cap
    }

    /// The definitions offered to the model.
    pub fn specs(&self) -> Vec<&ToolSpec> {
        self.tools.specs()
    }

    /// The context the calls run with.
    pub fn context(&self) -> &ToolContext {
        &self.context
    }

    /// Response redaction: known secrets out of the model's text, reasoning and calls'
    /// arguments, before any of them is stored, shown or run.
    pub fn redact(&self, response: &mut ChatResponse) {
        if let Cow::Owned(redacted) = self.redactor.redact(&response.text) {
            response.text = redacted;
        }
        if let Some(reasoning) = &mut response.reasoning_content
            && let Cow::Owned(redacted) = self.redactor.redact(reasoning)
        {
            *reasoning = redacted;
        }
        for call in &mut response.tool_calls {
            self.redactor.redact_json(&mut call.arguments);
        }
    }

    /// Takes one round's `calls` through the loop breaker and, unless it stops the turn,
    /// every call through [`Self::run`] at once.
    pub async fn round(&mut self, calls: &[ToolCall]) -> Round {
        let verdicts: Vec<Verdict> = calls
            .iter()
            .map(|call| self.breaker.check(&call.name, &call.arguments))
            .collect();
        if let Some(call) = calls
            .iter()
            .zip(&verdicts)
            .find_map(|(call, verdict)| (*verdict == Verdict::Stop).then_some(call))
        {
            tracing::warn!(session = %self.context.session, tool = %call.name, "Identical tool call repeated; turn ended.");
            return Round::Stop {
                tool: call.name.clone(),
            };
        }
        let this = &*self;
        Round::Ran(
            join_all(
                calls
                    .iter()
                    .zip(verdicts)
                    .map(|(call, verdict)| this.run(call, verdict)),
            )
            .await,
        )
    }

    /// Takes `call` through every stage after the loop breaker; `verdict` is the breaker's on
    /// it. Returns what the model reads as the call's result.
    pub async fn run(&self, call: &ToolCall, verdict: Verdict) -> CallResult {
        let output = match verdict {
            Verdict::Refuse => ToolOutput::error(loop_breaker::refusal(&call.name)),
            _ => {
                self.tools
                    .call(&call.name, call.arguments.clone(), &self.context)
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
