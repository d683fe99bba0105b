//! Rows and write requests exchanged with the [`Store`](super::Store). Times are epoch
//! milliseconds UTC; amounts are integer minor units.

use crate::domain::state::{PaymentEvent, PaymentStatus};
use crate::store::keys::{ClaimResult, KeyClaim, KeyRef, StoredResponse};
use serde::Serialize;

pub use converge_wire::{Merchant, MerchantKey};

use converge_wire::payments as wire;

/// A new API key for [`Merchants::add_merchant_key`](super::Merchants::add_merchant_key).
#[derive(Debug, Clone)]
pub struct NewMerchantKey {
    /// `mk_...` id.
    pub id: String,
    /// Visible prefix.
    pub prefix: String,
    /// SHA-256 of the key, lowercase hex.
    pub key_hash: String,
    /// Epoch ms UTC.
    pub now: i64,
}

/// A payment as stored (DESIGN.md "Payment state machine"): the console's wire type itself,
/// so the payment search and the payment page send it as the store returns it.
pub use converge_wire::Payment;

/// One capture of a manual-capture payment's hold (issue 34).
pub use converge_wire::payments::CaptureRecord;

/// The raw row behind [`Payment`]; the status is text in both databases.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct PaymentRow {
    pub id: String,
    pub merchant_id: i64,
    pub merchant_order_id: String,
    pub amount: i64,
    pub currency: String,
    pub description: String,
    pub params_hash: String,
    pub status: String,
    pub version: i64,
    pub channel_key: String,
    pub submit_attempts: i64,
    pub refunded_amount: i64,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub reversal_id: Option<String>,
    pub connector: String,
    pub capture_mode: String,
    pub captured_amount: i64,
    pub released_amount: i64,
    pub hold_expires_at: Option<i64>,
    pub capture_id: Option<String>,
    pub capture_amount: Option<i64>,
    pub capture_last: Option<bool>,
    pub fee_amount: i64,
}

impl TryFrom<PaymentRow> for Payment {
    type Error = super::StoreError;
    fn try_from(r: PaymentRow) -> Result<Self, Self::Error> {
        let status = r.status.parse().map_err(|_| {
            super::StoreError::Corrupt(format!("payment {} has status {:?}", r.id, r.status))
        })?;
        let capture_mode = wire::CaptureMode::parse(&r.capture_mode).ok_or_else(|| {
            super::StoreError::Corrupt(format!(
                "payment {} has capture mode {:?}",
                r.id, r.capture_mode
            ))
        })?;
        let pending_capture = match (r.capture_id, r.capture_amount, r.capture_last) {
            (Some(id), Some(amount), Some(last)) => Some(wire::PendingCapture { id, amount, last }),
            (None, None, None) => None,
            _ => {
                return Err(super::StoreError::Corrupt(format!(
                    "payment {} has a pending capture without all of its fields",
                    r.id
                )));
            }
        };
        let hold = (capture_mode == wire::CaptureMode::Manual).then_some(wire::Hold {
            expires_at: r.hold_expires_at,
            captured: r.captured_amount,
            released: r.released_amount,
            pending_capture,
        });
        Ok(Payment {
            id: r.id,
            merchant_id: r.merchant_id,
            merchant_order_id: r.merchant_order_id,
            amount: r.amount,
            currency: r.currency,
            description: r.description,
            params_hash: r.params_hash,
            status,
            version: r.version,
            channel_key: r.channel_key,
            submit_attempts: r.submit_attempts,
            refunded_amount: r.refunded_amount,
            last_error: r.last_error,
            created_at: r.created_at,
            updated_at: r.updated_at,
            reversal_id: r.reversal_id,
            connector: r.connector,
            capture_mode,
            hold,
            fee: r.fee_amount,
        })
    }
}

/// A new payment, inserted PENDING together with its submit job in one transaction.
#[derive(Debug, Clone)]
pub struct NewPayment {
    /// `pay_` id chosen by the caller.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// Business key.
    pub merchant_order_id: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Free text.
    pub description: String,
    /// SHA-256 of the business parameters.
    pub params_hash: String,
    /// Channel key.
    pub channel_key: String,
    /// The connector the payment is routed to ([`crate::service::connectors`]), which every
    /// later channel call on it uses.
    pub connector: String,
    /// Charged at once, or authorized for a later capture (issue 34).
    pub capture_mode: wire::CaptureMode,
    /// Epoch ms UTC.
    pub now: i64,
    /// When the submit job becomes due if the request never finishes it, epoch ms UTC.
    pub submit_due_at: i64,
    /// Attempts before the submit job goes to the error pool.
    pub max_attempts: i64,
    /// The Idempotency-Key claim this insert is made under, if any: its recovery point (the
    /// key's `resource_id`) is set to the new payment in the same transaction, so a crash
    /// can never leave a payment its key does not lead back to (issue "Payment core", atomic
    /// phases). Ignored when the claim's lease was lost, as for `set_key_resource`.
    pub recovery_key: Option<KeyRef>,
}

