//! The hash-chained audit log as the console reads it.

use serde::{Deserialize, Serialize};

/// A stored record: the entry with its place in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
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
