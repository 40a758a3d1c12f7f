//! #25 item 3: an image a person sends reaches a model that reads images as an image part, and
//! another model as the path it was saved at. Against the real servers: a mail with a PNG
//! through dovecot, and an image in an encrypted Matrix room sent by matrix-sdk. The request
//! the scripted LLM receives is checked byte for byte against the image sent.

use std::time::Duration;

use base64::Engine;
use matrix_sdk::attachment::AttachmentConfig;
use serde_json::Value;

use crate::matrix::{BotGateway, MatrixScene};
use crate::support::images::{PNG, last_user, png_of};
use crate::support::mail_client::{MailServer, new_id};
use crate::support::mail_scene::MailScene;
use crate::support::matrix_client::Human;
use crate::support::scripted_llm::Reply;

const WAIT: Duration = Duration::from_secs(60);

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
        let scene = MailScene::named(&server, "bot", "sender").await;
        let MailScene {
            owner: (sender, sender_pw),
            llm,
            ..
        } = &scene;
        llm.set_handler(count_images);
        let config = scene.config("[\"@LOCALHOST\"]").with(|c| c.model(model));
        let gateway = scene.start(config).await;
        let to = scene.to();
        let mail = format!(
            "From: {sender}\r\nTo: {to}\r\nSubject: Photo\r\nMessage-ID: <{id}>\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\n\
             what is in it?\r\n--zz\r\nContent-Type: image/png; name=\"dot.png\"\r\n\
             Content-Disposition: attachment; filename=\"dot.png\"\r\nContent-Transfer-Encoding: base64\r\n\r\n\
             {PNG}\r\n--zz--\r\n",
            id = new_id("photo"),
        );
        server.send_raw(sender, to, mail.as_bytes()).await;
        server
            .wait_for(sender, sender_pw, "the reply", WAIT, |mails| {
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
        let sessions = std::fs::read_dir(scene.home.path().join("sessions")).unwrap();
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
    let scene = MatrixScene::new(count_images).await;
    let MatrixScene {
        hs,
        bot,
        alice: a,
        llm,
        home,
    } = &scene;
    let extra = scene.allow_alice();
    let _gateway =
        BotGateway::start_with_model(home.path(), &llm.url(), "gpt-4o-mini", hs, bot, &extra).await;
    let alice = Human::login(hs, a).await;
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
