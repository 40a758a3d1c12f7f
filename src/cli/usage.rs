//! `squidbot usage`: the usage ledger summed by day, session, model, purpose or pool over a
//! period.
//!
//! Days are the owner's days (`budgets.timezone`, else `agents.heartbeat.timezone`), the same
//! days the daily budgets count, so the table and the budgets agree. It reads the ledger files
//! only, so it works beside a running gateway.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use chrono::{Days, NaiveDate, Utc};
use clap::{Args, ValueEnum};

use squidbot::accounting::budget::{Budgets, local_date};
use squidbot::accounting::ledger::UsageRecord;
use squidbot::accounting::meter::{MeterSettings, UsageMeter};
use squidbot::accounting::price::{Price, Totals};
use squidbot::config::Config;
use squidbot::core::ports::clock::Clock;
use squidbot::storage::UsageLedgerFile;
use squidbot::zone::Zone;

/// What the rows of the table are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Group {
    /// One row per day.
    Day,
    /// One row per session.
    Session,
    /// One row per model that answered.
    Model,
    /// One row per purpose (turn, consolidation, heartbeat, ...).
    Purpose,
    /// One row per pool.
    Pool,
}

/// `squidbot usage` arguments.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// What each row sums.
    #[arg(long, value_enum, default_value = "day")]
    by: Group,
    /// First day (YYYY-MM-DD, in the owner's zone); default: `--days` before today.
    #[arg(long, value_name = "DATE")]
    since: Option<NaiveDate>,
    /// Last day, included (YYYY-MM-DD); default: today.
    #[arg(long, value_name = "DATE")]
    until: Option<NaiveDate>,
    /// The last N days, today included, when `--since` is not given.
    #[arg(long, default_value_t = 30, value_name = "N")]
    days: u64,
    /// Print JSON (`{"rows": [...], "total": {...}}`) instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `squidbot usage`.
pub fn run(config_path: Option<&Path>, args: UsageArgs) -> Result<ExitCode> {
    let loaded = squidbot::config::load(config_path)?;
    let config = &loaded.config;
    let zone_name = config.budgets.zone_name(config);
    let zone = Zone::parse(zone_name).with_context(|| format!("time zone {zone_name:?}"))?;
    let today = local_date(&zone, Utc::now());
    let until = args.until.unwrap_or(today);
    let since = match args.since {
        Some(since) => since,
        None => until
            .checked_sub_days(Days::new(args.days.max(1) - 1))
            .unwrap_or(NaiveDate::MIN),
    };
    if since > until {
        bail!("--since {since} is after --until {until}");
    }
    let ledger = UsageLedgerFile::new(&loaded.home);
    let records = ledger.read_all()?;
    let rows = summarize(&records, &zone, since, until, args.by);
    let text = if args.json {
        let (rows, total) = rows;
        let rows: Vec<serde_json::Value> = rows
            .into_iter()
            .map(|(key, totals)| serde_json::json!({"key": key, "totals": totals}))
            .collect();
        format!(
            "{}\n",
            serde_json::json!({"since": since, "until": until, "timezone": zone.to_string(),
                "rows": rows, "total": total})
        )
    } else {
        table(&rows.0, &rows.1, args.by, since, until, &zone)
    };
    squidbot::console::out(format_args!("{text}"))?;
    Ok(ExitCode::SUCCESS)
}

/// The records from `since` to `until` (owner's days, inclusive) summed by `by`, and the total.
fn summarize(
    records: &[UsageRecord],
    zone: &Zone,
    since: NaiveDate,
    until: NaiveDate,
    by: Group,
) -> (BTreeMap<String, Totals>, Totals) {
    let mut rows: BTreeMap<String, Totals> = BTreeMap::new();
    let mut total = Totals::default();
    for record in records {
        let day = local_date(zone, record.time);
        if day < since || day > until {
            continue;
        }
        let key = match by {
            Group::Day => day.to_string(),
            Group::Session => record.session.clone().unwrap_or_else(|| "-".to_owned()),
            Group::Model => record.model.clone(),
            Group::Purpose => record.purpose.as_str().to_owned(),
            Group::Pool => record.pool.clone(),
        };
        rows.entry(key).or_default().add(record);
        total.add(record);
    }
    (rows, total)
}

