//! Unit tests of the OpenAI-compatible endpoint: the request shapes apps send, and how a
//! conversation is found again (next message, regenerate, edit, a new conversation that opens
//! as an older one did, after a restart).

use serde_json::json;

use super::error::ErrorKind;
use super::request::{self, Speaker};
use super::thread::{Kind, Threads};

fn parse(value: serde_json::Value) -> Result<request::ChatRequest, super::ApiError> {
    request::parse(value.to_string().as_bytes())
}

#[test]
fn string_and_part_contents_are_read_and_unknown_fields_ignored() {
    let request = parse(json!({
        "model": "default",
        "stream": true,
        "stream_options": { "include_usage": true },
        "temperature": 0.2,
        "frequency_penalty": 0,
        "messages": [
            { "role": "system", "content": "Be brief." },
            { "role": "developer", "content": [{ "type": "text", "text": "Use metric." }] },
            { "role": "user", "content": "hi", "name": "ann" },
            { "role": "assistant", "content": null, "refusal": null },
            { "role": "user", "content": [{ "type": "text", "text": "a" }, { "type": "text", "text": "b" }] },
        ],
    }))
    .unwrap();
    assert!(request.stream && request.include_usage);
    assert_eq!(request.system, "Be brief.\n\nUse metric.");
    assert_eq!(request.turns.len(), 3);
    assert_eq!(request.turns[1].speaker, Speaker::Assistant);
    assert_eq!(request.text(), "a\n\nb");
}

#[test]
fn what_squidbot_cannot_honour_is_refused_with_the_parameter_named() {
    let cases = [
        (
            json!({ "model": "m", "messages": [{ "role": "user", "content": "x" }], "tools": [{}] }),
            ErrorKind::Unsupported,
        ),
        (
            json!({ "model": "m", "messages": [{ "role": "user", "content": "x" }], "n": 2 }),
            ErrorKind::Unsupported,
        ),
        (
            json!({ "model": "m", "messages": [{ "role": "tool", "content": "x" }] }),
            ErrorKind::Unsupported,
        ),
        (
            json!({ "model": "m", "messages": [{ "role": "user", "content": [{ "type": "input_audio" }] }] }),
            ErrorKind::Unsupported,
        ),
        (
            json!({ "messages": [{ "role": "user", "content": "x" }] }),
            ErrorKind::Invalid,
        ),
        (json!({ "model": "m", "messages": [] }), ErrorKind::Invalid),
        (
            json!({ "model": "m", "messages": [{ "role": "user", "content": "" }] }),
            ErrorKind::Invalid,
        ),
        (
            json!({ "model": "m", "messages": [{ "role": "wizard", "content": "x" }] }),
            ErrorKind::Invalid,
        ),
        (
            json!({ "model": "m", "stream": "yes", "messages": [{ "role": "user", "content": "x" }] }),
            ErrorKind::Invalid,
        ),
    ];
    for (body, kind) in cases {
        let error = parse(body.clone()).expect_err(&body.to_string());
        assert_eq!(error.kind, kind, "{body}: {error}");
    }
    // An empty tools list is what some apps send when none are on.
    assert!(
        parse(
            json!({ "model": "m", "tools": [], "messages": [{ "role": "user", "content": "x" }] })
        )
        .is_ok()
    );
}

