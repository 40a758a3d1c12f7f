//! Semantic checks of a deserialized configuration, and resolution of its secrets.
//!
//! serde has already rejected unknown fields and wrong types; this module checks what types
//! cannot say: that every pool, model and provider named exists, that numbers are in range, that
//! times, zones, URLs and required channel fields are valid. It collects every problem instead of
//! stopping at the first, so one edit-and-retry fixes the whole file.

use super::check::{ChannelSettings, Checker, Needed, unknown};
use super::index::LineIndex;
use super::secret::EnvLookup;
use super::{Config, LlmConfig, Problem};

/// What validation found.
pub(crate) struct Findings {
    /// What stops every command, in file order.
    pub(crate) problems: Vec<Problem>,
    /// What is worth saying but stops nothing.
    pub(crate) warnings: Vec<Problem>,
    /// What stops only the gateway (see [`super::LoadedConfig::check_gateway`]).
    pub(crate) gateway_only: Vec<Problem>,
    /// What stops whatever runs the agent (see [`super::LoadedConfig::check_agent`]).
    pub(crate) agent_only: Vec<Problem>,
}

/// Checks `config` and resolves its secrets in place.
pub(crate) fn validate(config: &mut Config, index: &LineIndex, env: EnvLookup<'_>) -> Findings {
    let mut checker = Checker::new(index, config.llm.pools.keys().cloned().collect());
    if config.agents.history_context_messages.is_some() {
        let message = "ignored: the history window is bounded by consolidation \
                       (agents.consolidation_threshold) instead";
        checker.warn("agents.history_context_messages", message);
    }
    resolve_secrets(config, &mut checker, env);
    check_llm(&config.llm, &mut checker);
    check_agents(config, &mut checker);
    check_tools(config, &mut checker);
    for channel in config.channels.sections() {
        channel.check(&mut checker, &config.owner);
    }
    check_rest(config, &mut checker);
    check_budgets(config, &mut checker);
    check_transcription(config, &mut checker);

    let mut problems = checker.problems;
    problems.sort_by_key(|problem| problem.line.unwrap_or(usize::MAX));
    Findings {
        problems,
        warnings: checker.warnings,
        gateway_only: checker.gateway_only,
        agent_only: checker.agent_only,
    }
}

/// Resolves every secret that will be used: providers always, the rest when their feature is on
/// (a disabled channel's missing variable must not block startup). An unset variable stops only
/// the commands that use its secret: the providers' and search keys whatever runs the agent, the
/// channels' and the HTTP API's secrets the gateway alone.
fn resolve_secrets(config: &mut Config, checker: &mut Checker<'_>, env: EnvLookup<'_>) {
    for (name, provider) in &mut config.llm.providers {
        let field = format!("llm.providers.{name}.api_key");
        let names = (provider.api_key_env.as_str(), field.as_str());
        checker.deferred_secret(&mut provider.api_key, names, env, Needed::ByAgent);
    }
    let search = &mut config.tools.web_search;
    if search.enabled {
        let names = (search.api_key_env.as_str(), "tools.web_search.api_key");
        checker.deferred_secret(&mut search.api_key, names, env, Needed::ByAgent);
    }
    for channel in config.channels.sections_mut() {
        channel.resolve_secrets(checker, env);
    }
    config.gateway.http.resolve_secrets(checker, env);
}

fn check_llm(llm: &LlmConfig, checker: &mut Checker<'_>) {
    let in_use = !llm.pools.is_empty() || !llm.providers.is_empty() || !llm.models.is_empty();
    if in_use && !llm.pools.contains_key(&llm.default_pool) {
        let message = unknown("pool", &llm.default_pool, llm.pools.keys());
        checker.report("llm.default_pool", message);
    }
    for (name, provider) in &llm.providers {
        checker.http_url(
            &provider.api_base,
            &format!("llm.providers.{name}.api_base"),
        );
    }
    for (name, model) in &llm.models {
        if !llm.providers.contains_key(&model.provider) {
            let message = unknown("provider", &model.provider, llm.providers.keys());
            checker.report(&format!("llm.models.{name}.provider"), message);
        }
        let field = format!("llm.models.{name}.model");
        checker.require(
            !model.model.is_empty(),
            &field,
            "must name the model id of the API",
        );
        let field = format!("llm.models.{name}.max_tokens");
        checker.positive(model.max_tokens.into(), &field);
        let field = format!("llm.models.{name}.max_context_tokens");
        checker.positive(model.max_context_tokens.into(), &field);
    }
    for (name, entries) in &llm.pools {
        let field = format!("llm.pools.{name}");
        checker.require(
            !entries.is_empty(),
            &field,
            "a pool needs at least one model",
        );
        for (position, entry) in entries.iter().enumerate() {
            if !llm.models.contains_key(&entry.model) {
                let message = unknown("model", &entry.model, llm.models.keys());
                checker.report(&format!("llm.pools.{name}[{position}]"), message);
            }
        }
    }
    let timeouts = &llm.timeouts;
    checker.positive(timeouts.connect_seconds, "llm.timeouts.connect_seconds");
    checker.positive(
        timeouts.first_byte_seconds,
        "llm.timeouts.first_byte_seconds",
    );
    checker.positive(timeouts.idle_seconds, "llm.timeouts.idle_seconds");
    checker.positive(timeouts.total_seconds, "llm.timeouts.total_seconds");
    checker.require(
        llm.retry.base_delay_ms <= llm.retry.max_delay_ms,
        "llm.retry.base_delay_ms",
        "must not exceed llm.retry.max_delay_ms",
    );
}

