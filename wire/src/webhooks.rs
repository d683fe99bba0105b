//! Merchant notifications: the outbox's events, their deliveries and attempts, the
//! endpoints as ops staff see them, and the backlog; and the event types themselves, which
//! the console's filters offer and the server's domain re-exports (`domain::webhooks`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::PaymentStatus;

/// An outbox row (Debezium Outbox Event Router column names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct OutboxEvent {
    /// Insertion order.
    pub seq: i64,
    /// UUIDv7: sortable, the `webhook-id` of every delivery of this event.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// `payment` or `refund`.
    pub aggregatetype: String,
    /// The payment or refund id.
    pub aggregateid: String,
    /// `payment.succeeded`, ... ([`EventType`](crate::domain::webhooks::EventType)).
    #[serde(rename = "type")]
    #[cfg_attr(feature = "sqlx", sqlx(rename = "type"))]
    pub event_type: String,
    /// JSON text: the payment or refund as the merchant API shows it, with `version`.
    pub payload: String,
    /// Commit time, epoch ms UTC.
    pub created_at: i64,
}

/// A delivery with what lists show beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct DeliveryRow {
    /// Id.
    pub id: i64,
    /// The event (`webhook-id`).
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// The event's aggregate (payment or refund id).
    pub aggregateid: String,
    /// Endpoint.
    pub endpoint_id: String,
    /// Endpoint URL.
    pub url: String,
    /// Merchant.
    pub merchant_id: i64,
    /// `pending`, `succeeded`, `dead`, `abandoned`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
    pub status: crate::DeliveryStatus,
    /// Attempts made.
    pub attempts: i64,
    /// Next attempt, epoch ms UTC.
    pub next_attempt_at: Option<i64>,
    /// Last HTTP status received.
    pub last_status: Option<i64>,
    /// Last error.
    pub last_error: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
    /// Epoch ms UTC.
    pub delivered_at: Option<i64>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct AttemptRow {
    /// Id.
    pub id: i64,
    /// Delivery.
    pub delivery_id: i64,
    /// Epoch ms UTC.
    pub attempted_at: i64,
    /// Wall time of the request, ms.
    pub duration_ms: i64,
    /// HTTP status, None when no answer came.
    pub status_code: Option<i64>,
    /// The first KiB of the answer's body (lossy UTF-8).
    pub response: String,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Queue figures for the dashboard and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct WebhookBacklog {
    /// Deliveries waiting (pending).
    pub pending: i64,
    /// Dead deliveries.
    pub dead: i64,
    /// Creation time of the oldest pending delivery, epoch ms UTC.
    pub oldest_pending_at: Option<i64>,
    /// Failed attempts since the window start.
    pub failed_attempts: i64,
}

/// An endpoint as ops staff see it: no secret, with its merchant and 24 h health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct EndpointRow {
    /// Id.
    pub id: String,
    /// Merchant name.
    pub merchant: String,
    /// URL.
    pub url: String,
    /// Event types (or `*`).
    pub enabled_events: Vec<String>,
    /// Free text.
    pub description: String,
    /// `enabled`, `disabled`, `deleted`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub status: crate::EndpointStatus,
    /// Why disabled.
    pub disabled_reason: Option<String>,
    /// Start of the current failure run, epoch ms UTC.
    pub failing_since: Option<i64>,
    /// Attempts in 24 h.
    pub attempts_24h: i64,
    /// Of which 2xx.
    pub succeeded_24h: i64,
    /// Last failed attempt, epoch ms UTC.
    pub last_failure_at: Option<i64>,
    /// Its error.
    pub last_failure: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Its circuit breaker (issue 37): `closed`, `open` (deliveries wait, without attempts,
    /// until `breaker_open_until`) or `half_open` (the next delivery is the one probe).
    #[serde(default)]
    pub breaker: BreakerStatus,
    /// While the breaker is open: the end of its cool-down, epoch ms UTC.
    #[serde(default)]
    pub breaker_open_until: Option<i64>,
}

/// The state of a webhook endpoint's circuit breaker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BreakerStatus {
    /// Deliveries are attempted.
    #[default]
    Closed,
    /// A run of failures opened it: deliveries wait out the cool-down.
    Open,
    /// The cool-down is over: one probe attempt decides (success closes, failure reopens
    /// with a longer cool-down).
    HalfOpen,
}

