//! Storage of merchant refunds and of the reservation an ops reversal holds on a payment.
//! Part of the storage abstraction: [`Store`](super::Store) requires it, the SQL is
//! `refunds_sql.rs`, and the conformance suite runs it on both backends.

use async_trait::async_trait;

use super::{
    CreateRefund, LedgerPosting, NewRefund, OpenedRefund, Refund, ReserveReversal,
    ReversalReservation, StoreError,
};
use crate::store::keys::KeyClaim;

/// Refunds and reversal reservations.
#[async_trait]
pub trait Refunds: Send + Sync + 'static {
    /// Reserves `amount` on a SUCCESS payment (never past its amount), inserts the refund and
    /// its job, in one transaction.
    async fn create_refund(&self, new: &NewRefund) -> Result<CreateRefund, StoreError>;
    /// A merchant refund's first transaction: claims `claim`'s key with the refund's id as
    /// its recovery point ([`KeyStore::claim_key_at`](crate::store::KeyStore::claim_key_at))
    /// and, when the claim is new, reserves and inserts the refund as
    /// [`create_refund`](Self::create_refund) does, all in one transaction. A refund the
    /// payment refuses rolls the claim back with it (the key stays free); a key another
    /// request holds, or a lapsed claim taken over, comes back without a refund written.
    async fn open_refund(
        &self,
        claim: &KeyClaim,
        new: &NewRefund,
    ) -> Result<OpenedRefund, StoreError>;
    /// The refund with this id.
    async fn refund(&self, id: &str) -> Result<Option<Refund>, StoreError>;
    /// How many refunds of a payment are still pending.
    async fn pending_refund_count(&self, payment_id: &str) -> Result<i64, StoreError>;
    /// Marks a pending refund succeeded and posts its batch; false if it was not pending.
    async fn refund_succeeded(
        &self,
        id: &str,
        posting: &LedgerPosting,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Marks a pending refund failed and releases its reservation; false if it was not pending.
    async fn refund_failed(&self, id: &str, error: &str, now: i64) -> Result<bool, StoreError>;
    /// Reserves a SUCCESS or SUSPENSE payment for an ops reversal before its channel refund,
    /// as merchant refunds reserve their amount: one conditional update on (id, pinned
    /// version, status, no reversal held, no merchant refund pending) sets `reversal_id` and
    /// bumps the version, and the `reverse` job is written in the same transaction. While it
    /// is held, [`create_refund`](Self::create_refund) answers [`CreateRefund::Reversing`].
    async fn reserve_reversal(
        &self,
        r: &ReserveReversal,
    ) -> Result<ReversalReservation, StoreError>;
    /// Drops the reservation `action_id` holds (the channel refused the reversal's refund) and
    /// closes its `reverse` job. False when that action held none.
    async fn release_reversal(
        &self,
        payment_id: &str,
        action_id: &str,
        now: i64,
    ) -> Result<bool, StoreError>;
}
