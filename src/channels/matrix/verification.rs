//! Interactive verification of the bot, answered by the bot: the owner verifies it from their
//! client with emoji (SAS), in a DM or device to device.
//!
//! Only the owner's requests are answered (`owner.matrix`); anyone else's are logged and left
//! to expire. The bot accepts the request and the emoji method, writes the seven emoji to the
//! log ("compare with your client"), and confirms: the comparison is the owner's to make on
//! their side, where a mismatch cancels the verification for both. When it is done, the
//! owner's client shows the bot verified, and the bot trusts the owner's device.

use futures_util::StreamExt;
use matrix_sdk::Client;
use matrix_sdk::encryption::verification::{
    SasState, SasVerification, Verification, VerificationRequestState,
};
use matrix_sdk::ruma::UserId;
use matrix_sdk::ruma::events::key::verification::request::ToDeviceKeyVerificationRequestEvent;
use matrix_sdk::ruma::events::key::verification::start::ToDeviceKeyVerificationStartEvent;
use matrix_sdk::ruma::events::room::message::{MessageType, OriginalSyncRoomMessageEvent};

use std::sync::Arc;

use crate::channels::owner::OwnerIds;

/// Answers the owner's verification requests on `client` from now on.
pub fn answer_requests(client: &Client, owner: Arc<OwnerIds>) {
    let to_device_owner = owner.clone();
    client.add_event_handler(
        move |event: ToDeviceKeyVerificationRequestEvent, client: Client| {
            let owner = to_device_owner.clone();
            async move {
                let flow = event.content.transaction_id.to_string();
                spawn_request(client, owner, event.sender.to_string(), flow);
            }
        },
    );
    let in_room_owner = owner.clone();
    client.add_event_handler(move |event: OriginalSyncRoomMessageEvent, client: Client| {
        let owner = in_room_owner.clone();
        async move {
            if let MessageType::VerificationRequest(_) = &event.content.msgtype {
                let flow = event.event_id.to_string();
                spawn_request(client, owner, event.sender.to_string(), flow);
            }
        }
    });
    // Clients that start emoji verification without a request first (the older flow).
    client.add_event_handler(
        move |event: ToDeviceKeyVerificationStartEvent, client: Client| {
            let owner = owner.clone();
            async move {
                let sender = event.sender.to_string();
                if !owner.is(&sender) {
                    return;
                }
                let flow = event.content.transaction_id.to_string();
                if let Some(Verification::SasV1(sas)) = client
                    .encryption()
                    .get_verification(&event.sender, &flow)
                    .await
                {
                    tokio::spawn(run_sas(sas, sender));
                }
            }
        },
    );
}

/// Answers one request in a task of its own (the sync goes on meanwhile).
fn spawn_request(client: Client, owner: Arc<OwnerIds>, sender: String, flow: String) {
    if !owner.is(&sender) {
        tracing::info!(
            sender,
            "A Matrix verification request from someone other than the owner; not answered."
        );
        return;
    }
    tokio::spawn(async move {
        let Ok(user) = UserId::parse(&sender) else {
            return;
        };
        let Some(request) = client
            .encryption()
            .get_verification_request(&user, &flow)
            .await
        else {
            return;
        };
        tracing::info!(sender, "The owner asked to verify the bot; accepting.");
        if let Err(error) = request.accept().await {
            tracing::warn!(error = %error, "Could not accept the owner's verification request.");
            return;
        }
        let mut changes = request.changes();
        while let Some(state) = changes.next().await {
            match state {
                VerificationRequestState::Transitioned {
                    verification: Verification::SasV1(sas),
                    ..
                } => {
                    run_sas(sas, sender).await;
                    return;
                }
                VerificationRequestState::Done | VerificationRequestState::Cancelled(_) => return,
                _ => {}
            }
        }
    });
}

/// Takes an emoji verification with the owner to its end.
async fn run_sas(sas: SasVerification, sender: String) {
    if let Err(error) = sas.accept().await {
        tracing::warn!(error = %error, "Could not accept the emoji verification.");
        return;
    }
    let mut changes = sas.changes();
    while let Some(state) = changes.next().await {
        match state {
            SasState::KeysExchanged { .. } => {
                let emoji = sas
                    .emoji()
                    .map(|all| {
                        all.iter()
                            .map(|e| format!("{} {}", e.symbol, e.description))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                let (a, b, c) = sas.decimals().unwrap_or_default();
                tracing::warn!(sender, emoji = %emoji, decimals = %format!("{a} {b} {c}"), "Matrix verification: confirm on your client only if it shows these emoji; cancel there if not.");
                if let Err(error) = sas.confirm().await {
                    tracing::warn!(error = %error, "Could not confirm the emoji verification.");
                    return;
                }
            }
            SasState::Done { .. } => {
                tracing::info!(
                    sender,
                    "Matrix verification done: the owner verified the bot."
                );
                return;
            }
            SasState::Cancelled(info) => {
                tracing::warn!(sender, reason = %info.reason(), "Matrix verification cancelled.");
                return;
            }
            _ => {}
        }
    }
}
