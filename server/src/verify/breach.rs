//! What a check finds: one broken invariant ([`Breach`]), numbered as DESIGN.md
//! "Convergence invariants" ([`Invariant`]), printed as one `BREACH` line.

use std::fmt;

use serde::Serialize;

/// Which invariant a breach belongs to (DESIGN.md "Convergence invariants" numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Invariant {
    /// 1. One channel charge per charged payment, none for others.
    Channel,
    /// 2. Ledger balanced; one charge batch per charged payment.
    Ledger,
    /// 3. Replays byte for byte (stored responses present).
    Replay,
    /// 4. Nothing non-terminal past the window unless in the error pool.
    Window,
    /// 5. Audit chain.
    Audit,
    /// 6. One event per outcome, each delivered to its endpoints (or in the error pool).
    Events,
    /// Invariant 7, holds (issue 34): captured never more than authorized; every hold ends
    /// exactly once; the ledger's and the channel's captures equal the payment's; nothing
    /// captured after a void or an expiry; no payment for a tombstoned order.
    Holds,
}

impl Invariant {
    /// Number and name, as printed.
    pub fn title(self) -> &'static str {
        match self {
            Invariant::Channel => "1. channel charges",
            Invariant::Ledger => "2. ledger",
            Invariant::Replay => "3. stored responses",
            Invariant::Window => "4. convergence window",
            Invariant::Audit => "5. audit chain",
            Invariant::Events => "6. events and deliveries",
            Invariant::Holds => "7. holds",
        }
    }
}

