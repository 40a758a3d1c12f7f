//! #24: the human side played by an independent Matrix client, matrix-nio with libolm
//! (`scripts/testenv/nio_human.py`, Debian's python3-matrix-nio and python3-olm), in an
//! encrypted DM, as a person on another client would: what the bot does must hold against
//! an implementation it does not share code with.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::matrix::{BotGateway, MatrixScene, echo};
use crate::support::matrix_client::Homeserver;
use crate::support::scripted_llm::{Reply, ScriptedLlm};
use crate::support::testenv;

/// Waits (30 s at most) until the gateway's log in `home` holds one of `lines`.
async fn logged(home: &Path, lines: &[&str]) {
    let log = home.join("gateway.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if lines.iter().any(|line| text.contains(line)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the gateway never logged one of {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One step of the nio client, whose device lives in `store`.
pub(crate) fn nio(store: &std::path::Path, args: &[&str]) -> String {
    let store = store.to_str().unwrap();
    let mut all = vec![args[0], store];
    all.extend(&args[1..]);
    testenv::run_script("nio_human.py", &all).trim().to_owned()
}

/// A bot gateway and nio as alice in an encrypted DM with it, after one exchange ("first"
/// answered).
struct NioDm {
    scene: MatrixScene,
    extra: String,
    gateway: Option<BotGateway>,
    store: tempfile::TempDir,
    room: String,
}

impl NioDm {
    async fn open() -> Self {
        let scene = MatrixScene::new(echo).await;
        let MatrixScene {
            hs, bot, alice: a, ..
        } = &scene;
        let extra = scene.allow_alice();
        let gateway = scene.start(&extra).await;
        let store = tempfile::tempdir().unwrap();
        nio(store.path(), &["login", &hs.url, &a.user_id, &a.password]);
        let room = nio(store.path(), &["dm", &bot.user_id]);
        nio(store.path(), &["wait-joined", &room, &bot.user_id]);
        nio(store.path(), &["say", &room, "first"]);
        nio(store.path(), &["replies", &room, &bot.user_id, "1"]);
        Self {
            scene,
            extra,
            gateway: Some(gateway),
            store,
            room,
        }
    }

    async fn restart_after(&mut self, while_down: impl FnOnce()) {
        if let Some(gateway) = self.gateway.take() {
            gateway.stop().await;
        }
        while_down();
        let gateway = self.scene.start(&self.extra).await;
        self.gateway = Some(gateway);
    }
}

/// 15 encrypted messages sent from nio while the bot is down are all answered, in order,
/// and nio decrypts every answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_independent_client_gets_every_answer_in_an_encrypted_dm_across_a_restart() {
    let mut dm = NioDm::open().await;
    let (store, room, bot_id) = (
        dm.store.path().to_owned(),
        dm.room.clone(),
        dm.scene.bot.user_id.clone(),
    );
    let sent: Vec<String> = (1..=15).map(|n| format!("while down {n}")).collect();
    let mut say = vec!["say", room.as_str()];
    say.extend(sent.iter().map(String::as_str));
    dm.restart_after(|| {
        nio(&store, &say);
    })
    .await;
    let replies: Vec<String> =
        serde_json::from_str(&nio(&store, &["replies", &room, &bot_id, "16"])).unwrap();
    let mut expected = vec!["**echo** first".to_owned()];
    expected.extend(sent.iter().map(|text| format!("**echo** {text}")));
    assert_eq!(replies, expected);
    assert_eq!(dm.scene.llm.request_count(), 16);
}

/// A room key that reaches the bot seconds after its message (a slow client): the message
/// is answered once the key is there, and no notice claims it was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_whose_key_arrives_seconds_late_is_answered() {
    let dm = NioDm::open().await;
    let (store, room, bot_id) = (
        dm.store.path(),
        dm.room.as_str(),
        dm.scene.bot.user_id.as_str(),
    );
    nio(store, &["say-late-key", room, "4", "sent before its key"]);
    let replies: Vec<String> =
        serde_json::from_str(&nio(store, &["replies", room, bot_id, "2"])).unwrap();
    assert_eq!(replies, ["**echo** first", "**echo** sent before its key"]);
    let log = std::fs::read_to_string(dm.scene.home.path().join("gateway.log")).unwrap();
    assert!(
        log.contains("A Matrix message decrypted once its key arrived"),
        "the key was not late after all"
    );
    // Past the bot's notice delay: still no notice that it could not decrypt.
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    let replies: Vec<String> =
        serde_json::from_str(&nio(store, &["replies", room, bot_id, "2"])).unwrap();
    assert_eq!(replies.len(), 2, "{replies:?}");
}

