//! Tests of loading and validation, driven by `check(yaml, expected)` tables.
//!
//! - `loading.rs`: parsing, syntax/type/unknown-field errors, paths, the original's JSON.
//! - `validation.rs`: semantic checks and secrets.
//!
//! The environment is a fixed lookup function, so tests never touch (or race on) the process
//! environment.

mod loading;
mod validation;

use std::path::Path;

use super::load::load_from_str_with;
use super::{ConfigError, LoadedConfig};

pub(super) const PATH: &str = "/home/u/.squidbot/squidbot.yaml";
pub(super) const HOME: &str = "/home/u/.squidbot";

/// The test environment: a user home and two secrets.
pub(super) fn env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/u".to_owned()),
        "SQUIDBOT_TEST_KEY" => Some("sk-from-env".to_owned()),
        "SQUIDBOT_TEST_TOKEN" => Some("tok-from-env".to_owned()),
        _ => None,
    }
}

pub(super) fn load_text(yaml: &str) -> Result<LoadedConfig, ConfigError> {
    load_from_str_with(yaml, Path::new(PATH), Path::new(HOME), &env)
}

/// Loads `yaml`, which must be valid.
pub(super) fn check_ok(yaml: &str) -> LoadedConfig {
    match load_text(yaml) {
        Ok(loaded) => loaded,
        Err(error) => panic!("expected a valid config, got:\n{error}\n--- for ---\n{yaml}"),
    }
}

/// Loads `yaml`, which must fail with an error whose text contains `expected`.
pub(super) fn check(yaml: &str, expected: &str) {
    match load_text(yaml) {
        Ok(_) => panic!("expected an error containing {expected:?}\n--- for ---\n{yaml}"),
        Err(error) => {
            let text = error.to_string();
            assert!(
                text.contains(expected),
                "expected {expected:?}\n   got {text:?}\n--- for ---\n{yaml}"
            );
        }
    }
}

/// Ten lines: one provider, two models, the default pool.
pub(super) const BASE: &str = "\
llm:
  providers:
    openrouter:
      api_base: https://openrouter.ai/api/v1
      api_key: sk-x
  models:
    gpt4o: {provider: openrouter, model: openai/gpt-4o}
    mini: {provider: openrouter, model: openai/gpt-4o-mini}
  pools:
    default: [gpt4o, mini]
";

/// `BASE` without its pools (eight lines), for tests that write their own.
pub(super) fn base_without_pools() -> String {
    BASE.lines()
        .take(8)
        .map(|line| format!("{line}\n"))
        .collect()
}
