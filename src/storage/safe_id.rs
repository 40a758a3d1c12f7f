//! The injective, filesystem-safe encoding of session ids into file names.
//!
//! The original replaced `:` with `__`, which maps `a:b` and `a__b` to the same file. Here every
//! byte outside `[a-z0-9.@-]` (uppercase letters included, so case-insensitive filesystems
//! cannot merge two ids) becomes `_XX` (hex), and `_` itself is escaped, so the mapping is
//! injective and reversible. A session id always contains `:`, so the result is never `.` or
//! `..` and never contains a path separator. Very long ids are shortened to a prefix plus a
//! SHA-256 of the whole id, which stays injective for all practical purposes and keeps names
//! under common filesystem limits.

use sha2::{Digest, Sha256};

use crate::core::session::SessionId;

/// The longest encoded name kept verbatim (filesystems allow 255 bytes; suffixes need room).
const MAX_VERBATIM: usize = 180;

/// Encodes a session id as a file-name stem.
pub fn encode(session: &SessionId) -> String {
    let mut out = String::with_capacity(session.as_str().len() + 8);
    for byte in session.as_str().bytes() {
        match byte {
            b'a'..=b'z' | b'0'..=b'9' | b'.' | b'@' | b'-' => out.push(byte as char),
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push('_');
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xF)]));
            }
        }
    }
    if out.len() <= MAX_VERBATIM {
        return out;
    }
    let digest = Sha256::digest(session.as_str().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let mut cut = 100;
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}_~{hex}", &out[..cut])
}

/// Decodes a stem made by [`encode`] back into the id text (None for hashed or foreign names).
pub fn decode(stem: &str) -> Option<String> {
    if stem.contains("_~") {
        return None;
    }
    let bytes = stem.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'_' {
            let hex = stem.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> SessionId {
        SessionId::parse(text).unwrap()
    }

    #[test]
    fn encoding_is_injective_where_the_original_was_not() {
        assert_ne!(encode(&id("a:b")), encode(&id("a:b__")));
        assert_ne!(encode(&id("cli:a__b")), encode(&id("cli:a:b")));
        assert_ne!(encode(&id("matrix:!Ab:x")), encode(&id("matrix:!ab:x")));
    }

    #[test]
    fn encoded_names_are_safe_and_reversible() {
        for text in [
            "cli:local",
            "matrix:!room:example.org",
            "email:bob@x.org",
            "http:../../etc/passwd",
            "http:a/b\\c",
        ] {
            let encoded = encode(&id(text));
            assert!(
                !encoded.contains('/') && !encoded.contains('\\'),
                "{encoded}"
            );
            assert!(encoded != "." && encoded != "..");
            assert_eq!(decode(&encoded).as_deref(), Some(text));
        }
    }

    #[test]
    fn long_ids_are_shortened_but_distinct() {
        let a = id(&format!("http:{}", "x".repeat(400)));
        let b = id(&format!("http:{}y", "x".repeat(399)));
        assert!(encode(&a).len() < 200);
        assert_ne!(encode(&a), encode(&b));
    }
}
