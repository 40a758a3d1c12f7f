//! #38: a transcription that fails is told to the person and loses nothing. The transcription
//! server is down (a closed port), slow (it never answers: the timeout), or refuses the audio
//! with a 400 in OpenAI's error shape: each time the reply opens with why, the message is still
//! answered as a voice note that could not be transcribed, and the audio is kept. A slow
//! transcription holds only its own conversation.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::voice::{VoiceDm, files_text, nio, replies, saved_path, speak};

/// An `api_base` where nothing listens.
fn down() -> String {
    let port = crate::support::free_port();
    format!("http://127.0.0.1:{port}/v1")
}

/// An `api_base` whose server takes connections and never answers.
async fn slow() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// An `api_base` whose server reads each request whole and answers 400, as OpenAI does for a
/// file it cannot decode.
async fn rejecting() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 65536];
                loop {
                    let Ok(n) = socket.read(&mut buffer).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&request);
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|line| {
                            let (name, value) = line.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
                let body = r#"{"error":{"message":"Invalid file format. Supported formats: flac, mp3, ogg, wav","type":"invalid_request_error"}}"#;
                let response = format!(
                    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// Sends a voice note in `dm` and checks the failure is told with `why`, the message answered
/// as an untranscribed voice note, and the audio kept and in the history.
fn told_and_kept(dm: &VoiceDm, why: &str) {
    let (store, room, bot) = (dm.store.path(), dm.room.as_str(), dm.bot.user_id.as_str());
    let wav = speak(
        store,
        "note.wav",
        "Call the plumber about the kitchen sink.",
    );
    nio(store, &["send-voice", room, wav.to_str().unwrap()]);
    let answer = replies(store, room, bot, 1).remove(0);
    assert!(
        answer.starts_with("(I could not transcribe your voice note: "),
        "{answer}"
    );
    assert!(answer.contains(why), "{why:?} not in {answer}");
    assert!(answer.contains("I kept the recording"), "{answer}");
    assert!(
        answer.contains("heard: [A voice note that could not be transcribed"),
        "the message is still answered: {answer}"
    );
    let saved = saved_path(&answer);
    assert_eq!(std::fs::read(&saved).unwrap(), std::fs::read(&wav).unwrap());
    let history = files_text(&dm.home.path().join("sessions"));
    assert!(history.contains("could not be transcribed"), "{history}");
    assert!(history.contains(&*saved.to_string_lossy()), "{history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcription_server_that_is_down_is_told_and_nothing_is_lost() {
    let dm = VoiceDm::open(&down(), "").await;
    told_and_kept(&dm, "could not be reached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcription_server_that_refuses_the_audio_is_told_and_nothing_is_lost() {
    let dm = VoiceDm::open(&rejecting().await, "").await;
    told_and_kept(&dm, "answered 400: Invalid file format");
}

/// The transcription times out, told as such; meanwhile a message in another room is
/// answered: the slow voice note held only its own conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_transcription_times_out_and_holds_no_other_conversation() {
    let dm = VoiceDm::open(&slow().await, "  timeout_seconds: 30").await;
    let (store, room, bot) = (dm.store.path(), dm.room.as_str(), dm.bot.user_id.as_str());
    // A second conversation: another DM of alice's with the bot.
    let other = nio(store, &["dm", bot]);
    nio(store, &["wait-joined", &other, bot]);
    let wav = speak(store, "slow.wav", "Book a table for two at eight.");
    nio(store, &["send-voice", room, wav.to_str().unwrap()]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    nio(store, &["say", &other, "hello from the other room"]);
    let quick = replies(store, &other, bot, 1).remove(0);
    assert_eq!(quick, "heard: hello from the other room");
    let said = dm.llm.user_texts();
    assert!(
        !said.contains("could not be transcribed"),
        "the other room waited for the voice note: {said}"
    );
    let answer = replies(store, room, bot, 1).remove(0);
    assert!(answer.contains("took longer than 30 s"), "{answer}");
    let saved = saved_path(&answer);
    assert!(saved.is_file());
}
