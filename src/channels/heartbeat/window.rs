//! The heartbeat's active hours: a daily window of wall-clock minutes in a time zone.
//!
//! The window is evaluated in the zone's wall-clock time, so daylight-saving changes are the
//! zone's business: `22:00`–`06:00` in `Europe/Berlin` ends at 06:00 local time on both the
//! spring-forward and the fall-back night. An end before the start spans midnight (the
//! original never fired for such windows); `00:00`–`24:00` is always active and a window whose
//! start equals its end is never active.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::channels::heartbeat::HeartbeatError;
use crate::zone::UnknownZone;
pub use crate::zone::Zone;

/// Minutes in a day; the largest end of a window (`24:00`).
const DAY: u32 = 24 * 60;

/// The heartbeat's `timezone` as a [`Zone`]: empty means `local`; an unknown name is an error,
/// never silent UTC.
pub fn parse_zone(name: &str) -> Result<Zone, HeartbeatError> {
    if name.trim().is_empty() {
        return Ok(Zone::Local);
    }
    Zone::parse(name).map_err(|UnknownZone(zone)| HeartbeatError::UnknownZone(zone))
}

/// A daily window `[start, end)` in minutes after midnight, read in `zone`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveHours {
    start: u32,
    end: u32,
    zone: Zone,
}

impl ActiveHours {
    /// A window from `start` (0 to 1439) to `end` (0 to 1440) minutes after midnight.
    pub fn new(start: u32, end: u32, zone: Zone) -> Result<Self, HeartbeatError> {
        if start >= DAY || end > DAY {
            return Err(HeartbeatError::BadHours { start, end });
        }
        Ok(Self { start, end, zone })
    }

    /// The whole day, every day.
    pub fn always(zone: Zone) -> Self {
        Self {
            start: 0,
            end: DAY,
            zone,
        }
    }

    /// The start, in minutes after midnight.
    pub fn start(&self) -> u32 {
        self.start
    }

    /// The end (exclusive), in minutes after midnight.
    pub fn end(&self) -> u32 {
        self.end
    }

    /// The zone the window is read in.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// Whether `now` falls inside the window, read in the zone's wall-clock time.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        let (start, end) = (self.start, self.end);
        if start == 0 && end == DAY {
            return true;
        }
        let minute = self.zone.minute_of_day(now);
        match start.cmp(&end) {
            std::cmp::Ordering::Less => start <= minute && minute < end,
            std::cmp::Ordering::Greater => minute >= start || minute < end,
            std::cmp::Ordering::Equal => false,
        }
    }
}

