//! The connector (PSP) boundary: the one contract every payment connector meets, and the
//! sandbox channel that behaves like a real PSP over HTTP (DESIGN.md "Connectors and lanes",
//! "Sandbox channel"; seed article 004 on UNKNOWN answers and querying by the same key).
//!
//! The core talks to every connector through [`Connector`]; [`http::HttpConnector`] speaks the
//! sandbox's HTTP protocol. Which connector a payment goes to is decided once, at its create,
//! by the service layer's router ([`crate::service::connectors`]) and stored on the payment.
//! Every answer the core cannot decide on (timeout, 5xx, dropped connection, garbled body) is
//! an `Error` variant, never a decline. The conformance suite every connector runs is
//! `server/tests/it/connector_conformance.rs`.

pub mod http;
pub mod sandbox;
pub mod signature;
pub mod stripe;
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
    /// The channel waits for the customer to authenticate (3-D Secure; Stripe's
    /// `requires_action`): nothing is charged yet, and the customer's action (or the
    /// key's cancellation) decides. Definitive for now, never a decline (issue 38).
    RequiresAction {
        /// The channel's reference for the customer's step (e.g. `pi_…: use_stripe_sdk`).
        detail: String,
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
    /// The channel waits for the customer to authenticate (3-D Secure; Stripe's
    /// `requires_action`): nothing is charged yet, and the customer's action (or the
    /// key's cancellation) decides. Definitive for now, never a decline (issue 38).
    RequiresAction {
        /// The channel's reference for the customer's step (e.g. `pi_…: use_stripe_sdk`).
        detail: String,
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

/// An operation of the [`Connector`] contract, named in [`Unsupported`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// [`Connector::charge`].
    Charge,
    /// [`Connector::authorize`].
    Authorize,
    /// [`Connector::capture`].
    Capture,
    /// [`Connector::void`].
    Void,
    /// [`Connector::query`].
    Query,
    /// [`Connector::query_hold`].
    QueryHold,
    /// [`Connector::cancel`].
    Cancel,
    /// [`Connector::refund`].
    Refund,
    /// [`Connector::verify_callback`].
    Callback,
    /// [`Connector::statement`].
    Statement,
}

impl Operation {
    /// Stable lowercase name (`charge`, `authorize`, `capture`, `void`, `query`,
    /// `query_hold`, `cancel`, `refund`, `callback`, `statement`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Charge => "charge",
            Self::Authorize => "authorize",
            Self::Capture => "capture",
            Self::Void => "void",
            Self::Query => "query",
            Self::QueryHold => "query_hold",
            Self::Cancel => "cancel",
            Self::Refund => "refund",
            Self::Callback => "callback",
            Self::Statement => "statement",
        }
    }
}

/// The typed answer of an operation a connector does not offer: decided before anything was
/// sent, so it is definitive (nothing happened at the PSP) and is never retried. A caller
/// that needs the operation (a manual-capture payment on a connector without holds) refuses
/// it up front instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the connector does not support {}", operation.as_str())]
pub struct Unsupported {
    /// What was asked.
    pub operation: Operation,
}

impl Unsupported {
    /// The answer for `operation`.
    pub fn of(operation: Operation) -> Self {
        Self { operation }
    }
}

/// Answer to an authorization (a hold of funds, captured or voided later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizeOutcome {
    /// Funds are held under the key (now, or earlier under the same key).
    Authorized {
        /// Held amount, minor units.
        amount: i64,
        /// ISO 4217 code.
        currency: String,
        /// When the hold lapses at the connector, epoch ms UTC.
        expires_at_ms: i64,
    },
    /// The channel waits for the customer to authenticate (3-D Secure; Stripe's
    /// `requires_action`): nothing is held yet, and the customer's action (or the
    /// key's cancellation) decides. Definitive for now, never a decline (issue 38).
    RequiresAction {
        /// The channel's reference for the customer's step (e.g. `pi_…: use_stripe_sdk`).
        detail: String,
    },
    /// Explicit, decidable decline, or the key was fenced (cancelled or voided) first.
    Declined {
        /// The connector's reason (`cancelled` for a fenced key).
        reason: String,
    },
    /// Timeout, 5xx, dropped connection or garbled answer: the outcome is unknown; query the
    /// hold by the same key ([`Connector::query_hold`]).
    Error {
        /// What went wrong.
        detail: String,
    },
}

