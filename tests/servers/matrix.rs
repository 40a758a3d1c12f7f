//! The Matrix channel end to end: a real `squidbot gateway` logged in to a real Synapse, and a
//! second real Matrix client (matrix-sdk, end-to-end encryption on) playing the human.
//!
//! Each test registers fresh users and creates its own rooms, so the tests run in parallel on
//! the shared homeserver; the homeserver-restart test starts a private one. Negative checks
//! ("not answered") send the ignored message first and a later answered one second: the
//! channel handles a room's events in order, so once the second reply is there the first one
//! was judged.

use std::time::{Duration, Instant};

use matrix_sdk::attachment::AttachmentConfig;
use matrix_sdk::media::{MediaFormat, MediaRequestParameters};
use matrix_sdk::ruma::events::Mentions;
use matrix_sdk::ruma::events::receipt::ReceiptThread;
use matrix_sdk::ruma::events::receipt::ReceiptType;
use matrix_sdk::ruma::events::relation::Thread;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::events::room::message::{MessageType, Relation, RoomMessageEventContent};
use matrix_sdk::ruma::{OwnedUserId, RoomId};
use serde_json::Value;

use crate::support::matrix_client::{Account, Homeserver, Human, Seen};
use crate::support::scripted_llm::{Reply, ScriptedLlm, last_user_text};
use crate::support::testenv;

pub(crate) use crate::bot_gateway::{BotGateway, MatrixScene};

/// The scripted LLM: `**echo** <last user text>`, after 1.5 s when the text says "slow", and
/// a reply over 16 KB (so it is split) when it says "long".
pub(crate) fn echo(request: &Value) -> Reply {
    let user = last_user_text(request);
    if user.contains("long") {
        return Reply::Text(format!("start {} end", "word ".repeat(5000)));
    }
    let reply = Reply::Text(format!("**echo** {user}"));
    if user.contains("slow") {
        return Reply::Delay {
            ms: 1500,
            then: Box::new(reply),
        };
    }
    reply
}

fn bodies(messages: &[Seen]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.content.body().to_owned())
        .collect()
}

pub(crate) fn html(seen: &Seen) -> String {
    match &seen.content.msgtype {
        MessageType::Text(text) => text
            .formatted
            .as_ref()
            .map(|f| f.body.clone())
            .unwrap_or_default(),
        _ => String::new(),
    }
}

