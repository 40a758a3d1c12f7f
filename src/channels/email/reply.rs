//! Building the mail the bot sends: a threaded reply or a proactive message (cron, heartbeat).
//!
//! A reply to a mail carries `Re: <subject>` (stacked prefixes collapsed, never `Re: Re:`),
//! `In-Reply-To` the mail's Message-ID and `References` its references plus that id, so mail
//! clients thread it. A proactive mail without a mail to answer keeps the subject it was given
//! (cron's `[squidbot] <job>`). Every mail is multipart/alternative (the Markdown as plain text,
//! and HTML rendered from it) and says `Auto-Submitted: auto-replied`, so well-behaved robots do
//! not answer it. The Message-ID is generated here, before the first attempt, so a retried send is
//! the same mail and the loop guard can recognise it.

use lettre::Message;
use lettre::message::MultiPart;
use lettre::message::header::{Header, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::EmailError;
use super::routing;
use crate::channels::format::markdown_to_html;

/// The metadata keys of an inbound mail, kept for the reply.
pub const META_MESSAGE_ID: &str = "email_message_id";
/// The sender address.
pub const META_FROM: &str = "email_from";
/// Metadata key: the UID of the mail a turn answers (only mail that answers one has it).
pub const META_UID: &str = "email_uid";
/// The References ids (a JSON array).
pub const META_REFERENCES: &str = "email_references";

/// One mail to send, in a form that can be saved and retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutgoingMail {
    /// The recipient address.
    pub to: String,
    /// The final subject.
    pub subject: String,
    /// The Message-ID answered, without angle brackets.
    pub in_reply_to: Option<String>,
    /// The References ids, without angle brackets.
    pub references: Vec<String>,
    /// The Markdown text.
    pub text: String,
    /// This mail's Message-ID, without angle brackets.
    pub message_id: String,
}

/// `Re: <subject>` with every reply prefix the subject already had collapsed into that one:
/// `Re: Re: Plans`, `RE: re: Plans`, `Re[2]: Plans` and `AW: Re: Plans` all become `Re: Plans`,
/// so a long exchange keeps a readable subject. Besides `Re`, the prefixes are the common
/// localized ones mail clients write (`AW`, `SV`, `VS`, `Antw`, `Odp`, `RIF`, `Ynt`), in any case,
/// with an optional count in brackets; anything else (`Fwd:`, `Regarding`) is kept.
pub fn reply_subject(subject: &str) -> String {
    let mut rest = subject.trim();
    while let Some(after) = strip_reply_prefix(rest) {
        rest = after.trim_start();
    }
    if rest.is_empty() {
        "Re: your mail".to_owned()
    } else {
        format!("Re: {rest}")
    }
}

/// `subject` after one leading reply prefix (`Re:`, `Re[2]:`, `AW :`...), if it has one.
fn strip_reply_prefix(subject: &str) -> Option<&str> {
    const PREFIXES: [&str; 8] = ["re", "aw", "sv", "vs", "antw", "odp", "rif", "ynt"];
    let word_end = subject
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(subject.len());
    let word = &subject[..word_end];
    if !PREFIXES.iter().any(|p| word.eq_ignore_ascii_case(p)) {
        return None;
    }
    let mut rest = &subject[word_end..];
    if let Some(counted) = rest.strip_prefix('[') {
        let close = counted.find(']')?;
        if !counted[..close].chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        rest = &counted[close + 1..];
    }
    rest.trim_start().strip_prefix(':')
}

/// A fresh Message-ID in the domain of `from_address`, without angle brackets.
pub fn new_message_id(from_address: &str) -> String {
    let domain = from_address
        .rsplit_once('@')
        .map(|(_, d)| d)
        .unwrap_or("localhost");
    format!(
        "squidbot.{}.{:016x}@{domain}",
        chrono::Utc::now().timestamp_millis(),
        fastrand::u64(..)
    )
}

/// The mail answering `metadata` (an inbound mail's, or a cron job's) to `to` with `text`.
pub fn outgoing(
    to: &str,
    metadata: &Map<String, Value>,
    text: &str,
    message_id: String,
) -> OutgoingMail {
    let subject = metadata
        .get(routing::EMAIL_SUBJECT)
        .and_then(Value::as_str)
        .unwrap_or_default();
    let answered = metadata
        .get(META_MESSAGE_ID)
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned);
    let mut references: Vec<String> = metadata
        .get(META_REFERENCES)
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    // A mail without a Message-ID is still answered as a reply: `Re:` keeps the exchange
    // recognisable even where nothing can thread it.
    let answers_mail = metadata.contains_key(META_UID);
    let subject = match &answered {
        Some(id) => {
            if !references.contains(id) {
                references.push(id.clone());
            }
            reply_subject(subject)
        }
        None if answers_mail => reply_subject(subject),
        None if subject.trim().is_empty() => "[squidbot]".to_owned(),
        None => subject.trim().to_owned(),
    };
    OutgoingMail {
        to: to.to_owned(),
        subject,
        in_reply_to: answered,
        references,
        text: text.to_owned(),
        message_id,
    }
}

