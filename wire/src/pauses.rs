//! The emergency switch's pauses (issue 17 "Emergency switch") as `/ops/v1/pauses` and the
//! console's pauses page and banner receive them.

use serde::{Deserialize, Serialize};

/// Job kinds that may be paused on their own (`job:<kind>` targets), by stored name: every
/// kind of the compensation queue but `submit`, whose pause is the `submissions` target (it
/// also stops the request path). The server checks a requested target against this list and
/// the console offers it.
pub const PAUSABLE_JOB_KINDS: [&str; 6] = [
    "query",
    "post_ledger",
    "refund",
    "webhook",
    "reconcile",
    "reverse",
];

/// A pause request and its fate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct PauseRecord {
    /// `pause_` + 24 hex.
    pub id: String,
    /// `submissions`, `job:<kind>` or `endpoint:<id>`.
    pub target: String,
    /// Why it was requested.
    pub reason: String,
    /// `pending`, `active`, `resumed`, `rejected` or `cancelled`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
    pub status: crate::PauseStatus,
    /// The operator who asked.
    pub requested_by: String,
    /// Epoch ms UTC.
    pub requested_at: i64,
    /// A pending request can be approved until then, epoch ms UTC.
    pub expires_at: i64,
    /// The approver (or rejecter).
    pub approved_by: Option<String>,
    /// When it was approved (in force since) or rejected, epoch ms UTC.
    pub approved_at: Option<i64>,
    /// The approver's reason.
    pub decision_reason: Option<String>,
    /// Who resumed (or cancelled) it.
    pub resumed_by: Option<String>,
    /// Epoch ms UTC.
    pub resumed_at: Option<i64>,
    /// Why it was resumed or cancelled.
    pub resume_reason: Option<String>,
}

/// The console's pauses page: pending and active pauses first (oldest first), then the
/// latest that ended, with the server's clock for ages and expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseOverview {
    /// The pauses.
    pub items: Vec<PauseRecord>,
    /// The server's clock, epoch ms UTC.
    pub now: i64,
}
