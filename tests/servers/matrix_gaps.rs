//! #24: what people send reaches the agent, also when more arrives than one sync returns.
//!
//! A real `squidbot gateway` on the shared Synapse; the human side reads the room's history
//! from the server (`/messages`), not from its own sync, which skips a burst the same way.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::OwnedUserId;
use serde_json::Value;

use crate::matrix::{BotGateway, Dm, MatrixScene, echo};
use crate::support::matrix_client::{Homeserver, Human};
use crate::support::scripted_llm::ScriptedLlm;

/// #24: more messages while the bot is down than one sync returns (Synapse gives 10 and a
/// `limited` timeline): the bot pages back to where it left off and answers all, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifteen_messages_sent_while_down_are_all_answered_in_order() {
    let Dm {
        alice,
        bot,
        room_id,
        llm,
        home,
        gateway,
    } = Dm::open(false).await;
    let room = alice.room(&room_id);
    alice.say(&room_id, "first").await;
    alice.wait_messages(&room_id, &bot.user_id, 1).await;
    gateway.stop().await;

    let sent: Vec<String> = (1..=15).map(|n| format!("while down {n}")).collect();
    for text in &sent {
        alice.say(&room_id, text).await;
    }
    let extra = format!("    allowlist: [\"{}\"]", alice.account.user_id);
    let hs = Homeserver::shared();
    let gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while llm.request_count() < 16 {
        assert!(Instant::now() < deadline, "{} turns", llm.request_count());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The room's history as the server keeps it (a client's own sync may skip a burst of
    // replies the same way the bot's did).
    let mut expected = vec!["**echo** first".to_owned()];
    expected.extend(sent.iter().map(|text| format!("**echo** {text}")));
    let mut replies = Vec::new();
    while Instant::now() < deadline {
        let mut options = MessagesOptions::backward();
        options.limit = 100u32.into();
        let page = room.messages(options).await.unwrap();
        replies = page
            .chunk
            .iter()
            .rev()
            .filter_map(|event| {
                let value: Value = event.raw().deserialize_as().ok()?;
                (value["sender"] == bot.user_id.as_str())
                    .then(|| value["content"]["body"].as_str().map(str::to_owned))
                    .flatten()
            })
            .collect();
        if replies.len() >= expected.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(replies, expected);
    assert_eq!(llm.request_count(), 16);
    drop(gateway);
}

/// The LLM's user messages so far, in order.
fn user_texts(llm: &ScriptedLlm) -> Vec<String> {
    llm.requests()
        .iter()
        .filter_map(|request| {
            request["messages"]
                .as_array()?
                .iter()
                .rev()
                .find(|m| m["role"] == "user")?["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

async fn wait_turns(llm: &ScriptedLlm, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let texts = user_texts(llm);
        if texts.len() >= count {
            return texts;
        }
        assert!(Instant::now() < deadline, "{texts:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// #24 item 3: an edit, a reply without the quoted fallback (as current clients send them)
/// and a file with a caption reach the agent with what they mean, in an encrypted room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_a_reply_without_fallback_and_a_caption_reach_the_agent() {
    let dm = Dm::open(true).await;
    let (alice, a, llm, room_id) = (&dm.alice, &dm.alice.account, &dm.llm, dm.room_id.clone());
    let room = alice.room(&room_id);
    let original = alice.say(&room_id, "meet at 5 at the station").await;
    wait_turns(llm, 1).await;

    let edit = serde_json::json!({
        "msgtype": "m.text",
        "body": "* meet at 6 at the station",
        "m.new_content": {"msgtype": "m.text", "body": "meet at 6 at the station"},
        "m.relates_to": {"rel_type": "m.replace", "event_id": original},
    });
    room.send_raw("m.room.message", edit).await.unwrap();
    let texts = wait_turns(llm, 2).await;
    assert!(texts[1].contains("edited an earlier message"), "{texts:?}");
    assert!(texts[1].contains("meet at 6 at the station"), "{texts:?}");
    assert!(!texts[1].contains("* meet"), "{texts:?}");

    let reply = serde_json::json!({
        "msgtype": "m.text",
        "body": "yes, that one",
        "m.relates_to": {"m.in_reply_to": {"event_id": original}},
    });
    room.send_raw("m.room.message", reply).await.unwrap();
    let texts = wait_turns(llm, 3).await;
    assert!(
        texts[2].contains(&format!(
            "[In reply to {}: «meet at 5 at the station»]",
            a.user_id
        )),
        "{texts:?}"
    );
    assert!(texts[2].ends_with("yes, that one"), "{texts:?}");

    let upload = alice
        .client
        .media()
        .upload(&mime::TEXT_PLAIN, b"minutes".to_vec(), None)
        .await
        .unwrap();
    let caption = serde_json::json!({
        "msgtype": "m.file",
        "body": "the minutes of Monday, please summarize",
        "filename": "minutes.txt",
        "url": upload.content_uri,
        "info": {"mimetype": "text/plain", "size": 7},
    });
    // An encrypted room: the raw content is encrypted by the SDK like any message.
    room.send_raw("m.room.message", caption).await.unwrap();
    let texts = wait_turns(llm, 4).await;
    assert!(
        texts[3].starts_with("the minutes of Monday, please summarize\n[attachment: minutes.txt"),
        "{texts:?}"
    );
    drop(dm);
}

/// #24: a DM's first message, sent after the invite but before the bot joined (it was
/// down), is answered; what was said before the invite is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dms_first_message_sent_before_the_bot_joined_is_answered() {
    let scene = MatrixScene::new(echo).await;
    let MatrixScene { bot, llm, .. } = &scene;
    let extra = scene.allow_alice();
    // The bot has been up once (its device and store exist), and is down now.
    scene.run_once(&extra).await;
    let alice = scene.login_alice().await;
    let room = alice.create_room(&[], true).await;
    let room_id = room.room_id().to_owned();
    alice.say(&room_id, "a note to myself").await;
    alice.invite(&room, &bot.user_id).await;
    alice.say(&room_id, "hello, are you there?").await;
    let gateway = scene.start(&extra).await;
    let texts = wait_turns(llm, 1).await;
    assert_eq!(texts, ["hello, are you there?"]);
    alice.say(&room_id, "and now").await;
    let texts = wait_turns(llm, 2).await;
    assert_eq!(texts, ["hello, are you there?", "and now"]);
    drop(gateway);
}

/// Waits until `/status` reports the Matrix channel broken; its status then. Panics with the
/// gateway's warnings after 30 s.
async fn wait_broken(gateway: &BotGateway, home: &std::path::Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let health = gateway
            .http
            .get(format!("{}/healthz", gateway.base))
            .send()
            .await;
        if health.is_ok_and(|response| response.status() == 200) {
            let status = gateway.status().await;
            if status["channels"]["matrix"]["state"] == "broken" {
                return status["channels"]["matrix"].clone();
            }
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(home.join("gateway.log")).unwrap_or_default();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("ERROR") || l.contains("WARN"))
                .collect();
            panic!("the channel never reported broken:\n{}", lines.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// #24 item 6: a refused login (a wrong password) is reported broken, in `/status` and
/// `/readyz`, and not retried in a loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_login_is_reported_broken_and_not_retried() {
    let mut scene = MatrixScene::answering_ok().await;
    scene.bot.password = "not-the-password".into();
    let home = &scene.home;
    let gateway = scene.spawn("");
    let matrix = wait_broken(&gateway, home.path()).await;
    assert!(
        matrix["last_error"]
            .as_str()
            .unwrap()
            .contains("logging in as"),
        "{matrix}"
    );
    // Time in which the supervisor would have retried twice (1 s, then 2 s).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let readyz = gateway
        .http
        .get(format!("{}/readyz", gateway.base))
        .send()
        .await
        .unwrap();
    assert_eq!(readyz.status(), 503);
    assert!(readyz.text().await.unwrap().contains("matrix"));
    let log = std::fs::read_to_string(home.path().join("gateway.log")).unwrap();
    assert_eq!(log.matches("Channel stopped for good").count(), 1, "{log}");
    assert_eq!(
        log.matches("Channel failed; restarting").count(),
        0,
        "{log}"
    );
    drop(gateway);
}

/// #24 item 1: a lost crypto store (same device id) is reported: `/status` and `/readyz`
/// say the channel is broken and why, instead of "healthy" while nothing can be decrypted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_crypto_store_for_the_same_device_is_reported_broken() {
    let scene = MatrixScene::answering_ok().await;
    let home = scene.home.path();
    scene.run_once("").await;
    let store = home.join("matrix");
    assert!(
        store.is_dir(),
        "{:?}",
        std::fs::read_dir(home).unwrap().collect::<Vec<_>>()
    );
    std::fs::remove_dir_all(&store).unwrap();
    let gateway = scene.spawn("");
    let matrix = wait_broken(&gateway, home).await;
    assert!(
        matrix["last_error"]
            .as_str()
            .unwrap()
            .contains("crypto store does not hold the keys"),
        "{matrix}"
    );
    drop(gateway);
}

/// #24 item 1: a lost crypto store where the bot may recover (a password, no fixed
/// `device_id`): the store is moved aside, the bot logs in as a new device, and an encrypted
/// message to it is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_crypto_store_is_replaced_by_a_new_device_that_answers() {
    let scene = MatrixScene::new(echo).await;
    let MatrixScene { bot, home, .. } = &scene;
    let extra = format!("    device_id: \"\"\n{}", scene.allow_alice());
    scene.run_once(&extra).await;
    let store = home.path().join("matrix");
    let old_device = std::fs::read_to_string(store.join("device_id")).unwrap();
    // The crypto store is lost; the device id file survived (a partial restore).
    for entry in std::fs::read_dir(&store).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "device_id" {
            if path.is_dir() {
                std::fs::remove_dir_all(&path).unwrap();
            } else {
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
    let gateway = scene.start(&extra).await;
    let alice = scene.login_alice().await;
    let room = alice.create_room(&[&bot.user_id], true).await;
    let room_id = room.room_id().to_owned();
    alice.wait_joined(&room_id, &bot.user_id).await;
    alice.say(&room_id, "are you there?").await;
    let replies = alice.wait_messages(&room_id, &bot.user_id, 1).await;
    assert_eq!(replies[0].content.body(), "**echo** are you there?");
    let new_device = std::fs::read_to_string(store.join("device_id")).unwrap();
    assert_ne!(new_device, old_device);
    let aside = std::fs::read_dir(home.path())
        .unwrap()
        .filter_map(|entry| entry.ok())
        .any(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("matrix.lost-")
        });
    assert!(aside, "the old store was not kept aside");
    let log = std::fs::read_to_string(home.path().join("gateway.log")).unwrap();
    assert!(log.contains("logging in as a new device"), "{log}");
    drop(gateway);
}

/// #24 item 2: at its first login the bot makes its key backup, writes the recovery key to its
/// store (never to the log), and that key opens the backup for another device of the bot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_makes_a_key_backup_whose_recovery_key_another_device_can_use() {
    let scene = MatrixScene::answering_ok().await;
    let MatrixScene { hs, bot, home, .. } = &scene;
    let gateway = scene.start("").await;
    let path = home.path().join("matrix/recovery-key.txt");
    let key = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| {
            let log = std::fs::read_to_string(home.path().join("gateway.log")).unwrap_or_default();
            panic!("no recovery key written:\n{log}")
        })
        .trim()
        .to_owned();
    assert!(key.len() > 40, "{key}");
    let log = std::fs::read_to_string(home.path().join("gateway.log")).unwrap();
    assert!(!log.contains(&key), "the recovery key was logged");
    assert!(
        log.contains("recovery-key.txt"),
        "the log does not say where the key is"
    );
    // Another device of the bot's account opens the backup with it.
    let other = Human::login(hs, bot).await;
    let recovery = other.client.encryption().recovery();
    recovery.recover(&key).await.unwrap();
    assert!(
        other.client.encryption().backups().are_enabled().await,
        "the backup is not usable with the key"
    );
    // A restart makes no second backup: the key stays the same.
    gateway.stop().await;
    let gateway = scene.start("").await;
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), key);
    drop(gateway);
}

/// #24 item 2: the bot makes its cross-signing identity at its first login, so another
/// client sees its device signed by its own account (what verifying the bot rests on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_has_a_cross_signing_identity_that_signs_its_device() {
    let scene = MatrixScene::answering_ok().await;
    let bot = &scene.bot;
    let gateway = scene.start("").await;
    let alice = scene.login_alice().await;
    let bot_id: OwnedUserId = bot.user_id.parse().unwrap();
    let identity = alice
        .client
        .encryption()
        .request_user_identity(&bot_id)
        .await
        .unwrap();
    assert!(identity.is_some(), "the bot has no cross-signing identity");
    let device = alice
        .client
        .encryption()
        .get_device(&bot_id, "SQUIDBOTTEST".into())
        .await
        .unwrap()
        .expect("the bot's device is known");
    assert!(
        device.is_cross_signed_by_owner(),
        "the bot's device is not signed by its identity"
    );
    // A restart keeps the identity (no new one, which would break every verification).
    let master = identity
        .unwrap()
        .master_key()
        .get_first_key()
        .map(|k| k.to_base64());
    gateway.stop().await;
    let gateway = scene.start("").await;
    let again = alice
        .client
        .encryption()
        .request_user_identity(&bot_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.master_key().get_first_key().map(|k| k.to_base64()),
        master
    );
    drop(gateway);
}

