//! Approvals in Matrix (#16 item 2), against the real Synapse: the question goes to the room
//! with a one-time code, someone else's `yes CODE` changes nothing, and the owner's runs the
//! command once.

use crate::matrix::{BotGateway, group_room};
use crate::support::gateway::shell_then_result;
use crate::support::matrix_client::{Homeserver, Human};
use crate::support::scripted_llm::ScriptedLlm;

/// The code in an approval question (`… Answer `yes CODE` …`).
fn code_in(question: &str) -> String {
    let start = question.find("`yes ").expect("a code in the question") + 5;
    question[start..start + 6].to_owned()
}

// See: #16 (item 2)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_owners_yes_in_the_room_runs_the_command_once() {
    let hs = Homeserver::shared();
    let (bot, a, b) = (hs.register("bot"), hs.register("alice"), hs.register("bob"));
    let llm = ScriptedLlm::start().await;
    llm.set_handler(shell_then_result("touch from-matrix.txt"));
    let home = tempfile::tempdir().unwrap();
    // Under `mention`, an answer needs no mention: the question asked for exactly its words.
    let extra = format!(
        "    group_policy: mention\n    allowlist: [\"{}\", \"{}\"]\nowner:\n  matrix: [\"{}\"]",
        a.user_id, b.user_id, a.user_id
    );
    let _gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let (alice, bob) = tokio::join!(Human::login(&hs, &a), Human::login(&hs, &b));
    let room = group_room(&alice, &bob, &bot).await;
    let file = home.path().join("workspace/from-matrix.txt");

    bob.say(&room, &format!("{} please touch the file", bot.localpart))
        .await;
    let seen = alice.wait_messages(&room, &bot.user_id, 1).await;
    let question = seen[0].content.body().to_owned();
    assert!(question.contains("touch from-matrix.txt"), "{question}");
    let code = code_in(&question);
    assert!(!file.exists(), "ran before the answer");

    bob.say(&room, &format!("yes {code}")).await;
    let seen = alice.wait_messages(&room, &bot.user_id, 2).await;
    assert_eq!(
        seen[1].content.body(),
        "Only the owner can answer an approval."
    );
    assert!(!file.exists(), "someone else's yes ran it");

    // The owner's own code in another room is no answer there (#23 item 5): it is an
    // ordinary message of that room, and the command waits on.
    let dm = alice.create_room(&[&bot.user_id], false).await;
    let dm_id = dm.room_id().to_owned();
    alice.wait_joined(&dm_id, &bot.user_id).await;
    alice.say(&dm_id, &format!("yes {code}")).await;
    let in_dm = alice.wait_messages(&dm_id, &bot.user_id, 1).await;
    assert!(
        !in_dm[0].content.body().starts_with("Approved"),
        "{}",
        in_dm[0].content.body()
    );
    assert!(!file.exists(), "a code from another room ran it");

    alice.say(&room, &format!("yes {code}")).await;
    let seen = alice.wait_messages(&room, &bot.user_id, 4).await;
    let bodies: Vec<&str> = seen.iter().map(|m| m.content.body()).collect();
    assert!(
        bodies.contains(&"Approved: `touch from-matrix.txt` runs once."),
        "{bodies:?}"
    );
    assert!(
        bodies.contains(&"result: exit code 0\n(no output)"),
        "{bodies:?}"
    );
    assert!(file.exists());
    // Two for the room's turn, one for the DM's message; the answers were not turns.
    assert_eq!(llm.request_count(), 3, "the answers were not turns");
}

/// #23 item 5: a command built to hide part of itself (a line of four backticks closing a
/// three-backtick fence, a link definition, a substitution, a bidi override) is shown whole in
/// the question's `formatted_body` as a client renders it, and in its plain body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_shows_a_command_that_tries_to_hide_itself_whole() {
    const SNEAKY: &str = "echo ok\n````\n[x]: http://e.org\n$(touch sneaky.txt) \u{202e}gpj.exe";
    let hs = Homeserver::shared();
    let (bot, a) = (hs.register("bot"), hs.register("alice"));
    let llm = ScriptedLlm::start().await;
    llm.set_handler(shell_then_result(SNEAKY));
    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "    allowlist: [\"{}\"]\nowner:\n  matrix: [\"{}\"]",
        a.user_id, a.user_id
    );
    let _gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let alice = Human::login(&hs, &a).await;
    let dm = alice.create_room(&[&bot.user_id], false).await;
    let dm_id = dm.room_id().to_owned();
    alice.wait_joined(&dm_id, &bot.user_id).await;
    alice.say(&dm_id, "run it").await;
    let seen = alice.wait_messages(&dm_id, &bot.user_id, 1).await;
    let plain = seen[0].content.body().to_owned();
    let rendered = crate::matrix::html(&seen[0]);
    assert_eq!(rendered.matches("<pre>").count(), 1, "{rendered}");
    let block = &rendered[rendered.find("<pre>").unwrap()..rendered.find("</pre>").unwrap()];
    for shown in [
        "````",
        "[x]: http://e.org",
        "$(touch sneaky.txt)",
        "\\u{202e}gpj.exe",
    ] {
        assert!(
            block.contains(shown),
            "{shown} not in the code block: {rendered}"
        );
        assert!(
            plain.contains(shown),
            "{shown} not in the plain body: {plain}"
        );
    }
    assert!(!plain.contains('\u{202e}') && !rendered.contains('\u{202e}'));
    let code = code_in(&plain);
    alice.say(&dm_id, &format!("no {code}")).await;
    alice.wait_messages(&dm_id, &bot.user_id, 2).await;
    assert!(!home.path().join("workspace/sneaky.txt").exists());
}
