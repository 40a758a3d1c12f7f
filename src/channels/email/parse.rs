//! MIME to what the agent reads: the text (plain preferred, HTML converted), the attachments,
//! and the header facts the loop guard and the reply need.
//!
//! Parsing is done by mail-parser, which decodes transfer encodings and legacy charsets. This
//! module only chooses: the text/plain bodies when there are any, else the HTML bodies turned
//! into readable text by html2text (the agent should not read markup); signature parts of
//! multipart/signed mail are not attachments; attachments over the size limit are listed but
//! not kept. It does no I/O, so every rule is unit-tested on literal mails.

use std::path::PathBuf;

use mail_parser::{HeaderName, HeaderValue, Message, MessageParser, MimeHeaders, PartType};

use super::auth::Identity;
use super::guard::MailFacts;
use super::{quote, uuencode};

/// The width HTML is wrapped to when converted to text.
const HTML_WIDTH: usize = 100;

/// The most characters of a mail's text the prompt gets (about 5 000 tokens); the whole text
/// is saved beside the attachments, so a long mail costs a file, not the conversation's
/// history in the prompt.
pub const MAX_TEXT_CHARS: usize = 20_000;

/// The name under which the whole text of a shortened mail is saved.
pub const FULL_TEXT_NAME: &str = "full-text.txt";

/// One mail, parsed.
#[derive(Debug, Clone, Default)]
pub struct ParsedMail {
    /// The header facts for the loop guard (sender, Message-ID, automation headers).
    pub facts: MailFacts,
    /// The subject, decoded; empty if none.
    pub subject: String,
    /// In-Reply-To ids, without angle brackets.
    pub in_reply_to: Vec<String>,
    /// References ids, without angle brackets.
    pub references: Vec<String>,
    /// The readable text.
    pub body: String,
    /// `pgp` or `smime` for multipart/signed mail (the signature is not verified).
    pub signature: Option<&'static str>,
    /// Attachments within the size limit.
    pub attachments: Vec<Attachment>,
    /// Attachments over the size limit: `(name, mime, size)`.
    pub skipped: Vec<(String, String, usize)>,
    /// Forwarded messages (`message/rfc822` parts), as text: their headers and body.
    pub forwarded: Vec<String>,
}

/// One attachment kept for saving.
#[derive(Debug, Clone)]
pub struct Attachment {
    /// The sender's file name (not yet made safe).
    pub name: String,
    /// `type/subtype`.
    pub mime: String,
    /// The decoded content.
    pub bytes: Vec<u8>,
}

/// Parses `raw`; attachments larger than `max_attachment` bytes are listed in `skipped`.
/// `None` when the bytes are not a mail at all.
pub fn parse(raw: &[u8], max_attachment: usize) -> Option<ParsedMail> {
    let message = MessageParser::default().parse(raw)?;
    let mut mail = ParsedMail {
        facts: facts(&message),
        subject: message.subject().unwrap_or_default().trim().to_owned(),
        in_reply_to: ids(message.in_reply_to()),
        references: ids(message.references()),
        body: body(&message),
        ..ParsedMail::default()
    };
    if let Some(kind) = message.content_type().filter(|ct| {
        ct.ctype().eq_ignore_ascii_case("multipart")
            && ct
                .subtype()
                .is_some_and(|s| s.eq_ignore_ascii_case("signed"))
    }) {
        let protocol = kind.attribute("protocol").unwrap_or_default();
        mail.signature = Some(if protocol.contains("pgp") {
            "pgp"
        } else {
            "smime"
        });
    }
    for (index, part) in message.attachments().enumerate() {
        let mime = part
            .content_type()
            .map(|ct| {
                format!("{}/{}", ct.ctype(), ct.subtype().unwrap_or("octet-stream"))
                    .to_ascii_lowercase()
            })
            .unwrap_or_else(|| "application/octet-stream".to_owned());
        if is_signature(&mime) {
            continue;
        }
        let name = part
            .attachment_name()
            .map(str::to_owned)
            .unwrap_or_else(|| match part.body {
                PartType::Message(_) => format!("message-{}.eml", index + 1),
                _ => format!("attachment-{}", index + 1),
            });
        if let PartType::Message(inner) = &part.body {
            mail.forwarded.push(forwarded_text(inner));
        }
        let bytes = part.contents();
        if bytes.len() > max_attachment {
            mail.skipped.push((name, mime, bytes.len()));
        } else {
            mail.attachments.push(Attachment {
                name,
                mime,
                bytes: bytes.to_vec(),
            });
        }
    }
    Some(mail)
}

