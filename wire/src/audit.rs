//! The hash-chained audit log as the console reads it, and the chain's verdict
//! ([`AuditVerify`]: the chain re-computed from its first record against the signed
//! checkpoints, for `GET /ops/v1/audit/verify` and the console's audit page alike).

use serde::{Deserialize, Serialize};

/// A stored record: the entry with its place in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
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
    /// The previous record's hash ([`GENESIS`] for seq 1).
    pub prev_hash: String,
    /// This record's hash.
    pub hash: String,
}

/// An audit record with the payment it concerns, for the audit viewer's links.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AuditRow {
    /// The record as stored.
    #[serde(flatten)]
    pub record: AuditRecord,
    /// The payment the record is about, when its target is the payment, one of its actions
    /// or one of its error-pool items.
    pub payment_id: Option<String>,
}

/// One page of the audit log, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AuditList {
    /// The records, each with the payment it concerns when there is one.
    pub items: Vec<AuditRow>,
    /// `before=` of the next, older page; null on the last.
    pub older: Option<i64>,
    /// `after=` of the previous, newer page; null on the first.
    pub newer: Option<i64>,
}

/// Where and why a chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Break {
    /// The first record that does not verify.
    pub seq: i64,
    /// What is wrong with it.
    pub reason: String,
}

/// Sequence number and hash of a chain position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ChainHead {
    /// Sequence number (0 for an empty log).
    pub seq: i64,
    /// Its SHA-256 hash (hex).
    pub hash: String,
}

/// A signed statement that the chain had `seq` records whose last hash was `head_hash` at
/// time `at` (the server's `domain::checkpoint::Checkpoint`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointView {
    /// Number of records covered (the seq of the last one); 0 for an empty log.
    pub seq: i64,
    /// Hash of record `seq` (64 lowercase hex).
    pub head_hash: String,
    /// When it was signed, epoch ms UTC.
    pub at: i64,
    /// Which key signed: the first 16 hex digits of SHA-256 over the public key.
    pub key_id: String,
    /// Ed25519 signature, standard base64.
    pub signature: String,
}

/// The answer of `GET /ops/v1/audit/verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "utoipa", schema(as = VerifyView))]
pub struct AuditVerify {
    /// Whether the whole chain verifies.
    pub ok: bool,
    /// Records checked.
    pub records: i64,
    /// The last verified record.
    pub head: ChainHead,
    /// The first record that does not verify, if any.
    pub first_broken: Option<Break>,
    /// Signed checkpoints stored.
    pub checkpoints: i64,
    /// The latest signed checkpoint (sequence, head hash, time, signature), if any.
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<Object>))]
    pub latest_checkpoint: Option<CheckpointView>,
    /// Whether checkpoint signatures were checked (the server holds the signing key).
    pub signatures_checked: bool,
}

/// The filters and cursors of the audit viewer (`GET /ops/v1/audit` and the console's audit
/// page; all optional, blank means "any"). A malformed time or a negative cursor is a 400.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "utoipa", into_params(parameter_in = Query))]
pub struct AuditListQuery {
    /// Only this actor (exact).
    pub actor: Option<String>,
    /// Only this action (exact, e.g. `error_resolved`).
    pub action: Option<String>,
    /// Only records about this payment: its own, its actions' and its error-pool items'.
    pub payment: Option<String>,
    /// Only records about this object (exact target: `error:12`, `user:alice`, ...).
    pub target: Option<String>,
    /// Records at or after this UTC time (RFC 3339 or YYYY-MM-DD).
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::time_filter_schema))]
    pub from: Option<String>,
    /// Records before this UTC time.
    #[cfg_attr(feature = "utoipa", param(schema_with = crate::schema::time_filter_schema))]
    pub to: Option<String>,
    /// The next (older) page: records with seq below this (a previous answer's `older`).
    #[cfg_attr(feature = "utoipa", param(minimum = 1))]
    pub before: Option<i64>,
    /// The previous (newer) page: records with seq above this (a previous answer's `newer`);
    /// ignored when `before` is given.
    #[cfg_attr(feature = "utoipa", param(minimum = 0))]
    pub after: Option<i64>,
    /// Records a page (1..=200, default 50; others are clamped, as in the payment search).
    pub limit: Option<i64>,
}
