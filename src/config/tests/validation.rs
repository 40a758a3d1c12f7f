//! Validation: every semantic check names its line and field; secrets come from the
//! environment.

use std::path::Path;

use super::*;
use crate::config::load_from_str;

#[test]
fn semantic_errors_name_line_and_field() {
    let base = base_without_pools();
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{BASE}  default_pool: main\n"),
            r#":11: llm.default_pool: unknown pool "main" (known: default)"#,
        ),
        (
            format!("{base}  pools:\n    default: []\n"),
            ":10: llm.pools.default: a pool needs at least one model",
        ),
        (
            format!("{base}  pools:\n    default: [gpt4o, gpt5]\n"),
            r#":10: llm.pools.default[1]: unknown model "gpt5""#,
        ),
        (
            BASE.replace(
                "{provider: openrouter, model: openai/gpt-4o}",
                "{provider: openai, model: x}",
            ),
            r#":7: llm.models.gpt4o.provider: unknown provider "openai" (known: openrouter)"#,
        ),
        (
            BASE.replace("https://openrouter.ai/api/v1", "openrouter.ai"),
            r#":4: llm.providers.openrouter.api_base: "openrouter.ai" is not an http(s) URL"#,
        ),
        (
            BASE.replace("https://openrouter.ai/api/v1", "ftp://x"),
            ":4: llm.providers.openrouter.api_base: ",
        ),
        (
            format!("{BASE}  timeouts:\n    idle_seconds: 0\n"),
            ":12: llm.timeouts.idle_seconds: must be greater than 0",
        ),
        (
            format!("{BASE}  retry:\n    base_delay_ms: 5000\n    max_delay_ms: 100\n"),
            ":12: llm.retry.base_delay_ms: must not exceed",
        ),
        (
            format!("{BASE}agents:\n  consolidation_pool: sum\n"),
            r#":12: agents.consolidation_pool: unknown pool "sum" (known: default)"#,
        ),
        (
            format!("{BASE}agents:\n  heartbeat:\n    pool: hb\n"),
            r#":13: agents.heartbeat.pool: unknown pool "hb""#,
        ),
        (
            format!("{BASE}tools:\n  spawn:\n    profiles:\n      coder:\n        pool: big\n"),
            r#":15: tools.spawn.profiles.coder.pool: unknown pool "big""#,
        ),
        (
            format!("{BASE}agents:\n  keep_recent: 0\n"),
            ":12: agents.keep_recent: must be greater than 0",
        ),
        (
            format!("{BASE}agents:\n  keep_recent: 100\n"),
            ":12: agents.keep_recent: must be less than agents.consolidation_threshold (100)",
        ),
        (
            format!("{BASE}agents:\n  consolidation_threshold: 10\n"),
            ":11: agents.keep_recent: must be less than agents.consolidation_threshold (10)",
        ),
        (
            format!("{BASE}agents:\n  summary_word_limit: 0\n"),
            ":12: agents.summary_word_limit: must be greater than 0",
        ),
        (
            format!("{BASE}agents:\n  heartbeat:\n    interval_minutes: 0\n"),
            ":13: agents.heartbeat.interval_minutes: must be greater than 0",
        ),
        (
            format!("{BASE}agents:\n  heartbeat:\n    active_hours_start: \"24:00\"\n"),
            ":13: agents.heartbeat.active_hours_start: \"24:00\" is not a time HH:MM",
        ),
        (
            format!("{BASE}agents:\n  heartbeat:\n    active_hours_start: \"7:00\"\n"),
            ":13: agents.heartbeat.active_hours_start: ",
        ),
        (
            format!("{BASE}agents:\n  heartbeat:\n    active_hours_end: \"24:01\"\n"),
            ":13: agents.heartbeat.active_hours_end: ",
        ),
        (
            format!("{BASE}agents:\n  heartbeat:\n    active_hours_end: \"12:60\"\n"),
            ":13: agents.heartbeat.active_hours_end: ",
        ),
        (
            format!("{BASE}agents:\n  heartbeat:\n    timezone: Mars/Base\n"),
            r#":13: agents.heartbeat.timezone: unknown time zone "Mars/Base""#,
        ),
        (
            format!("{BASE}budgets:\n  timezone: Mars/Base\n"),
            r#":12: budgets.timezone: unknown time zone "Mars/Base""#,
        ),
        (
            format!("{BASE}budgets:\n  daily_tokens: 5\n  daily_cost: -1\n"),
            ":13: budgets.daily_cost: must be a number of at least 0",
        ),
        (
            BASE.replace(
                "{provider: openrouter, model: openai/gpt-4o}",
                "{provider: openrouter, model: openai/gpt-4o, price: {input: -2, output: 1}}",
            ),
            ":7: llm.models.gpt4o.price.input: must be a price of at least 0",
        ),
        (
            format!("{BASE}agents:\n  heartbeat:\n    target: nowhere\n"),
            ":13: agents.heartbeat.target: ",
        ),
        (
            format!("{BASE}tools:\n  web_search:\n    enabled: true\n    provider: brave\n"),
            ":12: tools.web_search.api_key: the brave provider needs an API key",
        ),
        (
            format!("{BASE}tools:\n  web_search:\n    enabled: true\n"),
            ":12: tools.web_search.url: \"\" is not an http(s) URL",
        ),
        (
            format!("{BASE}tools:\n  mcp_servers:\n    fs:\n      args: [x]\n"),
            ":13: tools.mcp_servers.fs.command: a stdio MCP server needs a command",
        ),
        (
            format!("{BASE}tools:\n  mcp_servers:\n    web:\n      transport: http\n"),
            ":13: tools.mcp_servers.web.url: ",
        ),
        (
            format!("{BASE}tools:\n  shell:\n    timeout_seconds: 0\n"),
            ":13: tools.shell.timeout_seconds: must be greater than 0",
        ),
        (
            format!("{BASE}gateway:\n  max_parallel_sessions: 0\n"),
            ":12: gateway.max_parallel_sessions: must be greater than 0",
        ),
        (
            format!("{BASE}owner:\n  aliases: [\"\"]\n"),
            ":12: owner.aliases[0]: the address must not be empty",
        ),
        // See: #38. The transcription section names a provider and its limits.
        (
            format!("{BASE}transcription:\n  provider: groq\n  model: whisper-large-v3\n"),
            r#":12: transcription.provider: unknown provider "groq" (known: openrouter)"#,
        ),
        (
            format!("{BASE}transcription:\n  provider: openrouter\n  model: \"\"\n"),
            ":13: transcription.model: name the model",
        ),
        (
            format!(
                "{BASE}transcription:\n  provider: openrouter\n  model: whisper-1\n  timeout_seconds: 0\n"
            ),
            ":14: transcription.timeout_seconds: must be greater than 0",
        ),
        (
            format!(
                "{BASE}transcription:\n  provider: openrouter\n  model: whisper-1\n  price_per_minute: -1\n"
            ),
            ":14: transcription.price_per_minute: must be a price of at least 0 per minute",
        ),
        // A pool that exists only by default, with models configured, is still missing.
        (
            base.clone(),
            r#"llm.default_pool: unknown pool "default" (known: none)"#,
        ),
    ];
    for (yaml, expected) in &cases {
        check(yaml, expected);
    }
}

