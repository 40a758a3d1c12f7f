//! [`MatrixChannel`]: login, the sync loop, and turning room events into inbound messages.
//!
//! The loop calls `sync_once` itself so it knows each event's batch (see [`SyncState`]). The
//! first sync of a fresh store only sets the position: nothing said before the bot existed is
//! answered, and in a room it just joined, events before its own join are skipped. Sync
//! errors back off (1 s doubling to 60 s) and the loop keeps going; a refused session ends
//! `run` with an error so the supervisor restarts the channel and shows it failing.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::{RequestConfig, SyncSettings, SyncToken};
use matrix_sdk::deserialized_responses::TimelineEventKind;
use matrix_sdk::ruma::api::error::ErrorKind;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::events::room::message::RoomMessageEventContent;
use matrix_sdk::ruma::events::{AnySyncStateEvent, AnySyncTimelineEvent, SyncStateEvent};
use matrix_sdk::ruma::{OwnedRoomId, RoomId, UserId};
use matrix_sdk::sync::SyncResponse;
use matrix_sdk::{Client, Room, SessionMeta, SessionTokens};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::task::TaskTracker;

use super::MatrixError;
use super::edits::Edits;
use super::media::ClientSlot;
use super::policy::{MessageFacts, RoomPolicy, Verdict};
use super::room_keys::{Connected, RoomKeys};
use super::routing;
use super::sink::{MatrixReplySink, ThreadRef, room_readers};
use super::store_check;
use super::sync_state::SyncState;
use super::undecrypted::Undecrypted;
use super::{backfill, device, identity, verification};
use crate::channels::attachments::AttachmentStore;
use crate::channels::owner::{Ids, Owner, OwnerIds};
use crate::channels::voice::{Chains, VoiceNotes};
use crate::config::MatrixConfig;
use crate::core::ports::channel::{Channel, ChannelContext, ChannelError, Outbox};
use crate::core::redact::Redactor;
use crate::core::session::SessionId;
use crate::gateway::backoff::Backoff;

/// The channel's name and session prefix.
pub const NAME: &str = "matrix";

/// Healthy syncs a channel may miss before it counts as stalled: a sync returns at the latest
/// after the long-poll timeout, so four of them without one is no network hiccup.
const STALL_SYNCS: u32 = 4;

/// Waits between failed syncs: 1 s doubling to 60 s.
const SYNC_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// After how many of the first syncs the crypto store is checked (see `store_check`).
const STORE_CHECKS: u32 = 3;

/// How long shutdown waits for messages being persisted, so their receipts go out.
const DRAIN: Duration = Duration::from_secs(3);

/// What `/status` shows about the channel.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MatrixStatus {
    /// `connecting`, `syncing`, `backing_off` or `stopped`.
    pub state: &'static str,
    /// When the last sync succeeded (RFC 3339).
    pub last_sync: Option<String>,
    /// Joined rooms.
    pub rooms: usize,
    /// The last error, if the last attempt failed.
    pub last_error: Option<String>,
    /// Messages handed to the agent since start.
    pub messages_in: u64,
}

/// The Matrix channel.
pub struct MatrixChannel {
    config: MatrixConfig,
    store_dir: PathBuf,
    pub(super) attachments: AttachmentStore,
    client: ClientSlot,
    /// A std mutex: held only to copy or update a few fields.
    status: Mutex<MatrixStatus>,
    /// Learns the access token a password login returns, so no reply, prompt or log shows it.
    redactor: Arc<Redactor>,
    /// The owner's Matrix ids: who is the owner among senders and room members (decided
    /// here, at the edge), and whose verification requests the bot answers.
    pub(super) owner: Arc<OwnerIds>,
    /// Voice messages transcribed, when `transcription` is configured (see `voice`).
    pub(super) voice: Option<Arc<VoiceNotes>>,
}

impl MatrixChannel {
    /// The channel for `config`; its store lives under `home` unless `store_dir` is absolute,
    /// and received files go to `workspace`.
    pub fn new(config: &MatrixConfig, home: &Path, workspace: &Path) -> Self {
        Self {
            config: config.clone(),
            store_dir: home.join(&config.store_dir),
            attachments: AttachmentStore::new(workspace),
            client: ClientSlot::default(),
            status: Mutex::new(MatrixStatus {
                state: "stopped",
                ..MatrixStatus::default()
            }),
            redactor: Arc::new(Redactor::none()),
            owner: Arc::default(),
            voice: None,
        }
    }

