//! [`SkillCatalog`]: finds the skills, decides which are usable, and renders them for the prompt.
//!
//! Skills are looked up in `skills.extra_dirs` (in order), then `<workspace>/skills`, then the
//! bundled skills; the first valid `<dir>/<name>/SKILL.md` wins by directory name. A SKILL.md
//! whose frontmatter is missing or broken is skipped with a warning (a later one of the same name
//! is used instead); it never fails a turn. A skill is available when every `requires.bins` entry
//! is an executable on `PATH` and every `requires.env` variable is set and non-empty.
//!
//! The listing is rebuilt at most once per TTL (2 s by default). A rebuild re-reads only the
//! files whose modification time or size changed and forgets files that disappeared, so an edit,
//! a new skill or a deleted one applies on the next turn without a restart.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::skills::frontmatter::{self, Frontmatter};
use crate::storage::beneath;

/// Reads an environment variable; injected so tests need not touch the process environment.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// How long a listing is reused before the directories are looked at again.
pub const DEFAULT_TTL: Duration = Duration::from_secs(2);

/// The name of a skill's file inside its directory.
pub const SKILL_FILE: &str = "SKILL.md";

/// One skill as found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The frontmatter name, else the directory name.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// Whether its body goes into every prompt.
    pub always: bool,
    /// The absolute path of its SKILL.md.
    pub location: PathBuf,
    /// `metadata.squidbot.emoji`, if any.
    pub emoji: Option<String>,
    /// Required binaries not found on `PATH`.
    pub missing_bins: Vec<String>,
    /// Required environment variables that are unset or empty.
    pub missing_env: Vec<String>,
    /// The Markdown after the frontmatter, trimmed.
    pub body: Arc<str>,
}

impl Skill {
    /// Whether every requirement is met.
    pub fn available(&self) -> bool {
        self.missing_bins.is_empty() && self.missing_env.is_empty()
    }
}

/// The skills and their prompt text, rebuilt together.
#[derive(Debug, Default)]
struct Listing {
    skills: Arc<[Skill]>,
    xml: String,
    always: Vec<String>,
}

impl Listing {
    /// The skills XML and the always-skill bodies, as a prompt takes them.
    fn prompt(&self) -> (String, Vec<String>) {
        (self.xml.clone(), self.always.clone())
    }
}

/// A parsed SKILL.md, or `None` when it was broken (so it is not re-parsed or re-warned).
struct Cached {
    modified: SystemTime,
    len: u64,
    parsed: Option<(Frontmatter, Arc<str>)>,
}

#[derive(Default)]
struct State {
    listed_at: Option<Instant>,
    listing: Arc<Listing>,
    files: HashMap<PathBuf, Cached>,
}

struct Inner {
    dirs: Vec<PathBuf>,
    env: EnvLookup,
    ttl: Duration,
    /// A std mutex: held during a rebuild (plain file I/O on a blocking thread), never across
    /// an await.
    state: Mutex<State>,
}

/// The skills of the search directories, cached; cheap to clone (shared state).
#[derive(Clone)]
pub struct SkillCatalog(Arc<Inner>);

impl std::fmt::Debug for SkillCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillCatalog")
            .field("dirs", &self.0.dirs)
            .field("ttl", &self.0.ttl)
            .finish_non_exhaustive()
    }
}

/// The search order: `extra_dirs`, then `<workspace>/skills`, then the bundled directory.
pub fn search_dirs(extra_dirs: &[PathBuf], workspace: &Path, bundled: &Path) -> Vec<PathBuf> {
    let mut dirs = extra_dirs.to_vec();
    dirs.push(workspace.join("skills"));
    dirs.push(bundled.to_owned());
    dirs
}

impl SkillCatalog {
    /// A catalog over `dirs` (highest precedence first) reading the process environment.
    pub fn new(dirs: Vec<PathBuf>) -> Self {
        Self::with_options(dirs, Arc::new(|name| std::env::var(name).ok()), DEFAULT_TTL)
    }

    /// A catalog with an injected environment and listing TTL.
    pub fn with_options(dirs: Vec<PathBuf>, env: EnvLookup, ttl: Duration) -> Self {
        Self(Arc::new(Inner {
            dirs,
            env,
            ttl,
            state: Mutex::default(),
        }))
    }

    /// Every skill found, sorted by name (blocking file I/O when the listing is stale).
    pub fn skills(&self) -> Arc<[Skill]> {
        self.listing().skills.clone()
    }

    /// The skills XML (without always-skills; empty when there is nothing to list) and the
    /// bodies of the available always-skills (blocking file I/O when the listing is stale).
    pub fn prompt(&self) -> (String, Vec<String>) {
        self.listing().prompt()
    }

    /// [`SkillCatalog::prompt`] while the listing is fresh, without touching the disk; `None`
    /// when it must be scanned again (which is blocking). A turn asks this on its own thread
    /// first: the listing is fresh on nearly every turn, and a hop to the blocking pool costs
    /// two thread switches for nothing.
    pub fn cached_prompt(&self) -> Option<(String, Vec<String>)> {
        let state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        self.fresh(&state).map(|listing| listing.prompt())
    }

    /// The listing of `state` while it is younger than the TTL.
    fn fresh(&self, state: &State) -> Option<Arc<Listing>> {
        let young = state.listed_at.is_some_and(|at| at.elapsed() < self.0.ttl);
        young.then(|| state.listing.clone())
    }

