//! Time reaches the domain through [`Clock`], so tests and the deterministic simulation
//! control it (DESIGN.md "Layout": injected clock and seeded RNG).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of the current time, in milliseconds since the Unix epoch (UTC).
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    fn now_ms(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

/// A clock that only moves when told to; shared handles see the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock stopped at `start_ms` (milliseconds since the epoch, UTC).
    pub fn new(start_ms: i64) -> Self {
        Self(Arc::new(AtomicI64::new(start_ms)))
    }

    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Formats epoch milliseconds as RFC 3339 UTC with millisecond precision
/// (`2026-11-30T04:55:54.123Z`), the shape every API answer uses.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Parses a UTC time given as RFC 3339 (`2026-11-30T04:00:00Z`) or a day (`2026-11-30`,
/// meaning its midnight UTC) into epoch ms. Errors say which forms are accepted.
pub fn parse_utc(v: &str) -> Result<i64, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(v) {
        return Ok(t.timestamp_millis());
    }
    chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc().timestamp_millis())
        .ok_or_else(|| format!("{v:?} is not RFC 3339 or YYYY-MM-DD"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_parse_as_rfc3339_or_a_day() {
        assert_eq!(parse_utc("1970-01-02"), Ok(86_400_000));
        assert_eq!(parse_utc("1970-01-01T00:00:01Z"), Ok(1_000));
        assert!(parse_utc("yesterday").is_err());
    }

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let c = ManualClock::new(1_000);
        let shared = c.clone();
        c.advance(500);
        assert_eq!(shared.now_ms(), 1_500);
    }

    #[test]
    fn rfc3339_is_utc_with_millis() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // 1_796_000_154 s after the epoch is 2026-11-30 00:55:54 UTC (`date -u -d @1796000154`).
        assert_eq!(rfc3339(1_796_000_154_123), "2026-11-30T00:55:54.123Z");
    }
}