/// One broken invariant. Payment-level breaches name the payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Breach {
    /// A charged payment without exactly one successful channel charge, or any payment with
    /// more than one (a double charge).
    ChargeCount {
        /// Payment.
        payment: String,
        /// Its status.
        status: String,
        /// Successful charges the channel holds for its key.
        charges: usize,
        /// What the status requires (`"1"`, `"0"`, `"0 or 1"`).
        expected: &'static str,
    },
    /// A channel charge whose amount or currency differs from the payment's.
    ChargeMismatch {
        /// Payment.
        payment: String,
        /// Payment's amount and currency.
        local: (i64, String),
        /// Channel's amount and currency.
        channel: (i64, String),
    },
    /// A successful channel charge whose key no payment owns: money taken with no record.
    OrphanCharge {
        /// Channel key.
        key: String,
        /// Minor units.
        amount: i64,
        /// ISO 4217.
        currency: String,
    },
    /// Refunded at the channel differs from the payment's succeeded refunds.
    RefundMismatch {
        /// Payment.
        payment: String,
        /// Succeeded refunds in the database, minor units.
        local: i64,
        /// Refunded at the channel, minor units.
        channel: i64,
    },
    /// Wrong number of charge batches for the payment's status.
    ChargeBatchCount {
        /// Payment.
        payment: String,
        /// Its status.
        status: String,
        /// Charge batches.
        batches: i64,
        /// Required count.
        expected: i64,
    },
    /// The charge batch does not post the payment's amount.
    ChargeBatchAmount {
        /// Payment.
        payment: String,
        /// Payment amount, minor units.
        amount: i64,
        /// Debits of its charge batch, minor units.
        posted: i64,
    },
    /// A payment's fees (issue 35) disagree with its fee batches, or are more than it
    /// captured and refunded: its `fee_amount` differs from what its fee batches credit to fee
    /// revenue, or exceeds the captured amount plus its succeeded refunds.
    FeeLedger {
        /// Payment.
        payment: String,
        /// The payment's `fee_amount`, minor units.
        fee: i64,
        /// What its fee batches credit, minor units.
        posted: i64,
        /// What it captured and posted, minor units.
        captured: i64,
    },
    /// Succeeded refunds and refund batches differ in number.
    RefundBatchCount {
        /// Payment.
        payment: String,
        /// Succeeded refunds.
        refunds: i64,
        /// Their batches.
        batches: i64,
    },
    /// The payment's refund totals do not add up (reserved vs succeeded, REFUNDED vs amount).
    RefundTotals {
        /// Payment.
        payment: String,
        /// What is wrong.
        detail: String,
    },
    /// A ledger batch that does not balance.
    UnbalancedBatch {
        /// Payment.
        payment: String,
        /// Batch id.
        batch: i64,
        /// What is wrong.
        detail: String,
    },
    /// Debits and credits differ over a whole currency.
    UnbalancedCurrency {
        /// ISO 4217.
        currency: String,
        /// Minor units (summed in 128 bits: any history fits).
        debits: i128,
        /// Minor units (summed in 128 bits: any history fits).
        credits: i128,
    },
    /// Completed Idempotency-Keys without a stored response.
    KeysWithoutResponse {
        /// How many.
        count: i64,
    },
    /// Non-terminal (or with a refund pending) past the window and not in the error pool.
    NotConverged {
        /// Payment.
        payment: String,
        /// Its status.
        status: String,
        /// Age in seconds (since creation; since the last change for a pending refund).
        age_secs: i64,
        /// What is unfinished.
        detail: String,
    },
    /// A status converge never writes.
    CorruptStatus {
        /// Payment.
        payment: String,
        /// The stored text.
        status: String,
    },
    /// The audit chain is broken at a record.
    AuditChainBroken {
        /// The first bad record.
        first_bad: String,
    },
    /// An outcome (payment or refund status) without its outbox event.
    MissingEvent {
        /// Payment (the refund's payment for a refund).
        payment: String,
        /// `payment` or `refund:<id>`.
        aggregate: String,
        /// The status reached.
        status: String,
    },
    /// An event past the window that an endpoint has not received and that is not in the
    /// error pool, or that a subscribed endpoint never got a delivery for.
    Undelivered {
        /// The event's aggregate (payment or refund id).
        aggregate: String,
        /// Event id.
        event: String,
        /// What is wrong.
        detail: String,
    },
    /// Captured and released together exceed what was authorized (or one is negative).
    CapturedOverAuthorized {
        /// Payment.
        payment: String,
        /// Authorized, minor units.
        amount: i64,
        /// Captured, minor units.
        captured: i64,
        /// Released, minor units.
        released: i64,
    },
    /// A hold that did not end exactly once: its hold batch missing or doubled, an ended
    /// hold whose pending accounts do not net to zero or whose captured and released do not
    /// add up to the authorization, an open hold already released.
    HoldNotEnded {
        /// Payment.
        payment: String,
        /// Its status.
        status: String,
        /// What is wrong.
        detail: String,
    },
    /// The ledger's captures differ from the payment's: capture batches' payable credits
    /// against `captured_amount`, or a captured capture without its one batch.
    CaptureLedger {
        /// Payment.
        payment: String,
        /// What is wrong.
        detail: String,
    },
    /// The channel captured money under a hold the core voided or saw expire.
    CaptureAfterVoid {
        /// Payment.
        payment: String,
        /// VOIDED or EXPIRED.
        status: String,
        /// The channel's hold status.
        channel: String,
        /// Captured at the channel, minor units.
        captured: i64,
    },
    /// The channel's hold disagrees with the core: captured amount differs from the ledger's,
    /// or its status from the payment's.
    HoldChannelMismatch {
        /// Payment.
        payment: String,
        /// Its status.
        status: String,
        /// What is wrong.
        detail: String,
    },
    /// A payment exists for an order a TCC cancel tombstoned first (a hanging Try).
    TombstonedOrder {
        /// Payment.
        payment: String,
        /// The tombstoned business key.
        merchant_order_id: String,
        /// Its status.
        status: String,
    },
}

