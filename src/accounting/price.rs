//! [`Price`], a model's prices and what one call costs at them, and [`Totals`], the sums of
//! ledger records that every view shows (`squidbot usage`, `/status`, the budgets).
//!
//! Cache reads and writes are priced and summed apart from fresh prompt tokens: a provider's
//! prompt count includes both, a read costs a fraction of fresh input, and a write (Anthropic)
//! more than it, so a bill is only right when the three are told apart.

use serde::Serialize;

use crate::accounting::ledger::UsageRecord;
use crate::core::ports::usage::TokenUsage;

/// A model's prices per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Price {
    /// Per million prompt tokens neither read from nor written to the cache.
    pub input: f64,
    /// Per million completion tokens.
    pub output: f64,
    /// Per million prompt tokens read from the cache.
    pub cached_input: f64,
    /// Per million prompt tokens written to the cache.
    pub cache_write: f64,
}

impl Price {
    /// The cost of `usage` at these prices. The prompt counts every input token, so the cache
    /// reads and writes are taken out of it (never more than it holds) and priced apart.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        let cached = usage.cached.min(usage.prompt);
        let written = usage.cache_written.min(usage.prompt - cached);
        let fresh = usage.prompt - cached - written;
        (fresh as f64 * self.input
            + cached as f64 * self.cached_input
            + written as f64 * self.cache_write
            + usage.completion as f64 * self.output)
            / 1_000_000.0
    }
}

/// Sums of some records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Calls answered.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cached_tokens: u64,
    /// Prompt tokens written to the cache.
    pub cache_written_tokens: u64,
    /// The share of the prompt tokens read from the cache (0 to 1): derived from the sums,
    /// kept in step by `add` and `merge` so every view (`usage --json`, `/status`) shows it.
    pub cache_hit_rate: f64,
    /// Cost.
    pub cost: f64,
    /// Calls whose tokens are estimates.
    pub estimated_calls: u64,
}

impl Totals {
    /// Adds one record.
    pub fn add(&mut self, record: &UsageRecord) {
        self.calls += 1;
        self.prompt_tokens += record.prompt_tokens;
        self.completion_tokens += record.completion_tokens;
        self.cached_tokens += record.cached_tokens;
        self.cache_written_tokens += record.cache_written_tokens;
        self.cost += record.cost;
        self.estimated_calls += u64::from(record.estimated);
        self.cache_hit_rate = hit_rate(self.cached_tokens, self.prompt_tokens);
    }

    /// Adds the sums of `other`.
    pub fn merge(&mut self, other: &Totals) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cache_written_tokens += other.cache_written_tokens;
        self.cost += other.cost;
        self.estimated_calls += other.estimated_calls;
        self.cache_hit_rate = hit_rate(self.cached_tokens, self.prompt_tokens);
    }

    /// Prompt plus completion tokens.
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// The share of `prompt` tokens read from the cache, 0 when there were none.
pub fn hit_rate(cached: u64, prompt: u64) -> f64 {
    if prompt == 0 {
        0.0
    } else {
        cached.min(prompt) as f64 / prompt as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_prices_cache_reads_and_writes_apart() {
        let price = Price {
            input: 3.0,
            output: 15.0,
            cached_input: 0.3,
            cache_write: 3.75,
        };
        let check = |cached: u64, cache_written: u64, expected: f64| {
            let usage = TokenUsage {
                prompt: 1_000_000,
                completion: 100_000,
                cached,
                cache_written,
            };
            let cost = price.cost(&usage);
            assert!((cost - expected).abs() < 1e-12, "{usage:?}: {cost}");
        };
        check(400_000, 0, 0.6 * 3.0 + 0.4 * 0.3 + 0.1 * 15.0);
        check(
            400_000,
            500_000,
            0.1 * 3.0 + 0.4 * 0.3 + 0.5 * 3.75 + 0.1 * 15.0,
        );
        // Reported figures that exceed the prompt are capped by it, reads first.
        check(700_000, 700_000, 0.7 * 0.3 + 0.3 * 3.75 + 0.1 * 15.0);
    }

    #[test]
    fn the_hit_rate_is_the_cached_share_of_the_prompt() {
        assert_eq!(hit_rate(5, 0), 0.0);
        assert_eq!(hit_rate(1, 4), 0.25);
        assert_eq!(hit_rate(9, 4), 1.0);
    }
}
