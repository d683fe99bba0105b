//! "Find anything, by any id" and the Idempotency-Key page (issue 17): the search's answer
//! and everything about one stored key. The server's `service::lookup` builds them for
//! `/ops/v1/search`, `/ops/v1/idempotency-keys/...` and the console's server functions.

use serde::{Deserialize, Serialize};

/// The kinds of id the search looks in, in the order results are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IdKind {
    /// A payment id (`pay_...`).
    Payment,
    /// A merchant's own order id.
    MerchantOrder,
    /// An Idempotency-Key (per merchant).
    IdempotencyKey,
    /// The key converge sends the channel for a payment (`ck_...`).
    ChannelKey,
    /// A refund id (`re_...`).
    Refund,
    /// An error-pool item number (matched exactly, not by prefix: `1` would otherwise list
    /// 1, 10-19, 100-199 ...).
    ErrorItem,
    /// An ops action id (`act_...`).
    Action,
    /// A payment whose amount is the query (issue 41): `12.50` in major units of its
    /// currency, or `1250` in minor units or in major units. The id is the payment's.
    Amount,
}

impl IdKind {
    /// Every kind, in listing order.
    pub const ALL: [IdKind; 8] = [
        IdKind::Payment,
        IdKind::MerchantOrder,
        IdKind::IdempotencyKey,
        IdKind::ChannelKey,
        IdKind::Refund,
        IdKind::ErrorItem,
        IdKind::Action,
        IdKind::Amount,
    ];

    /// The stable snake_case name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            IdKind::Payment => "payment",
            IdKind::MerchantOrder => "merchant_order",
            IdKind::IdempotencyKey => "idempotency_key",
            IdKind::ChannelKey => "channel_key",
            IdKind::Refund => "refund",
            IdKind::ErrorItem => "error_item",
            IdKind::Action => "action",
            IdKind::Amount => "amount",
        }
    }
}

/// One thing found, with where the console shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "utoipa", schema(example = json!({
    "kind": "idempotency_key", "id": "order-1-create", "label": "key of acme · done · payment pay_7f3a9c2e4b1d8f6a0c5e2b9d",
    "link": "/keys/1/order-1-create", "payment_id": "pay_7f3a9c2e4b1d8f6a0c5e2b9d", "merchant": "acme"
})))]
pub struct SearchHit {
    /// Which kind of id matched.
    pub kind: IdKind,
    /// The id that matched, as stored.
    pub id: String,
    /// One line saying what it is (merchant, amount in major units, status).
    pub label: String,
    /// The console page that shows it: the payment page for a payment, order, channel key,
    /// refund, action or an error-pool item of a payment; the key page for a key; the
    /// approvals inbox for a pending action; the error pool for an item without a payment.
    pub link: String,
    /// The payment it is or belongs to.
    pub payment_id: Option<String>,
    /// The owning merchant's name, when known.
    pub merchant: Option<String>,
}

/// The answer of a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SearchResult {
    /// The query as searched (trimmed).
    pub query: String,
    /// At most 20, by kind (payment, merchant order, key, channel key, refund, error item,
    /// action, amount) and id; a merchant order id's infix matches follow its prefix ones,
    /// and amount matches are listed newest first.
    pub hits: Vec<SearchHit>,
    /// More things match than were returned: type more of the id.
    pub truncated: bool,
}

/// A stored response header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct HeaderLine {
    /// Lower-case name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// The response a key replays, exactly as a retry receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct StoredResponseView {
    /// HTTP status.
    pub status: i64,
    /// The headers sent with it, in order: the stored ones, then `idempotent-replayed: true`,
    /// which every replay adds.
    pub headers: Vec<HeaderLine>,
    /// The body as text, byte for byte, when it is UTF-8 (JSON always is).
    pub body: Option<String>,
    /// The body in base64 when it is not UTF-8.
    pub body_base64: Option<String>,
    /// Body length in bytes.
    pub body_bytes: i64,
}

/// How often later requests with one stored key got one outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct KeyOutcomeCount {
    /// `replay` (the stored response was sent again), `in_use` (409: the first request was
    /// still running) or `reused` (422: another body or route with this key).
    pub outcome: String,
    /// How many requests.
    pub count: i64,
    /// The first, epoch ms UTC.
    pub first_at: i64,
    /// The latest, epoch ms UTC.
    pub last_at: i64,
}

/// Everything about one stored Idempotency-Key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct KeyDetail {
    /// Owner's id.
    pub merchant_id: i64,
    /// Owner's name.
    pub merchant: String,
    /// The client's key.
    pub idem_key: String,
    /// Route template, e.g. `POST /v1/payments/{id}/refunds`.
    pub route: String,
    /// The route with its ids, e.g. `POST /v1/payments/pay_x/refunds`: a retry must match it.
    pub scope: String,
    /// SHA-256 of the canonical request body: a retry must match it.
    pub fingerprint: String,
    /// `running` (its request has not finished; others get 409) or `done` (replayed).
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub state: crate::lifecycle::KeyState,
    /// While running: when its claim lapses and a retry may take it over, epoch ms UTC.
    pub lease_expires_at: Option<i64>,
    /// Running, but its lease has lapsed by the server's clock: the request that held it
    /// stopped without finishing, and the next retry with the same body takes it over. The
    /// console says so rather than "running" (issue 41).
    #[serde(default)]
    pub lease_lapsed: bool,
    /// What its request created (payment, refund or webhook endpoint id).
    pub resource_id: Option<String>,
    /// The payment it made, or whose refund it made.
    pub payment_id: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// When it is purged and the key may be used again, epoch ms UTC.
    pub expires_at: i64,
    /// The stored response (done keys only).
    pub response: Option<StoredResponseView>,
    /// What later requests with it got: `replay`, `in_use`, `reused`.
    pub outcomes: Vec<KeyOutcomeCount>,
}