impl BreakerStatus {
    /// As the console shows it: `closed`, `open`, `half-open`.
    pub fn label(self) -> &'static str {
        match self {
            BreakerStatus::Closed => "closed",
            BreakerStatus::Open => "open",
            BreakerStatus::HalfOpen => "half-open",
        }
    }
}

/// Every webhook endpoint with its 24 h health, and the delivery backlog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "utoipa", schema(as = Overview))]
pub struct WebhooksOverview {
    /// Every endpoint of every merchant, newest first.
    pub endpoints: Vec<EndpointRow>,
    /// Deliveries waiting and dead, and failed attempts in 24 h.
    pub backlog: WebhookBacklog,
    /// The server's time, epoch ms UTC.
    pub now: i64,
}

/// An event-type filter: an event type, or empty for all. Declared beside [`EventType`] so the
/// schema module needs nothing of this one (the server's `schema` module re-exports it).
#[cfg(feature = "utoipa")]
pub fn event_type_filter_schema() -> utoipa::openapi::Object {
    crate::schema::filter_of(&EventType::ALL.map(|t| t.as_str()))
}

/// The filters of the console's webhook delivery search (`GET /ops/v1/webhooks/deliveries`
/// and the webhooks page; all optional, blank means "any"). The server checks them: an
/// unknown status or event type, a malformed time is a 400 with a stable code.
#[derive(Debug, Deserialize, Default, Clone, PartialEq, Eq, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "utoipa", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "utoipa", into_params(parameter_in = Query))]
pub struct DeliverySearch {
    /// `pending`, `succeeded`, `dead`, `abandoned` (empty: all).
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::delivery_status_filter_schema))]
    pub status: Option<String>,
    /// Endpoint id.
    pub endpoint: Option<String>,
    /// Event type (empty: all).
    #[serde(rename = "type")]
    #[cfg_attr(feature = "utoipa", param(schema_with = event_type_filter_schema))]
    pub event_type: Option<String>,
    /// Created at or after: RFC 3339 or `YYYY-MM-DD` (UTC).
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::time_filter_schema))]
    pub from: Option<String>,
    /// Created before: RFC 3339 or `YYYY-MM-DD` (UTC).
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::time_filter_schema))]
    pub to: Option<String>,
    /// A payment's deliveries (its events and its refunds' events).
    pub payment: Option<String>,
    /// At most this many (1..=500, default 100; others are clamped).
    pub limit: Option<i64>,
    /// The next (older) page: deliveries with an id below this (the last id of a page).
    #[cfg_attr(feature = "utoipa", param(minimum = 1))]
    pub before: Option<i64>,
}

/// A delivery with its attempts and its event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DeliveryDetail {
    /// The delivery.
    pub delivery: DeliveryRow,
    /// Its attempts, oldest first.
    pub attempts: Vec<AttemptRow>,
    /// Its event (None once purged).
    pub event: Option<OutboxEvent>,
}

/// A payment's events (and its refunds') with their deliveries: the payment page's
/// notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentWebhooks {
    /// Events of the payment and its refunds.
    pub events: Vec<OutboxEvent>,
    /// Their deliveries, newest first (at most 200).
    pub deliveries: Vec<DeliveryRow>,
}

