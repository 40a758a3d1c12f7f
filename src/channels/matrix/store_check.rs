//! Whether the crypto store still belongs to the device it logs in as.
//!
//! A store that was lost or replaced (a restored backup of another home, a deleted store
//! directory) makes new keys for a device the server already knows. Synapse takes the new
//! identity keys but refuses the new one-time keys ("One time key … already exists"): other
//! devices keep claiming the old ones, their Olm messages (and so every room key) cannot be
//! decrypted, and the bot reads nothing while every status says it is healthy. The first
//! syncs (which upload the keys) are followed by a check: the SDK's record of a refused
//! one-time-key upload, and the server's ed25519 key of the device against the store's. A
//! mismatch is reported, and the channel recovers where it can: with a password it moves the
//! store aside and logs in as a new device (keys from the backup when `recovery_key` is set),
//! with a token (which names one device) the channel is broken until a new token is
//! configured.

use matrix_sdk::Client;
use matrix_sdk::ruma::api::client::keys::get_keys;
use matrix_sdk::store::StateStoreDataKey;

/// What the server says about the bot's own device keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreCheck {
    /// The server's ed25519 key of this device is the store's.
    Matches,
    /// The server holds other keys for this device: the store is not the one that
    /// registered it.
    Mismatch {
        /// The device id.
        device: String,
    },
    /// It could not be checked (the query failed, or the server has no keys yet).
    Unknown,
}

/// Compares the server's ed25519 key of the logged-in device with the store's.
pub async fn check(client: &Client) -> StoreCheck {
    let (Some(user), Some(device)) = (client.user_id(), client.device_id()) else {
        return StoreCheck::Unknown;
    };
    // Recorded by the SDK when the server refused an upload of one-time keys it already had.
    let refused = client
        .state_store()
        .get_kv_data(StateStoreDataKey::OneTimeKeyAlreadyUploaded)
        .await;
    if matches!(refused, Ok(Some(_))) {
        return StoreCheck::Mismatch {
            device: device.to_string(),
        };
    }
    let Some(ours) = client.encryption().ed25519_key().await else {
        return StoreCheck::Unknown;
    };
    let mut request = get_keys::v3::Request::new();
    request
        .device_keys
        .insert(user.to_owned(), vec![device.to_owned()]);
    let response = match client.send(request).await {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(error = %error, "Could not query the bot's own device keys.");
            return StoreCheck::Unknown;
        }
    };
    let Some(keys) = response
        .device_keys
        .get(user)
        .and_then(|devices| devices.get(device))
        .and_then(|raw| raw.deserialize().ok())
    else {
        return StoreCheck::Unknown;
    };
    let theirs = keys
        .keys
        .iter()
        .find(|(id, _)| id.algorithm().as_str() == "ed25519")
        .map(|(_, key)| key.clone());
    tracing::debug!(ours, theirs = ?theirs, "Compared the bot's device keys with the server's.");
    match theirs {
        Some(theirs) if theirs == ours => StoreCheck::Matches,
        Some(_) => StoreCheck::Mismatch {
            device: device.to_string(),
        },
        None => StoreCheck::Unknown,
    }
}