/// Result of [`Payments::create_payment`](super::Payments::create_payment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreatePayment {
    /// Inserted now.
    Created(Payment),
    /// The merchant already has a payment with this merchant_order_id.
    Existing(Payment),
    /// The merchant cancelled this merchant_order_id before any payment had it (a tombstone,
    /// [`Payments::cancel_order`](super::Payments::cancel_order)): nothing was written.
    Tombstoned,
}

/// What [`Payments::cancel_order`](super::Payments::cancel_order) found for a merchant's
/// merchant_order_id (TCC by business key, seed 004 §5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderCancel {
    /// The merchant has a payment with it: nothing was written (the caller cancels or voids
    /// it).
    Payment(Box<Payment>),
    /// No payment has it: the order is tombstoned (now, or by an earlier cancel) since
    /// `since` (epoch ms UTC), so a later create for it is refused.
    Tombstoned {
        /// When the tombstone was written, epoch ms UTC.
        since: i64,
    },
}

/// Phase 1 of a create under an Idempotency-Key, for
/// [`Payments::open_payment`](super::Payments::open_payment): the key's claim, the payment with its
/// submit job, the recovery point and (unless submissions are paused) the submit transition,
/// written in one transaction (Brandur Leach, "Implementing Stripe-like Idempotency Keys in
/// Postgres": atomic phases with a recovery point; issue 15).
#[derive(Debug, Clone)]
pub struct OpenPayment {
    /// The claim: inserted running, with `resource_id` = the new payment.
    pub claim: KeyClaim,
    /// The payment (its `recovery_key` is ignored: the claim is the key).
    pub payment: NewPayment,
    /// PENDING -> PROCESSING at version 1, applied in the same transaction when given.
    pub submit: Option<Transition>,
}

/// Result of [`Payments::open_payment`](super::Payments::open_payment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenedPayment {
    /// Key claimed and payment inserted (PROCESSING when a submit transition was given).
    Created(Payment),
    /// Key claimed (no recovery point); the merchant already has a payment with this
    /// merchant_order_id, which is returned.
    Existing(Payment),
    /// The merchant_order_id is tombstoned ([`CreatePayment::Tombstoned`]): the transaction
    /// was rolled back, so not even the key's claim was written.
    Tombstoned,
    /// The key was claimed before and nothing was written but what
    /// [`KeyStore::claim_key`](crate::store::keys::KeyStore::claim_key) writes: a lapsed claim taken over
    /// (`Claimed` with the crashed request's recovery point) or another request's record.
    Key(ClaimResult),
}

/// Result of [`Payments::apply_transitions`](super::Payments::apply_transitions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionsResult {
    /// As for one transition: `Applied` with the payment after the last one; otherwise
    /// nothing was written (not even the key's completion).
    pub result: TransitionResult,
    /// The answer stored with the key, when a completion was asked and its lease held.
    pub stored: Option<StoredResponse>,
}

pub use crate::domain::jobs::{JobKind, JobStatus};

/// A reversal's reservation: see [`Refunds::reserve_reversal`](super::Refunds::reserve_reversal).
#[derive(Debug, Clone)]
pub struct ReserveReversal {
    /// Payment.
    pub payment_id: String,
    /// The ops action (`act_...`); also the channel's refund key.
    pub action_id: String,
    /// The payment version the action pinned; the reservation holds only at this version.
    pub pinned_version: i64,
    /// Epoch ms UTC.
    pub now: i64,
    /// The `reverse` job that finishes the reversal if the executing request dies.
    pub job: NewJob,
}

