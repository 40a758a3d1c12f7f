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

use std::path::{Path, PathBuf};

use matrix_sdk::Client;
use matrix_sdk::ruma::api::client::keys::get_keys;
use matrix_sdk::store::StateStoreDataKey;

use super::MatrixError;
use crate::config::MatrixConfig;
use crate::core::ports::channel::ChannelError;

/// The channel's name, for its errors.
const NAME: &str = "matrix";

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

/// The SDK's record of a refused one-time-key upload, and with `compare_keys` (one request,
/// made once per start) the server's ed25519 key of the logged-in device against the store's.
pub async fn check(client: &Client, compare_keys: bool) -> StoreCheck {
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
    if !compare_keys {
        return StoreCheck::Unknown;
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

/// After one of the first syncs: the store's keys must be the ones the server has for the
/// device (see the module docs). A mismatch with a password login and no configured device
/// id moves the store aside (the channel's restart logs in as a new device); otherwise it is
/// a permanent error.
pub async fn check_or_renew(
    client: &Client,
    compare_keys: bool,
    config: &MatrixConfig,
    store_dir: &Path,
) -> Result<(), ChannelError> {
    let StoreCheck::Mismatch { device } = check(client, compare_keys).await else {
        return Ok(());
    };
    let can_renew = config.access_token.is_empty() && config.device_id.is_empty();
    if !can_renew {
        let error = MatrixError::StoreMismatch { device };
        tracing::error!(error = %error, "Matrix channel cannot decrypt.");
        return Err(ChannelError::permanent(NAME, error));
    }
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    let mut aside = store_dir.as_os_str().to_owned();
    aside.push(format!(".lost-{stamp}"));
    let aside = PathBuf::from(aside);
    if let Err(source) = std::fs::rename(store_dir, &aside) {
        let error = MatrixError::StoreDir {
            path: store_dir.to_owned(),
            error: source,
        };
        return Err(ChannelError::permanent(NAME, error));
    }
    let error = MatrixError::NewDevice { device, aside };
    tracing::warn!(error = %error, "Matrix crypto store replaced; logging in as a new device. Remove the old device from the account in your client.");
    Err(ChannelError::new(NAME, error))
}