/// The owner verifies the bot with emoji from nio (the older start-without-request flow):
/// the bot answers, `squidbot matrix verify` shows the same emoji and the owner says yes there,
/// and nio then holds the bot's device as verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_verifies_the_bot_with_emoji_from_nio() {
    let hs = Homeserver::shared();
    let (bot, a) = (hs.register("bot"), hs.register("alice"));
    let llm = ScriptedLlm::start().await;
    llm.set_handler(echo);
    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "    allowlist: [\"{0}\"]\nowner:\n  matrix: [\"{0}\"]",
        a.user_id
    );
    let gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let store = tempfile::tempdir().unwrap();
    let store = store.path();
    nio(store, &["login", &hs.url, &a.user_id, &a.password]);
    let room = nio(store, &["dm", &bot.user_id]);
    nio(store, &["wait-joined", &room, &bot.user_id]);
    nio(store, &["say", &room, "hello"]);
    nio(store, &["replies", &room, &bot.user_id, "1"]);
    let answered = crate::bot_gateway::verify(home.path(), "y\n");
    let outcome: serde_json::Value =
        serde_json::from_str(&nio(store, &["verify", &bot.user_id, "SQUIDBOTTEST"])).unwrap();
    assert_eq!(outcome["verified"], true, "{outcome}");
    let output = answered.await.unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).replace('\u{fe0f}', "");
    assert!(output.status.success(), "{printed}");
    // The symbols, as both sides draw them (nio's descriptions differ from the spec's).
    for symbol in outcome["emoji"].as_array().unwrap() {
        let symbol = symbol.as_str().unwrap().replace('\u{fe0f}', "");
        assert!(printed.contains(&symbol), "{symbol} not in {printed}");
    }
    drop(gateway);
}

/// A message still waiting for its key when the bot restarts is kept across the restart and
/// answered once the key arrives (the sync token had moved past it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_waiting_for_its_key_across_a_restart_is_answered() {
    let mut dm = NioDm::open().await;
    let (store, room, bot_id) = (
        dm.store.path().to_owned(),
        dm.room.clone(),
        dm.scene.bot.user_id.clone(),
    );
    // The key goes out 6 s after the message; the bot restarts in between.
    let script = testenv::scripts_dir().join("nio_human.py");
    let mut late = std::process::Command::new(script)
        .args([
            "say-late-key",
            store.to_str().unwrap(),
            &room,
            "6",
            "said across a restart",
        ])
        .spawn()
        .unwrap();
    logged(
        dm.scene.home.path(),
        &["cannot be decrypted yet; kept for its key"],
    )
    .await;
    dm.restart_after(|| {}).await;
    assert!(late.wait().unwrap().success());
    let replies: Vec<String> =
        serde_json::from_str(&nio(&store, &["replies", &room, &bot_id, "2"])).unwrap();
    assert_eq!(
        replies,
        ["**echo** first", "**echo** said across a restart"]
    );
}

/// #24 item 3: a message edited before the bot answered it is answered as edited, once, as if
/// the person had written it so. Sent from nio while the bot is down, the message and its edit
/// come back in one batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_sent_while_the_bot_is_down_takes_its_messages_place() {
    let mut dm = NioDm::open().await;
    let (store, room, bot_id) = (
        dm.store.path().to_owned(),
        dm.room.clone(),
        dm.scene.bot.user_id.clone(),
    );
    dm.restart_after(|| {
        let ids: Vec<String> =
            serde_json::from_str(&nio(&store, &["say", &room, "meet at 5 at the station"]))
                .unwrap();
        nio(
            &store,
            &["edit", &room, &ids[0], "meet at 6 at the station"],
        );
    })
    .await;
    let replies: Vec<String> =
        serde_json::from_str(&nio(&store, &["replies", &room, &bot_id, "2"])).unwrap();
    assert_eq!(replies[1], "**echo** meet at 6 at the station");
    only_the_edit_was_answered(&dm.scene.llm).await;
}

