//! `squidbot onboard`: writes a starter configuration and creates the workspace with its
//! bootstrap templates (existing files are kept).
//!
//! It asks for the endpoint, model and key when they are not given as flags (and stdin is a
//! terminal). Running it again is safe: an existing configuration that already says what the
//! flags ask for is kept (and missing workspace files are still created); one that differs is
//! replaced only with `--force` or a "y" at the terminal, and the old file is kept as `.bak`.
//! It exits 0 only when the configuration it leaves behind loads.

use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use squidbot::config::{Config, resolve_path};
use squidbot::storage::{FileLock, atomic};

/// Arguments of `squidbot onboard`.
#[derive(Debug, Args)]
pub struct OnboardArgs {
    /// The OpenAI-compatible API base, e.g. https://api.openai.com/v1.
    #[arg(long, value_name = "URL")]
    api_base: Option<String>,
    /// The model id the endpoint expects, e.g. gpt-4o-mini.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// The environment variable holding the API key (preferred over --api-key).
    #[arg(long, value_name = "VAR", conflicts_with = "api_key")]
    api_key_env: Option<String>,
    /// The API key itself (it is written into the config file).
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Your Matrix user id (`@you:example.org`): only the owner approves commands there.
    #[arg(long, value_name = "MXID")]
    owner_matrix: Option<String>,
    /// Your mail address: only the owner approves commands by mail.
    #[arg(long, value_name = "ADDRESS")]
    owner_email: Option<String>,
    /// Replace an existing configuration file (the old one is kept as `.bak`).
    #[arg(long)]
    force: bool,
}

/// `config/example.yaml`, every setting with its default and a comment.
const EXAMPLE_CONFIG: &str = include_str!("../../config/example.yaml");

