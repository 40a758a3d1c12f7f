//! #24: mail is answered once, never zero times and never twice, whatever happens to the
//! gateway; old mail is never answered again; the owner is never rate-limited away.
//!
//! The crash tests stop a real `squidbot gateway` at an exact step of handling a mail
//! (`SQUIDBOT_CRASH_AT` aborts the process there, as `kill -9` would; "during the turn" is a
//! real SIGKILL while the LLM holds its answer), restart it, and read what the owner's real
//! mailbox on dovecot got.

use std::path::Path;
use std::time::Duration;

use mail_parser::MessageParser;

use crate::support::mail_client::{MailGateway, MailServer, new_id, plain_mail};
use crate::support::mail_scene::{MailScene, WAIT};
use crate::support::scripted_llm::Reply;

/// The Message-IDs of the replies to `id` in a mailbox, one per copy.
fn replies_to(mails: &[(Vec<u8>, bool)], id: &str) -> Vec<String> {
    mails
        .iter()
        .filter_map(|(raw, _)| {
            let message = MessageParser::default().parse(raw)?;
            (message.in_reply_to().as_text()? == id)
                .then(|| message.message_id().unwrap_or_default().to_owned())
        })
        .collect()
}

/// Starts the gateway in `home` with `SQUIDBOT_CRASH_AT=step` and waits until it aborted.
async fn run_until_crash(home: &Path, step: &str) {
    let mut child =
        crate::support::bin::gateway_logging_to_home(home, "warn,squidbot::channels::email=debug")
            .env("SQUIDBOT_CRASH_AT", step)
            .spawn()
            .unwrap();
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap_or_else(|_| panic!("the gateway never reached {step}"))
        .unwrap();
    assert!(!status.success(), "{step}: {status}");
}

