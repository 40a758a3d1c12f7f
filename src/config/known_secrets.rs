//! Every secret value the configuration knows, for the redactor: the providers' and search
//! keys, the channels' secret settings (each channel's plug-in lists its own), the secret-named
//! environment, arguments and URL parameters of MCP servers, and the daemon's own secret-named
//! variables.
//!
//! Apart from `secret.rs` so that [`Secret`] is a leaf the channels' own settings can use
//! without importing the whole configuration (which refers to them).

use super::Config;
use super::secret::{EnvLookup, Secret, SecretField, is_env_name, is_secret_name};

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

#[cfg(test)]
mod tests {
    use super::*;

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