async fn wait_receipt(
    human: &Human,
    room_id: &RoomId,
    user: &str,
    event: &matrix_sdk::ruma::EventId,
) {
    let user: OwnedUserId = user.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let receipt = human
            .room(room_id)
            .load_user_receipt(ReceiptType::Read, ReceiptThread::Unthreaded, &user)
            .await
            .unwrap();
        if receipt.as_ref().is_some_and(|(id, _)| id == event) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no read receipt on {event}: {receipt:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_round_trip_with_html_typing_receipts_threads_splitting_and_files() {
    let Dm {
        alice,
        bot,
        room_id,
        llm,
        home,
        gateway,
    } = Dm::open(false).await;

    // A DM round trip: Markdown rendered as HTML, typing shown while the turn ran, and the
    // read receipt on the message.
    let hello = alice.say(&room_id, "slow hello").await;
    let replies = alice.wait_messages(&room_id, &bot.user_id, 1).await;
    assert_eq!(replies[0].content.body(), "**echo** slow hello");
    assert!(
        html(&replies[0]).contains("<strong>echo</strong>"),
        "{:?}",
        replies[0]
    );
    assert!(
        alice.saw_typing(&room_id, &bot.user_id),
        "the bot showed it was typing"
    );
    wait_receipt(&alice, &room_id, &bot.user_id, &hello).await;

    // A reply stays in the thread it came from.
    let root = alice.say(&room_id, "thread root").await;
    alice.wait_messages(&room_id, &bot.user_id, 2).await;
    let mut threaded = RoomMessageEventContent::text_plain("in the thread");
    threaded.relates_to = Some(Relation::Thread(Thread::plain(root.clone(), root.clone())));
    alice.send(&room_id, threaded).await;
    let replies = alice.wait_messages(&room_id, &bot.user_id, 3).await;
    match &replies[2].content.relates_to {
        Some(Relation::Thread(thread)) => assert_eq!(thread.event_id, root),
        other => panic!("reply not in the thread: {other:?}"),
    }

    // A long reply is split into pieces that together are the whole text.
    alice.say(&room_id, "long please").await;
    let replies = alice.wait_messages(&room_id, &bot.user_id, 5).await;
    let joined = format!(
        "{} {}",
        replies[3].content.body(),
        replies[4].content.body()
    );
    assert!(
        joined.starts_with("start word") && joined.ends_with("word  end"),
        "{joined:.80}"
    );
    assert_eq!(joined.matches("word").count(), 5000);

    // A file in: downloaded into the workspace and offered to the agent by path.
    alice
        .room(&room_id)
        .send_attachment(
            "notes.txt",
            &mime::TEXT_PLAIN,
            b"attached-content-42".to_vec(),
            AttachmentConfig::new(),
        )
        .await
        .unwrap();
    let replies = alice.wait_messages(&room_id, &bot.user_id, 6).await;
    let text = replies[5].content.body().to_owned();
    assert!(
        text.starts_with("**echo** [attachment: notes.txt (text/plain)] → "),
        "{text}"
    );
    let path = text.rsplit("→ ").next().unwrap().trim();
    assert!(
        path.starts_with(
            home.path()
                .join("workspace/attachments/matrix")
                .to_str()
                .unwrap()
        ),
        "{path}"
    );
    assert_eq!(std::fs::read(path).unwrap(), b"attached-content-42");

    // A file out: the agent calls matrix_send_file with a workspace path.
    std::fs::write(home.path().join("workspace/report.txt"), "report-body-7").unwrap();
    llm.enqueue(Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            "c1".into(),
            "matrix_send_file".into(),
            r#"{"path":"report.txt"}"#.into(),
        )],
    });
    llm.enqueue(Reply::Text("sent it".into()));
    alice.say(&room_id, "send me the report").await;
    let replies = alice.wait_messages(&room_id, &bot.user_id, 8).await;
    let file = replies.iter().find_map(|m| match &m.content.msgtype {
        MessageType::File(file) => Some(file.clone()),
        _ => None,
    });
    let file = file.unwrap_or_else(|| panic!("no file from the bot: {:?}", bodies(&replies)));
    assert_eq!(file.body, "report.txt");
    let request = MediaRequestParameters {
        source: file.source,
        format: MediaFormat::File,
    };
    let bytes = alice
        .client
        .media()
        .get_media_content(&request, false)
        .await
        .unwrap();
    assert_eq!(bytes, b"report-body-7");
    assert_eq!(replies[7].content.body(), "sent it");

    let status = gateway.status().await;
    assert_eq!(status["matrix"]["state"], "syncing", "{status}");
    assert!(status["matrix"]["rooms"].as_u64() >= Some(1), "{status}");
    assert!(status["matrix"]["last_sync"].is_string(), "{status}");
}

/// A direct room of alice and the bot (allowlisted, echoing), the bot joined.
pub(crate) struct Dm {
    pub(crate) alice: Human,
    pub(crate) bot: Account,
    pub(crate) room_id: matrix_sdk::ruma::OwnedRoomId,
    pub(crate) llm: ScriptedLlm,
    pub(crate) home: tempfile::TempDir,
    pub(crate) gateway: BotGateway,
}

