//! Channel callbacks (DESIGN.md "Merchant HTTP API" and "Payment state machine": late or
//! stale callbacks never move a payment backwards or out of a terminal state; they are
//! acknowledged, recorded as ignored, and counted).

use super::payments::Extras;
use super::{Core, ServiceError};
use crate::domain::jobs::JobKind;
use crate::domain::money;
use crate::domain::state::{PaymentEvent, PaymentStatus, transition};
use serde_json::json;

use crate::store::{
    CallbackDecision, CallbackReceipt, CallbackRecorded, IgnoredEvent, NewErrorItem, Payment,
};
use converge_wire::payments::CaptureRecord;

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
    /// `charge.succeeded` or `charge.failed`; for a hold `authorization.succeeded`,
    /// `authorization.failed`, `capture.succeeded` or `capture.failed`; a customer's dispute
    /// of the charge `dispute.opened`, `dispute.won` or `dispute.lost`.
    #[serde(rename = "type")]
    #[schema(min_length = 1, max_length = 64)]
    pub kind: String,
    /// The payment's channel key.
    #[schema(min_length = 1, max_length = 255)]
    pub channel_key: String,
    /// For `capture.*` (issue 34): the capture's key, the core's capture id.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255)]
    pub capture_key: Option<String>,
    /// Minor units (a capture's own amount for `capture.*`).
    pub amount: i64,
    /// ISO 4217.
    #[schema(pattern = "^[A-Z]{3}$")]
    pub currency: String,
    /// When the channel sent it, unix seconds UTC.
    pub created_at: i64,
    /// For `dispute.*` (a chargeback; issue 38): the channel's id of the dispute.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255)]
    pub dispute_id: Option<String>,
    /// For `dispute.*`: the card network's reason (`fraudulent`, `product_not_received`, ...).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 64)]
    pub reason: Option<String>,
}

