//! Use cases over the domain, the store and the connectors: creating and driving payments,
//! refunds, and channel callbacks. HTTP handlers and workers call these; they know nothing of
//! HTTP themselves.
//!
//! Every use case has one shape: a method on [`Core`], in an `impl Core` block of its area's
//! module, with what it needs beyond the store and the clock in [`Core`] too (the console's
//! thresholds, approval times, audit key and per-user allowances: [`console`]). The adapters
//! (merchant API, console API, server functions, CLI, workers) call it and pass nothing else
//! in; `tests/it/source_rules.rs` keeps free functions over the store or the core out.

pub mod accounting;
pub mod actions;
pub mod actor;
pub mod audit_chain;
pub mod audit_export;
pub mod bulk;
pub mod callbacks;
pub mod connectors;
pub mod console;
pub mod customer_action;
pub mod dashboard;
pub mod deliveries;
pub mod delivery_gate;
pub mod disputes;
pub mod endpoints;
pub mod error_pool;
pub mod executors;
pub mod holds;
pub mod lookup;
pub mod merchant_connectors;
pub mod merchants;
pub mod outcomes;
pub mod passkeys;
pub mod password;
pub mod pauses;
pub mod payments;
pub mod payments_export;
pub mod pool_actions;
pub mod privilege;
pub mod queries;
pub mod reconcile;
pub mod refunds;
pub mod relying_party;
pub mod resolve;
pub mod sign_in;
pub mod step_up;
pub mod tcc;
pub mod users;
pub mod webhooks;
pub mod write;

/// Identifiers live below the store ([`crate::ids`], which the store uses too); this path
/// stays for callers.
pub use crate::ids;

use std::sync::Arc;

use crate::domain::clock::Clock;
use crate::service::outcomes::OutcomeBuffer;
use crate::store::{Store, StoreError};

/// What the services share.
#[derive(Clone)]
pub struct Core {
    /// Storage.
    pub store: Arc<dyn Store>,
    /// The named connectors and the rule that routes a payment to one
    /// ([`connectors::Connectors`]): every channel call goes to the payment's own connector.
    pub connectors: Arc<connectors::Connectors>,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Timings and limits.
    pub timings: Timings,
    /// The accounting days' time zone and cut-off that date every ledger batch (issue 35;
    /// `--accounting-timezone`, `--accounting-cutoff`).
    pub accounting: crate::domain::accounting::AccountingCalendar,
    /// The key that seals secrets at rest (webhook signing secrets, stored answers that carry
    /// one): [`crate::domain::secret_box`].
    pub secrets: crate::domain::secret_box::SecretBox,
    /// Webhook delivery: settings and the HTTP client.
    pub notifier: webhooks::Notifier,
    /// This process's view of the emergency switch's active pauses.
    pub pauses: pauses::PauseCache,
    /// Idempotency-Key outcome counts not yet written ([`Core::flush_outcomes`]).
    pub outcomes: Arc<OutcomeBuffer>,
    /// What the console's use cases need: thresholds, approval and pause times, the audit
    /// signing key and the per-user allowances ([`console::ConsoleSettings`]).
    pub console: console::ConsoleSettings,
}

impl Core {
    /// Writes the pending Idempotency-Key outcome counts ([`OutcomeBuffer::flush`]), so that
    /// a read of the counts in this process sees its own. Errors: the store's; the counts stay
    /// pending for the next flush.
    pub async fn flush_outcomes(&self) -> Result<(), StoreError> {
        self.outcomes.flush(self.store.as_ref()).await
    }
}

/// The timings the services use, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// Delay before a payment's submit job is due (the request normally finishes first).
    pub submit_delay_ms: i64,
    /// Delay before the first query of an UNKNOWN payment.
    pub query_delay_ms: i64,
    /// Attempts before a job goes to the error pool.
    pub max_attempts: i64,
    /// Resubmissions of a not-found payment (beyond the first submission) before its key is
    /// fenced.
    pub resubmit_budget: i64,
    /// How long after creating a user's account, or asking for or approving a grant of power
    /// to them, an admin may not approve that user's money actions (issue 36;
    /// `--approval-conflict-window-secs`).
    pub approval_conflict_window_ms: i64,
    /// How long an authorization holds the funds, asked of the connector (which may hold
    /// them for less and says so); the hold is voided at its expiry (issue 34;
    /// `--authorization-ttl-secs`, default 7 days as card networks hold).
    pub authorization_ttl_ms: i64,
    /// How long a payment waits in REQUIRES_ACTION for the customer to authenticate
    /// (3-D Secure) before its key is cancelled at the channel and it fails (issue 38;
    /// `--action-window-secs`).
    pub action_window_ms: i64,
}

/// An authorization's default hold: 7 days, as card networks hold (issue 34).
pub const DEFAULT_AUTHORIZATION_TTL_SECS: u64 = 7 * 86_400;

/// Why a use case could not finish.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another writer kept moving the payment; the caller may retry.
    #[error("payment {0} kept changing under us")]
    Contended(String),
}