impl fmt::Display for ActiveHours {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02} {}",
            self.start / 60,
            self.start % 60,
            self.end / 60,
            self.end % 60,
            self.zone
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minutes(hhmm: &str) -> u32 {
        let (hours, minutes) = hhmm.split_once(':').unwrap();
        hours.parse::<u32>().unwrap() * 60 + minutes.parse::<u32>().unwrap()
    }

    /// Checks `window` (`HH:MM-HH:MM`) in `zone` at the UTC instant `at` (RFC 3339).
    fn check(window: &str, zone: &str, at: &str, expected: bool) {
        let (start, end) = window.split_once('-').unwrap();
        let hours =
            ActiveHours::new(minutes(start), minutes(end), parse_zone(zone).unwrap()).unwrap();
        let now = DateTime::parse_from_rfc3339(at)
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            hours.is_active(now),
            expected,
            "{window} in {zone} at {at} (local minute {})",
            hours.zone().minute_of_day(now)
        );
    }

    #[test]
    fn plain_windows() {
        let table = [
            ("00:00-24:00", "2026-01-01T00:00:00Z", true),
            ("00:00-24:00", "2026-01-01T23:59:59Z", true),
            ("09:00-17:00", "2026-01-01T08:59:00Z", false),
            ("09:00-17:00", "2026-01-01T09:00:00Z", true),
            ("09:00-17:00", "2026-01-01T12:00:00Z", true),
            ("09:00-17:00", "2026-01-01T16:59:00Z", true),
            ("09:00-17:00", "2026-01-01T17:00:00Z", false),
            ("09:00-24:00", "2026-01-01T23:59:00Z", true),
            ("09:00-24:00", "2026-01-01T00:00:00Z", false),
            ("12:00-12:00", "2026-01-01T12:00:00Z", false),
            ("00:00-00:00", "2026-01-01T00:00:00Z", false),
            ("00:00-00:00", "2026-01-01T12:00:00Z", false),
        ];
        for (window, at, expected) in table {
            check(window, "UTC", at, expected);
        }
    }

    #[test]
    fn overnight_windows() {
        let table = [
            ("22:00-06:00", "2026-01-01T23:30:00Z", true),
            ("22:00-06:00", "2026-01-01T03:00:00Z", true),
            ("22:00-06:00", "2026-01-01T12:00:00Z", false),
            ("22:00-06:00", "2026-01-01T22:00:00Z", true),
            ("22:00-06:00", "2026-01-01T21:59:00Z", false),
            ("22:00-06:00", "2026-01-01T05:59:00Z", true),
            ("22:00-06:00", "2026-01-01T06:00:00Z", false),
            ("22:00-06:00", "2026-01-01T00:00:00Z", true),
        ];
        for (window, at, expected) in table {
            check(window, "UTC", at, expected);
        }
    }

    #[test]
    fn the_zone_decides_the_wall_clock() {
        // 21:30 UTC is 22:30 in Berlin in winter (CET, UTC+1).
        check("22:00-06:00", "Europe/Berlin", "2026-01-15T21:30:00Z", true);
        check("22:00-06:00", "UTC", "2026-01-15T21:30:00Z", false);
        // 13:00 UTC is 08:00 in New York in winter (EST, UTC-5).
        check(
            "09:00-17:00",
            "America/New_York",
            "2026-01-15T13:00:00Z",
            false,
        );
        check(
            "09:00-17:00",
            "America/New_York",
            "2026-01-15T14:00:00Z",
            true,
        );
    }

    #[test]
    fn berlin_spring_forward_night() {
        // 2025-03-30: at 01:00 UTC, 02:00 CET jumps to 03:00 CEST.
        let table = [
            ("2025-03-29T20:59:00Z", false), // 21:59 CET
            ("2025-03-29T21:00:00Z", true),  // 22:00 CET
            ("2025-03-30T00:30:00Z", true),  // 01:30 CET
            ("2025-03-30T01:30:00Z", true),  // 03:30 CEST
            ("2025-03-30T03:59:00Z", true),  // 05:59 CEST
            ("2025-03-30T04:00:00Z", false), // 06:00 CEST (a fixed UTC+1 would say 05:00)
            ("2025-03-30T04:30:00Z", false), // 06:30 CEST
        ];
        for (at, expected) in table {
            check("22:00-06:00", "Europe/Berlin", at, expected);
        }
        // The hour 02:00-03:00 does not exist that night.
        check(
            "02:00-03:00",
            "Europe/Berlin",
            "2025-03-30T00:59:00Z",
            false,
        );
        check(
            "02:00-03:00",
            "Europe/Berlin",
            "2025-03-30T01:00:00Z",
            false,
        );
    }

    #[test]
    fn berlin_fall_back_night() {
        // 2025-10-26: at 01:00 UTC, 03:00 CEST falls back to 02:00 CET.
        let table = [
            ("2025-10-25T19:59:00Z", false), // 21:59 CEST
            ("2025-10-25T20:00:00Z", true),  // 22:00 CEST
            ("2025-10-26T00:30:00Z", true),  // 02:30 CEST
            ("2025-10-26T01:30:00Z", true),  // 02:30 CET, the second time
            ("2025-10-26T04:30:00Z", true),  // 05:30 CET (a fixed UTC+2 would say 06:30)
            ("2025-10-26T05:00:00Z", false), // 06:00 CET
        ];
        for (at, expected) in table {
            check("22:00-06:00", "Europe/Berlin", at, expected);
        }
        // The hour 02:00-03:00 happens twice that night.
        check("02:00-03:00", "Europe/Berlin", "2025-10-26T00:30:00Z", true);
        check("02:00-03:00", "Europe/Berlin", "2025-10-26T01:30:00Z", true);
    }

    #[test]
    fn new_york_spring_forward_night() {
        // 2026-03-08: at 07:00 UTC, 02:00 EST jumps to 03:00 EDT.
        check(
            "22:00-06:00",
            "America/New_York",
            "2026-03-08T06:30:00Z",
            true,
        ); // 01:30 EST
        check(
            "22:00-06:00",
            "America/New_York",
            "2026-03-08T09:59:00Z",
            true,
        ); // 05:59 EDT
        check(
            "22:00-06:00",
            "America/New_York",
            "2026-03-08T10:00:00Z",
            false,
        ); // 06:00 EDT
    }

    #[test]
    fn zones_parse_or_fail_loudly() {
        assert_eq!(parse_zone("local").unwrap(), Zone::Local);
        assert_eq!(parse_zone(" ").unwrap(), Zone::Local);
        assert_eq!(
            parse_zone("Europe/Berlin").unwrap().to_string(),
            "Europe/Berlin"
        );
        assert_eq!(parse_zone("+02:00").unwrap().to_string(), "+02:00");
        assert!(matches!(
            parse_zone("Mars/Olympus"),
            Err(HeartbeatError::UnknownZone(_))
        ));
    }

    #[test]
    fn rejects_out_of_range_minutes() {
        assert!(ActiveHours::new(1440, 0, Zone::Local).is_err());
        assert!(ActiveHours::new(0, 1441, Zone::Local).is_err());
        assert_eq!(
            ActiveHours::new(
                22 * 60,
                6 * 60,
                Zone::Iana(crate::zone::IanaZone::get("UTC").unwrap())
            )
            .unwrap()
            .to_string(),
            "22:00-06:00 UTC"
        );
    }
}
