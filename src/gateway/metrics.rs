//! The gateway's Prometheus metrics, defined once so that `/metrics` and the logs agree.
//!
//! Counters and the turn-latency histogram live in one [`Metrics`] value shared by the router,
//! the supervisor and the accounting layer of the LLM clients (as its `CallObserver`); `/metrics` renders them in the
//! OpenMetrics text format with `prometheus-client`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::accounting::layer::CallObserver;
use crate::accounting::ledger::UsageRecord;
use crate::accounting::price::hit_rate;
use crate::gateway::liveness::Pulse;

/// Declares a one-label set, so every family gets a label name that says what it counts.
macro_rules! label {
    ($type:ident, $field:ident) => {
        #[doc = concat!("The `", stringify!($field), "` label.")]
        #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
        pub struct $type {
            $field: String,
        }

        impl $type {
            fn of(value: &str) -> Self {
                Self {
                    $field: value.to_owned(),
                }
            }
        }
    };
}

label!(Outcome, outcome);
label!(Model, model);
label!(ToolName, tool);
label!(ChannelName, channel);
label!(ConsolidationResult, result);

/// The labels of the token counter: which model, for what, which kind of token.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    model: String,
    purpose: String,
    /// `prompt`, `completion`, `cached` (read from the provider's cache) or `cache_write`
    /// (written to it); cache reads and writes are also counted as prompt tokens.
    kind: &'static str,
}

/// The labels of the cost counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CostLabels {
    model: String,
    purpose: String,
}

/// Every metric the gateway exports.
pub struct Metrics {
    registry: Registry,
    turns: Family<Outcome, Counter>,
    turn_seconds: Histogram,
    llm_calls: Family<Model, Counter>,
    llm_failures: Family<Model, Counter>,
    consolidations: Family<ConsolidationResult, Counter>,
    tool_calls: Family<ToolName, Counter>,
    channel_restarts: Family<ChannelName, Counter>,
    channel_inbound_age: Family<ChannelName, Gauge<f64, AtomicU64>>,
    channel_round_age: Family<ChannelName, Gauge<f64, AtomicU64>>,
    channel_stalled: Family<ChannelName, Gauge>,
    llm_tokens: Family<TokenLabels, Counter>,
    llm_cost: Family<CostLabels, Counter<f64, AtomicU64>>,
    llm_cache_hit: Family<Model, Gauge<f64, AtomicU64>>,
    /// Prompt and cached tokens per model since start, which the hit ratio is computed from
    /// (std mutex: held for one addition, never across an await).
    cache_sums: Mutex<HashMap<String, (u64, u64)>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("squidbot");
        let turns = Family::<Outcome, Counter>::default();
        registry.register(
            "turns",
            "Turns finished, by outcome (replied, failed, cancelled, dropped)",
            turns.clone(),
        );
        let buckets = [
            0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
        ];
        let turn_seconds = Histogram::new(buckets);
        registry.register(
            "turn_duration_seconds",
            "Time from a turn's start to its reply",
            turn_seconds.clone(),
        );
        let llm_calls = Family::<Model, Counter>::default();
        registry.register("llm_calls", "LLM requests, by model", llm_calls.clone());
        let llm_failures = Family::<Model, Counter>::default();
        registry.register(
            "llm_failures",
            "Failed LLM requests, by model",
            llm_failures.clone(),
        );
        let consolidations = Family::<ConsolidationResult, Counter>::default();
        registry.register(
            "consolidations",
            "Consolidation attempts, by result (done, failed)",
            consolidations.clone(),
        );
        let tool_calls = Family::<ToolName, Counter>::default();
        registry.register("tool_calls", "Tool calls, by tool", tool_calls.clone());
        let channel_restarts = Family::<ChannelName, Counter>::default();
        registry.register(
            "channel_restarts",
            "Channel task restarts, by channel",
            channel_restarts.clone(),
        );
        let channel_inbound_age = Family::<ChannelName, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "channel_last_inbound_age_seconds",
            "Seconds since the channel's last inbound event (absent until one arrives)",
            channel_inbound_age.clone(),
        );
        let channel_round_age = Family::<ChannelName, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "channel_last_round_age_seconds",
            "Seconds since the channel's last successful sync, IDLE or poll round (absent until one succeeds)",
            channel_round_age.clone(),
        );
        let channel_stalled = Family::<ChannelName, Gauge>::default();
        registry.register(
            "channel_stalled",
            "1 when no round of the channel succeeded within its limit (then /readyz fails)",
            channel_stalled.clone(),
        );
        let llm_tokens = Family::<TokenLabels, Counter>::default();
        registry.register(
            "llm_tokens",
            "LLM tokens by model, purpose and kind (prompt, completion, cached, cache_write), as reported by the provider or estimated",
            llm_tokens.clone(),
        );
        let llm_cost = Family::<CostLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "llm_cost",
            "LLM cost by model and purpose, in the currency of the configured prices",
            llm_cost.clone(),
        );
        let llm_cache_hit = Family::<Model, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "llm_cache_hit_ratio",
            "Share of this process's prompt tokens each model read from the provider's cache (0 to 1)",
            llm_cache_hit.clone(),
        );
        for outcome in ["replied", "failed", "cancelled", "dropped"] {
            let _ = turns.get_or_create(&Outcome::of(outcome));
        }
        for result in ["done", "failed"] {
            let _ = consolidations.get_or_create(&ConsolidationResult::of(result));
        }
        Self {
            registry,
            turns,
            turn_seconds,
            llm_calls,
            llm_failures,
            consolidations,
            tool_calls,
            channel_restarts,
            channel_inbound_age,
            channel_round_age,
            channel_stalled,
            llm_tokens,
            llm_cost,
            llm_cache_hit,
            cache_sums: Mutex::default(),
        }
    }

    /// Sets a channel's pulse gauges to `pulse`, read just before rendering (ages grow between
    /// events, so they are computed when scraped, not when something happens).
    pub fn channel_pulse(&self, channel: &str, pulse: &Pulse) {
        let label = ChannelName::of(channel);
        if let Some(age) = pulse.last_inbound {
            self.channel_inbound_age
                .get_or_create(&label)
                .set(age.as_secs_f64());
        }
        if let Some(age) = pulse.last_round {
            self.channel_round_age
                .get_or_create(&label)
                .set(age.as_secs_f64());
        }
        self.channel_stalled
            .get_or_create(&label)
            .set(i64::from(pulse.stalled));
    }

    /// Starts a channel's restart counter at zero, so the series exists before any failure.
    pub fn register_channel(&self, channel: &str) {
        let _ = self
            .channel_restarts
            .get_or_create(&ChannelName::of(channel));
    }

    /// Starts a tool's call counter at zero.
    pub fn register_tool(&self, tool: &str) {
        let _ = self.tool_calls.get_or_create(&ToolName::of(tool));
    }

    /// Records a finished turn.
    pub fn turn(&self, outcome: &str, duration: Duration) {
        self.turns.get_or_create(&Outcome::of(outcome)).inc();
        self.turn_seconds.observe(duration.as_secs_f64());
    }

    /// Records a consolidation attempt.
    pub fn consolidation(&self, result: &str) {
        self.consolidations
            .get_or_create(&ConsolidationResult::of(result))
            .inc();
    }

    /// Records a tool call.
    pub fn tool_call(&self, tool: &str) {
        self.tool_calls.get_or_create(&ToolName::of(tool)).inc();
    }

    /// Records a channel restart.
    pub fn channel_restart(&self, channel: &str) {
        self.channel_restarts
            .get_or_create(&ChannelName::of(channel))
            .inc();
    }

    /// The metrics in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            tracing::error!("Encoding metrics failed.");
        }
        out
    }
}

