//! A payment and its whole story, as the console's payment search and payment page show them
//! and `GET /ops/v1/payments` and `GET /ops/v1/payments/{id}` send them.
//!
//! [`Payment`] is the stored payment itself (the server's store returns this very type). The
//! other records are the server's database rows as the console sees them; the server converts
//! each row into them with a `From` that names every field on both sides, so a field added to
//! either fails to compile until it is placed.

use serde::{Deserialize, Serialize};

use crate::actions::ActionKind;
use crate::audit::AuditRecord;
use crate::error_pool::ErrorItem;
use crate::governance::ActionRecord;
use crate::lifecycle::{JobStatus, RefundStatus};
use crate::status::PaymentStatus;

/// A payment as stored (DESIGN.md "Payment state machine").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Payment {
    /// `pay_` + 24 hex characters.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// The merchant's business key; unique per merchant.
    pub merchant_order_id: String,
    /// Minor units, > 0.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// Free text from the merchant.
    pub description: String,
    /// SHA-256 of the business parameters, to tell a same-order retry from a conflict.
    pub params_hash: String,
    /// Current state.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub status: PaymentStatus,
    /// Bumped by every write; transitions are conditional on it.
    pub version: i64,
    /// The key sent to the channel on every attempt, including after a restart.
    pub channel_key: String,
    /// How many times the charge was sent to the channel.
    pub submit_attempts: i64,
    /// Sum of refunds reserved or done, minor units.
    pub refunded_amount: i64,
    /// Last channel or posting error, if any.
    pub last_error: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
    /// The ops action (`act_...`) whose reversal holds this payment: set before the reversal's
    /// channel refund, so no merchant refund can be reserved beside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reversal_id: Option<String>,
    /// The connector that took the payment (chosen at its create by the server's routing
    /// rule; `sandbox` for payments older than connectors' names).
    #[serde(default)]
    pub connector: String,
    /// Charged in one step (`automatic`) or authorized now and captured later (`manual`,
    /// issue 34).
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub capture_mode: CaptureMode,
    /// A manual-capture payment's hold: what was captured and released, when it lapses and
    /// the capture in flight. None for an automatic payment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// The fees of what was captured so far, minor units (issue 35): the sum of its fee
    /// batches, each priced by the merchant's pricing when its capture was posted.
    #[serde(default)]
    pub fee: i64,
}

/// How a payment takes its money (issue 34; Stripe's `capture_method`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// Authorized and captured in one charge.
    #[default]
    Automatic,
    /// Authorized (a hold) now; captured, in one or several parts, or voided later.
    Manual,
}

impl CaptureMode {
    /// The stable name (`automatic`, `manual`): stored and sent over every API.
    pub fn as_str(self) -> &'static str {
        match self {
            CaptureMode::Automatic => "automatic",
            CaptureMode::Manual => "manual",
        }
    }

    /// The mode named `s`, if any.
    pub fn parse(s: &str) -> Option<CaptureMode> {
        [CaptureMode::Automatic, CaptureMode::Manual]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

impl Serialize for CaptureMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CaptureMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        CaptureMode::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown capture mode {s:?}")))
    }
}

/// A manual-capture payment's hold (issue 34). Amounts in integer minor units of the
/// payment's currency; the authorized amount is the payment's `amount`; times epoch ms UTC.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Hold {
    /// When the hold lapses at the channel and in the core (None until it is authorized).
    pub expires_at: Option<i64>,
    /// Captured so far.
    pub captured: i64,
    /// Released (the rest after a final capture, a void or an expiry).
    pub released: i64,
    /// The capture in flight (while CAPTURING).
    pub pending_capture: Option<PendingCapture>,
}

/// The capture a CAPTURING payment has in flight: sent (and queried) under its id as the
/// channel's capture key, never under another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PendingCapture {
    /// `cap_` + 24 hex characters: the capture key at the channel.
    pub id: String,
    /// Minor units, > 0.
    pub amount: i64,
    /// The merchant's `final`: the rest of the hold is released after it.
    pub last: bool,
}

/// One capture of a hold, as recorded (issue 34): the payment page's story of the hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct CaptureRecord {
    /// `cap_` + 24 hex characters: the capture key at the channel.
    pub id: String,
    /// The payment.
    pub payment_id: String,
    /// Minor units.
    pub amount: i64,
    /// The merchant's `final`: the rest of the hold is released after it.
    pub last: bool,
    /// `pending` (in flight), `captured` or `refused`.
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub status: crate::lifecycle::CaptureStatus,
    /// Why it was refused (the channel's reason, or the void or expiry that ended the hold).
    pub reason: Option<String>,
    /// Who asked: `api`, or `action:<id>` for an approved ops capture.
    pub source: String,
    /// Epoch ms UTC.
    pub requested_at: i64,
    /// When it was captured or refused, epoch ms UTC.
    pub settled_at: Option<i64>,
}

