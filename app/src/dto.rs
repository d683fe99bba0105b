//! The console's data as the browser sees it: plain serde mirrors of the JSON the `server`
//! crate produces for `/ops/v1` (`ops::dashboard`, `store` rows, `ops::users`). Compiled for
//! both the server and the WebAssembly bundle, which must not depend on the `server` crate;
//! the server functions convert with `serde_json` (to_value, then from_value), so a field
//! renamed on one side fails loudly in the tests instead of silently showing nothing.
//! Times are epoch ms UTC; amounts are integer minor units.

use serde::{Deserialize, Serialize};

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

/// The signed-in user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// Login name.
    pub username: String,
    /// Roles held, sorted.
    pub roles: Vec<String>,
}

impl Principal {
    /// Whether the user holds `role`. Only for showing or hiding controls: the server checks
    /// every call itself.
    pub fn has(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

/// Everything the dashboard shows, computed at `generated_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dashboard {
    /// When the server computed it (epoch ms UTC); ages are measured from here.
    pub generated_at: i64,
    /// Stuck payments.
    pub stuck: StuckView,
    /// Idempotency-Key outcomes.
    pub idempotency: IdempotencyView,
    /// The compensation queue.
    pub queue: QueueView,
    /// The error pool.
    pub error_pool: ErrorPoolView,
    /// Merchant notifications.
    pub webhooks: WebhookBacklog,
    /// The event-stream relay.
    pub relay: RelayStatus,
}

/// The event-stream relay's state (mirrors `server::store::RelayStatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayStatus {
    /// A relay has run against this database.
    pub configured: bool,
    /// Its lease is live.
    pub running: bool,
    /// It is connected to the broker.
    pub connected: bool,
    /// Its last error.
    pub last_error: Option<String>,
    /// Its last heartbeat, epoch ms UTC.
    pub heartbeat_at: Option<i64>,
    /// Events not yet published.
    pub backlog: i64,
    /// Creation of the oldest unpublished event, epoch ms UTC.
    pub oldest_unpublished_at: Option<i64>,
    /// Events the broker refused.
    pub refused: i64,
}

/// Stuck payments by state and age bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StuckView {
    /// (state, threshold ms): a payment is stuck once it stays longer than this.
    pub thresholds: Vec<(String, i64)>,
    /// (state, bucket, count).
    pub counts: Vec<(String, String, i64)>,
    /// Total stuck.
    pub total: i64,
    /// The oldest stuck payments.
    pub oldest: Vec<StuckPayment>,
}

impl StuckView {
    /// The count of `state` in `bucket` (0 when absent).
    pub fn count(&self, state: &str, bucket: &str) -> i64 {
        self.counts
            .iter()
            .filter(|(s, b, _)| s == state && b == bucket)
            .map(|c| c.2)
            .sum()
    }
}

/// A stuck payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StuckPayment {
    /// Payment id.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// Status name.
    pub status: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Entered the current state, epoch ms UTC.
    pub updated_at: i64,
    /// Last error.
    pub last_error: Option<String>,
    /// Earliest due or leased job, epoch ms UTC.
    pub next_attempt_at: Option<i64>,
}

/// Hit rate over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitRate {
    /// `5m`, `1h` or `24h`.
    pub window: String,
    /// Requests with a usable key.
    pub keyed: i64,
    /// Replays among them.
    pub replays: i64,
    /// replays / keyed, 0..=1.
    pub rate: f64,
}

/// Outcome counts of one route over 24 h.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteOutcomes {
    /// `POST /v1/payments`, ...
    pub route: String,
    /// (outcome, count): first, replay, in_use, reused, missing, invalid.
    pub counts: Vec<(String, i64)>,
}

/// One minute of the last hour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinutePoint {
    /// Epoch minute.
    pub minute: i64,
    /// Keyed requests.
    pub keyed: i64,
    /// Replays.
    pub replays: i64,
}

/// Idempotency-Key figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdempotencyView {
    /// 5 min, 1 h and 24 h.
    pub windows: Vec<HitRate>,
    /// Per route, 24 h.
    pub routes: Vec<RouteOutcomes>,
    /// Per minute, last hour; minutes without requests are omitted.
    pub series: Vec<MinutePoint>,
}

/// One job kind of the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRow {
    /// Kind.
    pub kind: String,
    /// Due, never tried.
    pub due: i64,
    /// Leased to a worker.
    pub leased: i64,
    /// Due again after a failure.
    pub retrying: i64,
    /// Gave up (in the error pool).
    pub dead: i64,
    /// Finished.
    pub done: i64,
    /// Age of the oldest due job, ms.
    pub oldest_due_ms: i64,
}

/// The queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueView {
    /// Per kind.
    pub kinds: Vec<QueueRow>,
    /// Jobs finished in the last 5 minutes.
    pub done_last_5m: i64,
}

/// The error pool on the dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorPoolView {
    /// (kind, open count, oldest first_seen ms).
    pub open_by_kind: Vec<(String, i64, i64)>,
    /// Open items in all.
    pub open_total: i64,
    /// The newest open items.
    pub recent: Vec<ErrorItem>,
}

