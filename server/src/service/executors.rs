//! The executors of approved ops actions (DESIGN.md "Ops console"): what `query`,
//! `reverse`, `force_transition`, `capture` and `void` do to a payment once the maker-checker lifecycle in
//! [`super::actions`] has let them run (`retry` only wakes jobs and stays there). Each step is
//! idempotent, so re-running an approved or failed execution cannot refund or move a payment
//! twice: the channel refund is keyed by the action id, every transition is conditional on the
//! pinned version and keyed by the action id.

use serde_json::json;

use super::Core;
use super::actions::REVERSE_JOB_DELAY_MS;
use super::holds::CaptureInput;
use super::payments::Extras;
use super::resolve::{QueryVerdict, query_verdict};
use crate::channel::{CancelOutcome, HoldQueryOutcome, QueryOutcome, RefundOutcome};
use crate::domain::actions::{HoldFacts, capture_refusal, force_allowed, void_refusal};
use crate::domain::state::{PaymentEvent, PaymentStatus, check, rule};
use crate::store::{
    ActionRecord, JobKind, NewJob, Payment, ReserveReversal, ReversalReservation, TransitionResult,
};
use converge_wire::QueryAnswer;

/// A channel's answer to a query as the `query` action records it: the outcome in fields
/// the console reads as a sentence with its tone (issue 41), and the answer's text as before.
fn answer_fields(answer: &QueryOutcome) -> QueryAnswer {
    let mut out = QueryAnswer {
        answer: format!("{answer:?}"),
        ..QueryAnswer::default()
    };
    out.outcome = match answer {
        QueryOutcome::Succeeded { amount, currency } => {
            out.amount = Some(*amount);
            out.currency = Some(currency.clone());
            "succeeded"
        }
        QueryOutcome::Declined { reason } => {
            out.reason = Some(reason.clone());
            "declined"
        }
        QueryOutcome::RequiresAction { detail } => {
            out.detail = Some(detail.clone());
            "requires_action"
        }
        QueryOutcome::NotFound => "not_found",
        QueryOutcome::Cancelled => "cancelled",
        QueryOutcome::Error { detail } => {
            out.detail = Some(detail.clone());
            "error"
        }
    }
    .into();
    out
}

/// A channel's answer to a query of a hold as the `query` action records it (issue 34).
fn hold_answer_fields(answer: &HoldQueryOutcome) -> QueryAnswer {
    let mut out = QueryAnswer {
        answer: format!("{answer:?}"),
        outcome: answer.name().into(),
        ..QueryAnswer::default()
    };
    match answer {
        HoldQueryOutcome::Found {
            amount,
            captured,
            currency,
            expires_at_ms,
            ..
        } => {
            out.amount = Some(*amount);
            out.captured = Some(*captured);
            out.currency = Some(currency.clone());
            out.expires_at = Some(*expires_at_ms);
        }
        HoldQueryOutcome::Error { detail } => out.detail = Some(detail.clone()),
        HoldQueryOutcome::NotFound | HoldQueryOutcome::Cancelled => {}
    }
    out
}

/// `recorded` with the payment's status after the query, as the action's JSON result.
async fn with_status_after(
    core: &Core,
    payment_id: &str,
    mut recorded: QueryAnswer,
) -> Result<serde_json::Value, String> {
    recorded.status = core
        .store
        .payment(payment_id)
        .await
        .map_err(|e| e.to_string())?
        .map(|p| p.status.as_str().to_string());
    serde_json::to_value(recorded).map_err(|e| e.to_string())
}

impl Core {
    pub(super) async fn run_query(
        &self,
        a: &ActionRecord,
        p: Payment,
    ) -> Result<serde_json::Value, String> {
        if p.capture_mode == converge_wire::payments::CaptureMode::Manual {
            return self.run_hold_query(a, p).await;
        }
        let answer = self.connectors.for_payment(&p).query(&p.channel_key).await;
        let source = format!("action:{}", a.id);
        let recorded = answer_fields(&answer);
        // An ops query settles what the worker's query would, and only an UNKNOWN payment or
        // one waiting for the customer (a second query, by the worker's rule in one place).
        if p.status == PaymentStatus::RequiresAction {
            self.resolve_action(p.clone(), &source)
                .await
                .map_err(|e| e.to_string())?;
        } else if p.status == PaymentStatus::Unknown
            && let QueryVerdict::Settles(event, extras) = query_verdict(&p, answer)
        {
            let after = self
                .apply(&p, event, &source, extras)
                .await
                .map_err(|e| e.to_string())?;
            self.drive(after, &source)
                .await
                .map_err(|e| e.to_string())?;
        }
        with_status_after(self, &p.id, recorded).await
    }

