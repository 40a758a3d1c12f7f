//! `squidbot doctor`: checks that the configured setup can actually run, one line per check.
//!
//! Each line is `ok  <what>` or `FAIL <what>: <the fix>`; the exit code is 0 only when every
//! check passes. Checks: the config loads; each model of every pool answers a one-token call;
//! each enabled channel's own checks, which its plug-in makes (the HTTP listen address is free
//! or already served by a squidbot gateway; the Matrix homeserver answers and the login works;
//! email IMAP and SMTP each logged in to); home, `sessions/`, the workspace and `cron/` are
//! writable; the shell's jail can be built (a `FAIL` naming why when it cannot: the shell tool
//! is then off).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use chrono::Utc;

use squidbot::accounting::layer::AccountedLlm;
use squidbot::channels::plugin::PROBE_TIMEOUT;
use squidbot::channels::plugins;
use squidbot::config::{
    Config, LoadedConfig, PoolMember, ProviderApi, TokenLimitSetting, ToolCallIdsSetting,
};
use squidbot::core::message::{Message, Role};
use squidbot::core::ports::clock::SystemClock;
use squidbot::core::ports::llm::{ChatRequest, LlmClient, LlmError};
use squidbot::core::ports::usage::{CallTag, Purpose};
use squidbot::core::redact::Redactor;
use squidbot::llm::profile::{TokenLimit, ToolCallIds};
use squidbot::llm::{Profile, Timeouts, http_client};
use squidbot::tools::sandbox::Sandbox;

use super::usage::usage_meter;

/// The outcome of one check.
struct Check {
    what: String,
    /// `None` when it passed, else how to fix it.
    fix: Option<String>,
}

impl Check {
    fn ok(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            fix: None,
        }
    }

    fn fail(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            fix: Some(fix.into()),
        }
    }

    fn line(&self) -> String {
        match &self.fix {
            None => format!("ok  {}", self.what),
            Some(fix) => format!("FAIL {}: {fix}", self.what),
        }
    }
}

/// What to do about a config that does not load: a variable the file names that is missing
/// from this environment is not the file's fault, so it is not sent to edit the file.
fn config_fix(error: &squidbot::config::ConfigError) -> &'static str {
    let only_environment = matches!(
        error,
        squidbot::config::ConfigError::Invalid { problems, .. }
            if problems.iter().all(|problem| problem.message.starts_with("environment variable "))
    );
    if only_environment {
        "set the variable in this shell, or in the service's env file for the gateway"
    } else {
        "fix the file, or run `squidbot onboard`"
    }
}

