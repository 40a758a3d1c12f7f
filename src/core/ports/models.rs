//! **API Boundary.** The model catalog port: the configured models and pools by name, for
//! `/model`, which lists them and switches a conversation to one.
//!
//! The composition root implements it over the clients it builds, so a switch looks a client
//! up by name (built once, then shared by every conversation that picks it) instead of
//! rebuilding one, and the core never reads the configuration.

use std::sync::Arc;

use crate::core::ports::llm::LlmClient;

/// Whether a catalog entry is a pool (models tried in order) or one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// A configured pool (`llm.pools.<name>`).
    Pool,
    /// A configured model (`llm.models.<name>`), asked alone.
    Model,
}

/// One name `/model` accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// The configured name.
    pub name: String,
    /// Pool or model.
    pub kind: ModelKind,
    /// What it is: a pool's models, a model's provider id.
    pub detail: String,
}

/// The models and pools a conversation may switch to.
pub trait ModelCatalog: Send + Sync {
    /// Every entry, pools first, each group by name.
    fn entries(&self) -> Vec<CatalogEntry>;

    /// The name of the pool turns use unless a conversation picked another.
    fn default_name(&self) -> &str;

    /// The client of `name` (a pool's name first, then a model's), built on first use;
    /// `None` for a name the configuration does not have or that cannot be built.
    fn client(&self, name: &str) -> Option<Arc<dyn LlmClient>>;
}
