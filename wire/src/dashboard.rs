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
    /// Channel health per connector, and the last day's failures by reason.
    pub channels: ChannelHealthView,
    /// Manual-capture holds that lapse within the next 24 hours (issue 34).
    #[serde(default)]
    pub holds: HoldsExpiring,
}

/// The manual-capture holds that lapse soon (issue 34): AUTHORIZED payments whose hold
/// expires before `before` (the dashboard's time plus 24 hours), those already past their
/// expiry and not yet released by the expiry job included. Amounts in integer minor units.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct HoldsExpiring {
    /// The cut-off, epoch ms UTC.
    pub before: i64,
    /// How many holds.
    pub count: i64,
    /// What they still hold, per currency: (ISO 4217 code, integer minor units), by code.
    pub held: Vec<(String, i64)>,
    /// The soonest expiry among them, epoch ms UTC (None when there is none).
    pub oldest_expiry: Option<i64>,
}

impl HoldsExpiring {
    /// The panel from per-currency rows (currency, count, held minor units, soonest expiry),
    /// as the store reads them.
    pub fn of(before: i64, rows: Vec<(String, i64, i64, i64)>) -> HoldsExpiring {
        HoldsExpiring {
            before,
            count: rows.iter().map(|r| r.1).sum(),
            oldest_expiry: rows.iter().map(|r| r.3).min(),
            held: rows.into_iter().map(|(c, _, held, _)| (c, held)).collect(),
        }
    }
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
    /// Its jobs a retry would wake now (due or dead ones).
    #[serde(default)]
    pub wakeable_jobs: i64,
    /// Why a retry would do nothing now (no job to wake), as the server's action rule says;
    /// empty when it would wake something (issue 41: the stuck list offered Retry on every
    /// row). Set by the dashboard, not stored.
    #[serde(default)]
    #[cfg_attr(feature = "sqlx", sqlx(default))]
    pub retry_why: String,
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
    /// Per lane (issue 37): forward, compensation, delivery, background.
    #[serde(default)]
    pub lanes: Vec<LaneRow>,
}

/// One lane's backlog (issue 37, "Console and metrics"): what is due and running in the
/// database across every process, and who holds the backlog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct LaneRow {
    /// `forward`, `compensation`, `delivery` or `background`.
    pub lane: String,
    /// Due jobs now.
    pub due: i64,
    /// Jobs leased to a worker, their lease holding.
    pub running: i64,
    /// The oldest due job's due time, epoch ms UTC (None when nothing is due).
    pub oldest_due_at: Option<i64>,
    /// The merchants with the most due jobs in the lane, most first, at most 5: (merchant
    /// name, or "(none)" for jobs of no merchant; due jobs).
    pub top: Vec<(String, i64)>,
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

/// How a charge attempt at a connector was answered (`channel_attempts.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Charged.
    Success,
    /// Explicitly and decidably declined.
    Decline,
    /// Timeout, 5xx, dropped connection or garbled answer: the outcome is unknown.
    Undecidable,
}

impl AttemptOutcome {
    /// The stable name stored and sent (`success`, `decline`, `undecidable`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Decline => "decline",
            Self::Undecidable => "undecidable",
        }
    }

    /// The outcome named `s`, if any.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Success, Self::Decline, Self::Undecidable]
            .into_iter()
            .find(|o| o.as_str() == s)
    }
}

/// Why a charge failed or went undecided, as the dashboard groups failures and the payments
/// list filters by them. Its [`key`](Self::key) is what `channel_attempts.reason` stores and
/// the payments list's `reason` filter takes: `decline:<the connector's reason>`, `timeout`,
/// `5xx`, `dropped`, `garbled`, or `fenced` (the key was cancelled at the channel after the
/// resubmit budget: the payment failed without a decline).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// Declined, with the connector's reason.
    Declined(String),
    /// No answer in time.
    Timeout,
    /// A 5xx answer.
    ServerError,
    /// The connection failed or dropped.
    Dropped,
    /// An answer the core cannot read or that does not match the payment.
    Garbled,
    /// The key was fenced after a query found nothing.
    Fenced,
}

impl FailureReason {
    /// Longest connector decline reason kept in a key, in bytes (longer ones are cut on a
    /// character boundary), so a key stays a short filter value.
    pub const MAX_DECLINE_REASON: usize = 64;

