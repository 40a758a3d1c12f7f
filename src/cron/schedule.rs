//! Schedules and zones: parsing a job's `schedule` and `timezone`, and computing its slots.
//!
//! A schedule is a 5-field cron expression (read in the job's zone, so a DST change moves the
//! UTC time, not the wall-clock time), `every N` (seconds; slots are `created_at + k·N`, k ≥ 1)
//! or `at <RFC 3339 time with offset>` (one slot). A zone is an IANA name, `UTC`, `local` (the
//! host's zone) or a fixed offset `±HH:MM`; anything else is an error, never silently UTC.

use chrono::{DateTime, Duration, Local, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::CronError;
use crate::zone::UnknownZone;
pub use crate::zone::Zone;

/// Most cron slots counted one by one when reporting how many were missed.
const COUNT_CAP: u64 = 100_000;

/// A parsed schedule.
#[derive(Clone, Debug)]
pub enum Schedule {
    /// A 5-field cron expression.
    Cron(Box<Cron>),
    /// Every N seconds from the job's creation.
    Every(u64),
    /// Once, at this instant.
    At(DateTime<Utc>),
}

impl Schedule {
    /// Parses `text`; the error says which forms are accepted.
    pub fn parse(text: &str) -> Result<Self, CronError> {
        let text = text.trim();
        let invalid = |reason: String| CronError::InvalidSchedule {
            schedule: text.to_owned(),
            reason,
        };
        if let Some(rest) = text.strip_prefix("every ") {
            return match rest.trim().parse::<u64>() {
                Ok(seconds) if seconds > 0 => Ok(Self::Every(seconds)),
                _ => Err(invalid(
                    "`every N` needs a whole number of seconds N > 0".into(),
                )),
            };
        }
        if let Some(rest) = text.strip_prefix("at ") {
            return DateTime::parse_from_rfc3339(rest.trim())
                .map(|at| Self::At(at.with_timezone(&Utc)))
                .map_err(|error| {
                    invalid(format!(
                        "`at` needs an RFC 3339 time with offset, e.g. 2026-05-01T09:00:00+02:00 ({error})"
                    ))
                });
        }
        let fields = text.split_whitespace().count();
        if fields != 5 {
            return Err(invalid(format!(
                "expected a 5-field cron expression (minute hour day month weekday), `every N` or `at <RFC 3339 time>`; got {fields} fields"
            )));
        }
        CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(text)
            .map(|cron| Self::Cron(Box::new(cron)))
            .map_err(|error| invalid(error.to_string()))
    }

    /// Whether the schedule fires only once.
    pub fn is_one_shot(&self) -> bool {
        matches!(self, Self::At(_))
    }

    /// The first slot strictly after `after`; `anchor` is the job's creation (for `every N`).
    pub fn next_slot_after(
        &self,
        zone: &Zone,
        after: DateTime<Utc>,
        anchor: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        match self {
            Self::Cron(cron) => next_cron(zone, cron, after),
            Self::Every(seconds) => {
                let period = i64::try_from(*seconds).ok()?;
                let k = if after < anchor {
                    1
                } else {
                    (after - anchor).num_seconds() / period + 1
                };
                anchor.checked_add_signed(Duration::seconds(k.checked_mul(period)?))
            }
            Self::At(at) => (*at > after).then_some(*at),
        }
    }

    /// The latest slot at or before `until`, if any (never before `anchor` for `every N`).
    pub fn last_slot_until(
        &self,
        zone: &Zone,
        until: DateTime<Utc>,
        anchor: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        match self {
            Self::Cron(cron) => previous_cron(zone, cron, until),
            Self::Every(seconds) => {
                let period = i64::try_from(*seconds).ok()?;
                let k = (until - anchor).num_seconds().checked_div(period)?;
                (k >= 1 && until >= anchor)
                    .then(|| anchor.checked_add_signed(Duration::seconds(k * period)))
                    .flatten()
            }
            Self::At(at) => (*at <= until).then_some(*at),
        }
    }

    /// How many slots lie in `(after, until]` (cron expressions are counted up to a cap).
    pub fn count_slots(
        &self,
        zone: &Zone,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        anchor: DateTime<Utc>,
    ) -> u64 {
        match self {
            Self::Every(_) | Self::At(_) => {
                let index = |time: DateTime<Utc>| match self {
                    Self::Every(seconds) if time >= anchor => {
                        (time - anchor).num_seconds().max(0) as u64 / seconds
                    }
                    Self::At(at) => u64::from(*at <= time),
                    _ => 0,
                };
                index(until).saturating_sub(index(after))
            }
            Self::Cron(cron) => {
                let mut count = 0;
                let mut cursor = after;
                while count < COUNT_CAP {
                    match next_cron(zone, cron, cursor) {
                        Some(slot) if slot <= until => {
                            count += 1;
                            cursor = slot;
                        }
                        _ => break,
                    }
                }
                count
            }
        }
    }
}

/// A zone name as a [`Zone`], or the cron error naming it.
pub fn parse_zone(name: &str) -> Result<Zone, CronError> {
    Zone::parse(name).map_err(|UnknownZone(zone)| CronError::UnknownZone { zone })
}

/// The first slot of `cron` after `after`, read in `zone`.
fn next_cron(zone: &Zone, cron: &Cron, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    fn next<Z: TimeZone>(cron: &Cron, after: DateTime<Utc>, zone: &Z) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(zone);
        let slot = cron.find_next_occurrence(&local, false).ok()?;
        Some(slot.with_timezone(&Utc))
    }
    match zone {
        Zone::Utc => next(cron, after, &Utc),
        Zone::Local => next(cron, after, &Local),
        Zone::Fixed(offset) => next(cron, after, offset),
        Zone::Iana(tz) => next(cron, after, tz),
    }
}

