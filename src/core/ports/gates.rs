//! **API Boundary.** [`ApprovalGates`]: how the agent opens each turn's approval gate without
//! knowing how questions reach the owner or come back.
//!
//! The gateway keeps the registry of open requests (`crate::approval`, beside core, as
//! accounting is); the composition root builds it and hands the agent this port, so core asks
//! only "may this effect run, or ask the owner" ([`ApprovalGate::permit`]) and never names the
//! registry. A file of its own because it joins two ports: the gate
//! ([`crate::core::ports::approvals`]) and the reply sink the question is shown through
//! ([`crate::core::ports::channel`]), which itself names the approval request.

use std::sync::Arc;

use crate::core::audience::Readers;
use crate::core::origin::Origin;
use crate::core::ports::approvals::ApprovalGate;
use crate::core::ports::channel::ReplySink;
use crate::core::session::SessionId;

/// Opens one turn's [`ApprovalGate`]; the gateway's is `crate::approval::TurnGates`. An agent
/// without one gives its tools no gate, and a tool that needs approval is then refused.
pub trait ApprovalGates: Send + Sync {
    /// The gate of a turn of `session`, started by `origin` and read by `readers` (who may see
    /// a question asked there), whose questions are shown through `sink`.
    fn open(
        &self,
        session: SessionId,
        origin: Origin,
        readers: Readers,
        sink: Arc<dyn ReplySink>,
    ) -> Arc<dyn ApprovalGate>;
}
