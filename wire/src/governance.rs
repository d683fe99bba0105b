//! Ops actions (maker-checker) as the console lists them.

use serde::{Deserialize, Serialize};

use crate::lifecycle::ActionStatus;

/// An ops action request and its fate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ActionRecord {
    /// `act_` + 24 hex.
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
    /// `pending`, `approved`, `executed`, `failed`, `rejected`, `cancelled`, `expired`, `stale`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub status: ActionStatus,
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
