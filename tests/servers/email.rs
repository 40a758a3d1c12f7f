//! The email channel end to end: a real `squidbot gateway` reading a dovecot mailbox over IMAP
//! and answering over SMTP, with mail sent by a real SMTP client and replies read back over
//! IMAP. Each test uses fresh random users, so the tests run in parallel on the shared server.

use std::time::Duration;

use mail_parser::MessageParser;

use crate::support::mail_client::{MailGateway, MailServer, new_id, plain_mail, replies};
use crate::support::mail_scene::{MailScene, WAIT};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

fn answering_llm(llm: &ScriptedLlm) {
    llm.set_handler(|_| Reply::Text("Here is **the answer**.".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_of_every_shape_is_answered_in_thread_and_robots_are_not() {
    let scene = MailScene::new(&MailServer::shared()).await;
    answering_llm(&scene.llm);
    let gateway = scene.start(scene.config("[\"@LOCALHOST\"]")).await;
    let MailScene {
        server,
        bot,
        owner: (owner, owner_pw),
        llm,
        ..
    } = &scene;
    let to = scene.to();

    // Plain, answering a thread: the reply keeps the references and adds this id.
    let plain = new_id("plain");
    let extra = "In-Reply-To: <earlier@test.example>\r\nReferences: <root@test.example> <earlier@test.example>\r\n";
    scene
        .send(
            "Re: Re: Lunch plans",
            &plain,
            extra,
            "Plain words PLAINMARK",
        )
        .await;
    // HTML only.
    let html = new_id("html");
    let body = format!(
        "From: {owner}\r\nTo: {to}\r\nSubject: Html\r\nMessage-ID: <{html}>\r\nMIME-Version: 1.0\r\n\
         Content-Type: text/html; charset=utf-8\r\n\r\n<html><body><p>Hello <b>HTMLMARK</b></p><script>x</script></body></html>\r\n"
    );
    server.send_raw(owner, to, body.as_bytes()).await;
    // multipart/alternative: plain wins.
    let alt = new_id("alt");
    let body = format!(
        "From: {owner}\r\nTo: {to}\r\nSubject: Alt\r\nMessage-ID: <{alt}>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/alternative; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nALTPLAIN\r\n\
         --zz\r\nContent-Type: text/html\r\n\r\n<p>ALTHTML</p>\r\n--zz--\r\n"
    );
    server.send_raw(owner, to, body.as_bytes()).await;
    // An attachment.
    let attach = new_id("attach");
    let body = format!(
        "From: {owner}\r\nTo: {to}\r\nSubject: File\r\nMessage-ID: <{attach}>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nsee file\r\n\
         --zz\r\nContent-Type: text/csv; name=\"../data.csv\"\r\nContent-Disposition: attachment; filename=\"../data.csv\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\nYSxiCjEsMgo=\r\n--zz--\r\n"
    );
    server.send_raw(owner, to, body.as_bytes()).await;
    // ISO-8859-1 body and encoded subject.
    let latin = new_id("latin");
    let mut body = format!(
        "From: {owner}\r\nTo: {to}\r\nSubject: =?ISO-8859-1?Q?Gr=FC=DFe?=\r\nMessage-ID: <{latin}>\r\nMIME-Version: 1.0\r\n\
         Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
    ).into_bytes();
    body.extend_from_slice(b"Sch\xf6ne Gr\xfc\xdfe LATINMARK\r\n");
    server.send_raw(owner, to, &body).await;
    // 10 MB: the text is read, the attachment (over the 5 MiB default) is not saved.
    let big = new_id("big");
    let payload = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=".repeat(10 * 1024 * 1024 / 26);
    let wrapped: Vec<&str> = payload
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let body = format!(
        "From: {owner}\r\nTo: {to}\r\nSubject: Big\r\nMessage-ID: <{big}>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nBIGMARK\r\n\
         --zz\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=big.bin\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--zz--\r\n",
        wrapped.join("\r\n")
    );
    assert!(body.len() > 10_000_000);
    server.send_raw(owner, to, body.as_bytes()).await;

    let answered = [&plain, &html, &alt, &attach, &latin, &big];
    let got = scene.replies("six replies", 6).await;
    for id in answered {
        assert_eq!(
            got.iter().filter(|(r, _)| r == id.as_str()).count(),
            1,
            "one reply to {id}"
        );
    }
    let (_, raw) = got.iter().find(|(r, _)| r == plain.as_str()).unwrap();
    let reply = MessageParser::default().parse(raw).unwrap();
    assert_eq!(
        reply.subject(),
        Some("Re: Lunch plans"),
        "stacked reply prefixes collapse to one"
    );
    assert_eq!(
        reply
            .references()
            .as_text_list()
            .unwrap()
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
        vec![
            "root@test.example".to_owned(),
            "earlier@test.example".into(),
            plain.clone()
        ]
    );
    assert_eq!(
        reply.header_raw("Auto-Submitted").map(str::trim),
        Some("auto-replied")
    );
    assert!(reply.body_text(0).unwrap().contains("**the answer**"));
    assert!(
        reply
            .body_html(0)
            .unwrap()
            .contains("<strong>the answer</strong>")
    );
    let raw_text = String::from_utf8_lossy(raw);
    assert!(raw_text.contains("multipart/alternative"), "{raw_text}");
    let (_, raw) = got.iter().find(|(r, _)| r == html.as_str()).unwrap();
    assert_eq!(
        MessageParser::default().parse(raw).unwrap().subject(),
        Some("Re: Html")
    );

    let texts = llm.user_texts();
    assert!(texts.contains("Plain words PLAINMARK"), "{texts}");
    assert!(
        texts.contains("HTMLMARK") && !texts.contains("<b>") && !texts.contains("<script>"),
        "{texts}"
    );
    assert!(
        texts.contains("ALTPLAIN") && !texts.contains("ALTHTML"),
        "{texts}"
    );
    assert!(
        texts.contains("Schöne Grüße LATINMARK") && texts.contains("Subject: Grüße"),
        "{texts}"
    );
    assert!(texts.contains("BIGMARK"), "{texts}");
    assert!(
        texts.contains("big.bin (application/octet-stream"),
        "{texts}"
    );
    assert!(texts.contains("over the 5242880-byte limit"), "{texts}");
    let saved = texts
        .split("saved at ")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("an attachment path");
    assert!(
        saved.contains("attachments/email/") && saved.ends_with("data.csv"),
        "{saved}"
    );
    assert_eq!(std::fs::read_to_string(saved).unwrap(), "a,b\n1,2\n");

    // The loop guard: none of these gets a reply, nor does an unknown sender.
    let own_reply_id = MessageParser::default()
        .parse(raw)
        .unwrap()
        .message_id()
        .unwrap()
        .to_owned();
    let guarded = [
        (
            owner.clone(),
            new_id("autosub"),
            "Auto-Submitted: auto-replied\r\n".to_owned(),
        ),
        (
            owner.clone(),
            new_id("bulk"),
            "Precedence: bulk\r\n".to_owned(),
        ),
        (
            owner.clone(),
            new_id("list"),
            "List-Id: <news.test.example>\r\n".to_owned(),
        ),
        (
            "MAILER-DAEMON@localhost".to_owned(),
            new_id("daemon"),
            String::new(),
        ),
        (
            "postmaster@localhost".to_owned(),
            new_id("postmaster"),
            String::new(),
        ),
        (bot.0.clone(), new_id("own"), String::new()),
        (owner.clone(), own_reply_id, String::new()),
        (
            "stranger@elsewhere.example".to_owned(),
            new_id("stranger"),
            String::new(),
        ),
    ];
    let before = llm.request_count();
    for (from, id, extra) in &guarded {
        server
            .send_raw(
                from,
                to,
                &plain_mail(from, to, "Robot", id, extra, "GUARDMARK"),
            )
            .await;
    }
    // The bot marks every guarded mail \Seen once it decided; then nothing more may arrive.
    let total = answered.len() + guarded.len();
    server
        .wait_for(
            &bot.0,
            &bot.1,
            "the guarded mail marked seen",
            WAIT,
            |mails| mails.len() == total && mails.iter().all(|(_, seen)| *seen),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mails = server.mailbox(owner, owner_pw).await;
    assert_eq!(
        replies(&mails).len(),
        answered.len(),
        "a guarded mail got a reply"
    );
    assert_eq!(
        llm.request_count(),
        before,
        "a guarded mail reached the agent"
    );
    assert!(!llm.user_texts().contains("GUARDMARK"));

    let status = gateway.status().await;
    let email = &status["email"];
    assert!(matches!(email["state"].as_str(), Some("idle")), "{status}");
    assert_eq!(email["idle_supported"], true, "{status}");
    assert_eq!(email["pending_replies"], 0, "{status}");
    assert!(
        email["last_uid"].as_u64().unwrap() >= total as u64,
        "{status}"
    );
    // The channel's pulse: mail came in, scans succeed, and IDLE is given its re-arm period
    // (25 min) plus 5 min before the channel counts as stalled.
    let pulse = &status["channels"]["email"];
    assert!(pulse["last_inbound_age_seconds"].is_f64(), "{pulse}");
    assert!(pulse["last_round_age_seconds"].is_f64(), "{pulse}");
    assert_eq!(pulse["stall_after_seconds"], 1800.0, "{pulse}");
    assert_eq!(pulse["stalled"], false, "{pulse}");
    let started = std::time::Instant::now();
    gateway.stop().await;
    assert!(started.elapsed() < Duration::from_secs(5), "slow shutdown");
    let log = std::fs::read_to_string(scene.home.path().join("gateway.log")).unwrap();
    assert!(log.contains("IMAP logout done"), "{log}");
    assert!(!log.contains(&bot.1), "the password was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_sent_while_down_is_answered_once_across_three_restarts() {
    let scene = MailScene::new(&MailServer::shared()).await;
    answering_llm(&scene.llm);
    let home = scene.home.path();
    let port = scene
        .config(&format!("[\"{}\"]", scene.owner.0))
        .write(home);
    let mut ids = Vec::new();
    for round in 0..3 {
        // Sent while the gateway is down.
        let id = new_id(&format!("down{round}"));
        scene.send("While down", &id, "", "hello").await;
        ids.push(id);
        let gateway = MailGateway::start(home, port).await;
        // And one while it runs.
        let id = new_id(&format!("up{round}"));
        scene.send("While up", &id, "", "hello").await;
        ids.push(id);
        scene.replies("the replies of this round", ids.len()).await;
        gateway.stop().await;
    }
    let gateway = MailGateway::start(home, port).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    gateway.stop().await;
    let (owner, owner_pw) = &scene.owner;
    let got = replies(&scene.server.mailbox(owner, owner_pw).await);
    assert_eq!(
        got.len(),
        ids.len(),
        "replies: {:?}",
        got.iter().map(|(r, _)| r).collect::<Vec<_>>()
    );
    for id in &ids {
        assert_eq!(got.iter().filter(|(r, _)| r == id).count(), 1, "{id}");
    }
    let progress =
        std::fs::read_to_string(home.join(format!("state/email/{}.json", scene.bot.0))).unwrap();
    assert!(progress.contains("answered"), "{progress}");
}

/// A private mail server on free ports (for tests that stop and restart it), stopped on drop.
struct PrivateMail {
    server: MailServer,
    _dir: tempfile::TempDir,
}

impl PrivateMail {
    fn start() -> Self {
        use std::os::unix::fs::PermissionsExt;
        // Under /tmp and world-traversable: dovecot's users must reach it.
        let dir = tempfile::Builder::new()
            .prefix("squidbot-mail-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let private = Self {
            server: MailServer {
                host: "127.0.0.1".into(),
                imap_port: crate::support::free_port(),
                smtp_port: crate::support::free_port(),
                dir: dir.path().display().to_string(),
            },
            _dir: dir,
        };
        private.restart();
        private
    }

    /// Starts the servers (again), on the same ports and mailboxes.
    fn restart(&self) {
        let (imap, smtp) = (
            self.server.imap_port.to_string(),
            self.server.smtp_port.to_string(),
        );
        crate::support::testenv::run_script("mail.sh", &["start", &self.server.dir, &imap, &smtp]);
    }

    fn stop(&self) {
        crate::support::testenv::run_script("mail.sh", &["stop", &self.server.dir]);
    }
}

impl Drop for PrivateMail {
    fn drop(&mut self) {
        let _ = std::process::Command::new(crate::support::testenv::scripts_dir().join("mail.sh"))
            .args(["stop", &self.server.dir])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_during_idle_is_recovered() {
    let private = PrivateMail::start();
    let scene = MailScene::new(&private.server).await;
    answering_llm(&scene.llm);
    let gateway = scene.start(scene.config("[\"*\"]")).await;
    scene.send("One", &new_id("first"), "", "one").await;
    scene.replies("the first reply", 1).await;

    private.stop();
    // Dovecot's IMAP processes outlive their master; end the ones serving this private port
    // (found by their sockets, killed by pid), so the bot's IDLE connection really drops.
    kill_connections(private.server.imap_port);
    private.restart();
    let second = new_id("second");
    scene.send("Two", &second, "", "two").await;
    let got = scene.replies("the reply after the restart", 2).await;
    assert_eq!(got.len(), 2);
    assert_eq!(got.iter().filter(|(r, _)| *r == second).count(), 1);
    let status = gateway.status().await;
    assert!(
        status["email"]["connects"].as_u64().unwrap() >= 2,
        "{status}"
    );
    assert!(status["email"]["last_error"].is_string(), "{status}");
    gateway.stop().await;
    drop(private);
}

/// Kills (by pid) the processes holding server-side TCP connections on local `port`.
fn kill_connections(port: u16) {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields[1].rsplit(':').next().unwrap();
            if u16::from_str_radix(local_port, 16).ok() == Some(port) && fields[3] != "0A" {
                inodes.push(format!("socket:[{}]", fields[9]));
            }
        }
    }
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| inodes.contains(&target.to_string_lossy().into_owned()))
        });
        if holds && name != std::process::id().to_string() {
            let _ = std::process::Command::new("kill").arg(&name).status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_cannot_be_sent_is_queued_and_retried() {
    let private = PrivateMail::start();
    let scene = MailScene::new(&private.server).await;
    // The answer takes 3 s, long enough to take the mail server down meanwhile.
    scene.llm.set_handler(|_| Reply::Stall {
        text: "late answer".into(),
        for_ms: 3000,
    });
    let gateway = scene.start(scene.config("[\"*\"]")).await;
    let id = new_id("retry");
    scene.send("Retry", &id, "", "hello").await;
    let deadline = std::time::Instant::now() + WAIT;
    while scene.llm.request_count() == 0 {
        assert!(std::time::Instant::now() < deadline, "no LLM request");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    private.stop();
    kill_connections(private.server.imap_port);
    loop {
        let status = gateway.status().await;
        if status["email"]["pending_replies"] == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "reply never queued: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let progress = scene
        .home
        .path()
        .join(format!("state/email/{}.json", scene.bot.0));
    assert!(
        std::fs::read_to_string(&progress)
            .unwrap()
            .contains("late answer")
    );
    private.restart();
    let got = scene.replies("the retried reply", 1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, id);
    let status = gateway.status().await;
    assert_eq!(status["email"]["pending_replies"], 0, "{status}");
    gateway.stop().await;
    drop(private);
}

/// Whether the request answering the mail that contains `marker` carried the owner's private
/// memory (see [`crate::support::privacy::private_parts`]).
fn private_parts(llm: &ScriptedLlm, marker: &str) -> (bool, bool, bool) {
    crate::support::privacy::private_parts(&llm.requests(), |text| text.contains(marker))
}

// See: #16 (item 5)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_from_another_allowed_sender_gets_no_private_memory_and_the_owners_does() {
    let scene = MailScene::new(&MailServer::shared()).await;
    answering_llm(&scene.llm);
    let MailScene {
        server,
        bot,
        owner: (owner, _),
        llm,
        home,
    } = &scene;
    let (friend, friend_pw) = server.add_user("friend");
    // The owner's address, in another letter case than it is sent with: addresses compare
    // without regard to case.
    let config = scene
        .config("[\"@LOCALHOST\"]")
        .trusting(&owner.to_uppercase());
    crate::support::privacy::plant_private_memory(home.path(), "the PIN is 4711", "the owner");
    let gateway = scene.start(config).await;
    let to = bot.0.as_str();

    scene
        .send_trusted("Mine", &new_id("owner"), "", "OWNERMAIL hello")
        .await;
    let from_friend = new_id("friend");
    server
        .send_raw(
            &friend,
            to,
            &plain_mail(&friend, to, "Theirs", &from_friend, "", "FRIENDMAIL hello"),
        )
        .await;
    scene.replies("the owner's reply", 1).await;
    server
        .wait_for(&friend, &friend_pw, "the friend's reply", WAIT, |m| {
            !replies(m).is_empty()
        })
        .await;
    assert_eq!(private_parts(llm, "OWNERMAIL"), (true, true, true));
    assert_eq!(private_parts(llm, "FRIENDMAIL"), (false, false, false));

    // A job aimed at the friend's session replies to the friend: no private memory either.
    crate::support::bin::cron_once(
        home.path(),
        "nudge",
        "JOBMAIL for the friend",
        &format!("email:{friend}"),
    )
    .await;
    server
        .wait_for(&friend, &friend_pw, "the job's mail", WAIT, |m| {
            m.len() >= 2
        })
        .await;
    assert_eq!(private_parts(llm, "JOBMAIL"), (false, false, false));
    gateway.stop().await;
}

/// #23 item 3: a command planted `attachments/email` as a link to a directory outside the
/// workspace; a received attachment is not written through it (the mail is still answered,
/// with a note that the file was not saved), and nothing appears outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachment_is_never_written_through_a_planted_link() {
    let scene = MailScene::named(&MailServer::shared(), "bot", "sender").await;
    let MailScene {
        server,
        owner: (sender, sender_pw),
        home,
        ..
    } = &scene;
    scene.llm.set_handler(|request| {
        let user = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        Reply::Text(format!("seen: {user}"))
    });
    let outside = home.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let attachments = home.path().join("workspace/attachments");
    std::fs::create_dir_all(&attachments).unwrap();
    std::os::unix::fs::symlink(&outside, attachments.join("email")).unwrap();
    let gateway = scene.start(scene.config("[\"@LOCALHOST\"]")).await;
    let to = scene.to();
    let id = new_id("linked");
    let body = format!(
        "From: {sender}\r\nTo: {to}\r\nSubject: File\r\nMessage-ID: <{id}>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nsee LINKMARK\r\n\
         --zz\r\nContent-Type: text/csv; name=\"data.csv\"\r\nContent-Disposition: attachment; filename=\"data.csv\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\nYSxiCjEsMgo=\r\n--zz--\r\n"
    );
    server.send_raw(sender, to, body.as_bytes()).await;
    let mails = server
        .wait_for(sender, sender_pw, "the reply", WAIT, |m| {
            replies(m)
                .iter()
                .any(|(_, body)| String::from_utf8_lossy(body).contains("LINKMARK"))
        })
        .await;
    let reply = replies(&mails)
        .into_iter()
        .map(|(_, body)| String::from_utf8_lossy(&body).into_owned())
        .find(|body| body.contains("LINKMARK"))
        .unwrap();
    assert!(
        reply.contains("data.csv"),
        "the attachment is named: {reply}"
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "written through the link"
    );
    gateway.stop().await;
}