/// The last slot of `cron` at or before `until`, read in `zone`.
fn previous_cron(zone: &Zone, cron: &Cron, until: DateTime<Utc>) -> Option<DateTime<Utc>> {
    fn previous<Z: TimeZone>(cron: &Cron, until: DateTime<Utc>, zone: &Z) -> Option<DateTime<Utc>> {
        let local = until.with_timezone(zone);
        let slot = cron.find_previous_occurrence(&local, true).ok()?;
        Some(slot.with_timezone(&Utc))
    }
    match zone {
        Zone::Utc => previous(cron, until, &Utc),
        Zone::Local => previous(cron, until, &Local),
        Zone::Fixed(offset) => previous(cron, until, offset),
        Zone::Iana(tz) => previous(cron, until, tz),
    }
}

/// Checks a schedule and zone for a new job created at `now`: both must parse, and an `at`
/// time must lie in the future.
pub fn validate(schedule: &str, zone: &str, now: DateTime<Utc>) -> Result<Schedule, CronError> {
    parse_zone(zone)?;
    let parsed = Schedule::parse(schedule)?;
    if let Schedule::At(at) = parsed
        && at <= now
    {
        return Err(CronError::InvalidSchedule {
            schedule: schedule.trim().to_owned(),
            reason: format!("the time {} has already passed", at.to_rfc3339()),
        });
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    fn check_next(schedule: &str, zone: &str, after: &str, expected: &str) {
        let parsed = Schedule::parse(schedule).unwrap();
        let zone = Zone::parse(zone).unwrap();
        let anchor = utc("2026-01-01T00:00:00Z");
        let next = parsed.next_slot_after(&zone, utc(after), anchor).unwrap();
        assert_eq!(next, utc(expected), "{schedule} after {after}");
    }

    #[test]
    fn cron_expressions_follow_the_zone_across_dst() {
        // Berlin switches to summer time on 2026-03-29: 09:00 local is 08:00Z, then 07:00Z.
        check_next(
            "0 9 * * *",
            "Europe/Berlin",
            "2026-03-28T09:00:00Z",
            "2026-03-29T07:00:00Z",
        );
        check_next(
            "0 9 * * *",
            "Europe/Berlin",
            "2026-03-27T09:00:00Z",
            "2026-03-28T08:00:00Z",
        );
        check_next(
            "0 9 * * *",
            "UTC",
            "2026-03-28T09:00:00Z",
            "2026-03-29T09:00:00Z",
        );
        check_next(
            "*/15 * * * *",
            "+02:00",
            "2026-03-28T09:01:00Z",
            "2026-03-28T09:15:00Z",
        );
        check_next(
            "0 8 * * MON",
            "America/New_York",
            "2026-05-01T00:00:00Z",
            "2026-05-04T12:00:00Z",
        );
    }

    #[test]
    fn every_n_slots_are_anchored_at_creation() {
        check_next(
            "every 60",
            "UTC",
            "2025-12-31T00:00:00Z",
            "2026-01-01T00:01:00Z",
        );
        check_next(
            "every 60",
            "UTC",
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:01:00Z",
        );
        check_next(
            "every 60",
            "UTC",
            "2026-01-01T00:01:00Z",
            "2026-01-01T00:02:00Z",
        );
        check_next(
            "every 90",
            "UTC",
            "2026-01-01T00:02:59Z",
            "2026-01-01T00:03:00Z",
        );
        let every = Schedule::parse("every 60").unwrap();
        let anchor = utc("2026-01-01T00:00:00Z");
        assert_eq!(
            every.last_slot_until(&Zone::Utc, utc("2026-01-01T00:00:59Z"), anchor),
            None
        );
        assert_eq!(
            every.last_slot_until(&Zone::Utc, utc("2026-01-01T00:05:30Z"), anchor),
            Some(utc("2026-01-01T00:05:00Z"))
        );
        assert_eq!(
            every.count_slots(&Zone::Utc, anchor, utc("2026-01-01T01:00:00Z"), anchor),
            60
        );
    }

    #[test]
    fn at_has_one_slot() {
        let at = Schedule::parse("at 2026-05-01T09:00:00+02:00").unwrap();
        assert!(at.is_one_shot());
        let anchor = utc("2026-01-01T00:00:00Z");
        assert_eq!(
            at.next_slot_after(&Zone::Utc, anchor, anchor),
            Some(utc("2026-05-01T07:00:00Z"))
        );
        assert_eq!(
            at.next_slot_after(&Zone::Utc, utc("2026-05-01T07:00:00Z"), anchor),
            None
        );
        assert_eq!(
            at.count_slots(&Zone::Utc, anchor, utc("2026-06-01T00:00:00Z"), anchor),
            1
        );
    }

    #[test]
    fn cron_slots_are_counted_and_the_last_is_found() {
        let hourly = Schedule::parse("0 * * * *").unwrap();
        let anchor = utc("2026-01-01T00:00:00Z");
        let until = utc("2026-01-01T05:30:00Z");
        assert_eq!(hourly.count_slots(&Zone::Utc, anchor, until, anchor), 5);
        assert_eq!(
            hourly.last_slot_until(&Zone::Utc, until, anchor),
            Some(utc("2026-01-01T05:00:00Z"))
        );
        assert_eq!(
            hourly.last_slot_until(&Zone::Utc, utc("2026-01-01T05:00:00Z"), anchor),
            Some(utc("2026-01-01T05:00:00Z"))
        );
    }

    #[test]
    fn bad_schedules_and_zones_are_rejected() {
        for bad in [
            "every 0",
            "every -5",
            "every x",
            "* * * *",
            "0 0 * * * *",
            "61 * * * *",
            "at tomorrow",
            "at 2026-05-01T09:00:00",
            "",
        ] {
            assert!(
                matches!(Schedule::parse(bad), Err(CronError::InvalidSchedule { .. })),
                "{bad:?} should be invalid"
            );
        }
        for bad in ["Mars/Olympus", "CEST+1", "+25:00", "Europe/Berlinn"] {
            assert!(
                matches!(parse_zone(bad), Err(CronError::UnknownZone { .. })),
                "{bad:?} should be unknown"
            );
        }
        for good in ["UTC", "local", "Europe/Berlin", "-05:30"] {
            assert!(Zone::parse(good).is_ok(), "{good}");
        }
        let now = utc("2026-06-01T00:00:00Z");
        assert!(validate("at 2026-05-01T09:00:00+02:00", "UTC", now).is_err());
        assert!(validate("at 2026-07-01T09:00:00+02:00", "UTC", now).is_ok());
        assert!(validate("0 9 * * *", "Nowhere/Land", now).is_err());
    }
}