    /// The channel transcribing voice messages with `notes` before it judges them, so what
    /// was said is what the turn is about.
    pub fn with_voice_notes(mut self, notes: Arc<VoiceNotes>) -> Self {
        self.voice = Some(notes);
        self
    }

    /// The channel knowing `owner` (by their `matrix` ids): their messages are the owner's,
    /// a room of theirs alone is private, and their verification requests are answered (see
    /// [`verification`]).
    pub fn with_owner(mut self, owner: &Owner) -> Self {
        self.owner = Arc::new(owner.on(NAME, Ids::Exact));
        self
    }

    /// The channel adding the access token it obtains at login to `redactor` (the shared one
    /// of tool results, replies, prompts and logs).
    pub fn with_redactor(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = redactor;
        self
    }

    /// The client handle shared with the `matrix_send_file` tool.
    pub fn client_slot(&self) -> ClientSlot {
        self.client.clone()
    }

    /// A snapshot for `/status`.
    pub fn status(&self) -> MatrixStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn update(&self, change: impl FnOnce(&mut MatrixStatus)) {
        if let Ok(mut status) = self.status.lock() {
            change(&mut status);
        }
    }

    /// Builds the client on the persistent store and logs in (access token or password).
    async fn connect(&self) -> Result<Client, MatrixError> {
        let config = &self.config;
        let user_id = UserId::parse(&config.user_id).map_err(|source| MatrixError::UserId {
            user_id: config.user_id.clone(),
            error: source,
        })?;
        std::fs::create_dir_all(&self.store_dir).map_err(|source| MatrixError::StoreDir {
            path: self.store_dir.clone(),
            error: source,
        })?;
        let device_id =
            device::device_id(&config.device_id, &self.store_dir).map_err(|error| {
                MatrixError::StoreDir {
                    path: self.store_dir.clone(),
                    error,
                }
            })?;
        let passphrase = (!config.store_passphrase.is_empty())
            .then(|| config.store_passphrase.expose().to_owned());
        let client = Client::builder()
            .homeserver_url(&config.homeserver)
            .sqlite_store(&self.store_dir, passphrase.as_deref())
            .request_config(RequestConfig::new().retry_limit(2))
            .build()
            .await
            .map_err(|source| MatrixError::Build {
                homeserver: config.homeserver.clone(),
                error: source,
            })?;
        let login_error = |source: matrix_sdk::Error| MatrixError::Login {
            user_id: config.user_id.clone(),
            error: Box::new(source),
        };
        if config.access_token.is_empty() {
            client
                .matrix_auth()
                .login_username(user_id.as_str(), config.password.expose())
                .device_id(&device_id)
                .initial_device_display_name("squidbot")
                .send()
                .await
                .map_err(login_error)?;
            if let Some(token) = client.access_token() {
                self.redactor.add(&token);
            }
        } else {
            let session = MatrixSession {
                meta: SessionMeta {
                    user_id: user_id.clone(),
                    device_id: device_id.as_str().into(),
                },
                tokens: SessionTokens {
                    access_token: config.access_token.expose().to_owned(),
                    refresh_token: None,
                },
            };
            client.restore_session(session).await.map_err(login_error)?;
            let who = client
                .whoami()
                .await
                .map_err(|e| login_error(matrix_sdk::Error::Http(Box::new(e))))?;
            let device = who.device_id.as_ref().map(|d| d.as_str());
            if who.user_id != user_id || device != Some(device_id.as_str()) {
                return Err(MatrixError::WrongToken {
                    configured: format!("{user_id} device {device_id}"),
                    actual: format!("{} device {}", who.user_id, device.unwrap_or("?")),
                });
            }
        }
        if !config.recovery_key.is_empty() {
            // The key itself is never logged; only whether recovery worked.
            match client
                .encryption()
                .recovery()
                .recover(config.recovery_key.expose())
                .await
            {
                Ok(()) => tracing::info!(
                    "Restored Matrix key backup and cross-signing from the recovery key."
                ),
                Err(error) => {
                    tracing::warn!(error = %error, "Matrix recovery failed; old encrypted history may be unreadable.")
                }
            }
        }
        let password = (!config.password.is_empty()).then(|| config.password.expose());
        identity::bootstrap(&client, user_id.as_str(), password).await;
        identity::backup(&client, &self.store_dir).await;
        Ok(client)
    }
}

