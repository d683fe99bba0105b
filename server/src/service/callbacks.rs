//! Channel callbacks (DESIGN.md "Merchant HTTP API" and "Payment state machine": late or
//! stale callbacks never move a payment backwards or out of a terminal state; they are
//! acknowledged, recorded as ignored, and counted).

use super::payments::{Applied, Extras};
use super::{Core, ServiceError};
use crate::domain::money;
use crate::domain::state::{PaymentEvent, PaymentStatus, transition};
use serde_json::json;

use crate::store::{CallbackClaim, IgnoredEvent, NewErrorItem};

/// A verified callback from the channel.
#[derive(Debug, Clone, serde::Deserialize, utoipa::ToSchema)]
#[schema(example = json!({
    "event_id": "evt_1", "type": "charge.succeeded", "channel_key": "ck_7f3a9c2e4b1d8f6a0c5e2b9d",
    "amount": 1999, "currency": "CNY", "created_at": 1796101200
}))]
pub struct CallbackEvent {
    /// The channel's unique event id; a repeat is acknowledged once.
    #[schema(min_length = 1, max_length = 255)]
    pub event_id: String,
    /// `charge.succeeded` or `charge.failed`.
    #[serde(rename = "type")]
    #[schema(min_length = 1, max_length = 64)]
    pub kind: String,
    /// The payment's channel key.
    #[schema(min_length = 1, max_length = 255)]
    pub channel_key: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    #[schema(pattern = "^[A-Z]{3}$")]
    pub currency: String,
    /// When the channel sent it, unix seconds UTC.
    pub created_at: i64,
}

impl From<crate::channel::CallbackFact> for CallbackEvent {
    fn from(f: crate::channel::CallbackFact) -> Self {
        Self {
            event_id: f.event_id,
            kind: f.kind,
            channel_key: f.channel_key,
            amount: f.amount,
            currency: f.currency,
            created_at: f.created_at,
        }
    }
}

/// Longest event id or channel key a callback may carry, in bytes.
pub const MAX_CALLBACK_ID: usize = 255;

impl CallbackEvent {
    /// Checks the fields' shape before anything is stored: ids of 1 to [`MAX_CALLBACK_ID`]
    /// bytes, a type of at most 64 bytes, a 3-letter currency, and no control characters
    /// (PostgreSQL text cannot hold NUL; an oversized id cannot be indexed).
    /// Errors: what is wrong, for a 400 `invalid_callback`.
    pub fn check(&self) -> Result<(), String> {
        let fields = [
            ("event_id", self.event_id.as_str(), MAX_CALLBACK_ID),
            ("channel_key", self.channel_key.as_str(), MAX_CALLBACK_ID),
            ("type", self.kind.as_str(), 64),
        ];
        for (name, value, max) in fields {
            if value.is_empty() || value.len() > max || value.chars().any(char::is_control) {
                return Err(format!(
                    "{name} must be 1 to {max} bytes without control characters"
                ));
            }
        }
        if self.currency.len() != 3 || !self.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err("currency must be a 3-letter ISO 4217 code".into());
        }
        Ok(())
    }
}

/// What a callback did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackOutcome {
    /// It moved the payment to this status.
    Applied(PaymentStatus),
    /// Recorded as ignored (stale, late, mismatched, not decisive, or unknown type).
    Ignored(String),
    /// This event id was handled before.
    Duplicate,
    /// Another handler holds this event id now; the channel should deliver it again later
    /// (the API answers 409 with Retry-After, not a 2xx that would end the channel's retries).
    InProgress,
    /// No payment has this channel key.
    UnknownPayment,
}

/// How long a callback's claim holds before a redelivery of the same event id may take it
/// over (the first handler died between claiming and settling), in ms.
pub const CALLBACK_CLAIM_MS: i64 = 30_000;

