//! The console's data as the browser sees it. Compiled for both the server and the
//! WebAssembly bundle, which must not depend on the `server` crate.
//!
//! The shapes the server produces for `/ops/v1` live in the `converge-wire` crate, which the
//! server serialises and the browser deserialises: they are re-exported here, not mirrored.
//! What is defined below is either the console's own (query forms, the approvals inbox, the
//! pauses with their wording, the merchants page) or, for the payment page (`Payment`,
//! `PaymentDetail` and its parts), still a mirror that the server functions fill with
//! `serde_json` (to_value, then from_value), so a field renamed on one side fails loudly in
//! the tests instead of silently showing nothing. Times are epoch ms UTC; amounts are
//! integer minor units.

use serde::{Deserialize, Serialize};

pub use converge_wire::{
    ActionRecord, AttemptRow, AuditList, AuditRecord, AuditRow, BulkItem, BulkOutcome, Dashboard,
    DeliveryDetail, DeliveryRow, EndpointRow, ErrorItem, ErrorPoolView, HitRate, IdempotencyView,
    KindCount, Merchant, MerchantKey, MinutePoint, OutboxEvent, PoolPage,
    PrincipalView as Principal, QueueRow, QueueView, RelayStatus, ResolveOutcome, RouteOutcomes,
    StuckPayment, StuckView, UserView, WebhookBacklog, WebhooksOverview,
};

/// Payment states in the order the console lists them (DESIGN.md "Payment state machine").
pub const PAYMENT_STATUSES: [&str; 9] = [
    "PENDING",
    "PROCESSING",
    "UNKNOWN",
    "CHANNEL_SUCCESS",
    "SUSPENSE",
    "SUCCESS",
    "FAILED",
    "REVERSED",
    "REFUNDED",
];

/// Stuck-age buckets, youngest first (mirrors `server::domain::stuck::AGE_BUCKETS`).
pub const AGE_BUCKETS: [&str; 4] = ["<5m", "5m-1h", "1h-24h", ">24h"];

/// Console roles (mirrors `server::domain::roles::Role`).
pub const ROLES: [&str; 5] = ["viewer", "operator", "approver", "auditor", "admin"];

/// A payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// `pay_` id.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// The merchant's business key.
    pub merchant_order_id: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Free text from the merchant.
    pub description: String,
    /// Current state.
    pub status: String,
    /// Bumped by every write.
    pub version: i64,
    /// Key sent to the channel.
    pub channel_key: String,
    /// Times the charge was sent to the channel.
    pub submit_attempts: i64,
    /// Refunded or reserved, minor units.
    pub refunded_amount: i64,
    /// Last channel or posting error.
    pub last_error: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
}

/// Filters of a payment search (all optional; blank means "any").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentQuery {
    /// Exact payment id: the one payment.
    pub id: Option<String>,
    /// Merchant name.
    pub merchant: Option<String>,
    /// Exact merchant_order_id.
    pub order: Option<String>,
    /// Status name.
    pub status: Option<String>,
    /// Created at or after (UTC): RFC 3339, `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM`.
    pub from: Option<String>,
    /// Created before (UTC), same forms as `from`.
    pub to: Option<String>,
    /// Cursor of the previous page's `next`.
    pub after: Option<String>,
}

/// One page of search results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentPage {
    /// Newest first.
    pub items: Vec<Payment>,
    /// Cursor of the next page, None on the last.
    pub next: Option<String>,
}

/// One recorded event (applied or ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// `api`, `worker`, `callback`, ...
    pub source: String,
    /// Evidence or reason.
    pub detail: String,
    /// Epoch ms UTC.
    pub created_at: i64,
}

/// A compensation job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Id.
    pub id: i64,
    /// Kind.
    pub kind: String,
    /// Payment.
    pub payment_id: Option<String>,
    /// Refund.
    pub refund_id: Option<String>,
    /// `due`, `leased`, `done` or `dead`.
    pub status: String,
    /// Attempts made.
    pub attempts: i64,
    /// Attempts allowed.
    pub max_attempts: i64,
    /// Next run, epoch ms UTC.
    pub run_at: i64,
    /// Last error.
    pub last_error: Option<String>,
}

/// A ledger line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Batch id.
    pub batch_id: i64,
    /// `charge`, `refund` or `reversal`.
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
}

/// A refund.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refund {
    /// `re_` id.
    pub id: String,
    /// Payment.
    pub payment_id: String,
    /// Minor units.
    pub amount: i64,
    /// Merchant's reason.
    pub reason: String,
    /// `pending`, `succeeded` or `failed`.
    pub status: String,
    /// Last error.
    pub last_error: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
}

/// A payment's whole story.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentDetail {
    /// The payment.
    pub payment: Payment,
    /// Its merchant's name.
    pub merchant: String,
    /// Every event, applied and ignored, oldest first.
    pub events: Vec<EventRecord>,
    /// Its jobs.
    pub jobs: Vec<Job>,
    /// Ledger lines.
    pub ledger: Vec<LedgerEntry>,
    /// Refunds.
    pub refunds: Vec<Refund>,
    /// Related error-pool items.
    pub errors: Vec<ErrorItem>,
    /// Ops actions on it, newest first.
    pub actions: Vec<ActionRecord>,
    /// Audit records about it (`payment:<id>`), in seq order.
    pub audit: Vec<AuditRecord>,
    /// Which actions apply now, and why not the others (the server's rule).
    pub offers: Vec<ActionOffer>,
    /// On a REVERSED payment, the reversal's refund at the channel.
    #[serde(default)]
    pub reversal: Option<ReversalView>,
    /// The Idempotency-Keys whose requests made it or its refunds, oldest first.
    #[serde(default)]
    pub idempotency_keys: Vec<crate::api_lookup::KeySummary>,
}