/// Result of [`Refunds::reserve_reversal`](super::Refunds::reserve_reversal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReversalReservation {
    /// Reserved now; the payment after the reservation.
    Reserved(Payment),
    /// This action already holds the reservation (a re-execution); the payment as it is.
    AlreadyHeld(Payment),
    /// Not reserved: the payment moved past the pinned version, is not SUCCESS/SUSPENSE, is
    /// held by another reversal, or has a merchant refund pending. The payment as it is, and
    /// how many of its refunds are pending.
    Refused {
        /// The payment now.
        payment: Payment,
        /// Its pending merchant refunds.
        pending_refunds: i64,
    },
    /// No such payment.
    NoPayment,
}

/// A job to write in the same transaction as the state change that needs it.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// Kind.
    pub kind: JobKind,
    /// Payment, if any.
    pub payment_id: Option<String>,
    /// Refund, if any.
    pub refund_id: Option<String>,
    /// Due at, epoch ms UTC.
    pub run_at: i64,
    /// Attempts before the error pool.
    pub max_attempts: i64,
}

/// A job row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Job {
    /// Id.
    pub id: i64,
    /// Kind name.
    pub kind: String,
    /// Payment, if any.
    pub payment_id: Option<String>,
    /// Refund, if any.
    pub refund_id: Option<String>,
    /// `due`, `leased`, `done` or `dead` ([`JobStatus`]).
    #[sqlx(try_from = "String")]
    pub status: crate::domain::jobs::JobStatus,
    /// Attempts made.
    pub attempts: i64,
    /// Attempts allowed.
    pub max_attempts: i64,
    /// Next run, epoch ms UTC.
    pub run_at: i64,
    /// Last error.
    pub last_error: Option<String>,
}

impl From<Job> for wire::Job {
    fn from(j: Job) -> Self {
        // Every field named on both sides: one added to either fails to compile here.
        let Job {
            id,
            kind,
            payment_id,
            refund_id,
            status,
            attempts,
            max_attempts,
            run_at,
            last_error,
        } = j;
        wire::Job {
            id,
            kind,
            payment_id,
            refund_id,
            status,
            attempts,
            max_attempts,
            run_at,
            last_error,
        }
    }
}

pub use crate::domain::ledger::{LedgerLine, LedgerPosting};

/// Debits and credits of one currency over the whole ledger. The sums are 128-bit: each
/// entry is at most `i64::MAX`, and no number of entries can overflow them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerTotal {
    /// ISO 4217.
    pub currency: String,
    /// Sum of debits, minor units.
    pub debits: i128,
    /// Sum of credits, minor units.
    pub credits: i128,
}

/// One kind of batch on one accounting day in one currency (issue 35): how many, and what
/// they moved on the merchants' payable accounts. Amounts in minor units.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, Serialize)]
pub struct LedgerDayLine {
    /// ISO 4217.
    pub currency: String,
    /// `charge`, `capture`, `fee`, `refund`, `reversal`, `hold` or `release`.
    pub kind: String,
    /// Batches of that kind dated that day.
    pub batches: i64,
    /// Credited to merchants (`merchant_payable:*`): what charges and captures owe them.
    pub payable_credits: i64,
    /// Debited from merchants: fees, refunds and reversals.
    pub payable_debits: i64,
}

/// Entries per group in [`Ledger::ledger_totals`](super::Ledger::ledger_totals)' partial sums:
/// a group sums at most this many `amount / 2^32` (< 2^31) and `amount % 2^32` (< 2^32)
/// values, so its 64-bit SQL sums cannot overflow; Rust adds the groups in 128 bits.
pub const LEDGER_SUM_GROUP: i64 = 1 << 20;

/// A state-machine transition to apply conditionally on (id, from, version).
#[derive(Debug, Clone)]
pub struct Transition {
    /// Payment.
    pub payment_id: String,
    /// Status the caller read.
    pub from: PaymentStatus,
    /// Version the caller read.
    pub version: i64,
    /// Status computed by the domain.
    pub to: PaymentStatus,
    /// Event.
    pub event: PaymentEvent,
    /// Unique per payment; a repeat is recorded once.
    pub event_id: String,
    /// `api`, `worker`, `callback` or an ops action id.
    pub source: String,
    /// Evidence or error text.
    pub detail: String,
    /// Epoch ms UTC.
    pub now: i64,
    /// New `last_error` (None keeps it; a step that settles the charge clears it: the
    /// row's [`Effects`](crate::domain::state::Effects)).
    pub last_error: Option<String>,
    /// The lines of the row's ledger batch (`Effects::ledger`), posted in the same
    /// transaction; present exactly when the row has one.
    pub posting: Option<LedgerPosting>,
    /// The row's follow-up job (`Effects::follow_up`), written in the same transaction after
    /// the row's jobs are closed; present exactly when the row has one. The jobs the row
    /// closes and whether it counts a submission come from the row itself.
    pub enqueue: Vec<NewJob>,
    /// The values of the row's hold write (`Effects::hold`, issue 34), written in the same
    /// transaction; present exactly when the row has one, and of its kind.
    pub hold: Option<HoldWrite>,
}

