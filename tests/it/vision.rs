//! #25 item 3: an image a person sends reaches a model that reads images as an image part, and
//! another model as the path it was saved at. Against the real servers: a mail with a PNG
//! through dovecot, and an image in an encrypted Matrix room sent by matrix-sdk. The request
//! the scripted LLM receives is checked byte for byte against the image sent. And an image
//! the agent reads itself, with `read_file`, through the real binary.

use std::time::Duration;

use base64::Engine;
use matrix_sdk::attachment::AttachmentConfig;
use serde_json::Value;

use crate::cli::Home;
use crate::matrix::BotGateway;
use crate::support::bin::{stderr, stdout};
use crate::support::mail_client::{MailGateway, MailServer, new_id, write_config};
use crate::support::matrix_client::{Homeserver, Human};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

const WAIT: Duration = Duration::from_secs(60);

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// The image parts and the text of the last user message of a request.
fn last_user(request: &Value) -> (Vec<String>, String) {
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    match &user["content"] {
        Value::String(text) => (Vec::new(), text.clone()),
        Value::Array(parts) => {
            let images = parts
                .iter()
                .filter(|p| p["type"] == "image_url")
                .map(|p| p["image_url"]["url"].as_str().unwrap().to_owned())
                .collect();
            let text = parts
                .iter()
                .filter(|p| p["type"] == "text")
                .map(|p| p["text"].as_str().unwrap())
                .collect();
            (images, text)
        }
        other => panic!("content {other}"),
    }
}

/// The bytes of a PNG sent as a `data:` URL.
fn png_of(url: &str) -> Vec<u8> {
    let data = url
        .strip_prefix("data:image/png;base64,")
        .unwrap_or_else(|| panic!("not a PNG data URL: {url}"));
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap()
}