impl Dm {
    pub(crate) async fn open(encrypted: bool) -> Self {
        let scene = MatrixScene::new(echo).await;
        let gateway = scene.start(&scene.allow_alice()).await;
        let MatrixScene {
            hs,
            bot,
            alice: alice_account,
            llm,
            home,
        } = scene;
        let alice = Human::login(&hs, &alice_account).await;
        let room = alice.create_room(&[&bot.user_id], encrypted).await;
        let room_id = room.room_id().to_owned();
        alice.wait_joined(&room_id, &bot.user_id).await;
        Self {
            alice,
            bot,
            room_id,
            llm,
            home,
            gateway,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_room_is_read_and_answered_encrypted() {
    let dm = Dm::open(true).await;
    let (alice, bot, room_id) = (&dm.alice, &dm.bot, &*dm.room_id);
    alice.say(room_id, "a secret hello").await;
    let replies = alice.wait_messages(room_id, &bot.user_id, 1).await;
    assert_eq!(replies[0].content.body(), "**echo** a secret hello");
    assert!(
        replies[0].encrypted,
        "the reply was sent encrypted and decrypted by the human"
    );
    let history = std::fs::read_dir(dm.home.path().join("sessions"))
        .unwrap()
        .count();
    assert_eq!(history, 1, "one session for the room");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecryptable_message_gets_one_notice_per_room_and_session() {
    let dm = Dm::open(true).await;
    let (alice, bot, room_id, llm) = (&dm.alice, &dm.bot, &*dm.room_id, &dm.llm);
    alice.say(room_id, "hello").await;
    alice.wait_messages(room_id, &bot.user_id, 1).await;
    // Three messages the bot cannot read, in two megolm sessions, then one it can; then one
    // more in a session already reported, and one it can read.
    for session in ["lost-a", "lost-a", "lost-b"] {
        alice.send_undecryptable(room_id, session).await;
    }
    alice.say(room_id, "readable").await;
    alice.send_undecryptable(room_id, "lost-b").await;
    alice.say(room_id, "readable again").await;
    // The notices wait 10 s for late keys: give them time.
    let deadline = Instant::now() + Duration::from_secs(45);
    while !bodies(&alice.messages_from(room_id, &bot.user_id))
        .contains(&"**echo** readable again".to_owned())
    {
        assert!(Instant::now() < deadline, "no echo of the last message");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Read the room's history back (decrypting) rather than trusting the live handler alone;
    // wait for all five, then a second for a stray one.
    let mut from_bot = bot_history(alice, room_id, &bot.user_id).await;
    while from_bot.len() < 5 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        from_bot = bot_history(alice, room_id, &bot.user_id).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let from_bot = bot_history(alice, room_id, &bot.user_id).await;
    let notices = from_bot.iter().filter(|m| m.contains(" m.notice ")).count();
    assert_eq!(notices, 2, "one notice per megolm session: {from_bot:#?}");
    assert!(from_bot.iter().any(|m| m.contains("could not decrypt")));
    assert_eq!(
        from_bot.len(),
        5,
        "two notices, three echoes: {from_bot:#?}"
    );
    let asked = llm.user_texts();
    assert!(
        !asked.contains("lost-session"),
        "nothing undecryptable reached the agent"
    );
}

/// Right after joining, a message the bot cannot decrypt and one it can: the notice goes out
/// while alice's Olm session with the bot is still being set up, and the reply follows at once.
/// Both must stay readable for alice (without `RoomKeys` the SDK re-sent the notice's room key
/// at a later index with the reply, and alice's client kept only that copy: the notice was
/// lost; `matrix_keys` has the general case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_and_a_reply_right_after_joining_an_encrypted_room_both_decrypt() {
    let dm = Dm::open(true).await;
    let (alice, bot, room_id) = (&dm.alice, &dm.bot, &*dm.room_id);
    alice.send_undecryptable(room_id, "lost-first").await;
    alice.say(room_id, "right after").await;
    let readable = |from_bot: &[String]| {
        from_bot.len() == 2 && from_bot.iter().all(|m| m.starts_with("m.room.message "))
    };
    // Room keys travel as to-device messages beside the events: give them time to arrive
    // (the bot itself waits 10 s for a late key before its notice).
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut from_bot = bot_history(alice, room_id, &bot.user_id).await;
    while !readable(&from_bot) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        from_bot = bot_history(alice, room_id, &bot.user_id).await;
    }
    // A later copy of a key could still replace a good one: look again a second later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let from_bot = bot_history(alice, room_id, &bot.user_id).await;
    assert!(readable(&from_bot), "{from_bot:#?}");
    // The reply first: the notice waits for a key that might still come.
    assert_eq!(from_bot[0], "m.room.message m.text **echo** right after");
    assert!(
        from_bot[1].contains(" m.notice I could not decrypt"),
        "{from_bot:#?}"
    );
}

/// The bot's messages in `room_id` as `type msgtype body`, oldest first, read back through
/// `/messages` and decrypted by the human's client (an undecryptable one shows as
/// `m.room.encrypted`).
pub(crate) async fn bot_history(human: &Human, room_id: &RoomId, bot: &str) -> Vec<String> {
    let mut options = matrix_sdk::room::MessagesOptions::backward();
    options.limit = 50u32.into();
    let history = human.room(room_id).messages(options).await.unwrap();
    let mut from_bot = Vec::new();
    for event in history.chunk.iter().rev() {
        let raw = event.raw();
        let kind = raw.get_field::<String>("type").unwrap().unwrap_or_default();
        if raw.get_field::<String>("sender").unwrap().as_deref() != Some(bot)
            || kind == "m.room.member"
        {
            continue;
        }
        let content = raw
            .get_field::<Value>("content")
            .unwrap()
            .unwrap_or_default();
        from_bot.push(format!(
            "{kind} {} {}",
            content["msgtype"].as_str().unwrap_or("-"),
            content["body"].as_str().unwrap_or("-")
        ));
    }
    from_bot
}

/// A group room (alice, bob, the bot) where the bot is already a member.
pub(crate) async fn group_room(
    alice: &Human,
    bob: &Human,
    bot: &Account,
) -> matrix_sdk::ruma::OwnedRoomId {
    let room = alice
        .create_room(&[&bot.user_id, &bob.account.user_id], false)
        .await;
    let room_id = room.room_id().to_owned();
    bob.client.join_room_by_id(&room_id).await.unwrap();
    alice.wait_joined(&room_id, &bot.user_id).await;
    alice.wait_joined(&room_id, &bob.account.user_id).await;
    room_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mention_policy_answers_real_mentions_and_invites_only_from_the_allowlist() {
    let scene = MatrixScene::new(echo).await;
    let MatrixScene {
        hs,
        bot,
        alice: a,
        llm,
        ..
    } = &scene;
    let (b, c) = (hs.register("bob"), hs.register("carol"));
    let extra = format!(
        "    group_policy: mention\n    allowlist: [\"{}\", \"{}\"]",
        a.user_id, b.user_id
    );
    let _gateway = scene.start(&extra).await;
    let (alice, bob, carol) = tokio::join!(
        Human::login(hs, a),
        Human::login(hs, &b),
        Human::login(hs, &c)
    );
    let stranger_room = carol.create_room(&[&bot.user_id], false).await;
    carol.say(stranger_room.room_id(), "hello bot").await;
    let room_id = group_room(&alice, &bob, bot).await;

    alice.say(&room_id, "nobody is mentioned here").await;
    alice
        .say(&room_id, &format!("{}x is a different name", bot.localpart))
        .await;
    alice
        .say(&room_id, &format!("hi {}, how are you?", bot.localpart))
        .await;
    let mut pill = RoomMessageEventContent::text_plain("a pill only");
    pill.mentions = Some(Mentions::with_user_ids([bot.user_id.parse().unwrap()]));
    bob.send(&room_id, pill).await;
    let replies = alice.wait_messages(&room_id, &bot.user_id, 2).await;
    assert_eq!(
        bodies(&replies),
        [
            format!("**echo** hi {}, how are you?", bot.localpart),
            "**echo** a pill only".to_owned()
        ]
    );

    let member = carol
        .room(stranger_room.room_id())
        .get_member_no_sync(&bot.user_id.parse::<OwnedUserId>().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        *member.membership(),
        MembershipState::Invite,
        "a stranger's invite is not joined"
    );
    assert!(
        carol
            .messages_from(stranger_room.room_id(), &bot.user_id)
            .is_empty()
    );
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_and_allowlist_group_policies() {
    let hs = Homeserver::shared();
    let (open_bot, list_bot, a, b) = (
        hs.register("bot"),
        hs.register("bot"),
        hs.register("alice"),
        hs.register("bob"),
    );
    let llm = ScriptedLlm::start().await;
    llm.set_handler(echo);
    let (open_home, list_home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (alice, bob) = tokio::join!(Human::login(&hs, &a), Human::login(&hs, &b));

    // Open to everyone ("*"): no invite is trusted by "*", so the bot account joins by itself.
    let open_room = alice
        .create_room(&[&open_bot.user_id, &b.user_id], false)
        .await;
    let open_id = open_room.room_id().to_owned();
    bob.client.join_room_by_id(&open_id).await.unwrap();
    {
        let itself = Human::login(&hs, &open_bot).await;
        itself.client.join_room_by_id(&open_id).await.unwrap();
    }
    let _open = BotGateway::start(
        open_home.path(),
        &llm.url(),
        &hs,
        &open_bot,
        "    group_policy: open\n    allowlist: [\"*\"]",
    )
    .await;
    bob.say(&open_id, "anyone may talk here").await;
    let replies = alice.wait_messages(&open_id, &open_bot.user_id, 1).await;
    assert_eq!(bodies(&replies), ["**echo** anyone may talk here"]);

    let extra = format!(
        "    group_policy: allowlist\n    allowlist: [\"{}\"]",
        a.user_id
    );
    let _list = BotGateway::start(list_home.path(), &llm.url(), &hs, &list_bot, &extra).await;
    let list_id = group_room(&alice, &bob, &list_bot).await;
    bob.say(&list_id, "bob is not on the list").await;
    alice.say(&list_id, "alice is, without a mention").await;
    let replies = alice.wait_messages(&list_id, &list_bot.user_id, 1).await;
    assert_eq!(bodies(&replies), ["**echo** alice is, without a mention"]);
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_answers_nothing_twice_and_misses_nothing_sent_while_down() {
    let scene = MatrixScene::new(echo).await;
    let MatrixScene { bot, llm, .. } = &scene;
    let extra = scene.allow_alice();
    let gateway = scene.start(&extra).await;
    let alice = scene.login_alice().await;

    // Said before the bot joined: never answered.
    let room = alice.create_room(&[], false).await;
    let room_id = room.room_id().to_owned();
    alice.say(&room_id, "before the bot was here").await;
    alice.invite(&room, &bot.user_id).await;
    alice.wait_joined(&room_id, &bot.user_id).await;
    alice.say(&room_id, "one").await;
    alice.wait_messages(&room_id, &bot.user_id, 1).await;
    gateway.stop().await;

    alice.say(&room_id, "two, while you were down").await;
    let gateway = scene.start(&extra).await;
    alice.wait_messages(&room_id, &bot.user_id, 2).await;
    alice.say(&room_id, "three").await;
    let replies = alice.wait_messages(&room_id, &bot.user_id, 3).await;
    assert_eq!(
        bodies(&replies),
        [
            "**echo** one",
            "**echo** two, while you were down",
            "**echo** three"
        ]
    );
    assert_eq!(llm.request_count(), 3);
    drop(gateway);
}

/// A private Synapse in a temporary directory, stopped on drop.
struct PrivateSynapse {
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivateSynapse {
    fn start() -> (Self, Homeserver) {
        let dir = tempfile::Builder::new()
            .prefix("squidbot-synapse-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let port = crate::support::free_port();
        let synapse = Self { dir, port };
        synapse.up();
        let env = std::fs::read_to_string(synapse.dir.path().join("env")).unwrap();
        let value = |key: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .unwrap()
                .to_owned()
        };
        let hs = Homeserver {
            url: value("SQUIDBOT_TEST_MATRIX_URL"),
            secret: value("SQUIDBOT_TEST_MATRIX_SECRET"),
        };
        (synapse, hs)
    }

    fn up(&self) {
        let dir = self.dir.path().to_str().unwrap();
        testenv::run_script("synapse.sh", &["start", dir, &self.port.to_string()]);
    }

    fn down(&self) {
        testenv::run_script("synapse.sh", &["stop", self.dir.path().to_str().unwrap()]);
    }
}

impl Drop for PrivateSynapse {
    fn drop(&mut self) {
        let _ = std::process::Command::new(testenv::scripts_dir().join("synapse.sh"))
            .args(["stop", self.dir.path().to_str().unwrap()])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_homeserver_restart_mid_run_is_recovered_without_losing_a_message() {
    let (synapse, hs) = tokio::task::spawn_blocking(PrivateSynapse::start)
        .await
        .unwrap();
    let (bot, a) = (hs.register("bot"), hs.register("alice"));
    let llm = ScriptedLlm::start().await;
    llm.set_handler(echo);
    let home = tempfile::tempdir().unwrap();
    // Syncs long-poll for 1 s, so four seconds without one is a stall.
    let extra = format!(
        "    allowlist: [\"{}\"]\n    sync_timeout_seconds: 1",
        a.user_id
    );
    let gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let alice = Human::login(&hs, &a).await;
    let room = alice.create_room(&[&bot.user_id], false).await;
    let room_id = room.room_id().to_owned();
    alice.wait_joined(&room_id, &bot.user_id).await;
    alice.say(&room_id, "before the outage").await;
    alice.wait_messages(&room_id, &bot.user_id, 1).await;
    let pulse = &gateway.status().await["channels"]["matrix"];
    assert_eq!(pulse["stalled"], false, "{pulse}");
    assert_eq!(pulse["stall_after_seconds"], 4.0, "{pulse}");
    assert!(pulse["last_inbound_age_seconds"].is_f64(), "{pulse}");
    assert!(pulse["last_round_age_seconds"].is_f64(), "{pulse}");

    let synapse = tokio::task::spawn_blocking(move || {
        synapse.down();
        synapse
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let status = gateway.status().await;
        if status["matrix"]["state"] == "backing_off" {
            assert!(status["matrix"]["last_error"].is_string(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "never backed off: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The task is alive, but no sync succeeds: the channel is stalled, and says so.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (code, body) = gateway.get("/readyz").await;
        if code == 503 {
            assert!(body.contains("matrix"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "never stalled: {code} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pulse = &gateway.status().await["channels"]["matrix"];
    assert_eq!(pulse["stalled"], true, "{pulse}");
    assert_eq!(
        pulse["state"], "running",
        "the task itself never failed: {pulse}"
    );
    assert!(
        pulse["last_round_age_seconds"].as_f64().unwrap() > 4.0,
        "{pulse}"
    );
    let (_, metrics) = gateway.get("/metrics").await;
    assert!(
        metrics.contains("squidbot_channel_stalled{channel=\"matrix\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squidbot_channel_last_round_age_seconds{channel=\"matrix\"}"),
        "{metrics}"
    );
    let synapse = tokio::task::spawn_blocking(move || {
        synapse.up();
        synapse
    })
    .await
    .unwrap();
    alice.say(&room_id, "after the outage").await;
    let replies = alice.wait_messages(&room_id, &bot.user_id, 2).await;
    assert_eq!(
        bodies(&replies),
        ["**echo** before the outage", "**echo** after the outage"]
    );
    let (code, body) = gateway.get("/readyz").await;
    assert_eq!(code, 200, "syncing again, so ready again: {body}");
    let (_, metrics) = gateway.get("/metrics").await;
    assert!(
        metrics.contains("squidbot_channel_stalled{channel=\"matrix\"} 0"),
        "{metrics}"
    );
    drop(gateway);
    drop(synapse);
}
