//! `squidbot doctor`: checks that the configured setup can actually run, one line per check.
//!
//! Each line is `ok  <what>` or `FAIL <what>: <the fix>`; the exit code is 0 only when every
//! check passes. Checks: the config loads; each model of every pool answers a one-token call;
//! the enabled channels' servers are reachable (Matrix `GET /_matrix/client/versions`, and
//! `whoami` with the access token; email IMAP and SMTP each logged in to with the configured TLS
//! mode, then logged out of); home, `sessions/`, the workspace and `cron/` are
//! writable; the HTTP listen address is free or already served by a squidbot gateway; the
//! shell's jail can be built (a `FAIL` naming why when it cannot: the shell tool is then off).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use chrono::Utc;

use squidbot::accounting::layer::AccountedLlm;
#[cfg(feature = "email")]
use squidbot::channels::email::{EmailError, imap, smtp::SmtpOutbox};
#[cfg(feature = "email")]
use squidbot::config::EmailConfig;
use squidbot::config::{
    Config, LoadedConfig, MatrixConfig, PoolMember, ProviderApi, TokenLimitSetting,
    ToolCallIdsSetting,
};
use squidbot::core::message::{Message, Role};
use squidbot::core::ports::clock::SystemClock;
use squidbot::core::ports::llm::{ChatRequest, LlmClient, LlmError};
use squidbot::core::ports::usage::{CallTag, Purpose};
use squidbot::core::redact::Redactor;
use squidbot::llm::profile::{TokenLimit, ToolCallIds};
use squidbot::llm::{Profile, Timeouts, http_client};
use squidbot::tools::sandbox::Sandbox;

use super::assemble::usage_meter;

