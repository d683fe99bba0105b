//! A channel callback recorded once per event id, with its evidence and what it decided, in
//! one transaction (DESIGN.md "Merchant HTTP API": a duplicate event id is acknowledged once;
//! seed 004 §8.4: the channel's own words are kept as evidence). Part of the storage
//! abstraction: [`Store`](super::Store) requires it, the SQL is `callbacks_sql.rs`, and the
//! conformance suite runs it on both backends.

use async_trait::async_trait;

use super::{IgnoredEvent, NewErrorItem, Payment, StoreError, Transition};

/// A channel callback as it arrived: what [`Callbacks::record_callback`] keeps of it.
#[derive(Debug, Clone, Copy)]
pub struct CallbackReceipt<'a> {
    /// The channel's unique event id (1 to 255 bytes, checked by the service).
    pub event_id: &'a str,
    /// The payment's channel key the event names.
    pub channel_key: &'a str,
    /// The event's type as the channel wrote it (`charge.succeeded`, ...).
    pub kind: &'a str,
    /// The request body byte for byte, as its signature was verified over.
    pub body: &'a [u8],
    /// The signature header as received (the sandbox protocol's `Converge-Signature`).
    pub signature: &'a str,
    /// When converge received it, epoch ms UTC.
    pub received_at: i64,
}

/// What the service decided a callback does; written with its receipt, all or nothing.
pub enum CallbackDecision<'a> {
    /// No payment has the event's channel key: the receipt alone.
    UnknownPayment,
    /// Recorded on the payment as an event not applied (stale, late, not decisive).
    Ignore(&'a IgnoredEvent),
    /// Recorded as not applied and reported to the error pool: the callback contradicts what
    /// the payment settled (DESIGN.md "Compensation queue and error pool").
    Conflict(&'a IgnoredEvent, &'a NewErrorItem),
    /// Applies the transition (its row's effects included,
    /// [`Payments::apply_transition`](super::Payments::apply_transition)). When another writer
    /// moved the payment first, `lost` (given the payment as it now is) is recorded as not
    /// applied instead.
    Apply {
        /// The step, at the status and version the service read.
        transition: &'a Transition,
        /// The ignored event of a callback that lost the race to another writer.
        lost: &'a (dyn Fn(&Payment) -> IgnoredEvent + Send + Sync),
    },
}

/// The answer of [`Callbacks::record_callback`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackRecorded {
    /// The event id was recorded before: nothing was written; acknowledge it as a duplicate.
    Duplicate,
    /// Recorded as decided (unknown payment, ignored, or conflicting).
    Recorded,
    /// The transition was applied: the payment after it.
    Applied(Payment),
    /// Another writer moved the payment first: recorded as ignored; the payment as it is.
    Lost(Payment),
}

/// Channel callbacks.
#[async_trait]
pub trait Callbacks: Send + Sync + 'static {
    /// Records a callback with its decision in one transaction: the receipt (raw body,
    /// signature, receive time, channel key, type, outcome), and the decision's writes. A callback whose
    /// event id is already recorded writes nothing and answers `Duplicate`; two concurrent
    /// deliveries of one event id are serialised by the event id's key, so exactly one
    /// records. Errors: the store's, with nothing written (the channel's redelivery is then
    /// handled afresh); `Corrupt` when the transition is outside the whitelist.
    async fn record_callback(
        &self,
        receipt: &CallbackReceipt<'_>,
        decision: CallbackDecision<'_>,
    ) -> Result<CallbackRecorded, StoreError>;

    /// The raw body kept with callback `event_id` (None when no such callback was recorded,
    /// or it was recorded before bodies were kept).
    async fn callback_body(&self, event_id: &str) -> Result<Option<Vec<u8>>, StoreError>;
}
