//! What a system service needs that the installing shell had: a binary its user can run, and
//! the variables the configuration reads.
//!
//! A unit's `ExecStart` is run as its `User=`, who cannot enter a directory closed to it
//! (`/root` is 0700, so `/root/.cargo/bin/squidbot` fails with "Permission denied" at every
//! start); and a service gets no variables from the shell, only `service.env`. Both are found
//! before the unit is written, so the owner hears of them at install, not from the journal.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{Result, bail};

use squidbot::tools::sandbox::identity::{Identity, IdentityError};

/// A user a unit runs as.
pub struct Account {
    /// `None` when this process is not root: it cannot know another user's rights, and a
    /// non-root install runs as the home's owner, who installed the binary.
    identity: Option<Identity>,
}

impl Account {
    /// The user `name` (or a numeric uid).
    pub fn lookup(name: &str) -> Result<Self> {
        match Identity::for_commands(Some(name)) {
            Ok(identity) => Ok(Self { identity }),
            Err(IdentityError::Unknown(name)) => {
                bail!(
                    "--run-as {name}: no such user (create it first, e.g. `useradd --system {name}`)"
                )
            }
            Err(IdentityError::Root(name)) => {
                bail!("--run-as {name}: a system unit does not run the gateway as root")
            }
        }
    }

    /// Whether `mode`'s bit `bit` (1 execute, 4 read) allows this user, as the kernel decides
    /// for a file owned by `uid`:`gid` (supplementary groups are not counted, so a doubt ends
    /// in a copy, never in a unit that cannot start).
    fn allows(identity: &Identity, meta: &std::fs::Metadata, bit: u32) -> bool {
        let mode = meta.mode();
        let shift = if meta.uid() == identity.uid {
            6
        } else if meta.gid() == identity.gid {
            3
        } else {
            0
        };
        mode & (bit << shift) != 0
    }

    /// Whether this user can enter `dir` and every directory above it.
    pub fn can_execute_dir(&self, dir: &Path) -> bool {
        let Some(identity) = &self.identity else {
            return true;
        };
        dir.ancestors().all(|step| {
            std::fs::metadata(step)
                .is_ok_and(|meta| meta.is_dir() && Self::allows(identity, &meta, 1))
        })
    }

    /// Whether this user can run the program `path`: execute on it, search on each directory
    /// above it.
    pub fn can_execute(&self, path: &Path) -> bool {
        let Some(identity) = &self.identity else {
            return true;
        };
        let file = std::fs::metadata(path)
            .is_ok_and(|meta| meta.is_file() && Self::allows(identity, &meta, 1));
        file && path.parent().is_none_or(|dir| self.can_execute_dir(dir))
    }
}

/// The environment variables the configuration at `config` reads: the values of its `*_env`
/// fields and the `${VAR}` values, in order of name.
fn variables_read(config: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let Ok(text) = std::fs::read_to_string(config) else {
        return names;
    };
    let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(&text) else {
        return names;
    };
    let mut stack = vec![(String::new(), value)];
    while let Some((key, value)) = stack.pop() {
        match value {
            serde_json::Value::Object(map) => stack.extend(map),
            serde_json::Value::Array(items) => {
                stack.extend(items.into_iter().map(|item| (String::new(), item)));
            }
            serde_json::Value::String(text) => {
                let text = text.trim();
                if key.ends_with("_env") && !text.is_empty() {
                    names.insert(text.to_owned());
                } else if let Some(name) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}'))
                {
                    names.insert(name.to_owned());
                }
            }
            _ => {}
        }
    }
    names
}

/// The names `env_file` sets (`NAME=value` lines, `export` allowed, as systemd reads them).
fn variables_set(env_file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(env_file).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#') && !line.starts_with(';'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, _)| name.trim().trim_start_matches("export ").trim().to_owned())
        .collect()
}

/// The variables the configuration at `config` reads that `env_file` does not set.
pub fn missing_variables(config: &Path, env_file: &Path) -> Vec<String> {
    let set = variables_set(env_file);
    variables_read(config)
        .into_iter()
        .filter(|name| !set.contains(name))
        .collect()
}
