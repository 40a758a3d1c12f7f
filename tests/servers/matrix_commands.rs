//! Chat commands in a Matrix room, through a real gateway on the test Synapse: `/model big`
//! switches the room's model (the scripted LLM is asked for `big-model`), and `/new` gives
//! the room an empty session while the old history file stays as it was.

use crate::matrix::Dm;

/// The history file of session `id` in `home`, as lines.
fn history(home: &std::path::Path, id: &str) -> Vec<String> {
    let session = squidbot::core::session::SessionId::parse(id).unwrap();
    let path = home.join("sessions").join(format!(
        "{}.jsonl",
        squidbot::storage::safe_id::encode(&session)
    ));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_new_usage_and_compact_answer_in_a_room() {
    let dm = Dm::open(false).await;
    let (alice, bot, llm, room_id) = (&dm.alice, &dm.bot, &dm.llm, &dm.room_id);
    let said = |n: usize| async move {
        let seen = alice.wait_messages(room_id, &bot.user_id, n).await;
        seen[n - 1].content.body().to_owned()
    };

    alice.say(room_id, "/model big").await;
    assert_eq!(
        said(1).await,
        "This conversation now uses big (model: big-model)."
    );
    alice.say(room_id, "my fruit is the kumquat").await;
    assert_eq!(said(2).await, "**echo** my fruit is the kumquat");
    assert_eq!(llm.requests()[0]["model"], "big-model");

    alice.say(room_id, "/new").await;
    let key = format!("matrix:{room_id}");
    assert_eq!(
        said(3).await,
        format!(
            "New conversation started. The previous one stays in the history as {key}; search_history finds it."
        )
    );
    alice.say(room_id, "what is my fruit?").await;
    assert_eq!(said(4).await, "**echo** what is my fruit?");
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "commands never reach the LLM");
    assert!(
        !requests[1]["messages"].to_string().contains("kumquat"),
        "the new session starts empty: {}",
        requests[1]
    );
    assert_eq!(requests[1]["model"], "big-model", "/new keeps the model");
    let old = history(dm.home.path(), &key);
    assert_eq!(old.len(), 2);
    assert!(old[0].contains("kumquat"));
    let fresh = history(dm.home.path(), &format!("{key}#2"));
    assert_eq!(fresh.len(), 2);
    assert!(fresh[0].contains("what is my fruit?"));

    // `/usage` counts the new conversation's one call; `/compact` has too little to do.
    alice.say(room_id, "/usage").await;
    let usage = said(5).await;
    assert!(
        usage.starts_with("this conversation (this month and the last): 1 calls,")
            && usage.contains("today, all conversations: 2 calls,"),
        "{usage}"
    );
    alice.say(room_id, "/compact").await;
    let compact = said(6).await;
    assert!(
        compact.starts_with("Nothing to summarize: 2 messages"),
        "{compact}"
    );
    assert_eq!(llm.requests().len(), 2, "commands never reach the LLM");
}
