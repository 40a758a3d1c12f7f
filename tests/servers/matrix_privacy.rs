//! The owner's memory stays private in Matrix (#16 item 5), against the real Synapse: a room
//! with the owner and anyone else, encrypted or not, gets no MEMORY.md, USER.md or
//! `memory_write`; the owner's DM gets all three, and so do jobs aimed at it after a restart,
//! when the room's members come from the bot's store.

use crate::matrix::{BotGateway, echo, group_room};
use crate::support::bin::cron_once;
use crate::support::matrix_client::{Homeserver, Human};
use crate::support::scripted_llm::ScriptedLlm;

/// Whether the request answering exactly `text` carried the owner's private memory (see
/// [`crate::support::privacy::private_parts`]).
fn private_parts(llm: &ScriptedLlm, text: &str) -> (bool, bool, bool) {
    crate::support::privacy::private_parts(&llm.requests(), |asked| asked == text)
}

// See: #16 (item 5)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_rooms_prompt_carries_no_private_memory_and_the_owners_dm_does_after_a_restart_too()
{
    let hs = Homeserver::shared();
    let (bot, a, b) = (hs.register("bot"), hs.register("alice"), hs.register("bob"));
    let llm = ScriptedLlm::start().await;
    llm.set_handler(echo);
    let home = tempfile::tempdir().unwrap();
    crate::support::privacy::plant_private_memory(home.path(), "alice's PIN is 4711", "Alice");
    // Alice is the owner; bob may talk to the bot too, in any room.
    let extra = format!(
        "    group_policy: open\n    allowlist: [\"{}\", \"{}\"]\nowner:\n  matrix: [\"{}\"]",
        a.user_id, b.user_id, a.user_id
    );
    let gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    let (alice, bob) = tokio::join!(Human::login(&hs, &a), Human::login(&hs, &b));
    let dm = alice.create_room(&[&bot.user_id], false).await;
    let dm_id = dm.room_id().to_owned();
    alice.wait_joined(&dm_id, &bot.user_id).await;
    let group_id = group_room(&alice, &bob, &bot).await;
    // An encrypted room is judged by its members like any other.
    let secret = alice.create_room(&[&bot.user_id, &b.user_id], true).await;
    let secret_id = secret.room_id().to_owned();
    bob.client.join_room_by_id(&secret_id).await.unwrap();
    alice.wait_joined(&secret_id, &bot.user_id).await;
    alice.wait_joined(&secret_id, &b.user_id).await;

    alice.say(&group_id, "owner in the group").await;
    alice.wait_messages(&group_id, &bot.user_id, 1).await;
    bob.say(&group_id, "bob in the group").await;
    alice.wait_messages(&group_id, &bot.user_id, 2).await;
    alice.say(&secret_id, "owner in the encrypted group").await;
    alice.wait_messages(&secret_id, &bot.user_id, 1).await;
    alice.say(&dm_id, "owner in the dm").await;
    alice.wait_messages(&dm_id, &bot.user_id, 1).await;

    assert_eq!(private_parts(&llm, "owner in the dm"), (true, true, true));
    for text in [
        "owner in the group",
        "bob in the group",
        "owner in the encrypted group",
    ] {
        assert_eq!(private_parts(&llm, text), (false, false, false), "{text}");
    }

    // After a restart the rooms' members come from the store: a job in the DM still gets the
    // memory, one in the group still does not.
    gateway.stop().await;
    let _gateway = BotGateway::start(home.path(), &llm.url(), &hs, &bot, &extra).await;
    cron_once(
        home.path(),
        "dm",
        "job for the dm",
        &format!("matrix:{dm_id}"),
    )
    .await;
    cron_once(
        home.path(),
        "group",
        "job for the group",
        &format!("matrix:{group_id}"),
    )
    .await;
    alice.wait_messages(&dm_id, &bot.user_id, 2).await;
    alice.wait_messages(&group_id, &bot.user_id, 3).await;
    assert_eq!(private_parts(&llm, "job for the dm"), (true, true, true));
    assert_eq!(
        private_parts(&llm, "job for the group"),
        (false, false, false)
    );
}
