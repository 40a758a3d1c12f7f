//! The checker every semantic check of the configuration reports through, and [`Problem`],
//! what it reports: a field, its line, and what is wrong.
//!
//! A leaf of the configuration (it names neither `Config` nor a section), so each channel's
//! folder can check its own settings with it (`src/channels/<name>/config.rs`) while the
//! configuration refers to those settings without an import cycle.

use std::fmt;

use super::index::LineIndex;
use super::owner::OwnerConfig;
use super::secret::{EnvLookup, Secret, resolve_secret};

/// One thing wrong with the configuration, located as precisely as the source allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line in the file, when the field appears in it (defaults have no line).
    pub line: Option<usize>,
    /// Dotted path of the field, e.g. `llm.pools.default[0]`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl Problem {
    /// A problem of `field` at `line`.
    pub(crate) fn new(
        line: Option<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            line,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "{line}: ")?;
        }
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A channel's settings as validation sees them. Each channel's folder implements it for its
/// section (`src/channels/<name>/config.rs`), so its checks live beside the code that reads the
/// settings; validation calls every section through [`super::ChannelsConfig`]'s list (and the
/// two sections kept where the original had them, `gateway.http` and `agents.heartbeat`).
pub(crate) trait ChannelSettings {
    /// Replaces its secrets by their values, or reports why it cannot; a section that is off
    /// leaves them alone (a disabled channel's missing variable must not stop anything).
    fn resolve_secrets(&mut self, _checker: &mut Checker<'_>, _env: EnvLookup<'_>) {}

    /// Reports what is wrong with its values (and warns of what is odd), with `owner` the
    /// owner's ids, some of which may be its own (`owner.<name>`).
    fn check(&self, _checker: &mut Checker<'_>, _owner: &OwnerConfig) {}
}

/// Collects problems, each placed at the line of its field (or nearest ancestor in the file).
pub(crate) struct Checker<'a> {
    index: &'a LineIndex,
    /// The names of the configured pools (`llm.pools`), which pool settings must name.
    pools: Vec<String>,
    /// What stops every command.
    pub(crate) problems: Vec<Problem>,
    /// What is worth saying but stops nothing.
    pub(crate) warnings: Vec<Problem>,
    /// Secrets only the gateway uses whose variables are not set: they stop the gateway, not
    /// `squidbot agent` or `cron list`.
    pub(crate) gateway_only: Vec<Problem>,
    /// Secrets only a running agent uses (the providers' keys, the search key) whose variables
    /// are not set: they stop `squidbot agent`, the gateway and doctor's model checks, not
    /// `squidbot status` or `cron list`.
    pub(crate) agent_only: Vec<Problem>,
}

/// Which commands an unset secret's variable stops (see [`Checker::deferred_secret`]).
#[derive(Clone, Copy)]
pub(crate) enum Needed {
    /// Only the gateway (the channels' credentials, the HTTP token).
    ByGateway,
    /// Whatever runs the agent (the providers' keys, the web search key).
    ByAgent,
}

impl<'a> Checker<'a> {
    /// A checker placing problems by `index`, with `pools` the configured pools' names.
    pub(crate) fn new(index: &'a LineIndex, pools: Vec<String>) -> Self {
        Self {
            index,
            pools,
            problems: Vec::new(),
            warnings: Vec::new(),
            gateway_only: Vec::new(),
            agent_only: Vec::new(),
        }
    }

    /// Reports `message` about `field`.
    pub(crate) fn report(&mut self, field: &str, message: impl Into<String>) {
        let line = self.index.line_of(field);
        self.problems.push(Problem::new(line, field, message));
    }

    /// Reports `field` unless `ok`.
    pub(crate) fn require(&mut self, ok: bool, field: &str, message: &str) {
        if !ok {
            self.report(field, message);
        }
    }

    /// Reports a zero `value` of `field`.
    pub(crate) fn positive(&mut self, value: u64, field: &str) {
        self.require(value > 0, field, "must be greater than 0");
    }

    /// Reports a `field` that is not an absolute http(s) URL.
    pub(crate) fn http_url(&mut self, url: &str, field: &str) {
        let ok = reqwest::Url::parse(url).is_ok_and(|parsed| {
            matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some()
        });
        if !ok {
            self.report(field, format!("{url:?} is not an http(s) URL"));
        }
    }

    /// Reports a non-empty pool reference `pool` that names no pool.
    pub(crate) fn pool_ref(&mut self, pool: &str, field: &str) {
        if !pool.is_empty() && !self.pools.iter().any(|known| known == pool) {
            let message = unknown("pool", pool, self.pools.iter());
            self.report(field, message);
        }
    }

    /// Says `message` about `field` without stopping anything.
    pub(crate) fn warn(&mut self, field: &str, message: impl Into<String>) {
        let line = self.index.line_of(field);
        self.warnings.push(Problem::new(line, field, message));
    }

    /// [`Self::deferred_secret`] for a secret only the gateway uses.
    pub(crate) fn gateway_secret(
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
    /// `gateway_only` or `agent_only` and the secret left empty (never
    /// the `${VAR}` text itself), so `squidbot status` still shows the configuration.
    pub(crate) fn deferred_secret(
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
    pub(crate) fn deferred(&self, field: &str) -> bool {
        self.gateway_only
            .iter()
            .any(|problem| problem.field.strip_suffix("_env").unwrap_or(&problem.field) == field)
    }
}

/// `unknown <what> "name" (known: a, b)`, the names `known` in their order.
pub(crate) fn unknown<'n>(
    what: &str,
    name: &str,
    known: impl Iterator<Item = &'n String>,
) -> String {
    let names: Vec<&str> = known.map(String::as_str).collect();
    let names = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    format!("unknown {what} {name:?} (known: {names})")
}
