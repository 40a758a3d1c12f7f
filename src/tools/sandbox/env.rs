//! The environment of a shell command: an allowlist, never the daemon's environment.
//!
//! The daemon's environment holds what its secrets are read from (`OPENAI_API_KEY`, the mail
//! password's variable, …), so a command gets only PATH, LANG, TZ and TERM (the daemon's, or
//! plain defaults), HOME set to the workspace, the variables named in
//! `tools.shell.env_passthrough`, and TMPDIR (its own directory, set per command). A variable
//! whose value holds a known secret is dropped even when named, with a warning.

use std::path::Path;

use super::rules::{PathRule, canonical};
use crate::core::redact::Redactor;

/// Variables a command always gets from the daemon's environment, when set.
pub const BASE: [&str; 4] = ["PATH", "LANG", "TZ", "TERM"];

/// PATH when the daemon has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Set by the sandbox itself; never passed through.
const OWN: [&str; 2] = ["HOME", "TMPDIR"];

/// The command environment for `workspace`, reading the daemon's variables through `lookup`.
pub fn child_env(
    workspace: &Path,
    passthrough: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
    redactor: &Redactor,
) -> Vec<(String, String)> {
    let defaults = |name: &str| match name {
        "PATH" => Some(DEFAULT_PATH.to_owned()),
        "LANG" => Some("C.UTF-8".to_owned()),
        "TERM" => Some("dumb".to_owned()),
        _ => None,
    };
    let mut env: Vec<(String, String)> = Vec::new();
    let names = BASE
        .iter()
        .map(|name| (*name).to_owned())
        .chain(passthrough.iter().cloned());
    for name in names {
        if OWN.contains(&name.as_str()) || env.iter().any(|(known, _)| *known == name) {
            continue;
        }
        let Some(value) = lookup(&name).or_else(|| defaults(&name)) else {
            continue;
        };
        if redactor.finds(&value) {
            tracing::warn!(variable = %name, "Variable holds a secret; not passed to shell commands.");
            continue;
        }
        env.push((name, value));
    }
    env.push(("HOME".to_owned(), workspace.display().to_string()));
    env
}

/// Drops from PATH the directories no rule lets a jailed command read (a version manager's
/// shims in the owner's home, say): bash stops at the first `python3` it finds even when it
/// may not run it, so an unreachable entry would hide the system's own.
pub fn keep_reachable_path(env: &mut [(String, String)], rules: &[PathRule]) {
    for (name, value) in env.iter_mut() {
        if name != "PATH" {
            continue;
        }
        let kept: Vec<&str> = value
            .split(':')
            .filter(|dir| {
                let dir = canonical(Path::new(dir));
                rules.iter().any(|rule| dir.starts_with(&rule.path))
            })
            .collect();
        *value = if kept.is_empty() {
            DEFAULT_PATH.to_owned()
        } else {
            kept.join(":")
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowlisted_variables_reach_a_command() {
        let daemon = |name: &str| {
            match name {
                "PATH" => Some("/opt/bin:/usr/bin"),
                "OPENAI_API_KEY" => Some("sk-test-secret-123"),
                "EDITOR" => Some("vi"),
                "LEAKY" => Some("prefix sk-test-secret-123"),
                "HOME" => Some("/root"),
                _ => None,
            }
            .map(str::to_owned)
        };
        let redactor = Redactor::new(["sk-test-secret-123"]);
        let passthrough = ["EDITOR", "LEAKY", "HOME", "UNSET"].map(str::to_owned);
        let env = child_env(Path::new("/w"), &passthrough, &daemon, &redactor);
        let pairs: Vec<(&str, &str)> = env
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("PATH", "/opt/bin:/usr/bin"),
                ("LANG", "C.UTF-8"),
                ("TERM", "dumb"),
                ("EDITOR", "vi"),
                ("HOME", "/w"),
            ]
        );
    }
}