/// The LLM's answer names how many images it got, so the test waits for the reply.
fn count_images(request: &Value) -> Reply {
    let (images, _) = last_user(request);
    Reply::Text(format!("IMAGES={}", images.len()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailed_image_reaches_a_vision_model_as_an_image_and_others_as_a_path() {
    let server = MailServer::shared();
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    for (model, vision) in [("gpt-4o", true), ("llama3.1:8b", false)] {
        let bot = server.add_user("bot");
        let (sender, sender_pw) = server.add_user("sender");
        let llm = ScriptedLlm::start().await;
        llm.set_handler(count_images);
        let home = tempfile::tempdir().unwrap();
        let port = write_config(home.path(), &llm.url(), &server, &bot, "[\"@LOCALHOST\"]");
        let path = home.path().join("squidbot.yaml");
        let config = std::fs::read_to_string(&path)
            .unwrap()
            .replace("model: scripted-model", &format!("model: \"{model}\""));
        std::fs::write(&path, config).unwrap();
        let gateway = MailGateway::start(home.path(), port).await;
        let to = bot.0.as_str();
        let mail = format!(
            "From: {sender}\r\nTo: {to}\r\nSubject: Photo\r\nMessage-ID: <{id}>\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\n\
             what is in it?\r\n--zz\r\nContent-Type: image/png; name=\"dot.png\"\r\n\
             Content-Disposition: attachment; filename=\"dot.png\"\r\nContent-Transfer-Encoding: base64\r\n\r\n\
             {PNG}\r\n--zz--\r\n",
            id = new_id("photo"),
        );
        server.send_raw(&sender, to, mail.as_bytes()).await;
        server
            .wait_for(&sender, &sender_pw, "the reply", WAIT, |mails| {
                mails
                    .iter()
                    .any(|(raw, _)| String::from_utf8_lossy(raw).contains("IMAGES="))
            })
            .await;
        let requests = llm.requests();
        let (images, text) = last_user(&requests[0]);
        assert!(
            text.contains("dot.png"),
            "{model}: the text names the file: {text}"
        );
        if vision {
            assert_eq!(images.len(), 1, "{model}");
            assert_eq!(png_of(&images[0]), png, "{model}");
        } else {
            assert!(images.is_empty(), "{model}: {images:?}");
        }
        // The history keeps the path, never the bytes.
        let sessions = std::fs::read_dir(home.path().join("sessions")).unwrap();
        for entry in sessions {
            let history = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
            assert!(
                !history.contains(&PNG[..40]),
                "{model}: image bytes in the history"
            );
        }
        gateway.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_in_an_encrypted_room_reaches_a_vision_model_as_an_image() {
    let hs = Homeserver::shared();
    let (bot, a) = (hs.register("bot"), hs.register("alice"));
    let llm = ScriptedLlm::start().await;
    llm.set_handler(count_images);
    let home = tempfile::tempdir().unwrap();
    let extra = format!("    allowlist: [\"{}\"]", a.user_id);
    let _gateway =
        BotGateway::start_with_model(home.path(), &llm.url(), "gpt-4o-mini", &hs, &bot, &extra)
            .await;
    let alice = Human::login(&hs, &a).await;
    let room = alice.create_room(&[&bot.user_id], true).await;
    let room_id = room.room_id().to_owned();
    alice.wait_joined(&room_id, &bot.user_id).await;
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    alice
        .room(&room_id)
        .send_attachment(
            "dot.png",
            &mime::IMAGE_PNG,
            png.clone(),
            AttachmentConfig::new(),
        )
        .await
        .unwrap();
    let replies = alice.wait_messages(&room_id, &bot.user_id, 1).await;
    assert_eq!(replies[0].content.body(), "IMAGES=1");
    let requests = llm.requests();
    let (images, text) = last_user(&requests[0]);
    assert!(text.contains("dot.png"), "{text}");
    assert_eq!(
        png_of(&images[0]),
        png,
        "the decrypted image, byte for byte"
    );
}

/// `read_file` of a PNG in the workspace, run by `squidbot agent -m`: a model that reads images
/// gets the file's bytes as an image part in a user message right after the tool results (Chat
/// Completions take image parts only from the user), the tool result itself stays text; a
/// model that reads none gets a line naming the image and no image part anywhere. The history
/// keeps the path, never the bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_read_file_reads_reaches_a_vision_model_after_the_results_and_others_as_a_line() {
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    for (model, vision) in [("gpt-4o", true), ("llama3.1:8b", false)] {
        let llm = ScriptedLlm::start().await;
        llm.enqueue(Reply::ToolCalls {
            text: String::new(),
            calls: vec![(
                "call_read".into(),
                "read_file".into(),
                r#"{"path": "pics/dot.png"}"#.into(),
            )],
        });
        llm.enqueue(Reply::Text("a single dot".into()));
        let home = Home::new();
        home.write_config(&llm.url(), "");
        let config = std::fs::read_to_string(home.config())
            .unwrap()
            .replace("model: scripted-model", &format!("model: \"{model}\""));
        std::fs::write(home.config(), config).unwrap();
        let pics = home.path().join("workspace/pics");
        std::fs::create_dir_all(&pics).unwrap();
        std::fs::write(pics.join("dot.png"), &png).unwrap();

        let output = home.run(&["agent", "-m", "what is in pics/dot.png?"]).await;
        assert!(output.status.success(), "{model}: {}", stderr(&output));
        assert!(stdout(&output).contains("a single dot"), "{model}");

        let requests = llm.requests();
        assert_eq!(requests.len(), 2, "{model}");
        let messages = requests[1]["messages"].as_array().unwrap();
        let result = messages
            .iter()
            .position(|m| m["role"] == "tool")
            .unwrap_or_else(|| panic!("{model}: no tool result in {messages:?}"));
        let text = messages[result]["content"]
            .as_str()
            .unwrap_or_else(|| panic!("{model}: a tool result is text: {}", messages[result]));
        assert!(
            text.contains("pics/dot.png is an image (image/png, 70 bytes)"),
            "{model}: {text}"
        );
        let parts: Vec<&Value> = messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|part| part["type"] == "image_url")
            .collect();
        if vision {
            let after = &messages[result + 1];
            assert_eq!(after["role"], "user", "{model}: {after}");
            let (images, _) = last_user(&requests[1]);
            assert_eq!(images.len(), 1, "{model}");
            assert_eq!(parts.len(), 1, "{model}: only that one image part");
            assert_eq!(png_of(&images[0]), png, "{model}: the file's bytes");
        } else {
            assert!(parts.is_empty(), "{model}: {parts:?}");
            assert_eq!(
                messages.len(),
                result + 1,
                "{model}: nothing after the result"
            );
        }
        let sessions = home.path().join("sessions");
        for entry in std::fs::read_dir(&sessions).unwrap() {
            let history = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
            assert!(
                !history.contains(&PNG[..40]),
                "{model}: bytes in the history"
            );
        }
    }
}
