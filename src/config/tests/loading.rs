//! Loading: parsing, syntax/type/unknown-field errors with their lines, path resolution, the
//! original's JSON config and the starter file.

use std::path::{Path, PathBuf};

use super::super::load::{load_with, resolve_path_with};
use super::*;
use crate::config::{Config, ConfigLocation, ProviderApi};

#[test]
fn minimal_config_loads() {
    let loaded = check_ok(BASE);
    let config = &loaded.config;
    assert!(loaded.exists);
    assert!(loaded.warnings.is_empty());
    assert!(config.llm_configured());
    let models = config.pool_models("default").unwrap_or_default();
    let names: Vec<&str> = models
        .iter()
        .map(|(model, _)| model.model.as_str())
        .collect();
    assert_eq!(names, ["openai/gpt-4o", "openai/gpt-4o-mini"]);
    assert_eq!(models[0].1.api_key.expose(), "sk-x");
    assert_eq!(
        config.agents.workspace,
        PathBuf::from("/home/u/.squidbot/workspace")
    );
    assert_eq!(config.agents.consolidation_threshold, 100);
    assert_eq!(config.gateway.http.listen.to_string(), "127.0.0.1:8765");
    assert!(config.pool_models("nope").is_none());
}

#[test]
fn empty_file_is_defaults_without_llm() {
    for text in ["", "# nothing yet\n", "{}"] {
        let loaded = check_ok(text);
        assert!(!loaded.config.llm_configured());
        assert_eq!(loaded.config.channels.matrix.device_id, "");
    }
}

#[test]
fn pool_entries_in_both_forms() {
    let yaml = format!(
        "{}  pools:\n    default:\n      - gpt4o\n      - {{model: mini}}\n",
        base_without_pools()
    );
    let loaded = check_ok(&yaml);
    let members = loaded.config.pool_members("default").unwrap_or_default();
    let names: Vec<&str> = members.iter().map(|member| member.name).collect();
    assert_eq!(names, ["gpt4o", "mini"]);
    assert_eq!(members[1].provider_name, "openrouter");
    let bad = format!(
        "{}  pools:\n    default:\n      - {{mdl: mini}}\n",
        base_without_pools()
    );
    check(
        &bad,
        "squidbot.yaml:11: llm.pools.default[0]: a model name, or a mapping {model: NAME}",
    );
}

/// The original's `config.json`, as its `Settings.save` wrote it (every field present).
const ORIGINAL_JSON: &str = r#"{
  "llm": {
    "default_pool": "default",
    "providers": {
      "openrouter": {
        "api_base": "https://openrouter.ai/api/v1",
        "api_key": "sk-or-v1-abc",
        "supports_reasoning_content": false
      }
    },
    "models": {
      "opus": {"provider": "openrouter", "model": "anthropic/claude-opus-4-5",
               "max_tokens": 8192, "max_context_tokens": 100000}
    },
    "pools": {"default": [{"model": "opus"}], "cheap": [{"model": "opus"}]}
  },
  "agents": {
    "workspace": "~/.squidbot/workspace",
    "restrict_to_workspace": true,
    "history_context_messages": 80,
    "heartbeat": {
      "enabled": true, "interval_minutes": 30,
      "prompt": "Read HEARTBEAT.md if it exists in your workspace.",
      "active_hours_start": "08:00", "active_hours_end": "22:00",
      "timezone": "Europe/Berlin", "pool": "cheap"
    }
  },
  "tools": {
    "shell": {"enabled": true},
    "files": {"enabled": true},
    "fetch_url": {"enabled": true},
    "web_search": {"enabled": false, "provider": "searxng", "url": "", "api_key": ""},
    "search_history": {"enabled": true},
    "mcp_servers": {
      "fs": {"transport": "stdio", "command": "npx", "args": ["-y", "server-fs"],
             "env": null, "cwd": null, "url": ""}
    },
    "spawn": {"enabled": false, "profiles": {"coder": {"system_prompt": "You code.",
      "system_prompt_file": "", "bootstrap_files": ["AGENTS.md"], "tools": ["shell"],
      "pool": "cheap"}}}
  },
  "channels": {
    "matrix": {"enabled": false, "homeserver": "https://matrix.org", "user_id": "",
               "access_token": "", "device_id": "SQUIDBOT01", "room_ids": [],
               "group_policy": "mention", "allowlist": []},
    "email": {"enabled": false, "imap_host": "", "imap_port": 993, "smtp_host": "",
              "smtp_port": 587, "username": "", "password": "", "from_address": "",
              "allow_from": [], "poll_interval_seconds": 60, "tls": true, "tls_verify": true,
              "imap_starttls": false, "smtp_starttls": true}
  },
  "skills": {"extra_dirs": ["~/skills", "more"]},
  "owner": {"aliases": ["alex", {"address": "@alex:matrix.org", "channel": "matrix"},
                       {"address": "a@example.org", "channel": null}]}
}"#;

