//! Who gets an answer: the loop guard, the sender allowlist and the per-sender rate limit.
//!
//! A bot that answers mail can loop with another robot (an out-of-office reply, a bounce, a
//! mailing list, itself) forever, and a machine's mail has nobody to read the answer. The
//! guard refuses every mail that says it was sent by a machine: RFC 3834 `Auto-Submitted`
//! other than `no`; the `X-Autoreply`/`X-Autorespond` headers and the subjects of
//! out-of-office replies that carry neither (Exchange's "Automatic reply:"); read receipts
//! (RFC 8098 `disposition-notification` reports, and the "Read:" notices of Outlook);
//! delivery reports (DSNs, `delivery-status`); `Precedence: bulk|list|junk`; `List-Id` or
//! `List-Unsubscribe` (mailing lists and newsletters); a null `Return-Path`; a mailer-daemon,
//! postmaster or no-reply sender. It refuses every mail that is the bot's own (its address or a
//! Message-ID it generated). A per-sender rate limit stops whatever loop slips through.
//! Everything here is pure, so the rules are unit-tested without a server.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// The header facts of one mail the guard looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailFacts {
    /// The lower-cased bare sender address, if the From header had one.
    pub sender: Option<String>,
    /// The Message-ID without angle brackets.
    pub message_id: Option<String>,
    /// The `Auto-Submitted` header value.
    pub auto_submitted: Option<String>,
    /// The `Precedence` header value.
    pub precedence: Option<String>,
    /// Whether a `List-Id` header is present.
    pub list_id: bool,
    /// Whether a `List-Unsubscribe` header is present (newsletters often carry only it).
    pub list_unsubscribe: bool,
    /// Whether an `X-Autoreply`, `X-Autorespond` or `X-Auto-Response-Suppress: All`-style
    /// auto-responder header is present (name of the header).
    pub autoresponder: Option<&'static str>,
    /// The `report-type` of a top-level `multipart/report` (`delivery-status`,
    /// `disposition-notification`), lower-cased.
    pub report_type: Option<String>,
    /// The decoded subject, for the out-of-office and receipt subjects.
    pub subject: String,
    /// Whether `Return-Path` is the null path `<>` (a bounce).
    pub null_return_path: bool,
    /// Every `Authentication-Results` value, topmost first: the receiving server's verdict is
    /// the topmost of those carrying its authserv-id (see [`super::auth`]).
    pub auth_results: Vec<String>,
    /// Whether From and Sender name one sender (see [`super::auth::Identity`]).
    pub identity: super::auth::Identity,
}

/// Why a mail gets no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnoreReason {
    /// The From header has no usable address.
    NoSender,
    /// It comes from the bot's own address.
    OwnAddress,
    /// Its Message-ID is one the bot generated.
    OwnMessageId,
    /// `Auto-Submitted` says a machine sent it.
    AutoSubmitted(String),
    /// `Precedence` is bulk, list or junk.
    Precedence(String),
    /// It came through a mailing list (`List-Id`).
    MailingList,
    /// It is a bounce or comes from a mail system account.
    MailSystem,
    /// The sender is not in `allow_from`.
    NotAllowed,
    /// The sender exceeded `replies_per_hour`.
    RateLimited,
    /// An auto-responder's mail (out of office, vacation).
    AutoReply(&'static str),
    /// A read receipt.
    ReadReceipt,
    /// A delivery report (bounce or delay notice).
    DeliveryReport,
    /// A newsletter (`List-Unsubscribe`).
    Newsletter,
    /// A sender that takes no replies (`no-reply@`, `do_not_reply@`, …).
    NoReplySender,
}

