//! The accounting date every ledger batch carries (issue 35 "Money rules"; seed 004 §3: the
//! accounting date has explicit rules).
//!
//! Finance closes a day at a cut-off in its own time zone, not at UTC midnight. The rule:
//! take the posting's instant in the accounting time zone; with the cut-off at 00:00 its
//! accounting date is that local date; with a later cut-off `C`, a posting at or after `C`
//! local time belongs to the next day (a 23:00 cut-off puts 23:30 on tomorrow). An instant
//! has exactly one local time in any zone, so a daylight-saving change only makes that day
//! an hour shorter or longer: nothing is dated twice or lost. UTC with a 00:00 cut-off is the
//! default (`--accounting-timezone`, `--accounting-cutoff`). Time zones are IANA names whose
//! rules are bundled with the binary (jiff), so every machine dates a posting the same.

use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;

/// Why an accounting calendar was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountingError {
    /// Not an IANA time zone name.
    #[error("accounting time zone {0:?} is not an IANA time zone name such as Europe/Berlin")]
    TimeZone(String),
    /// Not `HH:MM` from 00:00 to 23:59.
    #[error("accounting cut-off {0:?} is not a time of day HH:MM from 00:00 to 23:59")]
    Cutoff(String),
}

/// The accounting days' time zone and cut-off.
#[derive(Debug, Clone)]
pub struct AccountingCalendar {
    zone_name: String,
    zone: TimeZone,
    cutoff: Time,
}

impl Default for AccountingCalendar {
    /// UTC days, closed at midnight.
    fn default() -> Self {
        AccountingCalendar {
            zone_name: "UTC".into(),
            zone: TimeZone::UTC,
            cutoff: Time::midnight(),
        }
    }
}

impl AccountingCalendar {
    /// The calendar of IANA time zone `zone` (`UTC`, `Asia/Shanghai`) with its day closing at
    /// `cutoff` (`HH:MM`, local time). Errors: an unknown zone, a malformed cut-off.
    pub fn new(zone: &str, cutoff: &str) -> Result<Self, AccountingError> {
        let tz = TimeZone::get(zone).map_err(|_| AccountingError::TimeZone(zone.into()))?;
        let bad_cutoff = || AccountingError::Cutoff(cutoff.into());
        let (hours, minutes) = cutoff.split_once(':').ok_or_else(bad_cutoff)?;
        let two_digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
        if !two_digits(hours) || !two_digits(minutes) {
            return Err(bad_cutoff());
        }
        let (h, m): (i8, i8) = (
            hours.parse().map_err(|_| bad_cutoff())?,
            minutes.parse().map_err(|_| bad_cutoff())?,
        );
        let cutoff = Time::new(h, m, 0, 0).map_err(|_| bad_cutoff())?;
        Ok(AccountingCalendar {
            zone_name: zone.into(),
            zone: tz,
            cutoff,
        })
    }

    /// The accounting date of the instant `at_ms` (epoch milliseconds UTC), `YYYY-MM-DD`.
    pub fn date_of(&self, at_ms: i64) -> String {
        self.date(at_ms).to_string()
    }

    fn date(&self, at_ms: i64) -> Date {
        // Epoch ms outside jiff's range (years -9999..=9999) cannot come from a clock.
        let instant =
            jiff::Timestamp::from_millisecond(at_ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let local = self.zone.to_datetime(instant);
        let closed = self.cutoff != Time::midnight() && local.time() >= self.cutoff;
        match closed {
            true => local.date().tomorrow().unwrap_or(local.date()),
            false => local.date(),
        }
    }

    /// How a person reads the calendar: `Europe/Berlin, days close at 23:00`.
    pub fn describe(&self) -> String {
        format!(
            "{}, days close at {}",
            self.zone_name,
            self.cutoff.strftime("%H:%M")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Epoch ms of a UTC instant written `2026-03-28T22:30:00`.
    fn utc(text: &str) -> i64 {
        format!("{text}Z")
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_millisecond()
    }

    #[test]
    fn utc_days_close_at_midnight_by_default() {
        let c = AccountingCalendar::default();
        assert_eq!(c.date_of(utc("2026-12-05T23:59:59")), "2026-12-05");
        assert_eq!(c.date_of(utc("2026-12-06T00:00:01")), "2026-12-06");
        assert_eq!(c.describe(), "UTC, days close at 00:00");
    }

    #[test]
    fn a_cutoff_puts_what_comes_after_it_on_the_next_day() {
        let c = AccountingCalendar::new("Asia/Shanghai", "23:00").unwrap();
        // 22:59:59 and 23:00:00 Shanghai (UTC+8).
        assert_eq!(c.date_of(utc("2026-12-05T14:59:59")), "2026-12-05");
        assert_eq!(c.date_of(utc("2026-12-05T15:00:00")), "2026-12-06");
        // Past local midnight it stays on that date.
        assert_eq!(c.date_of(utc("2026-12-05T16:00:01")), "2026-12-06");
        let midnight = AccountingCalendar::new("Asia/Shanghai", "00:00").unwrap();
        assert_eq!(midnight.date_of(utc("2026-12-05T15:59:59")), "2026-12-05");
        assert_eq!(midnight.date_of(utc("2026-12-05T16:00:01")), "2026-12-06");
    }

    #[test]
    fn the_cutoff_follows_local_time_across_a_daylight_saving_change() {
        // Berlin leaves CET (UTC+1) for CEST (UTC+2) at 01:00 UTC on 2026-03-29.
        let c = AccountingCalendar::new("Europe/Berlin", "23:00").unwrap();
        // 23:30 CET on 03-28 is past the cut-off: 03-29.
        assert_eq!(c.date_of(utc("2026-03-28T22:30:00")), "2026-03-29");
        // 22:59 CEST on 03-29 (20:59 UTC) is before it, 23:00 CEST (21:00 UTC) is not: with
        // a fixed UTC+1 offset both would have been dated 03-29.
        assert_eq!(c.date_of(utc("2026-03-29T20:59:00")), "2026-03-29");
        assert_eq!(c.date_of(utc("2026-03-29T21:00:00")), "2026-03-30");
        // Back to CET on 2026-10-25: 23:00 local is 22:00 UTC again.
        assert_eq!(c.date_of(utc("2026-10-25T21:59:00")), "2026-10-25");
        assert_eq!(c.date_of(utc("2026-10-25T22:00:00")), "2026-10-26");
    }

    #[test]
    fn unknown_zones_and_malformed_cutoffs_are_refused() {
        assert!(matches!(
            AccountingCalendar::new("Mars/Olympus", "00:00"),
            Err(AccountingError::TimeZone(_))
        ));
        for bad in ["24:00", "23:60", "7:00", "07:00:00", "noon", "", "-1:00"] {
            assert!(
                matches!(
                    AccountingCalendar::new("UTC", bad),
                    Err(AccountingError::Cutoff(_))
                ),
                "{bad:?}"
            );
        }
    }
}
