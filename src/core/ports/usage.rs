//! **API Boundary.** The usage port: what one LLM call cost, and the ledger that keeps it.
//!
//! Every LLM call is tagged with why it was made ([`Purpose`]) and for which session
//! ([`CallTag`]), so the ledger can say where tokens went and the budgets can tell a turn from
//! a heartbeat tick. The ledger is append-only and shared between processes (the gateway and
//! `squidbot agent`), so [`UsageLedger::poll`] hands back what anyone appended since the last
//! poll: that is how a budget spent by one process stops the other.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::core::origin::Origin;
use crate::core::session::SessionId;

/// Why an LLM call was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// A round of a turn a person started.
    Turn,
    /// Summarizing old messages into the session summary.
    Consolidation,
    /// Compressing an overlong summary (meta-consolidation).
    Compression,
    /// A round of a heartbeat tick.
    Heartbeat,
    /// A round of a cron job's run.
    Cron,
    /// A round of a sub-agent's job.
    Spawn,
    /// `squidbot doctor`'s ping.
    Doctor,
    /// A voice note turned into text (billed by the minute of audio, not by tokens).
    Transcription,
}

impl Purpose {
    /// Every purpose, in the order tables list them.
    pub const ALL: [Purpose; 8] = [
        Self::Turn,
        Self::Consolidation,
        Self::Compression,
        Self::Heartbeat,
        Self::Cron,
        Self::Spawn,
        Self::Doctor,
        Self::Transcription,
    ];

    /// The purpose of a turn's rounds, by who started the turn.
    pub fn of(origin: &Origin) -> Self {
        match origin {
            Origin::Person { .. } => Self::Turn,
            Origin::Heartbeat => Self::Heartbeat,
            Origin::Cron { .. } => Self::Cron,
            Origin::SubAgent { .. } => Self::Spawn,
        }
    }

    /// The name used in the ledger, metrics and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Turn => "turn",
            Self::Consolidation => "consolidation",
            Self::Compression => "compression",
            Self::Heartbeat => "heartbeat",
            Self::Cron => "cron",
            Self::Spawn => "spawn",
            Self::Doctor => "doctor",
            Self::Transcription => "transcription",
        }
    }

    /// Whether nobody waits for this call's answer: a heartbeat tick or a cron run, which a
    /// budget skips quietly (the owner is told once a day) instead of answering.
    pub fn is_scheduled(self) -> bool {
        matches!(self, Self::Heartbeat | Self::Cron)
    }
}

/// Tokens of one call, as the provider reported them or as estimated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt (input) tokens, cached ones included.
    pub prompt: u64,
    /// Completion (output) tokens, reasoning included.
    pub completion: u64,
    /// Prompt tokens the provider served from its cache (priced lower by most).
    pub cached: u64,
    /// Prompt tokens written to the provider's cache by this call (Anthropic prices them above
    /// fresh input); zero where a provider does not report them.
    #[serde(default)]
    pub cache_written: u64,
}

impl TokenUsage {
    /// Prompt plus completion: what the token budgets count.
    pub fn total(&self) -> u64 {
        self.prompt.saturating_add(self.completion)
    }
}

/// Tokens a turn has spent so far, shared by its rounds (the turn budgets count it).
#[derive(Debug, Default)]
pub struct TurnSpend(AtomicU64);

impl TurnSpend {
    /// Tokens spent so far.
    pub fn tokens(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Adds a call's tokens.
    pub fn add(&self, tokens: u64) {
        self.0.fetch_add(tokens, Ordering::Relaxed);
    }
}

/// What an LLM call is for: carried on the request so that whoever meters it knows.
#[derive(Clone, Copy, Debug)]
pub struct CallTag<'a> {
    /// Why the call is made.
    pub purpose: Purpose,
    /// The session it serves, if any.
    pub session: Option<&'a SessionId>,
    /// The spend of the turn it belongs to, if it is a round of a turn.
    pub turn: Option<&'a TurnSpend>,
}

impl CallTag<'_> {
    /// A call for `purpose` outside any session or turn.
    pub const fn new(purpose: Purpose) -> Self {
        CallTag {
            purpose,
            session: None,
            turn: None,
        }
    }
}

/// Today's spend in one line for the chat `/status`, and the chat `/usage` (the usage meter,
/// outside core).
#[async_trait]
pub trait SpendReport: Send + Sync {
    /// Today's and this month's tokens and cost, and a reached daily budget.
    async fn status_line(&self) -> String;

    /// The chat `/usage`: `session`'s and today's tokens (prompt, completion, cached), cache
    /// hit rate and cost.
    async fn usage_lines(&self, session: &SessionId) -> String;
}