/// The refund a reversal made at the channel (`server::ops::dashboard::ReversalView`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReversalView {
    /// The executed `reverse` action, when on record.
    pub action_id: Option<String>,
    /// Refunded at the channel, integer minor units.
    pub amount: i64,
}

/// Whether an action applies to the payment now (`server::domain::actions::offers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionOffer {
    /// `query`, `retry`, `reverse` or `force_transition`.
    pub kind: String,
    /// It can be requested now.
    pub available: bool,
    /// Why not, when it is not available.
    pub why: String,
}

/// Forced transitions an approver may sign off (mirrors `server::domain::actions::FORCE_WHITELIST`;
/// the server checks again): (from, to).
pub const FORCE_WHITELIST: [(&str, &str); 5] = [
    ("UNKNOWN", "FAILED"),
    ("UNKNOWN", "CHANNEL_SUCCESS"),
    ("PROCESSING", "UNKNOWN"),
    ("SUSPENSE", "SUCCESS"),
    ("CHANNEL_SUCCESS", "SUCCESS"),
];

/// The whitelisted force targets out of `status` (none out of a terminal state).
pub fn force_targets(status: &str) -> Vec<&'static str> {
    FORCE_WHITELIST
        .iter()
        .filter(|(from, _)| *from == status)
        .map(|(_, to)| *to)
        .collect()
}

/// A request in the approvals inbox with its payment as it stands now
/// (`server::store::ApprovalRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalItem {
    /// The request.
    pub action: ActionRecord,
    /// The payment's merchant name (`None` when the payment is gone).
    pub merchant: Option<String>,
    /// The payment's amount, integer minor units.
    pub amount: Option<i64>,
    /// ISO 4217 code.
    pub currency: Option<String>,
    /// The payment's status now.
    pub payment_status: Option<String>,
    /// The payment moved since the request: approving would only close it as stale.
    pub stale: bool,
}

/// The approvals inbox: requests that need an approver (never queries or retries), with the
/// server's clock for ages and expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalInbox {
    /// Server time of the listing, epoch ms UTC.
    pub now: i64,
    /// Pending, newest first.
    pub pending: Vec<ApprovalItem>,
    /// The latest decided ones, newest first.
    pub decided: Vec<ApprovalItem>,
}

/// The result of re-computing the audit chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditVerify {
    /// No break found.
    pub ok: bool,
    /// Records checked.
    pub records: i64,
    /// Last verified seq.
    pub head_seq: i64,
    /// Last verified hash.
    pub head_hash: String,
    /// The first record that does not verify: (seq, what is wrong).
    pub first_broken: Option<(i64, String)>,
}

/// A payment's events and their deliveries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentWebhooks {
    /// Events of the payment and its refunds.
    pub events: Vec<OutboxEvent>,
    /// Their deliveries.
    pub deliveries: Vec<DeliveryRow>,
}

/// A merchant with its keys (the Merchants page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerchantAccount {
    /// The merchant.
    pub merchant: Merchant,
    /// Its keys, oldest first.
    pub keys: Vec<MerchantKey>,
}

/// A key just issued: the key itself is shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedKey {
    /// `mk_...` id.
    pub id: String,
    /// The API key (`ck_live_` + 64 hex digits).
    pub key: String,
}

/// Filters of the audit viewer (all optional; blank means "any").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    /// Exact actor.
    pub actor: Option<String>,
    /// Exact action.
    pub action: Option<String>,
    /// Payment id.
    pub payment: Option<String>,
    /// Exact target (`error:12`, `user:alice`).
    pub target: Option<String>,
    /// At or after (UTC): RFC 3339, `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM`.
    pub from: Option<String>,
    /// Before (UTC), same forms.
    pub to: Option<String>,
    /// Older page cursor.
    pub before: Option<i64>,
    /// Newer page cursor.
    pub after: Option<i64>,
}

/// An emergency-switch pause (issue 17 "Emergency switch"), as `store::PauseRecord` with
/// what it stops in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseItem {
    /// `pause_` id.
    pub id: String,
    /// `submissions`, `job:<kind>` or `endpoint:<id>`.
    pub target: String,
    /// What it stops, for people ("submissions to the channel").
    pub what: String,
    /// Why it was requested.
    pub reason: String,
    /// `pending`, `active`, `resumed`, `rejected` or `cancelled`.
    pub status: String,
    /// The operator who asked.
    pub requested_by: String,
    /// Epoch ms UTC.
    pub requested_at: i64,
    /// A pending request can be approved until then, epoch ms UTC.
    pub expires_at: i64,
    /// The approver (or rejecter).
    pub approved_by: Option<String>,
    /// In force since (or rejected at), epoch ms UTC.
    pub approved_at: Option<i64>,
    /// The approver's reason.
    pub decision_reason: Option<String>,
    /// Who resumed or cancelled it.
    pub resumed_by: Option<String>,
    /// Epoch ms UTC.
    pub resumed_at: Option<i64>,
    /// Why it was resumed or cancelled.
    pub resume_reason: Option<String>,
}

/// The pauses with the server's clock: pending and active first, then recently ended ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseList {
    /// The pauses.
    pub items: Vec<PauseItem>,
    /// The server's clock, epoch ms UTC.
    pub now: i64,
}
