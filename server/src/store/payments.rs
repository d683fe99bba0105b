//! Storage of payments: their creation (with or without an Idempotency-Key), the state
//! machine's transitions with their effects, and their event and job history. Part of the
//! storage abstraction: [`Store`](super::Store) requires it, the SQL is `payments_sql.rs`, and
//! the conformance suite runs it on both backends.

use async_trait::async_trait;

use super::{
    CaptureRecord, CreatePayment, EventRecord, IgnoredEvent, Job, NewPayment, OpenPayment,
    OpenedPayment, Payment, StoreError, Transition, TransitionResult, TransitionsResult,
};
use crate::store::keys::KeyCompletion;

/// Payments, their transitions and history.
#[async_trait]
pub trait Payments: Send + Sync + 'static {
    /// Inserts a PENDING payment and its submit job in one transaction, or returns the
    /// merchant's existing payment with the same merchant_order_id.
    async fn create_payment(&self, new: &NewPayment) -> Result<CreatePayment, StoreError>;
    /// Phase 1 of a create under an Idempotency-Key, in one transaction: claims the key as
    /// [`claim_key`](crate::store::keys::KeyStore::claim_key) does; when the claim is
    /// new, inserts the payment with its `created` event and submit job, sets the key's
    /// recovery point to it and applies `open.submit`. A taken merchant_order_id keeps the claim without a recovery point and
    /// answers [`OpenedPayment::Existing`]. Errors as for the writes it makes.
    async fn open_payment(&self, open: &OpenPayment) -> Result<OpenedPayment, StoreError>;
    /// Applies `steps` in order in one transaction, each as
    /// [`apply_transition`](Self::apply_transition) would (step N's `from` and `version` are
    /// what step N-1 leaves), and completes `completion`'s key with the answer rendered from
    /// the payment after the last step (phase 2 of a create). The batch's jobs are closed and
    /// written once for the whole batch: a follow-up job a later step closes is never written
    /// (CHANNEL_SUCCESS's post_ledger job when its posting is the next step;
    /// `payments_sql::BatchJobs`). Any step that is stale or a
    /// duplicate rolls back the whole batch; a refused step writes nothing. A key whose lease
    /// was lost is left as it is while the transitions still commit (`stored` is then None).
    async fn apply_transitions(
        &self,
        steps: &[Transition],
        completion: Option<&KeyCompletion<'_>>,
    ) -> Result<TransitionsResult, StoreError>;
    /// The payment with this id.
    async fn payment(&self, id: &str) -> Result<Option<Payment>, StoreError>;
    /// The payment whose channel key is `channel_key`.
    async fn payment_by_channel_key(
        &self,
        channel_key: &str,
    ) -> Result<Option<Payment>, StoreError>;
    /// Applies a transition with a conditional update on (id, status, version), recording the
    /// event and writing the posting and jobs in the same transaction.
    async fn apply_transition(&self, t: &Transition) -> Result<TransitionResult, StoreError>;
    /// Records an event that was not applied; false if (payment, event_id) was recorded before.
    async fn record_ignored_event(&self, e: &IgnoredEvent) -> Result<bool, StoreError>;
    /// Every event of a payment, oldest first.
    async fn payment_events(&self, payment_id: &str) -> Result<Vec<EventRecord>, StoreError>;
    /// Every job of a payment, oldest first.
    async fn payment_jobs(&self, payment_id: &str) -> Result<Vec<Job>, StoreError>;
    /// A manual-capture payment's captures, oldest first (issue 34): each with its amount,
    /// whether it was final, and where it went (pending, captured, refused and why).
    async fn payment_captures(&self, payment_id: &str) -> Result<Vec<CaptureRecord>, StoreError>;
}