/// The limit for one network probe (LLM call, HTTP GET, TCP connect).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

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
    for check in channel_checks(config).await {
        report(check)?;
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
    if config.gateway.http.enabled {
        report(listen_check(config).await)?;
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

/// The enabled channels' servers.
async fn channel_checks(config: &Config) -> Vec<Check> {
    let mut checks = Vec::new();
    for channel in super::gateway::unbuilt_channels(config) {
        checks.push(Check::fail(
            format!("{channel} channel"),
            super::gateway::unbuilt_message(channel),
        ));
    }
    let matrix = &config.channels.matrix;
    if matrix.enabled && cfg!(feature = "matrix") {
        let url = format!(
            "{}/_matrix/client/versions",
            matrix.homeserver.trim_end_matches('/')
        );
        let what = format!("matrix homeserver {}", matrix.homeserver);
        let client = reqwest::Client::builder().timeout(PROBE_TIMEOUT).build();
        let client = match client {
            Ok(client) => client,
            Err(error) => return vec![Check::fail(what, error.to_string())],
        };
        let result = client.get(&url).send().await.map_err(|e| e.to_string());
        let reachable = matches!(&result, Ok(response) if response.status().is_success());
        checks.push(match result {
            Ok(response) if response.status().is_success() => Check::ok(what),
            Ok(response) => Check::fail(
                what,
                format!(
                    "GET {url} answered {} (is channels.matrix.homeserver a Matrix server?)",
                    response.status()
                ),
            ),
            Err(error) => Check::fail(
                what,
                format!("GET {url} failed: {error} (check channels.matrix.homeserver)"),
            ),
        });
        if reachable && !matrix.access_token.is_empty() {
            checks.push(matrix_whoami(&client, matrix).await);
        } else if reachable && !matrix.password.is_empty() {
            checks.push(matrix_password(&client, matrix).await);
        }
    }
    #[cfg(feature = "email")]
    if config.channels.email.enabled {
        let email = &config.channels.email;
        checks.push(imap_login(email).await);
        checks.push(smtp_login(email).await);
    }
    checks
}

/// Connects to the IMAP server with the configured TLS mode, logs in and logs out.
#[cfg(feature = "email")]
async fn imap_login(email: &EmailConfig) -> Check {
    let what = format!(
        "email imap login {}@{}:{}",
        email.username, email.imap_host, email.imap_port
    );
    match imap::connect(email).await {
        Ok(session) => {
            imap::logout(session).await;
            Check::ok(what)
        }
        Err(error) => Check::fail(
            what,
            format!(
                "{error} (check channels.email.imap_host/imap_port, tls/imap_starttls, \
                 username and password)"
            ),
        ),
    }
}

/// Connects to the SMTP server with the configured TLS mode, logs in and quits.
#[cfg(feature = "email")]
async fn smtp_login(email: &EmailConfig) -> Check {
    let what = format!(
        "email smtp login {}@{}:{}",
        email.username, email.smtp_host, email.smtp_port
    );
    let checked = match SmtpOutbox::new(email) {
        Ok(outbox) => tokio::time::timeout(PROBE_TIMEOUT * 2, outbox.check_login())
            .await
            .unwrap_or_else(|_| {
                Err(EmailError::Timeout {
                    command: "SMTP connect and login".to_owned(),
                })
            }),
        Err(error) => Err(error),
    };
    match checked {
        Ok(()) => Check::ok(what),
        Err(error) => Check::fail(
            what,
            format!(
                "{error} (check channels.email.smtp_host/smtp_port, tls/smtp_starttls, \
                 username and password)"
            ),
        ),
    }
}

/// The setting the Matrix password came from, as the owner wrote it: the variable when it is
/// read from one, so a fix names what to change.
fn password_field(matrix: &MatrixConfig) -> String {
    if matrix.password_env.is_empty() {
        "channels.matrix.password".to_owned()
    } else {
        format!(
            "channels.matrix.password_env (the variable {})",
            matrix.password_env
        )
    }
}

/// The device id of doctor's own password login; logged out (so removed) at once.
const DOCTOR_DEVICE: &str = "SQUIDBOT_DOCTOR";

/// The password is accepted: a login as a device of doctor's own, logged out at once (which
/// deletes the device), so the check leaves nothing on the account and never touches the
/// gateway's device or its keys.
async fn matrix_password(client: &reqwest::Client, matrix: &MatrixConfig) -> Check {
    let what = format!("matrix login {}", matrix.user_id);
    let base = matrix.homeserver.trim_end_matches('/');
    let body = serde_json::json!({
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": matrix.user_id},
        "password": matrix.password.expose(),
        "device_id": DOCTOR_DEVICE,
        "initial_device_display_name": "squidbot doctor (logged out at once)",
    });
    let url = format!("{base}/_matrix/client/v3/login");
    let response = match client.post(&url).json(&body).send().await {
        Ok(response) => response,
        Err(error) => return Check::fail(what, format!("POST {url} failed: {error}")),
    };
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        let code = body["errcode"].as_str().unwrap_or("no errcode");
        let password = password_field(matrix);
        let fix = match code {
            "M_FORBIDDEN" => format!("fix {password} (or channels.matrix.user_id)"),
            "M_LIMIT_EXCEEDED" => "the homeserver limits logins; try again in a minute".to_owned(),
            "M_USER_DEACTIVATED" => "the account is deactivated; use another".to_owned(),
            _ => format!("check channels.matrix.user_id and {password}"),
        };
        return Check::fail(
            what,
            format!("the password login was refused ({status}, {code}); {fix}"),
        );
    }
    let Some(token) = body["access_token"].as_str() else {
        return Check::fail(what, format!("POST {url} gave no access_token"));
    };
    let logout = format!("{base}/_matrix/client/v3/logout");
    match client
        .post(&logout)
        .bearer_auth(token)
        .json(&serde_json::json!({}))
        .send()
        .await
    {
        Ok(response) if response.status().is_success() => Check::ok(what),
        Ok(response) => Check::fail(
            what,
            format!(
                "the password works, but logging doctor's device out answered {}; remove the \
                 device {DOCTOR_DEVICE} from the account in your client",
                response.status()
            ),
        ),
        Err(error) => Check::fail(
            what,
            format!(
                "the password works, but logging doctor's device out failed: {error}; remove \
                 the device {DOCTOR_DEVICE} from the account in your client"
            ),
        ),
    }
}

/// The access token is accepted and belongs to `channels.matrix.user_id`.
async fn matrix_whoami(client: &reqwest::Client, matrix: &MatrixConfig) -> Check {
    let what = format!("matrix login {}", matrix.user_id);
    let url = format!(
        "{}/_matrix/client/v3/account/whoami",
        matrix.homeserver.trim_end_matches('/')
    );
    let response = client
        .get(&url)
        .bearer_auth(matrix.access_token.expose())
        .send()
        .await;
    let response = match response {
        Ok(response) => response,
        Err(error) => return Check::fail(what, format!("GET {url} failed: {error}")),
    };
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        let code = body["errcode"].as_str().unwrap_or("no errcode");
        return Check::fail(
            what,
            format!(
                "the access token was refused ({status}, {code}); get a new one and set \
                 channels.matrix.access_token"
            ),
        );
    }
    match body["user_id"].as_str() {
        Some(user) if user == matrix.user_id => Check::ok(what),
        Some(user) => Check::fail(
            what,
            format!(
                "the access token belongs to {user}, not {}; fix channels.matrix.user_id or the token",
                matrix.user_id
            ),
        ),
        None => Check::fail(what, format!("GET {url} gave no user_id")),
    }
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

/// What to say of a listen address other machines can reach: the API is the owner's, guarded
/// by its token alone there (fine in a container behind a published loopback port).
pub fn exposure(addr: std::net::SocketAddr) -> Option<&'static str> {
    (!addr.ip().is_loopback()).then_some(
        "reachable from other machines, guarded by the token alone; use 127.0.0.1 \
         unless a container or proxy needs it",
    )
}

/// The gateway's listen address: free, or already a squidbot gateway answering `/healthz`.
async fn listen_check(config: &Config) -> Check {
    let addr = config.gateway.http.listen;
    let what = match exposure(addr) {
        Some(warning) => format!("http listen {addr} (warning: {warning})"),
        None => format!("http listen {addr}"),
    };
    match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => {
            drop(listener);
            Check::ok(format!("{what} (free)"))
        }
        Err(bind_error) => {
            let url = format!("http://{addr}/healthz");
            let client = reqwest::Client::builder().timeout(PROBE_TIMEOUT).build();
            let healthy = match client {
                Ok(client) => match client.get(&url).send().await {
                    Ok(response) => response.status().is_success(),
                    Err(_) => false,
                },
                Err(_) => false,
            };
            if healthy {
                Check::ok(format!("{what} (a gateway is already running there)"))
            } else {
                Check::fail(
                    what,
                    format!(
                        "cannot bind: {bind_error} (stop what uses it, or change gateway.http.listen)"
                    ),
                )
            }
        }
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
