//! The outbox and merchant webhooks in storage (DESIGN.md "Outbox, merchant notifications,
//! event stream"; seed 004 §6.1: the event row is written in the local transaction of the
//! state change, delivery follows with backoff). Events are inserted by the transitions
//! themselves (`apply_transition`, `refund_succeeded`, `refund_failed`), each with one
//! delivery and one `webhook` job per subscribed enabled endpoint in the same transaction.
//! Part of the storage abstraction: [`Store`](super::Store) requires it, and the conformance
//! suite runs it on both backends.

use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use serde::Serialize;

use super::StoreError;
use crate::domain::audit::AuditEntry;
pub use crate::domain::breaker::{BreakerPolicy, BreakerState};
pub use crate::domain::webhooks::{DeliveryStatus, EndpointStatus};

/// How new deliveries are scheduled, set once at start-up from the retry schedule: the
/// store writes each delivery's job in the event's transaction and needs its first delay
/// and attempt count there.
#[derive(Debug)]
pub struct WebhookPlan {
    attempts: AtomicI64,
    first_delay_ms: AtomicI64,
}

impl Default for WebhookPlan {
    fn default() -> Self {
        // The default schedule (domain::webhooks::DEFAULT_SCHEDULE): 9 attempts, the first
        // at once.
        WebhookPlan {
            attempts: AtomicI64::new(9),
            first_delay_ms: AtomicI64::new(0),
        }
    }
}

impl WebhookPlan {
    /// Sets the plan.
    pub fn set(&self, attempts: i64, first_delay_ms: i64) {
        self.attempts.store(attempts, Ordering::Relaxed);
        self.first_delay_ms.store(first_delay_ms, Ordering::Relaxed);
    }
    /// Attempts in the schedule.
    pub fn attempts(&self) -> i64 {
        self.attempts.load(Ordering::Relaxed)
    }
    /// Delay of the first attempt, ms.
    pub fn first_delay_ms(&self) -> i64 {
        self.first_delay_ms.load(Ordering::Relaxed)
    }
}

pub use converge_wire::OutboxEvent;

/// A webhook endpoint as stored. The secrets are only ever shown to the merchant once
/// (creation, rotation); everything else reads [`WebhookEndpoint::public`].
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct WebhookEndpoint {
    /// `we_` + 24 hex.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// Where deliveries are POSTed.
    pub url: String,
    /// Free text.
    pub description: String,
    /// Stored subscription (`,a,b,` or `,*,`).
    pub enabled_events: String,
    /// `whsec_...`.
    pub secret: String,
    /// The secret before the last rotation, still signing until `previous_expires_at`.
    pub previous_secret: Option<String>,
    /// Epoch ms UTC.
    pub previous_expires_at: Option<i64>,
    /// `enabled`, `disabled` or `deleted`.
    #[sqlx(try_from = "String")]
    pub status: EndpointStatus,
    /// Why it is disabled.
    pub disabled_reason: Option<String>,
    /// Start of the current run of failed attempts, epoch ms UTC (None after a success).
    pub failing_since: Option<i64>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
}

/// A new endpoint.
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    /// `we_...`.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// URL (already checked).
    pub url: String,
    /// Free text.
    pub description: String,
    /// Stored subscription.
    pub enabled_events: String,
    /// `whsec_...`.
    pub secret: String,
    /// Epoch ms UTC.
    pub now: i64,
    /// The most live (not deleted) endpoints the merchant may have with this one; None: no
    /// cap. Checked in the insert's own transaction (see [`Webhooks::create_endpoint`]).
    pub max_live: Option<usize>,
}

pub use converge_wire::DeliveryRow;

pub use converge_wire::AttemptRow;