/// What a step writes to a manual-capture payment's hold: the values of its row's
/// [`HoldEffect`](crate::domain::state::HoldEffect), one variant each. Amounts in minor
/// units, times epoch ms UTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldWrite {
    /// `HoldEffect::Authorize`: the hold lapses at `expires_at`.
    Authorize {
        /// Epoch ms UTC (the channel's answer).
        expires_at: i64,
    },
    /// `HoldEffect::BeginCapture`: the capture `id` of `amount` (`last`: the merchant's
    /// `final`) is in flight.
    BeginCapture {
        /// `cap_...`: the channel's capture key.
        id: String,
        /// Minor units, > 0, at most what is held.
        amount: i64,
        /// Close the hold after it.
        last: bool,
    },
    /// `HoldEffect::Capture`: the pending capture was made; `released` is the rest of the
    /// hold released with it (0 unless it closed the hold).
    Capture {
        /// The pending capture's id.
        id: String,
        /// Its amount.
        amount: i64,
        /// Released with it.
        released: i64,
    },
    /// `HoldEffect::RefuseCapture`: the pending capture was refused for `reason`.
    RefuseCapture {
        /// The pending capture's id.
        id: String,
        /// The channel's reason.
        reason: String,
    },
    /// `HoldEffect::Release`: `amount` (all that was still held) is released; a pending
    /// capture is refused with `reason`.
    Release {
        /// Minor units (0 when nothing was recorded as held).
        amount: i64,
        /// Why (void, expiry), for a pending capture's record.
        reason: String,
    },
}

impl HoldWrite {
    /// The row effect this write carries out.
    pub fn effect(&self) -> crate::domain::state::HoldEffect {
        use crate::domain::state::HoldEffect;
        match self {
            HoldWrite::Authorize { .. } => HoldEffect::Authorize,
            HoldWrite::BeginCapture { .. } => HoldEffect::BeginCapture,
            HoldWrite::Capture { .. } => HoldEffect::Capture,
            HoldWrite::RefuseCapture { .. } => HoldEffect::RefuseCapture,
            HoldWrite::Release { .. } => HoldEffect::Release,
        }
    }
}

/// Result of [`Payments::apply_transition`](super::Payments::apply_transition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitionResult {
    /// Applied; the payment after it.
    Applied(Payment),
    /// Someone moved first (status or version differ): the current payment; re-read and decide.
    Stale(Payment),
    /// This (payment, event_id) was already recorded.
    DuplicateEvent,
    /// `(from, event) -> to` is not in the whitelist: nothing was written.
    Refused(crate::domain::state::TransitionError),
}

/// One recorded event (applied or ignored).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EventRecord {
    /// Unique per payment.
    pub event_id: String,
    /// Event name.
    pub event: String,
    /// Status before.
    pub from_status: String,
    /// Status after, None when ignored.
    pub to_status: Option<String>,
    /// Applied or ignored.
    pub applied: bool,
    /// Who sent it.
    pub source: String,
    /// Evidence.
    pub detail: String,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// W3C trace id of the request or job that wrote it (32 hex digits; None outside any
    /// trace): one id from the merchant's request through the workers.
    pub trace_id: Option<String>,
}

impl From<EventRecord> for wire::EventRecord {
    fn from(r: EventRecord) -> Self {
        // Every field named on both sides: one added to either fails to compile here.
        let EventRecord {
            event_id,
            event,
            from_status,
            to_status,
            applied,
            source,
            detail,
            created_at,
            trace_id,
        } = r;
        wire::EventRecord {
            event_id,
            event,
            from_status,
            to_status,
            applied,
            source,
            detail,
            created_at,
            trace_id,
        }
    }
}

/// An event that was not applied (stale/late callback, forbidden pair).
#[derive(Debug, Clone)]
pub struct IgnoredEvent {
    /// Payment.
    pub payment_id: String,
    /// Unique per payment.
    pub event_id: String,
    /// Event name.
    pub event: PaymentEvent,
    /// Status at the time.
    pub from: PaymentStatus,
    /// Who sent it.
    pub source: String,
    /// Why it was ignored.
    pub detail: String,
    /// Epoch ms UTC.
    pub now: i64,
}

