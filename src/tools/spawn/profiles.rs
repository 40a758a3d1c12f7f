//! What the main agent is told about the configured spawn profiles.
//!
//! The same one-line description of each profile goes into the `spawn` tool's schema (the
//! `profile` enum's description) and into the main system prompt as an
//! `<available_spawn_profiles>` block, so the agent knows which kinds of sub-agent exist before
//! it reads any schema. Both are derived from the configuration alone: the prompt is assembled
//! before the hub exists, and a description never depends on the hub's state.

use std::collections::BTreeMap;

use crate::config::{SpawnConfig, SpawnProfile};
use crate::skills::catalog::escape;

/// Each configured profile's one-line description, by name.
pub fn profile_descriptions(config: &SpawnConfig) -> BTreeMap<String, String> {
    config
        .profiles
        .iter()
        .map(|(name, profile)| (name.clone(), describe(profile)))
        .collect()
}

/// The first line of the profile's system prompt, then the tools it may use.
fn describe(profile: &SpawnProfile) -> String {
    let tools = if profile.tools.is_empty() {
        "all".to_owned()
    } else {
        profile.tools.join(", ")
    };
    let summary = profile
        .system_prompt
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    format!("{summary} Tools: {tools}.").trim().to_owned()
}

/// The `<available_spawn_profiles>` block for the main system prompt; empty when spawn is off
/// or no profile is configured (then there is nothing to choose between).
pub fn profiles_prompt(config: &SpawnConfig) -> String {
    if !config.enabled || config.profiles.is_empty() {
        return String::new();
    }
    let mut block = String::from("<available_spawn_profiles>\n");
    for (name, description) in profile_descriptions(config) {
        block.push_str(&format!(
            "  <profile name=\"{}\">{}</profile>\n",
            escape(&name),
            escape(&description)
        ));
    }
    block.push_str("</available_spawn_profiles>");
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(enabled: bool) -> SpawnConfig {
        let mut config = SpawnConfig {
            enabled,
            ..SpawnConfig::default()
        };
        config.profiles.insert(
            "researcher".to_owned(),
            SpawnProfile {
                system_prompt: "\n  Finds sources & quotes them.\nNever guesses.".to_owned(),
                tools: vec!["fetch_url".to_owned(), "web_search".to_owned()],
                ..SpawnProfile::default()
            },
        );
        config
            .profiles
            .insert("<odd>".to_owned(), SpawnProfile::default());
        config
    }

    #[test]
    fn the_block_lists_every_profile_escaped_with_its_tools() {
        assert_eq!(
            profiles_prompt(&config(true)),
            "<available_spawn_profiles>\n\
             \x20 <profile name=\"&lt;odd&gt;\">Tools: all.</profile>\n\
             \x20 <profile name=\"researcher\">Finds sources &amp; quotes them. Tools: fetch_url, web_search.</profile>\n\
             </available_spawn_profiles>"
        );
    }

    #[test]
    fn no_block_when_spawn_is_off_or_has_no_profiles() {
        assert_eq!(profiles_prompt(&config(false)), "");
        let bare = SpawnConfig {
            enabled: true,
            ..SpawnConfig::default()
        };
        assert_eq!(profiles_prompt(&bare), "");
    }
}