/// The result of one attempt, written in one transaction with the delivery's new state and
/// the endpoint's failure run.
#[derive(Debug, Clone)]
pub struct AttemptResult {
    /// Delivery.
    pub delivery_id: i64,
    /// Epoch ms UTC.
    pub attempted_at: i64,
    /// ms.
    pub duration_ms: i64,
    /// HTTP status, if any.
    pub status_code: Option<i64>,
    /// First KiB of the answer.
    pub response: String,
    /// Why it failed.
    pub error: Option<String>,
    /// The delivery's status after it.
    pub new_status: DeliveryStatus,
    /// The next attempt, when pending.
    pub next_attempt_at: Option<i64>,
}

/// Filter of the deliveries list; every field optional.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    /// Merchant.
    pub merchant_id: Option<i64>,
    /// Status.
    pub status: Option<DeliveryStatus>,
    /// Endpoint.
    pub endpoint_id: Option<String>,
    /// Event type.
    pub event_type: Option<String>,
    /// Created at or after, epoch ms UTC.
    pub from: Option<i64>,
    /// Created before, epoch ms UTC.
    pub to: Option<i64>,
    /// The payment (its events and its refunds' events).
    pub payment_id: Option<String>,
    /// Only ids below this (keyset paging, newest first).
    pub before_id: Option<i64>,
}

/// Health of one endpoint over a window.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, Serialize)]
pub struct EndpointHealth {
    /// Endpoint.
    pub endpoint_id: String,
    /// Attempts in the window.
    pub attempts: i64,
    /// Of which 2xx.
    pub succeeded: i64,
    /// Last failed attempt, epoch ms UTC.
    pub last_failure_at: Option<i64>,
    /// Its error.
    pub last_failure: Option<String>,
}

pub use converge_wire::WebhookBacklog;

/// What `converge verify` checks of the outbox (DESIGN.md invariant 6), each list at most
/// 1,000 rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutboxFacts {
    /// Events in the outbox.
    pub events: i64,
    /// Deliveries, and of them succeeded.
    pub deliveries: (i64, i64),
    /// Deliveries still pending, whatever their age (within their retry schedule or not): 0
    /// once every delivery ended, which a caller waiting for quiescence also needs (a pending
    /// delivery within its schedule is no breach, even with a window of 0).
    pub pending_deliveries: i64,
    /// (payment, status): a payment that reached an outcome after the outbox was installed
    /// without that outcome's event.
    pub payments_without_event: Vec<(String, String)>,
    /// (refund, payment, status): the same for refunds.
    pub refunds_without_event: Vec<(String, String, String)>,
    /// (delivery, event, aggregate, status): older than the window and neither delivered,
    /// abandoned (endpoint disabled or deleted), dead with an error-pool item, nor pending
    /// within its retry schedule (its job due or leased after the window's start).
    pub undelivered: Vec<(i64, String, String, String)>,
    /// (event, endpoint, aggregate): older than the window, an enabled endpoint unchanged
    /// since the event subscribes to it, and no delivery was made.
    pub missing_deliveries: Vec<(String, String, String)>,
    /// A relay has published from this database (so every event must reach the stream).
    pub stream_configured: bool,
    /// Events published to the stream, and of them re-publishes the broker dropped.
    pub published: (i64, i64),
    /// (event, aggregate): older than the window and neither published nor refused (a refusal
    /// has its error-pool item).
    pub unpublished: Vec<(String, String)>,
    /// (event, aggregate, what disagrees): `outbox_pending` (migration 0115), which the relay
    /// and the relay status read as the backlog, differs from the events without a
    /// publication, whatever their age (at most 1,000 rows each way; aggregate empty when the
    /// event is gone).
    pub pending_drift: Vec<(String, String, &'static str)>,
}

/// What the relay learned of one event from the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// Event id.
    pub event_id: String,
    /// The stream sequence (None when refused).
    pub stream_seq: Option<i64>,
    /// The broker answered that it had the message already (a re-publish).
    pub duplicate: bool,
    /// Why the broker refused it.
    pub refused: Option<String>,
}

pub use converge_wire::RelayStatus;

