//! [`EmailChannel`]: the running task. It keeps one IMAP connection, turns new mail into turns
//! of `email:<sender>`, answers through [`EmailReply`], and marks each mail `\Seen` once its
//! answer was sent or queued (so a crash at any step leaves it unseen, and it is answered
//! after the restart: the turn finds its message by the mail's source id and goes on, see
//! [`crate::core::resume`]).
//!
//! The loop: connect and log in (backing off 1 s doubling to 60 s after failures), select
//! INBOX, check UIDVALIDITY (a mailbox met for the first time, or renumbered, starts from its
//! present mail: see [`super::progress`]), then repeatedly scan (unseen mail and mail above the
//! last UID, skipping what the progress file says is done) and wait: IDLE, re-armed every 25
//! minutes (servers may drop an IDLE after 29), or a poll timer where the server has no IDLE.
//! The wait also ends when a submitted mail was answered, so its `\Seen` is set promptly.
//! Shutdown ends every wait, and the session logs out before `run` returns.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_imap::types::UnsolicitedResponse;
use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::{Notify, mpsc};

use super::guard::{Allowlist, RateLimit, loop_check};
use super::imap::{self, Fetched, ImapSession};
use super::intake::{Pending, Turnout};
use super::parse::{self, ParsedMail};
use super::progress::{MessageState, Progress, ProgressSummary};
use super::reply::{META_FROM, META_MESSAGE_ID, META_REFERENCES, META_UID};
use super::routing;
use super::sink::{EmailReply, Mailer};
use super::smtp::SmtpOutbox;
use super::{EmailError, auth};
use crate::channels::attachments::AttachmentStore;
use crate::channels::owner::{Ids, Owner, OwnerIds};
use crate::channels::voice::{Chains, VoiceNotes};
use crate::config::EmailConfig;
use crate::core::audience::Readers;
use crate::core::origin::Origin;
use crate::core::ports::channel::{Channel, ChannelContext, ChannelError, Outbox, ReplySink};
use crate::core::session::SessionId;
use crate::gateway::backoff::Backoff;
use crate::gateway::fault;

/// The channel name and session prefix.
const NAME: &str = "email";
/// How long one IDLE lasts before it is re-issued (RFC 2177: under 29 minutes).
const IDLE_REARM: Duration = Duration::from_secs(25 * 60);

/// How much longer than its cadence a round may take before the channel counts as stalled
/// (a slow server, a reconnect).
const STALL_SLACK: Duration = Duration::from_secs(5 * 60);
/// Reconnect pauses: 1 s doubling to 60 s.
const RECONNECT_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// What `/status` shows of the channel.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EmailStatus {
    /// `connecting`, `connected`, `idle`, `polling`, `backing_off` or `stopped`.
    pub state: &'static str,
    /// Whether the server offers IDLE (known after the first login).
    pub idle_supported: Option<bool>,
    /// The last connection or protocol error.
    pub last_error: Option<String>,
    /// Successful logins since start (more than one means it reconnected).
    pub connects: u64,
    /// Mail submitted to the agent since start.
    pub submitted: u64,
    /// Mail not answered on purpose since start.
    pub ignored: u64,
    /// UIDVALIDITY, last UID and queued replies, from the progress file.
    #[serde(flatten)]
    pub progress: ProgressSummary,
}

/// What the checks of a mail found out (see `EmailChannel::admit`).
struct Admitted {
    mail: ParsedMail,
    /// The sender's address.
    sender: String,
    session: SessionId,
    /// The owner sent it: their address, and the receiving server's authentication pass.
    verified: bool,
    /// It claims the owner's address without that pass.
    unverified: bool,
}

/// How one mail was handled.
enum Handled {
    /// Submitted; its `\Seen` follows once answered.
    Submitted,
    /// Not for the agent: recorded and marked `\Seen` now.
    Ignored(String),
    /// Not handled now (shutting down, or its sender is over the rate limit); it stays
    /// unseen and comes again.
    Deferred,
}

