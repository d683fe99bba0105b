//! A customer's dispute of a charge, a chargeback (issue 38; seed 004 §8: what the channel
//! says happened is evidence a person acts on, never silently dropped).
//!
//! A dispute does not move the payment: the charge happened, and the card network decides
//! later whether it stands. What it does is put the payment before a person, with the
//! callback's evidence, in the error pool: an opened dispute is an item to answer at the
//! channel before its deadline; a won one resolves that item; a lost one opens an item of its
//! own (the amount taken back from the merchant is finance's to book: no ledger batch is
//! posted here). Each item is written in the callback's transaction, at most once per event id.

use serde_json::json;

use super::callbacks::{CallbackEvent, CallbackOutcome, ignored_event, recorded_outcome};
use super::{Core, ServiceError};
use crate::domain::money;
use crate::domain::state::PaymentEvent;
use crate::store::{CallbackDecision, CallbackReceipt, NewErrorItem, Payment};

/// The error-pool dedupe key of dispute `dispute_id`'s opened item (one per dispute).
pub fn dispute_key(dispute_id: &str) -> String {
    format!("dispute:{dispute_id}")
}

/// What a dispute callback's type says.
enum DisputeStep {
    Opened,
    Won,
    Lost,
}

impl Core {
    /// Records dispute callback `ev` for payment `p`: recorded as not applied (the payment's
    /// status stays) with, for an opened or lost dispute, its error-pool item in the same
    /// transaction; a won dispute resolves the opened one's item afterwards.
    ///
    /// Errors: a store failure, with nothing recorded (the channel delivers it again).
    pub(super) async fn record_dispute(
        &self,
        receipt: &CallbackReceipt<'_>,
        p: &Payment,
        ev: &CallbackEvent,
    ) -> Result<CallbackOutcome, ServiceError> {
        let step = match ev.kind.as_str() {
            "dispute.opened" => DisputeStep::Opened,
            "dispute.won" => DisputeStep::Won,
            "dispute.lost" => DisputeStep::Lost,
            other => {
                let why = format!("unknown dispute callback type {other:?}");
                let ignored = ignored_event(
                    p,
                    ev,
                    PaymentEvent::ChannelError,
                    why.clone(),
                    receipt.received_at,
                );
                let recorded = self
                    .store
                    .record_callback(receipt, CallbackDecision::Ignore(&ignored))
                    .await?;
                return Ok(recorded_outcome(recorded, || {
                    (CallbackOutcome::Ignored(why), "ignored")
                }));
            }
        };
        let dispute = ev.dispute_id.clone().unwrap_or_else(|| ev.event_id.clone());
        let disputed = money::display(ev.amount, &ev.currency);
        let reason = ev.reason.as_deref().unwrap_or("no reason given");
        let why = match step {
            DisputeStep::Opened => format!("dispute {dispute} opened: {disputed} ({reason})"),
            DisputeStep::Won => format!("dispute {dispute} won: the charge stands"),
            DisputeStep::Lost => {
                format!("dispute {dispute} lost: {disputed} taken back ({reason})")
            }
        };
        // Not a transition: recorded among the payment's events as one that moved nothing.
        let ignored = ignored_event(
            p,
            ev,
            PaymentEvent::ChannelError,
            why.clone(),
            receipt.received_at,
        );
        let item = match step {
            DisputeStep::Opened => Some(dispute_item(
                p,
                ev,
                receipt.received_at,
                dispute_key(&dispute),
                format!(
                    "customer disputes {disputed} of the charge ({reason}): answer at the channel with the evidence"
                ),
            )),
            DisputeStep::Lost => Some(dispute_item(
                p,
                ev,
                receipt.received_at,
                format!("{}:lost", dispute_key(&dispute)),
                format!(
                    "dispute lost: {disputed} taken back from the merchant ({reason}); book the chargeback"
                ),
            )),
            DisputeStep::Won => None,
        };
        let decision = match &item {
            Some(item) => CallbackDecision::Conflict(&ignored, item),
            None => CallbackDecision::Ignore(&ignored),
        };
        let recorded = self.store.record_callback(receipt, decision).await?;
        let outcome = recorded_outcome(recorded, || (CallbackOutcome::Ignored(why), "dispute"));
        if matches!(step, DisputeStep::Won | DisputeStep::Lost)
            && outcome != CallbackOutcome::Duplicate
        {
            let note = match step {
                DisputeStep::Won => "dispute won at the channel: the charge stands",
                _ => "dispute lost at the channel: see its own item",
            };
            self.store
                .resolve_error_by_key(&dispute_key(&dispute), note, "system", receipt.received_at)
                .await?;
        }
        Ok(outcome)
    }
}

/// The error-pool item (kind `dispute`, under `dedupe_key`) of dispute callback `ev` for
/// payment `p`, received at `now` (epoch ms UTC), with the callback and the payment as
/// evidence.
fn dispute_item(
    p: &Payment,
    ev: &CallbackEvent,
    now: i64,
    dedupe_key: String,
    summary: String,
) -> NewErrorItem {
    let dispute = ev.dispute_id.as_deref().unwrap_or(&ev.event_id);
    NewErrorItem {
        kind: "dispute".into(),
        dedupe_key,
        payment_id: Some(p.id.clone()),
        summary,
        evidence: json!({
            "dispute": {"id": dispute, "type": ev.kind, "reason": ev.reason,
                        "amount": ev.amount, "currency": ev.currency, "event_id": ev.event_id,
                        "created_at": ev.created_at},
            "payment": {"id": p.id, "status": p.status.as_str(), "amount": p.amount,
                        "currency": p.currency, "connector": p.connector},
        })
        .to_string(),
        reopen: true,
        now,
    }
}
