//! Semantic checks of a deserialized configuration, and resolution of its secrets.
//!
//! serde has already rejected unknown fields and wrong types; this module checks what types
//! cannot say: that every pool, model and provider named exists, that numbers are in range, that
//! times, zones, URLs and required channel fields are valid. It collects every problem instead of
//! stopping at the first, so one edit-and-retry fixes the whole file.

use std::collections::BTreeMap;

use super::index::LineIndex;
use super::schema::parse_hhmm;
use super::secret::{EnvLookup, resolve_secret};
use super::{Config, LlmConfig, Problem, Secret};

/// Collects problems, each placed at the line of its field (or nearest ancestor in the file).
struct Checker<'a> {
    index: &'a LineIndex,
    problems: Vec<Problem>,
    /// Secrets only the gateway uses whose variables are not set: they stop the gateway, not
    /// `squidbot agent` or `cron list`.
    gateway_only: Vec<Problem>,
    /// Secrets only a running agent uses (the providers' keys, the search key) whose variables
    /// are not set: they stop `squidbot agent`, the gateway and doctor's model checks, not
    /// `squidbot status` or `cron list`.
    agent_only: Vec<Problem>,
}

/// Which commands an unset secret's variable stops (see [`Checker::deferred_secret`]).
#[derive(Clone, Copy)]
enum Needed {
    /// Only the gateway (the channels' credentials, the HTTP token).
    ByGateway,
    /// Whatever runs the agent (the providers' keys, the web search key).
    ByAgent,
}

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

impl Checker<'_> {
    fn report(&mut self, field: &str, message: impl Into<String>) {
        let line = self.index.line_of(field);
        self.problems.push(Problem::new(line, field, message));
    }

    /// Reports `field` unless `ok`.
    fn require(&mut self, ok: bool, field: &str, message: &str) {
        if !ok {
            self.report(field, message);
        }
    }

    /// Reports a zero `value` of `field`.
    fn positive(&mut self, value: u64, field: &str) {
        self.require(value > 0, field, "must be greater than 0");
    }

    /// Reports a `field` that is not an absolute http(s) URL.
    fn http_url(&mut self, url: &str, field: &str) {
        let ok = reqwest::Url::parse(url).is_ok_and(|parsed| {
            matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some()
        });
        if !ok {
            self.report(field, format!("{url:?} is not an http(s) URL"));
        }
    }

    /// Reports a non-empty pool reference `pool` that names no pool.
    fn pool_ref(&mut self, llm: &LlmConfig, pool: &str, field: &str) {
        if !pool.is_empty() && !llm.pools.contains_key(pool) {
            self.report(field, unknown("pool", pool, &llm.pools));
        }
    }

    /// [`Self::deferred_secret`] for a secret only the gateway uses.
    fn gateway_secret(
        &mut self,
        secret: &mut Secret,
        env_name: &str,
        field: &str,
        env: EnvLookup<'_>,
    ) {
        self.deferred_secret(secret, (env_name, field), env, Needed::ByGateway);
    }

    /// Replaces `secret` by its resolved value, or reports why it cannot be resolved; for a
    /// secret some commands do without, an unset variable is kept for
    /// [`Findings::gateway_only`] or [`Findings::agent_only`] and the secret left empty (never
    /// the `${VAR}` text itself), so `squidbot status` still shows the configuration.
    fn deferred_secret(
        &mut self,
        secret: &mut Secret,
        (env_name, field): (&str, &str),
        env: EnvLookup<'_>,
        needed: Needed,
    ) {
        match resolve_secret(secret, env_name, env) {
            Ok(value) => *secret = value,
            Err(error) if error.unset => {
                let field = if error.in_env_field {
                    format!("{field}_env")
                } else {
                    field.to_owned()
                };
                let line = self.index.line_of(&field);
                let list = match needed {
                    Needed::ByGateway => &mut self.gateway_only,
                    Needed::ByAgent => &mut self.agent_only,
                };
                list.push(Problem::new(line, field, error.message));
                *secret = Secret::default();
            }
            Err(error) if error.in_env_field => self.report(&format!("{field}_env"), error.message),
            Err(error) => self.report(field, error.message),
        }
    }

    /// Whether `field` (or its `*_env` sibling) names a gateway secret whose variable is unset.
    fn deferred(&self, field: &str) -> bool {
        self.gateway_only
            .iter()
            .any(|problem| problem.field.strip_suffix("_env").unwrap_or(&problem.field) == field)
    }
}

/// `unknown <what> "name" (known: a, b)`.
fn unknown<V>(what: &str, name: &str, known: &BTreeMap<String, V>) -> String {
    let names: Vec<&str> = known.keys().map(String::as_str).collect();
    let names = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    format!("unknown {what} {name:?} (known: {names})")
}

