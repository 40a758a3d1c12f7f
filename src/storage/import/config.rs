//! The original's `config.json` as our YAML, with the paths of the original home moved into ours.
//!
//! The original wrote every field, so its config names `agents.workspace: "~/.squidbot/workspace"`
//! (its fixed home) even when the owner never set it. Kept as is, the imported config would send
//! MEMORY.md and the workspace files to the original's home (or, for a copied home, to the
//! user's real `~/.squidbot`), and the new gateway would then write there beside the old one. So
//! [`Rehome`] rewrites a path inside the original home (the `DIR` given to the import, or
//! `~/.squidbot`) to the same place inside ours, written relative to our home. A workspace
//! anywhere else is dropped (the workspace becomes `$SQUIDBOT_HOME/workspace`), so the import and
//! the agent write nothing outside the new home unless the owner sets it again. Skill directories
//! (`skills.extra_dirs`) outside the original home are kept: squidbot only reads them.

use std::fs;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::{FileOutcome, ImportError, io, place, read_optional};
use crate::storage::file_lock::FileLock;

/// The converted config: YAML, with the fields dropped and the paths moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The YAML text, with a comment listing the dropped fields.
    pub yaml: String,
    /// `field: reason` for every field removed.
    pub dropped: Vec<String>,
    /// `field: old → new` for every path moved into our home.
    pub mapped: Vec<String>,
}

/// What a config import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigReport {
    /// Where the config went.
    pub outcome: FileOutcome,
    /// `field: reason` for every field removed.
    pub dropped: Vec<String>,
    /// `field: old → new` for every path moved into our home.
    pub mapped: Vec<String>,
}

impl Default for ConfigReport {
    fn default() -> Self {
        Self {
            outcome: FileOutcome::Absent,
            dropped: Vec::new(),
            mapped: Vec::new(),
        }
    }
}

/// The original home and ours: how a path of the original's config is moved into ours.
#[derive(Debug, Clone)]
pub struct Rehome {
    /// The original home being imported, as given.
    source: PathBuf,
    /// Where the original kept its files: `source` (as given and resolved) and `~/.squidbot`,
    /// the original's fixed home, which its config names even when `source` is a copy.
    roots: Vec<PathBuf>,
    /// Our home.
    home: PathBuf,
    /// What `~` means (`$HOME`).
    user_home: Option<PathBuf>,
}

/// Where one configured path points.
enum Placed {
    /// Inside the original home: the same place inside ours, relative to our home.
    Mapped(PathBuf),
    /// Relative (under our home) or already inside our home.
    Ours,
    /// Anywhere else.
    Outside,
}

impl Rehome {
    /// Moving paths from `source` (the original home) into `home`, with `~` read as `user_home`.
    pub fn new(source: &Path, home: &Path, user_home: Option<&Path>) -> Self {
        let absolute = |path: &Path| std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let mut roots = vec![absolute(source)];
        roots.extend(fs::canonicalize(source).ok());
        if let Some(user_home) = user_home {
            let original = user_home.join(".squidbot");
            roots.extend(fs::canonicalize(&original).ok());
            roots.push(original);
        }
        Self {
            source: source.to_owned(),
            roots,
            home: absolute(home),
            user_home: user_home.map(Path::to_owned),
        }
    }

    /// Rewrites the path fields of a parsed original config; returns the fields dropped and the
    /// paths moved (both as `field: detail`).
    fn config(&self, value: &mut Value) -> (Vec<String>, Vec<String>) {
        let (mut dropped, mut mapped) = (Vec::new(), Vec::new());
        if let Some(agents) = value.get_mut("agents").and_then(Value::as_object_mut)
            && let Some(workspace) = agents.get("workspace").and_then(Value::as_str)
        {
            let workspace = workspace.to_owned();
            match self.place(&workspace) {
                Placed::Mapped(new) => {
                    mapped.push(self.note("agents.workspace", &workspace, &new));
                    agents.insert("workspace".into(), Value::String(new.display().to_string()));
                }
                Placed::Ours => {}
                Placed::Outside => {
                    agents.remove("workspace");
                    dropped.push(format!(
                        "agents.workspace: {workspace} is outside the original home; the \
                         workspace is {}",
                        self.home.join("workspace").display()
                    ));
                }
            }
        }
        let dirs = value
            .get_mut("skills")
            .and_then(|skills| skills.get_mut("extra_dirs"))
            .and_then(Value::as_array_mut);
        for (idx, dir) in dirs.into_iter().flatten().enumerate() {
            let Some(text) = dir.as_str().map(str::to_owned) else {
                continue;
            };
            if let Placed::Mapped(new) = self.place(&text) {
                mapped.push(self.note(&format!("skills.extra_dirs[{idx}]"), &text, &new));
                *dir = Value::String(new.display().to_string());
            }
        }
        (dropped, mapped)
    }

