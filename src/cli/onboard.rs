//! `squidbot onboard`: writes a starter configuration and creates the workspace with its
//! bootstrap templates (existing files are kept).
//!
//! It asks for the endpoint, model and key when they are not given as flags (and stdin is a
//! terminal), never overwrites an existing configuration without `--force`, and checks that the
//! file it wrote loads before reporting success.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use squidbot::config::{Config, resolve_path};

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
    /// Overwrite an existing configuration file.
    #[arg(long)]
    force: bool,
}

/// Runs the onboard command.
pub fn run(config_path: Option<&Path>, args: OnboardArgs) -> Result<ExitCode> {
    let location = resolve_path(config_path);
    let path = location.path.clone();
    if path.exists() && !args.force {
        bail!(
            "{} already exists; edit it, or run `squidbot onboard --force` to replace it",
            path.display()
        );
    }
    let interactive = std::io::stdin().is_terminal();
    let api_base = value(
        args.api_base,
        interactive,
        "API base URL",
        "https://api.openai.com/v1",
    )?;
    let model = value(args.model, interactive, "Model", "gpt-4o-mini")?;
    let key = match (args.api_key_env, args.api_key) {
        (Some(var), _) => var,
        (None, Some(key)) => key,
        (None, None) if interactive => ask(
            "Environment variable with the API key (empty for none)",
            "OPENAI_API_KEY",
        )?,
        (None, None) => String::new(),
    };
    let text = Config::starter(&api_base, &key, &model);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    let workspace = location.home.join("workspace");
    let templates = squidbot::skills::templates::write_missing(&workspace)
        .with_context(|| format!("setting up the workspace {}", workspace.display()))?;
    println!("Wrote {}", path.display());
    println!("Workspace: {}", workspace.display());
    for template in &templates {
        println!("  created {}", template.display());
    }
    match squidbot::config::load(Some(&path)) {
        Ok(_) => println!("Next: squidbot agent"),
        Err(error) => println!("Note: the config does not load yet:\n{error}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn value(given: Option<String>, interactive: bool, label: &str, default: &str) -> Result<String> {
    match given {
        Some(value) => Ok(value),
        None if interactive => ask(label, default),
        None => bail!("{label} is required: pass it as a flag (see `squidbot onboard --help`)"),
    }
}

fn ask(label: &str, default: &str) -> Result<String> {
    print!("{label} [{default}]: ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let line = line.trim();
    Ok(if line.is_empty() {
        default.to_owned()
    } else {
        line.to_owned()
    })
}
