//! `squidbot status`: the resolved configuration in brief, without secrets.
//!
//! It answers "what will squidbot do with this config?": which file was read, where the state
//! lives, which models each pool tries in order, and the memory settings in force.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use squidbot::channels::plugin::{Identity, on};
use squidbot::channels::{owner_target, plugins};
use squidbot::config::{ApprovalConfig, Config, LoadedConfig, ShellSandbox};
use squidbot::core::redact::Redactor;
use squidbot::cron::admin::shell_quoted;
use squidbot::tools::sandbox::Sandbox;

/// Runs the status command.
pub fn run(config_path: Option<&Path>) -> Result<ExitCode> {
    let loaded = squidbot::config::load(config_path)?;
    squidbot::console::out(format_args!("{}", render(&loaded)))?;
    Ok(ExitCode::SUCCESS)
}

/// Who the bot is on each enabled channel, who its owner is, and whom it answers: what a new
/// owner checks first when the bot stays silent (#40). Each channel says its own part.
fn identity_lines(config: &Config) -> Vec<String> {
    let identities: Vec<Identity> = plugins()
        .iter()
        .filter_map(|plugin| plugin.identity(config))
        .collect();
    let owner = &config.owner;
    let mut owners: Vec<String> = owner.matrix.iter().chain(&owner.email).cloned().collect();
    if !owner.aliases.is_empty() {
        owners.push(format!("{} more in owner.aliases", owner.aliases.len()));
    }
    let owner = if owners.is_empty() {
        "none named (only the terminal and the HTTP API act as the owner)".to_owned()
    } else {
        owners.join(", ")
    };
    let bot = if identities.is_empty() {
        "no chat channel enabled (the terminal and the HTTP API)".to_owned()
    } else {
        let bots: Vec<&str> = identities.iter().map(|i| i.bot.as_str()).collect();
        bots.join(", ")
    };
    let answers = if identities.is_empty() {
        "the terminal, and the HTTP API with its token".to_owned()
    } else {
        let answers: Vec<&str> = identities.iter().map(|i| i.answers.as_str()).collect();
        answers.join("; ")
    };
    vec![
        format!("bot:        {bot}"),
        format!("owner:      {owner}"),
        format!("answers:    {answers}"),
    ]
}

/// The status text (a pure function, so its content is easy to test).
pub fn render(loaded: &LoadedConfig) -> String {
    let config = &loaded.config;
    let mut out = String::new();
    let state = if loaded.exists {
        "loaded"
    } else {
        "not found; built-in defaults (run `squidbot onboard`)"
    };
    let _ = writeln!(out, "squidbot {}", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(out, "config:     {} ({state})", loaded.path.display());
    let _ = writeln!(out, "home:       {}", loaded.home.display());
    let _ = writeln!(out, "workspace:  {}", config.agents.workspace.display());
    for warning in &loaded.warnings {
        let _ = writeln!(out, "warning:    {warning}");
    }
    if let Err(error) = loaded.check_agent() {
        for line in error.to_string().lines() {
            let _ = writeln!(out, "warning:    {line} (no agent can run)");
        }
    }
    if let Err(error) = loaded.check_gateway_secrets() {
        for line in error.to_string().lines() {
            let _ = writeln!(out, "warning:    {line} (the gateway cannot start)");
        }
    }
    if config.llm_configured() {
        let _ = writeln!(
            out,
            "llm:        default pool {:?}",
            config.llm.default_pool
        );
    } else {
        let _ = writeln!(out, "llm:        not configured");
    }
    for pool in config.llm.pools.keys() {
        let members = config.pool_members(pool).unwrap_or_default();
        let list: Vec<String> = members
            .iter()
            .map(|m| {
                let key = if m.provider.api_key.is_empty() {
                    "no key"
                } else {
                    "key set"
                };
                format!(
                    "{} ({} @ {}, {key})",
                    m.name, m.model.model, m.provider.api_base
                )
            })
            .collect();
        let _ = writeln!(out, "  pool {pool}: {}", list.join(" -> "));
    }
    let agents = &config.agents;
    let _ = writeln!(
        out,
        "memory:     consolidation above {} unconsolidated messages, keep {} recent, pool {:?}, summary limit {} words",
        agents.consolidation_threshold,
        agents.keep_recent,
        config.pool_or_default(&agents.consolidation_pool),
        agents.summary_word_limit
    );
    let plugins = plugins();
    let summaries: Vec<String> = plugins.iter().filter_map(|p| p.summary(config)).collect();
    let _ = writeln!(out, "channels:   {}", summaries.join(", "));
    for line in identity_lines(config) {
        let _ = writeln!(out, "{line}");
    }
    for line in plugins
        .iter()
        .flat_map(|plugin| plugin.status_lines(config))
    {
        let _ = writeln!(out, "{line}");
    }
    // The session `cron add` uses without --target, in the form --target takes back.
    let cron_target = match owner_target(config, &loaded.home) {
        Ok(found) => format!(
            "--target {} ({})",
            shell_quoted(found.session.as_str()),
            found.why
        ),
        Err(reason) => reason,
    };
    let _ = writeln!(out, "cron:       default target {cron_target}");
    out.push_str(&tools_and_budgets(loaded));
    out
}

/// The shell tool (its jail as it is here) and the budgets.
fn tools_and_budgets(loaded: &LoadedConfig) -> String {
    let config = &loaded.config;
    let mut out = String::new();
    let shell = &config.tools.shell;
    let allow = match &shell.allow {
        Some(entries) => format!("{} allowed commands", entries.len()),
        None => "the default read-only commands".to_owned(),
    };
    let approval = match shell.approval {
        ApprovalConfig::Ask => format!("ask (refused after {} s)", shell.approval_timeout_seconds),
        ApprovalConfig::Off => "off".to_owned(),
    };
    // What the jail is here, not only what was asked: where it cannot be built the shell
    // tool is off, and this is where the owner looks first.
    let sandbox = match shell.sandbox {
        ShellSandbox::Auto if shell.enabled => {
            let sandbox = Sandbox::new(
                &super::assemble::sandbox_settings(loaded),
                &Redactor::none(),
            );
            match sandbox.refusal() {
                Some(reason) => format!("refused, so the shell tool is off: {reason}"),
                None => format!("auto: {}", sandbox.status()),
            }
        }
        ShellSandbox::Auto => "auto".to_owned(),
        ShellSandbox::Off => "off (commands run unconfined)".to_owned(),
    };
    let _ = writeln!(
        out,
        "shell:      {}, sandbox {sandbox}, network {}, approval {approval}, runs unasked: {allow}",
        on(shell.enabled),
        if shell.network { "on" } else { "off" },
    );
    let budgets = &config.budgets;
    let tokens = |limit: u64| {
        if limit == 0 {
            "no limit".to_owned()
        } else {
            format!("{limit} tokens")
        }
    };
    let cost = if budgets.daily_cost > 0.0 {
        format!("{}", budgets.daily_cost)
    } else {
        "no limit".to_owned()
    };
    let _ = writeln!(
        out,
        "budgets:    per day {} and cost {cost}; per turn {}, heartbeat tick {}, cron run {}; days in {}",
        tokens(budgets.daily_tokens),
        tokens(budgets.turn_tokens),
        tokens(budgets.heartbeat_tokens),
        tokens(budgets.cron_tokens),
        budgets.zone_name(config)
    );
    out
}