/// An error-pool item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorItem {
    /// Id.
    pub id: i64,
    /// `job_dead`, `suspense`, `reconcile_*`, ...
    pub kind: String,
    /// What makes two reports the same item.
    pub dedupe_key: String,
    /// Payment, if any.
    pub payment_id: Option<String>,
    /// One line.
    pub summary: String,
    /// JSON evidence.
    pub evidence: String,
    /// `open` or `resolved`.
    pub status: String,
    /// How often it was reported.
    pub occurrences: i64,
    /// Epoch ms UTC.
    pub first_seen: i64,
    /// Epoch ms UTC.
    pub last_seen: i64,
    /// The resolver's note.
    pub resolution_note: Option<String>,
    /// Who resolved it.
    pub resolved_by: Option<String>,
    /// Epoch ms UTC.
    pub resolved_at: Option<i64>,
}

/// A merchant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Merchant {
    /// Database id.
    pub id: i64,
    /// Unique name.
    pub name: String,
    /// A frozen merchant cannot create payments or refunds; what was in flight waits in SUSPENSE.
    pub frozen: bool,
    /// Epoch ms UTC.
    pub created_at: i64,
}

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

/// A console user (never the hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserView {
    /// Login name.
    pub username: String,
    /// Roles, sorted.
    pub roles: Vec<String>,
    /// Disabled users cannot sign in.
    pub disabled: bool,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// The last successful sign-in, epoch ms UTC; `None`: never.
    #[serde(default)]
    pub last_sign_in_at: Option<i64>,
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

/// An ops action request (maker-checker) on a payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRecord {
    /// `act_` id.
    pub id: String,
    /// `query`, `retry`, `reverse`, `force_transition`.
    pub kind: String,
    /// Payment.
    pub payment_id: String,
    /// The operator who asked.
    pub requested_by: String,
    /// Why.
    pub reason: String,
    /// Evidence text (force).
    pub evidence: String,
    /// Target status (force).
    pub target_status: Option<String>,
    /// The payment version the request pinned.
    pub payment_version: i64,
    /// `pending`, `approved`, `executed`, `failed`, `rejected`, `cancelled`, `expired`.
    pub status: String,
    /// The approver (or rejecter).
    pub decided_by: Option<String>,
    /// The decision's reason.
    pub decision_reason: Option<String>,
    /// Execution result, JSON text.
    pub result: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Pending requests expire at, epoch ms UTC.
    pub expires_at: i64,
    /// Epoch ms UTC.
    pub decided_at: Option<i64>,
    /// Epoch ms UTC.
    pub executed_at: Option<i64>,
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

/// One audit-log record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// 1, 2, 3, ... without gaps.
    pub seq: i64,
    /// Epoch ms UTC.
    pub at: i64,
    /// Actor.
    pub actor: String,
    /// Roles.
    pub roles: String,
    /// Action.
    pub action: String,
    /// Target.
    pub target: String,
    /// Reason.
    pub reason: String,
    /// Before, JSON text.
    pub before_state: String,
    /// After, JSON text.
    pub after_state: String,
    /// Request metadata, JSON text.
    pub request_meta: String,
    /// The previous record's hash.
    pub prev_hash: String,
    /// This record's hash.
    pub hash: String,
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

/// One payment of a bulk-retry preview (`service::bulk::BulkItem`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkItem {
    /// Payment id.
    pub payment_id: String,
    /// Its status at preview time.
    pub status: String,
    /// Its version at preview time; the confirm carries it back.
    pub version: i64,
    /// Amount, minor units.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// Last change, epoch ms UTC.
    pub updated_at: i64,
    /// Why it is selected: last error or error-pool summary.
    pub why: String,
}

/// What a bulk retry did (`service::bulk::BulkOutcome`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkOutcome {
    /// Retried: payment id, retry action id, jobs woken.
    pub retried: Vec<(String, String, u64)>,
    /// Skipped: payment id and why.
    pub skipped: Vec<(String, String)>,
}

/// Webhook deliveries waiting and dead (mirrors `server::store::WebhookBacklog`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookBacklog {
    /// Deliveries waiting for an attempt.
    pub pending: i64,
    /// Deliveries that used every attempt.
    pub dead: i64,
    /// Creation of the oldest pending delivery, epoch ms UTC.
    pub oldest_pending_at: Option<i64>,
    /// Failed attempts in the window the server counts (1 h on the dashboard, 24 h on the
    /// Webhooks page).
    pub failed_attempts: i64,
}

