//! What "stuck" means (DESIGN.md "Compensation queue and error pool": a non-terminal payment
//! older than its per-state threshold; defaults PENDING 1 min, PROCESSING 2 min, UNKNOWN
//! 5 min, CHANNEL_SUCCESS 1 min, SUSPENSE at once; REQUIRES_ACTION 15 min, issue 38). Age
//! is time in the current state (since `updated_at`).

use crate::domain::state::PaymentStatus;

/// Per-state thresholds in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StuckThresholds {
    /// PENDING longer than this is stuck.
    pub pending_ms: i64,
    /// PROCESSING longer than this is stuck.
    pub processing_ms: i64,
    /// UNKNOWN longer than this is stuck.
    pub unknown_ms: i64,
    /// CHANNEL_SUCCESS longer than this is stuck.
    pub channel_success_ms: i64,
    /// SUSPENSE longer than this is stuck (0: at once).
    pub suspense_ms: i64,
    /// AUTHORIZING longer than this is stuck (a hold's authorization, issue 34).
    pub authorizing_ms: i64,
    /// CAPTURING longer than this is stuck.
    pub capturing_ms: i64,
    /// VOIDING longer than this is stuck.
    pub voiding_ms: i64,
    /// REQUIRES_ACTION (waiting for the customer's 3-D Secure step, issue 38) longer than
    /// this is stuck: customers give up long before the action window ends.
    pub requires_action_ms: i64,
    /// The dashboard's other thresholds travel with these (the dashboard and the monitor take
    /// one set): when a connector's channel-health tile turns amber and red.
    pub channel: crate::domain::channel_health::ChannelThresholds,
}

impl Default for StuckThresholds {
    fn default() -> Self {
        StuckThresholds {
            pending_ms: 60_000,
            processing_ms: 120_000,
            unknown_ms: 300_000,
            channel_success_ms: 60_000,
            suspense_ms: 0,
            authorizing_ms: 120_000,
            capturing_ms: 120_000,
            voiding_ms: 120_000,
            requires_action_ms: 900_000,
            channel: Default::default(),
        }
    }
}

/// How many states can be stuck (every unsettled one).
pub const STUCK_STATES: usize = 9;

/// A threshold or cut-off per state that can be stuck.
pub type PerState = [(PaymentStatus, i64); STUCK_STATES];

impl StuckThresholds {
    /// The states that can be stuck, each with its threshold in ms.
    pub fn per_state(&self) -> PerState {
        [
            (PaymentStatus::Pending, self.pending_ms),
            (PaymentStatus::Authorizing, self.authorizing_ms),
            (PaymentStatus::Processing, self.processing_ms),
            (PaymentStatus::RequiresAction, self.requires_action_ms),
            (PaymentStatus::Unknown, self.unknown_ms),
            (PaymentStatus::Capturing, self.capturing_ms),
            (PaymentStatus::ChannelSuccess, self.channel_success_ms),
            (PaymentStatus::Suspense, self.suspense_ms),
            (PaymentStatus::Voiding, self.voiding_ms),
        ]
    }

    /// `updated_at` cut-offs (epoch ms) at `now`: a payment in that state updated at or
    /// before its cut-off is stuck.
    pub fn cutoffs(&self, now: i64) -> PerState {
        self.per_state().map(|(s, t)| (s, now - t))
    }
}

/// Age buckets the console and `/metrics` group stuck payments by, with their upper bounds
/// in ms (the last is open). Defined in `converge-wire`, where the console reads the names.
pub use converge_wire::dashboard::AGE_BUCKETS;

/// The bucket of an age in ms.
pub fn bucket(age_ms: i64) -> &'static str {
    AGE_BUCKETS
        .iter()
        .find(|(_, upper)| age_ms < *upper)
        .map_or(AGE_BUCKETS[AGE_BUCKETS.len() - 1].0, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_states_that_can_be_stuck_are_exactly_the_unsettled_ones() {
        let stuckable: Vec<_> = StuckThresholds::default()
            .per_state()
            .map(|(s, _)| s)
            .to_vec();
        for s in PaymentStatus::ALL {
            assert_eq!(stuckable.contains(&s), !s.is_settled(), "{s}");
        }
    }

    #[test]
    fn defaults_match_the_design() {
        let t = StuckThresholds::default();
        assert_eq!(t.pending_ms, 60_000);
        assert_eq!(t.processing_ms, 120_000);
        assert_eq!(t.unknown_ms, 300_000);
        assert_eq!(t.channel_success_ms, 60_000);
        assert_eq!(t.suspense_ms, 0);
    }

    #[test]
    fn buckets_cover_every_age() {
        assert_eq!(bucket(0), "<5m");
        assert_eq!(bucket(299_999), "<5m");
        assert_eq!(bucket(300_000), "5m-1h");
        assert_eq!(bucket(86_400_000), ">24h");
        assert_eq!(bucket(i64::MAX), ">24h");
    }
}