    /// The `query` action for a manual-capture payment (issue 34): the channel's hold under
    /// its key, recorded as fields; an UNKNOWN hold is then settled as the worker's query of
    /// the hold would (a second query, by the same rule in one place).
    async fn run_hold_query(
        &self,
        a: &ActionRecord,
        p: Payment,
    ) -> Result<serde_json::Value, String> {
        let answer = self
            .connectors
            .for_payment(&p)
            .query_hold(&p.channel_key)
            .await;
        let source = format!("action:{}", a.id);
        let recorded = match answer {
            Ok(answer) => hold_answer_fields(&answer),
            Err(unsupported) => QueryAnswer {
                outcome: "error".into(),
                detail: Some(unsupported.to_string()),
                answer: format!("{unsupported:?}"),
                ..QueryAnswer::default()
            },
        };
        if p.status == PaymentStatus::Unknown {
            self.resolve_unknown(p.clone(), &source)
                .await
                .map_err(|e| e.to_string())?;
        } else if p.status == PaymentStatus::RequiresAction {
            self.resolve_action(p.clone(), &source)
                .await
                .map_err(|e| e.to_string())?;
        }
        with_status_after(self, &p.id, recorded).await
    }

    /// Reverses at the channel what the payment still holds. The reversal first reserves the
    /// payment at the pinned version (while no merchant refund is pending), so a merchant
    /// refund racing it is refused rather than issued beside it; only then does it refund at
    /// the channel (keyed by the action id) and record REVERSED.
    pub(super) async fn run_reverse(
        &self,
        a: &ActionRecord,
        p: Payment,
    ) -> Result<serde_json::Value, String> {
        if p.status == PaymentStatus::Reversed {
            return Ok(json!({"status": "REVERSED", "note": "already reversed"}));
        }
        let now = self.clock.now_ms();
        let reservation = ReserveReversal {
            payment_id: p.id.clone(),
            action_id: a.id.clone(),
            pinned_version: a.payment_version,
            now,
            job: NewJob {
                kind: JobKind::Reverse,
                payment_id: Some(p.id.clone()),
                refund_id: None,
                // Later than this request's own channel call takes: the job finishes a
                // reversal whose request died (running beside it would be harmless anyway).
                run_at: now + REVERSE_JOB_DELAY_MS,
                max_attempts: self.timings.max_attempts,
            },
        };
        let held = match self
            .store
            .reserve_reversal(&reservation)
            .await
            .map_err(|e| e.to_string())?
        {
            ReversalReservation::Reserved(p) | ReversalReservation::AlreadyHeld(p) => p,
            ReversalReservation::NoPayment => return Err("payment vanished".into()),
            ReversalReservation::Refused {
                payment,
                pending_refunds,
            } => {
                return Err(if payment.version != a.payment_version {
                    format!(
                        "payment moved from version {} to {}",
                        a.payment_version, payment.version
                    )
                } else if pending_refunds > 0 {
                    format!("{pending_refunds} merchant refund(s) still pending")
                } else {
                    format!("a {} payment cannot be reversed", payment.status)
                });
            }
        };
        let remaining = held.unrefunded();
        // The result names its currency, so every reader shows the amount in major units.
        let held_currency = held.currency.clone();
        self.finish_reversal(&a.id, held, &format!("action:{}", a.id))
            .await?;
        Ok(
            json!({"status": "REVERSED", "refunded_at_channel": remaining, "currency": held_currency}),
        )
    }