    /// The stable key (see the type's docs).
    pub fn key(&self) -> String {
        match self {
            Self::Declined(r) => format!("decline:{r}"),
            Self::Timeout => "timeout".into(),
            Self::ServerError => "5xx".into(),
            Self::Dropped => "dropped".into(),
            Self::Garbled => "garbled".into(),
            Self::Fenced => "fenced".into(),
        }
    }

    /// The reason a key names; None for anything else (an empty decline reason included).
    pub fn parse(key: &str) -> Option<Self> {
        Some(match key {
            "timeout" => Self::Timeout,
            "5xx" => Self::ServerError,
            "dropped" => Self::Dropped,
            "garbled" => Self::Garbled,
            "fenced" => Self::Fenced,
            _ => {
                let r = key.strip_prefix("decline:")?;
                // Characters, as the filter's schema counts them; no NUL (PostgreSQL text).
                if r.is_empty() || r.chars().count() > Self::MAX_DECLINE_REASON || r.contains('\0')
                {
                    return None;
                }
                Self::Declined(r.to_owned())
            }
        })
    }

    /// A decline with the connector's `reason`, cut to [`Self::MAX_DECLINE_REASON`] bytes.
    pub fn declined(reason: &str) -> Self {
        let mut end = reason.len().min(Self::MAX_DECLINE_REASON);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let r = &reason[..end];
        Self::Declined(if r.is_empty() { "declined" } else { r }.to_owned())
    }

    /// What a person reads for a key: "Declined: insufficient_funds", "Timeout", "5xx answer",
    /// "Dropped connection", "Garbled answer", "Fenced (no charge found)"; the key itself
    /// when it names no reason.
    pub fn label_of(key: &str) -> String {
        match Self::parse(key) {
            Some(Self::Declined(r)) => format!("Declined: {r}"),
            Some(Self::Timeout) => "Timeout".into(),
            Some(Self::ServerError) => "5xx answer".into(),
            Some(Self::Dropped) => "Dropped connection".into(),
            Some(Self::Garbled) => "Garbled answer".into(),
            Some(Self::Fenced) => "Fenced (no charge found)".into(),
            None => key.to_owned(),
        }
    }
}

/// A connector's tile colour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HealthLevel {
    /// Below the amber threshold (or no attempts).
    #[default]
    Ok,
    /// At or above the amber threshold.
    Amber,
    /// At or above the red threshold.
    Red,
}

impl HealthLevel {
    /// `ok`, `amber`, `red`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Amber => "amber",
            Self::Red => "red",
        }
    }
}

/// Charge attempts of one connector in one bucket of time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct HealthBucket {
    /// Start of the bucket, epoch ms UTC (a whole minute or hour).
    pub start: i64,
    /// Charge attempts sent.
    pub attempts: i64,
    /// Charged.
    pub successes: i64,
    /// Declined.
    pub declines: i64,
    /// Undecidable answers: timeouts, 5xx, dropped connections, garbled answers.
    pub undecidable: i64,
    /// Median duration of the attempts, ms (None without attempts).
    pub p50_ms: Option<i64>,
    /// 99th percentile duration, ms (None without attempts).
    pub p99_ms: Option<i64>,
}

/// One connector's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ConnectorHealth {
    /// The connector's name (`payments.connector`).
    pub connector: String,
    /// The tile's colour, from the undecidable share of the last five minutes.
    pub level: HealthLevel,
    /// The last five minutes, summed (what `level` is decided on; `start` is its first minute).
    pub last_5m: HealthBucket,
    /// The last hour, summed.
    pub last_hour: HealthBucket,
    /// The last 60 minutes, one bucket per minute, oldest first (every minute, zeros included).
    pub minutes: Vec<HealthBucket>,
    /// The last 24 hours, one bucket per hour, oldest first (every hour, zeros included).
    pub hours: Vec<HealthBucket>,
}

/// Failures of one reason over the last 24 hours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct FailureGroup {
    /// The reason's key ([`FailureReason::key`]), the payments list's `reason` filter.
    pub reason: String,
    /// Attempts (or, for `fenced`, payments) with this reason.
    pub count: i64,
    /// The newest, epoch ms UTC.
    pub last_at: i64,
}

/// Channel health on the dashboard.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ChannelHealthView {
    /// Amber from this undecidable share, percent (`--channel-amber-pct`).
    pub amber_pct: u32,
    /// Red from this undecidable share, percent (`--channel-red-pct`).
    pub red_pct: u32,
    /// Per connector that had attempts in the last 24 hours, by name.
    pub connectors: Vec<ConnectorHealth>,
    /// Failures of the last 24 hours by reason, most frequent first.
    pub failures: Vec<FailureGroup>,
}