impl Payment {
    /// What the payment took from the customer, integer minor units: the amount of an
    /// automatic payment, what a manual one captured (issue 34: refunds apply to captured
    /// amounts only).
    pub fn charged_amount(&self) -> i64 {
        match &self.hold {
            Some(h) => h.captured,
            None => self.amount,
        }
    }

    /// What is still held at the channel for a manual-capture payment's hold once it is
    /// authorized: the amount less what was captured and released (0 for an automatic
    /// payment and before the authorization).
    pub fn held_amount(&self) -> i64 {
        match &self.hold {
            Some(h) if h.expires_at.is_some() => self.amount - h.captured - h.released,
            _ => 0,
        }
    }

    /// What the merchant's refunds left of what was charged, integer minor units: what a
    /// reversal refunds at the channel (DESIGN.md "Ops console": reverse refunds the
    /// remaining amount), and so, on a REVERSED payment, what the reversal refunded.
    pub fn unrefunded(&self) -> i64 {
        self.charged_amount() - self.refunded_amount
    }

    /// What was captured and posted, integer minor units, once anything was (issue 35: what
    /// fees are charged on): a manual payment's captures once there is one; an automatic
    /// payment's amount once its charge batch is posted (SUCCESS, and the REFUNDED or
    /// REVERSED that follow it). `None` before.
    pub fn captured_gross(&self) -> Option<i64> {
        match &self.hold {
            Some(h) => (h.captured > 0).then_some(h.captured),
            None => matches!(
                self.status,
                PaymentStatus::Success | PaymentStatus::Refunded | PaymentStatus::Reversed
            )
            .then_some(self.amount),
        }
    }
}

/// One page of a payment search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PaymentPage {
    /// The payments, newest first.
    pub items: Vec<Payment>,
    /// The cursor of the next, older page (`after=`), or null on the last page.
    pub next: Option<String>,
    /// The cursor of the previous, newer page (`before=`), or null on the first page (issue
    /// 41: the list paged only towards older payments).
    #[serde(default)]
    pub prev: Option<String>,
}

/// One recorded event (applied or ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
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

/// A job row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Job {
    /// Id.
    pub id: i64,
    /// Kind name.
    pub kind: String,
    /// Payment, if any.
    pub payment_id: Option<String>,
    /// Refund, if any.
    pub refund_id: Option<String>,
    /// `due`, `leased`, `done` or `dead`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub status: JobStatus,
    /// Attempts made.
    pub attempts: i64,
    /// Attempts allowed.
    pub max_attempts: i64,
    /// Next run, epoch ms UTC.
    pub run_at: i64,
    /// Last error.
    pub last_error: Option<String>,
}

/// One ledger line with its batch, for the payment page.
// Named `LedgerEntryRow` in the OpenAPI document, as it was before it moved here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "utoipa", schema(as = LedgerEntryRow))]
pub struct LedgerEntry {
    /// Batch id.
    pub batch_id: i64,
    /// `charge`, `refund`, `reversal`, `hold`, `capture`, `release` or `fee`.
    pub kind: String,
    /// Account.
    pub account: String,
    /// `debit` or `credit`.
    pub direction: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// The batch's accounting day, `YYYY-MM-DD` (issue 35).
    #[serde(default)]
    pub accounting_date: String,
}

/// A refund row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
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
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub status: RefundStatus,
    /// Last error.
    pub last_error: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
}

/// A stored key in a list (the payment page): enough to name and link it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct KeySummary {
    /// Owner.
    pub merchant_id: i64,
    /// The client's key.
    pub idem_key: String,
    /// Route template, e.g. `POST /v1/payments`.
    pub route: String,
    /// `running` or `done`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
    pub state: crate::lifecycle::KeyState,
    /// What its request created (the payment, or a refund of it).
    pub resource_id: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
}

/// Whether an action applies to a payment now, and if not, why: what the console offers, so
/// ops staff are never offered an action that cannot apply (issue 17). The server's domain
/// computes it (`domain::actions::offers`), one rule for the console's buttons and the
/// server's checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ActionOffer {
    /// `query`, `retry`, `reverse`, `force_transition`, `capture` or `void`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub kind: ActionKind,
    /// It can be requested now.
    pub available: bool,
    /// Why not, in words, when it is not available (empty when it is).
    pub why: String,
    /// For `force_transition`: the statuses an approver may force the payment into from its
    /// status now, in the whitelist's order (the first is the console's default); empty for
    /// the other kinds and when none is allowed. The console offers exactly these, so it
    /// keeps no copy of the whitelist; the server checks again when the request arrives.
    #[cfg_attr(feature = "utoipa", schema(value_type = Vec<String>))]
    pub targets: Vec<PaymentStatus>,
}

