//! The starter configuration that `squidbot onboard` writes: a small working file whose comments
//! point at the settings most people change.

use super::Config;
use super::secret::is_env_name;

impl Config {
    /// A commented starter `squidbot.yaml` with one provider, one model and the `default` pool.
    /// `api_key` is either the name of an environment variable holding the key (written as
    /// `api_key_env`, so the key stays out of the file), the key itself, or empty (no key, as for
    /// a local Ollama).
    pub fn starter(api_base: &str, api_key: &str, model: &str) -> String {
        Self::starter_with_owner(api_base, api_key, model, "", "")
    }

    /// [`Config::starter`] naming the owner's Matrix id and mail address (either may be
    /// empty): only the owner approves commands and gets the private memory, so a channel
    /// turned on later works for its owner from the first message.
    pub fn starter_with_owner(
        api_base: &str,
        api_key: &str,
        model: &str,
        owner_matrix: &str,
        owner_email: &str,
    ) -> String {
        let owner_line = |key: &str, value: &str, example: &str| {
            if value.is_empty() {
                format!("  {key}: []              # e.g. [{}]", quote(example))
            } else {
                format!("  {key}: [{}]", quote(value))
            }
        };
        let owner_matrix = owner_line("matrix", owner_matrix, "@you:example.org");
        let owner_email = owner_line("email", owner_email, "you@example.org");
        let key_line = if api_key.is_empty() {
            "      api_key: \"\"                 # no key needed (e.g. a local Ollama)".to_owned()
        } else if is_env_name(api_key) && api_key.chars().all(|c| !c.is_ascii_lowercase()) {
            format!(
                "      api_key_env: {api_key}     # the key is read from this environment variable"
            )
        } else {
            format!("      api_key: {}", quote(api_key))
        };
        // OpenAI's current reasoning models call tools only through the Responses API, and
        // Anthropic caches prompts and keeps Claude's thinking only through its own Messages
        // API; every other OpenAI-compatible server speaks Chat Completions.
        let api_line = match host(api_base).as_deref() {
            Some("api.openai.com") => {
                "\n      api: responses      # OpenAI's Responses API (chat: Chat Completions)"
            }
            Some("api.anthropic.com") => {
                "\n      api: anthropic      # Anthropic's Messages API: prompt caching, thinking kept"
            }
            _ => "",
        };
        format!(
            r#"# squidbot configuration. Every field, its default and what it does: squidbot.example.yaml
# beside this file (written by `squidbot onboard`), and README "Configuration". JSON works too.
# Secrets may be written as "${{VAR}}" to read them from the environment.

llm:
  default_pool: default
  providers:
    main:
      api_base: {api_base}{api_line}
{key_line}
  models:
    main:
      provider: main
      model: {model}
      # max_tokens: 8192
      # max_context_tokens: 100000
  pools:
    default:            # tried in order: add more models for fallback
      - main

agents:
  # workspace: ""       # default: $SQUIDBOT_HOME/workspace
  # consolidation_threshold: 100
  # keep_recent: 20
  # summary_word_limit: 600
  heartbeat:
    enabled: true
    interval_minutes: 30
    active_hours_start: "00:00"
    active_hours_end: "24:00"
    timezone: local     # or an IANA zone such as Europe/Berlin

# You: only the owner approves risky commands, gets the private memory (MEMORY.md, USER.md)
# and may schedule jobs or change the agent's instructions.
owner:
{owner_matrix}
{owner_email}

channels:
  matrix:
    enabled: false
    # homeserver: https://matrix.org
    # user_id: "@squidbot:example.org"
    # access_token: "${{MATRIX_ACCESS_TOKEN}}"
  email:
    enabled: false
    # imap_host: imap.example.org
    # smtp_host: smtp.example.org
    # username: squidbot@example.org
    # password_env: SQUIDBOT_EMAIL_PASSWORD
    # from_address: squidbot@example.org

gateway:
  http:
    listen: "127.0.0.1:8765"
    # token_env: SQUIDBOT_HTTP_TOKEN   # enables the message API
"#,
            api_base = quote(api_base),
            model = quote(model),
        )
    }
}

/// The host of `api_base`, which says whose own API it is.
fn host(api_base: &str) -> Option<String> {
    url::Url::parse(api_base)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
}

/// A YAML double-quoted scalar (a JSON string is one).
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}
