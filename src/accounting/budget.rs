//! Budgets: the limits on tokens and cost (`budgets.*`), the owner's day they count in, and
//! the figures a stopped turn ends with (worded by [`BudgetStop::message`]).
//!
//! Pure functions of the spend so far and the time, so the day boundaries (in the owner's zone,
//! DST included) are unit-tested without a clock or a ledger. [`crate::accounting::meter`] feeds them
//! the running totals.

use chrono::{DateTime, Days, Local, NaiveDate, NaiveTime, TimeZone, Utc};

pub use crate::core::ports::llm::BudgetKind;
use crate::core::ports::llm::{BudgetFigures, BudgetStop};
use crate::core::ports::usage::Purpose;
use crate::zone::Zone;

/// The configured limits; `None` is no limit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budgets {
    /// Tokens (prompt plus completion) per day, all purposes together.
    pub daily_tokens: Option<u64>,
    /// Cost per day, all purposes together, in the prices' currency.
    pub daily_cost: Option<f64>,
    /// Tokens per turn a person started (and per sub-agent job).
    pub turn_tokens: Option<u64>,
    /// Tokens per heartbeat tick.
    pub heartbeat_tokens: Option<u64>,
    /// Tokens per cron run.
    pub cron_tokens: Option<u64>,
}

/// What has been spent when a call is about to be made.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spent {
    /// Tokens today (owner's zone), every purpose and process.
    pub today_tokens: u64,
    /// Cost today.
    pub today_cost: f64,
    /// Tokens of the turn this call belongs to.
    pub turn_tokens: u64,
}

impl Budgets {
    /// The turn budget that applies to a call for `purpose`, if any.
    pub fn turn_limit(&self, purpose: Purpose) -> Option<(BudgetKind, u64)> {
        match purpose {
            Purpose::Turn | Purpose::Spawn => self.turn_tokens.map(|n| (BudgetKind::TurnTokens, n)),
            Purpose::Heartbeat => self
                .heartbeat_tokens
                .map(|n| (BudgetKind::HeartbeatTokens, n)),
            Purpose::Cron => self.cron_tokens.map(|n| (BudgetKind::CronTokens, n)),
            Purpose::Consolidation
            | Purpose::Compression
            | Purpose::Doctor
            | Purpose::Transcription => None,
        }
    }

    /// The first budget that a call for `purpose` would pass, given `spent`; a budget is
    /// reached when the spend is at or above its limit, so the call that crosses it still
    /// finishes and the next one is stopped.
    pub fn exceeded(&self, purpose: Purpose, spent: Spent) -> Option<BudgetStop> {
        if purpose == Purpose::Doctor {
            return None;
        }
        if let Some(limit) = self.daily_tokens
            && spent.today_tokens >= limit
        {
            return Some(BudgetStop {
                kind: BudgetKind::DailyTokens,
                figures: BudgetFigures::Tokens {
                    limit,
                    used: spent.today_tokens,
                },
                resets: None,
            });
        }
        if let Some(limit) = self.daily_cost
            && spent.today_cost >= limit
        {
            return Some(BudgetStop {
                kind: BudgetKind::DailyCost,
                figures: BudgetFigures::Cost {
                    limit,
                    used: spent.today_cost,
                },
                resets: None,
            });
        }
        let (kind, limit) = self.turn_limit(purpose)?;
        (spent.turn_tokens >= limit).then_some(BudgetStop {
            kind,
            figures: BudgetFigures::Tokens {
                limit,
                used: spent.turn_tokens,
            },
            resets: None,
        })
    }
}

/// `stop` with its reset filled in: a daily budget resets at the owner's next midnight in
/// `zone`, counted from `now`.
pub fn with_reset(mut stop: BudgetStop, zone: &Zone, now: DateTime<Utc>) -> BudgetStop {
    if stop.kind.is_daily() {
        let minutes = (next_midnight(zone, now) - now).num_minutes().max(0);
        stop.resets = Some((zone.to_string(), minutes));
    }
    stop
}

/// The owner's calendar date at `at`.
pub fn local_date(zone: &Zone, at: DateTime<Utc>) -> NaiveDate {
    match zone {
        Zone::Utc => at.date_naive(),
        Zone::Local => at.with_timezone(&Local).date_naive(),
        Zone::Fixed(offset) => at.with_timezone(offset).date_naive(),
        Zone::Iana(tz) => at.with_timezone(tz).date_naive(),
    }
}

/// The next start of a day in `zone` after `at`: when the daily budgets reset.
pub fn next_midnight(zone: &Zone, at: DateTime<Utc>) -> DateTime<Utc> {
    let tomorrow = local_date(zone, at)
        .checked_add_days(Days::new(1))
        .unwrap_or(NaiveDate::MAX);
    match zone {
        Zone::Utc => start_of(&Utc, tomorrow),
        Zone::Local => start_of(&Local, tomorrow),
        Zone::Fixed(offset) => start_of(offset, tomorrow),
        Zone::Iana(tz) => start_of(tz, tomorrow),
    }
}