#[test]
fn channels_require_fields_when_enabled() {
    let matrix = format!("{BASE}channels:\n  matrix:\n    enabled: true\n    user_id: squidbot\n");
    check(
        &matrix,
        ":14: channels.matrix.user_id: must be a Matrix user id",
    );
    check(
        &matrix,
        ":12: channels.matrix.access_token: set access_token or password",
    );
    let matrix =
        format!("{BASE}channels:\n  matrix:\n    enabled: true\n    homeserver: matrix.org\n");
    check(
        &matrix,
        ":14: channels.matrix.homeserver: \"matrix.org\" is not an http(s) URL",
    );
    let email = format!("{BASE}channels:\n  email:\n    enabled: true\n    from_address: bot\n");
    for field in ["imap_host", "smtp_host", "username"] {
        check(
            &email,
            &format!(":12: channels.email.{field}: required when email is enabled"),
        );
    }
    check(
        &email,
        ":12: channels.email.password: set password or password_env",
    );
    check(
        &email,
        ":14: channels.email.from_address: must be the bot's email address",
    );
    // Disabled channels are not checked, and their secrets are not resolved.
    check_ok(&format!(
        "{BASE}channels:\n  matrix:\n    access_token: \"${{UNSET_VAR}}\"\n"
    ));
}

#[test]
fn every_problem_is_reported_at_once() {
    let yaml = format!(
        "{BASE}agents:\n  keep_recent: 0\n  heartbeat:\n    timezone: Nowhere\n    pool: x\ngateway:\n  max_parallel_sessions: 0\n"
    );
    let error = load_text(&yaml)
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    let lines: Vec<&str> = error.lines().collect();
    assert_eq!(lines.len(), 4, "{error}");
    assert!(lines[0].contains(":12: agents.keep_recent"), "{error}");
    assert!(
        lines[1].contains(":14: agents.heartbeat.timezone"),
        "{error}"
    );
    assert!(lines[2].contains(":15: agents.heartbeat.pool"), "{error}");
    assert!(
        lines[3].contains(":17: gateway.max_parallel_sessions"),
        "{error}"
    );
    let problems = match load_text(&yaml) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected Invalid, got {other:?}"),
    };
    assert_eq!(problems[0].line, Some(12));
    assert_eq!(problems[0].field, "agents.keep_recent");
}