/// Outbox and webhook storage.
#[async_trait]
pub trait Webhooks: Send + Sync + 'static {
    /// The plan new deliveries are scheduled with.
    fn webhook_plan(&self) -> &WebhookPlan;

    /// Inserts an endpoint (and its audit record, when given, in the same transaction)
    /// unless its merchant already has `e.max_live` live (not deleted) endpoints: then
    /// nothing is written and the answer is None. The count and the insert are one step:
    /// creates racing for a merchant's last place are serialised on the merchant's row, so
    /// exactly one of them takes it.
    async fn create_endpoint(
        &self,
        e: &NewEndpoint,
        audit: Option<&AuditEntry>,
    ) -> Result<Option<WebhookEndpoint>, StoreError>;
    /// The endpoint with this id.
    async fn endpoint(&self, id: &str) -> Result<Option<WebhookEndpoint>, StoreError>;
    /// Endpoints of a merchant (all merchants when None), newest first, deleted ones
    /// included.
    async fn endpoints(&self, merchant_id: Option<i64>)
    -> Result<Vec<WebhookEndpoint>, StoreError>;
    /// Moves an endpoint to `status` with a reason (None clears it; `enabled` also ends its
    /// failure run); a deleted endpoint is never moved. Writes `audit` in the same
    /// transaction. False when nothing changed.
    async fn set_endpoint_status(
        &self,
        id: &str,
        status: EndpointStatus,
        reason: Option<&str>,
        now: i64,
        audit: Option<&AuditEntry>,
    ) -> Result<bool, StoreError>;
    /// One endpoint secret as stored sealed (`sealed:v1:...`), if any is: what start-up opens
    /// to check that it was given the key that sealed the database's secrets.
    async fn sealed_secret_sample(&self) -> Result<Option<String>, StoreError>;
    /// Seals, under `secrets`, every endpoint secret and every stored answer of a webhook
    /// endpoint route still stored as plain text (written before secrets were sealed at rest,
    /// issue 36), each with a conditional update so a concurrent rotation is never
    /// overwritten. Answers how many values it sealed. A replayed answer is the same bytes once
    /// opened, so the merchant sees no difference.
    async fn seal_plaintext_secrets(
        &self,
        secrets: &crate::domain::secret_box::SecretBox,
    ) -> Result<u64, StoreError>;
    /// Replaces the secret; the old one keeps signing until `previous_expires_at`. None when
    /// the endpoint does not exist or is deleted.
    async fn rotate_endpoint_secret(
        &self,
        id: &str,
        new_secret: &str,
        previous_expires_at: i64,
        now: i64,
        audit: Option<&AuditEntry>,
    ) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// The event with this id.
    async fn outbox_event(&self, id: &str) -> Result<Option<OutboxEvent>, StoreError>;
    /// Events of a payment and of its refunds, in insertion order.
    async fn payment_outbox_events(&self, payment_id: &str)
    -> Result<Vec<OutboxEvent>, StoreError>;
    /// Events of one aggregate type and id (e.g. `refund`, `re_...`).
    async fn aggregate_events(
        &self,
        aggregatetype: &str,
        aggregateid: &str,
    ) -> Result<Vec<OutboxEvent>, StoreError>;

    /// A delivery with its list fields.
    async fn delivery(&self, id: i64) -> Result<Option<DeliveryRow>, StoreError>;
    /// Deliveries, newest first, at most `limit`.
    async fn deliveries(
        &self,
        f: &DeliveryFilter,
        limit: i64,
    ) -> Result<Vec<DeliveryRow>, StoreError>;
    /// The attempts of a delivery, oldest first.
    async fn delivery_attempts(&self, delivery_id: i64) -> Result<Vec<AttemptRow>, StoreError>;
    /// Records an attempt and, while the delivery is still pending, its new state; a failure
    /// starts the endpoint's failure run (if none), a success ends it. A delivery already
    /// ended (succeeded, dead, abandoned) keeps its state: the attempt of a worker whose
    /// lease lapsed, recorded after another worker's success, is history only (the
    /// simulator, issue 39, found a late failure turning a success back into pending, which
    /// nothing then retried).
    async fn record_attempt(&self, a: &AttemptResult) -> Result<(), StoreError>;
    /// The circuit breaker of endpoint `endpoint_id` (closed with no failures when none was
    /// ever recorded).
    async fn endpoint_breaker(&self, endpoint_id: &str) -> Result<BreakerState, StoreError>;
    /// The breaker of every enabled endpoint whose breaker is not closed (open or half-open),
    /// by endpoint id (a disabled or deleted endpoint's breaker waits for nothing).
    async fn open_breakers(&self) -> Result<Vec<(String, BreakerState)>, StoreError>;
    /// Takes the probe of a half-open breaker: sets its lease to `until` when its cool-down
    /// is over at `now` and no other probe's lease runs. True when this caller took it.
    async fn claim_breaker_probe(
        &self,
        endpoint_id: &str,
        now: i64,
        until: i64,
    ) -> Result<bool, StoreError>;
    /// Records an attempt's end (`success` or not) at `now` in the endpoint's breaker by
    /// `policy` ([`BreakerPolicy::after`]), without losing a concurrent update (each write
    /// checks the version it read); returns the new state.
    async fn record_breaker(
        &self,
        endpoint_id: &str,
        success: bool,
        now: i64,
        policy: &BreakerPolicy,
    ) -> Result<BreakerState, StoreError>;
    /// Marks a pending delivery abandoned (its endpoint is gone) with a reason; false when
    /// it was not pending.
    async fn abandon_delivery(&self, id: i64, reason: &str, now: i64) -> Result<bool, StoreError>;
    /// Makes every pending delivery to `endpoint` due at `now` (epoch ms UTC): its job's run
    /// time and its `next_attempt_at`. Called when the endpoint has just proven healthy (its
    /// breaker's probe succeeded), so the deliveries held back while it failed go out at once
    /// instead of each waiting out its own wait. Returns the jobs made due.
    async fn hasten_endpoint_deliveries(&self, endpoint: &str, now: i64)
    -> Result<u64, StoreError>;
    /// Puts deliveries that are not pending (succeeded, dead, abandoned) back to pending with
    /// a new job each, due now, for the full schedule; `audit` in the same transaction.
    /// Returns the ids put back (a pending one already has its job and is skipped).
    async fn redeliver(
        &self,
        ids: &[i64],
        now: i64,
        audit: Option<&AuditEntry>,
    ) -> Result<Vec<i64>, StoreError>;
    /// Per-endpoint attempts and successes since `since` (epoch ms UTC).
    async fn endpoint_health(&self, since: i64) -> Result<Vec<EndpointHealth>, StoreError>;
    /// Backlog figures; `since` bounds the failed-attempt count.
    async fn webhook_backlog(&self, since: i64) -> Result<WebhookBacklog, StoreError>;
    /// The facts of invariant 6 for events created at or before `cutoff` (epoch ms UTC). The
    /// outcomes without their event are looked for among payments and refunds updated at or
    /// after `since_ms` (epoch ms UTC; 0 for all since the outbox's install mark): the
    /// incremental check's (`crate::verify::Scope::Changed`), as only a write makes one.
    /// `clock_only`: the caller knows nothing was written since a run that passed, so only
    /// the reads whose answer moves with the clock run (the counts, and the deliveries and
    /// publications past `cutoff`); the outcomes without their event and the pending drift
    /// come back empty.
    async fn verify_outbox(
        &self,
        cutoff: i64,
        since_ms: i64,
        clock_only: bool,
    ) -> Result<OutboxFacts, StoreError>;

    // --- the event stream relay ------------------------------------------------------------

    /// Takes or renews the publishing lease `name` for `owner` until `expires_at`: true when
    /// `owner` holds it now (it was free, lapsed, or already `owner`'s), with `token`.
    async fn acquire_relay_lease(
        &self,
        name: &str,
        owner: &str,
        token: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<bool, StoreError>;
    /// Records the relay's connection state under its lease (a heartbeat).
    async fn relay_heartbeat(
        &self,
        name: &str,
        token: &str,
        connected: bool,
        last_error: Option<&str>,
        now: i64,
    ) -> Result<(), StoreError>;
    /// Up to `limit` events not yet published, oldest first (insertion order, which per
    /// payment is commit order: a payment's transitions commit one after another).
    async fn unpublished_events(&self, limit: i64) -> Result<Vec<OutboxEvent>, StoreError>;
    /// Records publications while `token` still holds lease `name`; false (nothing written)
    /// when the lease was lost, so the new holder re-publishes and the broker deduplicates.
    async fn record_publications(
        &self,
        name: &str,
        token: &str,
        pubs: &[Publication],
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Forgets the refused publication of event `event_id`, so the relay publishes it again
    /// on its next round (the outbox backlog trigger puts it back), with `audit` in the same
    /// transaction; false (nothing written) when the event has no refused publication.
    async fn replay_refused_event(
        &self,
        event_id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// The relay's state, backlog and lag at `now`.
    /// (`name` is the relay's lease, [`RELAY_LEASE`].)
    async fn relay_status(&self, name: &str, now: i64) -> Result<RelayStatus, StoreError>;
    /// Deletes events published before `before` whose deliveries are all finished
    /// (succeeded or abandoned), with those deliveries and attempts, and moves the outbox mark
    /// so `converge verify` expects events only since then. Returns how many were deleted.
    async fn purge_published_events(&self, before: i64) -> Result<u64, StoreError>;
    /// The stream sequence each published event got, by event id (for tests and verify).
    async fn publications(&self) -> Result<Vec<(String, Option<i64>, bool)>, StoreError>;
}

/// SQL for the outcome events of payments, from [`EventType::for_payment_status`] (the one
/// table of which status emits which event): the statuses that emit one, for an `IN (...)`,
/// and a `CASE <column> WHEN 'SUCCESS' THEN 'payment.succeeded' ... END` naming each one's
/// event type. `converge verify` uses both to find an outcome without its event.
///
/// [`EventType::for_payment_status`]: crate::domain::webhooks::EventType::for_payment_status
pub(crate) fn payment_outcome_sql(column: &str) -> (String, String) {
    use crate::domain::state::PaymentStatus;
    use crate::domain::webhooks::EventType;
    let outcomes: Vec<(PaymentStatus, EventType)> = PaymentStatus::ALL
        .into_iter()
        .filter_map(|s| EventType::for_payment_status(s).map(|e| (s, e)))
        .collect();
    let statuses = super::queue::status_list(|s| EventType::for_payment_status(s).is_some());
    let whens: String = outcomes
        .iter()
        .map(|(s, e)| format!(" WHEN '{s}' THEN '{e}'"))
        .collect();
    (statuses, format!("CASE {column}{whens} END"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_outcome_sql_names_each_outcome_status_with_its_event() {
        let (statuses, case) = super::payment_outcome_sql("p.status");
        assert_eq!(
            statuses,
            "'REQUIRES_ACTION', 'AUTHORIZED', 'SUCCESS', 'VOIDED', 'EXPIRED', 'CANCELED', 'FAILED', 'REVERSED', 'REFUNDED'"
        );
        assert_eq!(
            case,
            "CASE p.status WHEN 'REQUIRES_ACTION' THEN 'payment.requires_action' \
             WHEN 'AUTHORIZED' THEN 'payment.authorized' \
             WHEN 'SUCCESS' THEN 'payment.succeeded' WHEN 'VOIDED' THEN 'payment.voided' \
             WHEN 'EXPIRED' THEN 'payment.expired' WHEN 'CANCELED' THEN 'payment.canceled' \
             WHEN 'FAILED' THEN 'payment.failed' WHEN 'REVERSED' THEN 'payment.reversed' \
             WHEN 'REFUNDED' THEN 'payment.refunded' END"
        );
    }
}

/// The lease name of the event-stream relay's publishing position: the relay holds it, the
/// dashboard reads its state ([`Webhooks::relay_status`]).
pub const RELAY_LEASE: &str = "event-stream";
