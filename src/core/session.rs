//! Session identity: `<channel>:<key>`, the unit of history, summary and ordering.
//!
//! A session id is validated once, here, so every later use (file names, locks, routing) can
//! rely on it: the channel part is a short lowercase word and the key is non-empty text without
//! control characters. Turning an id into a file name is storage's job (an injective encoding),
//! so no id can name a path outside the session directories whatever characters the key holds.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not a session id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionIdError {
    /// There is no `:` separating channel and key.
    #[error("session id {0:?} has no ':' between channel and key")]
    MissingSeparator(String),
    /// The channel part is empty, too long, or not `[a-z][a-z0-9_-]*`.
    #[error(
        "session id {0:?} has an invalid channel (expected lowercase letters, digits, '-', '_')"
    )]
    BadChannel(String),
    /// The key part is empty, longer than 512 bytes, or holds control characters.
    #[error("session id {0:?} has an empty, overlong or control-character key")]
    BadKey(String),
}

/// A validated session id such as `matrix:!room:server`, `email:bob@example.org`, `cli:local`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// Builds an id from a channel name and a key, validating both.
    pub fn new(channel: &str, key: &str) -> Result<Self, SessionIdError> {
        Self::parse(&format!("{channel}:{key}"))
    }

    /// Parses `<channel>:<key>`; the key may itself contain `:` (Matrix ids do).
    pub fn parse(text: &str) -> Result<Self, SessionIdError> {
        let Some((channel, key)) = text.split_once(':') else {
            return Err(SessionIdError::MissingSeparator(text.to_owned()));
        };
        let channel_ok = !channel.is_empty()
            && channel.len() <= 32
            && channel.starts_with(|c: char| c.is_ascii_lowercase())
            && channel
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !channel_ok {
            return Err(SessionIdError::BadChannel(text.to_owned()));
        }
        if key.is_empty() || key.len() > 512 || key.chars().any(char::is_control) {
            return Err(SessionIdError::BadKey(text.to_owned()));
        }
        Ok(Self(text.to_owned()))
    }

    /// The terminal session.
    pub fn cli_local() -> Self {
        Self("cli:local".to_owned())
    }

    /// The whole id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The channel part (`matrix`, `email`, `cli`, `http`, `spawn`, ...).
    pub fn channel(&self) -> &str {
        self.0.split_once(':').map_or("", |(channel, _)| channel)
    }

    /// The key part (room id, address, client-chosen id, ...).
    pub fn key(&self) -> &str {
        self.0.split_once(':').map_or("", |(_, key)| key)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for SessionId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_splits() {
        let id = SessionId::parse("matrix:!abc:example.org").unwrap();
        assert_eq!(id.channel(), "matrix");
        assert_eq!(id.key(), "!abc:example.org");
    }

    #[test]
    fn rejects_bad_ids() {
        for bad in ["nocolon", ":key", "Matrix:x", "cli:", "cli:a\nb", "1x:y"] {
            assert!(SessionId::parse(bad).is_err(), "{bad} should be rejected");
        }
    }
}