/// #24 item 2: the owner verifies the bot with emoji from their client. The bot shows the
/// emoji to `squidbot matrix verify` and does not confirm until the owner answers there; with
/// "yes" the owner's client then shows the bot's device verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_verifies_the_bot_with_emoji() {
    use matrix_sdk::encryption::verification::SasState;
    let (scene, gateway, alice, bot_id) = verification_setup().await;
    let home = &scene.home;
    let sas = start_emoji(&alice, &bot_id, home.path()).await;
    let shown = compare_and_confirm(&sas).await;
    // The person confirmed on their side; the bot has not, as nobody answered it yet.
    let waited = tokio::time::timeout(Duration::from_secs(3), async {
        let mut changes = sas.changes();
        while let Some(state) = changes.next().await {
            if let SasState::Done { .. } = state {
                return;
            }
        }
    })
    .await;
    assert!(
        waited.is_err(),
        "the bot confirmed before the owner answered"
    );
    let answered = crate::bot_gateway::verify(home.path(), "y\n");
    let outcome = ended(&sas).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    let output = answered.await.unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    for description in &shown {
        assert!(
            printed.contains(description.as_str()),
            "{description} not in {printed}"
        );
    }
    let encryption = alice.client.encryption();
    let deadline = Instant::now() + Duration::from_secs(10);
    // The outcome is written to the client's store as the flow ends: look for a moment.
    loop {
        let device = encryption
            .get_device(&bot_id, "SQUIDBOTTEST".into())
            .await
            .unwrap()
            .unwrap();
        if device.is_verified() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the bot's device is not verified"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(home.path().join("gateway.log")).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("Matrix verification: compare these emoji"))
        .expect("the bot logged no emoji");
    for description in &shown {
        assert!(
            line.contains(description.as_str()),
            "{description} not in {line}"
        );
    }
    drop(gateway);
}