impl IgnoreReason {
    /// A short name for logs and the progress file.
    pub fn label(&self) -> &'static str {
        match self {
            Self::NoSender => "no_sender",
            Self::OwnAddress => "own_address",
            Self::OwnMessageId => "own_message_id",
            Self::AutoSubmitted(_) => "auto_submitted",
            Self::Precedence(_) => "precedence",
            Self::MailingList => "mailing_list",
            Self::MailSystem => "mail_system",
            Self::NotAllowed => "not_allowed",
            Self::RateLimited => "rate_limited",
            Self::AutoReply(_) => "auto_reply",
            Self::ReadReceipt => "read_receipt",
            Self::DeliveryReport => "delivery_report",
            Self::Newsletter => "newsletter",
            Self::NoReplySender => "no_reply_sender",
        }
    }

    /// Why, in words, for the log line each refused mail gets.
    pub fn why(&self) -> String {
        match self {
            Self::NoSender => "the From header has no address".into(),
            Self::OwnAddress => "it comes from the bot's own address".into(),
            Self::OwnMessageId => "its Message-ID is one the bot generated".into(),
            Self::AutoSubmitted(value) => format!("Auto-Submitted: {value}"),
            Self::Precedence(value) => format!("Precedence: {value}"),
            Self::MailingList => "it came through a mailing list (List-Id)".into(),
            Self::MailSystem => "it is a bounce or from a mail system account".into(),
            Self::NotAllowed => "the sender is not in allow_from".into(),
            Self::RateLimited => "the sender is over replies_per_hour".into(),
            Self::AutoReply(what) => format!("it is an automatic reply ({what})"),
            Self::ReadReceipt => "it is a read receipt".into(),
            Self::DeliveryReport => "it is a delivery report".into(),
            Self::Newsletter => "it is a newsletter (List-Unsubscribe)".into(),
            Self::NoReplySender => "the sender takes no replies".into(),
        }
    }
}

/// Local parts of mail-system accounts, which never get an answer.
const SYSTEM_SENDERS: [&str; 2] = ["mailer-daemon", "postmaster"];

/// Subject prefixes of out-of-office replies sent without `Auto-Submitted` (Exchange, Gmail's
/// vacation responder in some setups, localized Outlook), compared lower-cased.
const AUTO_REPLY_SUBJECTS: [&str; 9] = [
    "automatic reply:",
    "auto reply:",
    "autoreply:",
    "auto-reply:",
    "out of office:",
    "out of the office:",
    "abwesenheitsnotiz:",
    "réponse automatique :",
    "respuesta automática:",
];

/// Subject prefixes of read receipts not sent as RFC 8098 reports (Outlook's "Read: …").
const RECEIPT_SUBJECTS: [&str; 4] = ["read:", "read receipt:", "gelesen:", "lu :"];

/// Whether a local part (`no-reply`, `noreply`, `do_not_reply`, `donotreply`, `no.reply`,
/// `noreply+x`, `bounce-…`) names a mailbox that takes no replies.
fn is_no_reply(local: &str) -> bool {
    let squeezed: String = local
        .split('+')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    squeezed.starts_with("noreply")
        || squeezed.starts_with("donotreply")
        || squeezed.starts_with("dontreply")
        || squeezed.ends_with("noreply")
        || squeezed.ends_with("donotreply")
}

/// The loop-guard verdict for `facts`: `Some(reason)` means no answer. `own_address` is the
/// bot's address (any case); `is_own_id` tells whether a Message-ID is one the bot sent.
pub fn loop_check(
    facts: &MailFacts,
    own_address: &str,
    is_own_id: impl Fn(&str) -> bool,
) -> Option<IgnoreReason> {
    let Some(sender) = facts.sender.as_deref().filter(|s| s.contains('@')) else {
        return Some(IgnoreReason::NoSender);
    };
    if sender.eq_ignore_ascii_case(own_address.trim()) {
        return Some(IgnoreReason::OwnAddress);
    }
    if facts.message_id.as_deref().is_some_and(is_own_id) {
        return Some(IgnoreReason::OwnMessageId);
    }
    if let Some(value) = &facts.auto_submitted {
        let token = first_token(value);
        if !token.is_empty() && token != "no" {
            return Some(IgnoreReason::AutoSubmitted(token));
        }
    }
    if let Some(value) = &facts.precedence {
        let token = first_token(value);
        if matches!(token.as_str(), "bulk" | "list" | "junk") {
            return Some(IgnoreReason::Precedence(token));
        }
    }
    if let Some(header) = facts.autoresponder {
        return Some(IgnoreReason::AutoReply(header));
    }
    match facts.report_type.as_deref() {
        Some("disposition-notification") => return Some(IgnoreReason::ReadReceipt),
        Some("delivery-status") => return Some(IgnoreReason::DeliveryReport),
        _ => {}
    }
    let subject = facts.subject.trim_start().to_lowercase();
    if AUTO_REPLY_SUBJECTS.iter().any(|p| subject.starts_with(p)) {
        return Some(IgnoreReason::AutoReply("subject"));
    }
    if RECEIPT_SUBJECTS.iter().any(|p| subject.starts_with(p)) {
        return Some(IgnoreReason::ReadReceipt);
    }
    if facts.list_id {
        return Some(IgnoreReason::MailingList);
    }
    if facts.list_unsubscribe {
        return Some(IgnoreReason::Newsletter);
    }
    let local = sender.split('@').next().unwrap_or_default();
    if facts.null_return_path || SYSTEM_SENDERS.contains(&local) {
        return Some(IgnoreReason::MailSystem);
    }
    if is_no_reply(local) {
        return Some(IgnoreReason::NoReplySender);
    }
    None
}

