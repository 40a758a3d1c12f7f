//! `squidbot skills list`: every skill in search order, whether it is usable, and what it lacks.
//!
//! It loads the configuration (so `--config`, `SQUIDBOT_HOME` and `skills.extra_dirs` apply) and
//! materializes the bundled skills, exactly as the agent sees them.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use squidbot::skills::Skill;

use super::assemble::skill_catalog;

/// `squidbot skills` arguments.
#[derive(Debug, Args)]
pub struct SkillsArgs {
    #[command(subcommand)]
    command: SkillsCommand,
}

#[derive(Debug, Subcommand)]
enum SkillsCommand {
    /// List the skills: `+` usable, `-` missing a binary or environment variable.
    #[command(alias = "list-skills")]
    List,
}

/// Runs a `squidbot skills` command.
pub fn run(config_path: Option<&Path>, args: SkillsArgs) -> Result<ExitCode> {
    let loaded = squidbot::config::load(config_path)?;
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    match args.command {
        SkillsCommand::List => {
            let catalog = skill_catalog(&loaded.config, &loaded.home);
            squidbot::console::out(format_args!("{}", format_skills(&catalog.skills())))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per skill, `  [+|-] name [always]  description`, then what is missing.
fn format_skills(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return "No skills found.\n".to_owned();
    }
    let width = skills.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for skill in skills {
        let mark = if skill.available() { '+' } else { '-' };
        let always = if skill.always { " [always]" } else { "" };
        let _ = writeln!(
            out,
            "  {mark} {:<width$}{always}  {}",
            skill.name, skill.description
        );
        if !skill.missing_bins.is_empty() {
            let _ = writeln!(out, "      missing bins: {}", skill.missing_bins.join(", "));
        }
        if !skill.missing_env.is_empty() {
            let _ = writeln!(out, "      missing env: {}", skill.missing_env.join(", "));
        }
    }
    out
}