    /// Finishes a reserved reversal (by its action's execution or by its `reverse` job):
    /// refunds the remaining amount at the channel under the action id (idempotent there), then
    /// records REVERSED with the reversing ledger batch. A refusal by the channel releases the
    /// reservation; an undecidable answer keeps it for the job. Safe to run twice.
    pub async fn finish_reversal(
        &self,
        action_id: &str,
        held: Payment,
        source: &str,
    ) -> Result<Payment, String> {
        if held.reversal_id.as_deref() != Some(action_id) {
            return Err(format!(
                "action {action_id} holds no reservation on {}",
                held.id
            ));
        }
        let remaining = held.unrefunded();
        match self
            .connectors
            .for_payment(&held)
            .refund(&held.channel_key, action_id, remaining)
            .await
        {
            RefundOutcome::Succeeded => {}
            RefundOutcome::Rejected { reason } => {
                self.store
                    .release_reversal(&held.id, action_id, self.clock.now_ms())
                    .await
                    .map_err(|e| e.to_string())?;
                return Err(format!("channel refused the refund: {reason}"));
            }
            RefundOutcome::Error { detail } => {
                return Err(format!("refund outcome unknown (execute again): {detail}"));
            }
        }
        // The channel has refunded: record it. Nothing can reserve the payment meanwhile, but
        // a SUSPENSE payment may still be posted (SUSPENSE -> SUCCESS), so follow its moves.
        let mut p = held;
        for _ in 0..8 {
            if p.status == PaymentStatus::Reversed {
                return Ok(p);
            }
            // The row says what the reversal posts: the reversing batch from SUCCESS, nothing
            // from SUSPENSE (never posted).
            let r = rule(p.status, PaymentEvent::Reversed).map_err(|e| e.to_string())?;
            let extras = Extras {
                detail: format!(
                    "reversed the remaining {} at the channel",
                    crate::domain::money::display(remaining, &p.currency)
                ),
                event_id: Some(format!("{}@{action_id}", PaymentEvent::Reversed)),
                ..Extras::default()
            };
            let t = self.step(&p, r, source, extras, self.clock.now_ms());
            match self
                .store
                .apply_transition(&t)
                .await
                .map_err(|e| e.to_string())?
            {
                TransitionResult::Applied(after) => return Ok(after),
                TransitionResult::DuplicateEvent => {
                    return self
                        .store
                        .payment(&p.id)
                        .await
                        .map_err(|e| e.to_string())?
                        .ok_or_else(|| "payment vanished".into());
                }
                TransitionResult::Stale(now) => p = now,
                TransitionResult::Refused(e) => {
                    return Err(format!("refused by the state machine: {e}"));
                }
            }
        }
        Err("the payment kept moving; the reverse job records it".into())
    }

    pub(super) async fn run_force(
        &self,
        a: &ActionRecord,
        p: Payment,
    ) -> Result<serde_json::Value, String> {
        let target: PaymentStatus = a
            .target_status
            .as_deref()
            .unwrap_or_default()
            .parse()
            .map_err(|_| "bad target".to_string())?;
        if p.status == target {
            return Ok(json!({"status": target.as_str(), "note": "already there"}));
        }
        if p.version != a.payment_version || !force_allowed(p.status, target) {
            return Err(format!(
                "payment is {} at version {}; the request pinned version {}",
                p.status, p.version, a.payment_version
            ));
        }
        if (p.status, target) == (PaymentStatus::Unknown, PaymentStatus::Failed) {
            match self.connectors.for_payment(&p).cancel(&p.channel_key).await {
                CancelOutcome::Cancelled => {}
                CancelOutcome::AlreadyCharged { amount, currency } => {
                    return Err(format!(
                        "the channel holds a charge of {amount} {currency}; not failing it"
                    ));
                }
                CancelOutcome::Error { detail } => {
                    return Err(format!("could not fence the key: {detail}"));
                }
            }
        }
        // A SUSPENSE payment forced to SUCCESS has its item resolved by the step's effects.
        let after = self.forced(a, &p, target).await?;
        if after.status == PaymentStatus::ChannelSuccess {
            self.drive(after, &format!("action:{}", a.id))
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(json!({"status": target.as_str()}))
    }

    /// Applies an approved force-transition to `target`, conditional on the pinned version,
    /// with what its row in [`FORCE_WHITELIST`](crate::domain::state::FORCE_WHITELIST) writes.
    pub(super) async fn forced(
        &self,
        a: &ActionRecord,
        p: &Payment,
        target: PaymentStatus,
    ) -> Result<Payment, String> {
        let r = check(p.status, PaymentEvent::Forced, target)
            .map_err(|e| format!("refused by the state machine: {e}"))?;
        let pinned = Payment {
            version: a.payment_version,
            ..p.clone()
        };
        let extras = Extras {
            detail: a.evidence.clone(),
            event_id: Some(format!("{}@{}", PaymentEvent::Forced, a.id)),
            ..Extras::default()
        };
        let t = self.step(
            &pinned,
            r,
            &format!("action:{}", a.id),
            extras,
            self.clock.now_ms(),
        );
        match self
            .store
            .apply_transition(&t)
            .await
            .map_err(|e| e.to_string())?
        {
            TransitionResult::Applied(after) => Ok(after),
            TransitionResult::DuplicateEvent => self
                .store
                .payment(&p.id)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "payment vanished".into()),
            TransitionResult::Stale(now) => Err(format!(
                "payment moved to {} (version {}) before the change applied",
                now.status, now.version
            )),
            TransitionResult::Refused(e) => Err(format!("refused by the state machine: {e}")),
        }
    }
    /// Captures what an approved `capture` request asked (issue 34) under the capture id its
    /// action id names ([`capture_id_of`]), so an execution run again finds its capture and
    /// never makes a second one: a capture already recorded is reported (settled by a query
    /// of the hold while it is still in flight). A new capture needs the payment at the
    /// pinned version and passes the request's checks again (the hold may have lapsed).
    pub(super) async fn run_capture(
        &self,
        a: &ActionRecord,
        p: Payment,
    ) -> Result<serde_json::Value, String> {
        let id = capture_id_of(&a.id);
        let source = format!("action:{}", a.id);
        let amount = a
            .capture_amount
            .ok_or("the request has no capture amount")?;
        let last = a.capture_final.unwrap_or(false);
        let known = self
            .store
            .payment_captures(&p.id)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .find(|c| c.id == id);
        // By the status's name: `captured`, `pending` or `refused`.
        let known = known.map(|c| (c.status.to_string(), c.reason));
        let after = match known {
            Some((status, reason)) if status == "refused" => {
                return Err(format!(
                    "the channel refused capture {id}: {}",
                    reason.unwrap_or_default()
                ));
            }
            Some((status, _)) if status == "pending" && p.status == PaymentStatus::Capturing => {
                self.settle_capture(p.clone(), &source)
                    .await
                    .map_err(|e| e.to_string())?;
                self.reread(&p.id).await?
            }
            Some(_) => p,
            None => {
                if p.version != a.payment_version {
                    return Err(format!(
                        "payment moved from version {} to {}",
                        a.payment_version, p.version
                    ));
                }
                if let Some(why) = capture_refusal(p.status, HoldFacts::of(&p, self.clock.now_ms()))
                {
                    return Err(why);
                }
                self.capture_hold(&p, CaptureInput { amount, last }, Some(id.clone()), &source)
                    .await
                    .map_err(|e| e.to_string())?
            }
        };
        Ok(hold_result(
            &after,
            json!({"capture_id": id, "capture_amount": amount, "final": last}),
        ))
    }