impl Core {
    /// Applies a verified channel callback, at most once per event id.
    ///
    /// A success moves the payment on (amount and currency must match). A failure is never
    /// decisive on its own while the payment is open (PENDING, PROCESSING, UNKNOWN): a stale
    /// or reordered failure would make a charged payment FAILED, so it is recorded as ignored
    /// and the payment's queued submit or query by channel key decides (DESIGN.md: UNKNOWN
    /// leaves only by a query or a fenced key; seed 004 "UNKNOWN vs FAILED"). A callback that
    /// contradicts a settled payment (a failure for a charged one, a success for a FAILED
    /// one, another amount) is recorded as ignored and reported to the error pool as
    /// `conflicting_callback`.
    ///
    /// Errors: a store failure; the event's claim is then dropped so the channel's
    /// redelivery is handled afresh.
    pub async fn handle_callback(
        &self,
        ev: &CallbackEvent,
    ) -> Result<CallbackOutcome, ServiceError> {
        let now = self.clock.now_ms();
        match self
            .store
            .claim_callback(
                &ev.event_id,
                &ev.channel_key,
                &ev.kind,
                now,
                now - CALLBACK_CLAIM_MS,
            )
            .await?
        {
            CallbackClaim::Claimed => {}
            CallbackClaim::Settled => {
                metrics::counter!("converge_callbacks_total", "outcome" => "duplicate")
                    .increment(1);
                return Ok(CallbackOutcome::Duplicate);
            }
            CallbackClaim::InProgress => {
                metrics::counter!("converge_callbacks_total", "outcome" => "in_progress")
                    .increment(1);
                return Ok(CallbackOutcome::InProgress);
            }
        }
        match self.handle_claimed(ev).await {
            Ok(Handled {
                outcome,
                settled: true,
            }) => Ok(outcome),
            Ok(Handled { outcome, .. }) => {
                let name = match &outcome {
                    CallbackOutcome::Applied(_) => "applied",
                    CallbackOutcome::Ignored(_) => "ignored",
                    CallbackOutcome::Duplicate => "duplicate",
                    CallbackOutcome::InProgress => "in_progress",
                    CallbackOutcome::UnknownPayment => "unknown_payment",
                };
                // If this write is lost the claim lapses and a redelivery is handled again,
                // which changes nothing: every effect above is keyed by the event.
                if let Err(e) = self.store.settle_callback(&ev.event_id, Some(name)).await {
                    tracing::warn!(event_id = %ev.event_id, error = %e, "callback outcome not recorded");
                }
                Ok(outcome)
            }
            Err(err) => {
                if let Err(e) = self.store.settle_callback(&ev.event_id, None).await {
                    tracing::warn!(event_id = %ev.event_id, error = %e, "callback claim not dropped; it lapses");
                }
                Err(err)
            }
        }
    }

    async fn handle_claimed(&self, ev: &CallbackEvent) -> Result<Handled, ServiceError> {
        let Some(p) = self.store.payment_by_channel_key(&ev.channel_key).await? else {
            metrics::counter!("converge_callbacks_total", "outcome" => "unknown_payment")
                .increment(1);
            return Ok(Handled::unsettled(CallbackOutcome::UnknownPayment));
        };
        let succeeded = match ev.kind.as_str() {
            "charge.succeeded" => true,
            "charge.failed" => false,
            other => {
                return self
                    .ignore(
                        &p,
                        ev,
                        PaymentEvent::ChannelError,
                        format!("unknown callback type {other:?}"),
                        false,
                    )
                    .await;
            }
        };
        // An UNKNOWN payment's answer stands in for the query it was waiting on.
        let event = match (succeeded, p.status == PaymentStatus::Unknown) {
            (true, true) => PaymentEvent::QuerySucceeded,
            (true, false) => PaymentEvent::ChannelSucceeded,
            (false, true) => PaymentEvent::QueryDeclined,
            (false, false) => PaymentEvent::ChannelDeclined,
        };
        if !succeeded {
            return match p.status {
                PaymentStatus::Pending | PaymentStatus::Processing | PaymentStatus::Unknown => {
                    self.ignore(
                        &p,
                        ev,
                        event,
                        "failure callback for an open payment: its submit or query by channel key decides"
                            .into(),
                        false,
                    )
                    .await
                }
                PaymentStatus::Failed => {
                    self.ignore(&p, ev, event, "already FAILED".into(), false)
                        .await
                }
                _ => {
                    self.ignore(
                        &p,
                        ev,
                        event,
                        format!("failure callback for a charged payment ({})", p.status.as_str()),
                        true,
                    )
                    .await
                }
            };
        }
        if ev.amount != p.amount || ev.currency != p.currency {
            let why = format!(
                "callback says {}, payment is {}",
                money::display(ev.amount, &ev.currency),
                money::display(p.amount, &p.currency)
            );
            return self.ignore(&p, ev, event, why, true).await;
        }
        if let Err(refused) = transition(p.status, event) {
            // A success for a FAILED payment means the channel holds a charge the core gave
            // up on: money a person must return.
            let conflicting = p.status == PaymentStatus::Failed;
            return self
                .ignore(
                    &p,
                    ev,
                    event,
                    format!("stale callback: {refused}"),
                    conflicting,
                )
                .await;
        }
        let extras = Extras {
            detail: format!("callback {}", ev.event_id),
            ..Extras::default()
        };
        let (mut after, applied) = self.apply_outcome(&p, event, "callback", extras).await?;
        if applied != Applied::Yes {
            // Another writer (a callback with another event id, the worker's query) settled it
            // first: this callback is late, not applied.
            return self
                .ignore(
                    &p,
                    ev,
                    event,
                    format!(
                        "lost the race: the payment is {} at version {}",
                        after.status.as_str(),
                        after.version
                    ),
                    false,
                )
                .await;
        }
        if after.status == PaymentStatus::ChannelSuccess {
            after = self.drive(after, "callback").await?;
        }
        metrics::counter!("converge_callbacks_total", "outcome" => "applied").increment(1);
        Ok(Handled::unsettled(CallbackOutcome::Applied(after.status)))
    }

