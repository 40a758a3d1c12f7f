//! A real Matrix client for the tests, playing the human: users registered on a test Synapse
//! through its shared-secret API, logged in with matrix-sdk (end-to-end encryption included),
//! syncing in the background and recording every message and typing notice it sees.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use matrix_sdk::config::SyncSettings;
use matrix_sdk::ruma::api::client::room::create_room::v3::{Request as CreateRoom, RoomPreset};
use matrix_sdk::ruma::events::InitialStateEvent;
use matrix_sdk::ruma::events::room::encryption::RoomEncryptionEventContent;
use matrix_sdk::ruma::events::room::message::{
    OriginalSyncRoomMessageEvent, RoomMessageEventContent,
};
use matrix_sdk::ruma::events::typing::SyncTypingEvent;
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, RoomId};
use matrix_sdk::{Client, Room};
use tokio::task::JoinHandle;

use super::testenv;

/// Typing notices seen: the room and who was typing.
pub type TypingLog = Arc<Mutex<Vec<(OwnedRoomId, Vec<OwnedUserId>)>>>;

/// A homeserver the tests can create users on.
#[derive(Clone)]
pub struct Homeserver {
    pub url: String,
    pub secret: String,
}

/// A registered account.
#[derive(Clone)]
pub struct Account {
    pub user_id: String,
    pub localpart: String,
    pub password: String,
}

impl Homeserver {
    /// The shared Synapse of `scripts/testenv/up`.
    pub fn shared() -> Self {
        Self {
            url: testenv::var("SQUIDBOT_TEST_MATRIX_URL"),
            secret: testenv::var("SQUIDBOT_TEST_MATRIX_SECRET"),
        }
    }

    /// Registers a fresh user whose name starts with `prefix`.
    pub fn register(&self, prefix: &str) -> Account {
        let localpart = format!("{prefix}{}", fastrand::u64(..));
        let password = format!("pw-{}", fastrand::u64(..));
        let output = std::process::Command::new("python3")
            .arg(testenv::scripts_dir().join("synapse_register.py"))
            .args([
                "--url",
                &self.url,
                "--secret",
                &self.secret,
                &localpart,
                &password,
            ])
            .output()
            .expect("run synapse_register.py");
        assert!(
            output.status.success(),
            "registering {localpart}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Account {
            user_id: format!("@{localpart}:localhost"),
            localpart,
            password,
        }
    }
}

/// A message the human's client saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub room_id: OwnedRoomId,
    pub sender: OwnedUserId,
    pub content: RoomMessageEventContent,
    pub encrypted: bool,
}

/// A logged-in, syncing client; dropping it stops the sync.
pub struct Human {
    pub client: Client,
    pub account: Account,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub typing: TypingLog,
    /// Megolm sessions used by [`Human::send_undecryptable`], by name.
    lost_sessions: Mutex<
        std::collections::HashMap<String, matrix_sdk::encryption::vodozemac::megolm::GroupSession>,
    >,
    /// The background sync, while the client syncs.
    sync: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Human {
    fn drop(&mut self) {
        if let Some(sync) = self.sync.lock().unwrap().take() {
            sync.abort();
        }
    }
}

impl Human {
    /// Logs `account` in and starts syncing.
    pub async fn login(homeserver: &Homeserver, account: &Account) -> Self {
        let human = Self::login_idle(homeserver, account).await;
        human.start_syncing();
        human
    }

    /// Logs `account` in as a new device and syncs once (uploading its keys and learning its
    /// rooms), but does not keep syncing until [`Human::start_syncing`]: a device that is
    /// offline for a while, so what is sent to it meanwhile arrives in one sync.
    pub async fn login_idle(homeserver: &Homeserver, account: &Account) -> Self {
        let client = Client::builder()
            .homeserver_url(&homeserver.url)
            .build()
            .await
            .unwrap();
        client
            .matrix_auth()
            .login_username(&account.localpart, &account.password)
            .initial_device_display_name("test human")
            .send()
            .await
            .unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let typing: TypingLog = Arc::default();
        client.sync_once(SyncSettings::default()).await.unwrap();
        {
            let seen = seen.clone();
            client.add_event_handler(
                move |event: OriginalSyncRoomMessageEvent,
                      room: Room,
                      encryption: Option<matrix_sdk::deserialized_responses::EncryptionInfo>| {
                    let seen = seen.clone();
                    async move {
                        seen.lock().unwrap().push(Seen {
                            room_id: room.room_id().to_owned(),
                            sender: event.sender,
                            content: event.content,
                            encrypted: encryption.is_some(),
                        });
                    }
                },
            );
            let typing = typing.clone();
            client.add_event_handler(move |event: SyncTypingEvent, room: Room| {
                let typing = typing.clone();
                async move {
                    typing
                        .lock()
                        .unwrap()
                        .push((room.room_id().to_owned(), event.content.user_ids));
                }
            });
        }
        Self {
            client,
            account: account.clone(),
            seen,
            typing,
            lost_sessions: Mutex::default(),
            sync: Mutex::default(),
        }
    }