/// The table: a header, one line per row, the total; `~` marks rows with estimated calls.
fn table(
    rows: &BTreeMap<String, Totals>,
    total: &Totals,
    by: Group,
    since: NaiveDate,
    until: NaiveDate,
    zone: &Zone,
) -> String {
    let mut out = format!("Usage from {since} to {until} ({zone}):\n");
    if rows.is_empty() {
        out.push_str("No LLM calls recorded.\n");
        return out;
    }
    let label = format!("{by:?}").to_lowercase();
    let width = rows
        .keys()
        .map(String::len)
        .chain([label.len(), 5])
        .max()
        .unwrap_or(5);
    let _ = writeln!(
        out,
        "{label:<width$}  {:>7}  {:>12}  {:>12}  {:>12}  {:>5}  {:>12}  {:>12}  {:>10}",
        "calls", "prompt", "cache read", "cache write", "hit", "completion", "total", "cost"
    );
    let line = |out: &mut String, key: &str, t: &Totals| {
        let mark = if t.estimated_calls > 0 { "~" } else { "" };
        let _ = writeln!(
            out,
            "{key:<width$}  {:>7}  {:>12}  {:>12}  {:>12}  {:>4.0}%  {:>12}  {:>12}  {:>10.4}{mark}",
            t.calls,
            t.prompt_tokens,
            t.cached_tokens,
            t.cache_written_tokens,
            t.cache_hit_rate * 100.0,
            t.completion_tokens,
            t.tokens(),
            t.cost
        );
    };
    for (key, totals) in rows {
        line(&mut out, key, totals);
    }
    line(&mut out, "total", total);
    if total.estimated_calls > 0 {
        let _ = writeln!(
            out,
            "~ {} of {} calls have estimated tokens (the provider reported none).",
            total.estimated_calls, total.calls
        );
    }
    out
}

/// The usage meter of `config`: the ledger under `home`, the models' prices, the budgets in
/// the owner's zone.
pub fn usage_meter(config: &Config, home: &Path, clock: Arc<dyn Clock>) -> Arc<UsageMeter> {
    let b = &config.budgets;
    let limit = |n: u64| (n > 0).then_some(n);
    let budgets = Budgets {
        daily_tokens: limit(b.daily_tokens),
        daily_cost: (b.daily_cost > 0.0).then_some(b.daily_cost),
        turn_tokens: limit(b.turn_tokens),
        heartbeat_tokens: limit(b.heartbeat_tokens),
        cron_tokens: limit(b.cron_tokens),
    };
    let prices = config
        .llm
        .models
        .iter()
        .filter_map(|(name, model)| {
            let price = model.price?;
            let price = Price {
                input: price.input,
                output: price.output,
                cached_input: price.cached_input.unwrap_or(price.input),
                cache_write: price.cache_write.unwrap_or(price.input),
            };
            Some((name.clone(), price))
        })
        .collect();
    // Validation has checked the zone; `local` is only the fallback of an impossible case.
    let zone = Zone::parse(b.zone_name(config)).unwrap_or(Zone::Local);
    let settings = MeterSettings {
        budgets,
        prices,
        zone,
    };
    let ledger = Arc::new(UsageLedgerFile::new(home));
    Arc::new(UsageMeter::new(ledger, settings, clock))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use squidbot::core::ports::usage::Purpose;

    fn record(time: &str, purpose: Purpose, prompt: u64, estimated: bool) -> UsageRecord {
        UsageRecord {
            time: DateTime::parse_from_rfc3339(time).unwrap().to_utc(),
            session: Some("http:a".into()),
            purpose,
            pool: "default".into(),
            model: "small".into(),
            prompt_tokens: prompt,
            completion_tokens: 1,
            cached_tokens: 0,
            cache_written_tokens: 0,
            cost: 0.25,
            estimated,
            audio_seconds: 0.0,
        }
    }

    #[test]
    fn rows_are_owners_days_and_the_period_is_inclusive() {
        let zone = Zone::parse("Europe/Berlin").unwrap();
        let records = [
            record("2026-11-01T22:59:00Z", Purpose::Turn, 10, false),
            record("2026-11-01T23:00:00Z", Purpose::Consolidation, 20, true),
            record("2026-11-03T12:00:00Z", Purpose::Turn, 40, false),
        ];
        let day = |text: &str| text.parse::<NaiveDate>().unwrap();
        let (rows, total) = summarize(
            &records,
            &zone,
            day("2026-11-01"),
            day("2026-11-02"),
            Group::Day,
        );
        let keys: Vec<(&str, u64)> = rows
            .iter()
            .map(|(k, t)| (k.as_str(), t.prompt_tokens))
            .collect();
        assert_eq!(keys, vec![("2026-11-01", 10), ("2026-11-02", 20)]);
        assert_eq!((total.calls, total.estimated_calls), (2, 1));
        let (rows, _) = summarize(
            &records,
            &zone,
            day("2026-11-01"),
            day("2026-11-30"),
            Group::Purpose,
        );
        assert_eq!(rows["turn"].prompt_tokens, 50);
        let text = table(
            &rows,
            &total,
            Group::Purpose,
            day("2026-11-01"),
            day("2026-11-30"),
            &zone,
        );
        assert!(text.contains("consolidation"), "{text}");
        assert!(text.contains("~ 1 of 2 calls"), "{text}");
    }
}
