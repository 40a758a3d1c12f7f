//! Fuzzes inbound email parsing: raw RFC 5322 bytes as fetched over IMAP, through
//! `squidbot::channels::email::parse::parse` (what the email channel applies to every fetched
//! message) and `agent_text` (what the agent then reads).
//!
//! Invariants checked on every input, beyond "never panics":
//! - parsing is deterministic (the same bytes give the same result twice);
//! - the size limit holds: every kept attachment is within it, every skipped one is over it;
//! - decoding never grows the text wildly (quoted-printable and base64 shrink; charset
//!   conversion to UTF-8 at most triples; HTML to text adds little).
#![no_main]

use libfuzzer_sys::fuzz_target;
use squidbot::channels::email::parse::{agent_text, parse};

/// The attachment limit used here: small, so the fuzzer reaches both sides of it.
const LIMIT: usize = 64;

fuzz_target!(|data: &[u8]| {
    let first = parse(data, LIMIT);
    let second = parse(data, LIMIT);
    assert_eq!(
        format!("{first:?}"),
        format!("{second:?}"),
        "parsing the same bytes twice differed"
    );
    let Some(mail) = first else { return };
    assert!(mail.attachments.iter().all(|a| a.bytes.len() <= LIMIT));
    assert!(mail.skipped.iter().all(|(_, _, size)| *size > LIMIT));
    assert!(
        mail.body.len() <= data.len() * 8 + 4096,
        "the text is implausibly large ({} bytes from {})",
        mail.body.len(),
        data.len()
    );
    let _ = agent_text(&mail, &[], &[], LIMIT);
});