    /// Where `text` (a path as the original's config spells it) points.
    fn place(&self, text: &str) -> Placed {
        let path = self.expand(Path::new(text));
        if path.is_relative() {
            return if escapes(&path) {
                Placed::Outside
            } else {
                Placed::Ours
            };
        }
        for root in &self.roots {
            if let Ok(rest) = path.strip_prefix(root)
                && !escapes(rest)
            {
                let rest = if rest.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    rest.to_owned()
                };
                // Already where it belongs when our home is the original's.
                if self.home.join(&rest) == path {
                    return Placed::Ours;
                }
                return Placed::Mapped(rest);
            }
        }
        match path.strip_prefix(&self.home) {
            Ok(rest) if !escapes(rest) => Placed::Ours,
            _ => Placed::Outside,
        }
    }

    /// `~` as the user's home, as the original read it.
    fn expand(&self, path: &Path) -> PathBuf {
        match (path.strip_prefix("~"), &self.user_home) {
            (Ok(rest), Some(user_home)) => user_home.join(rest),
            _ => path.to_owned(),
        }
    }

    fn note(&self, field: &str, old: &str, new: &Path) -> String {
        format!("{field}: {old} → {}", self.home.join(new).display())
    }
}

/// Whether a relative path climbs out of where it is joined (`..` anywhere in it).
fn escapes(path: &Path) -> bool {
    path.components().any(|c| c == Component::ParentDir)
}

/// The most fields dropped from a converted config before giving up.
const MAX_DROPPED: usize = 64;

/// Converts the original's `config.json` text to YAML our loader accepts, its paths moved
/// into our home ([`Rehome`]); fields that had to be dropped are listed in the result.
pub fn convert_config(json: &str, rehome: &Rehome) -> Result<Converted, String> {
    let mut value: Value =
        serde_json::from_str(json).map_err(|error| format!("not JSON: {error}"))?;
    let home = rehome.home.as_path();
    let (mut dropped, mapped) = rehome.config(&mut value);
    let fake_path = home.join("squidbot.yaml");
    loop {
        let yaml = serde_saphyr::to_string(&value).map_err(|error| error.to_string())?;
        let problems = match crate::config::load_from_str(&yaml, &fake_path, home) {
            Ok(_) => {
                let mut text = String::from(
                    "# Converted from the original squidbot's config.json by `squidbot import`.\n",
                );
                for field in &dropped {
                    text.push_str(&format!("# dropped {field}\n"));
                }
                text.push_str(&yaml);
                return Ok(Converted {
                    yaml: text,
                    dropped,
                    mapped,
                });
            }
            Err(crate::config::ConfigError::Invalid { problems, .. }) => problems,
            Err(other) => return Err(other.to_string()),
        };
        let mut removed_any = false;
        for problem in problems {
            if dropped.len() >= MAX_DROPPED {
                break;
            }
            if remove_path(&mut value, &problem.field) {
                dropped.push(format!("{}: {}", problem.field, problem.message));
                removed_any = true;
            }
        }
        if !removed_any {
            return Err("the converted configuration does not load and cannot be repaired by dropping fields".to_owned());
        }
    }
}

/// Removes the field at a dotted path (`a.b[2].c`) from `value`; false when it is not there.
fn remove_path(value: &mut Value, path: &str) -> bool {
    let mut steps: Vec<Step> = Vec::new();
    for part in path.split('.') {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            steps.push(Step::Key(name.to_owned()));
        }
        for index in rest.split('[') {
            if let Ok(i) = index.trim_end_matches(']').parse::<usize>() {
                steps.push(Step::Index(i));
            }
        }
    }
    let Some((last, parents)) = steps.split_last() else {
        return false;
    };
    let mut node = value;
    for step in parents {
        let next = match step {
            Step::Key(key) => node.get_mut(key.as_str()),
            Step::Index(i) => node.get_mut(*i),
        };
        match next {
            Some(next) => node = next,
            None => return false,
        }
    }
    match (last, node) {
        (Step::Key(key), Value::Object(map)) => map.remove(key).is_some(),
        (Step::Index(i), Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
            true
        }
        _ => false,
    }
}

enum Step {
    Key(String),
    Index(usize),
}

