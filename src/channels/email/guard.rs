//! Who gets an answer: the loop guard, the sender allowlist and the per-sender rate limit.
//!
//! A bot that answers mail can loop with another robot (an out-of-office reply, a bounce, a
//! mailing list, itself) forever. The guard refuses every mail that says it was sent by a
//! machine (`Auto-Submitted` other than `no`, `Precedence: bulk|list|junk`, `List-Id`, a null
//! `Return-Path`, a mailer-daemon or postmaster sender) and every mail that is the bot's own
//! (its address or a Message-ID it generated). A per-sender rate limit stops whatever loop slips
//! through. Everything here is pure, so the rules are unit-tested without a server.

use std::collections::{HashMap, VecDeque};
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
    /// Whether `Return-Path` is the null path `<>` (a bounce).
    pub null_return_path: bool,
    /// The topmost `Authentication-Results` header: the receiving server's verdict (see
    /// [`super::auth`]).
    pub auth_results: Option<String>,
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
        }
    }
}

/// Local parts of mail-system accounts, which never get an answer.
const SYSTEM_SENDERS: [&str; 2] = ["mailer-daemon", "postmaster"];

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
    if facts.list_id {
        return Some(IgnoreReason::MailingList);
    }
    let local = sender.split('@').next().unwrap_or_default();
    if facts.null_return_path || SYSTEM_SENDERS.contains(&local) {
        return Some(IgnoreReason::MailSystem);
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
}

/// The window of the rate limit.
const WINDOW: Duration = Duration::from_secs(3600);

impl RateLimit {
    /// A limit of `per_hour` answers per sender.
    pub fn new(per_hour: u32) -> Self {
        Self {
            per_hour: per_hour as usize,
            answered: HashMap::new(),
        }
    }

    /// Records an answer to `sender` at `now` if the limit allows it; `false` means over limit.
    pub fn try_take(&mut self, sender: &str, now: Instant) -> bool {
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
            return false;
        }
        times.push_back(now);
        true
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
        assert!(limit.try_take("a@x", start));
        assert!(limit.try_take("a@x", start));
        assert!(!limit.try_take("a@x", start + Duration::from_secs(10)));
        assert!(limit.try_take("b@x", start));
        assert!(limit.try_take("a@x", start + WINDOW));
    }
}
