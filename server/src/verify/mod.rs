//! `converge verify`: checks DESIGN.md "Convergence invariants" against the database and the
//! channel, and says which payment breaks which invariant.
//!
//! One job per file:
//! - [`checks`]: the invariant checks, plain Rust over facts ([`check_payment`],
//!   [`check_ledger`], [`orphan_charges`], [`check_keys`], [`check_outbox`]), unit-tested
//!   without a database;
//! - [`breach`]: what a check finds ([`Breach`], numbered by [`Invariant`]);
//! - [`report`]: everything a run found ([`Report`]) and its text form ([`Report::render`];
//!   the JSON form is its `Serialize`);
//! - [`channel`]: the channel's charge list used for reconciliation ([`ChargeSource`],
//!   [`HttpChargeSource`]);
//! - [`run`](mod@run): gathers the facts (the [`Verify`](crate::store::Verify) queries, paged,
//!   the channel's charges, the audit chain) and builds the [`Report`] ([`run()`]).
//!
//! What is checked, by invariant number:
//! 1. Channel: at most one successful channel charge per payment; exactly one for every
//!    charged payment (CHANNEL_SUCCESS, SUSPENSE, SUCCESS, REFUNDED, REVERSED); none for a
//!    FAILED one; amount and currency as the payment's; no charge whose key no payment owns;
//!    refunds at the channel equal the succeeded refunds (when none is pending).
//! 2. Ledger: debits equal credits per currency and per batch; exactly one charge batch (of
//!    the payment's amount) for SUCCESS, REFUNDED and REVERSED, none before SUCCESS; one batch
//!    per succeeded refund; refund totals consistent with the payment.
//! 3. Replays byte for byte: the chaos run checks the bytes; here, every completed
//!    Idempotency-Key must still hold a stored response.
//! 4. Convergence window: nothing non-terminal (not FAILED, REVERSED, REFUNDED or SUCCESS),
//!    and no refund still pending, older than the window (by `created_at`; pending refunds by
//!    the payment's `updated_at`) unless an open error-pool item names the payment.
//! 5. Audit chain: every record's hash links to the one before and matches its content
//!    ([`check_audit_chain`], the same check as `converge audit verify`).
//! 6. Events: every outcome has its outbox event, delivered or in the error pool.
//! 7. Holds (issue 34, [`holds`]): captured ≤ authorized for every payment; every hold ends
//!    exactly once (one hold batch, its pending accounts netted to zero, captured + released
//!    = authorized); the ledger's captures equal the payment's, one batch per captured
//!    capture; with a channel, each manual payment's hold is queried
//!    ([`Connector::query_hold`](crate::channel::Connector::query_hold), at most
//!    [`HOLD_QUERIES`] per run): nothing captured after a void or an expiry, the channel's
//!    captured amount equal to the ledger's; no payment for a tombstoned order.

pub mod breach;
pub mod channel;
pub mod checks;
pub mod holds;
pub mod report;
pub mod run;

pub use breach::{Breach, Invariant};
pub use channel::{
    ChannelCharge, ChargeSource, ChargeSources, HttpChargeSource, StripeChargeSource,
};
pub use checks::{Window, check_keys, check_ledger, check_outbox, check_payment, orphan_charges};
pub use report::{AuditChain, ChannelCheck, HoldCheck, Report};
pub use run::{HOLD_QUERIES, PAGE_SIZE, Scope, VerifyError, check_audit_chain, run, run_scoped};
