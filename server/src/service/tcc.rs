//! TCC by business key (issue 34; seed 004 §5.1, with 000 §5.2 and §7.3): the Cancel of a
//! merchant's saga coordinator names the order, not a payment, because the coordinator may
//! have timed out before converge saw its Try (the create) at all.
//!
//! `POST /v1/payments/cancel {"merchant_order_id"}` cancels the payment that has the order
//! (PENDING -> CANCELED, [`Core::cancel_pending`]) or voids its hold ([`Core::void_hold`]); when
//! no payment has it, it writes a tombstone and answers success (the empty rollback), and a
//! create for the order afterwards is refused with 409 `order_cancelled` before anything is
//! written or sent (no hanging hold). The tombstone and the check that no payment exists are
//! one transaction, serialised with the creates of the order
//! ([`Payments::cancel_order`](crate::store::Payments::cancel_order)); tombstones are kept
//! `--tombstone-retention-days`, past the key retention. Cancel is idempotent: a repeated one
//! answers what the first did (a CANCELED or VOIDED payment as it is, a tombstone again).

use serde::Serialize;
use utoipa::ToSchema;

use super::Core;
use super::holds::HoldError;
use super::write::{Answer, KeyClaim, Seal, Start, Written, json_answer};
use crate::domain::state::PaymentStatus;
use crate::store::views::PaymentView;
use crate::store::{Merchant, OrderCancel, Payment};
use converge_wire::payments::CaptureMode;

/// What a cancel by business key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OrderCancelOutcome {
    /// The order's payment had not reached the channel: CANCELED (now or before).
    Canceled,
    /// The order's manual-capture payment's hold was voided (VOIDED, or VOIDING while the
    /// channel's answer is awaited: the void job finishes it).
    Voided,
    /// No payment had the order: a tombstone refuses any later create for it.
    Tombstoned,
}

/// The answer of `POST /v1/payments/cancel` (200).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"merchant_order_id": "order-1", "outcome": "tombstoned", "payment": null}))]
pub struct OrderCancelView {
    /// The merchant's order id the cancel named.
    merchant_order_id: String,
    /// `canceled` or `voided` (the order's payment), or `tombstoned` (no payment had it).
    outcome: OrderCancelOutcome,
    /// The order's payment after the cancel; null when tombstoned.
    payment: Option<PaymentView>,
}

impl OrderCancelView {
    /// The view of a cancel of `merchant_order_id` that did `outcome` to `payment`.
    pub fn new(
        merchant_order_id: &str,
        outcome: OrderCancelOutcome,
        payment: Option<&Payment>,
    ) -> Self {
        OrderCancelView {
            merchant_order_id: merchant_order_id.to_owned(),
            outcome,
            payment: payment.map(PaymentView::from),
        }
    }
}

impl Core {
    /// `POST /v1/payments/cancel` under an Idempotency-Key, on the one write path
    /// ([`Core::keyed_write`]): the claim records no recovery point (a cancel is idempotent
    /// on the order, so a retry after a crash runs it again), then
    /// [`cancel_order`](Self::cancel_order). Answers 200 with an [`OrderCancelView`]; a
    /// refusal ([`HoldError`], 409) releases the key. A frozen merchant may cancel: a cancel
    /// starts nothing.
    pub async fn cancel_order_keyed(
        &self,
        merchant: &Merchant,
        merchant_order_id: &str,
        claim: &KeyClaim,
    ) -> Result<Written, HoldError> {
        let start = Start::<()>::of_claim_only(self.store.claim_key(claim).await?);
        let cancel = async || -> Result<Answer, HoldError> {
            let (outcome, p) = self
                .cancel_order(merchant, merchant_order_id, "api")
                .await?;
            let view = OrderCancelView::new(merchant_order_id, outcome, p.as_ref());
            Ok(Answer::Ready(json_answer(200, &view)))
        };
        self.keyed_write(
            claim,
            Seal::Plain,
            start,
            async |()| cancel().await,
            async |_| cancel().await,
        )
        .await
    }

    /// Cancels merchant `merchant`'s order `merchant_order_id` on `source`'s authority: its
    /// payment cancelled or voided ([`cancel_payment_of_order`](Self::cancel_payment_of_order)),
    /// or, when no payment has it, the order tombstoned in the transaction that found none.
    /// Returns what was done and the payment after it (None when tombstoned).
    pub async fn cancel_order(
        &self,
        merchant: &Merchant,
        merchant_order_id: &str,
        source: &str,
    ) -> Result<(OrderCancelOutcome, Option<Payment>), HoldError> {
        let now = self.clock.now_ms();
        match self
            .store
            .cancel_order(merchant.id, merchant_order_id, now)
            .await?
        {
            OrderCancel::Tombstoned { .. } => Ok((OrderCancelOutcome::Tombstoned, None)),
            OrderCancel::Payment(p) => {
                let (outcome, after) = self.cancel_payment_of_order(*p, source).await?;
                Ok((outcome, Some(after)))
            }
        }
    }

    /// The Cancel of an order's existing payment `p`: PENDING -> CANCELED; a manual-capture
    /// payment whose hold is in flight, unknown, AUTHORIZED with nothing captured, or VOIDING
    /// -> voided; CANCELED and VOIDED answer as they are. Anything else is refused (409
    /// `not_cancelable`, `not_voidable` or `hold_busy`). A PENDING payment submitted meanwhile
    /// is read again and decided once more.
    async fn cancel_payment_of_order(
        &self,
        mut p: Payment,
        source: &str,
    ) -> Result<(OrderCancelOutcome, Payment), HoldError> {
        for _ in 0..2 {
            match p.status {
                PaymentStatus::Canceled => return Ok((OrderCancelOutcome::Canceled, p)),
                PaymentStatus::Voided => return Ok((OrderCancelOutcome::Voided, p)),
                PaymentStatus::Pending => match self.cancel_pending(&p, source).await {
                    Ok(after) => return Ok((OrderCancelOutcome::Canceled, after)),
                    Err(HoldError::NotCancelable(_)) => {
                        p = self
                            .store
                            .payment(&p.id)
                            .await?
                            .ok_or(HoldError::NotFound)?;
                    }
                    Err(e) => return Err(e),
                },
                _ if p.capture_mode == CaptureMode::Manual => {
                    let after = self.void_hold(&p, source).await?;
                    return Ok((OrderCancelOutcome::Voided, after));
                }
                status => return Err(HoldError::NotCancelable(status)),
            }
        }
        Err(HoldError::NotCancelable(p.status))
    }
}