impl Breach {
    /// The invariant the breach belongs to.
    pub fn invariant(&self) -> Invariant {
        match self {
            Breach::ChargeCount { .. }
            | Breach::ChargeMismatch { .. }
            | Breach::OrphanCharge { .. }
            | Breach::RefundMismatch { .. } => Invariant::Channel,
            Breach::ChargeBatchCount { .. }
            | Breach::ChargeBatchAmount { .. }
            | Breach::FeeLedger { .. }
            | Breach::RefundBatchCount { .. }
            | Breach::RefundTotals { .. }
            | Breach::UnbalancedBatch { .. }
            | Breach::UnbalancedCurrency { .. } => Invariant::Ledger,
            Breach::KeysWithoutResponse { .. } => Invariant::Replay,
            Breach::NotConverged { .. } | Breach::CorruptStatus { .. } => Invariant::Window,
            Breach::AuditChainBroken { .. } => Invariant::Audit,
            Breach::MissingEvent { .. } | Breach::Undelivered { .. } => Invariant::Events,
            Breach::CapturedOverAuthorized { .. }
            | Breach::HoldNotEnded { .. }
            | Breach::CaptureLedger { .. }
            | Breach::CaptureAfterVoid { .. }
            | Breach::HoldChannelMismatch { .. }
            | Breach::TombstonedOrder { .. } => Invariant::Holds,
        }
    }

    /// The offending payment, when the breach is about one.
    pub fn payment(&self) -> Option<&str> {
        match self {
            Breach::ChargeCount { payment, .. }
            | Breach::ChargeMismatch { payment, .. }
            | Breach::RefundMismatch { payment, .. }
            | Breach::ChargeBatchCount { payment, .. }
            | Breach::ChargeBatchAmount { payment, .. }
            | Breach::FeeLedger { payment, .. }
            | Breach::RefundBatchCount { payment, .. }
            | Breach::RefundTotals { payment, .. }
            | Breach::UnbalancedBatch { payment, .. }
            | Breach::NotConverged { payment, .. }
            | Breach::MissingEvent { payment, .. }
            | Breach::CorruptStatus { payment, .. }
            | Breach::CapturedOverAuthorized { payment, .. }
            | Breach::HoldNotEnded { payment, .. }
            | Breach::CaptureLedger { payment, .. }
            | Breach::CaptureAfterVoid { payment, .. }
            | Breach::HoldChannelMismatch { payment, .. }
            | Breach::TombstonedOrder { payment, .. } => Some(payment),
            _ => None,
        }
    }

    /// A double charge: more than one charge for a payment, or a charge no payment owns.
    pub fn is_double_charge(&self) -> bool {
        matches!(self, Breach::ChargeCount { charges, .. } if *charges > 1)
            || matches!(self, Breach::OrphanCharge { .. })
    }

    /// Money taken while the payment says it was not (FAILED, or never charged per the core).
    pub fn is_lost_charge(&self) -> bool {
        matches!(self, Breach::ChargeCount { status, charges, .. } if status == "FAILED" && *charges >= 1)
    }
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.invariant() {
            Invariant::Channel => self.fmt_channel(f),
            Invariant::Ledger => self.fmt_ledger(f),
            Invariant::Replay | Invariant::Window | Invariant::Audit | Invariant::Events => {
                self.fmt_progress(f)
            }
            Invariant::Holds => self.fmt_holds(f),
        }
    }
}