/// A refund row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Refund {
    /// `re_` + 24 hex.
    pub id: String,
    /// Payment.
    pub payment_id: String,
    /// Minor units.
    pub amount: i64,
    /// Merchant's reason.
    pub reason: String,
    /// `pending`, `succeeded` or `failed`.
    #[sqlx(try_from = "String")]
    pub status: crate::domain::refunds::RefundStatus,
    /// Last error.
    pub last_error: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
}

impl From<Refund> for wire::Refund {
    fn from(r: Refund) -> Self {
        // Every field named on both sides: one added to either fails to compile here.
        let Refund {
            id,
            payment_id,
            amount,
            reason,
            status,
            last_error,
            created_at,
            updated_at,
        } = r;
        wire::Refund {
            id,
            payment_id,
            amount,
            reason,
            status,
            last_error,
            created_at,
            updated_at,
        }
    }
}

/// A new refund: reserves the amount on the payment, inserts the refund and its job.
#[derive(Debug, Clone)]
pub struct NewRefund {
    /// `re_` id.
    pub id: String,
    /// Payment.
    pub payment_id: String,
    /// Minor units.
    pub amount: i64,
    /// Reason.
    pub reason: String,
    /// Epoch ms UTC.
    pub now: i64,
    /// When the refund job is due if the request never finishes it.
    pub job_due_at: i64,
    /// Attempts before the error pool.
    pub max_attempts: i64,
}

/// Result of [`Refunds::open_refund`](super::Refunds::open_refund).
#[derive(Debug, Clone, PartialEq, Eq)]
// Matched once where it is returned: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum OpenedRefund {
    /// The key was claimed with the refund's id and the refund reserved and inserted
    /// ([`CreateRefund::Created`]), or the payment refused it (any other [`CreateRefund`]:
    /// nothing was written, the claim included).
    Opened(CreateRefund),
    /// The key was claimed before: another request's record, or a lapsed claim this request
    /// took over (resume its recovery point). No refund was written.
    Key(ClaimResult),
}

/// Result of [`Refunds::create_refund`](super::Refunds::create_refund).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateRefund {
    /// Reserved and inserted.
    Created(Refund),
    /// The payment is not SUCCESS.
    NotRefundable(PaymentStatus),
    /// More than the remaining amount.
    ExceedsRemaining {
        /// What may still be refunded, minor units.
        remaining: i64,
    },
    /// No such payment.
    NoPayment,
    /// An ops reversal holds the payment (its channel refund may be under way).
    Reversing,
}

/// A merchant's own PSP account as stored (`merchant_connectors`, migration 0138; issue 38):
/// its secrets sealed ([`crate::domain::secret_box::Purpose::ConnectorSecret`]), never shown
/// but for `key_hint`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MerchantConnector {
    /// The merchant's id.
    pub merchant_id: i64,
    /// The merchant's name.
    pub merchant_name: String,
    /// The connector kind: `stripe`.
    pub kind: String,
    /// Whether the merchant's new payments go to it (false: switched back to the default,
    /// kept for the payments still open on it).
    pub routed: bool,
    /// The PSP's API base URL.
    pub api_base: String,
    /// The secret key, sealed.
    pub secret_key: String,
    /// The webhook signing secrets, one per line, sealed.
    pub webhook_secrets: String,
    /// The secret key's last four characters.
    pub key_hint: String,
    /// The PaymentMethod its payments are confirmed with.
    pub payment_method: String,
    /// Epoch ms UTC of the last change.
    pub updated_at: i64,
}

/// What [`Merchants::set_merchant_connector_audited`](super::Merchants::set_merchant_connector_audited)
/// writes for a merchant's own PSP account (secrets already sealed).
#[derive(Debug, Clone)]
pub struct NewMerchantConnector {
    /// `stripe`.
    pub kind: String,
    /// The PSP's API base URL.
    pub api_base: String,
    /// The secret key, sealed.
    pub secret_key: String,
    /// The webhook signing secrets, one per line, sealed.
    pub webhook_secrets: String,
    /// The secret key's last four characters.
    pub key_hint: String,
    /// The PaymentMethod its payments are confirmed with.
    pub payment_method: String,
}
