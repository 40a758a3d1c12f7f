//! Finding, reading and deserializing the configuration file.
//!
//! The environment is read through a lookup function passed down from [`load`] and
//! [`resolve_path`], so tests can supply their own variables instead of racing on the process
//! environment.

use std::path::{Component, Path, PathBuf};

use super::index::{LineIndex, Pos};
use super::secret::EnvLookup;
use super::validate::validate;
use super::{Config, ConfigError, Problem};

/// The process environment, with empty values treated as unset.
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// Where the configuration lives, and the data directory it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigLocation {
    /// The configuration file.
    pub path: PathBuf,
    /// `$SQUIDBOT_HOME` (default `~/.squidbot`): sessions, memory and cron live here, and
    /// relative paths in the config are relative to it.
    pub home: PathBuf,
    /// Whether the path was named (`--config` or `SQUIDBOT_CONFIG`); a named file must exist.
    pub explicit: bool,
}

/// A loaded, validated configuration and where it came from.
#[derive(Clone, Debug)]
pub struct LoadedConfig {
    /// The configuration, with secrets resolved and paths absolute.
    pub config: Config,
    /// The file it was read from (or would have been, when it does not exist).
    pub path: PathBuf,
    /// `$SQUIDBOT_HOME`.
    pub home: PathBuf,
    /// Whether the file existed; `false` means built-in defaults (run `squidbot onboard`).
    pub exists: bool,
    /// Things worth telling the user that do not stop startup (e.g. ignored legacy fields), each
    /// as `path:line: field: message`.
    pub warnings: Vec<String>,
}

/// Finds the configuration file: `explicit` (the `--config` flag), else `SQUIDBOT_CONFIG`, else
/// `$SQUIDBOT_HOME/squidbot.yaml`, where `SQUIDBOT_HOME` defaults to `~/.squidbot`.
pub fn resolve_path(explicit: Option<&Path>) -> ConfigLocation {
    resolve_path_with(explicit, &process_env)
}

/// [`resolve_path`] with the environment read through `env`. Relative paths are made absolute
/// against the current directory, so later `cd`s (e.g. of child processes) cannot change them.
pub(crate) fn resolve_path_with(explicit: Option<&Path>, env: EnvLookup<'_>) -> ConfigLocation {
    let home = match env("SQUIDBOT_HOME") {
        Some(home) => absolute(&expand_tilde(Path::new(&home), env)),
        None => absolute(&expand_tilde(Path::new("~/.squidbot"), env)),
    };
    if let Some(path) = explicit {
        return ConfigLocation {
            path: absolute(&expand_tilde(path, env)),
            home,
            explicit: true,
        };
    }
    if let Some(path) = env("SQUIDBOT_CONFIG") {
        return ConfigLocation {
            path: absolute(&expand_tilde(Path::new(&path), env)),
            home,
            explicit: true,
        };
    }
    ConfigLocation {
        path: home.join("squidbot.yaml"),
        home,
        explicit: false,
    }
}

/// Finds (see [`resolve_path`]), reads and validates the configuration. A missing default file
/// gives the defaults (`exists: false`); a missing named file is [`ConfigError::NotFound`].
pub fn load(explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    load_with(explicit, &process_env)
}

/// [`load`] with the environment read through `env`.
pub(crate) fn load_with(
    explicit: Option<&Path>,
    env: EnvLookup<'_>,
) -> Result<LoadedConfig, ConfigError> {
    let location = resolve_path_with(explicit, env);
    match std::fs::read_to_string(&location.path) {
        Ok(text) => load_from_str_with(&text, &location.path, &location.home, env),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if location.explicit {
                return Err(ConfigError::NotFound {
                    path: location.path,
                });
            }
            let mut loaded = load_from_str_with("", &location.path, &location.home, env)?;
            loaded.exists = false;
            Ok(loaded)
        }
        Err(source) => Err(ConfigError::Read {
            path: location.path,
            source,
        }),
    }
}

/// Parses and validates configuration `text` as if read from `path`, with `home` as
/// `$SQUIDBOT_HOME`. Reads only the environment variables that secrets (and `~`) refer to.
pub fn load_from_str(text: &str, path: &Path, home: &Path) -> Result<LoadedConfig, ConfigError> {
    load_from_str_with(text, path, home, &process_env)
}