/// Whether logging in failed in a way only new credentials fix: the server refused them, or
/// they name another account than configured.
fn refused(error: &MatrixError) -> bool {
    match error {
        MatrixError::Login { error, .. } => is_fatal(error),
        MatrixError::WrongToken { .. } | MatrixError::UserId { .. } => true,
        _ => false,
    }
}

/// Whether a sync error means the session is gone (no point retrying with it).
fn is_fatal(error: &matrix_sdk::Error) -> bool {
    matches!(
        error.client_api_error_kind(),
        Some(ErrorKind::UnknownToken(_) | ErrorKind::Forbidden | ErrorKind::UserDeactivated)
    )
}

/// What one sync loop run shares with the tasks waiting for persistence.
pub(super) struct Loop {
    pub(super) client: Client,
    pub(super) policy: RoomPolicy,
    pub(super) own: String,
    pub(super) display_name: String,
    pub(super) state: Arc<Mutex<SyncState>>,
    /// Rotates room keys when a member's device starts a new Olm session.
    pub(super) keys: Arc<RoomKeys>,
    pub(super) waiters: TaskTracker,
    /// (room, megolm session) pairs already told that a message could not be decrypted: one
    /// notice per sender key session, so a run of undecryptable messages is not a run of
    /// notices, while a new session that fails too is reported again.
    utd_notified: HashSet<(OwnedRoomId, String)>,
    /// Messages waiting for their room keys.
    undecrypted: Undecrypted,
    /// Per room, the voice message being transcribed that the room's later messages follow.
    pub(super) chains: Chains,
}

#[async_trait]
impl Channel for MatrixChannel {
    fn name(&self) -> &str {
        NAME
    }

