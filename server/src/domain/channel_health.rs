//! Channel health (DESIGN.md "Ops console": channel health per connector): how a charge
//! attempt's answer is classed, when a connector's tile turns amber or red, and the latency
//! percentiles of a set of attempts. Plain Rust; the service reads the attempts from the store
//! (`channel_attempts`, migration 0125) and the thresholds from the configuration.

pub use converge_wire::dashboard::{AttemptOutcome, FailureReason, HealthLevel};

/// The undecidable share (timeouts, 5xx, dropped connections, garbled answers, over all
/// attempts) at which a connector's tile turns amber and red, in whole percent (1..=100).
/// Set by `--channel-amber-pct` and `--channel-red-pct`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelThresholds {
    /// Amber from this share, percent.
    pub amber_pct: u32,
    /// Red from this share, percent.
    pub red_pct: u32,
}

impl Default for ChannelThresholds {
    fn default() -> Self {
        ChannelThresholds {
            amber_pct: 10,
            red_pct: 30,
        }
    }
}

/// How long a charge attempt's record is kept, ms (30 days): the dashboard reads one day,
/// and the payments list's failure-reason filter finds a payment by an attempt this recent.
pub const ATTEMPT_RETENTION_MS: i64 = 30 * 86_400_000;

/// Minutes of attempts the tile's level is decided on: the last five, as the alert rule's
/// rate window (`deploy/prometheus/alerts.yml`, ConvergeChannelUndecidable).
pub const LEVEL_WINDOW_MINUTES: i64 = 5;

impl ChannelThresholds {
    /// The level of `undecidable` answers among `attempts`: red at or above `red_pct`, else
    /// amber at or above `amber_pct`, else ok. No attempts is ok (nothing says the channel
    /// fails). Compared in integers (`undecidable * 100 >= pct * attempts`), so 3 of 10 is
    /// exactly 30 % and no rounding moves a tile across a threshold.
    pub fn level(&self, attempts: i64, undecidable: i64) -> HealthLevel {
        if attempts <= 0 {
            return HealthLevel::Ok;
        }
        let reaches = |pct: u32| undecidable.saturating_mul(100) >= i64::from(pct) * attempts;
        if reaches(self.red_pct) {
            HealthLevel::Red
        } else if reaches(self.amber_pct) {
            HealthLevel::Amber
        } else {
            HealthLevel::Ok
        }
    }
}

/// The reason class of a charge's undecidable answer, from the connector's error text
/// (`channel::http`: "timeout after …", "unexpected answer 5xx: …", "connect error …" /
/// "transport error …"); anything else (a 2xx or 4xx the core cannot read, a charge for
/// another amount) is `garbled`.
pub fn undecidable_reason(detail: &str) -> FailureReason {
    if detail.starts_with("timeout") {
        FailureReason::Timeout
    } else if detail
        .strip_prefix("unexpected answer 5")
        .is_some_and(|rest| rest.as_bytes().get(2) == Some(&b':'))
    {
        FailureReason::ServerError
    } else if detail.starts_with("connect error") || detail.starts_with("transport error") {
        FailureReason::Dropped
    } else {
        FailureReason::Garbled
    }
}

/// The `q`-quantile (0..=1) of `sorted` durations by the nearest-rank method; None when empty.
pub fn percentile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_turns_amber_then_red_at_the_thresholds() {
        let t = ChannelThresholds {
            amber_pct: 10,
            red_pct: 30,
        };
        assert_eq!(t.level(0, 0), HealthLevel::Ok);
        assert_eq!(t.level(100, 9), HealthLevel::Ok);
        assert_eq!(t.level(100, 10), HealthLevel::Amber);
        assert_eq!(t.level(10, 2), HealthLevel::Amber);
        assert_eq!(t.level(10, 3), HealthLevel::Red);
        assert_eq!(t.level(312, 199), HealthLevel::Red);
        assert_eq!(t.level(7, 0), HealthLevel::Ok);
    }

    #[test]
    fn red_wins_when_the_thresholds_are_equal() {
        let t = ChannelThresholds {
            amber_pct: 20,
            red_pct: 20,
        };
        assert_eq!(t.level(5, 1), HealthLevel::Red);
        assert_eq!(t.level(6, 1), HealthLevel::Ok);
    }

    #[test]
    fn undecidable_answers_are_classed_by_the_connector_s_text() {
        assert_eq!(
            undecidable_reason("timeout after 300 ms while sending request"),
            FailureReason::Timeout
        );
        assert_eq!(
            undecidable_reason("unexpected answer 503: busy"),
            FailureReason::ServerError
        );
        assert_eq!(
            undecidable_reason("transport error while reading body: connection reset"),
            FailureReason::Dropped
        );
        assert_eq!(
            undecidable_reason("connect error while sending request: refused"),
            FailureReason::Dropped
        );
        assert_eq!(
            undecidable_reason("unexpected answer 200: {"),
            FailureReason::Garbled
        );
        assert_eq!(
            undecidable_reason("unexpected answer 5000: x"),
            FailureReason::Garbled
        );
        assert_eq!(
            undecidable_reason("channel charged 1.00 CNY, payment is 2.00 CNY"),
            FailureReason::Garbled
        );
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let d: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&d, 0.5), Some(50));
        assert_eq!(percentile(&d, 0.99), Some(99));
        assert_eq!(percentile(&[7], 0.99), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
