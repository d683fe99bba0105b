//! Merchant refunds (DESIGN.md "Merchant HTTP API": total refunds never exceed the payment
//! amount; "Ledger": a refund posts the reverse batch). The refund id is the channel's refund
//! key, so a resumed or retried refund is never paid out twice.

use super::payments::Extras;
use super::{Core, ServiceError, ids};
use crate::channel::RefundOutcome;
use crate::domain::ledger;
use crate::domain::refunds::RefundStatus;
use crate::domain::state::{PaymentEvent, PaymentStatus};
use crate::store::{CreateRefund, NewRefund, Refund};

impl Core {
    /// Reserves `amount` minor units on a SUCCESS payment and inserts a pending refund with
    /// its job (one transaction).
    pub async fn insert_refund(
        &self,
        payment_id: &str,
        amount: i64,
        reason: &str,
    ) -> Result<CreateRefund, ServiceError> {
        self.insert_refund_with_id(&ids::new_id("re"), payment_id, amount, reason)
            .await
    }

    /// [`insert_refund`](Self::insert_refund) under an id chosen (and recorded) by the caller.
    pub async fn insert_refund_with_id(
        &self,
        id: &str,
        payment_id: &str,
        amount: i64,
        reason: &str,
    ) -> Result<CreateRefund, ServiceError> {
        let now = self.clock.now_ms();
        Ok(self
            .store
            .create_refund(&NewRefund {
                id: id.into(),
                payment_id: payment_id.into(),
                amount,
                reason: reason.into(),
                now,
                job_due_at: now + self.timings.submit_delay_ms,
                max_attempts: self.timings.max_attempts,
            })
            .await?)
    }

    /// Sends a pending refund to the channel and records the answer; when refunds reach the
    /// payment amount the payment becomes REFUNDED. An undecidable answer leaves the refund
    /// pending for its job.
    #[tracing::instrument(name = "drive_refund", skip_all, fields(refund_id = %refund.id, payment_id = %refund.payment_id))]
    pub async fn drive_refund(&self, refund: Refund, source: &str) -> Result<Refund, ServiceError> {
        if refund.status != RefundStatus::Pending {
            return Ok(refund);
        }
        // Refund jobs paused (the emergency switch): nothing goes to the channel; the refund
        // stays pending and its job sends it after the resume.
        if self.active_pauses().await.job_kind("refund") {
            return Ok(refund);
        }
        let Some(payment) = self.store.payment(&refund.payment_id).await? else {
            return Ok(refund);
        };
        let now = self.clock.now_ms();
        match self
            .connectors
            .for_payment(&payment)
            .refund(&payment.channel_key, &refund.id, refund.amount)
            .await
        {
            RefundOutcome::Succeeded => {
                let posting = ledger::refund(
                    payment.merchant_id,
                    &refund.id,
                    refund.amount,
                    &payment.currency,
                );
                self.store
                    .refund_succeeded(&refund.id, &posting, now)
                    .await?;
                self.mark_refunded_if_complete(&refund.payment_id, source)
                    .await?;
            }
            RefundOutcome::Rejected { reason } => {
                self.store.refund_failed(&refund.id, &reason, now).await?;
            }
            RefundOutcome::Error { detail } => {
                tracing::warn!(refund = %refund.id, %detail, "refund outcome unknown; left to its job");
            }
        }
        Ok(self.store.refund(&refund.id).await?.unwrap_or(refund))
    }

    async fn mark_refunded_if_complete(
        &self,
        payment_id: &str,
        source: &str,
    ) -> Result<(), ServiceError> {
        let Some(p) = self.store.payment(payment_id).await? else {
            return Ok(());
        };
        if p.status == PaymentStatus::Success
            && p.refunded_amount == p.amount
            && self.store.pending_refund_count(payment_id).await? == 0
        {
            self.apply(
                &p,
                PaymentEvent::RefundedInFull,
                source,
                Extras {
                    detail: "refunds reached the amount".into(),
                    ..Extras::default()
                },
            )
            .await?;
        }
        Ok(())
    }
}