/// The first word of a header value, lower-cased (`auto-replied; foo` → `auto-replied`).
fn first_token(value: &str) -> String {
    value
        .split(|c: char| c == ';' || c.is_whitespace())
        .find(|part| !part.is_empty())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// `allow_from`: exact addresses and `@domain` entries, compared case-insensitively, and `"*"`
/// for everyone. An empty list allows nobody: the bot can run shell commands, so answering
/// anyone who writes to its address must be asked for, not defaulted to.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    addresses: Vec<String>,
    domains: Vec<String>,
    everyone: bool,
}

impl Allowlist {
    /// The allowlist of the configured entries.
    pub fn new(entries: &[String]) -> Self {
        let mut list = Self::default();
        for entry in entries {
            let entry = entry.trim().to_ascii_lowercase();
            if entry == "*" {
                list.everyone = true;
            } else if let Some(domain) = entry.strip_prefix('@') {
                list.domains.push(domain.to_owned());
            } else if !entry.is_empty() {
                list.addresses.push(entry);
            }
        }
        list
    }

    /// Whether `sender` (a bare address) may talk to the bot.
    pub fn allows(&self, sender: &str) -> bool {
        if self.everyone {
            return true;
        }
        let sender = sender.trim().to_ascii_lowercase();
        if self.addresses.contains(&sender) {
            return true;
        }
        let domain = sender.rsplit_once('@').map(|(_, d)| d).unwrap_or_default();
        self.domains.iter().any(|d| d == domain)
    }
}

/// At most `per_hour` answers per sender in any sliding hour.
#[derive(Debug)]
pub struct RateLimit {
    per_hour: usize,
    answered: HashMap<String, VecDeque<Instant>>,
    /// Senders told they are over the limit since they last had room.
    told: HashSet<String>,
}

/// The window of the rate limit.
const WINDOW: Duration = Duration::from_secs(3600);

/// A sender over the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimit {
    /// When the sender has room again.
    pub room_at: Instant,
    /// Whether this is the first refusal since they last had room: tell them, once.
    pub tell: bool,
}

impl RateLimit {
    /// A limit of `per_hour` answers per sender.
    pub fn new(per_hour: u32) -> Self {
        Self {
            per_hour: per_hour as usize,
            answered: HashMap::new(),
            told: HashSet::new(),
        }
    }

    /// Records an answer to `sender` at `now` if the limit allows it; else when there is
    /// room again, and whether to tell the sender.
    pub fn try_take(&mut self, sender: &str, now: Instant) -> Result<(), OverLimit> {
        self.answered.retain(|_, times| {
            while times
                .front()
                .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
            {
                times.pop_front();
            }
            !times.is_empty()
        });
        let times = self.answered.entry(sender.to_owned()).or_default();
        if times.len() >= self.per_hour {
            let room_at = times.front().map_or(now, |first| *first + WINDOW);
            let tell = self.told.insert(sender.to_owned());
            return Err(OverLimit { room_at, tell });
        }
        times.push_back(now);
        self.told.remove(sender);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(sender: &str) -> MailFacts {
        MailFacts {
            sender: Some(sender.into()),
            message_id: Some("abc@example.org".into()),
            ..MailFacts::default()
        }
    }

    fn check(facts: &MailFacts) -> Option<&'static str> {
        loop_check(facts, "Bot@Example.org", |id| id.starts_with("squidbot.")).map(|r| r.label())
    }

    #[test]
    fn ordinary_mail_passes() {
        assert_eq!(check(&facts("alice@example.org")), None);
        let mut human = facts("alice@example.org");
        human.auto_submitted = Some("No".into());
        human.precedence = Some("normal".into());
        assert_eq!(check(&human), None);
    }