/// The email channel.
pub struct EmailChannel {
    config: EmailConfig,
    mailer: Arc<Mailer>,
    progress: Arc<Progress>,
    attachments: AttachmentStore,
    allowlist: Allowlist,
    // Std mutexes: held for quick in-memory updates only, never across an await.
    rate_limit: Mutex<RateLimit>,
    status: Mutex<EmailStatus>,
    /// UIDs submitted whose turn has not ended: not to be submitted again meanwhile.
    in_flight: Arc<Mutex<HashSet<u32>>>,
    /// UIDs whose turn ended without an answer (cancelled at shutdown, failed to persist):
    /// left unseen for the next start, not retried in a loop by this one.
    unanswered: Arc<Mutex<HashSet<u32>>>,
    /// UIDs of senders over the rate limit, and when they have room again.
    deferred: Mutex<HashMap<u32, Instant>>,
    /// Whose mail is the owner's own instruction; everyone else's is fenced as untrusted data.
    owner: OwnerIds,
    /// Audio attachments transcribed, when `transcription` is configured.
    voice: Option<Arc<VoiceNotes>>,
    /// Per sender, the mail being transcribed that the sender's later mail follows.
    chains: Chains,
}

impl EmailChannel {
    /// The channel for `config` (password resolved), keeping progress under `home` and saving
    /// attachments in `workspace`.
    pub fn new(config: &EmailConfig, home: &Path, workspace: &Path) -> Result<Self, EmailError> {
        let progress = Arc::new(Progress::load(Progress::path_for(home, &config.username))?);
        let mailer = Arc::new(Mailer {
            outbox: SmtpOutbox::new(config)?,
            progress: progress.clone(),
            queued: Notify::new(),
        });
        Ok(Self {
            config: config.clone(),
            mailer,
            progress,
            attachments: AttachmentStore::new(workspace),
            allowlist: Allowlist::new(&config.allow_from),
            rate_limit: Mutex::new(RateLimit::new(config.replies_per_hour)),
            status: Mutex::new(EmailStatus {
                state: "connecting",
                ..EmailStatus::default()
            }),
            in_flight: Arc::new(Mutex::new(HashSet::new())),
            unanswered: Arc::new(Mutex::new(HashSet::new())),
            deferred: Mutex::new(HashMap::new()),
            owner: OwnerIds::default(),
            voice: None,
            chains: Chains::default(),
        })
    }

    /// The channel transcribing audio attachments with `notes`, the transcript put beside the
    /// mail's text.
    pub fn with_voice_notes(mut self, notes: Arc<VoiceNotes>) -> Self {
        self.voice = Some(notes);
        self
    }

    /// The channel with `owner` known: their mail reaches the agent as it is, everyone else's
    /// (subject, body and attachment notes) fenced as untrusted data. Without it, all mail is
    /// fenced.
    pub fn with_owner(mut self, owner: &Owner) -> Self {
        self.owner = owner.on(NAME, Ids::AnyCase);
        self
    }

    /// The `/status` view.
    pub fn status(&self) -> EmailStatus {
        let mut status = lock(&self.status).clone();
        status.progress = self.progress.summary();
        status
    }

    fn set_state(&self, state: &'static str) {
        lock(&self.status).state = state;
    }

    fn set_error(&self, error: &EmailError) {
        tracing::warn!(error = %error, "Email channel error; reconnecting.");
        lock(&self.status).last_error = Some(error.to_string());
    }

    /// Connects, serves and reconnects with backoff until shutdown.
    async fn imap_loop(&self, context: &ChannelContext) {
        let (ack_tx, mut ack_rx) = mpsc::unbounded_channel::<u32>();
        let mut failures = 0u32;
        loop {
            self.set_state("connecting");
            let connected = tokio::select! {
                biased;
                _ = context.shutdown.cancelled() => break,
                result = imap::connect(&self.config) => result,
            };
            match connected {
                Ok(session) => {
                    failures = 0;
                    lock(&self.status).connects += 1;
                    context.ready.cancel();
                    self.set_state("connected");
                    tracing::info!(server = %self.config.imap_host, "Email channel connected.");
                    match self.serve(session, context, &ack_tx, &mut ack_rx).await {
                        Ok(()) => break,
                        Err(error) => self.set_error(&error),
                    }
                }
                Err(error) => self.set_error(&error),
            }
            self.set_state("backing_off");
            tokio::select! {
                biased;
                _ = context.shutdown.cancelled() => break,
                _ = tokio::time::sleep(RECONNECT_BACKOFF.delay(failures)) => {}
            }
            failures = failures.saturating_add(1);
        }
        self.set_state("stopped");
    }

