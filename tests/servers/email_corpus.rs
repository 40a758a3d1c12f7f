//! #24: mail people and machines really send, against a real `squidbot gateway` on dovecot.
//!
//! The messages are third-party test mail from public repositories, byte for byte
//! (`data/mail-corpus`; each file's origin and licence in its `SOURCES.md`, what it is in
//! `manifest.json`). Each is appended to the bot's INBOX, one at a time, as a server delivers
//! it, and the test asserts per message what a person would expect: a person's mail is answered
//! once, with a threaded `Re:` reply, and the prompt holds what they newly wrote, not the
//! history they quoted (a forward's content is kept); a machine's mail (auto-replies, read
//! receipts, bounces, lists, newsletters, no-reply senders) is never answered, and one log
//! line names why.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use crate::support::mail_client::{MailGateway, MailServer, write_config};
use crate::support::scripted_llm::{Reply, ScriptedLlm, last_user_text};

#[derive(Debug, Deserialize)]
struct Entry {
    file: String,
    kind: String,
    answer: bool,
    new_text: Option<String>,
    quoted_text: Option<String>,
    has_message_id: bool,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/data/mail-corpus")
}

/// The bot's progress file, parsed.
fn progress(home: &Path, bot: &str) -> Value {
    let path = home.join(format!("state/email/{bot}.json"));
    std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_mail_is_answered_once_or_never_and_the_prompt_holds_what_was_newly_written() {
    let manifest: Vec<Entry> =
        serde_json::from_slice(&std::fs::read(corpus_dir().join("manifest.json")).unwrap())
            .unwrap();
    assert!(manifest.len() >= 40, "{} messages", manifest.len());
    let server = MailServer::shared();
    let bot = server.add_user("corpusbot");
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|_| Reply::Text("Noted, thank you.".into()));
    let home = tempfile::tempdir().unwrap();
    let port = write_config(home.path(), &llm.url(), &server, &bot, "[\"*\"]");
    let gateway = MailGateway::start(home.path(), port).await;
    let mut imap = server.imap(&bot.0, &bot.1).await;

    let mut failures = Vec::new();
    for (index, entry) in manifest.iter().enumerate() {
        let uid = index + 1;
        let raw = std::fs::read(corpus_dir().join(&entry.file)).unwrap();
        let requests_before = llm.requests().len();
        imap.append("INBOX", None, None, &raw).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let state = loop {
            // Persisted is on the way: answered (or ignored) is where it ends.
            let state = progress(home.path(), &bot.0)["messages"][uid.to_string()].clone();
            if !state.is_null() && state != "persisted" {
                break state;
            }
            assert!(
                Instant::now() < deadline,
                "{}: neither answered nor refused",
                entry.file
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let requests = llm.requests();
        let turns = requests.len() - requests_before;
        let mut fail = |what: String| failures.push(format!("{}: {what}", entry.file));
        if !entry.answer {
            if state == "answered" || turns > 0 {
                fail(format!(
                    "a machine's mail was answered ({state}, {turns} LLM calls)"
                ));
            }
            let log = std::fs::read_to_string(home.path().join("gateway.log")).unwrap();
            let field = format!("uid={uid}");
            let named = log.lines().any(|line| {
                line.contains("Mail not answered") && line.split_whitespace().any(|w| w == field)
            });
            if !named {
                fail("no log line says why it was not answered".into());
            }
            continue;
        }
        if state != "answered" || turns != 1 {
            fail(format!("not answered once: {state}, {turns} LLM calls"));
            continue;
        }
        let prompt = last_user_text(&requests[requests.len() - 1]);
        if let Some(new) = &entry.new_text
            && !prompt.contains(new.as_str())
        {
            fail(format!(
                "the prompt lacks what was written, {new:?}:\n{prompt}"
            ));
        }
        match (&entry.quoted_text, entry.kind.as_str()) {
            (Some(quoted), "forwarded") if !prompt.contains(quoted.as_str()) => fail(format!(
                "the forwarded text {quoted:?} is missing:\n{prompt}"
            )),
            (Some(quoted), "reply_quoted") if prompt.contains(quoted.as_str()) => fail(format!(
                "the quoted history {quoted:?} reached the prompt:\n{prompt}"
            )),
            _ => {}
        }
        if entry.kind == "reply_quoted" && prompt.chars().count() > 3000 {
            fail(format!(
                "a short reply made a prompt of {} chars",
                prompt.chars().count()
            ));
        }
    }

    // Every reply went out (or waits in the retry queue: the corpus's senders have no
    // mailbox here), threaded: one per answered mail, `Re:`, In-Reply-To its Message-ID.
    let deadline = Instant::now() + Duration::from_secs(30);
    let outgoing = loop {
        let pending = progress(home.path(), &bot.0)["pending"].clone();
        let pending = pending.as_array().cloned().unwrap_or_default();
        let answered = manifest.iter().filter(|e| e.answer).count();
        if pending.len() >= answered || Instant::now() > deadline {
            break pending;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for entry in manifest.iter().filter(|e| e.answer) {
        let raw = std::fs::read(corpus_dir().join(&entry.file)).unwrap();
        let parsed = mail_parser::MessageParser::default().parse(&raw).unwrap();
        let replies: Vec<&Value> = match parsed.message_id() {
            Some(id) => outgoing
                .iter()
                .filter(|p| p["mail"]["in_reply_to"] == id)
                .collect(),
            None => {
                assert!(!entry.has_message_id, "{}", entry.file);
                let sender = parsed.from().unwrap().first().unwrap().address().unwrap();
                outgoing
                    .iter()
                    .filter(|p| {
                        p["mail"]["to"].as_str() == Some(&sender.to_ascii_lowercase())
                            && p["mail"]["in_reply_to"].is_null()
                    })
                    .collect()
            }
        };
        if replies.len() != 1 {
            failures.push(format!("{}: {} replies", entry.file, replies.len()));
            continue;
        }
        let subject = replies[0]["mail"]["subject"].as_str().unwrap_or_default();
        if !subject.starts_with("Re: ") {
            failures.push(format!("{}: reply subject {subject:?}", entry.file));
        }
    }
    gateway.stop().await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `raw` without the headers a mailing list adds (`List-*`, `Precedence`, `Sender`, …), as the
/// copy sent straight to a `To:` recipient arrives.
fn without_list_headers(raw: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\n\n").unwrap();
    let list_header = |line: &str| {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        name.starts_with("list-")
            || [
                "precedence",
                "sender",
                "errors-to",
                "x-beenthere",
                "x-mailman-version",
            ]
            .contains(&name.as_str())
    };
    let mut kept = Vec::new();
    let mut dropping = false;
    for line in head.lines() {
        if line.starts_with([' ', '\t']) {
            if !dropping {
                kept.push(line);
            }
            continue;
        }
        dropping = list_header(line);
        if !dropping {
            kept.push(line);
        }
    }
    format!("{}\n\n{body}", kept.join("\n")).into_bytes()
}

// See: #40
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_review_reaches_the_model_with_its_comments() {
    // A real review written between the quoted lines of a patch (`56-…`, see SOURCES.md):
    // the text above says "see my comments inline:", the comments follow the attribution.
    let raw = std::fs::read(corpus_dir().join("56-thunderbird-inline-review-list.eml")).unwrap();
    let server = MailServer::shared();
    let bot = server.add_user("inlinebot");
    let llm = ScriptedLlm::start().await;
    llm.set_handler(|_| Reply::Text("Thanks, will do.".into()));
    let home = tempfile::tempdir().unwrap();
    let port = write_config(home.path(), &llm.url(), &server, &bot, "[\"*\"]");
    let gateway = MailGateway::start(home.path(), port).await;
    let mut imap = server.imap(&bot.0, &bot.1).await;
    imap.append("INBOX", None, None, &without_list_headers(&raw))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while llm.requests().is_empty() {
        assert!(Instant::now() < deadline, "the review was never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let prompt = last_user_text(&llm.requests()[0]);
    gateway.stop().await;
    for comment in [
        "see my comments inline:",
        "You can replace \"6t@eth0\" with \"6@eth0\". Tagging is always used by default.",
        "Rename the node (not the compatible) from 'gpio-leds' to 'leds'.",
        "IMAGE_SIZE should match the size of the \"firmware\" partition.",
        "In you case, the firmware parttion is 14976kb large.",
    ] {
        assert!(
            prompt.contains(comment),
            "{comment:?} is missing:\n{prompt}"
        );
    }
    // The passage a comment answers stays beside it; the rest of the 10 KB quote does not.
    assert!(prompt.contains("gpio-leds {"), "{prompt}");
    assert!(
        !prompt.contains("Connect your computer to LAN1"),
        "the quote was kept whole:\n{prompt}"
    );
    assert!(
        prompt.chars().count() < 9000,
        "{} chars:\n{prompt}",
        prompt.chars().count()
    );
}