#[test]
fn a_data_url_image_is_decoded_and_an_image_link_refused() {
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let request = parse(json!({ "model": "m", "messages": [{ "role": "user", "content": [
        { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{png}") } }] }] }))
    .unwrap();
    assert_eq!(request.images.len(), 1);
    assert_eq!(request.images[0].media_type, "image/png");
    let link = parse(
        json!({ "model": "m", "messages": [{ "role": "user", "content": [
        { "type": "image_url", "image_url": { "url": "https://example.com/cat.png" } }] }] }),
    );
    assert_eq!(link.unwrap_err().kind, ErrorKind::Unsupported);
    let text = parse(
        json!({ "model": "m", "messages": [{ "role": "user", "content": [
        { "type": "image_url", "image_url": { "url": "data:image/png;base64,aGVsbG8=" } }] }] }),
    );
    assert_eq!(
        text.unwrap_err().kind,
        ErrorKind::Unsupported,
        "not an image"
    );
}

#[test]
fn megabytes_of_text_are_refused() {
    let big = "x".repeat(request::MAX_MESSAGE_TEXT + 1);
    let error = parse(json!({ "model": "m", "messages": [{ "role": "user", "content": big }] }))
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::TooLarge);
    let history: Vec<_> = (0..20)
        .map(|_| json!({ "role": "user", "content": "y".repeat(request::MAX_MESSAGE_TEXT - 1) }))
        .collect();
    let error = parse(json!({ "model": "m", "messages": history })).unwrap_err();
    assert_eq!(error.kind, ErrorKind::TooLarge);
}

fn conversation(messages: &[(&str, &str)]) -> request::ChatRequest {
    let messages: Vec<_> = messages
        .iter()
        .map(|(role, text)| json!({ "role": role, "content": text }))
        .collect();
    parse(json!({ "model": "m", "messages": messages })).unwrap()
}

#[tokio::test]
async fn a_conversation_is_found_again_and_regenerates_and_edits_are_told_apart() {
    let home = tempfile::tempdir().unwrap();
    let threads = Threads::open(home.path());
    let first = threads.find(&conversation(&[("user", "hi")]), None);
    assert_eq!(first.kind, Kind::Next);
    threads.record(&first, "hi", "Hello!").await;
    let second = threads.find(
        &conversation(&[
            ("user", "hi"),
            ("assistant", "Hello!"),
            ("user", "how are you"),
        ]),
        None,
    );
    assert_eq!((second.kind, &second.key), (Kind::Next, &first.key));
    threads.record(&second, "how are you", "Fine.").await;
    // Regenerate: the answer dropped, the message sent again.
    let again = conversation(&[
        ("user", "hi"),
        ("assistant", "Hello!"),
        ("user", "how are you"),
    ]);
    let regenerate = threads.find(&again, None);
    assert_eq!(
        (regenerate.kind, &regenerate.key),
        (Kind::Regenerate, &first.key)
    );
    threads
        .record(&regenerate, "how are you", "Very well.")
        .await;
    // Edit: another message in its place.
    let edit = threads.find(
        &conversation(&[
            ("user", "hi"),
            ("assistant", "Hello!"),
            ("user", "who are you"),
        ]),
        None,
    );
    assert_eq!((edit.kind, &edit.key), (Kind::Edit, &first.key));
    // Going on from the regenerated answer is the next message.
    let on = conversation(&[
        ("user", "hi"),
        ("assistant", "Hello!"),
        ("user", "how are you"),
        ("assistant", "Very well."),
        ("user", "good"),
    ]);
    assert_eq!(threads.find(&on, None).kind, Kind::Next);
    // A new conversation that opens with "hi" is a session of its own.
    let fresh = threads.find(&conversation(&[("user", "hi")]), None);
    assert_ne!(fresh.key, first.key);
    assert_eq!(fresh.kind, Kind::Next);
    // Another system prompt is another conversation.
    let mut other = conversation(&[("user", "hi")]);
    other.system = "Be brief.".into();
    assert_ne!(threads.find(&other, None).key, first.key);
    // A named conversation is its name, whatever it opens with.
    let named = threads.find(&conversation(&[("user", "hi")]), Some("chat-1"));
    assert!(named.key.starts_with("openai-id-"), "{named:?}");
    threads.record(&named, "hi", "Hello there!").await;
    // Editing its first message (what Open WebUI does in place) stays in it, as an edit; sent
    // again unchanged, it is a regenerate.
    let edited = threads.find(&conversation(&[("user", "hello")]), Some("chat-1"));
    assert_eq!((edited.kind, &edited.key), (Kind::Edit, &named.key));
    let again = threads.find(&conversation(&[("user", "hi")]), Some("chat-1"));
    assert_eq!((again.kind, &again.key), (Kind::Regenerate, &named.key));
    // Unnamed, an edited first message is another conversation.
    assert_ne!(
        threads.find(&conversation(&[("user", "hello")]), None).key,
        first.key
    );

    // After a restart the index is read back.
    let reopened = Threads::open(home.path());
    assert_eq!(reopened.find(&on, None).key, first.key);
    assert_eq!(reopened.find(&on, None).kind, Kind::Next);
}