    /// Serves one logged-in session; `Ok` means shutdown (after LOGOUT), `Err` reconnect.
    async fn serve(
        &self,
        mut session: ImapSession,
        context: &ChannelContext,
        ack_tx: &mpsc::UnboundedSender<u32>,
        ack_rx: &mut mpsc::UnboundedReceiver<u32>,
    ) -> Result<(), EmailError> {
        let uid_validity = imap::select_inbox(&mut session).await?;
        if self.progress.needs_start(uid_validity) {
            self.start_mailbox(&mut session, uid_validity).await?;
        }
        let idle = imap::supports_idle(&mut session).await?;
        lock(&self.status).idle_supported = Some(idle);
        // A round is a scan: at the latest one per IDLE re-arm, or per poll.
        context.liveness.expect_rounds(if idle {
            IDLE_REARM + STALL_SLACK
        } else {
            Duration::from_secs(self.config.poll_interval_seconds) * 3 + STALL_SLACK
        });
        let mut acks: Vec<u32> = Vec::new();
        loop {
            while let Ok(uid) = ack_rx.try_recv() {
                acks.push(uid);
            }
            if !acks.is_empty() {
                fault::crash_point("email:answered");
            }
            imap::mark_seen(&mut session, &acks).await?;
            acks.clear();
            self.scan(&mut session, context, ack_tx).await?;
            context.liveness.round();
            if context.shutdown.is_cancelled() {
                imap::logout(session).await;
                return Ok(());
            }
            // Mail announced while the scan ran (EXISTS arrives as an unsolicited response
            // during other commands) would not be announced again in IDLE: scan again first.
            let unsolicited = session.unsolicited_responses.clone();
            if drain_new_mail(|| unsolicited.try_recv().ok()) {
                continue;
            }
            if idle {
                self.set_state("idle");
                let mut handle = session.idle();
                match tokio::time::timeout(Duration::from_secs(30), handle.init()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        return Err(EmailError::Imap {
                            command: "IDLE".into(),
                            error,
                        });
                    }
                    Err(_) => {
                        return Err(EmailError::Timeout {
                            command: "IDLE".into(),
                        });
                    }
                }
                let ended = if drain_new_mail(|| unsolicited.try_recv().ok()) {
                    Ok(None)
                } else {
                    let (wait, _stop) = handle.wait_with_timeout(IDLE_REARM);
                    tokio::select! {
                        biased;
                        _ = context.shutdown.cancelled() => Ok(None),
                        uid = ack_rx.recv() => Ok(uid),
                        _ = tokio::time::sleep(IDLE_REARM) => Ok(None),
                        result = wait => result.map(|_| None),
                    }
                };
                let done = tokio::time::timeout(Duration::from_secs(30), handle.done()).await;
                session = match done {
                    Ok(Ok(session)) => session,
                    Ok(Err(error)) => {
                        return Err(EmailError::Imap {
                            command: "IDLE DONE".into(),
                            error,
                        });
                    }
                    Err(_) => {
                        return Err(EmailError::Timeout {
                            command: "IDLE DONE".into(),
                        });
                    }
                };
                match ended {
                    Ok(uid) => acks.extend(uid),
                    Err(error) => {
                        return Err(EmailError::Imap {
                            command: "IDLE".into(),
                            error,
                        });
                    }
                }
            } else {
                self.set_state("polling");
                let poll = Duration::from_secs(self.config.poll_interval_seconds);
                tokio::select! {
                    biased;
                    _ = context.shutdown.cancelled() => {}
                    uid = ack_rx.recv() => acks.extend(uid),
                    _ = tokio::time::sleep(poll) => {}
                }
            }
        }
    }

    /// Starts a mailbox met for the first time, or renumbered by the server: what is there is
    /// history, but for the unseen mail of the last `backlog_days`.
    async fn start_mailbox(
        &self,
        session: &mut ImapSession,
        uid_validity: u32,
    ) -> Result<(), EmailError> {
        let renumbered = self.progress.knew_mailbox();
        let days = self.config.backlog_days;
        let since = (days > 0)
            .then(|| chrono::Local::now().date_naive() - chrono::Days::new(u64::from(days)));
        let baseline = imap::baseline(session, since).await?;
        self.progress.start(
            uid_validity,
            baseline.highest,
            baseline.backlog.iter().copied(),
        )?;
        lock(&self.in_flight).clear();
        lock(&self.unanswered).clear();
        lock(&self.deferred).clear();
        let skipped = baseline.total.saturating_sub(baseline.backlog.len());
        let answered = baseline.backlog.len();
        if renumbered {
            tracing::warn!(
                uid_validity,
                skipped,
                answered,
                backlog_days = days,
                "INBOX was renumbered (UIDVALIDITY changed): its older mail is history; only its unseen mail of the last backlog_days and new mail are answered."
            );
        } else {
            tracing::info!(
                uid_validity,
                skipped,
                answered,
                backlog_days = days,
                "First start on this mailbox: its read and older mail is history, not answered; its unseen mail of the last backlog_days and new mail are."
            );
        }
        Ok(())
    }

    /// Handles every new mail once; marks the answered and ignored ones `\Seen`.
    async fn scan(
        &self,
        session: &mut ImapSession,
        context: &ChannelContext,
        ack_tx: &mpsc::UnboundedSender<u32>,
    ) -> Result<(), EmailError> {
        let uids = imap::candidate_uids(session, self.progress.last_uid()).await?;
        let mut seen = Vec::new();
        let now = Instant::now();
        lock(&self.deferred).retain(|_, room_at| *room_at > now);
        for uid in uids {
            if context.shutdown.is_cancelled() {
                break;
            }
            // History (before the mailbox's start), running, or waiting: not now.
            if !self.progress.wanted(uid)
                || lock(&self.in_flight).contains(&uid)
                || lock(&self.unanswered).contains(&uid)
                || lock(&self.deferred).contains_key(&uid)
            {
                continue;
            }
            match self.progress.state(uid) {
                Some(MessageState::Answered | MessageState::Ignored(_)) => {
                    seen.push(uid);
                    continue;
                }
                // Persisted but never answered: a turn cut short by a crash; it goes on.
                Some(MessageState::Persisted) | None => {}
            }
            let fetched = imap::fetch(session, uid, self.config.max_message_bytes).await?;
            fault::crash_point("email:fetched");
            match self.handle(uid, fetched, context, ack_tx).await {
                Handled::Submitted | Handled::Deferred => {}
                Handled::Ignored(reason) => {
                    lock(&self.status).ignored += 1;
                    self.progress.record(uid, MessageState::Ignored(reason))?;
                    seen.push(uid);
                }
            }
        }
        imap::mark_seen(session, &seen).await
    }

    /// Parses, guards and submits one mail.
    async fn handle(
        &self,
        uid: u32,
        fetched: Fetched,
        context: &ChannelContext,
        ack_tx: &mpsc::UnboundedSender<u32>,
    ) -> Handled {
        let Admitted {
            mail,
            sender,
            session,
            verified,
            unverified,
        } = match self.admit(uid, fetched).await {
            Ok(admitted) => admitted,
            Err(handled) => return handled,
        };
        if unverified {
            tracing::warn!(uid, sender = %sender, "Mail from the owner's address without an authentication pass; treated as someone else's.");
        }
        let metadata = metadata(uid, &mail);
        let reply: Arc<dyn ReplySink> = Arc::new(EmailReply {
            mailer: self.mailer.clone(),
            to: sender.clone(),
            metadata: metadata.clone(),
            uid: Some(uid),
        });
        // Who reads the answer: the owner's mailbox only when the mail proved it came from
        // there; a claim without proof leaves it unknown.
        let readers = match (verified, unverified) {
            (true, _) => Readers::Owner,
            (false, true) => Readers::Unknown,
            (false, false) => Readers::Others { owner: false },
        };
        // The owner only with an authentication pass: every check downstream (approvals,
        // authority) reads this fact and nothing else.
        let origin = if verified {
            Origin::owner_as(sender.clone())
        } else {
            Origin::person(sender.clone())
        };
        let uid_validity = self.progress.summary().uid_validity.unwrap_or(0);
        let conversation = session.to_string();
        let pending = Pending {
            mail,
            session,
            sender,
            verified,
            origin,
            reply,
            readers,
            metadata,
            source_id: format!("email:{uid_validity}:{uid}"),
            store: self.attachments.clone(),
            voice: self.voice.clone(),
            max_attachment: usize::try_from(self.config.max_attachment_bytes).unwrap_or(usize::MAX),
        };
        let turnout = Turnout {
            uid,
            dispatch: context.dispatch.clone(),
            tasks: context.tasks.clone(),
            progress: self.progress.clone(),
            in_flight: self.in_flight.clone(),
            unanswered: self.unanswered.clone(),
            ack_tx: ack_tx.clone(),
        };
        lock(&self.in_flight).insert(uid);
        let before = self.chains.take(&conversation);
        if pending.has_voice() || before.is_some() {
            // Transcribed off the IMAP loop; the sender's mail before it goes first.
            let handle = context.tasks.spawn(async move {
                let inbound = pending.inbound().await;
                if let Some(before) = before {
                    let _ = before.await;
                }
                turnout.submit(inbound);
            });
            self.chains.set(conversation, handle);
        } else if !turnout.submit(pending.inbound().await) {
            return Handled::Deferred;
        }
        lock(&self.status).submitted += 1;
        context.liveness.inbound();
        Handled::Submitted
    }

    /// The checks a mail passes before it is answered (it parses, no loop, an allowed sender,
    /// who it is from, the rate limit, not delivered twice), and what they found out; or how
    /// it was handled instead.
    async fn admit(&self, uid: u32, fetched: Fetched) -> Result<Admitted, Handled> {
        let max_attachment =
            usize::try_from(self.config.max_attachment_bytes).unwrap_or(usize::MAX);
        let (raw, note) = match fetched {
            Fetched::Full(raw) => (raw, None),
            Fetched::HeaderOnly { header, size } => {
                let note = parse::oversize_note(size, self.config.max_message_bytes);
                (header, Some(note))
            }
            Fetched::Gone => return Err(Handled::Ignored("gone".into())),
        };
        let whole = note.is_none();
        let parsed = tokio::task::spawn_blocking(move || {
            let mut mail = parse::parse(&raw, max_attachment)?;
            if whole {
                parse::shape_for_prompt(&mut mail, parse::MAX_TEXT_CHARS);
            }
            Some(mail)
        })
        .await;
        let Ok(Some(mut mail)) = parsed else {
            tracing::warn!(uid, "Mail not answered: it could not be parsed as a mail.");
            return Err(Handled::Ignored("unparseable".into()));
        };
        if let Some(note) = note {
            mail.body = note;
        }
        let progress = self.progress.clone();
        let own_id = move |id: &str| progress.is_own_id(id);
        if let Some(reason) = loop_check(&mail.facts, &self.config.from_address, own_id) {
            tracing::info!(uid, sender = ?mail.facts.sender, reason = reason.label(), "Mail not answered: {}.", reason.why());
            return Err(Handled::Ignored(reason.label().into()));
        }
        let sender = mail.facts.sender.clone().unwrap_or_default();
        if !self.allowlist.allows(&sender) {
            tracing::info!(uid, sender = %sender, "Mail not answered: the sender is not in allow_from.");
            return Err(Handled::Ignored("not_allowed".into()));
        }
        // The owner's address in From proves nothing: only the receiving server's verdict
        // does (see `auth`), and only for a mail that names one sender. A mail that claims the
        // owner without it is someone else's.
        let claims_owner = self.owner.is(&sender);
        let verified = claims_owner
            && mail.facts.identity == auth::Identity::Single
            && auth::owner_authenticated(
                &mail.facts.auth_results,
                &self.config.authserv_id,
                &sender,
            );
        let unverified = claims_owner && !verified;
        // A mail that only claims the owner's address gets a conversation of its own: the
        // owner's mail session holds the owner's earlier mails and attachments, which its
        // prompt and tools would show to whoever wrote it. No address contains " <", so the
        // key names no one's real conversation.
        let key = if unverified {
            format!("unverified <{sender}>")
        } else {
            sender.clone()
        };
        let Ok(session) = SessionId::new(NAME, &key) else {
            tracing::warn!(uid, sender = %sender, "Mail not answered: the sender's address is not a valid session key.");
            return Err(Handled::Ignored("bad_sender".into()));
        };
        // The owner is never rate-limited away; anyone else over the limit waits, unread.
        let limited = if verified {
            Ok(())
        } else {
            lock(&self.rate_limit).try_take(&sender, Instant::now())
        };
        if let Err(over) = limited {
            tracing::warn!(uid, sender = %sender, "Sender over replies_per_hour: the mail stays unread and is answered when the hour has room.");
            lock(&self.deferred).insert(uid, over.room_at);
            if over.tell {
                self.tell_over_limit(&sender, &mail).await;
            }
            return Err(Handled::Deferred);
        }
        // A second delivery of a mail already taken: not answered twice.
        if let Some(id) = &mail.facts.message_id {
            match self.progress.take_id(id, uid) {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(uid, sender = %sender, message_id = %id, "Mail not answered: a mail with this Message-ID was answered already (delivered twice).");
                    return Err(Handled::Ignored("duplicate".into()));
                }
                Err(error) => {
                    tracing::warn!(uid, error = %error, "Could not record a mail's Message-ID; it stays unread for now.");
                    return Err(Handled::Deferred);
                }
            }
        }
        Ok(Admitted {
            mail,
            sender,
            session,
            verified,
            unverified,
        })
    }

    /// Tells `sender`, once per full hour, that their mail waits: a reply in the thread of
    /// `mail`, queued like any other (not counted against the limit).
    async fn tell_over_limit(&self, sender: &str, mail: &ParsedMail) {
        let note = format!(
            "You have sent more than {} messages within an hour. Your message is kept and \
             will be answered when the hour has room; there is no need to send it again.",
            self.config.replies_per_hour
        );
        let sink = EmailReply {
            mailer: self.mailer.clone(),
            to: sender.to_owned(),
            metadata: metadata(0, mail),
            uid: None,
        };
        if let Err(error) = sink.deliver(&note).await {
            tracing::warn!(sender = %sender, error = %error, "Could not tell a sender they are over the rate limit.");
        }
    }
}

