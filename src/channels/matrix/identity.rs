//! The bot's cross-signing identity: made at its first login, so its device is signed by its
//! own account and other clients can verify the bot once and trust its devices from then on.
//!
//! `bootstrap_cross_signing_if_needed` does nothing when the account already has an identity
//! (one restored from the recovery key, or made by an earlier login of this home). The first
//! upload of the keys needs the account password on homeservers that ask for it
//! (user-interactive auth); a bot logged in with a token then gets no identity and says so.

use matrix_sdk::Client;
use matrix_sdk::ruma::api::client::uiaa;

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
