//! The claims that make a channel callback's event id count once (DESIGN.md "Merchant HTTP
//! API"). Part of the storage abstraction: [`Store`](super::Store) requires it, the SQL is
//! `callbacks_sql.rs`, and the conformance suite runs it on both backends.

use async_trait::async_trait;

use super::{IgnoredEvent, StoreError};

/// The answer of [`Callbacks::claim_callback`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackClaim {
    /// This caller handles the event now.
    Claimed,
    /// The event was handled before: acknowledge it as a duplicate.
    Settled,
    /// Another handler holds the event's claim: the sender should deliver it again later,
    /// since that handler may still fail.
    InProgress,
}

/// Channel callback claims.
#[async_trait]
pub trait Callbacks: Send + Sync + 'static {
    /// Claims the handling of a channel callback event id (DESIGN.md "Merchant HTTP API":
    /// a duplicate event id is acknowledged once). `Claimed` when this caller is to handle
    /// it: the id is new, or an earlier handler's claim is still unsettled and was taken at or
    /// before `stale_before` (that handler died; its lapsed claim is taken over). `Settled`
    /// for an event already handled, `InProgress` for one being handled now (or by a handler
    /// that died less than a lease ago). Times are epoch ms UTC.
    async fn claim_callback(
        &self,
        event_id: &str,
        channel_key: &str,
        kind: &str,
        now: i64,
        stale_before: i64,
    ) -> Result<CallbackClaim, StoreError>;
    /// Settles a claimed callback: `Some(outcome)` records how it ended (`applied`,
    /// `ignored`, `unknown_payment`); `None` drops the claim so the channel's redelivery is
    /// handled afresh (the handler failed before any effect was committed).
    async fn settle_callback(
        &self,
        event_id: &str,
        outcome: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Records a callback's event as not applied on its payment
    /// ([`Payments::record_ignored_event`](super::Payments::record_ignored_event)) and settles
    /// the callback's claim as `ignored`, in one transaction (a late confirmation of a charge
    /// the create already applied is the common callback: one commit rather than two).
    async fn settle_ignored_callback(
        &self,
        event_id: &str,
        ignored: &IgnoredEvent,
    ) -> Result<(), StoreError>;
}
