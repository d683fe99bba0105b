//! The channel (PSP) boundary: what the core asks a payment channel, and the sandbox channel
//! that behaves like a real PSP over HTTP (DESIGN.md "Sandbox channel"; seed article 004 on
//! UNKNOWN answers and querying by the same key).
//!
//! The core talks to any channel through [`Channel`]; [`http::HttpChannel`] speaks the sandbox's
//! HTTP protocol. Every answer the core cannot decide on (timeout, 5xx, dropped connection,
//! garbled body) is [`ChargeOutcome::Error`], never a decline.

pub mod http;
pub mod sandbox;
pub mod signature;
pub mod webhook_sink;

use async_trait::async_trait;

/// Answer to a charge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeOutcome {
    /// The channel charged `amount` minor units of `currency` under the key.
    Succeeded {
        /// Charged amount, minor units.
        amount: i64,
        /// ISO 4217 code.
        currency: String,
    },
    /// Explicit, decidable decline (sandbox digits 51).
    Declined {
        /// The channel's reason.
        reason: String,
    },
    /// Timeout, 5xx, dropped connection or garbled answer: the outcome is unknown.
    Error {
        /// What went wrong, for the event log.
        detail: String,
    },
}

/// Answer to a query by channel key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryOutcome {
    /// A charge exists under the key.
    Succeeded {
        /// Charged amount, minor units.
        amount: i64,
        /// ISO 4217 code.
        currency: String,
    },
    /// The key was declined.
    Declined {
        /// The channel's reason.
        reason: String,
    },
    /// Nothing was ever committed under the key.
    NotFound,
    /// The key was cancelled (tombstoned): no charge can ever be made with it.
    Cancelled,
    /// The query itself failed; ask again later.
    Error {
        /// What went wrong.
        detail: String,
    },
}

/// Answer to a cancel (fence) request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The key is tombstoned (now or already): a later charge with it is refused.
    Cancelled,
    /// Too late: a charge exists under the key; the caller must treat the payment as charged.
    AlreadyCharged {
        /// Charged amount, minor units.
        amount: i64,
        /// ISO 4217 code.
        currency: String,
    },
    /// The cancel failed; try again.
    Error {
        /// What went wrong.
        detail: String,
    },
}

/// Answer to a refund request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundOutcome {
    /// Refunded (now, or earlier under the same refund key).
    Succeeded,
    /// Refused for a decidable reason (no such charge, more than the remaining amount).
    Rejected {
        /// The channel's reason.
        reason: String,
    },
    /// Unknown outcome; retry with the same refund key.
    Error {
        /// What went wrong.
        detail: String,
    },
}

/// A payment channel. Every call is idempotent on its key: the core may repeat any call with
/// the same key after a timeout or a crash and never charges or refunds twice.
#[async_trait]
pub trait Channel: Send + Sync + 'static {
    /// Charges `amount` minor units of `currency` under `channel_key`.
    async fn charge(&self, channel_key: &str, amount: i64, currency: &str) -> ChargeOutcome;
    /// Asks what happened to `channel_key`.
    async fn query(&self, channel_key: &str) -> QueryOutcome;
    /// Cancels `channel_key` so that no later request can charge with it.
    async fn cancel(&self, channel_key: &str) -> CancelOutcome;
    /// Refunds `amount` minor units of the charge under `channel_key`, idempotent on `refund_key`.
    async fn refund(&self, channel_key: &str, refund_key: &str, amount: i64) -> RefundOutcome;
    /// The settlement statement of UTC day `day` (`YYYY-MM-DD`) as CSV text
    /// (`channel_key,amount,currency,status,charged_at`, then `#end,<line count>,,,`), or why
    /// it could not be fetched.
    async fn statement(&self, day: &str) -> Result<String, String>;
}