/// Checks `config` and resolves its secrets in place.
pub(crate) fn validate(config: &mut Config, index: &LineIndex, env: EnvLookup<'_>) -> Findings {
    let mut checker = Checker {
        index,
        problems: Vec::new(),
        gateway_only: Vec::new(),
        agent_only: Vec::new(),
    };
    resolve_secrets(config, &mut checker, env);
    check_llm(&config.llm, &mut checker);
    check_agents(config, &mut checker);
    check_tools(config, &mut checker);
    check_channels(config, &mut checker);
    check_rest(config, &mut checker);
    check_budgets(config, &mut checker);
    check_transcription(config, &mut checker);

    let mut warnings = Vec::new();
    if config.agents.history_context_messages.is_some() {
        let field = "agents.history_context_messages";
        let message = "ignored: the history window is bounded by consolidation \
                       (agents.consolidation_threshold) instead";
        warnings.push(Problem::new(index.line_of(field), field, message));
    }
    let matrix = &config.channels.matrix;
    if matrix.enabled && matrix.allowlist.is_empty() {
        let field = "channels.matrix.allowlist";
        let message = "empty: nobody is answered; list the user ids that may talk to the bot \
                       (or \"*\" for everyone)";
        warnings.push(Problem::new(index.line_of(field), field, message));
    }
    // Without an owner on a channel nobody there can approve a command, and the owner's own
    // DM is treated as someone else's: say so before the first question goes unanswered.
    let owner = &config.owner;
    let alias_on = |channel: &str| {
        owner
            .aliases
            .iter()
            .any(|alias| alias.channel.as_deref().is_none_or(|only| only == channel))
    };
    if matrix.enabled && owner.matrix.is_empty() && !alias_on("matrix") {
        let field = "owner.matrix";
        let message = "empty while channels.matrix is on: nobody in Matrix can approve a \
                       command or gets the private memory, the owner's DM included; set it to \
                       your Matrix id";
        warnings.push(Problem::new(index.line_of(field), field, message));
    }
    let email = &config.channels.email;
    if email.enabled && owner.email.is_empty() && !alias_on("email") {
        let field = "owner.email";
        let message = "empty while channels.email is on: no mail can approve a command or gets \
                       the private memory; set it to your mail address";
        warnings.push(Problem::new(index.line_of(field), field, message));
    }
    if email.enabled && !owner.email.is_empty() && email.authserv_id.trim().is_empty() {
        let field = "channels.email.authserv_id";
        let message = "empty while owner.email is set: no mail counts as the owner's (a From \
                       header proves nothing); set it to the authserv-id your mail server \
                       writes in Authentication-Results";
        warnings.push(Problem::new(index.line_of(field), field, message));
    }
    if email.enabled && email.allow_from.is_empty() {
        let field = "channels.email.allow_from";
        let message = "empty: no mail is answered; list the addresses or @domains that may \
                       write to the bot (or \"*\" for everyone)";
        warnings.push(Problem::new(index.line_of(field), field, message));
    }
    if email.enabled && (!email.tls || !email.tls_verify) {
        let field = if email.tls {
            "channels.email.tls_verify"
        } else {
            "channels.email.tls"
        };
        let message = "email credentials and mail are exposed to the network path";
        warnings.push(Problem::new(index.line_of(field), field, message));
    }
    let mut problems = checker.problems;
    problems.sort_by_key(|problem| problem.line.unwrap_or(usize::MAX));
    Findings {
        problems,
        warnings,
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
    let matrix = &mut config.channels.matrix;
    if matrix.enabled {
        let field = "channels.matrix.access_token";
        checker.gateway_secret(
            &mut matrix.access_token,
            &matrix.access_token_env,
            field,
            env,
        );
        let field = "channels.matrix.password";
        checker.gateway_secret(&mut matrix.password, &matrix.password_env, field, env);
        let field = "channels.matrix.recovery_key";
        checker.gateway_secret(
            &mut matrix.recovery_key,
            &matrix.recovery_key_env,
            field,
            env,
        );
        let field = "channels.matrix.store_passphrase";
        checker.gateway_secret(&mut matrix.store_passphrase, "", field, env);
    }
    let email = &mut config.channels.email;
    if email.enabled {
        let field = "channels.email.password";
        checker.gateway_secret(&mut email.password, &email.password_env, field, env);
    }
    let http = &mut config.gateway.http;
    if http.enabled {
        let field = "gateway.http.token";
        checker.gateway_secret(&mut http.token, &http.token_env, field, env);
    }
}

fn check_llm(llm: &LlmConfig, checker: &mut Checker<'_>) {
    let in_use = !llm.pools.is_empty() || !llm.providers.is_empty() || !llm.models.is_empty();
    if in_use && !llm.pools.contains_key(&llm.default_pool) {
        let message = unknown("pool", &llm.default_pool, &llm.pools);
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
            let message = unknown("provider", &model.provider, &llm.providers);
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
                let message = unknown("model", &entry.model, &llm.models);
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
    checker.pool_ref(
        &config.llm,
        &agents.consolidation_pool,
        "agents.consolidation_pool",
    );
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

    let heartbeat = &agents.heartbeat;
    checker.pool_ref(&config.llm, &heartbeat.pool, "agents.heartbeat.pool");
    let interval = heartbeat.interval_minutes.into();
    checker.positive(interval, "agents.heartbeat.interval_minutes");
    if parse_hhmm(&heartbeat.active_hours_start, false).is_none() {
        let message = format!(
            "{:?} is not a time HH:MM (00:00 to 23:59)",
            heartbeat.active_hours_start
        );
        checker.report("agents.heartbeat.active_hours_start", message);
    }
    if parse_hhmm(&heartbeat.active_hours_end, true).is_none() {
        let message = format!(
            "{:?} is not a time HH:MM (00:00 to 24:00)",
            heartbeat.active_hours_end
        );
        checker.report("agents.heartbeat.active_hours_end", message);
    }
    let zone = heartbeat.timezone.as_str();
    if !zone.trim().is_empty()
        && let Err(error) = crate::zone::Zone::parse(zone)
    {
        checker.report("agents.heartbeat.timezone", error.to_string());
    }
    if !heartbeat.target.is_empty() && !heartbeat.target.contains(':') {
        let message = format!("{:?} is not a session id <channel>:<key>", heartbeat.target);
        checker.report("agents.heartbeat.target", message);
    }
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
        checker.pool_ref(&config.llm, &profile.pool, &field);
    }
}

fn check_channels(config: &Config, checker: &mut Checker<'_>) {
    let matrix = &config.channels.matrix;
    if matrix.enabled {
        checker.http_url(&matrix.homeserver, "channels.matrix.homeserver");
        let user_ok = matrix.user_id.starts_with('@') && matrix.user_id.contains(':');
        let message = "must be a Matrix user id like @squidbot:example.org";
        checker.require(user_ok, "channels.matrix.user_id", message);
        let field = "channels.matrix.sync_timeout_seconds";
        checker.positive(matrix.sync_timeout_seconds, field);
        let login = !matrix.access_token.is_empty()
            || !matrix.password.is_empty()
            || checker.deferred("channels.matrix.access_token")
            || checker.deferred("channels.matrix.password");
        let message = "set access_token or password (or access_token_env / password_env)";
        checker.require(login, "channels.matrix.access_token", message);
        let message = "must not be empty";
        checker.require(
            !matrix.store_dir.trim().is_empty(),
            "channels.matrix.store_dir",
            message,
        );
    }
    let email = &config.channels.email;
    if email.enabled {
        let required = [
            (&email.imap_host, "channels.email.imap_host"),
            (&email.smtp_host, "channels.email.smtp_host"),
            (&email.username, "channels.email.username"),
        ];
        for (value, field) in required {
            checker.require(!value.is_empty(), field, "required when email is enabled");
        }
        let message = "set password or password_env";
        let field = "channels.email.password";
        checker.require(
            !email.password.is_empty() || checker.deferred(field),
            field,
            message,
        );
        let from_ok = email.from_address.contains('@');
        let message = "must be the bot's email address";
        checker.require(from_ok, "channels.email.from_address", message);
        checker.positive(email.imap_port.into(), "channels.email.imap_port");
        checker.positive(email.smtp_port.into(), "channels.email.smtp_port");
        let field = "channels.email.poll_interval_seconds";
        checker.positive(email.poll_interval_seconds, field);
        checker.positive(email.max_message_bytes, "channels.email.max_message_bytes");
        checker.positive(
            email.max_attachment_bytes,
            "channels.email.max_attachment_bytes",
        );
        let field = "channels.email.replies_per_hour";
        checker.positive(email.replies_per_hour.into(), field);
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
        let message = unknown("provider", &transcription.provider, providers);
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
    for (position, id) in config.owner.matrix.iter().enumerate() {
        let field = format!("owner.matrix[{position}]");
        let valid = id.starts_with('@') && id.contains(':');
        checker.require(valid, &field, "a Matrix user id looks like @name:server");
    }
    for (position, address) in config.owner.email.iter().enumerate() {
        let field = format!("owner.email[{position}]");
        checker.require(address.contains('@'), &field, "a mail address needs an @");
    }
}