/// The owner says the emoji differ: the verification is cancelled for both sides and the bot's
/// device stays unverified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emoji_the_owner_says_differ_cancel_the_verification() {
    let (scene, gateway, alice, bot_id) = verification_setup().await;
    let home = &scene.home;
    let answered = crate::bot_gateway::verify(home.path(), "n\n");
    let sas = start_emoji(&alice, &bot_id, home.path()).await;
    // Alice confirms what she sees; the owner at the bot's side said they differ, which may
    // cancel the verification before alice's client has shown the emoji at all.
    let _ = emoji_confirmed(&sas).await;
    let outcome = ended(&sas).await;
    assert!(outcome.is_err(), "the verification was not cancelled");
    let output = answered.await.unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{printed}");
    assert!(printed.contains("cancelled"), "{printed}");
    let device = alice
        .client
        .encryption()
        .get_device(&bot_id, "SQUIDBOTTEST".into())
        .await
        .unwrap()
        .unwrap();
    assert!(!device.is_verified());
    drop(gateway);
}

/// A gateway whose owner is alice, and alice in a DM with the bot (sharing a room is how each
/// side learns the other's devices).
async fn verification_setup() -> (MatrixScene, BotGateway, Human, OwnedUserId) {
    let scene = MatrixScene::answering_ok().await;
    let extra = format!(
        "{}\nowner:\n  matrix: [\"{}\"]",
        scene.allow_alice(),
        scene.alice.user_id
    );
    let gateway = scene.start(&extra).await;
    let alice = scene.login_alice().await;
    let bot = &scene.bot;
    let bot_id: OwnedUserId = bot.user_id.parse().unwrap();
    let room = alice.create_room(&[], true).await;
    alice.invite(&room, &bot.user_id).await;
    alice.wait_joined(room.room_id(), &bot.user_id).await;
    (scene, gateway, alice, bot_id)
}