/// The user messages of the owner's session holding `needle`.
fn user_messages_with(home: &Path, owner: &str, needle: &str) -> usize {
    let path = home.join(format!("sessions/email_3A{owner}.jsonl"));
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("\"role\":\"user\"") && line.contains(needle))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_each_step_of_a_mail_leaves_it_answered_exactly_once() {
    let server = MailServer::shared();
    for step in [
        "email:fetched",
        "email:persisted",
        "turn",
        "email:sent",
        "email:answered",
    ] {
        let scene = MailScene::named(&server, "crashbot", "owner").await;
        let MailScene {
            bot,
            owner: (owner, owner_pw),
            llm,
            home,
            ..
        } = &scene;
        let port = scene.config(&format!("[\"{owner}\"]")).write(home.path());
        // The mailbox is started before the mail arrives, as in everyday use.
        llm.set_handler(|_| Reply::Text("The answer.".into()));
        MailGateway::start(home.path(), port).await.stop().await;

        let id = new_id("crash");
        let text = format!("CRASHMARK {step}");
        scene.send("Crash", &id, "", &text).await;
        if step == "turn" {
            // The LLM holds its answer; the gateway is killed while the turn waits for it.
            llm.set_handler(|_| Reply::Delay {
                ms: 120_000,
                then: Box::new(Reply::Text("too late".into())),
            });
            let gateway = MailGateway::start(home.path(), port).await;
            let deadline = std::time::Instant::now() + WAIT;
            while llm.requests().is_empty() {
                assert!(std::time::Instant::now() < deadline, "no LLM call");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let mut child = gateway.child;
            child.kill().await.unwrap();
            llm.set_handler(|_| Reply::Text("The answer.".into()));
        } else {
            run_until_crash(home.path(), step).await;
        }
        let gateway = MailGateway::start(home.path(), port).await;
        server
            .wait_for(owner, owner_pw, step, WAIT, |mails| {
                !replies_to(mails, &id).is_empty()
            })
            .await;
        // Time for a second answer to show, were one coming.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mails = server.mailbox(owner, owner_pw).await;
        gateway.stop().await;
        let mut answers = replies_to(&mails, &id);
        let copies = answers.len();
        answers.dedup();
        assert_eq!(answers.len(), 1, "{step}: answers {answers:?}");
        // Only a crash between the SMTP server's acceptance and the queue's update sends the
        // same mail (same Message-ID, shown once by mail clients) a second time.
        let expected_copies = if step == "email:sent" { 2 } else { 1 };
        assert_eq!(copies, expected_copies, "{step}: copies");
        assert_eq!(
            user_messages_with(home.path(), owner, &text),
            1,
            "{step}: the mail is in the history once"
        );
        let inbox = server.mailbox(&bot.0, &bot.1).await;
        assert!(
            inbox.iter().all(|(_, seen)| *seen),
            "{step}: the mail stays unread"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_on_a_used_mailbox_answers_only_its_recent_unseen_mail() {
    let scene = MailScene::named(&MailServer::shared(), "usedbot", "owner").await;
    let MailScene {
        server,
        bot,
        owner: (owner, owner_pw),
        llm,
        home,
    } = &scene;
    let mut imap = server.imap(&bot.0, &bot.1).await;
    for n in 0..50 {
        let mail = plain_mail(
            owner,
            &bot.0,
            "Old",
            &new_id(&format!("read{n}")),
            "",
            "read long ago",
        );
        imap.append("INBOX", Some("(\\Seen)"), None, &mail)
            .await
            .unwrap();
    }
    let stale = new_id("stale");
    let mail = plain_mail(owner, &bot.0, "Old", &stale, "", "unread for a month");
    imap.append("INBOX", None, Some("\"01-Oct-2026 10:00:00 +0000\""), &mail)
        .await
        .unwrap();
    let recent: Vec<String> = (0..2).map(|n| new_id(&format!("recent{n}"))).collect();
    for id in &recent {
        let mail = plain_mail(owner, &bot.0, "New", id, "", "sent while setting up");
        imap.append("INBOX", None, None, &mail).await.unwrap();
    }
    let _ = imap.logout().await;

    llm.set_handler(|_| Reply::Text("The answer.".into()));
    let port = scene.config(&format!("[\"{owner}\"]")).write(home.path());
    let gateway = MailGateway::start(home.path(), port).await;
    server
        .wait_for(owner, owner_pw, "the two recent answers", WAIT, |mails| {
            recent.iter().all(|id| !replies_to(mails, id).is_empty())
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // A restart changes nothing.
    gateway.stop().await;
    let gateway = MailGateway::start(home.path(), port).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    gateway.stop().await;
    let mails = server.mailbox(owner, owner_pw).await;
    assert_eq!(
        mails.len(),
        2,
        "only the two recent unseen mails are answered"
    );
    assert_eq!(llm.requests().len(), 2);
    let log = std::fs::read_to_string(home.path().join("gateway.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("First start on this mailbox")
                && l.contains("skipped=51")
                && l.contains("answered=2")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_is_never_rate_limited_and_others_wait_unread_told_once() {
    let scene = MailScene::named(&MailServer::shared(), "ratebot", "owner").await;
    let MailScene {
        server,
        bot,
        owner: (owner, owner_pw),
        ..
    } = &scene;
    let (friend, friend_pw) = server.add_user("friend");
    scene.llm.set_handler(|_| Reply::Text("The answer.".into()));
    let config = scene
        .config("[\"@LOCALHOST\"]")
        .trusting(owner)
        .email_line("replies_per_hour: 2");
    let gateway = scene.start(config).await;
    let to = scene.to();
    let owners: Vec<String> = (0..4).map(|n| new_id(&format!("own{n}"))).collect();
    let friends: Vec<String> = (0..4).map(|n| new_id(&format!("fr{n}"))).collect();
    for (own, fr) in owners.iter().zip(&friends) {
        scene.send_trusted("Mine", own, "", "owner asks").await;
        let mail = plain_mail(&friend, to, "Hi", fr, "", "friend asks");
        server.send_raw(&friend, to, &mail).await;
    }
    server
        .wait_for(owner, owner_pw, "all four owner answers", WAIT, |mails| {
            owners.iter().all(|id| !replies_to(mails, id).is_empty())
        })
        .await;
    let friend_mails = server
        .wait_for(
            &friend,
            &friend_pw,
            "two answers and one notice",
            WAIT,
            |mails| mails.len() >= 3,
        )
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(friend_mails);
    let friend_mails = server.mailbox(&friend, &friend_pw).await;
    gateway.stop().await;
    let answered: Vec<&String> = friends
        .iter()
        .filter(|id| !replies_to(&friend_mails, id).is_empty())
        .collect();
    assert_eq!(
        answered.len(),
        3,
        "two answers and the notice (threaded on the third)"
    );
    assert_eq!(friend_mails.len(), 3, "told once, not per mail");
    let notice = friend_mails.iter().any(|(raw, _)| {
        String::from_utf8_lossy(raw).contains("more than 2 messages within an hour")
    });
    assert!(notice, "the sender is told why");
    // The two over the limit stay unread, to be answered when the hour has room.
    let inbox = server.mailbox(&bot.0, &bot.1).await;
    let unread = inbox.iter().filter(|(_, seen)| !seen).count();
    assert_eq!(unread, 2);
}