/// A forwarded message as the person would see it in their client.
fn forwarded_text(message: &Message<'_>) -> String {
    let mut text = String::from("---------- Forwarded message ----------\n");
    let addresses = |list: Option<&mail_parser::Address<'_>>| {
        list.map(|list| {
            list.iter()
                .map(|a| match (a.name(), a.address()) {
                    (Some(name), Some(address)) => format!("{name} <{address}>"),
                    (_, Some(address)) => address.to_owned(),
                    (Some(name), None) => name.to_owned(),
                    (None, None) => String::new(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    if let Some(from) = addresses(message.from()) {
        text.push_str(&format!("From: {from}\n"));
    }
    if let Some(date) = message.date() {
        text.push_str(&format!("Date: {}\n", date.to_rfc822()));
    }
    if let Some(subject) = message.subject() {
        text.push_str(&format!("Subject: {subject}\n"));
    }
    if let Some(to) = addresses(message.to()) {
        text.push_str(&format!("To: {to}\n"));
    }
    text.push('\n');
    text.push_str(&body(message));
    text
}

/// Shapes `mail`'s text for the prompt: uuencoded files become attachments, the quoted
/// history is cut (see [`quote`]), forwarded messages are shown as text, and what is longer
/// than `max_chars` is shortened; each with a note, and the whole text kept as the
/// attachment [`FULL_TEXT_NAME`] when anything was left out.
pub fn shape_for_prompt(mail: &mut ParsedMail, max_chars: usize) {
    let (body, files) = uuencode::extract(&mail.body);
    for file in files {
        mail.attachments.push(Attachment {
            name: file.name,
            mime: "application/octet-stream".into(),
            bytes: file.bytes,
        });
    }
    let mut whole = body.clone();
    for forwarded in &mail.forwarded {
        whole.push_str("\n\n");
        whole.push_str(forwarded);
    }
    let unquoted = quote::unquote(&body);
    let mut text = unquoted.text;
    if unquoted.cut_lines > 0 {
        text.push_str(&format!(
            "\n\n[{} lines quoting earlier mail are left out here; the whole text is in the \
             attachment {FULL_TEXT_NAME}.]",
            unquoted.cut_lines
        ));
    }
    for forwarded in &mail.forwarded {
        text.push_str("\n\n");
        text.push_str(forwarded);
    }
    let total = text.chars().count();
    let shortened = total > max_chars;
    if shortened {
        let cut = text
            .char_indices()
            .nth(max_chars)
            .map_or(text.len(), |(at, _)| at);
        text.truncate(cut);
        text.push_str(&format!(
            "\n\n[The mail goes on for {} more characters, left out here; the whole text is in \
             the attachment {FULL_TEXT_NAME}.]",
            total - max_chars
        ));
    }
    if unquoted.cut_lines > 0 || shortened {
        mail.attachments.push(Attachment {
            name: FULL_TEXT_NAME.into(),
            mime: "text/plain".into(),
            bytes: whole.into_bytes(),
        });
    }
    mail.body = text;
}

/// The sender and automation headers.
fn facts(message: &Message<'_>) -> MailFacts {
    let sender = message
        .from()
        .and_then(|from| from.first())
        .and_then(|addr| addr.address())
        .map(|a| a.trim().to_ascii_lowercase());
    let header = |name: &str| {
        message
            .header_raw(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let return_path = header("Return-Path").unwrap_or_default();
    let autoresponder = ["X-Autoreply", "X-Autorespond", "X-Autoresponder"]
        .into_iter()
        .find(|name| header(name).is_some_and(|v| !v.eq_ignore_ascii_case("no")))
        .or_else(|| {
            // Exchange marks its own automatic replies with this (and X-Auto-Response-Suppress).
            header("X-MS-Exchange-Inbox-Rules-Loop")
                .is_some()
                .then_some("X-MS-Exchange-Inbox-Rules-Loop")
        });
    let report_type = message
        .content_type()
        .filter(|ct| {
            ct.ctype().eq_ignore_ascii_case("multipart")
                && ct
                    .subtype()
                    .is_some_and(|s| s.eq_ignore_ascii_case("report"))
        })
        .and_then(|ct| ct.attribute("report-type"))
        .map(|kind| kind.trim().to_ascii_lowercase());
    MailFacts {
        sender,
        message_id: message.message_id().map(str::to_owned),
        auto_submitted: header("Auto-Submitted"),
        precedence: header("Precedence"),
        list_id: message.header_raw("List-Id").is_some(),
        list_unsubscribe: message.header_raw("List-Unsubscribe").is_some(),
        autoresponder,
        report_type,
        subject: message.subject().unwrap_or_default().trim().to_owned(),
        null_return_path: return_path.replace(' ', "") == "<>",
        auth_results: message
            .headers_raw()
            .filter(|(name, _)| name.eq_ignore_ascii_case("Authentication-Results"))
            .map(|(_, value)| value.trim().to_owned())
            .collect(),
        identity: identity(message),
    }
}

/// Whether From and Sender name one sender (see [`Identity`]). mail-parser's `from()` reads
/// the last From header, so the count is taken over every header.
fn identity(message: &Message<'_>) -> Identity {
    let from_headers = message
        .headers()
        .iter()
        .filter(|header| header.name == HeaderName::From)
        .count();
    let from_addresses = message.from().map_or(0, |from| from.iter().count());
    if from_headers > 1 || from_addresses > 1 {
        return Identity::SeveralFrom;
    }
    let bare = |addr: &mail_parser::Addr<'_>| addr.address().map(|a| a.trim().to_ascii_lowercase());
    let senders = message
        .headers()
        .iter()
        .filter(|header| header.name == HeaderName::Sender)
        .count();
    let from = message.from().and_then(|from| from.first()).and_then(bare);
    let sender = message.sender().and_then(|s| s.first()).and_then(bare);
    match (senders, sender) {
        (0, _) => Identity::Single,
        (1, Some(sender)) if Some(&sender) == from.as_ref() => Identity::Single,
        _ => Identity::OtherSender,
    }
}

/// The ids of an id-list header, without angle brackets.
fn ids(value: &HeaderValue<'_>) -> Vec<String> {
    match value {
        HeaderValue::Text(id) => vec![id.to_string()],
        HeaderValue::TextList(list) => list.iter().map(|id| id.to_string()).collect(),
        _ => Vec::new(),
    }
}

/// The text bodies joined, plain text preferred and HTML converted; a note when there is none.
fn body(message: &Message<'_>) -> String {
    let mut texts = Vec::new();
    for part in message.text_bodies() {
        match &part.body {
            PartType::Text(text) => texts.push(text.trim().to_owned()),
            PartType::Html(html) => texts.push(html_to_text(html)),
            _ => {}
        }
    }
    if texts.iter().all(|t| t.is_empty()) {
        for part in message.html_bodies() {
            if let PartType::Html(html) = &part.body {
                texts.push(html_to_text(html));
            }
        }
    }
    let text = texts
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if text.is_empty() {
        "[This mail has no text.]".to_owned()
    } else {
        text
    }
}

/// Readable text from HTML (links kept as footnotes, markup dropped).
pub fn html_to_text(html: &str) -> String {
    match html2text::config::plain().string_from_read(html.as_bytes(), HTML_WIDTH) {
        Ok(text) => text.trim().to_owned(),
        Err(_) => html.to_owned(),
    }
}

/// Whether a part is the signature of multipart/signed mail.
fn is_signature(mime: &str) -> bool {
    matches!(
        mime,
        "application/pgp-signature"
            | "application/pkcs7-signature"
            | "application/x-pkcs7-signature"
    )
}

/// The text the agent gets: the subject, the body, then one line per attachment (saved with
/// its path, or skipped with the reason).
pub fn agent_text(
    mail: &ParsedMail,
    saved: &[(String, String, usize, PathBuf)],
    failed: &[String],
    max_attachment: usize,
) -> String {
    let mut text = String::new();
    if !mail.subject.is_empty() {
        text.push_str(&format!("Subject: {}\n\n", mail.subject));
    }
    text.push_str(&mail.body);
    for (name, mime, size, path) in saved {
        text.push_str(&format!(
            "\n[Attachment: {name} ({mime}, {size} bytes) saved at {}]",
            path.display()
        ));
    }
    for (name, mime, size) in &mail.skipped {
        text.push_str(&format!(
            "\n[Attachment not saved: {name} ({mime}, {size} bytes) is over the \
             {max_attachment}-byte limit]"
        ));
    }
    for name in failed {
        text.push_str(&format!(
            "\n[Attachment not saved: {name} could not be written]"
        ));
    }
    text
}

/// The note the agent gets for a mail too large to download.
pub fn oversize_note(size: u64, limit: u64) -> String {
    format!("[This mail is {size} bytes, over the {limit}-byte limit: only its headers were read.]")
}
