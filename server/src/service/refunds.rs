//! Merchant refunds (DESIGN.md "Merchant HTTP API": total refunds never exceed the payment
//! amount; "Ledger": a refund posts the reverse batch). The refund id is the channel's refund
//! key, so a resumed or retried refund is never paid out twice.

use super::payments::Extras;
use super::write::{Answer, KeyClaim, Refusal, Seal, Start, Written, json_answer};
use super::{Core, ServiceError, ids};
use crate::channel::RefundOutcome;
use crate::domain::freeze::{self, NewWork};
use crate::domain::ledger;
use crate::domain::refunds::RefundStatus;
use crate::domain::state::{PaymentEvent, PaymentStatus};
use crate::store::views::RefundView;
use crate::store::{CreateRefund, Merchant, NewRefund, OpenedRefund, Refund};

/// A merchant's refund request, validated: minor units and free text.
#[derive(Debug, Clone)]
pub struct RefundInput {
    /// Minor units, > 0.
    pub amount: i64,
    /// Free text, at most 1024 characters.
    pub reason: String,
}

/// Why a refund under an Idempotency-Key did not answer with a refund
/// ([`Core::create_refund_keyed`]). All but `Failed` are refusals (the key stays free).
#[derive(Debug)]
pub enum RefundError {
    /// No such payment, or another merchant's: 404.
    NoPayment,
    /// The merchant is frozen: 403 `merchant_frozen`.
    Frozen,
    /// The payment is not refundable in this status: 409 `payment_not_refundable`.
    NotRefundable(PaymentStatus),
    /// More than what remains: 409 `refund_exceeds_remaining`.
    ExceedsRemaining {
        /// Minor units that may still be refunded.
        remaining: i64,
    },
    /// An ops reversal holds the payment: 409 `payment_reversing`.
    Reversing,
    /// This request's claim lapsed and another request holds the key now: 409
    /// `idempotency_key_in_use`.
    KeyLost,
    /// The store failed, or the payment kept changing.
    Failed(ServiceError),
}

impl From<ServiceError> for RefundError {
    fn from(e: ServiceError) -> Self {
        RefundError::Failed(e)
    }
}

impl From<crate::store::StoreError> for RefundError {
    fn from(e: crate::store::StoreError) -> Self {
        RefundError::Failed(e.into())
    }
}

impl Refusal for RefundError {
    fn is_refusal(&self) -> bool {
        match self {
            RefundError::Failed(e) => e.is_refusal(),
            _ => true,
        }
    }
}

/// A refund that was not created, as the error it answers.
fn refused(created: CreateRefund) -> RefundError {
    match created {
        CreateRefund::NotRefundable(status) => RefundError::NotRefundable(status),
        CreateRefund::ExceedsRemaining { remaining } => RefundError::ExceedsRemaining { remaining },
        CreateRefund::Reversing => RefundError::Reversing,
        CreateRefund::NoPayment | CreateRefund::Created(_) => RefundError::NoPayment,
    }
}

impl Core {
    /// A merchant refund under an Idempotency-Key, on the one write path
    /// ([`Core::keyed_write`]): one transaction claims the key with the new refund's id as
    /// its recovery point and reserves and inserts the refund ([`Refunds::open_refund`]);
    /// then the refund goes to the channel ([`drive_refund`](Self::drive_refund)). A retry
    /// after a crash resumes the one refund id its key recorded (refunds have no business
    /// key to catch a second one): it drives the refund, or creates it under that id when
    /// the crash came first. Only a new refund is refused to a frozen merchant; one already
    /// created is in flight and settles. Answers 201 with the refund.
    ///
    /// [`Refunds::open_refund`]: crate::store::Refunds::open_refund
    pub async fn create_refund_keyed(
        &self,
        merchant: &Merchant,
        payment_id: &str,
        input: &RefundInput,
        claim: &KeyClaim,
    ) -> Result<Written, RefundError> {
        match self.store.payment(payment_id).await? {
            Some(p) if p.merchant_id == merchant.id => {}
            _ => return Err(RefundError::NoPayment),
        }
        let start = if freeze::may_start(merchant.frozen, NewWork::Refunds).is_err() {
            // Nothing new may be written: only a crashed request's refund goes on.
            Start::of_claim_only(self.store.claim_key(claim).await?)
        } else {
            let new = self.new_refund(&ids::new_id("re"), payment_id, input);
            match self.store.open_refund(claim, &new).await? {
                OpenedRefund::Opened(CreateRefund::Created(r)) => Start::Fresh(r),
                OpenedRefund::Opened(other) => return Err(refused(other)),
                OpenedRefund::Key(k) => Start::of_claim_only(k),
            }
        };
        let fresh = async |r: Refund| -> Result<Answer, RefundError> {
            Ok(refund_answer(&self.drive_refund(r, "api").await?))
        };
        let resume = async |resource_id: Option<String>| -> Result<Answer, RefundError> {
            let id = match resource_id {
                Some(id) => id,
                None if freeze::may_start(merchant.frozen, NewWork::Refunds).is_err() => {
                    return Err(RefundError::Frozen);
                }
                None => {
                    let id = ids::new_id("re");
                    if !self.record_recovery_point(claim, &id).await? {
                        return Err(RefundError::KeyLost);
                    }
                    id
                }
            };
            if let Some(r) = self.store.refund(&id).await? {
                return Ok(refund_answer(&self.drive_refund(r, "api").await?));
            }
            if freeze::may_start(merchant.frozen, NewWork::Refunds).is_err() {
                return Err(RefundError::Frozen);
            }
            match self
                .store
                .create_refund(&self.new_refund(&id, payment_id, input))
                .await?
            {
                CreateRefund::Created(r) => Ok(refund_answer(&self.drive_refund(r, "api").await?)),
                other => Err(refused(other)),
            }
        };
        self.keyed_write(claim, Seal::Plain, start, fresh, resume)
            .await
    }

    /// The row of a new refund with its job's due time.
    fn new_refund(&self, id: &str, payment_id: &str, input: &RefundInput) -> NewRefund {
        let now = self.clock.now_ms();
        NewRefund {
            id: id.into(),
            payment_id: payment_id.into(),
            amount: input.amount,
            reason: input.reason.clone(),
            now,
            job_due_at: now + self.timings.submit_delay_ms,
            max_attempts: self.timings.max_attempts,
        }
    }

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
                )
                .dated(self.accounting.date_of(now));
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
            && p.refunded_amount == p.charged_amount()
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

/// The answer of a refund: 201 with the refund as the request leaves it.
fn refund_answer(r: &Refund) -> Answer {
    Answer::Ready(json_answer(201, &RefundView::from(r)))
}
