//! [`RoomKeys`]: a room's megolm session is rotated, never sent a second time at a later
//! index, when a member's device starts a new Olm session with the bot.
//!
//! Why. Two devices that meet for the first time (the bot right after joining a room, and a
//! member's device it has not talked to) can each start an Olm session with the other at the
//! same moment: the bot claims a one-time key of the device to send the room key of its first
//! message, while the device claims one of the bot's to send its own. matrix-sdk-crypto takes
//! any new inbound Olm session for an attempt to unwedge a broken one: it bumps the device's
//! "wedging index", and the next message the bot sends re-shares the room's current megolm
//! session with that device at the session's *current* index (matrix-rust-sdk PR 3604 names
//! this case as a harmless extra share). It is not harmless: a device that receives both
//! copies in one sync (it was offline or slow in between) keeps the later one, because
//! matrix-sdk-crypto merges each received key against its store, not against the rest of the
//! batch, and the bot's earlier messages stay unreadable on it for good. Rotating the session
//! instead makes the next message carry a new one, so no device ever holds two copies of one.
//!
//! How. The bump is stored as a change to that device, which the crypto store's device stream
//! reports. [`RoomKeys::settle`] drains the stream and discards the outbound megolm session of
//! every joined encrypted room shared with the owner of a changed device. It runs before the
//! sync loop hands on a batch (the sync has processed the batch's to-device messages by then,
//! so a reply to a message whose key came over the new session is sent with a fresh session)
//! and before every message the bot sends. Other changes to a device (new keys from
//! `/keys/query`) rotate too, which costs one room key message per device and nothing else.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures_util::{FutureExt, Stream, StreamExt};
use matrix_sdk::Client;
use matrix_sdk::encryption::identities::DeviceUpdates;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::{OwnedDeviceId, OwnedUserId};

use super::MatrixError;

/// The device updates of the crypto store since the last drain.
type Updates = Pin<Box<dyn Stream<Item = DeviceUpdates> + Send>>;

/// The running channel's client with its room-key guard, shared with the `matrix_send_file`
/// tool so every message the bot sends goes through [`RoomKeys::settle`].
#[derive(Clone)]
pub struct Connected {
    /// The logged-in client.
    pub client: Client,
    /// Its room-key guard.
    pub keys: Arc<RoomKeys>,
}

/// Rotates room keys when a member's device changed; see the module documentation.
pub struct RoomKeys {
    client: Client,
    own_user: OwnedUserId,
    own_device: OwnedDeviceId,
    /// A std mutex: held only while the stream is polled without waiting.
    updates: Mutex<Updates>,
}

impl RoomKeys {
    /// Starts watching `client`'s device updates; call before the first sync, so no new Olm
    /// session goes unnoticed.
    pub async fn watch(client: &Client) -> Result<Self, MatrixError> {
        let (Some(own_user), Some(own_device)) = (client.user_id(), client.device_id()) else {
            return Err(MatrixError::NotLoggedIn);
        };
        let updates = client
            .encryption()
            .devices_stream()
            .await
            .map_err(|source| MatrixError::DeviceUpdates {
                error: Box::new(source),
            })?;
        Ok(Self {
            client: client.clone(),
            own_user: own_user.to_owned(),
            own_device: own_device.to_owned(),
            updates: Mutex::new(Box::pin(updates)),
        })
    }

    /// Discards the room key of every joined encrypted room shared with a user whose device
    /// changed since the last call, so the next message there starts a new megolm session.
    pub async fn settle(&self) {
        let users = self.changed_users();
        if users.is_empty() {
            return;
        }
        for room in self.client.joined_rooms() {
            if !room.encryption_state().is_encrypted() {
                continue;
            }
            let mut shared = false;
            for user in &users {
                if let Ok(Some(member)) = room.get_member_no_sync(user).await
                    && matches!(
                        member.membership(),
                        MembershipState::Join | MembershipState::Invite
                    )
                {
                    shared = true;
                    break;
                }
            }
            if !shared {
                continue;
            }
            match room.discard_room_key().await {
                Ok(()) => {
                    tracing::debug!(room = %room.room_id(), ?users, "A member's device changed; rotated the room key.")
                }
                Err(error) => {
                    tracing::warn!(room = %room.room_id(), error = %error, "Could not rotate the room key after a member's device changed.")
                }
            }
        }
    }

    /// The owners of the devices changed since the last call (the bot's own device aside),
    /// without waiting for more.
    fn changed_users(&self) -> BTreeSet<OwnedUserId> {
        let mut users = BTreeSet::new();
        let Ok(mut updates) = self.updates.lock() else {
            return users;
        };
        while let Some(Some(update)) = updates.next().now_or_never() {
            for (user, devices) in update.changed {
                let others = devices
                    .keys()
                    .any(|device| user != self.own_user || *device != self.own_device);
                if others {
                    users.insert(user);
                }
            }
        }
        users
    }
}
