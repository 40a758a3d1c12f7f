//! The `Secret` type: a credential that never shows up in logs, debug output or error messages.
//!
//! Secret fields (`api_key`, `password`, `access_token`, `token`) may hold the value itself, or
//! `${VAR}` (the whole value) to read environment variable `VAR`; a sibling `*_env` field may name
//! the variable instead. Loading resolves all of them, so after `load` a `Secret` holds the value.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// A credential. `Debug` and `Display` print `***`; only [`Secret::expose`] gives the value, so
/// printing a config (or an error that contains one) never leaks it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value, e.g. one read from a prompt during `squidbot onboard`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that must send it (an HTTP header, a login call).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether no value is set, so callers can tell "no credential" from a credential.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The variable named by a whole-value `${VAR}` reference, if this is one.
    pub(crate) fn env_reference(&self) -> Option<&str> {
        let name = self.0.strip_prefix("${")?.strip_suffix('}')?;
        is_env_name(name).then_some(name)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

/// Words that make an environment variable's name a secret's (`GITHUB_TOKEN`, `DB_PASSWORD`):
/// such variables of MCP servers and of the daemon's own environment count as secrets.
const SECRET_NAME_WORDS: [&str; 7] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
];

/// Whether an environment variable named `name` presumably holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_WORDS.iter().any(|word| upper.contains(word))
}

/// One secret setting of a channel: where it is written, its value (or `${VAR}`), and the
/// variable its `*_env` field names (empty for none).
#[derive(Debug, Clone)]
pub struct SecretField<'a> {
    /// The setting's path (`channels.matrix.password`).
    pub field: String,
    /// Its value.
    pub secret: &'a Secret,
    /// The variable the matching `*_env` setting names.
    pub env: &'a str,
}

impl<'a> SecretField<'a> {
    /// The secret at `field`, also read from the variable `env` names.
    pub fn new(field: String, secret: &'a Secret, env: &'a str) -> Self {
        Self { field, secret, env }
    }
}

/// Whether `name` is a plausible environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a secret could not be resolved, and which of the two fields is to blame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SecretError {
    /// `true` when the `*_env` sibling is at fault, `false` for the secret field itself.
    pub(crate) in_env_field: bool,
    /// `true` when the file is fine and only the variable it names is not set (a fact of this
    /// environment, which only matters to the commands that use the secret).
    pub(crate) unset: bool,
    pub(crate) message: String,
}

/// Reads an environment variable; `None` when it is unset. Loading and validation take it as a
/// parameter so tests can supply variables without touching the process environment.
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Resolves `secret` (with its `*_env` sibling `env_name`) to a value, reading variables through
/// `lookup`. An unset or empty variable is an error: a credential that silently became empty
/// would only surface later as a confusing authentication failure.
pub(crate) fn resolve_secret(
    secret: &Secret,
    env_name: &str,
    lookup: EnvLookup<'_>,
) -> Result<Secret, SecretError> {
    let read = |name: &str, in_env_field: bool| match lookup(name) {
        Some(value) if !value.is_empty() => Ok(Secret(value)),
        found => Err(SecretError {
            in_env_field,
            unset: true,
            message: match found {
                Some(_) => format!("environment variable {name} is set but empty"),
                None => format!("environment variable {name} is not set"),
            },
        }),
    };
    if let Some(name) = secret.env_reference() {
        if !env_name.is_empty() {
            return Err(both_set());
        }
        return read(name, false);
    }
    if env_name.is_empty() {
        return Ok(secret.clone());
    }
    if !secret.is_empty() {
        return Err(both_set());
    }
    if !is_env_name(env_name) {
        return Err(SecretError {
            in_env_field: true,
            unset: false,
            message: format!("{env_name:?} is not an environment variable name"),
        });
    }
    read(env_name, true)
}

fn both_set() -> SecretError {
    SecretError {
        in_env_field: true,
        unset: false,
        message: "set either the value or the *_env variable name, not both".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "SQUIDBOT_TEST_SECRET_SET" => Some("s3cret".to_owned()),
            "SQUIDBOT_TEST_SECRET_EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn check(value: &str, env_name: &str, expected: Result<&str, &str>) {
        let got = resolve_secret(&Secret::new(value), env_name, &lookup);
        match (got, expected) {
            (Ok(secret), Ok(want)) => assert_eq!(secret.expose(), want),
            (Err(error), Err(want)) => assert!(error.message.contains(want), "{error:?}"),
            (got, want) => panic!("{value:?}/{env_name:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn resolution() {
        check("plain", "", Ok("plain"));
        check("", "", Ok(""));
        check("${SQUIDBOT_TEST_SECRET_SET}", "", Ok("s3cret"));
        check("", "SQUIDBOT_TEST_SECRET_SET", Ok("s3cret"));
        check(
            "${SQUIDBOT_TEST_SECRET_UNSET}",
            "",
            Err("SQUIDBOT_TEST_SECRET_UNSET is not set"),
        );
        check("", "SQUIDBOT_TEST_SECRET_UNSET", Err("is not set"));
        check(
            "",
            "SQUIDBOT_TEST_SECRET_EMPTY",
            Err("SQUIDBOT_TEST_SECRET_EMPTY is set but empty"),
        );
        check("x", "SQUIDBOT_TEST_SECRET_SET", Err("not both"));
        check("", "not a name", Err("not an environment variable name"));
        check("pre${X}", "", Ok("pre${X}"));
    }

    #[test]
    fn redacted() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?} {secret}"), "*** ***");
        assert_eq!(format!("{:?}", Some(&secret)), "Some(***)");
    }
}
