//! #38: voice notes by mail. An audio attachment (`audio/wav`, synthesized by espeak-ng) is
//! transcribed by the real Whisper server on loopback and put beside the mail's text; the
//! model gets the words, the history keeps them, and the audio is saved.

use std::time::Duration;

use base64::Engine as _;
use mail_parser::MessageParser;

use crate::support::mail_client::{MailServer, new_id};
use crate::support::mail_scene::MailScene;
use crate::support::testenv;
use crate::voice::{files_text, listener, saved_path, speak};

/// A multipart mail from `from` to `to` with `text` and the WAV `audio` attached as
/// `file_name` of type `mime`.
fn mail_with_audio(
    from: &str,
    to: &str,
    id: &str,
    text: &str,
    file_name: &str,
    mime: &str,
    audio: &[u8],
) -> Vec<u8> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(audio);
    let wrapped: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|chunk| std::str::from_utf8(chunk).unwrap())
        .collect();
    format!(
        "From: {from}\r\nTo: {to}\r\nSubject: Voice memo\r\nMessage-ID: <{id}>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\n{text}\r\n\
         --zz\r\nContent-Type: {mime}; name=\"{file_name}\"\r\nContent-Disposition: attachment; filename=\"{file_name}\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--zz--\r\n",
        wrapped.join("\r\n")
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audio_attachment_is_transcribed_beside_the_mails_text() {
    let whisper = testenv::var("SQUIDBOT_TEST_WHISPER_URL");
    let scene = MailScene::named(&MailServer::shared(), "bot", "person").await;
    let MailScene {
        server,
        bot,
        owner: (person, person_pw),
        llm,
        home,
    } = &scene;
    llm.set_handler(listener);
    let config = scene.config("[\"@LOCALHOST\"]").with(|c| {
        c.more_provider("whisper", &whisper).extra(
            "transcription:\n  provider: whisper\n  model: whisper-base\n  price_per_minute: 0.006\n",
        )
    });
    let _gateway = scene.start(config).await;

    let scratch = tempfile::tempdir().unwrap();
    let wav = speak(
        scratch.path(),
        "memo.wav",
        "The meeting with the bank moves to Thursday morning.",
    );
    let audio = std::fs::read(&wav).unwrap();
    let id = new_id("voice");
    // A recorder that says only octet-stream: the file name tells it is a voice memo.
    let mail = mail_with_audio(
        person,
        &bot.0,
        &id,
        "Listen to this, MAILTEXTMARK.",
        "Memo 12.wav",
        "application/octet-stream",
        &audio,
    );
    server.send_raw(person, &bot.0, &mail).await;
    let mails = server
        .wait_for(
            person,
            person_pw,
            "a reply",
            Duration::from_secs(90),
            |mails| !mails.is_empty(),
        )
        .await;
    let reply = MessageParser::default().parse(&mails[0].0).unwrap();
    let body = reply.body_text(0).unwrap().into_owned();
    assert!(!body.contains("could not transcribe"), "{body}");

    let said = llm.user_texts().to_lowercase();
    assert!(said.contains("mailtextmark"), "{said}");
    for word in ["meeting", "thursday", "morning"] {
        assert!(
            said.contains(word),
            "{word:?} not in what the model got: {said}"
        );
    }
    assert!(said.contains("[voice note, transcribed"), "{said}");
    let history = files_text(&home.path().join("sessions")).to_lowercase();
    assert!(history.contains("thursday"), "{history}");
    let saved = saved_path(&llm.user_texts());
    assert_eq!(std::fs::read(&saved).unwrap(), audio);
    let ledger = files_text(&home.path().join("usage"));
    let record: serde_json::Value = ledger
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .find(|record: &serde_json::Value| record["purpose"] == "transcription")
        .expect("the transcription is in the ledger");
    let seconds = record["audio_seconds"].as_f64().unwrap();
    let cost = record["cost"].as_f64().unwrap();
    assert!((cost - seconds / 60.0 * 0.006).abs() < 1e-9, "{record}");
}
