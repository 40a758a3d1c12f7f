//! Approvals: the owner decides, before it runs, whether a command the allow list does not
//! cover may run.
//!
//! Beside core, as accounting is: the agent opens each turn's gate through core's
//! [`ApprovalGates`](crate::core::ports::gates::ApprovalGates) port, and the gateway (the
//! composition root) owns the registry and hands [`TurnGates`] in; core never names this
//! module.
//!
//! [`Approvals`] is the daemon's one registry of open requests. A turn's tool opens a request
//! through its [`TurnApprovals`] gate; the channel the turn came from shows it to the owner
//! ([`crate::core::ports::channel::ReplySink::ask`]); the answer comes back by another way —
//! `yes CODE` from the owner in a room or a mail (the router), an HTTP `POST`, a y/N at the
//! terminal — and resolves the request by its code or id. The waiting tool wakes with the
//! decision, or with a denial when the request expires.
//!
//! Every decision is final and one-time: a request is removed when it is answered or expires,
//! so a code cannot be used twice, and an answer after expiry changes nothing. Open requests are
//! written through an [`ApprovalStore`] each time the list changes; after a restart
//! [`Approvals::recover`] hands back what was open so the owner can be told it was refused.
//!
//! Who may be asked is decided here too: the heartbeat, cron jobs and sub-agents never ask
//! (nobody is watching them; what is not allowed is denied), and after one denial the rest of
//! the turn's requests are denied without asking, so a refused model cannot wear the owner down
//! with variations.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::core::origin::Origin;
pub use crate::core::ports::approvals::Refusal;
use crate::core::ports::approvals::{ApprovalRequest, ApprovalStore, Requester};
use crate::core::ports::clock::Clock;
use crate::core::session::SessionId;

mod gate;

pub use gate::{TurnApprovals, TurnGates};

/// How many expired ids are remembered, so a late answer hears "expired" rather than "unknown".
const EXPIRED_KEPT: usize = 256;

/// The letters of a code: no 0/O or 1/I/L to misread.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// Letters in a code.
const CODE_LEN: usize = 6;

/// Whether commands that need approval ask (`tools.shell.approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalMode {
    /// Ask the owner.
    #[default]
    Ask,
    /// Nothing asks; every command runs (inside the sandbox).
    Off,
}

/// The owner's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Run it, once.
    Approve,
    /// Do not run it.
    Deny,
}

/// An answer that resolved nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// No request has that id or code (never existed, or already answered).
    #[error("no approval is waiting under that id or code")]
    Unknown,
    /// The request expired before the answer came.
    #[error("the approval expired before the answer came")]
    Expired,
    /// The answer came from someone who is not the owner.
    #[error("only the owner can answer an approval")]
    NotOwner,
    /// The request was answered already (a second click, a retried request): the first
    /// answer stands.
    #[error("the approval was already answered: {}", match .0 {
        Decision::Approve => "approved",
        Decision::Deny => "denied",
    })]
    AlreadyDecided(Decision),
}

/// One open request and the tool waiting for it.
struct Open {
    request: ApprovalRequest,
    answer: oneshot::Sender<Decision>,
}

#[derive(Default)]
struct Book {
    /// Where open requests are kept across restarts (the gateway's file).
    store: Option<Arc<dyn ApprovalStore>>,
    open: HashMap<String, Open>,
    /// Ids that expired or were recovered after a restart, newest last.
    expired: VecDeque<String>,
    /// Ids answered since start and their answers, newest last, so a second answer is told
    /// the first stands instead of "no such request".
    decided: VecDeque<(String, Decision)>,
    /// Set once the daemon stops: every request is refused and no new one opens.
    stopping: bool,
}

/// The daemon's open approval requests.
pub struct Approvals {
    clock: Arc<dyn Clock>,
    /// A std mutex: held for map operations and the store's small write, never across an
    /// await.
    book: Mutex<Book>,
}