/// [`load_from_str`] with the environment read through `env`.
pub(crate) fn load_from_str_with(
    text: &str,
    path: &Path,
    home: &Path,
    env: EnvLookup<'_>,
) -> Result<LoadedConfig, ConfigError> {
    let index = LineIndex::build(text);
    let options = serde_saphyr::options! { with_snippet: false };
    let mut config: Config =
        serde_saphyr::from_str_with_options(text, options).map_err(|error| {
            ConfigError::Invalid {
                path: path.to_owned(),
                problems: vec![deserialize_problem(&error, &index)],
            }
        })?;
    let (problems, warnings) = validate(&mut config, &index, env);
    if !problems.is_empty() {
        return Err(ConfigError::Invalid {
            path: path.to_owned(),
            problems,
        });
    }
    resolve_paths(&mut config, home, env);
    let warnings = warnings
        .iter()
        .map(|warning| match warning.line {
            Some(line) => format!(
                "{}:{line}: {}: {}",
                path.display(),
                warning.field,
                warning.message
            ),
            None => format!("{}: {}: {}", path.display(), warning.field, warning.message),
        })
        .collect();
    Ok(LoadedConfig {
        config,
        path: path.to_owned(),
        home: home.to_owned(),
        exists: true,
        warnings,
    })
}

/// Turns a deserializer error into a problem at the field it points to.
fn deserialize_problem(error: &serde_saphyr::Error, index: &LineIndex) -> Problem {
    let pos = error
        .location()
        .map(|location| Pos {
            line: usize::try_from(location.line()).unwrap_or(usize::MAX),
            col: usize::try_from(location.column()).unwrap_or(usize::MAX),
        })
        .filter(|pos| pos.line > 0);
    let field = pos
        .and_then(|pos| index.field_at(pos))
        .unwrap_or("(document)");
    Problem::new(
        pos.map(|pos| pos.line),
        field,
        clean_message(&error.to_string()),
    )
}

/// Drops the location suffix (the problem carries the line) and phrases serde's messages for a
/// person editing the file.
fn clean_message(message: &str) -> String {
    let message = match message.rfind(" at line ") {
        Some(cut) if message[cut..].contains(", column ") => &message[..cut],
        _ => message,
    };
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((name, expected)) = rest.split_once("`, expected ")
    {
        let expected = expected
            .trim_start_matches("one of ")
            .trim_start_matches("field ")
            .replace('`', "");
        let closest = expected
            .split(", ")
            .map(|candidate| (edit_distance(name, candidate), candidate))
            .min()
            .filter(|(distance, _)| *distance <= 2.max(name.len() / 4));
        return match closest {
            Some((_, candidate)) => format!("unknown field, did you mean {candidate}?"),
            None => format!("unknown field (expected one of: {expected})"),
        };
    }
    let friendlier = [
        (
            "expected mapping start",
            "expected a mapping of fields (write {} for an empty section)",
        ),
        ("expected sequence start", "expected a list"),
        (
            "cannot deserialize null into string",
            "expected a string, found nothing (write \"\" for empty)",
        ),
        (
            "expected string scalar",
            "expected a single value, found a list or mapping",
        ),
        ("duplicate mapping key", "duplicate key"),
    ];
    for (serde_text, ours) in friendlier {
        if message.starts_with(serde_text) {
            return ours.to_owned();
        }
    }
    if let Some(kind) = message.strip_prefix("invalid ")
        && matches!(kind, "u16" | "u32" | "u64" | "usize" | "i64")
    {
        return format!("expected a whole number ({kind})");
    }
    message.to_owned()
}

/// Levenshtein distance of two short strings, to suggest the field a typo meant.
fn edit_distance(left: &str, right: &str) -> usize {
    let right: Vec<char> = right.chars().collect();
    let mut row: Vec<usize> = (0..=right.len()).collect();
    for (i, left_char) in left.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, right_char) in right.iter().enumerate() {
            let substitution = diagonal + usize::from(left_char != *right_char);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[right.len()]
}

/// Makes the configured paths absolute: `~` is the user's home, relative means under `home`, and
/// an empty workspace is `home/workspace`.
fn resolve_paths(config: &mut Config, home: &Path, env: EnvLookup<'_>) {
    let workspace = &config.agents.workspace;
    config.agents.workspace = if workspace.as_os_str().is_empty() {
        home.join("workspace")
    } else {
        under_home(workspace, home, env)
    };
    for dir in &mut config.skills.extra_dirs {
        *dir = under_home(dir, home, env);
    }
}

/// `path` with `~` expanded, joined onto `home` when relative.
fn under_home(path: &Path, home: &Path, env: EnvLookup<'_>) -> PathBuf {
    let path = expand_tilde(path, env);
    if path.is_relative() {
        home.join(path)
    } else {
        path
    }
}

/// `path` made absolute against the current directory (unchanged if that cannot be read).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// Replaces a leading `~` component with `$HOME` (left as is when `HOME` is unset).
fn expand_tilde(path: &Path, env: EnvLookup<'_>) -> PathBuf {
    let mut components = path.components();
    match (components.next(), env("HOME")) {
        (Some(Component::Normal(first)), Some(user_home)) if first == "~" => {
            let rest = components.as_path();
            if rest.as_os_str().is_empty() {
                PathBuf::from(user_home)
            } else {
                Path::new(&user_home).join(rest)
            }
        }
        _ => path.to_owned(),
    }
}