#[test]
fn original_json_config_loads() {
    let loaded = check_ok(ORIGINAL_JSON);
    let config = &loaded.config;
    assert!(config.llm_configured());
    assert_eq!(
        config.pool_or_default(&config.agents.heartbeat.pool),
        "cheap"
    );
    assert_eq!(
        config.agents.workspace,
        PathBuf::from("/home/u/.squidbot/workspace")
    );
    assert_eq!(
        config.skills.extra_dirs,
        [
            PathBuf::from("/home/u/skills"),
            PathBuf::from("/home/u/.squidbot/more")
        ]
    );
    assert_eq!(config.agents.heartbeat.active_minutes(), (8 * 60, 22 * 60));
    assert_eq!(config.owner.aliases[1].channel.as_deref(), Some("matrix"));
    assert_eq!(config.owner.aliases[2].channel, None);
    assert_eq!(config.tools.mcp_servers["fs"].args, ["-y", "server-fs"]);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(
        loaded.warnings[0].starts_with(&format!(
            "{PATH}:20: agents.history_context_messages: ignored"
        )),
        "{:?}",
        loaded.warnings
    );
    // The original's aliases feed the owner now, as scoped.
    let owner = config.owner();
    use crate::channels::owner::Ids;
    assert!(owner.on("matrix", Ids::Exact).is("@alex:matrix.org"));
    assert!(!owner.on("email", Ids::AnyCase).is("@alex:matrix.org"));
}

#[test]
fn json_errors_have_lines() {
    check(
        "{\n  \"agents\": {\n    \"keep_recnt\": 5\n  }\n}\n",
        ":3: agents.keep_recnt: unknown field",
    );
}

#[test]
fn syntax_type_and_unknown_field_errors() {
    let cases: &[(&str, &str)] = &[
        (
            "bogus: 1\n",
            ":1: bogus: unknown field (expected one of: llm, agents,",
        ),
        (
            "agents:\n  consolidaton_threshold: 5\n",
            ":2: agents.consolidaton_threshold: unknown field, did you mean consolidation_threshold?",
        ),
        (
            "llm:\n  providers:\n    p:\n      api_bse: x\n",
            ":4: llm.providers.p.api_bse: unknown field, did you mean api_base?",
        ),
        (
            "agents:\n  keep_recent: many\n",
            ":2: agents.keep_recent: expected a whole number",
        ),
        (
            "agents:\n  keep_recent: 5\n  keep_recent: 6\n",
            ":3: agents.keep_recent: duplicate key",
        ),
        (
            "agents:\n",
            ":1: agents: expected a mapping of fields (write {} for an empty section)",
        ),
        (
            "agents:\n  workspace:\n",
            ":2: agents.workspace: expected a string, found nothing",
        ),
        (
            "llm:\n  pools:\n    default: gpt\n",
            ":3: llm.pools.default: expected a list",
        ),
        (
            "agents:\n  heartbeat:\n    enabled: [1]\n",
            ":3: agents.heartbeat.enabled: ",
        ),
        (
            "channels:\n  matrix:\n    group_policy: everyone\n",
            ":3: channels.matrix.group_policy: unknown variant",
        ),
        (
            "tools:\n  web_search:\n    provider: bing\n",
            ":3: tools.web_search.provider: unknown variant",
        ),
        (
            "cron:\n  missed_runs: later\n",
            ":2: cron.missed_runs: unknown variant",
        ),
        (
            "llm:\n  providers:\n    openai:\n      api: soap\n",
            ":4: llm.providers.openai.api: unknown variant",
        ),
        (
            "gateway:\n  http:\n    listen: localhost\n",
            ":3: gateway.http.listen: ",
        ),
        (
            "channels:\n  email:\n    imap_port: 99999\n",
            ":3: channels.email.imap_port: ",
        ),
        ("agents: {keep_recent: 5\n", "squidbot.yaml:1: agents"),
        ("agents:\n  keep_recent: 5\n   bad: : x\n", "squidbot.yaml:"),
        (
            "owner:\n  aliases:\n    - {who: x}\n",
            ":3: owner.aliases[0]: an address, or a mapping",
        ),
    ];
    for (yaml, expected) in cases {
        check(yaml, expected);
    }
}

