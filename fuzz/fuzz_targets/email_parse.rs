//! Fuzzes inbound email parsing: raw RFC 5322 bytes as fetched over IMAP, through
//! `squidbot::channels::email::parse::parse_inbound`, the function the email channel applies to
//! every fetched message.
//!
//! NOT YET BUILT: `src/channels/email/parse.rs` is on another branch. Once it is merged, add this
//! target to `fuzz/Cargo.toml` (a `[[bin]]` named `email_parse`, like the others) and to
//! `TARGETS` in `scripts/proof`, and adjust the call below to the function's real name and
//! return type; the seeds are in `fuzz/seeds/email_parse/`.
//!
//! Invariants checked on every input, beyond "never panics":
//! - parsing is deterministic (the same bytes give the same result twice);
//! - an accepted message's text is valid UTF-8 (guaranteed by `String`) and no longer than a
//!   generous bound on the input (decoding quoted-printable or base64 never grows text wildly).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let first = format!(
        "{:?}",
        squidbot::channels::email::parse::parse_inbound(data)
    );
    let second = format!(
        "{:?}",
        squidbot::channels::email::parse::parse_inbound(data)
    );
    assert_eq!(first, second, "parsing the same bytes twice differed");
    // Decoded text can exceed the raw size only by charset conversion (at most ~3x for UTF-8
    // from single-byte charsets) plus a small constant for synthesized fields.
    assert!(
        first.len() <= data.len() * 8 + 4096,
        "parse result is implausibly large"
    );
});
