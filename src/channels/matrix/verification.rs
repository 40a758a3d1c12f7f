//! Interactive verification of the bot, answered by the bot: the owner verifies it from their
//! client with emoji (SAS), in a DM or device to device.
//!
//! Only the owner's requests are answered (`owner.matrix`); anyone else's are logged and left
//! to expire. The bot accepts the request and the emoji method, writes the seven emoji to the
//! log and to the [`Desk`], and waits: the owner runs `squidbot matrix verify` on the server,
//! compares the emoji there with their client's, and answers. Only then does the bot confirm
//! (or cancel on a mismatch); confirming unseen would let a device in the middle be trusted.
//! When it is done, the owner's client shows the bot verified, and the bot trusts the owner's
//! device.

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
use std::time::Duration;

use super::verification_desk::{Desk, Pending, Stage};
use crate::channels::owner::OwnerIds;

/// How often the bot looks for the owner's answer while a comparison is open.
const ANSWER_POLL: Duration = Duration::from_millis(250);

/// Answers the owner's verification requests on `client` from now on, with `desk` where the
/// owner compares the emoji.
pub fn answer_requests(client: &Client, owner: Arc<OwnerIds>, desk: Desk) {
    desk.clear();
    let to_device = (owner.clone(), desk.clone());
    client.add_event_handler(
        move |event: ToDeviceKeyVerificationRequestEvent, client: Client| {
            let (owner, desk) = to_device.clone();
            async move {
                let flow = event.content.transaction_id.to_string();
                spawn_request(client, owner, desk, event.sender.to_string(), flow);
            }
        },
    );
    let in_room = (owner.clone(), desk.clone());
    client.add_event_handler(move |event: OriginalSyncRoomMessageEvent, client: Client| {
        let (owner, desk) = in_room.clone();
        async move {
            if let MessageType::VerificationRequest(_) = &event.content.msgtype {
                let flow = event.event_id.to_string();
                spawn_request(client, owner, desk, event.sender.to_string(), flow);
            }
        }
    });
    // Clients that start emoji verification without a request first (the older flow).
    client.add_event_handler(
        move |event: ToDeviceKeyVerificationStartEvent, client: Client| {
            let (owner, desk) = (owner.clone(), desk.clone());
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
                    tokio::spawn(run_sas(sas, sender, desk, flow));
                }
            }
        },
    );
}

/// Answers one request in a task of its own (the sync goes on meanwhile).
fn spawn_request(client: Client, owner: Arc<OwnerIds>, desk: Desk, sender: String, flow: String) {
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
                    run_sas(sas, sender, desk, flow).await;
                    return;
                }
                VerificationRequestState::Done | VerificationRequestState::Cancelled(_) => return,
                _ => {}
            }
        }
    });
}

/// Takes an emoji verification with the owner to its end: the emoji are published to `desk`
/// and the bot confirms only when the owner says they match.
async fn run_sas(sas: SasVerification, sender: String, desk: Desk, flow: String) {
    if let Err(error) = sas.accept().await {
        tracing::warn!(error = %error, "Could not accept the emoji verification.");
        return;
    }
    let mut changes = sas.changes();
    let mut poll = tokio::time::interval(ANSWER_POLL);
    let mut comparing = false;
    loop {
        let state = tokio::select! {
            state = changes.next() => state,
            _ = poll.tick(), if comparing => {
                let Some(matches) = desk.take_answer(&flow) else {
                    continue;
                };
                comparing = false;
                let sent = if matches {
                    tracing::info!(sender, "The owner says the emoji match; confirming.");
                    sas.confirm().await
                } else {
                    tracing::warn!(sender, "The owner says the emoji do not match; cancelling the verification.");
                    sas.mismatch().await
                };
                if let Err(error) = sent {
                    tracing::warn!(error = %error, "Could not answer the emoji verification.");
                }
                continue;
            }
        };
        match state {
            Some(SasState::KeysExchanged { .. }) => {
                let emoji: Vec<String> = sas
                    .emoji()
                    .map(|all| {
                        all.iter()
                            .map(|e| format!("{} {}", e.symbol, e.description))
                            .collect()
                    })
                    .unwrap_or_default();
                let (a, b, c) = sas.decimals().unwrap_or_default();
                let decimals = format!("{a} {b} {c}");
                tracing::warn!(sender, emoji = %emoji.join(", "), decimals, "Matrix verification: compare these emoji with your client's, then run `squidbot matrix verify` on the server to confirm or cancel.");
                let pending = Pending {
                    flow: flow.clone(),
                    sender: sender.clone(),
                    emoji,
                    decimals,
                    published: chrono::Utc::now().to_rfc3339(),
                    stage: Stage::Compare,
                    reason: None,
                };
                match desk.publish(&pending) {
                    Ok(()) => comparing = true,
                    Err(error) => {
                        tracing::warn!(error = %error, "Could not publish the emoji for `squidbot matrix verify`; cancelling.");
                        let _ = sas.cancel().await;
                    }
                }
            }
            Some(SasState::Done { .. }) => {
                tracing::info!(
                    sender,
                    "Matrix verification done: the owner verified the bot."
                );
                desk.finish(&flow, Stage::Done, None);
                return;
            }
            Some(SasState::Cancelled(info)) => {
                tracing::warn!(sender, reason = %info.reason(), "Matrix verification cancelled.");
                desk.finish(&flow, Stage::Cancelled, Some(info.reason().to_owned()));
                return;
            }
            Some(_) => {}
            None => return,
        }
    }
}