    fn listing(&self) -> Arc<Listing> {
        let inner = &self.0;
        let mut state = inner.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(listing) = self.fresh(&state) {
            return listing;
        }
        let skills = scan(&inner.dirs, &mut state.files, &*inner.env);
        let listing = Arc::new(Listing {
            xml: render_xml(&skills),
            always: skills
                .iter()
                .filter(|s| s.always && s.available() && !s.body.is_empty())
                .map(|s| s.body.to_string())
                .collect(),
            skills: skills.into(),
        });
        state.listing = listing.clone();
        state.listed_at = Some(Instant::now());
        listing
    }
}

/// Walks the directories in order; `files` is the parse cache, pruned to the files seen.
fn scan(
    dirs: &[PathBuf],
    files: &mut HashMap<PathBuf, Cached>,
    env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> Vec<Skill> {
    let mut old = std::mem::take(files);
    let mut seen: HashSet<OsString> = HashSet::new();
    let mut skills = Vec::new();
    let path_var = env("PATH").unwrap_or_default();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) => {
                if error.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(dir = %dir.display(), error = %error, "Cannot list a skills directory; skipped it.");
                }
                continue;
            }
        };
        let mut names: Vec<OsString> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        names.sort();
        for dir_name in names {
            if seen.contains(&dir_name) {
                continue;
            }
            let path = dir.join(&dir_name).join(SKILL_FILE);
            // Opened beneath its directory: a skill linked out of it (a command may plant one
            // in the workspace's skills) is refused, never read into the prompt.
            let relative = Path::new(&dir_name).join(SKILL_FILE);
            let meta = match beneath::metadata(dir, &relative) {
                Ok(meta) => meta,
                Err(error) => {
                    beneath::refused(&path, &error);
                    continue;
                }
            };
            if !meta.is_file() {
                continue;
            }
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let cached = match old.remove(&path) {
                Some(c) if c.modified == modified && c.len == meta.len() => c,
                _ => Cached {
                    modified,
                    len: meta.len(),
                    parsed: load(dir, &relative, &path),
                },
            };
            if let Some((frontmatter, body)) = &cached.parsed {
                seen.insert(dir_name.clone());
                let dir_name = dir_name.to_string_lossy();
                skills.push(skill(frontmatter, body, &dir_name, &path, &path_var, env));
            }
            files.insert(path, cached);
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

/// Reads and parses one SKILL.md, warning (once per version of the file) when it is broken.
fn load(dir: &Path, relative: &Path, path: &Path) -> Option<(Frontmatter, Arc<str>)> {
    let text = match beneath::read_to_string(dir, relative) {
        Ok(text) => text,
        Err(error) => {
            tracing::warn!(path = %path.display(), error = %error, "Cannot read a skill; skipped it.");
            return None;
        }
    };
    match frontmatter::parse(&text, path) {
        Ok((frontmatter, body)) => Some((frontmatter, body.trim().into())),
        Err(error) => {
            tracing::warn!(error = %error, "Skipped a skill with a broken frontmatter.");
            None
        }
    }
}

fn skill(
    frontmatter: &Frontmatter,
    body: &Arc<str>,
    dir_name: &str,
    path: &Path,
    path_var: &str,
    env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> Skill {
    let requires = &frontmatter.requires;
    Skill {
        name: frontmatter
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| dir_name.to_owned()),
        description: frontmatter.description.trim().to_owned(),
        always: frontmatter.always,
        location: path.to_owned(),
        emoji: frontmatter.metadata.squidbot.emoji.clone(),
        missing_bins: requires
            .bins
            .iter()
            .filter(|bin| !on_path(bin, path_var))
            .cloned()
            .collect(),
        missing_env: requires
            .env
            .iter()
            .filter(|var| env(var).is_none_or(|v| v.is_empty()))
            .cloned()
            .collect(),
        body: body.clone(),
    }
}

/// Whether `bin` is an executable file in one of the directories of `path_var`.
fn on_path(bin: &str, path_var: &str) -> bool {
    if bin.is_empty() || bin.contains('/') {
        return !bin.is_empty() && is_executable(Path::new(bin));
    }
    std::env::split_paths(path_var).any(|dir| is_executable(&dir.join(bin)))
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

/// The prompt's skills section: a one-line instruction and the XML of the non-always skills,
/// one element each with its name and file as attributes and its description as text. Every
/// turn's prompt carries it, so it is as terse as XML allows: an available skill says nothing
/// about being available, an unavailable one names what it lacks in `requires`.
fn render_xml(skills: &[Skill]) -> String {
    let listed: Vec<&Skill> = skills.iter().filter(|s| !s.always).collect();
    if listed.is_empty() {
        return String::new();
    }
    let mut xml = String::from(
        "## Skills\n\nBefore using a skill, read its file with read_file.\n\n<skills>",
    );
    for skill in listed {
        xml.push_str(&format!(
            "\n<skill name=\"{}\" file=\"{}\"",
            escape(&skill.name),
            escape(&skill.location.to_string_lossy()),
        ));
        if !skill.available() {
            xml.push_str(&format!(" requires=\"{}\"", escape(&requires_text(skill))));
        }
        xml.push_str(&format!(">{}</skill>", escape(&skill.description)));
    }
    xml.push_str("\n</skills>");
    xml
}

/// What an unavailable skill lacks: `CLI: a, b; env: X`.
pub fn requires_text(skill: &Skill) -> String {
    let mut parts = Vec::new();
    if !skill.missing_bins.is_empty() {
        parts.push(format!("CLI: {}", skill.missing_bins.join(", ")));
    }
    if !skill.missing_env.is_empty() {
        parts.push(format!("env: {}", skill.missing_env.join(", ")));
    }
    parts.join("; ")
}

/// Escapes the five XML special characters.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}
