//! The shared tool registry and the per-turn tool set built from it.
//!
//! The registry is built once and never mutated afterwards, so turns running in parallel can
//! share it without locks. Per-turn tools (`memory_write`, `cron_add`, bound to the turn's
//! session) are layered on top in a [`ToolSet`] that lives for one turn only: when the turn
//! ends they are gone, and the registry never saw them. Which tools a turn is offered, and
//! which it may run, is decided from each tool's declared effects ([`Tool::effects`],
//! [`Effects::refusal`]): in a turn someone besides the owner takes part in, the tools that
//! reach the owner's private memory (`memory_write`) are neither offered nor run; in a turn
//! someone besides the owner asked for, neither are those that act with the owner's
//! authority (cron, spawn, MCP).
//!
//! Every call of a turn passes through [`ToolSet::call`], so that is where known secrets are
//! redacted from what tools return, errors and panics included: the registry carries the
//! [`Redactor`] built at assembly, and registries derived from it (the sub-agents') keep it.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::Value;

use crate::core::audience::Audience;
use crate::core::authority::Authority;
#[cfg(doc)]
use crate::core::authority::Effects;
use crate::core::ports::tool::{Tool, ToolContext, ToolOutput, ToolSpec};
use crate::core::redact::Redactor;

/// A tool name was registered twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool {0:?} is registered twice")]
pub struct DuplicateTool(pub String);

/// The tools every turn may use.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    index: HashMap<String, usize>,
    redactor: Arc<Redactor>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.spec().name()))
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry whose tools' output is redacted by `redactor`.
    pub fn with_redactor(redactor: Arc<Redactor>) -> Self {
        Self {
            redactor,
            ..Self::default()
        }
    }

    /// An empty registry with this one's redactor (for a registry filtered from this one).
    pub fn emptied(&self) -> Self {
        Self::with_redactor(self.redactor.clone())
    }

    /// The redactor applied to every result.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// Adds a tool; names must be unique.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), DuplicateTool> {
        let name = tool.spec().name().to_owned();
        if self.index.contains_key(&name) {
            return Err(DuplicateTool(name));
        }
        self.index.insert(name, self.tools.len());
        self.tools.push(tool);
        Ok(())
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// The names of all registered tools, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.spec().name()).collect()
    }

    /// Number of registered tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The tools of one turn: the shared registry plus the turn's extra tools.
///
/// An extra tool shadows a registry tool of the same name, and only one definition per name is
/// offered to the model.
pub struct ToolSet<'a> {
    registry: &'a ToolRegistry,
    extra: Vec<Arc<dyn Tool>>,
    audience: Audience,
    authority: Authority,
    /// The tools offered to the model, in order (shared handles: nothing is deep-copied).
    offered: Vec<Arc<dyn Tool>>,
}

impl<'a> ToolSet<'a> {
    /// Layers `extra` over `registry` for one turn of `audience`, asked with `authority`.
    pub fn new(
        registry: &'a ToolRegistry,
        extra: Vec<Arc<dyn Tool>>,
        audience: Audience,
        authority: Authority,
    ) -> Self {
        let shadowed = |name: &str| extra.iter().any(|t| t.spec().name() == name);
        let offered = registry
            .tools
            .iter()
            .filter(|t| !shadowed(t.spec().name()))
            .chain(extra.iter())
            .filter(|t| t.effects().refusal(authority, audience).is_none())
            .cloned()
            .collect();
        Self {
            registry,
            extra,
            audience,
            authority,
            offered,
        }
    }

    /// Definitions to send to the model, borrowed from the tools.
    pub fn specs(&self) -> Vec<&ToolSpec> {
        self.offered.iter().map(|t| t.spec()).collect()
    }

