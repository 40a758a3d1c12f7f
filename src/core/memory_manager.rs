//! The memory manager: the prompt layout of a turn and consolidation with the cursor.
//!
//! A turn's prompt is exactly: the base prompt, the skills, global memory (MEMORY.md as this
//! session last saw it), this session's summary, the consolidation warning when due, then
//! `history[cursor..]` (which ends with the new user message). Nothing older than the cursor is
//! read from disk, so building a prompt costs time proportional to the unconsolidated tail,
//! however long the session is. A turn someone besides the owner takes part in
//! ([`Audience::Shared`]) gets neither MEMORY.md nor USER.md (left out by the prompt source),
//! nor the warning, which points at `memory_write`.
//!
//! # Ordered for the providers' prompt caches
//! Providers bill a request's longest prefix they saw recently at a fraction of the price, so
//! the prompt runs from what never changes to what changes every turn: the tools (first in
//! every request), the base prompt and the skills, then the memory and the summary (which
//! change at a consolidation), then the history. A `memory_write` must not rewrite that prefix
//! on the next turn, or every turn after a memory change pays full price for the whole prompt:
//! so the memory the system prompt shows is a **snapshot** taken when the session first needed
//! it and renewed at its consolidations ([`SessionView`]). What changes between two
//! consolidations is told as a note pinned to the user message that was newest when it changed
//! (MEMORY.md's new text; the consolidation warning when it falls due): every later request
//! carries the same note on the same message, so the prefix stays what the provider cached.
//! Notes are part of the requests only, never of the history.
//!
//! Consolidation summarizes `history[cursor .. len - keep_recent]` (cut at a clean point),
//! appends the summary to summary.md, compresses the summary when it passes the word limit, and
//! commits summary then cursor. Callers hold the session's mutex throughout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::core::audience::Audience;
use crate::core::consolidation;
use crate::core::message::{Message, Role};
use crate::core::ports::llm::{ContextBudget, LlmClient};
use crate::core::ports::prompt::{FALLBACK_BASE_PROMPT, PromptSource};
use crate::core::ports::store::{HistoryStore, MemoryStore, StoreError, Tail};
use crate::core::session::SessionId;
use crate::core::untrusted;
use crate::core::window;

/// The note pinned to the newest message of a request shortly before consolidation (not put in
/// the system prompt, whose cached prefix it would break).
pub const CONSOLIDATION_WARNING: &str = "[System: older messages of this conversation will soon \
be condensed into a summary. If anything in them must be remembered exactly, save it with \
memory_write now.]";

/// Tunables of the memory system (from `agents.*` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySettings {
    /// Consolidate when more than this many messages are unconsolidated.
    pub consolidation_threshold: usize,
    /// Messages kept verbatim after a consolidation (0 < keep_recent < threshold).
    pub keep_recent: usize,
    /// A summary longer than this many words is compressed.
    pub summary_word_limit: usize,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            consolidation_threshold: 100,
            keep_recent: 20,
            summary_word_limit: 600,
        }
    }
}

/// Why consolidation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// More than `consolidation_threshold` messages are unconsolidated.
    Threshold,
    /// The prompt would not fit the model's context budget.
    TokenBudget,
    /// A person asked for it (`/compact`).
    Asked,
}

/// What a consolidation attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consolidation {
    /// Nothing was due.
    NotDue,
    /// Messages were summarized and the cursor advanced.
    Done {
        /// How many messages the cursor moved over.
        messages: usize,
        /// The new cursor (`last_consolidated`).
        cursor: u64,
        /// Whether the summary was compressed (meta-consolidation).
        compressed: bool,
    },
    /// The summary call failed or returned nothing: summary and cursor are unchanged.
    Failed,
    /// No LLM is configured for consolidation.
    NoLlm,
}

/// The most sessions whose view is kept; past it the map is emptied, which costs each session
/// one cache miss, never a wrong prompt.
const MAX_VIEWS: usize = 1024;