/// Converts `source_home/config.json` to `target` (our config path), or to
/// `squidbot.imported.yaml` beside it when a different config already exists. The target is
/// written under its lock ([`FileLock::beside`]), which `squidbot onboard` takes too.
pub fn import_config(rehome: &Rehome, target: &Path) -> Result<ConfigReport, ImportError> {
    let source = rehome.source.join("config.json");
    let Some(bytes) = read_optional(&source)? else {
        return Ok(ConfigReport::default());
    };
    let text = String::from_utf8_lossy(&bytes);
    let converted = convert_config(&text, rehome).map_err(|detail| ImportError::Invalid {
        path: source.clone(),
        detail,
    })?;
    let lock = FileLock::beside(target);
    let _lock = FileLock::exclusive(&lock).map_err(io("locking", &lock))?;
    let beside = target.with_file_name("squidbot.imported.yaml");
    let outcome = place(target, &beside, converted.yaml.as_bytes())?;
    // The original kept API keys in plain text; keep them readable by the owner only.
    if let FileOutcome::Written(path) | FileOutcome::WrittenBeside(path) = &outcome {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .map_err(io("restricting", path))?;
    }
    Ok(ConfigReport {
        outcome,
        dropped: converted.dropped,
        mapped: converted.mapped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_our_schema_rejects_are_dropped_and_listed() {
        let home = Path::new("/tmp/squidbot-import-test");
        let json = r#"{"llm": {"default_pool": "default", "bogus": 1},
            "channels": {"matrix": {"enabled": false, "nope": [1]}}}"#;
        let rehome = Rehome::new(Path::new("/backup/old"), home, None);
        let Converted { yaml, dropped, .. } = convert_config(json, &rehome).unwrap();
        assert_eq!(dropped.len(), 2, "{dropped:?}");
        assert!(yaml.contains("# dropped llm.bogus"), "{yaml}");
        let body: Vec<&str> = yaml.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(!body.iter().any(|l| l.contains("nope")), "{yaml}");
        crate::config::load_from_str(&yaml, &home.join("squidbot.yaml"), home).unwrap();
    }

    #[test]
    fn removing_paths_handles_keys_and_indices() {
        let mut value = serde_json::json!({"a": {"b": [1, {"c": 2}]}});
        assert!(remove_path(&mut value, "a.b[1].c"));
        assert!(remove_path(&mut value, "a.b[0]"));
        assert!(!remove_path(&mut value, "a.x"));
        assert_eq!(value, serde_json::json!({"a": {"b": [{}]}}));
    }

    #[test]
    fn paths_of_the_original_home_move_into_ours() {
        let user = Path::new("/u");
        let rehome = Rehome::new(Path::new("/backup/old"), Path::new("/new"), Some(user));
        let check = |text: &str, expected: Option<&str>| {
            let got = match rehome.place(text) {
                Placed::Mapped(rest) => Some(rehome.home.join(rest).display().to_string()),
                Placed::Ours => Some("ours".to_owned()),
                Placed::Outside => None,
            };
            assert_eq!(got.as_deref(), expected, "{text}");
        };
        check("~/.squidbot/workspace", Some("/new/workspace"));
        check("/u/.squidbot", Some("/new/."));
        check("/backup/old/ws", Some("/new/ws"));
        check("/backup/old/../elsewhere", None);
        check("~/.squidbotx/workspace", None);
        check("/srv/workspace", None);
        check("ws", Some("ours"));
        check("../ws", None);
        check("/new/ws", Some("ours"));
    }

    #[test]
    fn a_workspace_outside_the_original_home_is_dropped() {
        let home = Path::new("/tmp/squidbot-import-test");
        let rehome = Rehome::new(Path::new("/backup/old"), home, Some(Path::new("/u")));
        let json = r#"{"agents": {"workspace": "/srv/ws"},
            "skills": {"extra_dirs": ["~/.squidbot/skills", "/opt/skills"]}}"#;
        let converted = convert_config(json, &rehome).unwrap();
        assert_eq!(converted.dropped.len(), 1, "{converted:?}");
        assert!(converted.dropped[0].starts_with("agents.workspace: /srv/ws"));
        assert_eq!(
            converted.mapped,
            ["skills.extra_dirs[0]: ~/.squidbot/skills → /tmp/squidbot-import-test/skills"]
        );
        let loaded = crate::config::load_from_str(&converted.yaml, &home.join("x.yaml"), home)
            .unwrap()
            .config;
        assert_eq!(loaded.agents.workspace, home.join("workspace"));
        assert_eq!(
            loaded.skills.extra_dirs,
            [home.join("skills"), PathBuf::from("/opt/skills")]
        );
    }
}