impl Metrics {
    /// Shows `model`'s call and failure counters at zero before its first call, so a
    /// dashboard sees every configured model from the start.
    pub fn register_model(&self, model: &str) {
        let _ = self.llm_calls.get_or_create(&Model::of(model));
        let _ = self.llm_failures.get_or_create(&Model::of(model));
    }
}

impl CallObserver for Metrics {
    fn attempt(&self, model: &str) {
        self.llm_calls.get_or_create(&Model::of(model)).inc();
    }

    fn failed(&self, model: &str) {
        self.llm_failures.get_or_create(&Model::of(model)).inc();
    }

    fn recorded(&self, record: &UsageRecord) {
        let purpose = record.purpose.as_str();
        for (kind, tokens) in [
            ("prompt", record.prompt_tokens),
            ("completion", record.completion_tokens),
            ("cached", record.cached_tokens),
            ("cache_write", record.cache_written_tokens),
        ] {
            let labels = TokenLabels {
                model: record.model.clone(),
                purpose: purpose.to_owned(),
                kind,
            };
            self.llm_tokens.get_or_create(&labels).inc_by(tokens);
        }
        let labels = CostLabels {
            model: record.model.clone(),
            purpose: purpose.to_owned(),
        };
        self.llm_cost.get_or_create(&labels).inc_by(record.cost);
        let ratio = {
            let mut sums = self.cache_sums.lock().unwrap_or_else(|p| p.into_inner());
            let (prompt, cached) = sums.entry(record.model.clone()).or_default();
            *prompt += record.prompt_tokens;
            *cached += record.cached_tokens;
            hit_rate(*cached, *prompt)
        };
        self.llm_cache_hit
            .get_or_create(&Model::of(&record.model))
            .set(ratio);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family() {
        let metrics = Metrics::new();
        metrics.turn("replied", Duration::from_millis(3));
        metrics.tool_call("memory_write");
        metrics.channel_restart("chaos");
        metrics.consolidation("done");
        let text = metrics.render();
        for needle in [
            "squidbot_turns_total{outcome=\"replied\"} 1",
            "squidbot_turn_duration_seconds_count 1",
            "squidbot_tool_calls_total{tool=\"memory_write\"} 1",
            "squidbot_channel_restarts_total{channel=\"chaos\"} 1",
            "squidbot_consolidations_total{result=\"done\"} 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }

    #[test]
    fn cache_reads_writes_and_the_hit_ratio_are_exported() {
        let metrics = Metrics::new();
        let record = |prompt: u64, cached: u64, written: u64| UsageRecord {
            time: chrono::Utc::now(),
            session: None,
            purpose: crate::core::ports::usage::Purpose::Turn,
            pool: "default".into(),
            model: "m".into(),
            prompt_tokens: prompt,
            completion_tokens: 1,
            cached_tokens: cached,
            cache_written_tokens: written,
            cost: 0.0,
            estimated: false,
            audio_seconds: 0.0,
        };
        metrics.recorded(&record(1000, 0, 900));
        metrics.recorded(&record(1000, 900, 0));
        let text = metrics.render();
        for needle in [
            "squidbot_llm_tokens_total{model=\"m\",purpose=\"turn\",kind=\"cached\"} 900",
            "squidbot_llm_tokens_total{model=\"m\",purpose=\"turn\",kind=\"cache_write\"} 900",
            "squidbot_llm_cache_hit_ratio{model=\"m\"} 0.45",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