/// The refund a reversal made at the channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ReversalView {
    /// The executed `reverse` action (`act_...`), when it is on record.
    pub action_id: Option<String>,
    /// Refunded at the channel, integer minor units: what the merchant's refunds left.
    pub amount: i64,
}

/// A payment's whole story for its console page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PaymentDetail {
    /// The payment.
    pub payment: Payment,
    /// Its merchant's name.
    pub merchant: String,
    /// Every event, applied and ignored, oldest first.
    pub events: Vec<EventRecord>,
    /// Its jobs with attempts, next run and last error.
    pub jobs: Vec<Job>,
    /// Ledger lines.
    pub ledger: Vec<LedgerEntry>,
    /// Refunds.
    pub refunds: Vec<Refund>,
    /// Related error-pool items.
    pub errors: Vec<ErrorItem>,
    /// Ops actions on it, newest first.
    pub actions: Vec<ActionRecord>,
    /// Audit records about it, oldest first.
    pub audit: Vec<AuditRecord>,
    /// Which actions apply to it now, and why not the others.
    pub offers: Vec<ActionOffer>,
    /// On a REVERSED payment, the reversal's refund at the channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reversal: Option<ReversalView>,
    /// The Idempotency-Keys whose requests made it or its refunds, oldest first.
    pub idempotency_keys: Vec<KeySummary>,
    /// A manual-capture payment's captures (issue 34), oldest first: with `payment.hold`,
    /// the hold's story. Empty for an automatic payment.
    #[serde(default)]
    pub captures: Vec<CaptureRecord>,
}

impl PaymentDetail {
    /// The offer of action `kind` (`query`, `retry`, `reverse`, `force_transition`), if the
    /// server sent one.
    pub fn offer(&self, kind: ActionKind) -> Option<&ActionOffer> {
        self.offers.iter().find(|o| o.kind == kind)
    }
}

/// The filters of a console payment search (`GET /ops/v1/payments`, the search page and the
/// CSV export; all optional, blank means "any"). The server checks them: an unknown status,
/// a malformed time or cursor is a 400 with a stable code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "utoipa", into_params(parameter_in = Query))]
pub struct PaymentSearch {
    /// Payment id (exact): the one payment.
    pub id: Option<String>,
    /// Status name.
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::status_filter_schema))]
    pub status: Option<String>,
    /// Merchant name.
    pub merchant: Option<String>,
    /// merchant_order_id (exact).
    pub order: Option<String>,
    /// Created at or after: RFC 3339 or `YYYY-MM-DD` (UTC).
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::time_filter_schema))]
    pub from: Option<String>,
    /// Created before: RFC 3339 or `YYYY-MM-DD` (UTC).
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::time_filter_schema))]
    pub to: Option<String>,
    /// Failure reason: the payment had a charge attempt failing for it (`decline:<the
    /// connector's reason>`, `timeout`, `5xx`, `dropped`, `garbled`), or `fenced` (its key was
    /// cancelled after no charge was found); the keys the dashboard's failures link with.
    /// Read exactly as sent (an empty one is none).
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::failure_reason_filter_schema))]
    pub reason: Option<String>,
    /// A manual-capture hold that expires before this time: RFC 3339 or `YYYY-MM-DD` (UTC)
    /// (issue 34: the dashboard's "Holds expiring within 24 h" links here with
    /// `status=AUTHORIZED`). Payments without a hold's expiry are left out.
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::time_filter_schema))]
    #[serde(default)]
    pub expires_before: Option<String>,
    /// In its current state for more than this many minutes (issue 41): its last change
    /// (`updated_at`) is older than now less that. A whole number, 1 to 525600 (a year);
    /// blank is any.
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::in_state_schema))]
    #[serde(default)]
    pub in_state_for: Option<String>,
    /// Paging cursor from the previous page's `next`: the page of older payments.
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::cursor_schema))]
    pub after: Option<String>,
    /// Paging cursor from a page's `prev`: the page of newer payments just above it. With
    /// both cursors, `before` is used.
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::cursor_schema))]
    #[serde(default)]
    pub before: Option<String>,
    /// Page size (1..=200, default 50; others are clamped).
    pub limit: Option<i64>,
}