/// The routing data of a mail, kept with the turn and used by its reply.
fn metadata(uid: u32, mail: &ParsedMail) -> Map<String, Value> {
    let mut metadata = Map::new();
    let sender = mail.facts.sender.clone().unwrap_or_default();
    metadata.insert(META_FROM.into(), Value::from(sender));
    metadata.insert(
        routing::EMAIL_SUBJECT.into(),
        Value::from(mail.subject.clone()),
    );
    if let Some(id) = &mail.facts.message_id {
        metadata.insert(META_MESSAGE_ID.into(), Value::from(id.clone()));
    }
    metadata.insert(META_REFERENCES.into(), Value::from(mail.references.clone()));
    metadata.insert(
        "email_in_reply_to".into(),
        Value::from(mail.in_reply_to.clone()),
    );
    metadata.insert(META_UID.into(), Value::from(uid));
    if let Some(kind) = mail.signature {
        metadata.insert("email_signature_type".into(), Value::from(kind));
    }
    metadata
}

/// Empties the unsolicited responses; whether any announced new mail.
fn drain_new_mail(mut next: impl FnMut() -> Option<UnsolicitedResponse>) -> bool {
    let mut fresh = false;
    while let Some(response) = next() {
        fresh |= matches!(
            response,
            UnsolicitedResponse::Exists(_) | UnsolicitedResponse::Recent(_)
        );
    }
    fresh
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

#[async_trait]
impl Channel for EmailChannel {
    fn name(&self) -> &str {
        NAME
    }

    async fn run(&self, context: ChannelContext) -> Result<(), ChannelError> {
        if !self.config.tls {
            tracing::warn!(
                "Email without TLS: the password and all mail cross the network in clear text."
            );
        } else if !self.config.tls_verify {
            tracing::warn!(
                "EMAIL TLS CERTIFICATE CHECKS ARE OFF (tls_verify: false): anyone on the network path can read the password and the mail."
            );
        }
        tokio::join!(
            self.imap_loop(&context),
            self.mailer.retry_loop(&context.shutdown)
        );
        Ok(())
    }

    async fn outbox(&self, session: &SessionId, metadata: &Map<String, Value>) -> Option<Outbox> {
        if session.channel() != NAME || !session.key().contains('@') {
            return None;
        }
        let sink = Arc::new(EmailReply {
            mailer: self.mailer.clone(),
            to: session.key().to_owned(),
            metadata: metadata.clone(),
            uid: None,
        });
        // A message the bot starts goes to the session's address: the owner's mailbox if it is
        // the owner's address.
        let readers = self.owner.readers([session.key()]);
        Some(Outbox { sink, readers })
    }
}