impl Breach {
    /// The `BREACH` line's text of an invariant-1 breach (the channel's charges).
    fn fmt_channel(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breach::ChargeCount {
                payment,
                status,
                charges,
                expected,
            } => {
                write!(
                    f,
                    "{payment}: {status} payment has {charges} successful channel charges (expected {expected})"
                )
            }
            Breach::ChargeMismatch {
                payment,
                local,
                channel,
            } => write!(
                f,
                "{payment}: channel charged {} {}, payment is {} {}",
                channel.0, channel.1, local.0, local.1
            ),
            Breach::OrphanCharge {
                key,
                amount,
                currency,
            } => {
                write!(
                    f,
                    "channel key {key}: charged {amount} {currency} but no payment has this key"
                )
            }
            Breach::RefundMismatch {
                payment,
                local,
                channel,
            } => {
                write!(
                    f,
                    "{payment}: refunded {channel} at the channel, {local} in succeeded refunds"
                )
            }
            // Not reached: `fmt` hands this function only the kinds above.
            other => write!(f, "{other:?}"),
        }
    }

    /// The `BREACH` line's text of an invariant-2 breach (the ledger).
    fn fmt_ledger(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breach::ChargeBatchCount {
                payment,
                status,
                batches,
                expected,
            } => {
                write!(
                    f,
                    "{payment}: {status} payment has {batches} charge ledger batches (expected {expected})"
                )
            }
            Breach::ChargeBatchAmount {
                payment,
                amount,
                posted,
            } => {
                write!(
                    f,
                    "{payment}: charge batch posts {posted}, payment amount is {amount}"
                )
            }
            Breach::FeeLedger {
                payment,
                fee,
                posted,
                captured,
            } => {
                write!(
                    f,
                    "{payment}: fee {fee} but its fee batches post {posted} (captured {captured})"
                )
            }
            Breach::RefundBatchCount {
                payment,
                refunds,
                batches,
            } => {
                write!(
                    f,
                    "{payment}: {refunds} succeeded refunds but {batches} refund ledger batches"
                )
            }
            Breach::RefundTotals { payment, detail } => write!(f, "{payment}: {detail}"),
            Breach::UnbalancedBatch {
                payment,
                batch,
                detail,
            } => write!(f, "{payment}: ledger batch {batch} {detail}"),
            Breach::UnbalancedCurrency {
                currency,
                debits,
                credits,
            } => {
                write!(f, "ledger {currency}: debits {debits} != credits {credits}")
            }
            // Not reached: `fmt` hands this function only the kinds above.
            other => write!(f, "{other:?}"),
        }
    }

    /// The `BREACH` line's text of a breach of invariants 3 to 6 (replays, the window, the
    /// audit chain, events).
    fn fmt_progress(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breach::MissingEvent {
                payment,
                aggregate,
                status,
            } => write!(
                f,
                "{payment}: {aggregate} reached {status} but the outbox has no event for it"
            ),
            Breach::Undelivered {
                aggregate,
                event,
                detail,
            } => write!(f, "{aggregate}: event {event} {detail}"),
            Breach::KeysWithoutResponse { count } => {
                write!(
                    f,
                    "{count} completed Idempotency-Keys have no stored response to replay"
                )
            }
            Breach::NotConverged {
                payment,
                status,
                age_secs,
                detail,
            } => {
                write!(
                    f,
                    "{payment}: {status} for {age_secs} s ({detail}) and not in the error pool"
                )
            }
            Breach::CorruptStatus { payment, status } => {
                write!(f, "{payment}: unknown status {status:?}")
            }
            Breach::AuditChainBroken { first_bad } => {
                write!(f, "audit chain broken at record {first_bad}")
            }
            // Not reached: `fmt` hands this function only the kinds above.
            other => write!(f, "{other:?}"),
        }
    }
}

impl Breach {
    /// The `BREACH` line's text of an invariant-7 breach (holds).
    fn fmt_holds(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breach::CapturedOverAuthorized {
                payment,
                amount,
                captured,
                released,
            } => write!(
                f,
                "{payment}: captured {captured} and released {released} of {amount} authorized"
            ),
            Breach::HoldNotEnded {
                payment,
                status,
                detail,
            }
            | Breach::HoldChannelMismatch {
                payment,
                status,
                detail,
            } => write!(f, "{payment}: {status} hold {detail}"),
            Breach::CaptureLedger { payment, detail } => write!(f, "{payment}: {detail}"),
            Breach::CaptureAfterVoid {
                payment,
                status,
                channel,
                captured,
            } => write!(
                f,
                "{payment}: {status} but the channel captured {captured} (its hold is {channel})"
            ),
            Breach::TombstonedOrder {
                payment,
                merchant_order_id,
                status,
            } => write!(
                f,
                "{payment}: {status} payment for order {merchant_order_id:?}, which a cancel tombstoned"
            ),
            // Not reached: `fmt` hands this function only the kinds above.
            other => write!(f, "{other:?}"),
        }
    }
}