/// The first instant of `date` in `tz`; where a DST gap swallows midnight, the first hour that
/// exists.
fn start_of<Z: TimeZone>(tz: &Z, date: NaiveDate) -> DateTime<Utc> {
    (0..24)
        .filter_map(|hour| NaiveTime::from_hms_opt(hour, 0, 0))
        .find_map(|time| tz.from_local_datetime(&date.and_time(time)).earliest())
        .map(|start| start.with_timezone(&Utc))
        .unwrap_or_else(|| date.and_time(NaiveTime::MIN).and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    fn date(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    #[test]
    fn days_turn_at_the_owners_midnight() {
        let berlin = Zone::parse("Europe/Berlin").unwrap();
        // 22:59 UTC is 23:59 in Berlin in winter; 23:00 UTC is the next day there.
        let check = |at: &str, day: &str, reset: &str| {
            assert_eq!(local_date(&berlin, utc(at)), date(day), "{at}");
            assert_eq!(next_midnight(&berlin, utc(at)), utc(reset), "{at}");
        };
        check("2026-11-24T22:59:59Z", "2026-11-24", "2026-11-24T23:00:00Z");
        check("2026-11-24T23:00:00Z", "2026-11-25", "2026-11-25T23:00:00Z");
        // Summer time: midnight is 22:00 UTC.
        check("2026-07-01T21:59:00Z", "2026-07-01", "2026-07-01T22:00:00Z");
        // The night the clocks go back (25 October 2026) still resets at local midnight.
        check("2026-10-25T12:00:00Z", "2026-10-25", "2026-10-25T23:00:00Z");
        let plus = Zone::parse("+05:30").unwrap();
        assert_eq!(
            local_date(&plus, utc("2026-11-24T18:30:00Z")),
            date("2026-11-25")
        );
        assert_eq!(
            next_midnight(&Zone::Utc, utc("2026-12-31T23:59:59Z")),
            utc("2027-01-01T00:00:00Z")
        );
    }

    #[test]
    fn a_midnight_swallowed_by_dst_resets_at_the_first_hour_that_exists() {
        // Santiago moved its clocks from 00:00 to 01:00 on 8 September 2024.
        let santiago = Zone::parse("America/Santiago").unwrap();
        let reset = next_midnight(&santiago, utc("2024-09-07T12:00:00Z"));
        assert_eq!(reset, utc("2024-09-08T04:00:00Z"));
    }

    #[test]
    fn budgets_stop_at_their_limit_by_purpose() {
        let budgets = Budgets {
            daily_tokens: Some(1000),
            daily_cost: Some(0.5),
            turn_tokens: Some(100),
            heartbeat_tokens: Some(50),
            cron_tokens: None,
        };
        let spent = |today_tokens, today_cost, turn_tokens| Spent {
            today_tokens,
            today_cost,
            turn_tokens,
        };
        let kind = |purpose, s| budgets.exceeded(purpose, s).map(|e| e.kind);
        assert_eq!(kind(Purpose::Turn, spent(999, 0.0, 99)), None);
        assert_eq!(
            kind(Purpose::Turn, spent(1000, 0.0, 0)),
            Some(BudgetKind::DailyTokens)
        );
        assert_eq!(
            kind(Purpose::Consolidation, spent(10, 0.5, 900)),
            Some(BudgetKind::DailyCost)
        );
        assert_eq!(kind(Purpose::Consolidation, spent(10, 0.1, 900)), None);
        assert_eq!(
            kind(Purpose::Spawn, spent(0, 0.0, 100)),
            Some(BudgetKind::TurnTokens)
        );
        assert_eq!(
            kind(Purpose::Heartbeat, spent(0, 0.0, 50)),
            Some(BudgetKind::HeartbeatTokens)
        );
        assert_eq!(kind(Purpose::Cron, spent(0, 0.0, 5000)), None);
        assert_eq!(kind(Purpose::Doctor, spent(5000, 9.0, 0)), None);
    }

    #[test]
    fn the_message_names_the_budget_and_the_reset() {
        let exceeded = BudgetStop {
            kind: BudgetKind::DailyTokens,
            figures: BudgetFigures::Tokens {
                limit: 1000,
                used: 1200,
            },
            resets: None,
        };
        let zone = Zone::parse("Europe/Berlin").unwrap();
        let text = with_reset(exceeded, &zone, utc("2026-11-24T20:30:00Z")).message();
        assert_eq!(
            text,
            "Stopped: the daily token budget is used up (1200 tokens of 1000 tokens, \
             budgets.daily_tokens); it resets at midnight (Europe/Berlin), in 2 h 30 min."
        );
    }
}
