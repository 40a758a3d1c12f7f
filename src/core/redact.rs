//! [`Redactor`]: every secret squidbot knows, replaced by `[redacted]` in tool output.
//!
//! The secrets are collected once, at assembly (the configuration's resolved credentials and
//! the variables they name), and every tool result passes through [`Redactor::redact`] in the
//! tool set before it is stored, shown to the model, delivered or logged. So a key that a
//! command prints (`cat` of a file it was written to, an `env` dump, an error message quoting a
//! header) never reaches a session file, a summary, MEMORY.md, a prompt or a reply.
//!
//! Matching uses aho-corasick over every secret at once, with overlapping matches: when two
//! secrets overlap in the text (the end of one is the start of another), the union of both is
//! replaced, so no part of either is left visible. Besides each value as it is, its JSON-escaped
//! and percent-encoded forms are matched, which is how a secret with a quote or a space shows
//! up in JSON output or a URL. Secrets shorter than [`MIN_SECRET_LEN`] bytes are not matched:
//! replacing every occurrence of a four-letter word would wreck ordinary output, and such a
//! value is no real secret; the assembly logs the fields it skipped.
//!
//! A secret learned later (the access token a Matrix password login returns) is added with
//! [`Redactor::add`]: the matcher is rebuilt and swapped in, so every holder of the shared
//! redactor (tool set, agent loop, log writer) covers it from then on.

use std::borrow::Cow;
use std::sync::{Arc, PoisonError, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};

/// What a secret is replaced by.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this (in bytes) are not redacted (see the module docs).
pub const MIN_SECRET_LEN: usize = 8;

/// Replaces known secrets in text. Cheap to share; built once, extended by [`Redactor::add`].
#[derive(Debug, Default)]
pub struct Redactor {
    // A std lock: held only to clone the Arc (readers) or to swap it (a rare `add`).
    current: RwLock<Arc<Matcher>>,
}

/// One built matcher over a fixed set of secrets.
#[derive(Debug, Default)]
struct Matcher {
    matcher: Option<AhoCorasick>,
    /// The secrets matched, kept to rebuild with one more.
    secrets: Vec<String>,
    /// Every form matched, for [`Redactor::partial_suffix`].
    patterns: Vec<String>,
}

impl Redactor {
    /// A redactor that changes nothing (no secrets known).
    pub fn none() -> Self {
        Self::default()
    }