/// Runs every check, prints one line each and returns success only when all pass.
pub async fn run(config_path: Option<&Path>) -> Result<ExitCode> {
    let mut all_ok = true;
    let mut report = |check: Check| {
        all_ok &= check.fix.is_none();
        say!("{}", check.line())
    };
    let loaded = match squidbot::config::load(config_path) {
        Ok(loaded) => loaded,
        Err(error) => {
            report(Check::fail(
                "config",
                format!("{error} ({})", config_fix(&error)),
            ))?;
            return Ok(ExitCode::FAILURE);
        }
    };
    let what = if loaded.exists {
        format!("config {}", loaded.path.display())
    } else {
        format!(
            "config {} (not found; built-in defaults)",
            loaded.path.display()
        )
    };
    report(Check::ok(what))?;
    // Warnings do not fail the check, but they are what the owner most needs to see (a
    // channel on with no owner set, mail without TLS).
    for warning in &loaded.warnings {
        say!("WARN {warning}")?;
    }
    for (what, checked) in [
        ("config for the agent", loaded.check_agent()),
        ("config for the gateway", loaded.check_gateway_secrets()),
    ] {
        for line in checked.err().iter().flat_map(lines) {
            report(Check::fail(
                what,
                format!(
                    "{line} (set the variable in this shell, or in the service's env file for the gateway)"
                ),
            ))?;
        }
    }
    let config = &loaded.config;
    for check in llm_checks(config, &loaded.home, &keyless_providers(&loaded)).await {
        report(check)?;
    }
    // Each enabled channel checks its own servers (one this build left out fails by name).
    for plugin in plugins() {
        if plugin.enabled(config) {
            for probe in plugin.doctor(config).await {
                report(Check {
                    what: probe.what,
                    fix: probe.fix,
                })?;
            }
        }
    }
    let dirs = [
        ("home", loaded.home.clone()),
        ("sessions", loaded.home.join("sessions")),
        ("workspace", config.agents.workspace.clone()),
        ("cron", loaded.home.join("cron")),
    ];
    for (name, dir) in dirs {
        report(writable(name, &dir))?;
    }
    if config.tools.shell.enabled {
        let settings = super::assemble::sandbox_settings(&loaded);
        let sandbox = Sandbox::new(&settings, &Redactor::none());
        let status = sandbox.status();
        if let Some(reason) = sandbox.refusal() {
            report(Check::fail(
                "shell sandbox",
                format!(
                    "the shell tool is off: its jail cannot be built here ({reason}); set \
                     tools.shell.sandbox: off to run commands unconfined"
                ),
            ))?;
        } else {
            report(Check::ok(format!("shell sandbox: {status}")))?;
        }
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One `max_tokens: 1` "ping" to each model of every pool (the default pool, the heartbeat's,
/// the spawn profiles' and any other), each model once, so a fallback or a pool used only at
/// night fails here rather than when it is needed. The pings go into the usage ledger (purpose
/// `doctor`, pool `model:<name>`); no budget stops them. Models of a provider in `keyless` (its
/// key's variable is unset) are reported, not asked: a request without the key proves nothing.
async fn llm_checks(config: &Config, home: &Path, keyless: &[String]) -> Vec<Check> {
    let pool = &config.llm.default_pool;
    if config.pool_members(pool).is_none_or(|m| m.is_empty()) {
        return vec![Check::fail(
            format!("llm pool {pool:?}"),
            "no models configured (add providers, models and pools under `llm`, or run `squidbot onboard`)",
        )];
    }
    // Model name → the pools it serves, in pool order (the default pool first).
    let mut models: Vec<(&str, Vec<&str>)> = Vec::new();
    let pools = std::iter::once(pool.as_str()).chain(
        config
            .llm
            .pools
            .keys()
            .map(String::as_str)
            .filter(|name| name != pool),
    );
    let mut members = Vec::new();
    for name in pools {
        for member in config.pool_members(name).unwrap_or_default() {
            match models.iter_mut().find(|(model, _)| *model == member.name) {
                Some((_, serves)) => serves.push(name),
                None => {
                    models.push((member.name, vec![name]));
                    members.push(member);
                }
            }
        }
    }
    let timeouts = Timeouts {
        connect: PROBE_TIMEOUT,
        first_byte: PROBE_TIMEOUT * 2,
        idle: PROBE_TIMEOUT * 2,
        total: PROBE_TIMEOUT * 3,
    };
    let client = match http_client(&timeouts) {
        Ok(client) => client,
        Err(error) => return vec![Check::fail("llm", error.to_string())],
    };
    let ping = [Arc::new(Message::new(
        Role::User,
        "ping",
        Utc::now().fixed_offset(),
    ))];
    let meter = usage_meter(config, home, Arc::new(SystemClock));
    let learned = Arc::new(squidbot::llm::learned::Learned::load(home));
    let mut checks = Vec::new();
    for member in members {
        if keyless.iter().any(|name| name == member.provider_name) {
            checks.push(Check::fail(
                format!("llm model {}", member.name),
                format!(
                    "not asked: the key of provider {:?} is missing (see above)",
                    member.provider_name
                ),
            ));
            continue;
        }
        if let Some(problem) = settings_problem(&member) {
            checks.push(Check::fail(
                format!("llm model {} settings", member.name),
                problem,
            ));
        }
        let api_base = member.provider.api_base.clone();
        let mut endpoint = super::assemble::endpoint(&member, Some(1));
        endpoint.max_context_tokens = None;
        let model = super::assemble::model_client(&member, endpoint, &client, &timeouts, &learned);
        let llm = AccountedLlm::new(model, meter.clone(), member.name);
        let request = ChatRequest {
            messages: &ping,
            tools: &[],
            call: CallTag::new(Purpose::Doctor),
        };
        let serves = models
            .iter()
            .find(|(model, _)| *model == member.name)
            .map(|(_, pools)| pools.join(", "))
            .unwrap_or_default();
        let what = format!(
            "llm model {} ({} @ {api_base}; pools: {serves})",
            member.name, member.model.model
        );
        let call = tokio::time::timeout(timeouts.total, llm.chat(request, &|_| {})).await;
        checks.push(match call {
            Ok(Ok(_)) => Check::ok(what),
            Ok(Err(error)) => Check::fail(what, failed_call_advice(&member, &error)),
            Err(_) => Check::fail(
                what,
                format!(
                    "no answer within {}s (is the server up?)",
                    timeouts.total.as_secs()
                ),
            ),
        });
    }
    checks
}

/// What to do about a failed ping: the other API when the answer names it (OpenAI's reasoning
/// models refuse tools on Chat Completions with a 400 that points to `/v1/responses`;
/// Anthropic's API wants its key in `x-api-key`) or when the server has no such API, else the
/// usual suspects.
fn failed_call_advice(member: &PoolMember<'_>, error: &LlmError) -> String {
    let detail = match error {
        LlmError::Server { detail, .. }
        | LlmError::NotFound { detail, .. }
        | LlmError::Auth { detail, .. } => detail.as_str(),
        _ => "",
    };
    let not_found = matches!(error, LlmError::NotFound { .. });
    let anthropic_host = url::Url::parse(&member.provider.api_base)
        .is_ok_and(|url| url.host_str() == Some("api.anthropic.com"));
    let provider = &member.model.provider;
    match member.provider.api {
        ProviderApi::Chat if detail.contains("/responses") => format!(
            "{error} (this model needs OpenAI's Responses API: set `api: responses` in \
             llm.providers.{provider})"
        ),
        ProviderApi::Chat | ProviderApi::Responses
            if detail.contains("x-api-key") || (not_found && anthropic_host) =>
        {
            format!(
                "{error} (this is Anthropic's own API: set `api: anthropic` in \
                 llm.providers.{provider})"
            )
        }
        ProviderApi::Responses if not_found => format!(
            "{error} (the server has no Responses API: set `api: chat` in \
             llm.providers.{provider}, or check api_base)"
        ),
        ProviderApi::Anthropic if not_found => format!(
            "{error} (the server has no Anthropic Messages API: set `api: chat` in \
             llm.providers.{provider}, or check api_base; Anthropic's is \
             https://api.anthropic.com/v1)"
        ),
        _ => format!("{error} (check the server is running, api_base, api_key and model id)"),
    }
}

/// Where a model's stated settings contradict what its provider is known to want (see
/// [`Profile::detect`]), how to fix them.
fn settings_problem(member: &PoolMember<'_>) -> Option<String> {
    let model = member.model;
    let detected = Profile::detect(&member.provider.api_base, &model.model);
    if model.token_limit == TokenLimitSetting::MaxTokens
        && detected.token_limit == TokenLimit::MaxCompletionTokens
    {
        return Some(format!(
            "`{}` is one of OpenAI's reasoning models, which refuse `max_tokens`: set \
             `token_limit: max_completion_tokens` (or leave it out: `auto` picks it)",
            model.model
        ));
    }
    if model.tool_call_ids == ToolCallIdsSetting::Any
        && detected.tool_call_ids == ToolCallIds::NineAlphanumerics
    {
        return Some(format!(
            "`{}` is served by Mistral, which accepts only 9-character tool-call ids: leave \
             `tool_call_ids` out (`auto` rewrites them)",
            model.model
        ));
    }
    None
}

/// Creates and removes a temp file in `dir`, or, while `dir` does not exist yet, in the
/// nearest directory above it that does (squidbot creates the rest at start): doctor only
/// looks, it makes no directory.
fn writable(name: &str, dir: &Path) -> Check {
    if dir.exists() && !dir.is_dir() {
        return Check::fail(
            format!("{name} {} writable", dir.display()),
            "it exists but is not a directory (move it away, or point the setting elsewhere)",
        );
    }
    let existing = dir.ancestors().find(|path| path.is_dir()).unwrap_or(dir);
    let what = if existing == dir {
        format!("{name} {} writable", dir.display())
    } else {
        format!(
            "{name} {} can be created ({} is writable)",
            dir.display(),
            existing.display()
        )
    };
    let probe = existing.join(format!(".squidbot-doctor-{}.tmp", std::process::id()));
    let result = std::fs::write(&probe, b"doctor").and_then(|()| std::fs::remove_file(&probe));
    match result {
        Ok(()) => Check::ok(what),
        Err(error) => Check::fail(
            what,
            format!(
                "{error} (make it writable by this user, e.g. `chmod u+rwx {}`)",
                dir.display()
            ),
        ),
    }
}

/// The lines of `error`'s message (a configuration error names one problem per line).
fn lines(error: &impl std::fmt::Display) -> Vec<String> {
    error.to_string().lines().map(str::to_owned).collect()
}

/// The providers whose key's environment variable is unset (their problems name
/// `llm.providers.<name>.api_key` or its `_env` sibling).
fn keyless_providers(loaded: &LoadedConfig) -> Vec<String> {
    loaded
        .agent_problems
        .iter()
        .filter_map(|problem| {
            let rest = problem.field.strip_prefix("llm.providers.")?;
            let name = rest
                .strip_suffix(".api_key_env")
                .or_else(|| rest.strip_suffix(".api_key"))?;
            Some(name.to_owned())
        })
        .collect()
}