/// What one session's prompts show between two of its consolidations (see the module docs).
#[derive(Debug, Clone)]
struct SessionView {
    /// MEMORY.md as the system prompt shows it; equal texts share one allocation.
    memory: Arc<str>,
    /// MEMORY.md as the session was last told it (the snapshot, or the newest note's text).
    told: Arc<str>,
    /// Notes, each pinned to the user message (by where its history line ends) it rides with.
    notes: Vec<(u64, String)>,
    /// Whether the consolidation warning is among the notes.
    warned: bool,
}

/// Builds prompts and consolidates session histories.
pub struct MemoryManager {
    history: Arc<dyn HistoryStore>,
    memory: Arc<dyn MemoryStore>,
    prompt: Arc<dyn PromptSource>,
    llm: Option<Arc<dyn LlmClient>>,
    settings: MemorySettings,
    /// Per session, what its prompts show (see the module docs).
    views: Mutex<HashMap<SessionId, SessionView>>,
}

impl MemoryManager {
    /// A manager over the given stores; `llm` is the consolidation client (None disables it).
    pub fn new(
        history: Arc<dyn HistoryStore>,
        memory: Arc<dyn MemoryStore>,
        prompt: Arc<dyn PromptSource>,
        llm: Option<Arc<dyn LlmClient>>,
        settings: MemorySettings,
    ) -> Self {
        Self {
            history,
            memory,
            prompt,
            llm,
            settings,
            views: Mutex::new(HashMap::new()),
        }
    }

    /// The memory `session`'s system prompt shows and the notes its request carries, for a
    /// turn whose newest user message ends at `newest` in the history, with MEMORY.md now
    /// `current` and the consolidation warning due or not (`warn`). The first call for a
    /// session takes `current` as its snapshot; a change of MEMORY.md, and the warning when it
    /// falls due, become notes pinned to `newest`.
    fn view(
        &self,
        session: &SessionId,
        current: &str,
        newest: Option<u64>,
        warn: bool,
    ) -> (Arc<str>, Vec<(u64, String)>) {
        let mut views = self
            .views
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if !views.contains_key(session) {
            if views.len() >= MAX_VIEWS {
                views.clear();
            }
            // Sessions that last saw the same text share it.
            let memory = views
                .values()
                .find(|view| &*view.memory == current)
                .map(|view| view.memory.clone())
                .unwrap_or_else(|| Arc::from(current));
            let view = SessionView {
                told: memory.clone(),
                memory,
                notes: Vec::new(),
                warned: false,
            };
            views.insert(session.clone(), view);
        }
        let Some(view) = views.get_mut(session) else {
            return (Arc::from(current), Vec::new());
        };
        if let Some(newest) = newest {
            if &*view.told != current {
                let text = if current.trim().is_empty() {
                    "(empty)"
                } else {
                    current.trim_end()
                };
                view.notes.push((
                    newest,
                    format!(
                        "[System: MEMORY.md changed since \"Your Memory\" above was taken; it \
                         now reads:]\n{text}"
                    ),
                ));
                view.told = Arc::from(current);
            }
            if warn && !view.warned {
                view.notes.push((newest, CONSOLIDATION_WARNING.to_owned()));
                view.warned = true;
            }
        }
        (view.memory.clone(), view.notes.clone())
    }

    /// Forgets `session`'s view: its next prompt shows MEMORY.md as it is then, and no notes.
    fn renew_view(&self, session: &SessionId) {
        self.views
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .remove(session);
    }

    /// The settings in force.
    pub fn settings(&self) -> MemorySettings {
        self.settings
    }

    /// The history store (for appending a turn's messages).
    pub fn history(&self) -> &Arc<dyn HistoryStore> {
        &self.history
    }

    /// The global memory store (for `memory_write`).
    pub fn memory(&self) -> &Arc<dyn MemoryStore> {
        &self.memory
    }

    /// Loads what a turn needs from history: cursor, summary and the unconsolidated tail.
    pub async fn load_tail(&self, session: &SessionId) -> Result<Tail, StoreError> {
        self.history.load_tail(session).await
    }