    /// Voids the hold of an approved `void` request (issue 34): records the void (VOIDING)
    /// at the pinned version, then voids at the channel and records VOIDED. Run again, it
    /// finishes a void in flight or reports one done; the channel's void is idempotent.
    pub(super) async fn run_void(
        &self,
        a: &ActionRecord,
        p: Payment,
    ) -> Result<serde_json::Value, String> {
        let source = format!("action:{}", a.id);
        if !matches!(p.status, PaymentStatus::Voided | PaymentStatus::Voiding) {
            if p.version != a.payment_version {
                return Err(format!(
                    "payment moved from version {} to {}",
                    a.payment_version, p.version
                ));
            }
            if let Some(why) = void_refusal(p.status, HoldFacts::of(&p, self.clock.now_ms())) {
                return Err(why);
            }
        }
        let after = self
            .void_hold(&p, &source)
            .await
            .map_err(|e| e.to_string())?;
        Ok(hold_result(&after, json!({})))
    }

    async fn reread(&self, id: &str) -> Result<Payment, String> {
        self.store
            .payment(id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "payment vanished".into())
    }
}

/// The capture id of an ops `capture` action: `cap_` and the action id's hex (`act_ab12…`
/// captures as `cap_ab12…`), so every execution of one request names the same capture at the
/// channel and in the core.
pub fn capture_id_of(action_id: &str) -> String {
    format!(
        "cap_{}",
        action_id.strip_prefix("act_").unwrap_or(action_id)
    )
}

/// A hold action's result: `extra`'s fields, then the payment's status after it and its hold's
/// figures (captured and released so far, integer minor units, with the currency, so every
/// reader shows them in major units).
fn hold_result(after: &Payment, mut extra: serde_json::Value) -> serde_json::Value {
    let hold = after.hold.clone().unwrap_or_default();
    if let Some(m) = extra.as_object_mut() {
        m.insert("status".into(), json!(after.status.as_str()));
        m.insert("captured_amount".into(), json!(hold.captured));
        m.insert("released_amount".into(), json!(hold.released));
        m.insert("currency".into(), json!(after.currency));
        if after.status == PaymentStatus::Capturing {
            m.insert(
                "note".into(),
                json!(
                    "the channel's answer was undecidable; the capture job settles it by a query"
                ),
            );
        }
    }
    extra
}