    /// A redactor for `secrets`; values shorter than [`MIN_SECRET_LEN`] are left out (see
    /// [`Redactor::too_short`] to name them).
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let secrets = secrets.into_iter().map(|s| s.as_ref().to_owned()).collect();
        Self {
            current: RwLock::new(Arc::new(Matcher::build(secrets))),
        }
    }

    /// Adds `secret` (learned after start) to what is redacted from now on; a value too short
    /// or already known changes nothing.
    pub fn add(&self, secret: &str) {
        if Self::too_short(secret) {
            return;
        }
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if current.secrets.iter().any(|known| known == secret) {
            return;
        }
        let mut secrets = current.secrets.clone();
        secrets.push(secret.to_owned());
        *current = Arc::new(Matcher::build(secrets));
    }

    fn matcher(&self) -> Arc<Matcher> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether `secret` is too short to be redacted.
    pub fn too_short(secret: &str) -> bool {
        secret.len() < MIN_SECRET_LEN
    }

    /// How many secrets are redacted.
    pub fn len(&self) -> usize {
        self.matcher().secrets.len()
    }

    /// Whether no secret is redacted.
    pub fn is_empty(&self) -> bool {
        self.matcher().secrets.is_empty()
    }

    /// The length of the longest end of `text` that is the beginning of a secret (but not a
    /// whole one): what a stream must hold back until the next piece shows whether it goes on.
    pub fn partial_suffix(&self, text: &str) -> usize {
        let text = text.as_bytes();
        self.matcher()
            .patterns
            .iter()
            .filter_map(|pattern| {
                let pattern = pattern.as_bytes();
                (1..pattern.len())
                    .rev()
                    .find(|&k| text.ends_with(&pattern[..k]))
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether `text` contains a known secret.
    pub fn finds(&self, text: &str) -> bool {
        self.matcher()
            .matcher
            .as_ref()
            .is_some_and(|matcher| matcher.is_match(text))
    }

    /// `text` with every known secret replaced by [`REDACTED`]; borrowed when none occurs.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let current = self.matcher();
        let Some(matcher) = &current.matcher else {
            return Cow::Borrowed(text);
        };
        // The byte ranges of all matches, overlapping ones included, merged into maximal
        // covered runs. The patterns are valid UTF-8, so every match starts and ends on a
        // character boundary of the (valid UTF-8) text.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut found: Vec<(usize, usize)> = matcher
            .find_overlapping_iter(text)
            .map(|m| (m.start(), m.end()))
            .collect();
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        found.sort_unstable();
        for (start, end) in found {
            match runs.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => runs.push((start, end)),
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in runs {
            out.push_str(&text[at..start]);
            out.push_str(REDACTED);
            at = end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }
}

impl Redactor {
    /// `value` with the known secrets replaced in every string, keys included (a tool call's
    /// arguments, a `/status` document).
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(text) => {
                if let Cow::Owned(redacted) = self.redact(text) {
                    *text = redacted;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_json(item)),
            Value::Object(map) => {
                map.values_mut().for_each(|item| self.redact_json(item));
                // Keys are rewritten only when one holds a secret (almost never): the map is
                // not rebuilt for every tool call.
                if map.keys().any(|key| self.finds(key)) {
                    for (key, item) in std::mem::take(map) {
                        map.insert(self.redact(&key).into_owned(), item);
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

impl Matcher {
    /// The matcher of `secrets`, the too-short ones dropped.
    fn build(mut secrets: Vec<String>) -> Self {
        secrets.retain(|secret| !Redactor::too_short(secret));
        secrets.dedup();
        let mut patterns: Vec<String> = Vec::new();
        for secret in &secrets {
            for form in forms(secret) {
                if !patterns.contains(&form) {
                    patterns.push(form);
                }
            }
        }
        if patterns.is_empty() {
            return Self::default();
        }
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&patterns);
        match matcher {
            Ok(matcher) => Self {
                matcher: Some(matcher),
                secrets,
                patterns,
            },
            Err(error) => {
                // Only a pattern set beyond aho-corasick's size limits fails; a handful of
                // secrets never is. Say so loudly rather than pretend to redact.
                tracing::error!(error = %error, "Secret redactor could not be built; tool output is not redacted.");
                Self::default()
            }
        }
    }
}

/// The forms a secret takes in output: as it is, JSON-escaped, percent-encoded.
fn forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_owned()];
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(secret);
    let percent = percent_encoded(secret);
    for form in [json.to_owned(), percent] {
        if !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// `text` with every byte outside RFC 3986's unreserved set percent-encoded.
fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Redacts a text that arrives in pieces (a streamed reply), where a secret may be split
/// between two pieces: each piece is added to what was held back, every whole secret in it is
/// replaced, and everything is let out but an end that could be the beginning of a secret
/// ([`Redactor::partial_suffix`]; usually nothing, so the stream does not stall).
/// [`StreamRedactor::finish`] lets out the rest. What is let out, joined, equals
/// [`Redactor::redact`] of the whole text.
#[derive(Debug)]
pub struct StreamRedactor<'a> {
    redactor: &'a Redactor,
    held: String,
}

impl<'a> StreamRedactor<'a> {
    /// A stream redacted by `redactor`.
    pub fn new(redactor: &'a Redactor) -> Self {
        Self {
            redactor,
            held: String::new(),
        }
    }

    /// Adds `piece`; returns what may be shown now (possibly nothing).
    pub fn push(&mut self, piece: &str) -> String {
        if self.redactor.is_empty() {
            return piece.to_owned();
        }
        self.held.push_str(piece);
        if let Cow::Owned(redacted) = self.redactor.redact(&self.held) {
            self.held = redacted;
        }
        let keep = self.redactor.partial_suffix(&self.held);
        let mut cut = self.held.len().saturating_sub(keep);
        while !self.held.is_char_boundary(cut) {
            cut -= 1;
        }
        let rest = self.held.split_off(cut);
        std::mem::replace(&mut self.held, rest)
    }

    /// What is still held back, redacted; the stream is then empty.
    pub fn finish(&mut self) -> String {
        let held = std::mem::take(&mut self.held);
        self.redactor.redact(&held).into_owned()
    }

    /// Drops what is held back (the stream starts over).
    pub fn reset(&mut self) {
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(secrets: &[&str], text: &str, expected: &str) {
        let redactor = Redactor::new(secrets.iter().copied());
        assert_eq!(redactor.redact(text), expected, "secrets {secrets:?}");
    }

    #[test]
    fn secrets_are_replaced_wherever_they_occur() {
        check(
            &["sk-live-123456"],
            "key=sk-live-123456\n",
            "key=[redacted]\n",
        );
        check(
            &["sk-live-123456"],
            "sk-live-123456sk-live-123456 end",
            "[redacted] end",
        );
        check(&["sk-live-123456"], "nothing here", "nothing here");
        check(&[], "sk-live-123456", "sk-live-123456");
        // Unicode around and inside secrets stays well-formed.
        check(&["pässwörd-42"], "é pässwörd-42 é", "é [redacted] é");
    }

    #[test]
    fn overlapping_secrets_leave_no_part_visible() {
        // The second starts inside the first: their union is one redaction.
        check(
            &["abcdefgh12", "gh12345678"],
            "x abcdefgh12345678 y",
            "x [redacted] y",
        );
        // One inside another, in either order of configuration.
        check(
            &["0123456789", "23456789"],
            "a 0123456789 b",
            "a [redacted] b",
        );
        check(
            &["23456789", "0123456789"],
            "a 0123456789 b",
            "a [redacted] b",
        );
        // Adjacent but not overlapping: still no gap between them.
        check(&["aaaaaaaa", "bbbbbbbb"], "aaaaaaaabbbbbbbb", "[redacted]");
    }

    #[test]
    fn escaped_forms_are_redacted() {
        check(
            &["pass \"word\" 99"],
            r#"{"password":"pass \"word\" 99"}"#,
            r#"{"password":"[redacted]"}"#,
        );
        check(
            &["p@ss word/99"],
            "https://u:p%40ss%20word%2F99@host/",
            "https://u:[redacted]@host/",
        );
    }

    #[test]
    fn short_secrets_are_left_out() {
        let redactor = Redactor::new(["1234", "long-enough-secret"]);
        assert_eq!(redactor.len(), 1);
        assert_eq!(
            redactor.redact("1234 long-enough-secret"),
            "1234 [redacted]"
        );
        assert!(Redactor::too_short("1234567"));
        assert!(!Redactor::too_short("12345678"));
        assert!(Redactor::none().is_empty());
    }

    #[test]
    fn a_secret_added_later_is_redacted_from_then_on() {
        let redactor = Redactor::new(["sk-live-123456"]);
        let text = "sk-live-123456 syt_bot_token_abcdef";
        assert_eq!(redactor.redact(text), "[redacted] syt_bot_token_abcdef");
        redactor.add("syt_bot_token_abcdef");
        redactor.add("syt_bot_token_abcdef");
        redactor.add("short");
        assert_eq!(redactor.len(), 2);
        assert_eq!(redactor.redact(text), "[redacted] [redacted]");
        let empty = Redactor::none();
        empty.add("syt_bot_token_abcdef");
        assert!(empty.finds(text));
    }

    #[test]
    fn a_stream_never_lets_out_a_secret_split_between_pieces() {
        let redactor = Redactor::new(["sk-live-SECRET-123456"]);
        let text = "the key is sk-live-SECRET-123456, and again sk-live-SECRET-123456!";
        for size in 1..=text.len() {
            let mut stream = StreamRedactor::new(&redactor);
            let mut shown = String::new();
            let bytes: Vec<char> = text.chars().collect();
            for piece in bytes.chunks(size) {
                let piece: String = piece.iter().collect();
                let out = stream.push(&piece);
                assert!(!out.contains("SECRET"), "{out}");
                shown.push_str(&out);
            }
            shown.push_str(&stream.finish());
            assert_eq!(shown, redactor.redact(text), "pieces of {size}");
        }
    }
}