/// A webhook endpoint as ops staff see it (mirrors `server::ops::webhooks::EndpointRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointRow {
    /// `we_...`.
    pub id: String,
    /// Merchant name.
    pub merchant: String,
    /// URL.
    pub url: String,
    /// Event types (or `*`).
    pub enabled_events: Vec<String>,
    /// Free text.
    pub description: String,
    /// `enabled`, `disabled`, `deleted`.
    pub status: String,
    /// Why disabled.
    pub disabled_reason: Option<String>,
    /// Start of the current run of failures, epoch ms UTC.
    pub failing_since: Option<i64>,
    /// Attempts in 24 h.
    pub attempts_24h: i64,
    /// Of which 2xx.
    pub succeeded_24h: i64,
    /// Last failed attempt, epoch ms UTC.
    pub last_failure_at: Option<i64>,
    /// Its error.
    pub last_failure: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
}

/// The Webhooks page's overview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhooksOverview {
    /// Every endpoint, newest first.
    pub endpoints: Vec<EndpointRow>,
    /// The backlog (failed attempts over 24 h).
    pub backlog: WebhookBacklog,
    /// When computed, epoch ms UTC.
    pub now: i64,
}

/// One delivery (mirrors `server::store::DeliveryRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRow {
    /// Id.
    pub id: i64,
    /// Event id (the `webhook-id`).
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Payment or refund id.
    pub aggregateid: String,
    /// Endpoint.
    pub endpoint_id: String,
    /// Endpoint URL.
    pub url: String,
    /// Merchant.
    pub merchant_id: i64,
    /// `pending`, `succeeded`, `dead`, `abandoned`.
    pub status: String,
    /// Attempts made.
    pub attempts: i64,
    /// Next attempt, epoch ms UTC.
    pub next_attempt_at: Option<i64>,
    /// Last HTTP status.
    pub last_status: Option<i64>,
    /// Last error.
    pub last_error: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
    /// Epoch ms UTC.
    pub delivered_at: Option<i64>,
}

/// One attempt of a delivery (mirrors `server::store::AttemptRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRow {
    /// Id.
    pub id: i64,
    /// Delivery.
    pub delivery_id: i64,
    /// Epoch ms UTC.
    pub attempted_at: i64,
    /// ms.
    pub duration_ms: i64,
    /// HTTP status, None without an answer.
    pub status_code: Option<i64>,
    /// The first KiB of the answer.
    pub response: String,
    /// Why it failed.
    pub error: Option<String>,
}

/// An outbox event (mirrors `server::store::OutboxEvent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxEvent {
    /// Insertion order.
    pub seq: i64,
    /// UUIDv7.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// `payment` or `refund`.
    pub aggregatetype: String,
    /// Payment or refund id.
    pub aggregateid: String,
    /// `payment.succeeded`, ...
    #[serde(rename = "type")]
    pub event_type: String,
    /// JSON text.
    pub payload: String,
    /// Epoch ms UTC.
    pub created_at: i64,
}

/// A delivery with its attempts and event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryDetail {
    /// The delivery.
    pub delivery: DeliveryRow,
    /// Its attempts, oldest first.
    pub attempts: Vec<AttemptRow>,
    /// Its event.
    pub event: Option<OutboxEvent>,
}

/// A payment's events and their deliveries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentWebhooks {
    /// Events of the payment and its refunds.
    pub events: Vec<OutboxEvent>,
    /// Their deliveries.
    pub deliveries: Vec<DeliveryRow>,
}

/// One API key of a merchant, as `GET /ops/v1/merchants/{name}/keys` lists it (never the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerchantKey {
    /// `mk_...` id.
    pub id: String,
    /// The merchant's database id.
    pub merchant_id: i64,
    /// The key's visible prefix (`ck_live_` and 8 hex digits).
    pub prefix: String,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC of the last authenticated request (recorded at most once a minute).
    pub last_used_at: Option<i64>,
    /// Epoch ms UTC; revoked keys answer 401.
    pub revoked_at: Option<i64>,
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

/// Error-pool items of one kind (mirrors `server::store::KindCount`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCount {
    /// Kind.
    pub kind: String,
    /// Items of that kind with the status asked for.
    pub count: i64,
}

/// One page of the error pool (mirrors `server::service::error_pool::PoolPage`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolPage {
    /// Kinds with their counts, by name.
    pub kinds: Vec<KindCount>,
    /// The page's items, grouped by kind.
    pub items: Vec<ErrorItem>,
    /// This page, from 0.
    pub page: i64,
    /// Items a page.
    pub page_size: i64,
    /// Items matching the filter in all.
    pub total: i64,
}

/// What a bulk resolve did (mirrors `server::service::error_pool::ResolveOutcome`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolveOutcome {
    /// Resolved item ids.
    pub resolved: Vec<i64>,
    /// Skipped: item id and why.
    pub skipped: Vec<(i64, String)>,
}

/// An audit record with the payment it concerns (mirrors `server::store::AuditRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    /// The record.
    #[serde(flatten)]
    pub record: AuditRecord,
    /// The payment it concerns, when there is one.
    pub payment_id: Option<String>,
}

/// One page of the audit viewer (mirrors `server::ops::audit::AuditList`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditList {
    /// Newest first.
    pub items: Vec<AuditRow>,
    /// `before=` of the older page.
    pub older: Option<i64>,
    /// `after=` of the newer page.
    pub newer: Option<i64>,
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
