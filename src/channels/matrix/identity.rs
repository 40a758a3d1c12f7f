//! The bot's cross-signing identity and key backup: made at its first login, so its device is
//! signed by its own account (other clients can verify the bot once and trust its devices from
//! then on), and the room keys it receives are kept on the server, readable by a new device of
//! the bot that has the recovery key (a lost store need not mean lost history).
//!
//! `bootstrap_cross_signing_if_needed` does nothing when the account already has an identity
//! (one restored from the recovery key, or made by an earlier login of this home). The first
//! upload of the keys needs the account password on homeservers that ask for it
//! (user-interactive auth); a bot logged in with a token then gets no identity and says so.

use std::path::Path;

use matrix_sdk::Client;
use matrix_sdk::encryption::recovery::RecoveryError;
use matrix_sdk::ruma::api::client::uiaa;

/// Where the recovery key of a backup the bot made is written, in its store.
pub const RECOVERY_KEY_FILE: &str = "recovery-key.txt";

/// Makes the cross-signing identity if the account has none; logs what happened. Never fails
/// the login: without an identity the bot still works, it just cannot be verified.
pub async fn bootstrap(client: &Client, user_id: &str, password: Option<&str>) {
    let encryption = client.encryption();
    let error = match encryption.bootstrap_cross_signing_if_needed(None).await {
        Ok(()) => {
            tracing::info!(
                "Matrix cross-signing identity ready; the bot's device is signed by it."
            );
            return;
        }
        Err(error) => error,
    };
    let (Some(response), Some(password)) = (error.as_uiaa_response(), password) else {
        tracing::warn!(error = %error, "Could not make the bot's cross-signing identity (the homeserver asks for the account password; log in with one): the bot cannot be verified.");
        return;
    };
    let mut auth = uiaa::Password::new(
        uiaa::UserIdentifier::Matrix(uiaa::MatrixUserIdentifier::new(user_id.to_owned())),
        password.to_owned(),
    );
    auth.session = response.session.clone();
    match encryption
        .bootstrap_cross_signing(Some(uiaa::AuthData::Password(auth)))
        .await
    {
        Ok(()) => {
            tracing::info!("Matrix cross-signing identity made; the bot's device is signed by it.")
        }
        Err(error) => {
            tracing::warn!(error = %error, "Could not make the bot's cross-signing identity: the bot cannot be verified.")
        }
    }
}

/// Makes the account's key backup (and the secret storage its recovery key opens) when the
/// account has none, and writes the recovery key to [`RECOVERY_KEY_FILE`] in `store_dir` (the
/// home is private); the log names the file, never the key. Does nothing when a backup exists
/// (this bot's, or one it was given the recovery key of). Never fails the login.
pub async fn backup(client: &Client, store_dir: &Path) {
    let encryption = client.encryption();
    match encryption.backups().fetch_exists_on_server().await {
        Ok(true) => return,
        Ok(false) => {}
        Err(error) => {
            tracing::warn!(error = %error, "Could not ask the homeserver whether the bot has a key backup.");
            return;
        }
    }
    let key = match encryption.recovery().enable().await {
        Ok(key) => key,
        Err(RecoveryError::BackupExistsOnServer) => return,
        Err(error) => {
            tracing::warn!(error = %error, "Could not make the bot's key backup: a new device of the bot will not read older messages.");
            return;
        }
    };
    let path = store_dir.join(RECOVERY_KEY_FILE);
    match crate::storage::atomic::write(&path, format!("{key}\n").as_bytes()) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            "Matrix key backup made. Its recovery key is in this file: keep a copy away from this server, and set channels.matrix.recovery_key_env to it, so a new device of the bot (after a lost store) reads the older messages."
        ),
        Err(error) => tracing::warn!(
            path = %path.display(),
            error = %error,
            "Matrix key backup made, but its recovery key could not be written: older messages will be unreadable to a new device of the bot."
        ),
    }
}
