//! #24: the human side played by an independent Matrix client, matrix-nio with libolm
//! (`scripts/testenv/nio_human.py`, Debian's python3-matrix-nio and python3-olm), in an
//! encrypted DM, as a person on another client would: what the bot does must hold against
//! an implementation it does not share code with.

use crate::matrix::{BotGateway, echo};
use crate::support::matrix_client::Homeserver;
use crate::support::scripted_llm::ScriptedLlm;
use crate::support::testenv;

/// One step of the nio client, whose device lives in `store`.
fn nio(store: &std::path::Path, args: &[&str]) -> String {
    let store = store.to_str().unwrap();
    let mut all = vec![args[0], store];
    all.extend(&args[1..]);
    testenv::run_script("nio_human.py", &all).trim().to_owned()
}

/// 15 encrypted messages sent from nio while the bot is down are all answered, in order,
/// and nio decrypts every answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_independent_client_gets_every_answer_in_an_encrypted_dm_across_a_restart() {
    let hs = Homeserver::shared();
    let (bot, a) = (hs.register("bot"), hs.register("alice"));
    let llm = ScriptedLlm::start().await;
    llm.set_handler(echo);
    let home = tempfile::tempdir().unwrap();
    let extra = format!("    allowlist: [\"{}\"]", a.user_id);
    let gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let store = tempfile::tempdir().unwrap();
    let store = store.path();
    nio(store, &["login", &hs.url, &a.user_id, &a.password]);
    let room = nio(store, &["dm", &bot.user_id]);
    nio(store, &["wait-joined", &room, &bot.user_id]);
    nio(store, &["say", &room, "first"]);
    nio(store, &["replies", &room, &bot.user_id, "1"]);
    gateway.stop().await;

    let sent: Vec<String> = (1..=15).map(|n| format!("while down {n}")).collect();
    let mut say = vec!["say", room.as_str()];
    say.extend(sent.iter().map(String::as_str));
    nio(store, &say);
    let gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let replies: Vec<String> =
        serde_json::from_str(&nio(store, &["replies", &room, &bot.user_id, "16"])).unwrap();
    let mut expected = vec!["**echo** first".to_owned()];
    expected.extend(sent.iter().map(|text| format!("**echo** {text}")));
    assert_eq!(replies, expected);
    assert_eq!(llm.request_count(), 16);
    drop(gateway);
}