/// serde stops at the first problem; the file's other problems come too, each at its line,
/// whether the bad entry sits alone in its section, in a flow mapping or in a list. See: #15
#[test]
fn issue_15_every_deserialization_problem_at_once() {
    let cases: &[(&str, &[&str])] = &[
        (
            "agents:\n  bogus: 1\ngateway:\n  nope: 2\n",
            &[
                ":2: agents.bogus: unknown field",
                ":4: gateway.nope: unknown field",
            ],
        ),
        (
            "gateway:\n  http: {tokn: x, listen: nowhere, enabled: maybe}\ncron:\n  missed_runs: later\n",
            &[
                ":2: gateway.http.tokn: unknown field, did you mean token?",
                ":2: gateway.http.listen: ",
                ":2: gateway.http.enabled: ",
                ":4: cron.missed_runs: unknown variant",
            ],
        ),
        (
            "owner:\n  aliases:\n    - {who: x}\nagents:\n  keep_recent: many\n",
            &[
                ":3: owner.aliases[0]: an address, or a mapping",
                ":5: agents.keep_recent: expected a whole number",
            ],
        ),
    ];
    for (yaml, expected) in cases {
        for line in *expected {
            check(yaml, line);
        }
        let problems = match load_text(yaml) {
            Err(ConfigError::Invalid { problems, .. }) => problems.len(),
            other => panic!("{other:?}"),
        };
        assert_eq!(problems, expected.len(), "{yaml}");
    }
}

/// A broken line is named by its own line and key, not by the field above it that the
/// deserializer happened to fail on first. See: #15
#[test]
fn issue_15_syntax_errors_name_the_line_to_fix() {
    let cases: &[(&str, &str)] = &[
        (
            "agents:\n  heartbeat:\n    enabled: false\n      interval_minutes: 5\n",
            ":4: interval_minutes: a `key: value` cannot start here",
        ),
        (
            "agents:\n  keep_recent: 5\n workspace: x\n",
            ":3: workspace: this line is not indented like the other fields",
        ),
        (
            "agents:\n  keep_recent: 5\n\tworkspace: x\n",
            ":3: workspace: indented with a tab",
        ),
    ];
    for (yaml, expected) in cases {
        check(yaml, expected);
    }
}

#[test]
fn error_display_names_file_line_field() {
    let yaml = format!(
        "{}  pools:\n    default:\n      - gpt5\n",
        base_without_pools()
    );
    let error = load_text(&yaml).err().map(|error| error.to_string());
    assert_eq!(
        error.as_deref(),
        Some(
            r#"/home/u/.squidbot/squidbot.yaml:11: llm.pools.default[0]: unknown model "gpt5" (known: gpt4o, mini)"#
        )
    );
}

#[test]
fn workspace_paths_are_resolved() {
    let cases = [
        ("", "/home/u/.squidbot/workspace"),
        ("agents:\n  workspace: ws\n", "/home/u/.squidbot/ws"),
        ("agents:\n  workspace: ~/notes\n", "/home/u/notes"),
        ("agents:\n  workspace: /srv/ws\n", "/srv/ws"),
    ];
    for (yaml, expected) in cases {
        assert_eq!(
            check_ok(yaml).config.agents.workspace,
            PathBuf::from(expected),
            "{yaml}"
        );
    }
}

/// An environment made of `pairs`, plus `HOME=/home/u`.
fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .chain([("HOME".to_owned(), "/home/u".to_owned())])
        .collect();
    move |name| {
        pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    }
}

/// `(--config, environment, expected path, expected home, expected explicit)`.
type PathCase<'a> = (
    Option<&'a Path>,
    &'a [(&'a str, &'a str)],
    &'a str,
    &'a str,
    bool,
);

#[test]
fn path_resolution_order() {
    let flag = Path::new("/etc/flag.yaml");
    let all: &[(&str, &str)] = &[
        ("SQUIDBOT_CONFIG", "/etc/env.yaml"),
        ("SQUIDBOT_HOME", "/srv/sq"),
    ];
    let cases: &[PathCase<'_>] = &[
        (Some(flag), all, "/etc/flag.yaml", "/srv/sq", true),
        (None, all, "/etc/env.yaml", "/srv/sq", true),
        (
            None,
            &[("SQUIDBOT_HOME", "/srv/sq")],
            "/srv/sq/squidbot.yaml",
            "/srv/sq",
            false,
        ),
        (
            None,
            &[("SQUIDBOT_HOME", "~/sq")],
            "/home/u/sq/squidbot.yaml",
            "/home/u/sq",
            false,
        ),
        (
            None,
            &[],
            "/home/u/.squidbot/squidbot.yaml",
            "/home/u/.squidbot",
            false,
        ),
        (
            Some(Path::new("~/c.yaml")),
            &[],
            "/home/u/c.yaml",
            "/home/u/.squidbot",
            true,
        ),
    ];
    for &(explicit, pairs, path, home, is_explicit) in cases {
        let location = resolve_path_with(explicit, &env_of(pairs)).ok();
        assert_eq!(
            location,
            Some(ConfigLocation {
                path: PathBuf::from(path),
                home: PathBuf::from(home),
                explicit: is_explicit
            })
        );
    }
}