    /// Records the callback as an ignored event of the payment and settles its claim with it;
    /// a `conflicting` one also becomes an error-pool item with both sides (DESIGN.md
    /// "Compensation queue and error pool": the pool receives stale/conflicting callbacks),
    /// and its claim is settled only after that item is written, so a failure leaves the
    /// redelivery to report it.
    async fn ignore(
        &self,
        p: &crate::store::Payment,
        ev: &CallbackEvent,
        event: PaymentEvent,
        why: String,
        conflicting: bool,
    ) -> Result<Handled, ServiceError> {
        let now = self.clock.now_ms();
        let ignored = IgnoredEvent {
            payment_id: p.id.clone(),
            event_id: format!("cb:{}", ev.event_id),
            event,
            from: p.status,
            source: "callback".into(),
            detail: why.clone(),
            now,
        };
        if !conflicting {
            self.store
                .settle_ignored_callback(&ev.event_id, &ignored)
                .await?;
            metrics::counter!("converge_callbacks_total", "outcome" => "ignored").increment(1);
            return Ok(Handled {
                outcome: CallbackOutcome::Ignored(why),
                settled: true,
            });
        }
        self.store.record_ignored_event(&ignored).await?;
        self.store
            .report_error(&NewErrorItem {
                kind: "conflicting_callback".into(),
                dedupe_key: format!("callback:{}", ev.event_id),
                payment_id: Some(p.id.clone()),
                summary: format!("channel callback {} contradicts the payment: {why}", ev.event_id),
                evidence: json!({
                    "callback": {"event_id": ev.event_id, "type": ev.kind, "channel_key": ev.channel_key,
                                 "amount": ev.amount, "currency": ev.currency, "created_at": ev.created_at},
                    "payment": {"id": p.id, "status": p.status.as_str(), "amount": p.amount,
                                "currency": p.currency, "version": p.version},
                })
                .to_string(),
                reopen: false,
                now,
            })
            .await?;
        // One outcome per callback received: a conflicting one is not also counted ignored.
        metrics::counter!("converge_callbacks_total", "outcome" => "conflicting").increment(1);
        Ok(Handled::unsettled(CallbackOutcome::Ignored(why)))
    }
}

/// What [`Core::handle_claimed`] did, and whether it settled the event's claim itself.
struct Handled {
    outcome: CallbackOutcome,
    /// The claim was settled in the transaction that recorded the outcome.
    settled: bool,
}

impl Handled {
    /// The caller settles the claim.
    fn unsettled(outcome: CallbackOutcome) -> Self {
        Self {
            outcome,
            settled: false,
        }
    }
}