/// The outcomes merchants are told about. Each is written once per aggregate (payment or
/// refund) and occurrence (a capture, for `payment.captured`: one per capture), in the
/// transaction of the transition that causes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// The payment was charged and posted (SUCCESS).
    PaymentSucceeded,
    /// The payment failed (FAILED): declined, or proven never charged.
    PaymentFailed,
    /// An ops reversal refunded what remained (REVERSED).
    PaymentReversed,
    /// Merchant refunds reached the amount (REFUNDED).
    PaymentRefunded,
    /// A refund was confirmed by the channel.
    RefundSucceeded,
    /// A refund was declined by the channel; its amount is refundable again.
    RefundFailed,
    /// A manual-capture payment's funds are held (AUTHORIZED; issue 34).
    PaymentAuthorized,
    /// A capture of a hold was made: one per capture, with its amount.
    PaymentCaptured,
    /// A hold was released by a void (VOIDED).
    PaymentVoided,
    /// A hold lapsed before anything was captured (EXPIRED).
    PaymentExpired,
    /// A payment was cancelled before it reached the channel (CANCELED).
    PaymentCanceled,
    /// The channel waits for the customer to authenticate (REQUIRES_ACTION; 3-D Secure,
    /// issue 38): the merchant brings the customer to the channel's challenge; the payment
    /// fails if nobody acts within the action window.
    PaymentRequiresAction,
}

impl EventType {
    /// Every type.
    pub const ALL: [EventType; 12] = [
        EventType::PaymentSucceeded,
        EventType::PaymentFailed,
        EventType::PaymentReversed,
        EventType::PaymentRefunded,
        EventType::RefundSucceeded,
        EventType::RefundFailed,
        EventType::PaymentAuthorized,
        EventType::PaymentCaptured,
        EventType::PaymentVoided,
        EventType::PaymentExpired,
        EventType::PaymentCanceled,
        EventType::PaymentRequiresAction,
    ];

    /// The stable name (`payment.succeeded`, ...), the `type` column and the webhook body's
    /// `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::PaymentSucceeded => "payment.succeeded",
            EventType::PaymentFailed => "payment.failed",
            EventType::PaymentReversed => "payment.reversed",
            EventType::PaymentRefunded => "payment.refunded",
            EventType::RefundSucceeded => "refund.succeeded",
            EventType::RefundFailed => "refund.failed",
            EventType::PaymentAuthorized => "payment.authorized",
            EventType::PaymentCaptured => "payment.captured",
            EventType::PaymentVoided => "payment.voided",
            EventType::PaymentExpired => "payment.expired",
            EventType::PaymentCanceled => "payment.canceled",
            EventType::PaymentRequiresAction => "payment.requires_action",
        }
    }

    /// The Debezium `aggregatetype`: `payment` or `refund`.
    pub fn aggregate_type(self) -> &'static str {
        match self {
            EventType::PaymentSucceeded
            | EventType::PaymentFailed
            | EventType::PaymentReversed
            | EventType::PaymentRefunded
            | EventType::PaymentAuthorized
            | EventType::PaymentCaptured
            | EventType::PaymentVoided
            | EventType::PaymentExpired
            | EventType::PaymentCanceled
            | EventType::PaymentRequiresAction => "payment",
            EventType::RefundSucceeded | EventType::RefundFailed => "refund",
        }
    }

    /// The event a payment's arrival in `status` emits, if that status is an outcome.
    pub fn for_payment_status(status: PaymentStatus) -> Option<EventType> {
        match status {
            PaymentStatus::Success => Some(EventType::PaymentSucceeded),
            PaymentStatus::Failed => Some(EventType::PaymentFailed),
            PaymentStatus::Reversed => Some(EventType::PaymentReversed),
            PaymentStatus::Refunded => Some(EventType::PaymentRefunded),
            // Entered again after each partial capture: written once (the event's key).
            PaymentStatus::Authorized => Some(EventType::PaymentAuthorized),
            PaymentStatus::Voided => Some(EventType::PaymentVoided),
            PaymentStatus::Expired => Some(EventType::PaymentExpired),
            PaymentStatus::Canceled => Some(EventType::PaymentCanceled),
            PaymentStatus::RequiresAction => Some(EventType::PaymentRequiresAction),
            PaymentStatus::Pending
            | PaymentStatus::Authorizing
            | PaymentStatus::Processing
            | PaymentStatus::Unknown
            | PaymentStatus::Capturing
            | PaymentStatus::Voiding
            | PaymentStatus::ChannelSuccess
            | PaymentStatus::Suspense => None,
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown event type {s:?}; known: {}",
                    EventType::ALL.map(EventType::as_str).join(", ")
                )
            })
    }
}