    async fn run(&self, context: ChannelContext) -> Result<(), ChannelError> {
        self.update(|s| s.state = "connecting");
        let connected = tokio::select! {
            biased;
            _ = context.shutdown.cancelled() => return Ok(()),
            connected = self.connect() => connected,
        };
        let mut this = self.begin(connected).await?;
        let client = this.client.clone();
        let mut token = this
            .state
            .lock()
            .ok()
            .and_then(|s| s.token().map(str::to_owned));
        let mut failures = 0u32;
        let mut first = true;
        let mut checks = STORE_CHECKS + 1;
        let sync_timeout = Duration::from_secs(self.config.sync_timeout_seconds);
        context.liveness.expect_rounds(sync_timeout * STALL_SYNCS);
        let result = loop {
            let settings = SyncSettings::default()
                .timeout(if first {
                    Duration::ZERO
                } else {
                    // A message waiting for its key is told about on time.
                    let notice = this
                        .undecrypted
                        .next_due()
                        .map(|due| due + Duration::from_millis(50));
                    sync_timeout.min(notice.unwrap_or(sync_timeout))
                })
                .token(match &token {
                    Some(token) => SyncToken::Specific(token.clone()),
                    None => SyncToken::NoToken,
                });
            let synced = tokio::select! {
                biased;
                _ = context.shutdown.cancelled() => break Ok(()),
                synced = client.sync_once(settings) => synced,
            };
            match synced {
                Ok(response) => {
                    match self
                        .synced(&mut this, &context, response, &mut token, &mut checks)
                        .await
                    {
                        Ok(()) => {}
                        Err(error) => break Err(error),
                    }
                    failures = 0;
                    first = false;
                }
                Err(error) if is_fatal(&error) => {
                    let error = MatrixError::SessionRefused {
                        error: Box::new(error),
                    };
                    self.update(|s| s.last_error = Some(error.to_string()));
                    break Err(ChannelError::permanent(NAME, error));
                }
                Err(error) => {
                    let delay = SYNC_BACKOFF.delay(failures);
                    failures = failures.saturating_add(1);
                    tracing::warn!(error = %error, retry_in_secs = delay.as_secs(), "Matrix sync failed; backing off.");
                    self.update(|s| {
                        s.state = "backing_off";
                        s.last_error = Some(error.to_string());
                    });
                    tokio::select! {
                        biased;
                        _ = context.shutdown.cancelled() => break Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        };
        this.waiters.close();
        let _ = tokio::time::timeout(DRAIN, this.waiters.wait()).await;
        if let Ok(mut slot) = self.client.write() {
            *slot = None;
        }
        self.update(|s| s.state = "stopped");
        result
    }

    async fn outbox(&self, session: &SessionId, metadata: &Map<String, Value>) -> Option<Outbox> {
        let Connected { client, keys } = self.client.read().ok()?.clone()?;
        let room_id = RoomId::parse(session.key()).ok()?;
        let room = client.get_room(&room_id)?;
        let thread = metadata
            .get(routing::MATRIX_THREAD_ROOT)
            .and_then(Value::as_str)
            .and_then(|root| matrix_sdk::ruma::EventId::parse(root).ok())
            .map(|root| ThreadRef {
                latest: root.clone(),
                root,
            });
        // A job's turn is read by the room's members as they are when it fires.
        let readers = room_readers(&room, &self.owner).await;
        let sink = Arc::new(MatrixReplySink::new(room, thread, keys));
        Some(Outbox { sink, readers })
    }
}

impl MatrixChannel {
    /// The sync loop's state once `connected`: room keys watched, verification answered,
    /// the client published for tools, the sync position loaded.
    async fn begin(&self, connected: Result<Client, MatrixError>) -> Result<Loop, ChannelError> {
        // The device updates are watched from before the first sync, so no new Olm session
        // goes unnoticed (see `RoomKeys`).
        let connected = match connected {
            Ok(client) => RoomKeys::watch(&client).await.map(|keys| (client, keys)),
            Err(error) => Err(error),
        };
        let (client, keys) = match connected {
            Ok((client, keys)) => (client, Arc::new(keys)),
            Err(error) => {
                self.update(|s| {
                    s.state = "stopped";
                    s.last_error = Some(error.to_string());
                });
                if refused(&error) {
                    return Err(ChannelError::permanent(NAME, error));
                }
                return Err(ChannelError::new(NAME, error));
            }
        };
        let desk = super::verification_desk::Desk::new(&self.store_dir);
        verification::answer_requests(&client, self.owner.clone(), desk);
        if let Ok(mut slot) = self.client.write() {
            *slot = Some(Connected {
                client: client.clone(),
                keys: keys.clone(),
            });
        }
        let own = self.config.user_id.clone();
        let localpart = own
            .trim_start_matches('@')
            .split(':')
            .next()
            .unwrap_or_default()
            .to_owned();
        let display_name = match client.account().get_display_name().await {
            Ok(Some(name)) => name,
            _ => localpart,
        };
        let state = SyncState::load(&self.store_dir.join("squidbot-sync.json"));
        Ok(Loop {
            client: client.clone(),
            policy: RoomPolicy::new(
                &own,
                &self.config.room_ids,
                self.config.group_policy,
                &self.config.allowlist,
                self.config.auto_join,
            ),
            own,
            display_name,
            state: Arc::new(Mutex::new(state)),
            keys,
            waiters: TaskTracker::new(),
            utd_notified: HashSet::new(),
            undecrypted: Undecrypted::load(&self.store_dir.join("squidbot-undecrypted.json")),
            chains: Chains::default(),
        })
    }

    /// One successful sync: the pulse, the store checks of the first syncs, the status, then
    /// the response's messages; moves `token` on.
    async fn synced(
        &self,
        this: &mut Loop,
        context: &ChannelContext,
        response: SyncResponse,
        token: &mut Option<String>,
        checks: &mut u32,
    ) -> Result<(), ChannelError> {
        context.liveness.round();
        let fresh = token.is_none();
        *token = Some(response.next_batch.clone());
        // The keys are uploaded during the first syncs: the store is checked after each of
        // them (the server's keys fetched after the first only).
        *checks = checks.saturating_sub(1);
        if *checks > 0 {
            let compare_keys = *checks == STORE_CHECKS;
            let checked = store_check::check_or_renew(
                &this.client,
                compare_keys,
                &self.config,
                &self.store_dir,
            )
            .await;
            if let Err(error) = checked {
                self.update(|s| s.last_error = Some(error.to_string()));
                return Err(error);
            }
        }
        self.update(|s| {
            s.state = "syncing";
            s.last_sync = Some(chrono::Utc::now().to_rfc3339());
            s.rooms = this.client.joined_rooms().len();
            s.last_error = None;
        });
        context.ready.cancel();
        let submitted = self.process(this, context, response, fresh).await;
        if submitted > 0 {
            context.liveness.inbound();
        }
        self.update(|s| s.messages_in += submitted);
        Ok(())
    }

    /// Handles one sync response: invites, then every room's new messages. Returns how many
    /// messages were submitted. With `fresh` (the store's first sync) nothing is answered.
    async fn process(
        &self,
        this: &mut Loop,
        context: &ChannelContext,
        response: SyncResponse,
        fresh: bool,
    ) -> u64 {
        // The sync has handled the batch's to-device messages: a new Olm session among them
        // rotates the room keys before anything in this batch is answered.
        this.keys.settle().await;
        for room_id in response.rooms.invited.keys() {
            self.invited(this, room_id).await;
        }
        let batch = this
            .state
            .lock()
            .map(|mut s| s.open(&response.next_batch))
            .unwrap_or(0);
        let mut submitted = 0;
        for (room_id, update) in &response.rooms.joined {
            let Some(room) = this.client.get_room(room_id) else {
                continue;
            };
            if fresh || !this.policy.listens_in(room_id.as_str()) {
                continue;
            }
            submitted += self.room_events(this, context, &room, update, batch).await;
        }
        let retried = this.undecrypted.retry(&this.client).await;
        // A message decrypted late is answered as it is, not paired with a later edit.
        let mut edits = Edits::default();
        for (room, event) in &retried.decrypted {
            let handled = event
                .event_id()
                .is_some_and(|id| this.state.lock().is_ok_and(|s| s.handled(id.as_str())));
            if !handled
                && self
                    .message(this, context, room, event, batch, &mut edits)
                    .await
            {
                submitted += 1;
            }
        }
        for (room, sender, session) in retried.due_notice {
            self.undecryptable(this, &room, &sender, session).await;
        }
        if let Ok(mut state) = this.state.lock() {
            state.close(batch);
        }
        submitted
    }

    /// Hands on one joined room's new messages from a sync (pages back over a gap first);
    /// returns how many were submitted.
    async fn room_events(
        &self,
        this: &mut Loop,
        context: &ChannelContext,
        room: &Room,
        update: &matrix_sdk::sync::JoinedRoomUpdate,
        batch: u64,
    ) -> u64 {
        let room_id = room.room_id();
        let mut submitted = 0;
        let events = &update.timeline.events;
        // Events before the bot was invited predate it: never answered. Those between the
        // invite and the join (a DM's first message, sent while the bot was away) are.
        let own_member = |membership: MembershipState| {
            let own = this.own.as_str();
            move |event: &matrix_sdk::deserialized_responses::TimelineEvent| {
                matches!(
                    event.raw().deserialize(),
                    Ok(AnySyncTimelineEvent::State(AnySyncStateEvent::RoomMember(SyncStateEvent::Original(member))))
                        if member.state_key.as_str() == own && member.content.membership == membership
                )
            }
        };
        let joined_at = events.iter().rposition(own_member(MembershipState::Join));
        let invited_at = joined_at.and_then(|at| {
            events[..at]
                .iter()
                .rposition(own_member(MembershipState::Invite))
        });
        let limited = update.timeline.limited;
        let start = match (invited_at, joined_at) {
            (Some(invited), _) => invited + 1,
            // The invite is further back than the batch reaches: paged back to below.
            (None, Some(_)) if limited => 0,
            (None, Some(joined)) => joined + 1,
            (None, None) => 0,
        };
        // More arrived since the last sync (or the invite) than it returned: page back
        // over the gap.
        let mut recovered = backfill::Recovered::default();
        if limited
            && invited_at.is_none()
            && let Some(first) = events.first().and_then(|event| event.event_id())
        {
            let state = this.state.clone();
            let seen = move |id: &str| state.lock().is_ok_and(|s| s.handled(id));
            recovered = backfill::recover(room, &first, &this.own, seen).await;
            let count = recovered.events.len();
            if recovered.complete {
                tracing::info!(room = %room_id, recovered = count, "Paged back over a Matrix sync gap; every missed message is handled now.");
            } else {
                tracing::warn!(room = %room_id, recovered = count, "Paged back over a Matrix sync gap but not to its start: older messages in it are not answered.");
                // Said in the room too: the person is the one who can ask again.
                let notice = RoomMessageEventContent::notice_plain(format!(
                    "I was away and could read back only the last {count} events of what \
                     was said meanwhile. If you asked me something before those, please \
                     ask again."
                ));
                this.keys.settle().await;
                if let Err(error) = room.send(notice).await {
                    tracing::warn!(room = %room_id, error = %error, "Could not send the sync-gap notice.");
                }
            }
        }
        let mut edits = Edits::of(recovered.events.iter().chain(&events[start..]));
        for event in recovered.events.iter().chain(&events[start..]) {
            let Some(event_id) = event.event_id() else {
                continue;
            };
            if this
                .state
                .lock()
                .is_ok_and(|s| s.handled(event_id.as_str()))
            {
                continue;
            }
            if let TimelineEventKind::UnableToDecrypt {
                event: raw,
                utd_info,
            } = &event.kind
            {
                // Kept and tried again as keys arrive (see `undecrypted`).
                let sender = raw
                    .get_field::<String>("sender")
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                let session = utd_info.session_id.clone().unwrap_or_default();
                tracing::debug!(room = %room_id, sender, session, "A Matrix message cannot be decrypted yet; kept for its key.");
                this.undecrypted
                    .add(room_id.to_owned(), raw.clone(), sender, session);
                continue;
            }
            if self
                .message(this, context, room, event, batch, &mut edits)
                .await
            {
                submitted += 1;
            }
        }
        submitted
    }

    /// Joins the room if the inviter is trusted.
    async fn invited(&self, this: &Loop, room_id: &RoomId) {
        let Some(room) = this.client.get_room(room_id) else {
            return;
        };
        let inviter = match room.invite_details().await {
            Ok(invite) => invite.inviter.map(|m| m.user_id().to_string()),
            Err(error) => {
                tracing::debug!(room = %room_id, error = %error, "Could not read a Matrix invite.");
                None
            }
        };
        let inviter = inviter.unwrap_or_default();
        if !this.policy.accepts_invite(&inviter) {
            tracing::debug!(room = %room_id, inviter, "Ignored a Matrix invite from a sender not in the allowlist.");
            return;
        }
        match room.join().await {
            Ok(()) => tracing::info!(room = %room_id, inviter, "Joined a Matrix room on invite."),
            Err(error) => {
                tracing::warn!(room = %room_id, error = %error, "Could not join a Matrix room.")
            }
        }
    }

    /// Tells the room, once per megolm session and run, that a message could not be decrypted.
    async fn undecryptable(&self, this: &mut Loop, room: &Room, sender: &str, session: String) {
        let facts = MessageFacts {
            room_id: room.room_id().as_str(),
            sender,
            other_members: 1,
            mentioned: true,
        };
        if this.policy.judge(&facts) != Verdict::Answer {
            return;
        }
        tracing::warn!(room = %room.room_id(), sender, session, "A Matrix message could not be decrypted.");
        if !this
            .utd_notified
            .insert((room.room_id().to_owned(), session))
        {
            return;
        }
        let notice = RoomMessageEventContent::notice_plain(
            "I could not decrypt a message in this room: its key never reached my device, even \
             after waiting. Your client may share keys only with verified devices; allow \
             unverified devices for this room (or for me), then send it again.",
        );
        this.keys.settle().await;
        match room.send(notice).await {
            Ok(sent) => {
                tracing::debug!(room = %room.room_id(), event = %sent.response.event_id, "Sent the undecryptable-message notice.")
            }
            Err(error) => {
                tracing::warn!(room = %room.room_id(), error = %error, "Could not send the undecryptable-message notice.")
            }
        }
    }
}