/// `Auto-Submitted: auto-replied` (RFC 3834): robots must not answer this mail.
#[derive(Debug, Clone, Copy)]
struct AutoSubmitted;

impl Header for AutoSubmitted {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("Auto-Submitted")
    }

    fn parse(_: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(Self)
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), "auto-replied".to_owned())
    }
}

/// The lettre message for `mail` from `from`.
pub fn build(mail: &OutgoingMail, from: &str) -> Result<Message, EmailError> {
    let bad = |detail: String| EmailError::Build {
        to: mail.to.clone(),
        detail,
    };
    let from = from
        .parse()
        .map_err(|e| bad(format!("from address {from:?}: {e}")))?;
    let to = mail
        .to
        .parse()
        .map_err(|e| bad(format!("address {:?}: {e}", mail.to)))?;
    let mut builder = Message::builder()
        .from(from)
        .to(to)
        .subject(mail.subject.clone())
        .message_id(Some(format!("<{}>", mail.message_id)))
        .header(AutoSubmitted);
    if let Some(id) = &mail.in_reply_to {
        builder = builder.in_reply_to(format!("<{id}>"));
    }
    if !mail.references.is_empty() {
        let references: Vec<String> = mail.references.iter().map(|id| format!("<{id}>")).collect();
        builder = builder.references(references.join(" "));
    }
    let html = markdown_to_html(&mail.text);
    builder
        .multipart(MultiPart::alternative_plain_html(mail.text.clone(), html))
        .map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn re_is_added_once_and_stacked_prefixes_collapse() {
        for (subject, expected) in [
            ("Hello", "Re: Hello"),
            ("Re: Hello", "Re: Hello"),
            ("RE: Hello", "Re: Hello"),
            ("re:Hello", "Re: Hello"),
            ("Re: Re: Plans", "Re: Plans"),
            ("Re: RE: re:  Plans", "Re: Plans"),
            ("Re[2]: Plans", "Re: Plans"),
            ("AW: Re: Plans", "Re: Plans"),
            ("Re : Plans", "Re: Plans"),
            ("Re: Fwd: Plans", "Re: Fwd: Plans"),
            ("Fwd: Re: Plans", "Re: Fwd: Re: Plans"),
            ("Regarding plans", "Re: Regarding plans"),
            ("Re[x]: Plans", "Re: Re[x]: Plans"),
            ("Ré", "Re: Ré"),
            ("Re:", "Re: your mail"),
            ("", "Re: your mail"),
        ] {
            assert_eq!(reply_subject(subject), expected, "{subject:?}");
        }
    }

    #[test]
    fn replies_thread_and_cron_mail_keeps_its_subject() {
        let metadata = serde_json::json!({
            "email_message_id": "m2@x",
            "email_subject": "Plans",
            "email_references": ["m1@x"],
        });
        let mail = outgoing(
            "a@x",
            metadata.as_object().unwrap(),
            "**hi**",
            "s1@bot".into(),
        );
        assert_eq!(mail.subject, "Re: Plans");
        assert_eq!(mail.in_reply_to.as_deref(), Some("m2@x"));
        assert_eq!(mail.references, vec!["m1@x", "m2@x"]);

        let cron = serde_json::json!({ "email_subject": "[squidbot] digest" });
        let mail = outgoing("a@x", cron.as_object().unwrap(), "t", "s2@bot".into());
        assert_eq!(mail.subject, "[squidbot] digest");
        assert_eq!(mail.in_reply_to, None);
        assert!(mail.references.is_empty());
    }

    #[test]
    fn built_mail_has_threading_auto_submitted_and_both_parts() {
        let metadata = serde_json::json!({ "email_message_id": "m2@x", "email_subject": "Plans" });
        let mail = outgoing(
            "a@x.org",
            metadata.as_object().unwrap(),
            "**bold**",
            "s1@bot.org".into(),
        );
        let raw = String::from_utf8(build(&mail, "bot@bot.org").unwrap().formatted()).unwrap();
        assert!(raw.contains("Subject: Re: Plans\r\n"), "{raw}");
        assert!(raw.contains("In-Reply-To: <m2@x>\r\n"), "{raw}");
        assert!(raw.contains("References: <m2@x>\r\n"), "{raw}");
        assert!(raw.contains("Message-ID: <s1@bot.org>\r\n"), "{raw}");
        assert!(raw.contains("Auto-Submitted: auto-replied\r\n"), "{raw}");
        assert!(raw.contains("multipart/alternative"), "{raw}");
        assert!(raw.contains("<strong>bold</strong>"), "{raw}");
        assert!(new_message_id("bot@bot.org").ends_with("@bot.org"));
        assert!(build(&mail, "not an address").is_err());
    }
}
