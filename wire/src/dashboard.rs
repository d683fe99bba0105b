//! The dashboard: stuck payments, Idempotency-Key outcomes, the compensation queue, the error
//! pool, merchant notifications and the event-stream relay.

use serde::{Deserialize, Serialize};

use crate::error_pool::ErrorItem;
use crate::webhooks::WebhookBacklog;

/// Everything the dashboard shows, computed at `generated_at` (epoch ms UTC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Dashboard {
    /// Epoch ms UTC.
    pub generated_at: i64,
    /// Stuck payments.
    pub stuck: StuckView,
    /// Idempotency-Key outcomes.
    pub idempotency: IdempotencyView,
    /// The compensation queue.
    pub queue: QueueView,
    /// The error pool.
    pub error_pool: ErrorPoolView,
    /// Merchant notifications: deliveries waiting and dead, failed attempts in the last hour.
    pub webhooks: WebhookBacklog,
    /// The event-stream relay: running, connected, backlog and lag.
    pub relay: RelayStatus,
}

/// Age buckets stuck payments are grouped by (the console's stuck table, `/metrics`), youngest
/// first, each with its upper bound in ms (the last is open). Defined here, once, because the
/// console names the buckets as columns; the server's `domain::stuck` re-exports it and
/// buckets ages by it, and [`StuckView::counts`] carries these names.
pub const AGE_BUCKETS: [(&str, i64); 4] = [
    ("<5m", 300_000),
    ("5m-1h", 3_600_000),
    ("1h-24h", 86_400_000),
    (">24h", i64::MAX),
];

/// Stuck payments by state and age bucket, with the thresholds and the oldest items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct StuckView {
    /// (state, threshold ms).
    pub thresholds: Vec<(String, i64)>,
    /// (state, bucket, count).
    pub counts: Vec<(String, String, i64)>,
    /// Total stuck.
    pub total: i64,
    /// The oldest stuck payments.
    pub oldest: Vec<StuckPayment>,
}

impl StuckView {
    /// The count of `state` in `bucket` (0 when absent).
    pub fn count(&self, state: &str, bucket: &str) -> i64 {
        self.counts
            .iter()
            .filter(|(s, b, _)| s == state && b == bucket)
            .map(|c| c.2)
            .sum()
    }
}

/// A stuck payment with what the console needs to act on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct StuckPayment {
    /// Payment id.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// Status name.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
    pub status: crate::PaymentStatus,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Entered the current state, epoch ms UTC.
    pub updated_at: i64,
    /// Last error.
    pub last_error: Option<String>,
    /// Earliest due or leased job, epoch ms UTC.
    pub next_attempt_at: Option<i64>,
}

/// Hit rate over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct HitRate {
    /// `5m`, `1h` or `24h`.
    pub window: String,
    /// Requests that carried a usable key (first, replay, in_use, reused).
    pub keyed: i64,
    /// Replays among them.
    pub replays: i64,
    /// replays / keyed, 0..=1 (0 when there were none).
    pub rate: f64,
}

/// Outcome counts of one route over 24 h.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RouteOutcomes {
    /// `POST /v1/payments`, ...
    pub route: String,
    /// (outcome, count) in [`Outcome::ALL`] order.
    pub counts: Vec<(String, i64)>,
}

/// One minute of the last hour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct MinutePoint {
    /// Epoch minute.
    pub minute: i64,
    /// Keyed requests.
    pub keyed: i64,
    /// Replays.
    pub replays: i64,
}

/// Idempotency-Key figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct IdempotencyView {
    /// 5 min, 1 h and 24 h.
    pub windows: Vec<HitRate>,
    /// Per route, 24 h.
    pub routes: Vec<RouteOutcomes>,
    /// Per minute, last 60 minutes (minutes without requests omitted).
    pub series: Vec<MinutePoint>,
}

/// One job kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct QueueRow {
    /// Kind.
    pub kind: String,
    /// Due now or later, never tried.
    pub due: i64,
    /// Leased to a worker.
    pub leased: i64,
    /// Due again after a failure.
    pub retrying: i64,
    /// In the error pool.
    pub dead: i64,
    /// Finished in the last hour.
    pub done: i64,
    /// Age of the oldest due job, ms (0 when none is due yet).
    pub oldest_due_ms: i64,
}

/// The queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct QueueView {
    /// Per kind.
    pub kinds: Vec<QueueRow>,
    /// Jobs finished in the last 5 minutes: the current minute (UTC) and the four before it,
    /// as the Idempotency-Key outcome windows.
    pub done_last_5m: i64,
}

/// The error pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ErrorPoolView {
    /// (kind, open count, oldest first_seen ms).
    pub open_by_kind: Vec<(String, i64, i64)>,
    /// Open items in all.
    pub open_total: i64,
    /// The newest open items.
    pub recent: Vec<ErrorItem>,
}

/// The relay's state as the dashboard shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RelayStatus {
    /// A relay holds (or held) the publishing lease.
    pub configured: bool,
    /// The lease holder is live (its lease has not lapsed).
    pub running: bool,
    /// It is connected to the broker.
    pub connected: bool,
    /// Its last error.
    pub last_error: Option<String>,
    /// Its last heartbeat, epoch ms UTC.
    pub heartbeat_at: Option<i64>,
    /// Events not yet published.
    pub backlog: i64,
    /// Creation of the oldest unpublished event, epoch ms UTC.
    pub oldest_unpublished_at: Option<i64>,
    /// Events the broker refused.
    pub refused: i64,
}