    /// Starts syncing in the background (once; later calls do nothing).
    pub fn start_syncing(&self) {
        let mut slot = self.sync.lock().unwrap();
        if slot.is_some() {
            return;
        }
        let client = self.client.clone();
        *slot = Some(tokio::spawn(async move {
            // `sync` returns on an error (the homeserver-restart test stops the server);
            // keep going like a real client would.
            loop {
                let settings = SyncSettings::default().timeout(Duration::from_secs(5));
                let _ = client.sync(settings).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }));
    }

    /// Creates a room inviting `invite`, optionally encrypted.
    pub async fn create_room(&self, invite: &[&str], encrypted: bool) -> Room {
        let mut request = CreateRoom::new();
        request.invite = invite.iter().map(|u| u.parse().unwrap()).collect();
        request.preset = Some(RoomPreset::PrivateChat);
        if encrypted {
            let event = InitialStateEvent::with_empty_state_key(
                RoomEncryptionEventContent::with_recommended_defaults(),
            );
            request.initial_state = vec![event.to_raw_any()];
        }
        self.client.create_room(request).await.unwrap()
    }

    /// Invites `user` into `room`, one this client made (after the fact: what was said before
    /// the invite stays behind it).
    pub async fn invite(&self, room: &Room, user: &str) {
        let user: OwnedUserId = user.parse().unwrap();
        room.invite_user_by_id(&user).await.unwrap();
    }

    /// The room, once this client knows it.
    pub fn room(&self, room_id: &RoomId) -> Room {
        self.client.get_room(room_id).unwrap()
    }

    /// Waits until `user` joined `room` (as this client sees it).
    pub async fn wait_joined(&self, room_id: &RoomId, user: &str) {
        let user: OwnedUserId = user.parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(room) = self.client.get_room(room_id)
                && let Ok(Some(member)) = room.get_member_no_sync(&user).await
                && *member.membership()
                    == matrix_sdk::ruma::events::room::member::MembershipState::Join
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{user} did not join {room_id}");
    }

    /// Sends a plain text message; returns its event id.
    pub async fn say(&self, room_id: &RoomId, text: &str) -> OwnedEventId {
        self.send(room_id, RoomMessageEventContent::text_plain(text))
            .await
    }

    /// Sends any message content; returns its event id.
    pub async fn send(&self, room_id: &RoomId, content: RoomMessageEventContent) -> OwnedEventId {
        self.room(room_id)
            .send(content)
            .await
            .unwrap()
            .response
            .event_id
    }

    /// Sends a real megolm-encrypted message from a fresh outbound session whose key is never
    /// shared with anyone, straight through the client-server API (past the SDK's own
    /// encryption): for every other member it cannot be decrypted. `session` names the
    /// session, so several messages can share one; returns nothing, the bot's notices tell.
    pub async fn send_undecryptable(&self, room_id: &RoomId, session: &str) {
        use matrix_sdk::encryption::vodozemac::megolm::{GroupSession, SessionConfig};
        use matrix_sdk::ruma::api::client::message::send_message_event::v3::Request;
        let sender_key = self
            .client
            .encryption()
            .curve25519_key()
            .await
            .unwrap()
            .to_base64();
        let (ciphertext, session_id) = {
            let mut sessions = self.lost_sessions.lock().unwrap();
            let group = sessions
                .entry(session.to_owned())
                .or_insert_with(|| GroupSession::new(SessionConfig::version_1()));
            let plain = r#"{"type":"m.room.message","content":{"msgtype":"m.text","body":"lost"}}"#;
            (group.encrypt(plain).to_base64(), group.session_id())
        };
        let content = serde_json::json!({
            "algorithm": "m.megolm.v1.aes-sha2",
            "ciphertext": ciphertext,
            "device_id": self.client.device_id().unwrap().to_string(),
            "sender_key": sender_key,
            "session_id": session_id,
        });
        let request = Request::new_raw(
            room_id.to_owned(),
            matrix_sdk::ruma::TransactionId::new(),
            "m.room.encrypted".into(),
            matrix_sdk::ruma::serde::Raw::new(&content)
                .unwrap()
                .cast_unchecked(),
        );
        self.client.send(request).await.unwrap();
    }

    /// Messages from `sender` in `room_id` seen so far.
    pub fn messages_from(&self, room_id: &RoomId, sender: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.room_id == room_id && s.sender == sender)
            .cloned()
            .collect()
    }

    /// Waits until `sender` sent at least `count` messages in `room_id`; returns them all.
    pub async fn wait_messages(&self, room_id: &RoomId, sender: &str, count: usize) -> Vec<Seen> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let messages = self.messages_from(room_id, sender);
            if messages.len() >= count {
                return messages;
            }
            assert!(
                Instant::now() < deadline,
                "expected {count} messages from {sender} in {room_id}, got {:?}",
                messages
                    .iter()
                    .map(|m| m.content.body())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Whether `user` was ever seen typing in `room_id`.
    pub fn saw_typing(&self, room_id: &RoomId, user: &str) -> bool {
        self.typing
            .lock()
            .unwrap()
            .iter()
            .any(|(room, users)| room == room_id && users.iter().any(|u| u == user))
    }
}
