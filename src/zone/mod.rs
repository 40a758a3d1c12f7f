//! [`Zone`]: the time zone a schedule is read in, shared by cron jobs and the heartbeat's
//! active hours, so both accept the same names and show them the same way.
//!
//! A zone is `UTC` (or `Z`), `local` (the host's zone), a fixed offset `±HH:MM` or an IANA name
//! such as `Europe/Berlin`; anything else is an error, never silently UTC.

use std::fmt;

use chrono::{DateTime, FixedOffset, Local, Timelike, Utc};

mod iana;

pub use iana::IanaZone;

/// A parsed time zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Zone {
    /// UTC.
    Utc,
    /// The host's local zone.
    Local,
    /// A fixed offset from UTC.
    Fixed(FixedOffset),
    /// An IANA zone.
    Iana(IanaZone),
}

/// The text was not a zone name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone {0:?} (use an IANA name like Europe/Berlin, UTC, local or +02:00)")]
pub struct UnknownZone(pub String);

impl Zone {
    /// Parses `UTC`, `Z`, `local`, `±HH:MM` or an IANA name (surrounding spaces ignored).
    pub fn parse(name: &str) -> Result<Self, UnknownZone> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("utc") || name == "Z" {
            return Ok(Self::Utc);
        }
        if name.eq_ignore_ascii_case("local") {
            return Ok(Self::Local);
        }
        if let Some(offset) = parse_offset(name) {
            return Ok(Self::Fixed(offset));
        }
        IanaZone::get(name)
            .map(Self::Iana)
            .ok_or_else(|| UnknownZone(name.to_owned()))
    }

    /// The wall-clock minute of the day at `now` in this zone (0 to 1439).
    pub fn minute_of_day(&self, now: DateTime<Utc>) -> u32 {
        let time = match self {
            Self::Utc => now.time(),
            Self::Local => now.with_timezone(&Local).time(),
            Self::Fixed(offset) => now.with_timezone(offset).time(),
            Self::Iana(zone) => now.with_timezone(zone).time(),
        };
        time.hour() * 60 + time.minute()
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Utc => f.write_str("UTC"),
            Self::Local => f.write_str("local"),
            Self::Fixed(offset) => write!(f, "{offset}"),
            Self::Iana(zone) => f.write_str(zone.name()),
        }
    }
}

/// `+HH:MM` / `-HH:MM` as an offset.
fn parse_offset(text: &str) -> Option<FixedOffset> {
    let sign = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (hours, minutes) = text.get(1..)?.split_once(':')?;
    if hours.len() != 2 || minutes.len() != 2 {
        return None;
    }
    let hours: i32 = hours.parse().ok()?;
    let minutes: i32 = minutes.parse().ok()?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_shows_as_written() {
        for (name, shown) in [
            ("UTC", "UTC"),
            ("Z", "UTC"),
            (" local ", "local"),
            ("+02:00", "+02:00"),
            ("-05:30", "-05:30"),
            ("Europe/Berlin", "Europe/Berlin"),
        ] {
            assert_eq!(Zone::parse(name).unwrap().to_string(), shown, "{name}");
        }
        for bad in ["", "Mars/Olympus", "+2:00", "+24:00", "CEST+1"] {
            assert_eq!(
                Zone::parse(bad),
                Err(UnknownZone(bad.trim().to_owned())),
                "{bad}"
            );
        }
    }

    #[test]
    fn minute_of_day_reads_the_wall_clock() {
        let now = DateTime::parse_from_rfc3339("2026-07-01T22:30:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(Zone::Utc.minute_of_day(now), 22 * 60 + 30);
        assert_eq!(Zone::parse("+02:00").unwrap().minute_of_day(now), 30);
        assert_eq!(Zone::parse("Europe/Berlin").unwrap().minute_of_day(now), 30);
    }
}