#[test]
fn secrets_come_from_the_environment() {
    let from_ref = BASE.replace("api_key: sk-x", "api_key: \"${SQUIDBOT_TEST_KEY}\"");
    let from_env = BASE.replace("api_key: sk-x", "api_key_env: SQUIDBOT_TEST_KEY");
    for yaml in [&from_ref, &from_env] {
        let loaded = check_ok(yaml);
        let provider = &loaded.config.llm.providers["openrouter"];
        assert_eq!(provider.api_key.expose(), "sk-from-env");
        let debug = format!("{:?}", loaded.config);
        assert!(
            !debug.contains("sk-from-env") && debug.contains("***"),
            "{debug}"
        );
    }
    let http = format!("{BASE}gateway:\n  http:\n    token_env: SQUIDBOT_TEST_TOKEN\n");
    assert_eq!(
        check_ok(&http).config.gateway.http.token.expose(),
        "tok-from-env"
    );

    // A provider's key is the agent's: its unset variable stops whatever runs the agent (and
    // the gateway), not `squidbot status` or `cron list`, and the key is left empty. See: #40
    let unset = BASE.replace("api_key: sk-x", "api_key: ${SQUIDBOT_TEST_UNSET}");
    let unset_env = BASE.replace("api_key: sk-x", "api_key_env: SQUIDBOT_TEST_UNSET");
    for (yaml, expected) in [
        (
            &unset,
            ":5: llm.providers.openrouter.api_key: environment variable SQUIDBOT_TEST_UNSET is not set",
        ),
        (
            &unset_env,
            ":5: llm.providers.openrouter.api_key_env: environment variable SQUIDBOT_TEST_UNSET is not set",
        ),
    ] {
        let loaded = check_ok(yaml);
        assert!(loaded.config.llm.providers["openrouter"].api_key.is_empty());
        assert!(loaded.check_gateway_secrets().is_ok());
        for error in [loaded.check_agent().err(), loaded.check_gateway().err()] {
            let text = error.map(|error| error.to_string());
            assert!(
                text.as_deref().is_some_and(|text| text.ends_with(expected)),
                "{text:?}"
            );
        }
    }
    let both = BASE.replace(
        "api_key: sk-x",
        "api_key: sk-x\n      api_key_env: SQUIDBOT_TEST_KEY",
    );
    check(
        &both,
        ":6: llm.providers.openrouter.api_key_env: set either the value or",
    );
    let email = format!(
        "{BASE}channels:\n  email:\n    enabled: true\n    imap_host: i\n    smtp_host: s\n    username: u\n    from_address: b@x.org\n    password_env: SQUIDBOT_TEST_NOPE\n"
    );
    // Only the gateway uses the channels' and the HTTP API's secrets: their unset variables
    // stop it alone (`check_gateway`), and the secret is left empty. See: #15
    let http_unset = format!("{BASE}gateway:\n  http:\n    token_env: SQUIDBOT_TEST_NOPE\n");
    for (yaml, expected) in [
        (
            &email,
            ":18: channels.email.password_env: environment variable SQUIDBOT_TEST_NOPE is not set",
        ),
        (
            &http_unset,
            ":13: gateway.http.token_env: environment variable SQUIDBOT_TEST_NOPE is not set",
        ),
    ] {
        let loaded = check_ok(yaml);
        assert!(loaded.config.channels.email.password.is_empty());
        assert!(loaded.config.gateway.http.token.is_empty());
        let error = loaded.check_gateway().err().map(|error| error.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|text| text.ends_with(expected)),
            "{error:?}"
        );
    }
}

#[test]
fn public_load_from_str_reads_the_process_environment() {
    let yaml = BASE.replace(
        "api_key: sk-x",
        "api_key: ${SQUIDBOT_CONFIG_TEST_NEVER_SET_7F3A}",
    );
    let loaded = load_from_str(&yaml, Path::new("/x/squidbot.yaml"), Path::new("/x"));
    let text = loaded
        .ok()
        .and_then(|loaded| loaded.check_agent().err())
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(text.starts_with("/x/squidbot.yaml:5: llm.providers.openrouter.api_key: environment variable SQUIDBOT_CONFIG_TEST_NEVER_SET_7F3A"), "{text}");
}

#[test]
fn enabled_channels_load_with_warnings() {
    let yaml = format!(
        "{BASE}channels:
  matrix:
    enabled: true
    user_id: \"@bot:example.org\"
    access_token_env: SQUIDBOT_TEST_TOKEN
    group_policy: allowlist
  email:
    enabled: true
    imap_host: imap.example.org
    smtp_host: smtp.example.org
    username: bot
    password: \"${{SQUIDBOT_TEST_KEY}}\"
    from_address: bot@example.org
    tls_verify: false
"
    );
    let loaded = check_ok(&yaml);
    let channels = &loaded.config.channels;
    assert_eq!(channels.matrix.access_token.expose(), "tok-from-env");
    assert_eq!(channels.email.password.expose(), "sk-from-env");
    assert_eq!(
        channels.matrix.group_policy,
        crate::config::GroupPolicy::Allowlist
    );
    let warnings = loaded.warnings.join("\n");
    assert!(
        warnings.contains(":12: channels.matrix.allowlist: empty: nobody is answered"),
        "{warnings}"
    );
    assert!(
        warnings.contains(": channels.email.allow_from: empty: no mail is answered"),
        "{warnings}"
    );
    assert!(
        warnings.contains(":24: channels.email.tls_verify: "),
        "{warnings}"
    );
}
