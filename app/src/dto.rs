//! The console's data as the browser sees it. Compiled for both the server and the
//! WebAssembly bundle, which must not depend on the `server` crate.
//!
//! The shapes the server produces for `/ops/v1` live in the `converge-wire` crate, which the
//! server serialises and the browser deserialises: they are re-exported here, not mirrored.
//! So is the vocabulary both sides name: the payment statuses, the statuses of jobs, refunds
//! and maker-checker requests, the roles and the stuck-age buckets (`PaymentStatus::ALL`,
//! `JobStatus`, `RefundStatus`, `ActionStatus`, `Role::ALL`, `AGE_BUCKETS`), and what the payment page may
//! offer (`ActionOffer`, forced-transition targets included, computed by the server's
//! domain). What is defined below is the console's own: query forms, the approvals inbox,
//! the pauses with their wording, the merchants page. Times are epoch ms UTC; amounts are
//! integer minor units.

use serde::{Deserialize, Serialize};

pub use converge_wire::dashboard::AGE_BUCKETS;
pub use converge_wire::lifecycle::{ActionStatus, JobStatus, RefundStatus};
pub use converge_wire::{
    ActionOffer, ActionRecord, AttemptRow, AuditList, AuditRecord, AuditRow, BulkItem, BulkOutcome,
    Dashboard, DeliveryDetail, DeliveryRow, EndpointRow, ErrorItem, ErrorPoolView, EventRecord,
    HitRate, IdempotencyView, Job, KeySummary, KindCount, LedgerEntry, Merchant, MerchantKey,
    MinutePoint, OutboxEvent, Payment, PaymentDetail, PaymentPage, PaymentStatus, PoolPage,
    PrincipalView as Principal, QueueRow, QueueView, Refund, RelayStatus, ResolveOutcome,
    ReversalView, Role, RouteOutcomes, StuckPayment, StuckView, UserView, WebhookBacklog,
    WebhooksOverview,
};

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
