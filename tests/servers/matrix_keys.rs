//! Room keys when the bot and a member's device meet for the first time, against real Synapse.
//!
//! The bot's first messages in a room it just joined go to devices it has no Olm session with
//! yet, so it starts one; a device that sends before it has seen the bot's starts its own at the
//! same moment. See `src/channels/matrix/room_keys.rs` for what the SDK then does and why the
//! bot rotates the room key instead.

use std::time::{Duration, Instant};

use crate::matrix::{Dm, bot_history};
use crate::support::matrix_client::{Homeserver, Human};

/// Alice answers from a second device (a phone) that has not synced since the bot's first
/// reply: the reply's room key is waiting for it over an Olm session the bot started, while its
/// own message starts a second session with the bot. Without the rotation the bot's next reply
/// re-sent the first reply's room key at a later index; the phone, syncing both copies at
/// once, kept only that one and could never read the first reply (3 failures in 3 runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_reply_stays_readable_on_a_device_that_met_the_bot_at_the_same_time() {
    let dm = Dm::open(true).await;
    let (alice, bot, room_id) = (&dm.alice, &dm.bot, &*dm.room_id);
    // The phone logs in (its keys uploaded, the room known) and then stays offline.
    let phone = Human::login_idle(&Homeserver::shared(), &alice.account).await;
    alice.say(room_id, "first").await;
    alice.wait_messages(room_id, &bot.user_id, 1).await;
    phone.say(room_id, "second").await;
    alice.wait_messages(room_id, &bot.user_id, 2).await;
    phone.start_syncing();
    let readable = |from_bot: &[String]| {
        from_bot.len() == 2 && from_bot.iter().all(|m| m.starts_with("m.room.message "))
    };
    // The keys reach the phone as to-device messages in its first sync: give it time.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut from_bot = bot_history(&phone, room_id, &bot.user_id).await;
    while !readable(&from_bot) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        from_bot = bot_history(&phone, room_id, &bot.user_id).await;
    }
    assert!(readable(&from_bot), "the phone reads: {from_bot:#?}");
    assert_eq!(from_bot[0], "m.room.message m.text **echo** first");
    assert_eq!(from_bot[1], "m.room.message m.text **echo** second");
}
