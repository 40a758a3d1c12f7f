//! Approvals by mail (#16 item 2), against the real IMAP/SMTP servers: the owner gets a mail
//! naming the command and its code, a reply with `yes CODE` runs it once; mail from another
//! allowed sender is never asked about and never runs it, and neither is a mail that only
//! claims the owner's address without the receiving server's authentication pass (#23).

use std::time::Duration;

use mail_parser::MessageParser;
use serde_json::{Value, json};

use crate::support::mail_client::{
    AUTHSERV_ID, MailGateway, MailServer, new_id, plain_mail, with_dkim_pass, write_config,
};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

const WAIT: Duration = Duration::from_secs(60);

/// The model: a shell call touching the file the mail names, then the tool's result.
fn model(request: &Value) -> Reply {
    let messages = request["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    if last["role"] == "tool" {
        return Reply::Text(format!("result: {}", last["content"].as_str().unwrap()));
    }
    let text = last["content"].as_str().unwrap_or_default();
    let file = if text.contains("FRIEND") {
        "friend.txt"
    } else if text.contains("FORGED") {
        "forged.txt"
    } else {
        "owner.txt"
    };
    Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            "c0".into(),
            "shell".into(),
            json!({ "command": format!("touch {file}") }).to_string(),
        )],
    }
}

/// The text bodies of a mailbox.
fn bodies(mails: &[(Vec<u8>, bool)]) -> Vec<String> {
    mails
        .iter()
        .filter_map(|(raw, _)| {
            let message = MessageParser::default().parse(raw)?;
            Some(message.body_text(0)?.into_owned())
        })
        .collect()
}

// See: #16 (item 2)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_approves_by_replying_with_the_code_and_a_stranger_is_never_asked() {
    let server = MailServer::shared();
    let bot = server.add_user("bot");
    let (owner, owner_pw) = server.add_user("owner");
    let (friend, friend_pw) = server.add_user("friend");
    let llm = ScriptedLlm::start().await;
    llm.set_handler(model);
    let home = tempfile::tempdir().unwrap();
    let port = write_config(home.path(), &llm.url(), &server, &bot, "[\"@LOCALHOST\"]");
    let mut config = std::fs::read_to_string(home.path().join("squidbot.yaml")).unwrap();
    config.push_str(&format!("owner:\n  email: [\"{owner}\"]\n"));
    config = config.replace(
        "  email:\n    enabled: true\n",
        &format!("  email:\n    enabled: true\n    authserv_id: {AUTHSERV_ID}\n"),
    );
    std::fs::write(home.path().join("squidbot.yaml"), config).unwrap();
    let workspace = home.path().join("workspace");
    let gateway = MailGateway::start(home.path(), port).await;
    let to = bot.0.as_str();

    let asked = new_id("ask");
    // Forged: the owner's From, but no authentication pass from the configured server
    // (none at all, then another server's). Treated as someone else's: never asked, never run.
    for (tag, extra) in [
        ("forged", String::new()),
        (
            "forged-elsewhere",
            format!(
                "Authentication-Results: evil.example; dkim=pass header.d={}\r\n",
                owner.rsplit_once('@').unwrap().1
            ),
        ),
    ] {
        let mail = plain_mail(
            &owner,
            to,
            "Chores",
            &new_id(tag),
            &extra,
            "FORGED touch it",
        );
        server.send_raw(&owner, to, &mail).await;
    }
    let mails = server
        .wait_for(&owner, &owner_pw, "the forged mails' replies", WAIT, |m| {
            bodies(m).iter().filter(|b| b.contains("result:")).count() >= 2
        })
        .await;
    let all = bodies(&mails).join("\n");
    assert!(
        !all.contains("Approval needed"),
        "a forged mail was asked about: {all}"
    );
    assert!(all.contains("not from the owner"), "{all}");
    assert!(!workspace.join("forged.txt").exists());

    let mail = with_dkim_pass(
        plain_mail(&owner, to, "Chores", &asked, "", "please touch the file"),
        &owner,
    );
    server.send_raw(&owner, to, &mail).await;
    let mails = server
        .wait_for(&owner, &owner_pw, "the approval mail", WAIT, |m| {
            bodies(m).iter().any(|b| b.contains("Approval needed"))
        })
        .await;
    let question = bodies(&mails)
        .into_iter()
        .find(|b| b.contains("Approval needed"))
        .unwrap();
    assert!(question.contains("touch owner.txt"), "{question}");
    let start = question.find("`yes ").unwrap() + 5;
    let code = &question[start..start + 6];
    assert!(
        !workspace.join("owner.txt").exists(),
        "ran before the answer"
    );

    // The owner's reply quotes the question below the answer, as mail clients do.
    let quoted: String = question.lines().map(|l| format!("> {l}\r\n")).collect();
    let answer = plain_mail(
        &owner,
        to,
        "Re: Chores",
        &new_id("answer"),
        &format!("In-Reply-To: <{asked}>\r\n"),
        &format!("yes {code}\r\n\r\n{quoted}"),
    );
    server
        .send_raw(&owner, to, &with_dkim_pass(answer, &owner))
        .await;
    server
        .wait_for(&owner, &owner_pw, "the turn's reply", WAIT, |m| {
            bodies(m).iter().any(|b| b.contains("result: exit code 0"))
        })
        .await;
    assert!(workspace.join("owner.txt").exists());

    // Another allowed sender: refused without asking anyone.
    let mail = plain_mail(&friend, to, "Hi", &new_id("friend"), "", "FRIEND touch it");
    server.send_raw(&friend, to, &mail).await;
    let mails = server
        .wait_for(&friend, &friend_pw, "the friend's reply", WAIT, |m| {
            bodies(m).iter().any(|b| b.contains("result:"))
        })
        .await;
    let all = bodies(&mails).join("\n");
    assert!(all.contains("not from the owner"), "{all}");
    assert!(!all.contains("Approval needed"), "{all}");
    assert!(!workspace.join("friend.txt").exists());
    gateway.stop().await;
}