/// Alice asks to verify the bot's device and starts emoji once the bot accepted.
async fn start_emoji(
    alice: &Human,
    bot_id: &OwnedUserId,
    home: &std::path::Path,
) -> matrix_sdk::encryption::verification::SasVerification {
    use matrix_sdk::encryption::verification::VerificationRequestState;
    let encryption = alice.client.encryption();
    // Fetches the bot's keys (a client does so before it shows a user's devices).
    encryption.request_user_identity(bot_id).await.unwrap();
    let device = encryption
        .get_device(bot_id, "SQUIDBOTTEST".into())
        .await
        .unwrap()
        .expect("the bot's device is known");
    assert!(!device.is_verified());
    let request = device.request_verification().await.unwrap();
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        let mut changes = request.changes();
        while let Some(state) = changes.next().await {
            match state {
                VerificationRequestState::Ready { .. } => return true,
                VerificationRequestState::Cancelled(info) => panic!("{}", info.reason()),
                _ => {}
            }
        }
        false
    })
    .await
    .unwrap_or_else(|_| {
        let log = std::fs::read_to_string(home.join("gateway.log")).unwrap_or_default();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.to_lowercase().contains("verif") || l.contains("WARN"))
            .collect();
        panic!("the bot never accepted the request:\n{}", lines.join("\n"))
    });
    assert!(ready);
    request.start_sas().await.unwrap().expect("emoji offered")
}