/// Runs the onboard command.
pub fn run(config_path: Option<&Path>, args: OnboardArgs) -> Result<ExitCode> {
    let location = resolve_path(config_path)?;
    let path = location.path.clone();
    let interactive = std::io::stdin().is_terminal();
    let wanted = Wanted::from_flags(&args);
    // Held until the file is written: another `onboard` or an `import` writing the same config
    // waits, so neither decides on a file the other is replacing.
    let _lock = FileLock::exclusive(&FileLock::beside(&path))
        .with_context(|| format!("locking {}", path.display()))?;
    let write = if path.exists() && !args.force {
        match decide_on_existing(&path, &wanted, interactive)? {
            Existing::Keep => false,
            Existing::Replace => true,
        }
    } else {
        true
    };
    if write {
        let api_base = value(
            wanted.api_base,
            interactive,
            "API base URL",
            "https://api.openai.com/v1",
        )?;
        let model = value(wanted.model, interactive, "Model", "gpt-4o-mini")?;
        let key = match wanted.key {
            Some(key) => key,
            None if interactive => ask_key_env(&api_base)?,
            None => String::new(),
        };
        let owner_matrix = match &args.owner_matrix {
            Some(id) => id.clone(),
            None if interactive => ask("Your Matrix id, for approvals (empty for none)", "")?,
            None => String::new(),
        };
        let owner_email = match &args.owner_email {
            Some(address) => address.clone(),
            None if interactive => ask("Your mail address, for approvals (empty for none)", "")?,
            None => String::new(),
        };
        let text = Config::starter_with_owner(&api_base, &key, &model, &owner_matrix, &owner_email);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if path.exists() {
            let backup = path.with_extension("yaml.bak");
            std::fs::copy(&path, &backup)
                .with_context(|| format!("keeping a copy in {}", backup.display()))?;
            say!("Kept the old configuration as {}", backup.display())?;
        }
        atomic::write(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        say!("Wrote {}", path.display())?;
    } else {
        say!("Kept {}", path.display())?;
    }
    // The commented reference of every field, beside the owner's file: an installed binary
    // has no source tree to point at. Rewritten each time, so it matches this version.
    if let Some(dir) = path.parent() {
        let example = dir.join("squidbot.example.yaml");
        atomic::write(&example, EXAMPLE_CONFIG.as_bytes())
            .with_context(|| format!("writing {}", example.display()))?;
        say!("Wrote {} (every setting, commented)", example.display())?;
    }
    let workspace = location.home.join("workspace");
    let templates = squidbot::skills::templates::write_missing(&workspace)
        .with_context(|| format!("setting up the workspace {}", workspace.display()))?;
    say!("Workspace: {}", workspace.display())?;
    for template in &templates {
        say!("  created {}", template.display())?;
    }
    match squidbot::config::load(Some(&path)) {
        Ok(_) => {
            say!("Next: squidbot agent")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            say!("The configuration does not load yet:\n{error}")?;
            Ok(ExitCode::FAILURE)
        }
    }
}

/// What the flags ask for; `None` where a flag was not given.
struct Wanted {
    api_base: Option<String>,
    model: Option<String>,
    key: Option<String>,
}

impl Wanted {
    fn from_flags(args: &OnboardArgs) -> Self {
        Self {
            api_base: args.api_base.clone(),
            model: args.model.clone(),
            key: args.api_key_env.clone().or_else(|| args.api_key.clone()),
        }
    }

    fn any(&self) -> bool {
        self.api_base.is_some() || self.model.is_some() || self.key.is_some()
    }
}

/// What to do with a configuration file that is already there.
enum Existing {
    Keep,
    Replace,
}

/// Running onboard again is safe: a configuration that loads and already says what the flags
/// ask for is kept; one that differs (or does not load) is replaced only when the owner says so
/// at the terminal, else the command refuses and points at `--force`.
fn decide_on_existing(path: &Path, wanted: &Wanted, interactive: bool) -> Result<Existing> {
    let current = match squidbot::config::load(Some(path)) {
        Ok(loaded) => {
            let config = loaded.config;
            let first = config
                .pool_members(&config.llm.default_pool)
                .and_then(|members| members.into_iter().next())
                .map(|m| (m.provider.api_base.clone(), m.model.model.clone()));
            Ok(first)
        }
        Err(error) => Err(error.to_string()),
    };
    let matches = |(api_base, model): &(String, String)| {
        wanted.api_base.as_ref().is_none_or(|w| w == api_base)
            && wanted.model.as_ref().is_none_or(|w| w == model)
            && wanted.key.is_none()
    };
    if let Ok(Some(pair)) = &current
        && wanted.any()
        && matches(pair)
    {
        return Ok(Existing::Keep);
    }
    let summary = match &current {
        Ok(Some((api_base, model))) => format!("it uses {model} at {api_base}"),
        Ok(None) => "its default pool is empty".to_owned(),
        Err(error) => format!("it does not load:\n{error}"),
    };
    if current.is_ok() && !wanted.any() && !interactive {
        return Ok(Existing::Keep);
    }
    if interactive {
        say!("{} exists; {summary}", path.display())?;
        let answer = ask("Replace it (a copy is kept as .bak)? y/N", "N")?;
        if answer.eq_ignore_ascii_case("y") || answer.eq_ignore_ascii_case("yes") {
            return Ok(Existing::Replace);
        }
        return Ok(Existing::Keep);
    }
    bail!(
        "{} already exists and {summary}\nEdit it, or run `squidbot onboard --force ...` to \
         replace it (the old file is kept as .bak)",
        path.display()
    )
}

fn value(given: Option<String>, interactive: bool, label: &str, default: &str) -> Result<String> {
    match given {
        Some(value) => Ok(value),
        None if interactive => ask(label, default),
        None => bail!("{label} is required: pass it as a flag (see `squidbot onboard --help`)"),
    }
}

/// Asks for the variable holding the API key, in words that say what Enter does. Where the
/// endpoint has a usual variable (OpenAI, OpenRouter) Enter takes it and `-` means none;
/// elsewhere (a local server) nothing is offered and Enter means none. (The prompt used to say
/// "empty for none" while Enter picked `OPENAI_API_KEY`.)
fn ask_key_env(api_base: &str) -> Result<String> {
    let label = "Environment variable with the API key";
    match usual_key_env(api_base) {
        Some(usual) => {
            let answer = ask(&format!("{label} ('-' for none)"), usual)?;
            Ok(if answer == "-" { String::new() } else { answer })
        }
        None => ask(&format!("{label} (empty for none)"), ""),
    }
}

/// The variable a hosted endpoint's key usually lives in.
fn usual_key_env(api_base: &str) -> Option<&'static str> {
    let host = url::Url::parse(api_base).ok()?.host_str()?.to_owned();
    let by_host = [
        ("openai.com", "OPENAI_API_KEY"),
        ("openrouter.ai", "OPENROUTER_API_KEY"),
    ];
    by_host
        .into_iter()
        .find(|(domain, _)| host == *domain || host.ends_with(&format!(".{domain}")))
        .map(|(_, variable)| variable)
}

/// Asks for one value; Enter takes `default`, which is shown in brackets unless it is empty.
fn ask(label: &str, default: &str) -> Result<String> {
    if default.is_empty() {
        squidbot::console::out(format_args!("{label}: "))?;
    } else {
        squidbot::console::out(format_args!("{label} [{default}]: "))?;
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let line = line.trim();
    Ok(if line.is_empty() {
        default.to_owned()
    } else {
        line.to_owned()
    })
}