impl Approvals {
    /// A registry keeping nothing across restarts until [`Self::recover`] gives it a store.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            book: Mutex::default(),
        }
    }

    /// Keeps open requests in `store` from now on, and returns the requests a previous run
    /// left there, now expired: the store is emptied and their ids answer "expired". The
    /// caller tells the owner. The gateway calls this before any turn runs; the terminal's
    /// prompt needs no store (its own process is the one waiting).
    pub fn recover(&self, store: Arc<dyn ApprovalStore>) -> Vec<ApprovalRequest> {
        let left = match store.load() {
            Ok(left) => left,
            Err(error) => {
                tracing::error!(error = %error, "Pending approvals could not be read; none will run.");
                Vec::new()
            }
        };
        let mut book = self.lock();
        book.store = Some(store);
        for request in &left {
            remember_expired(&mut book, &request.id);
        }
        self.save(&book);
        left
    }

    /// Refuses every open request and every one asked from now on, because the daemon is
    /// stopping: each waiting turn ends with a refusal that says so, which it delivers to its
    /// asker while the gateway drains, instead of being cut off by the shutdown with the
    /// request left open. Returns how many were waiting.
    pub fn refuse_all(&self) -> usize {
        let mut book = self.lock();
        book.stopping = true;
        let ids: Vec<String> = book.open.keys().cloned().collect();
        for id in &ids {
            self.close(&mut book, id, None);
        }
        ids.len()
    }

    /// Whether the daemon is stopping (see [`Self::refuse_all`]).
    pub fn is_stopping(&self) -> bool {
        self.lock().stopping
    }

    /// The requests waiting now (for `/status`).
    pub fn open(&self) -> Vec<ApprovalRequest> {
        let book = self.lock();
        let mut open: Vec<ApprovalRequest> = book
            .open
            .values()
            .map(|open| open.request.clone())
            .collect();
        open.sort_by_key(|request| request.expires_at);
        open
    }

    /// Opens a request; the receiver yields the owner's decision (closed when it expires).
    pub(super) fn request(
        &self,
        session: &SessionId,
        tool: &str,
        command: &str,
        reason: &str,
        timeout: Duration,
        requester: Option<Requester>,
    ) -> (ApprovalRequest, oneshot::Receiver<Decision>) {
        let expires_at = self.clock.now().to_utc()
            + chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX);
        let (answer, decision) = oneshot::channel();
        let mut book = self.lock();
        let request = ApprovalRequest {
            id: unique(&book, || random_text(b"0123456789abcdef", 16)),
            code: unique(&book, || random_text(CODE_ALPHABET, CODE_LEN)),
            session: session.clone(),
            tool: tool.to_owned(),
            command: command.to_owned(),
            reason: reason.to_owned(),
            expires_at,
            requester,
        };
        book.open.insert(
            request.id.clone(),
            Open {
                request: request.clone(),
                answer,
            },
        );
        self.save(&book);
        (request, decision)
    }

    /// Resolves the request `id` of `session` (the HTTP API, the terminal).
    pub fn resolve_id(
        &self,
        session: &SessionId,
        id: &str,
        decision: Decision,
    ) -> Result<ApprovalRequest, ResolveError> {
        let mut book = self.lock();
        match book.open.get(id) {
            Some(open) if open.request.session == *session => {}
            Some(_) => return Err(ResolveError::Unknown),
            None if book.expired.iter().any(|expired| expired == id) => {
                return Err(ResolveError::Expired);
            }
            None => {
                return Err(book
                    .decided
                    .iter()
                    .find(|(decided, _)| decided == id)
                    .map_or(ResolveError::Unknown, |(_, decision)| {
                        ResolveError::AlreadyDecided(*decision)
                    }));
            }
        }
        self.close(&mut book, id, Some(decision))
            .ok_or(ResolveError::Unknown)
    }

    /// Resolves the request with `code`, answered by `origin` in `session` (Matrix, email):
    /// a code counts only in the conversation it was asked in, and only from a sender the
    /// channel vouched for as the owner.
    pub fn resolve_code(
        &self,
        session: &SessionId,
        origin: &Origin,
        code: &str,
        decision: Decision,
    ) -> Result<ApprovalRequest, ResolveError> {
        let mut book = self.lock();
        let id = book
            .open
            .values()
            .find(|open| {
                open.request.session == *session && open.request.code.eq_ignore_ascii_case(code)
            })
            .map(|open| open.request.id.clone())
            .ok_or(ResolveError::Unknown)?;
        if !origin.is_owner() {
            return Err(ResolveError::NotOwner);
        }
        self.close(&mut book, &id, Some(decision))
            .ok_or(ResolveError::Unknown)
    }

    /// Whether `code` names an open request of `session` (so a message there carrying it is
    /// an answer; the same words in another conversation are an ordinary message).
    pub fn is_open_code(&self, session: &SessionId, code: &str) -> bool {
        self.lock().open.values().any(|open| {
            open.request.session == *session && open.request.code.eq_ignore_ascii_case(code)
        })
    }

    /// Removes `id`, sending `decision` to its waiter (`None`: expired).
    fn close(
        &self,
        book: &mut Book,
        id: &str,
        decision: Option<Decision>,
    ) -> Option<ApprovalRequest> {
        let open = book.open.remove(id)?;
        match decision {
            Some(decision) => {
                let _ = open.answer.send(decision);
                if book.decided.len() == EXPIRED_KEPT {
                    book.decided.pop_front();
                }
                book.decided.push_back((id.to_owned(), decision));
            }
            None => remember_expired(book, id),
        }
        self.save(book);
        Some(open.request)
    }

    /// Expires `id` if it is still open.
    pub(super) fn expire(&self, id: &str) {
        let mut book = self.lock();
        self.close(&mut book, id, None);
    }

    fn save(&self, book: &Book) {
        let Some(store) = &book.store else { return };
        let open: Vec<ApprovalRequest> = book
            .open
            .values()
            .map(|open| open.request.clone())
            .collect();
        if let Err(error) = store.save(&open) {
            // Not fatal: an unsaved request still expires in this run; only a restart's notice
            // to the owner could be lost.
            tracing::error!(error = %error, "Pending approvals could not be saved.");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn remember_expired(book: &mut Book, id: &str) {
    if book.expired.len() == EXPIRED_KEPT {
        book.expired.pop_front();
    }
    book.expired.push_back(id.to_owned());
}

/// A fresh value from `make` not used by an open request's id or code.
fn unique(book: &Book, make: impl Fn() -> String) -> String {
    loop {
        let candidate = make();
        let taken = book
            .open
            .values()
            .any(|open| open.request.id == candidate || open.request.code == candidate);
        if !taken {
            return candidate;
        }
    }
}

/// `len` letters of `alphabet`, from the operating system's random source: a code is what
/// binds an answer to one request, so it must not be guessable from earlier ones.
fn random_text(alphabet: &[u8], len: usize) -> String {
    let mut bytes = vec![0u8; len];
    if getrandom::fill(&mut bytes).is_err() {
        // The OS source is always there on Linux; stay correct without it.
        bytes.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    bytes
        .iter()
        .map(|b| char::from(alphabet[usize::from(*b) % alphabet.len()]))
        .collect()
}

/// Reads an answer to an approval from a message: its first line that is not quoted (a mail
/// reply quotes the question below) must be `yes CODE` or `no CODE`, in any case. A mail's
/// text starts with its `Subject:` line, which is passed over.
pub fn parse_answer(text: &str) -> Option<(Decision, String)> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('>'));
    let mut line = lines.next()?;
    if line.starts_with("Subject: ") {
        line = lines.next()?;
    }
    let mut words = line.split_whitespace();
    let decision = match words.next()?.to_ascii_lowercase().as_str() {
        "yes" | "approve" => Decision::Approve,
        "no" | "deny" => Decision::Deny,
        _ => return None,
    };
    let code = words.next()?.trim_end_matches(['.', '!']);
    let valid = code.len() == CODE_LEN
        && code
            .bytes()
            .all(|b| CODE_ALPHABET.contains(&b.to_ascii_uppercase()));
    (valid && words.next().is_none()).then(|| (decision, code.to_ascii_uppercase()))
}

/// How approvals behave (`tools.shell.approval`, `approval_timeout_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalSettings {
    /// Ask or not.
    pub mode: ApprovalMode,
    /// How long a request waits before it counts as denied.
    pub timeout: Duration,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            mode: ApprovalMode::Ask,
            timeout: Duration::from_secs(600),
        }
    }
}

#[cfg(test)]
mod tests;
