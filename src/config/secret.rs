//! The `Secret` type: a credential that never shows up in logs, debug output or error messages.
//!
//! Secret fields (`api_key`, `password`, `access_token`, `token`) may hold the value itself, or
//! `${VAR}` (the whole value) to read environment variable `VAR`; a sibling `*_env` field may name
//! the variable instead. Loading resolves all of them, so after `load` a `Secret` holds the value.

use std::fmt;

use serde::{Deserialize, Deserializer};

use super::Config;

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
    fn env_reference(&self) -> Option<&str> {
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

impl Config {
    /// Every secret value squidbot knows, each with the field (or variable) it comes from:
    /// the providers' API keys, the web-search key and the `channels`' secret settings (each
    /// channel's plug-in lists its own: tokens, passwords, passphrases) (resolved by
    /// loading, and read again from the variables their `${VAR}` or `*_env` name when loading
    /// left them unresolved, as it does for disabled features), the secret-named `env` of MCP
    /// servers, and the daemon's own secret-named variables (see [`is_secret_name`]). Built
    /// once at assembly into the redactor of tool output. Empty values are left out.
    pub fn secret_values(&self, channels: &[SecretField<'_>]) -> Vec<(String, String)> {
        let lookup = |name: &str| std::env::var(name).ok();
        self.secret_values_with(&lookup, std::env::vars(), channels)
    }

    /// [`Config::secret_values`] with the environment read through `lookup` and listed by
    /// `vars`.
    pub(crate) fn secret_values_with(
        &self,
        lookup: EnvLookup<'_>,
        vars: impl Iterator<Item = (String, String)>,
        channels: &[SecretField<'_>],
    ) -> Vec<(String, String)> {
        let mut found = Vec::new();
        let mut add = |field: String, secret: &Secret, env_name: &str| {
            let mut values = vec![match secret.env_reference() {
                Some(name) => lookup(name),
                None => Some(secret.expose().to_owned()),
            }];
            if is_env_name(env_name) {
                values.push(lookup(env_name));
            }
            for value in values.into_iter().flatten() {
                if !value.is_empty() {
                    found.push((field.clone(), value));
                }
            }
        };
        for (name, provider) in &self.llm.providers {
            let field = format!("llm.providers.{name}.api_key");
            add(field, &provider.api_key, &provider.api_key_env);
        }
        let search = &self.tools.web_search;
        add(
            "tools.web_search.api_key".into(),
            &search.api_key,
            &search.api_key_env,
        );
        for channel in channels {
            add(channel.field.clone(), channel.secret, channel.env);
        }
        for (server, config) in &self.tools.mcp_servers {
            for (name, value) in config.env.iter().flatten() {
                if is_secret_name(name) && !value.is_empty() {
                    let field = format!("tools.mcp_servers.{server}.env.{name}");
                    found.push((field, value.clone()));
                }
            }
            for (at, value) in secret_args(&config.args) {
                found.push((format!("tools.mcp_servers.{server}.args[{at}]"), value));
            }
            for (name, value) in url_secrets(&config.url) {
                found.push((format!("tools.mcp_servers.{server}.url?{name}"), value));
            }
        }
        for (name, value) in vars {
            if is_secret_name(&name) && !value.is_empty() {
                found.push((format!("${name}"), value));
            }
        }
        found
    }
}

/// The values among an MCP server's `args` that are secrets by their name, with their index:
/// `--token=VALUE`, `--api-key VALUE`, `-p VALUE` after a secret-named flag, and
/// `Authorization: Bearer VALUE`-style header arguments. A secret on the command line is also
/// readable in `ps`; the README says to pass it in `env` instead, and this keeps it out of
/// what tools return either way.
pub(crate) fn secret_args(args: &[String]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut secret_next = false;
    for (at, arg) in args.iter().enumerate() {
        let arg = arg.trim();
        if std::mem::take(&mut secret_next) && !arg.starts_with('-') && !arg.is_empty() {
            found.push((at, arg.to_owned()));
            continue;
        }
        let flag = arg.trim_start_matches('-');
        if arg.starts_with('-') {
            match flag.split_once('=') {
                Some((name, value)) if is_secret_name(name) && !value.is_empty() => {
                    found.push((at, value.to_owned()));
                }
                Some(_) => {}
                None => secret_next = is_secret_name(flag),
            }
            continue;
        }
        // A header passed whole: `Authorization: Bearer abc`, `X-Api-Key: abc`.
        if let Some((name, value)) = arg.split_once(':')
            && (is_secret_name(name.trim()) || name.trim().eq_ignore_ascii_case("authorization"))
        {
            let value = value.trim();
            let value = value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("Basic "))
                .unwrap_or(value)
                .trim();
            if !value.is_empty() {
                found.push((at, value.to_owned()));
            }
        }
    }
    found
}

/// The secret-named query parameters of an MCP server's `url` (`?token=…`).
fn url_secrets(url: &str) -> Vec<(String, String)> {
    let Ok(url) = url::Url::parse(url) else {
        return Vec::new();
    };
    url.query_pairs()
        .filter(|(name, value)| is_secret_name(name) && !value.is_empty())
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
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
    fn every_known_secret_is_collected() {
        let yaml = "llm:\n  providers:\n    a:\n      api_base: http://x\n      api_key: sk-inline-1234\n    b:\n      api_base: http://x\n      api_key_env: SQUIDBOT_TEST_SECRET_SET\nchannels:\n  matrix:\n    password: ${SQUIDBOT_TEST_MATRIX}\ntools:\n  mcp_servers:\n    gh:\n      command: gh-mcp\n      env:\n        GITHUB_TOKEN: ghp_abcdefgh\n        MODE: production\n";
        let config: Config = serde_saphyr::from_str(yaml).unwrap();
        let lookup = |name: &str| match name {
            "SQUIDBOT_TEST_SECRET_SET" => Some("s3cret-from-env".to_owned()),
            "SQUIDBOT_TEST_MATRIX" => Some("matrix-pass-99".to_owned()),
            _ => None,
        };
        let vars = [
            ("OPENAI_API_KEY".to_owned(), "sk-daemon-env".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ];
        let channels = crate::channels::registry::secret_fields(&config);
        let found = config.secret_values_with(&lookup, vars.into_iter(), &channels);
        let values: Vec<&str> = found.iter().map(|(_, value)| value.as_str()).collect();
        assert_eq!(
            values,
            [
                "sk-inline-1234",
                "s3cret-from-env",
                "matrix-pass-99",
                "ghp_abcdefgh",
                "sk-daemon-env"
            ],
            "{found:?}"
        );
        assert_eq!(found[2].0, "channels.matrix.password");
    }

    #[test]
    fn redacted() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?} {secret}"), "*** ***");
        assert_eq!(format!("{:?}", Some(&secret)), "Some(***)");
    }

    /// #35 item 5: secrets on an MCP server's command line are registered for redaction.
    #[test]
    fn secret_arguments_of_mcp_servers_are_found() {
        let args: Vec<String> = [
            "--port",
            "8080",
            "--token=tok-AAAA1111",
            "--api-key",
            "key-BBBB2222",
            "--header",
            "Authorization: Bearer bearer-CCCC3333",
            "--password",
            "--verbose",
            "plain",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            secret_args(&args),
            vec![
                (2, "tok-AAAA1111".to_owned()),
                (4, "key-BBBB2222".to_owned()),
                (6, "bearer-CCCC3333".to_owned()),
            ]
        );
        assert_eq!(
            url_secrets("https://mcp.example.org/sse?api_key=url-DDDD4444&x=1"),
            vec![("api_key".to_owned(), "url-DDDD4444".to_owned())]
        );
    }
}
