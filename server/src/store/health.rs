//! Storage for channel health (issue 41; DESIGN.md "Ops console": channel health per
//! connector): one record per charge attempt at a connector (`channel_attempts`, migration
//! 0125) and the reads the dashboard makes of them. Part of the storage abstraction;
//! conformance-tested on both backends (tests/it/channel_health.rs).

use async_trait::async_trait;

use super::StoreError;

pub use converge_wire::dashboard::FailureGroup;

/// A charge attempt to record: what a connector answered and how long it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChannelAttempt {
    /// The payment charged.
    pub payment_id: String,
    /// The connector it went to (`payments.connector`).
    pub connector: String,
    /// How it was answered.
    pub outcome: converge_wire::AttemptOutcome,
    /// `None` for a success, else the reason ([`FailureReason::key`] is stored).
    ///
    /// [`FailureReason::key`]: converge_wire::FailureReason::key
    pub reason: Option<converge_wire::FailureReason>,
    /// From sending the request to having the answer, ms (negative is stored as 0).
    pub duration_ms: i64,
    /// When the answer came, epoch ms UTC.
    pub at: i64,
}

/// A recorded attempt as the dashboard reads it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ChannelAttemptRow {
    /// Connector name.
    pub connector: String,
    /// `success`, `decline` or `undecidable` ([`AttemptOutcome`](converge_wire::AttemptOutcome)).
    pub outcome: String,
    /// Duration, ms.
    pub duration_ms: i64,
    /// Epoch ms UTC.
    pub created_at: i64,
}

/// Charge attempts per connector, and failures by reason.
#[async_trait]
pub trait ChannelHealth: Send + Sync + 'static {
    /// Records one charge attempt.
    async fn record_channel_attempt(&self, a: &NewChannelAttempt) -> Result<(), StoreError>;
    /// Every attempt answered at or after `since` (epoch ms), oldest first. One narrow row
    /// per attempt (read over `channel_attempts_created`): the dashboard's percentiles need
    /// the durations themselves.
    async fn channel_attempts_since(
        &self,
        since: i64,
    ) -> Result<Vec<ChannelAttemptRow>, StoreError>;
    /// Failures at or after `since` grouped by reason key: every attempt that was not a
    /// success (by its stored reason), and `fenced` for the applied `query_not_found_fenced`
    /// events (payments whose key was cancelled after no charge was found); most frequent
    /// first, then by key. A reason without failures is absent.
    async fn failure_groups_since(&self, since: i64) -> Result<Vec<FailureGroup>, StoreError>;
    /// Deletes the attempts answered before `before` (epoch ms); returns how many.
    async fn purge_channel_attempts(&self, before: i64) -> Result<u64, StoreError>;
}

/// The condition of the payments list's failure-reason filter on `payments` (unaliased)
/// with the reason key bound at `$n`: the payment had a charge attempt with that reason, or,
/// for `fenced`, its key was fenced. Valid on both backends.
pub fn reason_condition(n: usize) -> String {
    format!(
        "(EXISTS (SELECT 1 FROM channel_attempts a WHERE a.payment_id = payments.id AND a.reason = ${n}) \
         OR (${n} = 'fenced' AND EXISTS (SELECT 1 FROM payment_events e WHERE e.payment_id = payments.id \
         AND e.event = 'query_not_found_fenced' AND e.applied)))"
    )
}