    /// Runs a tool by name. Unknown names, errors and panics all become error results; known
    /// secrets in the result are replaced by `[redacted]`.
    pub async fn call(&self, name: &str, arguments: Value, context: &ToolContext) -> ToolOutput {
        let mut output = self.call_unredacted(name, arguments, context).await;
        if let std::borrow::Cow::Owned(redacted) = self.registry.redactor.redact(&output.content) {
            tracing::info!(tool = name, "Secret redacted from a tool result.");
            output.content = redacted;
        }
        output
    }

    async fn call_unredacted(
        &self,
        name: &str,
        arguments: Value,
        context: &ToolContext,
    ) -> ToolOutput {
        let tool = self
            .extra
            .iter()
            .find(|t| t.spec().name() == name)
            .or_else(|| self.registry.get(name));
        let Some(tool) = tool else {
            return ToolOutput::error(format!("Error: unknown tool {name:?}"));
        };
        // The same decision as the offer: a model may name a tool it was not offered.
        if let Some(refused) = tool.effects().refusal(self.authority, self.audience) {
            tracing::warn!(tool = name, session = %context.session, reason = %refused, "Tool call refused by its declared effects.");
            return ToolOutput::error(format!("Error: {name} is not available here: {refused}."));
        }
        match AssertUnwindSafe(tool.call(arguments, context))
            .catch_unwind()
            .await
        {
            Ok(output) => output,
            Err(panic) => {
                let detail = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                let detail = self.registry.redactor.redact(&detail).into_owned();
                tracing::error!(tool = name, panic = %detail, "Tool panicked; returned an error result.");
                ToolOutput::error(format!("Error: tool {name} failed internally: {detail}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::session::SessionId;
    use async_trait::async_trait;
    use serde_json::json;

    /// A tool that answers with its name; `owner_only` as given.
    struct Named(ToolSpec, bool);

    #[async_trait]
    impl Tool for Named {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        fn effects(&self) -> crate::core::authority::Effects {
            use crate::core::authority::{Effect, Effects};
            if self.1 {
                Effects::of(&[Effect::PrivateMemory])
            } else {
                Effects::of(&[Effect::ReadsFiles])
            }
        }

        async fn call(&self, _arguments: Value, _context: &ToolContext) -> ToolOutput {
            ToolOutput::ok(self.0.name())
        }
    }

    fn tool(name: &str, owner_only: bool) -> Arc<dyn Tool> {
        let parameters = json!({"type": "object", "properties": {}});
        Arc::new(Named(
            ToolSpec::new(name, "A tool.", &parameters),
            owner_only,
        ))
    }

    fn context(audience: Audience) -> ToolContext {
        ToolContext::for_test()
            .with_session(SessionId::cli_local())
            .with_audience(audience)
    }

    #[tokio::test]
    async fn owner_only_tools_are_neither_offered_nor_run_in_a_shared_turn() {
        let mut registry = ToolRegistry::new();
        registry.register(tool("read_file", false)).unwrap();
        registry.register(tool("private_note", true)).unwrap();
        let extra = || vec![tool("memory_write", true), tool("cron_add", false)];
        let names = |set: &ToolSet<'_>| -> Vec<String> {
            set.specs().iter().map(|s| s.name().to_owned()).collect()
        };

        let owner = ToolSet::new(&registry, extra(), Audience::Owner, Authority::Owner);
        assert_eq!(
            names(&owner),
            ["read_file", "private_note", "memory_write", "cron_add"]
        );
        let output = owner
            .call("memory_write", json!({}), &context(Audience::Owner))
            .await;
        assert_eq!(output, ToolOutput::ok("memory_write"));

        let shared = ToolSet::new(&registry, extra(), Audience::Shared, Authority::Owner);
        assert_eq!(names(&shared), ["read_file", "cron_add"]);
        for name in ["memory_write", "private_note"] {
            let output = shared
                .call(name, json!({}), &context(Audience::Shared))
                .await;
            assert!(output.is_error, "{name}");
            assert!(output.content.contains("not available here"), "{output:?}");
        }
        let output = shared
            .call("read_file", json!({}), &context(Audience::Shared))
            .await;
        assert_eq!(output, ToolOutput::ok("read_file"));
    }
}