    /// The system prompt for a turn of `audience` whose unconsolidated history is `tail`,
    /// showing `memory` (the session's snapshot); ordered from what never changes to what
    /// changes most (see the module docs). The consolidation warning is a note on the history
    /// (see [`MemoryManager::prompt`]), not part of it.
    pub async fn system_prompt(&self, tail: &Tail, audience: Audience, memory: &str) -> String {
        let sections = self.prompt.sections(audience).await;
        let mut system = if sections.base.trim().is_empty() {
            FALLBACK_BASE_PROMPT.to_owned()
        } else {
            sections.base
        };
        system.push_str("\n\n");
        system.push_str(untrusted::SYSTEM_RULE);
        if !sections.skills.trim().is_empty() {
            system.push_str("\n\n");
            system.push_str(&sections.skills);
        }
        for body in sections
            .always_skills
            .iter()
            .filter(|b| !b.trim().is_empty())
        {
            system.push_str("\n\n");
            system.push_str(body.trim_end());
        }
        if audience.is_owner() && !memory.trim().is_empty() {
            system.push_str("\n\n## Your Memory\n\n");
            system.push_str(memory.trim_end());
        }
        if !tail.summary.trim().is_empty() {
            system.push_str("\n\n## Conversation Summary\n\n");
            system.push_str(tail.summary.trim_end());
        }
        system
    }

    /// The full prompt of a turn of `audience`: system message, then the clean window of
    /// `history[cursor..]`.
    ///
    /// When a context budget is given and the prompt would exceed it even after consolidation,
    /// the oldest window messages are left out of this call (at clean points), never deleted.
    pub async fn prompt(
        &self,
        session: &SessionId,
        tail: &Tail,
        budget: Option<ContextBudget>,
        now: chrono::DateTime<chrono::FixedOffset>,
        audience: Audience,
    ) -> Result<Vec<Arc<Message>>, StoreError> {
        let newest = tail
            .messages
            .iter()
            .rev()
            .find(|stored| stored.message.role == Role::User)
            .map(|stored| stored.end_offset);
        let (memory, notes) = match audience {
            Audience::Owner => {
                let current = self.memory.load().await?;
                self.view(session, &current, newest, self.warning_due(tail))
            }
            Audience::Shared => (Arc::from(""), Vec::new()),
        };
        let system = Message::new(
            Role::System,
            self.system_prompt(tail, audience, &memory).await,
            now,
        );
        let mut window = window::sanitize(tail.messages.iter().map(|s| &s.message));
        pin_notes(&mut window, tail, &notes);
        if let Some(budget) = budget {
            let limit = budget.prompt_tokens() as usize;
            let fixed = system.approx_chars() / 4;
            while window.len() > 1
                && fixed + window::approx_tokens(window.iter().map(|m| &**m)) > limit
            {
                let cut = window::clean_cut(&window, 1).max(1);
                window.drain(..cut);
                tracing::warn!(
                    limit,
                    "Prompt exceeds the context budget; left the oldest message out of this call."
                );
            }
        }
        let mut prompt = Vec::with_capacity(window.len() + 1);
        prompt.push(Arc::new(system));
        prompt.extend(window);
        Ok(prompt)
    }

    /// Whether the consolidation warning belongs in the prompt.
    pub fn warning_due(&self, tail: &Tail) -> bool {
        tail.messages.len() + 2 >= self.settings.consolidation_threshold
    }

    /// Whether consolidation is due, and why.
    pub fn due(&self, tail: &Tail, budget: Option<ContextBudget>) -> Option<Trigger> {
        if tail.messages.len() > self.settings.consolidation_threshold {
            Some(Trigger::Threshold)
        } else if self.over_budget(tail, budget) {
            Some(Trigger::TokenBudget)
        } else {
            None
        }
    }

    /// Whether the tail and summary alone would not fit the model's prompt budget (and there is
    /// something beyond `keep_recent` to consolidate).
    pub fn over_budget(&self, tail: &Tail, budget: Option<ContextBudget>) -> bool {
        let Some(budget) = budget else { return false };
        let tokens = window::approx_tokens(tail.messages.iter().map(|s| &*s.message))
            + consolidation::word_count(&tail.summary);
        tokens > budget.prompt_tokens() as usize && tail.messages.len() > self.settings.keep_recent
    }