fn check_agents(config: &Config, checker: &mut Checker<'_>) {
    let agents = &config.agents;
    checker.pool_ref(&agents.consolidation_pool, "agents.consolidation_pool");
    if agents.keep_recent == 0 {
        checker.report("agents.keep_recent", "must be greater than 0");
    } else if agents.keep_recent >= agents.consolidation_threshold {
        let message = format!(
            "must be less than agents.consolidation_threshold ({})",
            agents.consolidation_threshold
        );
        checker.report("agents.keep_recent", message);
    }
    let limit = u64::try_from(agents.summary_word_limit).unwrap_or(u64::MAX);
    checker.positive(limit, "agents.summary_word_limit");

    agents.heartbeat.check(checker, &config.owner);
}

fn check_tools(config: &Config, checker: &mut Checker<'_>) {
    let tools = &config.tools;
    checker.positive(tools.shell.timeout_seconds, "tools.shell.timeout_seconds");
    let field = "tools.shell.approval_timeout_seconds";
    checker.positive(tools.shell.approval_timeout_seconds, field);
    for (position, entry) in tools.shell.allow.iter().flatten().enumerate() {
        let field = format!("tools.shell.allow[{position}]");
        checker.require(!entry.trim().is_empty(), &field, "an entry names a command");
    }
    for (i, name) in tools.shell.env_passthrough.iter().enumerate() {
        checker.require(
            super::secret::is_env_name(name),
            &format!("tools.shell.env_passthrough[{i}]"),
            "must be an environment variable name",
        );
    }
    let search = &tools.web_search;
    if search.enabled {
        match search.provider {
            super::WebSearchProvider::Brave => checker.require(
                !search.api_key.is_empty(),
                "tools.web_search.api_key",
                "the brave provider needs an API key (api_key or api_key_env)",
            ),
            super::WebSearchProvider::Searxng => {
                checker.http_url(&search.url, "tools.web_search.url");
            }
            super::WebSearchProvider::Duckduckgo => {}
        }
    }
    for (name, server) in &tools.mcp_servers {
        match server.transport {
            super::McpTransport::Stdio => checker.require(
                !server.command.is_empty(),
                &format!("tools.mcp_servers.{name}.command"),
                "a stdio MCP server needs a command",
            ),
            super::McpTransport::Http => {
                checker.http_url(&server.url, &format!("tools.mcp_servers.{name}.url"));
            }
        }
    }
    let spawn = &tools.spawn;
    if spawn.enabled {
        let max = u64::try_from(spawn.max_concurrent).unwrap_or(u64::MAX);
        checker.positive(max, "tools.spawn.max_concurrent");
    }
    for (name, profile) in &spawn.profiles {
        let field = format!("tools.spawn.profiles.{name}.pool");
        checker.pool_ref(&profile.pool, &field);
    }
}

fn check_budgets(config: &Config, checker: &mut Checker<'_>) {
    let budgets = &config.budgets;
    if !(budgets.daily_cost.is_finite() && budgets.daily_cost >= 0.0) {
        checker.report(
            "budgets.daily_cost",
            "must be a number of at least 0 (0: no limit)",
        );
    }
    if !budgets.timezone.trim().is_empty()
        && let Err(error) = crate::zone::Zone::parse(&budgets.timezone)
    {
        checker.report("budgets.timezone", error.to_string());
    }
    for (name, model) in &config.llm.models {
        let Some(price) = &model.price else { continue };
        let prices = [
            ("input", Some(price.input)),
            ("output", Some(price.output)),
            ("cached_input", price.cached_input),
            ("cache_write", price.cache_write),
        ];
        for (key, value) in prices {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                let field = format!("llm.models.{name}.price.{key}");
                checker.report(&field, "must be a price of at least 0 per million tokens");
            }
        }
    }
}

fn check_transcription(config: &Config, checker: &mut Checker<'_>) {
    let Some(transcription) = &config.transcription else {
        return;
    };
    let providers = &config.llm.providers;
    if transcription.provider.is_empty() {
        checker.report(
            "transcription.provider",
            "name the provider (a key of llm.providers) whose api_base and key are used",
        );
    } else if let Some(provider) = providers.get(&transcription.provider) {
        checker.require(
            provider.api != super::ProviderApi::Anthropic,
            "transcription.provider",
            "Anthropic's API has no /audio/transcriptions; name an OpenAI-compatible provider",
        );
    } else {
        let message = unknown("provider", &transcription.provider, providers.keys());
        checker.report("transcription.provider", message);
    }
    checker.require(
        !transcription.model.trim().is_empty(),
        "transcription.model",
        "name the model, e.g. whisper-1 (OpenAI) or whisper-large-v3 (Groq)",
    );
    checker.positive(transcription.max_bytes, "transcription.max_bytes");
    checker.positive(transcription.max_seconds, "transcription.max_seconds");
    checker.positive(
        transcription.timeout_seconds,
        "transcription.timeout_seconds",
    );
    let price = transcription.price_per_minute;
    if !(price.is_finite() && price >= 0.0) {
        checker.report(
            "transcription.price_per_minute",
            "must be a price of at least 0 per minute of audio",
        );
    }
}

fn check_rest(config: &Config, checker: &mut Checker<'_>) {
    let sessions = u64::try_from(config.gateway.max_parallel_sessions).unwrap_or(u64::MAX);
    checker.positive(sessions, "gateway.max_parallel_sessions");
    for (position, alias) in config.owner.aliases.iter().enumerate() {
        let field = format!("owner.aliases[{position}]");
        checker.require(
            !alias.address.is_empty(),
            &field,
            "the address must not be empty",
        );
    }
}