/// Waits for the emoji and confirms them on alice's side; returns their descriptions.
async fn compare_and_confirm(
    sas: &matrix_sdk::encryption::verification::SasVerification,
) -> Vec<String> {
    emoji_confirmed(sas)
        .await
        .unwrap_or_else(|reason| panic!("cancelled before the emoji: {reason}"))
}

/// As [`compare_and_confirm`], or `Err(reason)` when the verification was cancelled before
/// alice saw the emoji: the bot's key and its owner's "they differ" can reach alice in one
/// sync, and the state stream then yields only the last state, `Cancelled`.
async fn emoji_confirmed(
    sas: &matrix_sdk::encryption::verification::SasVerification,
) -> Result<Vec<String>, String> {
    use matrix_sdk::encryption::verification::SasState;
    tokio::time::timeout(Duration::from_secs(30), async {
        let mut changes = sas.changes();
        while let Some(state) = changes.next().await {
            match state {
                SasState::KeysExchanged { .. } => {
                    let emoji = sas.emoji().unwrap();
                    let shown = emoji.iter().map(|e| e.description.to_owned()).collect();
                    sas.confirm().await.unwrap();
                    return Ok(shown);
                }
                SasState::Cancelled(info) => return Err(info.reason().to_owned()),
                _ => {}
            }
        }
        panic!("the emoji never came")
    })
    .await
    .expect("the emoji never came")
}

/// How the verification ended: `Ok` done, `Err(reason)` cancelled.
async fn ended(sas: &matrix_sdk::encryption::verification::SasVerification) -> Result<(), String> {
    use matrix_sdk::encryption::verification::SasState;
    if sas.is_done() {
        return Ok(());
    }
    if let Some(info) = sas.cancel_info() {
        return Err(info.reason().to_owned());
    }
    tokio::time::timeout(Duration::from_secs(30), async {
        let mut changes = sas.changes();
        while let Some(state) = changes.next().await {
            match state {
                SasState::Done { .. } => return Ok(()),
                SasState::Cancelled(info) => return Err(info.reason().to_owned()),
                _ => {}
            }
        }
        Err("the flow ended without an outcome".to_owned())
    })
    .await
    .expect("the verification never ended")
}

/// A gap longer than the bot pages back over (500 events) is said in the room: whoever asked
/// something in the part it could not read knows to ask again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_longer_than_the_bot_reads_back_is_said_in_the_room() {
    let hs = Homeserver::shared();
    let (bot, a, b) = (hs.register("bot"), hs.register("alice"), hs.register("bob"));
    let llm = ScriptedLlm::start().await;
    llm.set_handler(echo);
    let home = tempfile::tempdir().unwrap();
    let extra = format!("    allowlist: [\"{}\"]", a.user_id);
    let gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let alice = Human::login(&hs, &a).await;
    let room = alice.create_room(&[&bot.user_id, &b.user_id], false).await;
    let room_id = room.room_id().to_owned();
    alice.wait_joined(&room_id, &bot.user_id).await;
    let bob = Human::login_idle(&hs, &b).await;
    bob.client.join_room_by_id(&room_id).await.unwrap();
    gateway.stop().await;
    // Chatter the bot is not asked to answer (bob is not in the allowlist): only the gap's
    // length matters.
    for n in 0..520 {
        bob.say(&room_id, &format!("chatter {n}")).await;
    }
    let gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let said = alice.wait_messages(&room_id, &bot.user_id, 1).await;
    let body = said[0].content.body();
    assert!(
        body.contains("could read back only the last 500 events"),
        "{body}"
    );
    drop(gateway);
}