/// Answer to a capture of (part of) a hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureOutcome {
    /// The capture is made (now, or earlier under the same capture key).
    Captured {
        /// This capture's amount, minor units.
        amount: i64,
        /// Everything captured on the hold so far, this capture included, minor units.
        captured_total: i64,
        /// ISO 4217 code.
        currency: String,
        /// No further capture is possible: the capture was final or used the whole hold
        /// (the rest, if any, is released).
        closed: bool,
    },
    /// Refused for a decidable reason: no such hold, voided, expired, declined, already
    /// closed, more than what is still held, or the capture key reused with other parameters.
    /// Nothing was captured.
    Rejected {
        /// The connector's reason (`not_found`, `voided`, `expired`, `declined`, `closed`,
        /// `exceeds_authorized`, `capture_key_reused`, `amount_not_positive`).
        reason: String,
    },
    /// Unknown outcome: query the hold ([`Connector::query_hold`]) or repeat with the same
    /// capture key, never with a new one.
    Error {
        /// What went wrong.
        detail: String,
    },
}

/// Answer to a void (release) of a hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoidOutcome {
    /// Released (now or before). A void of a key with no hold fences the key instead (TCC
    /// empty rollback): a later authorization with it is declined.
    Voided,
    /// The hold had lapsed before the void: released all the same.
    Expired,
    /// Refused for a decidable reason: something was already captured.
    Rejected {
        /// The connector's reason (`already_captured`).
        reason: String,
    },
    /// Unknown outcome: repeat the void with the same key, or query the hold.
    Error {
        /// What went wrong.
        detail: String,
    },
}

/// Where a hold stands at the connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldStatus {
    /// Held; captures are possible until it expires.
    Authorized,
    /// Closed by a final (or whole) capture; `captured` says how much.
    Captured,
    /// Released by a void before any capture.
    Voided,
    /// Lapsed before it was closed; what was captured before stays captured.
    Expired,
    /// The authorization was declined; nothing is held.
    Declined,
    /// The channel waits for the customer to authenticate (3-D Secure); nothing is held yet.
    RequiresAction,
}

/// Answer to a query of a hold by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldQueryOutcome {
    /// A hold (or its decline) exists under the key.
    Found {
        /// Where it stands.
        status: HoldStatus,
        /// Authorized amount, minor units.
        amount: i64,
        /// Captured so far, minor units (0..=amount).
        captured: i64,
        /// ISO 4217 code.
        currency: String,
        /// When the hold lapses (or lapsed), epoch ms UTC.
        expires_at_ms: i64,
    },
    /// Nothing was ever committed under the key.
    NotFound,
    /// The key is fenced (cancelled, or voided before any hold): no hold can be made with it.
    Cancelled,
    /// The query itself failed; ask again later.
    Error {
        /// What went wrong.
        detail: String,
    },
}

impl HoldQueryOutcome {
    /// The answer's name as the sandbox reports it and the `query` action records it:
    /// `authorized`, `captured`, `voided`, `expired`, `declined`, `requires_action`,
    /// `not_found`, `cancelled` or `error`.
    pub fn name(&self) -> &'static str {
        match self {
            HoldQueryOutcome::Found { status, .. } => match status {
                HoldStatus::Authorized => "authorized",
                HoldStatus::Captured => "captured",
                HoldStatus::Voided => "voided",
                HoldStatus::Expired => "expired",
                HoldStatus::Declined => "declined",
                HoldStatus::RequiresAction => "requires_action",
            },
            HoldQueryOutcome::NotFound => "not_found",
            HoldQueryOutcome::Cancelled => "cancelled",
            HoldQueryOutcome::Error { .. } => "error",
        }
    }
}

/// A connector callback, verified and parsed: the domain fact the core applies
/// ([`crate::service::callbacks`]). Amount in minor units; `created_at` in unix seconds UTC.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct CallbackFact {
    /// The connector's unique event id (a repeat is applied once).
    pub event_id: String,
    /// What happened, in the core's vocabulary: `charge.succeeded` or `charge.failed`; for a
    /// hold (issue 34) `authorization.succeeded`, `authorization.failed`, `capture.succeeded`
    /// or `capture.failed`; a customer's dispute of a charge (a chargeback; issue 38)
    /// `dispute.opened`, `dispute.won` or `dispute.lost`; anything else is recorded and
    /// ignored.
    #[serde(rename = "type")]
    pub kind: String,
    /// The payment's channel key.
    pub channel_key: String,
    /// For `capture.*`: the capture's key (the core's capture id).
    #[serde(default)]
    pub capture_key: Option<String>,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// When the connector sent it, unix seconds UTC.
    pub created_at: i64,
    /// For `dispute.*`: the connector's id of the dispute (one error-pool item each).
    #[serde(default)]
    pub dispute_id: Option<String>,
    /// For `dispute.*`: the card network's reason (`fraudulent`, `product_not_received`, ...).
    #[serde(default)]
    pub reason: Option<String>,
    /// The connector's own id of the payment when the event does not carry the channel key
    /// (a Stripe dispute names its PaymentIntent): the core asks the connector for the key
    /// ([`Connector::channel_key_of`]) before it looks the payment up.
    #[serde(default, skip)]
    pub reference: Option<String>,
}