impl From<crate::channel::CallbackFact> for CallbackEvent {
    fn from(f: crate::channel::CallbackFact) -> Self {
        Self {
            event_id: f.event_id,
            kind: f.kind,
            channel_key: f.channel_key,
            capture_key: f.capture_key,
            amount: f.amount,
            currency: f.currency,
            created_at: f.created_at,
            dispute_id: f.dispute_id,
            reason: f.reason,
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
            (
                "capture_key",
                self.capture_key.as_deref().unwrap_or("-"),
                MAX_CALLBACK_ID,
            ),
            (
                "dispute_id",
                self.dispute_id.as_deref().unwrap_or("-"),
                MAX_CALLBACK_ID,
            ),
            ("reason", self.reason.as_deref().unwrap_or("-"), 64),
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
    /// Recorded as ignored (stale, late, mismatched, not decisive, lost a race, or unknown
    /// type).
    Ignored(String),
    /// This event id was handled before.
    Duplicate,
    /// No payment has this channel key.
    UnknownPayment,
}

/// What a callback means for its payment, decided from the payment as read (pure: the rules
/// of DESIGN.md "Payment state machine" and seed 004 "UNKNOWN vs FAILED").
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// The event to apply.
    Apply(PaymentEvent),
    /// Recorded as not applied: the event it would have been, why, and whether it contradicts
    /// what the payment settled (then the error pool hears of it too).
    Ignore {
        event: PaymentEvent,
        why: String,
        conflicting: bool,
    },
    /// A hold's callback that does not decide on its own (issue 34): recorded as not applied,
    /// and the payment's due jobs (the query of the hold, the capture's settling) run now, so
    /// the callback hastens what decides instead of racing it.
    Hasten { event: PaymentEvent, why: String },
}

/// The [`Verdict`] on callback `ev` for payment `p`. A success moves the payment on when the
/// amount and currency match; a failure is never decisive on its own while the payment is
/// open (a stale or reordered failure would make a charged payment FAILED: its submit or
/// query by channel key decides); a failure for a charged payment, a success for a FAILED
/// one or another amount is a conflict.
fn verdict(p: &Payment, ev: &CallbackEvent, captures: &[CaptureRecord]) -> Verdict {
    let ignore = |event, why: String, conflicting| Verdict::Ignore {
        event,
        why,
        conflicting,
    };
    if ev.kind.starts_with("authorization.") || ev.kind.starts_with("capture.") {
        return hold_verdict(p, ev, captures);
    }
    let succeeded = match ev.kind.as_str() {
        "charge.succeeded" => true,
        "charge.failed" => false,
        other => {
            let why = format!("unknown callback type {other:?}");
            return ignore(PaymentEvent::ChannelError, why, false);
        }
    };
    // An UNKNOWN payment's answer stands in for the query it was waiting on, as does the
    // customer's step for one waiting in REQUIRES_ACTION (3-D Secure).
    let queried = matches!(
        p.status,
        PaymentStatus::Unknown | PaymentStatus::RequiresAction
    );
    let event = match (succeeded, queried) {
        (true, true) => PaymentEvent::QuerySucceeded,
        (true, false) => PaymentEvent::ChannelSucceeded,
        (false, true) => PaymentEvent::QueryDeclined,
        (false, false) => PaymentEvent::ChannelDeclined,
    };
    // A hold is not a charge (issue 34): its callbacks have their own verdict.
    if p.capture_mode == converge_wire::payments::CaptureMode::Manual {
        let why = format!(
            "{} callback for a manual-capture payment: its hold is settled by a query of the hold",
            ev.kind
        );
        return ignore(event, why, false);
    }
    if !succeeded {
        return match p.status {
            // The customer's step failed, or so the callback says: the query decides, now.
            PaymentStatus::RequiresAction => Verdict::Hasten {
                event,
                why: "failure callback for a payment waiting for the customer: its query decides, now"
                    .into(),
            },
            PaymentStatus::Pending | PaymentStatus::Processing | PaymentStatus::Unknown => ignore(
                event,
                "failure callback for an open payment: its submit or query by channel key decides"
                    .into(),
                false,
            ),
            PaymentStatus::Failed => ignore(event, "already FAILED".into(), false),
            _ => {
                let why = format!(
                    "failure callback for a charged payment ({})",
                    p.status.as_str()
                );
                ignore(event, why, true)
            }
        };
    }
    if ev.amount != p.amount || ev.currency != p.currency {
        let why = format!(
            "callback says {}, payment is {}",
            money::display(ev.amount, &ev.currency),
            money::display(p.amount, &p.currency)
        );
        return ignore(event, why, true);
    }
    match transition(p.status, event) {
        Ok(_) => Verdict::Apply(event),
        // A success for a FAILED payment means the channel holds a charge the core gave up
        // on: money a person must return.
        Err(refused) => ignore(
            event,
            format!("stale callback: {refused}"),
            p.status == PaymentStatus::Failed,
        ),
    }
}

/// The [`Verdict`] on a hold's callback (`authorization.*`, `capture.*`; issue 34). None
/// decides on its own: an authorization's success or failure for an open hold, or a capture's
/// for the capture in flight, hastens the query that decides ([`Verdict::Hasten`]; the query
/// also learns the hold's expiry, which a callback does not carry). A callback that
/// contradicts what the payment settled (a failure for a hold the core holds, a success for a
/// FAILED one, a capture the core never sent, another amount) is a conflict for a person;
/// one the payment has moved past (a repeat, a hold since released) is ignored.
fn hold_verdict(p: &Payment, ev: &CallbackEvent, captures: &[CaptureRecord]) -> Verdict {
    use PaymentStatus as S;
    let ignore = |event, why: String, conflicting| Verdict::Ignore {
        event,
        why,
        conflicting,
    };
    if p.capture_mode != converge_wire::payments::CaptureMode::Manual {
        let why = format!("{} callback for a payment charged at once", ev.kind);
        return ignore(PaymentEvent::ChannelError, why, true);
    }
    let open = matches!(
        p.status,
        S::Pending | S::Authorizing | S::Unknown | S::RequiresAction
    );
    let released = matches!(p.status, S::Voided | S::Expired | S::Canceled);
    let hasten = |event, what: &str| Verdict::Hasten {
        event,
        why: format!(
            "{} callback {what}: the query of the hold decides, now",
            ev.kind
        ),
    };
    match ev.kind.as_str() {
        "authorization.succeeded" | "authorization.failed" => {
            let succeeded = ev.kind == "authorization.succeeded";
            let event = match (succeeded, p.status == S::Unknown) {
                (true, true) => PaymentEvent::QueryAuthorized,
                (true, false) => PaymentEvent::ChannelAuthorized,
                (false, true) => PaymentEvent::QueryDeclined,
                (false, false) => PaymentEvent::ChannelDeclined,
            };
            if ev.amount != p.amount || ev.currency != p.currency {
                let why = format!(
                    "authorization callback says {}, payment is {}",
                    money::display(ev.amount, &ev.currency),
                    money::display(p.amount, &p.currency)
                );
                return ignore(event, why, true);
            }
            match (succeeded, p.status) {
                (_, _) if open => hasten(event, "for an open hold"),
                (_, _) if released => ignore(
                    event,
                    format!("stale: the hold is {}", p.status.as_str()),
                    false,
                ),
                (true, S::Failed) => ignore(
                    event,
                    "authorization callback for a FAILED payment".into(),
                    true,
                ),
                (true, _) => ignore(
                    event,
                    format!("already authorized ({})", p.status.as_str()),
                    false,
                ),
                (false, S::Failed) => ignore(event, "already FAILED".into(), false),
                (false, _) => {
                    let why = format!(
                        "failure callback for a held payment ({})",
                        p.status.as_str()
                    );
                    ignore(event, why, true)
                }
            }
        }
        "capture.succeeded" | "capture.failed" => capture_verdict(p, ev, captures),
        other => ignore(
            PaymentEvent::ChannelError,
            format!("unknown callback type {other:?}"),
            false,
        ),
    }
}

/// [`hold_verdict`] for `capture.*`: matched by its `capture_key` against the capture in
/// flight, then against the captures recorded.
fn capture_verdict(p: &Payment, ev: &CallbackEvent, captures: &[CaptureRecord]) -> Verdict {
    use converge_wire::lifecycle::CaptureStatus;
    let succeeded = ev.kind == "capture.succeeded";
    let event = if succeeded {
        PaymentEvent::ChannelCaptured
    } else {
        PaymentEvent::CaptureRefused
    };
    let ignore = |why: String, conflicting| Verdict::Ignore {
        event,
        why,
        conflicting,
    };
    let Some(key) = ev.capture_key.as_deref() else {
        return ignore("capture callback without a capture_key".into(), false);
    };
    let Some(c) = captures.iter().find(|c| c.id == key) else {
        return ignore(
            format!("capture {key} was never asked of the channel"),
            succeeded,
        );
    };
    if succeeded && ev.amount != c.amount {
        let why = format!(
            "capture callback says {}, capture {key} is {}",
            money::display(ev.amount, &ev.currency),
            money::display(c.amount, &p.currency)
        );
        return ignore(why, true);
    }
    match (succeeded, c.status) {
        (_, CaptureStatus::Pending) => Verdict::Hasten {
            event,
            why: format!(
                "{} callback for capture {key} in flight: the query of the hold decides, now",
                ev.kind
            ),
        },
        (true, CaptureStatus::Captured) => ignore(format!("capture {key} already recorded"), false),
        (false, CaptureStatus::Refused) => ignore(format!("capture {key} already refused"), false),
        (true, CaptureStatus::Refused) => ignore(
            format!("success callback for capture {key}, which was refused"),
            true,
        ),
        (false, CaptureStatus::Captured) => ignore(
            format!("failure callback for capture {key}, which was captured"),
            true,
        ),
    }
}

/// Counts a callback by how it ended (`converge_callbacks_total`).
pub(super) fn count(outcome: &'static str) {
    metrics::counter!("converge_callbacks_total", "outcome" => outcome).increment(1);
}

impl Core {
    /// Applies a verified channel callback, at most once per event id: its raw `body` and
    /// `signature` header, its receive time, its claim and its decision (applied or ignored) commit in one
    /// transaction ([`Callbacks::record_callback`](crate::store::Callbacks::record_callback);
    /// seed 004 §8.4: the evidence is kept). The decision is [`verdict`]'s; a callback that
    /// contradicts a settled payment is recorded as ignored and reported to the error pool as
    /// `conflicting_callback` (DESIGN.md "Compensation queue and error pool"). A success that
    /// reaches CHANNEL_SUCCESS goes on to its ledger posting afterwards, as any other step.
    ///
    /// `only_connector`: the connector whose own route it came in on (issue 38): a payment
    /// made on another connector is not its to move, and the callback is recorded as for an
    /// unknown payment. `None`: the default route, which every sandbox-protocol connector
    /// shares.
    ///
    /// Errors: a store failure, with nothing recorded, so the channel's redelivery is handled
    /// afresh.
    pub async fn handle_callback(
        &self,
        ev: &CallbackEvent,
        body: &[u8],
        signature: &str,
        only_connector: Option<&str>,
    ) -> Result<CallbackOutcome, ServiceError> {
        let receipt = CallbackReceipt {
            event_id: &ev.event_id,
            channel_key: &ev.channel_key,
            kind: &ev.kind,
            body,
            signature,
            received_at: self.clock.now_ms(),
        };
        // A connector's own route speaks for its own payments only: a callback verified by
        // one merchant's account never moves a payment made on another connector.
        let found = self
            .store
            .payment_by_channel_key(&ev.channel_key)
            .await?
            .filter(|p| only_connector.is_none_or(|c| p.connector == c));
        let Some(p) = found else {
            let recorded = self
                .store
                .record_callback(&receipt, CallbackDecision::UnknownPayment)
                .await?;
            return Ok(recorded_outcome(recorded, || {
                (CallbackOutcome::UnknownPayment, "unknown_payment")
            }));
        };
        if ev.kind.starts_with("dispute.") {
            return self.record_dispute(&receipt, &p, ev).await;
        }
        let captures = if ev.kind.starts_with("capture.") {
            self.store.payment_captures(&p.id).await?
        } else {
            Vec::new()
        };
        match verdict(&p, ev, &captures) {
            Verdict::Apply(event) => self.apply_callback(&receipt, &p, event).await,
            Verdict::Hasten { event, why } => {
                let ignored = ignored_event(&p, ev, event, why.clone(), receipt.received_at);
                let recorded = self
                    .store
                    .record_callback(&receipt, CallbackDecision::Ignore(&ignored))
                    .await?;
                if recorded == CallbackRecorded::Duplicate {
                    count("duplicate");
                    return Ok(CallbackOutcome::Duplicate);
                }
                // The jobs that decide: an authorization's submit or query, a capture's own.
                let kinds: &[JobKind] = if ev.kind.starts_with("capture.") {
                    &[JobKind::Capture]
                } else {
                    &[JobKind::Submit, JobKind::Query]
                };
                let woken = self
                    .store
                    .hasten_jobs(&p.id, kinds, receipt.received_at)
                    .await?;
                count("hastened");
                Ok(CallbackOutcome::Ignored(format!(
                    "{why} ({woken} job(s) made due)"
                )))
            }
            Verdict::Ignore {
                event,
                why,
                conflicting,
            } => {
                let ignored = ignored_event(&p, ev, event, why.clone(), receipt.received_at);
                let item = conflicting.then(|| conflict_item(&p, ev, &why, receipt.received_at));
                // One outcome per callback received: a conflicting one is not also counted
                // ignored.
                let (decision, name) = match &item {
                    Some(item) => (CallbackDecision::Conflict(&ignored, item), "conflicting"),
                    None => (CallbackDecision::Ignore(&ignored), "ignored"),
                };
                let recorded = self.store.record_callback(&receipt, decision).await?;
                Ok(recorded_outcome(recorded, || {
                    (CallbackOutcome::Ignored(why), name)
                }))
            }
        }
    }

