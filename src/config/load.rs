//! Finding, reading and deserializing the configuration file.
//!
//! The environment is read through a lookup function passed down from [`load`] and
//! [`resolve_path`], so tests can supply their own variables instead of racing on the process
//! environment.

use std::path::{Component, Path, PathBuf};

use super::diagnosis;
use super::index::LineIndex;
use super::secret::EnvLookup;
use super::validate::validate;
use super::{Config, ConfigError, Problem};

/// The process environment. An empty value is kept: a secret's variable that is set but empty
/// is told as such (a service env file with `KEY=`), while the paths treat it as unset
/// ([`resolve_path_with`]).
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
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
    /// Secrets only the gateway needs (its HTTP token, the channels' credentials) whose
    /// environment variables are not set: [`LoadedConfig::check_gateway`] fails on them, every
    /// other command runs without them.
    pub gateway_problems: Vec<Problem>,
    /// Secrets whatever runs the agent needs (the providers' keys, the web search key) whose
    /// environment variables are not set: [`LoadedConfig::check_agent`] fails on them, so
    /// `squidbot status` and `cron list` still show the configuration without them.
    pub agent_problems: Vec<Problem>,
}

impl LoadedConfig {
    /// Fails, naming file, line and field, when a secret the gateway needs is missing from the
    /// environment: its own ([`LoadedConfig::gateway_problems`]) or its agent's
    /// ([`LoadedConfig::agent_problems`]), all of them at once.
    pub fn check_gateway(&self) -> Result<(), ConfigError> {
        let mut problems = self.agent_problems.clone();
        problems.extend(self.gateway_problems.iter().cloned());
        problems.sort_by_key(|problem| problem.line);
        self.invalid(problems)
    }

    /// Fails, naming file, line and field, when a secret the agent needs (a provider's key, the
    /// web search key) is missing from the environment (see [`LoadedConfig::agent_problems`]).
    pub fn check_agent(&self) -> Result<(), ConfigError> {
        self.invalid(self.agent_problems.clone())
    }

    /// [`LoadedConfig::check_gateway`] for the gateway's own secrets only (`squidbot status`
    /// names the agent's apart, since they stop more than the gateway).
    pub fn check_gateway_secrets(&self) -> Result<(), ConfigError> {
        self.invalid(self.gateway_problems.clone())
    }

    fn invalid(&self, problems: Vec<Problem>) -> Result<(), ConfigError> {
        if problems.is_empty() {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            path: self.path.clone(),
            problems,
        })
    }
}

/// Finds the configuration file: `explicit` (the `--config` flag), else `SQUIDBOT_CONFIG`, else
/// `$SQUIDBOT_HOME/squidbot.yaml`, where `SQUIDBOT_HOME` defaults to `~/.squidbot`. Fails with
/// [`ConfigError::NoHome`] when a `~` needs `HOME` and it is not set.
pub fn resolve_path(explicit: Option<&Path>) -> Result<ConfigLocation, ConfigError> {
    resolve_path_with(explicit, &process_env)
}

/// [`resolve_path`] with the environment read through `env`. Relative paths are made absolute
/// against the current directory, so later `cd`s (e.g. of child processes) cannot change them.
pub(crate) fn resolve_path_with(
    explicit: Option<&Path>,
    env: EnvLookup<'_>,
) -> Result<ConfigLocation, ConfigError> {
    // An empty HOME, SQUIDBOT_HOME or SQUIDBOT_CONFIG is no path: as if unset.
    let set = |name: &str| env(name).filter(|value| !value.is_empty());
    let env: EnvLookup<'_> = &set;
    let expand = |path: &Path| {
        expand_tilde(path, env)
            .map(|path| absolute(&path))
            .ok_or_else(|| ConfigError::NoHome {
                path: path.to_owned(),
            })
    };
    let home = match env("SQUIDBOT_HOME") {
        Some(home) => expand(Path::new(&home))?,
        None => expand(Path::new("~/.squidbot"))?,
    };
    if let Some(path) = explicit {
        return Ok(ConfigLocation {
            path: expand(path)?,
            home,
            explicit: true,
        });
    }
    if let Some(path) = env("SQUIDBOT_CONFIG") {
        return Ok(ConfigLocation {
            path: expand(Path::new(&path))?,
            home,
            explicit: true,
        });
    }
    Ok(ConfigLocation {
        path: home.join("squidbot.yaml"),
        home,
        explicit: false,
    })
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
    let location = resolve_path_with(explicit, env)?;
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
        Err(error) => Err(ConfigError::Read {
            path: location.path,
            error,
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
    let mut config =
        diagnosis::deserialize(text, &index).map_err(|problems| ConfigError::Invalid {
            path: path.to_owned(),
            problems,
        })?;
    let findings = validate(&mut config, &index, env);
    if !findings.problems.is_empty() {
        return Err(ConfigError::Invalid {
            path: path.to_owned(),
            problems: findings.problems,
        });
    }
    let unresolved = resolve_paths(&mut config, home, env);
    if !unresolved.is_empty() {
        let problems = unresolved
            .into_iter()
            .map(|field| {
                let message = "`~` stands for the home directory, but HOME is not set";
                Problem::new(index.line_of(field), field, message)
            })
            .collect();
        return Err(ConfigError::Invalid {
            path: path.to_owned(),
            problems,
        });
    }
    let warnings = findings
        .warnings
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
        gateway_problems: findings.gateway_only,
        agent_problems: findings.agent_only,
    })
}

/// Makes the configured paths absolute: `~` is the user's home, relative means under `home`, and
/// an empty workspace is `home/workspace`. Returns the fields whose `~` could not be expanded
/// (left as they were), since `HOME` is not set.
fn resolve_paths(config: &mut Config, home: &Path, env: EnvLookup<'_>) -> Vec<&'static str> {
    let mut unresolved = Vec::new();
    let workspace = &config.agents.workspace;
    if workspace.as_os_str().is_empty() {
        config.agents.workspace = home.join("workspace");
    } else {
        match under_home(workspace, home, env) {
            Some(path) => config.agents.workspace = path,
            None => unresolved.push("agents.workspace"),
        }
    }
    for dir in &mut config.skills.extra_dirs {
        match under_home(dir, home, env) {
            Some(path) => *dir = path,
            None => unresolved.push("skills.extra_dirs"),
        }
    }
    unresolved
}

/// `path` with `~` expanded, joined onto `home` when relative; `None` when `~` needs `HOME`
/// and it is not set.
fn under_home(path: &Path, home: &Path, env: EnvLookup<'_>) -> Option<PathBuf> {
    let path = expand_tilde(path, env)?;
    Some(if path.is_relative() {
        home.join(path)
    } else {
        path
    })
}

/// `path` made absolute against the current directory (unchanged if that cannot be read).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// Replaces a leading `~` component with `$HOME`. `None` when there is one and `HOME` is not
/// set: taken literally, `~/.squidbot` would become a directory named `~` in the current one.
fn expand_tilde(path: &Path, env: EnvLookup<'_>) -> Option<PathBuf> {
    let mut components = path.components();
    match components.next() {
        Some(Component::Normal(first)) if first == "~" => {
            let user_home = env("HOME").filter(|home| !home.is_empty())?;
            let rest = components.as_path();
            Some(if rest.as_os_str().is_empty() {
                PathBuf::from(user_home)
            } else {
                Path::new(&user_home).join(rest)
            })
        }
        _ => Some(path.to_owned()),
    }
}