/// The same while the bot is busy: the message waits behind a turn when its edit comes, so the
/// edit takes its place in the queue. The turn ahead is held open until the bot has the edit
/// (a gate, not a time), so a slow nio or server cannot let the message be answered first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_of_a_message_waiting_for_its_turn_takes_its_place() {
    let dm = NioDm::open().await;
    let gate = Arc::new(Notify::new());
    let held = Arc::clone(&gate);
    dm.scene.llm.set_handler(move |request| {
        let last_user = request["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str());
        if last_user == Some("hold on") {
            return Reply::Hold {
                text: String::new(),
                gate: Arc::clone(&held),
                rest: "**echo** hold on".to_owned(),
            };
        }
        echo(request)
    });
    let (store, room, bot_id) = (
        dm.store.path(),
        dm.room.as_str(),
        dm.scene.bot.user_id.as_str(),
    );
    nio(store, &["say", room, "hold on"]);
    let ids: Vec<String> =
        serde_json::from_str(&nio(store, &["say", room, "meet at 5 at the station"])).unwrap();
    nio(store, &["edit", room, &ids[0], "meet at 6 at the station"]);
    // The router put the edit in its waiting message's place; or, had the message and its
    // edit come in one sync batch, the channel skipped the message for its edit.
    logged(
        dm.scene.home.path(),
        &[
            "A message was edited before its turn; the edit takes its place.",
            "A Matrix message edited before it was answered; its edit is answered instead.",
        ],
    )
    .await;
    gate.notify_one();
    let replies: Vec<String> =
        serde_json::from_str(&nio(store, &["replies", room, bot_id, "3"])).unwrap();
    assert_eq!(
        replies[1..],
        ["**echo** hold on", "**echo** meet at 6 at the station"]
    );
    only_the_edit_was_answered(&dm.scene.llm).await;
}

/// The LLM never saw the text before the edit, nor a note calling the edit a correction.
async fn only_the_edit_was_answered(llm: &ScriptedLlm) {
    // Time for a wrongly queued turn to show up.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let seen = llm.user_texts();
    assert!(!seen.contains("meet at 5"), "{seen}");
    assert!(!seen.contains("edited"), "{seen}");
    assert_eq!(seen.matches("meet at 6").count(), 1, "{seen}");
}

/// #24 item 3 from nio: a reply without the quoted fallback carries what it replies to, and
/// an encrypted file's caption travels with the file, whose bytes are saved decrypted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_without_fallback_and_a_captioned_file_from_nio_reach_the_agent() {
    let dm = NioDm::open().await;
    let (store, room, bot_id) = (
        dm.store.path(),
        dm.room.as_str(),
        dm.scene.bot.user_id.as_str(),
    );
    let ids: Vec<String> =
        serde_json::from_str(&nio(store, &["say", room, "meet at 5 at the station"])).unwrap();
    nio(store, &["reply", room, &ids[0], "yes, that one"]);
    nio(store, &["replies", room, bot_id, "3"]);
    let texts = dm.scene.llm.user_texts();
    let reply = texts
        .lines()
        .rev()
        .find(|l| l.contains("In reply to"))
        .unwrap_or_default();
    assert!(reply.contains("«meet at 5 at the station»"), "{texts}");
    assert!(texts.contains("yes, that one"), "{texts}");

    let file = store.join("minutes.txt");
    std::fs::write(&file, "minutes of Monday: budget approved").unwrap();
    nio(
        store,
        &[
            "send-file",
            room,
            file.to_str().unwrap(),
            "please summarize",
        ],
    );
    nio(store, &["replies", room, bot_id, "4"]);
    let requests = dm.scene.llm.requests();
    let last = crate::support::scripted_llm::last_user_text(requests.last().unwrap());
    assert!(
        last.starts_with("please summarize\n[attachment: minutes.txt"),
        "{last}"
    );
    // Where the agent was told the file is.
    let saved = last
        .split(" → ")
        .nth(1)
        .unwrap_or_else(|| panic!("no saved path: {last}"))
        .trim();
    assert_eq!(
        std::fs::read_to_string(saved).unwrap(),
        "minutes of Monday: budget approved"
    );
}

/// #24 item 1 from nio: a DM whose first (encrypted) message is sent while the bot is down,
/// after the invite and before the bot joined, is answered once the bot is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dms_first_message_from_nio_before_the_bot_joined_is_answered() {
    let scene = MatrixScene::new(echo).await;
    let MatrixScene {
        hs, bot, alice: a, ..
    } = &scene;
    let extra = scene.allow_alice();
    // The bot has been up once (its device and keys are on the server), and is down now.
    scene.run_once(&extra).await;
    let store = tempfile::tempdir().unwrap();
    let store = store.path();
    nio(store, &["login", &hs.url, &a.user_id, &a.password]);
    let room = nio(store, &["dm", &bot.user_id]);
    nio(store, &["say", &room, "hello before you joined"]);
    let gateway = scene.start(&extra).await;
    let replies: Vec<String> =
        serde_json::from_str(&nio(store, &["replies", &room, &bot.user_id, "1"])).unwrap();
    assert_eq!(replies, ["**echo** hello before you joined"]);
    drop(gateway);
}