    /// Applies a callback's event in the callback's transaction; a race lost to another
    /// writer (a callback with another event id, the worker's query) is recorded as ignored
    /// in that same transaction.
    async fn apply_callback(
        &self,
        receipt: &CallbackReceipt<'_>,
        p: &Payment,
        event: PaymentEvent,
    ) -> Result<CallbackOutcome, ServiceError> {
        let extras = Extras {
            detail: format!("callback {}", receipt.event_id),
            ..Extras::default()
        };
        let now = receipt.received_at;
        let t = self.transition(p, event, "callback", extras, now)?;
        let lost = |current: &Payment| IgnoredEvent {
            payment_id: p.id.clone(),
            event_id: format!("cb:{}", receipt.event_id),
            event,
            from: p.status,
            source: "callback".into(),
            detail: lost_race(current),
            now,
        };
        let decision = CallbackDecision::Apply {
            transition: &t,
            lost: &lost,
        };
        match self.store.record_callback(receipt, decision).await? {
            CallbackRecorded::Applied(mut after) => {
                metrics::counter!("converge_transitions_total", "to" => after.status.as_str().to_ascii_lowercase())
                    .increment(1);
                if after.status == PaymentStatus::ChannelSuccess {
                    after = self.drive(after, "callback").await?;
                }
                count("applied");
                Ok(CallbackOutcome::Applied(after.status))
            }
            CallbackRecorded::Lost(current) => {
                metrics::counter!("converge_events_ignored_total", "event" => event.as_str())
                    .increment(1);
                count("ignored");
                Ok(CallbackOutcome::Ignored(lost_race(&current)))
            }
            CallbackRecorded::Duplicate => {
                count("duplicate");
                Ok(CallbackOutcome::Duplicate)
            }
            CallbackRecorded::Recorded => Err(ServiceError::Store(
                crate::store::StoreError::Corrupt("an applied callback recorded as ignored".into()),
            )),
        }
    }
}

/// The outcome of a recorded callback that applied nothing: `Duplicate` when its event id
/// was recorded before, else `decided`'s outcome; counted either way.
pub(super) fn recorded_outcome(
    recorded: CallbackRecorded,
    decided: impl FnOnce() -> (CallbackOutcome, &'static str),
) -> CallbackOutcome {
    let (outcome, name) = match recorded {
        CallbackRecorded::Duplicate => (CallbackOutcome::Duplicate, "duplicate"),
        _ => decided(),
    };
    count(name);
    outcome
}

/// Why a callback that lost the race to another writer was not applied.
fn lost_race(current: &Payment) -> String {
    format!(
        "lost the race: the payment is {} at version {}",
        current.status.as_str(),
        current.version
    )
}

/// The payment event that records callback `ev` as not applied to `p`, and why.
pub(super) fn ignored_event(
    p: &Payment,
    ev: &CallbackEvent,
    event: PaymentEvent,
    why: String,
    now: i64,
) -> IgnoredEvent {
    IgnoredEvent {
        payment_id: p.id.clone(),
        event_id: format!("cb:{}", ev.event_id),
        event,
        from: p.status,
        source: "callback".into(),
        detail: why,
        now,
    }
}

/// The error-pool item of a callback that contradicts payment `p`, with both sides as evidence.
fn conflict_item(p: &Payment, ev: &CallbackEvent, why: &str, now: i64) -> NewErrorItem {
    NewErrorItem {
        kind: "conflicting_callback".into(),
        dedupe_key: format!("callback:{}", ev.event_id),
        payment_id: Some(p.id.clone()),
        summary: format!(
            "channel callback {} contradicts the payment: {why}",
            ev.event_id
        ),
        evidence: json!({
            "callback": {"event_id": ev.event_id, "type": ev.kind, "channel_key": ev.channel_key,
                         "amount": ev.amount, "currency": ev.currency, "created_at": ev.created_at},
            "payment": {"id": p.id, "status": p.status.as_str(), "amount": p.amount,
                        "currency": p.currency, "version": p.version},
        })
        .to_string(),
        reopen: false,
        now,
    }
}