/// Without HOME, `~` has nothing to stand for: an error, never a directory named `~` in the
/// current directory. See: #15
#[test]
fn issue_15_a_tilde_without_home_is_an_error() {
    let no_home = |name: &str| (name == "SQUIDBOT_HOME").then(|| "/srv/sq".to_owned());
    let nothing = |_: &str| None;
    let error = resolve_path_with(None, &nothing).err();
    assert!(
        matches!(&error, Some(ConfigError::NoHome { path }) if path == Path::new("~/.squidbot")),
        "{error:?}"
    );
    let named = resolve_path_with(Some(Path::new("~/c.yaml")), &no_home).err();
    assert!(
        matches!(named, Some(ConfigError::NoHome { .. })),
        "{named:?}"
    );
    let home = Path::new(HOME);
    let error = load_from_str_with(
        "agents:\n  workspace: ~/notes\n",
        Path::new(PATH),
        home,
        &nothing,
    )
    .err()
    .map(|error| error.to_string());
    assert_eq!(
        error.as_deref(),
        Some(
            format!(
                "{PATH}:2: agents.workspace: `~` stands for the home directory, but HOME is not set"
            )
            .as_str()
        )
    );
}

#[test]
fn missing_files() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    let home_text = home.to_string_lossy().into_owned();
    let env = env_of(&[("SQUIDBOT_HOME", &home_text)]);

    let loaded = load_with(None, &env)?;
    assert!(!loaded.exists);
    assert_eq!(loaded.path, home.join("squidbot.yaml"));
    assert_eq!(loaded.config.agents.workspace, home.join("workspace"));
    assert!(!loaded.config.llm_configured());

    let named = dir.path().join("nope.yaml");
    let error = load_with(Some(&named), &env).err();
    assert!(matches!(error, Some(ConfigError::NotFound { ref path }) if *path == named));
    let named_text = named.to_string_lossy().into_owned();
    let by_env = env_of(&[
        ("SQUIDBOT_HOME", &home_text),
        ("SQUIDBOT_CONFIG", &named_text),
    ]);
    assert!(matches!(
        load_with(None, &by_env),
        Err(ConfigError::NotFound { .. })
    ));

    std::fs::write(&named, BASE)?;
    let loaded = load_with(None, &by_env)?;
    assert!(loaded.exists && loaded.config.llm_configured());
    assert_eq!(loaded.home, home);
    Ok(())
}

#[test]
fn starter_config_loads() {
    let env_key = Config::starter(
        "https://openrouter.ai/api/v1",
        "SQUIDBOT_TEST_KEY",
        "anthropic/claude-opus-4-5",
    );
    let inline_key = Config::starter("https://api.openai.com/v1", "sk-abc\"123", "gpt-4o");
    let no_key = Config::starter("http://localhost:11434/v1", "", "llama3");
    let claude = Config::starter(
        "https://api.anthropic.com/v1",
        "sk-ant",
        "claude-sonnet-4-5",
    );
    // OpenAI's own API gets the Responses API its reasoning models need for tools, Anthropic's
    // its Messages API (prompt caching, thinking kept), every other server Chat Completions.
    for (text, key, api) in [
        (&env_key, "sk-from-env", ProviderApi::Chat),
        (&inline_key, "sk-abc\"123", ProviderApi::Responses),
        (&no_key, "", ProviderApi::Chat),
        (&claude, "sk-ant", ProviderApi::Anthropic),
    ] {
        let loaded = check_ok(text);
        assert!(loaded.config.llm_configured(), "{text}");
        let members = loaded.config.pool_members("default").unwrap_or_default();
        assert_eq!(members[0].provider.api_key.expose(), key);
        assert_eq!(members[0].provider.api, api, "{text}");
        assert!(loaded.warnings.is_empty());
    }
    assert!(env_key.contains("api_key_env: SQUIDBOT_TEST_KEY"));
}