/// Why a callback was refused before anything was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackRejection {
    /// This connector sends no callbacks the core can check.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// Missing, malformed or wrong signature (HTTP 401).
    #[error("callback signature does not verify")]
    BadSignature,
    /// Signed outside the tolerance window (HTTP 400): a replay or a very late delivery.
    #[error("callback timestamp is outside the tolerance window")]
    TooOld,
    /// Verified, but the body is not an event of the connector's protocol (HTTP 400).
    #[error("{0}")]
    Invalid(String),
}

/// Why a statement could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatementError {
    /// This connector has no statements.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// Fetching failed (transport, status, encoding); try again later.
    #[error("{0}")]
    Failed(String),
}

/// A payment connector (a PSP behind one protocol): the contract every connector meets,
/// written once here and proven by the conformance suite
/// (`server/tests/it/connector_conformance.rs`, `run_conformance`).
///
/// # Keys and idempotency
/// Every call is idempotent on its key: the core may repeat any call with the same key after
/// a timeout or a crash, and the connector never charges, holds, captures or refunds twice.
/// `channel_key` names one payment at the connector for its whole life (charge or hold,
/// query, cancel, refunds); `refund_key` and `capture_key` name one refund or capture.
/// Amounts are integer minor units; currencies ISO 4217 codes.
///
/// # UNKNOWN rules (DESIGN.md "Payment state machine"; seed 004 "UNKNOWN vs FAILED")
/// - Definitive answers are only those the connector states explicitly: `Succeeded`,
///   `Declined`, `Rejected`, `NotFound`, `Cancelled`, `Authorized`, `Captured`, `Voided`,
///   `Expired`, `AlreadyCharged`. A success is evidence only for the key (and amount) asked.
/// - Everything else (timeout, connect error, 5xx, a dropped connection, an unparseable or
///   unexpected body, a success about another key) is an `Error`: undecidable. The payment
///   becomes UNKNOWN and is resolved by [`query`](Connector::query) /
///   [`query_hold`](Connector::query_hold) with the same key, never marked FAILED, and never
///   resent under a new key.
/// - A `NotFound` query may be followed by a resubmission with the same key (bounded); before
///   the core gives up it [`cancel`](Connector::cancel)s the key (the fence), so a late
///   request can never charge after the payment was failed.
/// - An operation the connector does not offer answers [`Unsupported`] without sending
///   anything: definitive, never retried, never a panic. `charge`, `query`, `cancel` and
///   `refund` are required; holds, callbacks and statements are optional and default to
///   `Unsupported`.
#[async_trait]
pub trait Connector: Send + Sync + 'static {
    /// Charges (authorizes and captures in one step) `amount` of `currency` under
    /// `channel_key`. Definitive: `Succeeded` (same key, amount and currency) and `Declined`
    /// (including a fenced key). Undecidable: `Error` → query by the same key.
    async fn charge(&self, channel_key: &str, amount: i64, currency: &str) -> ChargeOutcome;

    /// Asks what happened to the charge under `channel_key`. Definitive: `Succeeded`,
    /// `Declined`, `NotFound` (nothing was ever committed: the key may be resubmitted or
    /// fenced) and `Cancelled` (fenced: never chargeable). `Error`: ask again later.
    async fn query(&self, channel_key: &str) -> QueryOutcome;

    /// Fences `channel_key` so that no later charge (or authorization) can succeed with it:
    /// the TCC anti-hanging fence the core sets before it gives a payment up. Definitive:
    /// `Cancelled` (now or already) and `AlreadyCharged` (too late: the payment was charged
    /// and must be treated so). `Error`: repeat the cancel; the payment is not failed until a
    /// cancel is confirmed.
    async fn cancel(&self, channel_key: &str) -> CancelOutcome;

    /// Refunds `amount` of the charge under `channel_key`, idempotent on `refund_key` (the
    /// same key with the same amount answers the first answer; with another, `Rejected`).
    /// Definitive: `Succeeded`, `Rejected` (no charge, more than what is left, key reused).
    /// `Error`: repeat with the same `refund_key`, never a new one.
    async fn refund(&self, channel_key: &str, refund_key: &str, amount: i64) -> RefundOutcome;

    /// Authorizes (holds) `amount` of `currency` under `channel_key`, for later
    /// [`capture`](Connector::capture) or [`void`](Connector::void). The hold lapses at the
    /// connector after `ttl_secs` (or the connector's own limit, whichever is shorter; the
    /// answer says when). Definitive: `Authorized`, `Declined`. `Error` → [`query_hold`]
    /// by the same key. Default: `Unsupported`.
    ///
    /// [`query_hold`]: Connector::query_hold
    async fn authorize(
        &self,
        channel_key: &str,
        amount: i64,
        currency: &str,
        ttl_secs: i64,
    ) -> Result<AuthorizeOutcome, Unsupported> {
        let _ = (channel_key, amount, currency, ttl_secs);
        Err(Unsupported::of(Operation::Authorize))
    }

    /// Captures `amount` (at most what is still held; partial captures allowed) of the hold
    /// under `channel_key`, idempotent on `capture_key`. `last` closes the hold after this
    /// capture (the rest is released). Never captures after a void or an expiry.
    /// Definitive: `Captured`, `Rejected`. `Error` → repeat with the same `capture_key` or
    /// query the hold. Default: `Unsupported`.
    async fn capture(
        &self,
        channel_key: &str,
        capture_key: &str,
        amount: i64,
        last: bool,
    ) -> Result<CaptureOutcome, Unsupported> {
        let _ = (channel_key, capture_key, amount, last);
        Err(Unsupported::of(Operation::Capture))
    }

    /// Releases the uncaptured hold under `channel_key`; idempotent on the key. A void of a
    /// key with no hold fences it (TCC empty rollback: a later authorization is declined).
    /// Definitive: `Voided`, `Expired`, `Rejected` (already captured). `Error` → repeat.
    /// Default: `Unsupported`.
    async fn void(&self, channel_key: &str) -> Result<VoidOutcome, Unsupported> {
        let _ = channel_key;
        Err(Unsupported::of(Operation::Void))
    }

    /// Asks where the hold under `channel_key` stands (authorized, captured and how much,
    /// voided, expired, declined), or that there is none (`NotFound`) or the key is fenced
    /// (`Cancelled`). `Error`: ask again later. Default: `Unsupported`.
    async fn query_hold(&self, channel_key: &str) -> Result<HoldQueryOutcome, Unsupported> {
        let _ = channel_key;
        Err(Unsupported::of(Operation::QueryHold))
    }

    /// Verifies a callback this connector sent (its raw `body` and request `headers`, at
    /// `now_secs`, unix seconds UTC) and parses it into the domain fact the core applies.
    /// No I/O: the core stores and applies the fact itself, once per event id; a fact is
    /// never decisive on its own while a payment is open (the core's query decides).
    /// Default: `Unsupported`.
    fn verify_callback(
        &self,
        headers: &axum::http::HeaderMap,
        body: &[u8],
        now_secs: i64,
    ) -> Result<CallbackFact, CallbackRejection> {
        let _ = (headers, body, now_secs);
        Err(Unsupported::of(Operation::Callback).into())
    }

    /// The channel key of the payment the connector knows as `reference` (its own id, e.g. a
    /// Stripe PaymentIntent), for a callback that names only that
    /// ([`CallbackFact::reference`]); None when there is no such payment of converge's or the
    /// connector cannot say now (the callback is then recorded for an unknown payment).
    /// Default: None.
    async fn channel_key_of(&self, reference: &str) -> Option<String> {
        let _ = reference;
        None
    }

    /// The settlement statement of UTC day `day` (`YYYY-MM-DD`) as CSV text
    /// (`channel_key,amount,currency,status,charged_at`, optionally followed by `fee,net` in
    /// minor units, then `#end,<line count>,,,`; the shape
    /// [`crate::service::reconcile::parse_statement`] reads). `Failed`: fetch again
    /// later; a statement is never guessed. Default: `Unsupported`.
    async fn statement(&self, day: &str) -> Result<String, StatementError> {
        let _ = day;
        Err(Unsupported::of(Operation::Statement).into())
    }
}

/// The contract's former name, kept so callers written against it still read.
pub use Connector as Channel;