    #[test]
    fn own_mail_and_machines_are_refused() {
        assert_eq!(check(&facts("bot@example.org")), Some("own_address"));
        let mut own_id = facts("alice@example.org");
        own_id.message_id = Some("squidbot.1@example.org".into());
        assert_eq!(check(&own_id), Some("own_message_id"));
        for value in ["auto-replied", "auto-generated; x", "Auto-Notified"] {
            let mut auto = facts("alice@example.org");
            auto.auto_submitted = Some(value.into());
            assert_eq!(check(&auto), Some("auto_submitted"), "{value}");
        }
        for value in ["bulk", "List", " junk"] {
            let mut bulk = facts("alice@example.org");
            bulk.precedence = Some(value.into());
            assert_eq!(check(&bulk), Some("precedence"), "{value}");
        }
        let mut list = facts("alice@example.org");
        list.list_id = true;
        assert_eq!(check(&list), Some("mailing_list"));
        assert_eq!(
            check(&facts(
                "MAILER-DAEMON@example.org".to_ascii_lowercase().as_str()
            )),
            Some("mail_system")
        );
        assert_eq!(check(&facts("postmaster@example.org")), Some("mail_system"));
        let mut bounce = facts("alice@example.org");
        bounce.null_return_path = true;
        assert_eq!(check(&bounce), Some("mail_system"));
        assert_eq!(check(&MailFacts::default()), Some("no_sender"));
    }

    #[test]
    fn auto_replies_receipts_reports_newsletters_and_no_reply_senders_are_refused() {
        let with = |change: &dyn Fn(&mut MailFacts)| {
            let mut mail = facts("alice@example.org");
            change(&mut mail);
            check(&mail)
        };
        assert_eq!(
            with(&|m| m.autoresponder = Some("X-Autoreply")),
            Some("auto_reply")
        );
        for subject in [
            "Automatic reply: lunch",
            "Out of Office: back Monday",
            "AutoReply: x",
        ] {
            assert_eq!(
                with(&|m| m.subject = subject.into()),
                Some("auto_reply"),
                "{subject}"
            );
        }
        assert_eq!(
            with(&|m| m.subject = "Read: the plan".into()),
            Some("read_receipt")
        );
        assert_eq!(
            with(&|m| m.report_type = Some("disposition-notification".into())),
            Some("read_receipt")
        );
        assert_eq!(
            with(&|m| m.report_type = Some("delivery-status".into())),
            Some("delivery_report")
        );
        assert_eq!(with(&|m| m.list_unsubscribe = true), Some("newsletter"));
        for sender in [
            "no-reply@example.org",
            "noreply+abc@example.org",
            "do_not_reply@example.org",
            "DoNotReply@example.org",
            "notifications-noreply@example.org",
        ] {
            let sender = sender.to_ascii_lowercase();
            assert_eq!(check(&facts(&sender)), Some("no_reply_sender"), "{sender}");
        }
        // People whose names merely contain the words pass, as does a subject about reading.
        assert_eq!(check(&facts("noreen@example.org")), None);
        assert_eq!(
            with(&|m| m.subject = "Reading list for Monday".into()),
            None
        );
        assert_eq!(with(&|m| m.subject = "Re: Read: x".into()), None);
    }

    #[test]
    fn allowlist_matches_addresses_and_domains_case_insensitively() {
        let list = Allowlist::new(&["Alice@Example.org".into(), "@Corp.Example".into()]);
        assert!(list.allows("alice@example.org"));
        assert!(list.allows("ALICE@EXAMPLE.ORG"));
        assert!(list.allows("bob@corp.example"));
        assert!(!list.allows("bob@example.org"));
        assert!(!list.allows("bob@sub.corp.example"));
        assert!(!list.allows("corp.example@evil.example"));
        assert!(!Allowlist::new(&[]).allows("anyone@anywhere"));
        assert!(Allowlist::new(&[" * ".into()]).allows("anyone@anywhere"));
    }

    #[test]
    fn rate_limit_slides_per_sender() {
        let start = Instant::now();
        let mut limit = RateLimit::new(2);
        assert!(limit.try_take("a@x", start).is_ok());
        assert!(limit.try_take("a@x", start).is_ok());
        let later = start + Duration::from_secs(10);
        let over = OverLimit {
            room_at: start + WINDOW,
            tell: true,
        };
        assert_eq!(limit.try_take("a@x", later), Err(over));
        let told = OverLimit {
            tell: false,
            ..over
        };
        assert_eq!(limit.try_take("a@x", later), Err(told));
        assert!(limit.try_take("b@x", start).is_ok());
        assert!(limit.try_take("a@x", start + WINDOW).is_ok());
        // Room again: a later refusal is told again.
        limit.try_take("a@x", start + WINDOW).unwrap();
        assert!(limit.try_take("a@x", start + WINDOW).unwrap_err().tell);
    }
}