    /// Consolidates `tail` if due, updating it in place on success. Hold the session's mutex.
    pub async fn consolidate_if_due(
        &self,
        session: &SessionId,
        tail: &mut Tail,
        budget: Option<ContextBudget>,
    ) -> Result<Consolidation, StoreError> {
        match self.due(tail, budget) {
            Some(trigger) => self.consolidate(session, tail, trigger).await,
            None => Ok(Consolidation::NotDue),
        }
    }

    /// Consolidates before a turn, only when the prompt would not fit at all: a summary delays
    /// the reply, which is acceptable only when the call would otherwise fail.
    pub async fn consolidate_if_over_budget(
        &self,
        session: &SessionId,
        tail: &mut Tail,
        budget: Option<ContextBudget>,
    ) -> Result<Consolidation, StoreError> {
        if self.over_budget(tail, budget) {
            self.consolidate(session, tail, Trigger::TokenBudget).await
        } else {
            Ok(Consolidation::NotDue)
        }
    }

    /// Consolidates `tail` now, whatever its size (`/compact`), keeping the newest
    /// `keep_recent` messages as a due consolidation does. Hold the session's mutex.
    pub async fn consolidate_now(
        &self,
        session: &SessionId,
        tail: &mut Tail,
    ) -> Result<Consolidation, StoreError> {
        self.consolidate(session, tail, Trigger::Asked).await
    }

    async fn consolidate(
        &self,
        session: &SessionId,
        tail: &mut Tail,
        trigger: Trigger,
    ) -> Result<Consolidation, StoreError> {
        let Some(llm) = self.llm.as_deref() else {
            return Ok(Consolidation::NoLlm);
        };
        let desired = tail
            .messages
            .len()
            .saturating_sub(self.settings.keep_recent);
        let messages: Vec<&Message> = tail.messages.iter().map(|s| &*s.message).collect();
        let cut = window::clean_cut(&messages, desired);
        if cut == 0 {
            return Ok(Consolidation::NotDue);
        }
        let text = consolidation::transcript(messages[..cut].iter().copied());
        let mut summary = tail.summary.trim_end().to_owned();
        if !text.is_empty() {
            let Some(entry) = consolidation::summarize(llm, session, &text, cut).await else {
                return Ok(Consolidation::Failed);
            };
            if !summary.is_empty() {
                summary.push_str("\n\n");
            }
            summary.push_str(&entry);
        }
        let mut compressed = false;
        if consolidation::word_count(&summary) > self.settings.summary_word_limit
            && let Some(short) = consolidation::compress(llm, session, &summary).await
        {
            summary = short;
            compressed = true;
        }
        let cursor = tail.cursor_after(cut);
        self.history
            .commit_consolidation(session, &summary, cursor)
            .await?;
        tracing::info!(
            session = %session,
            messages = cut,
            cursor = cursor.messages,
            compressed,
            trigger = ?trigger,
            "Consolidated session history."
        );
        tail.messages.drain(..cut);
        tail.cursor = cursor;
        tail.summary = summary;
        // The prefix changes here anyway (summary and history): the memory shown catches up.
        self.renew_view(session);
        tail.consolidated_at = Some(chrono::Utc::now());
        Ok(Consolidation::Done {
            messages: cut,
            cursor: cursor.messages,
            compressed,
        })
    }
}

/// Appends each note to the message of `window` it is pinned to (found through `tail`, where
/// each message's history line ends); a copy for this request, the history keeps the original.
fn pin_notes(window: &mut [Arc<Message>], tail: &Tail, notes: &[(u64, String)]) {
    for (end, text) in notes {
        let Some(stored) = tail.messages.iter().find(|s| s.end_offset == *end) else {
            continue;
        };
        let Some(message) = window.iter_mut().find(|m| Arc::ptr_eq(m, &stored.message)) else {
            continue;
        };
        let mut noted = (**message).clone();
        noted.content.push_str("\n\n");
        noted.content.push_str(text);
        *message = Arc::new(noted);
    }
}
