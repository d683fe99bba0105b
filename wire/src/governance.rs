//! Ops actions (maker-checker) as the console lists them.

use serde::{Deserialize, Serialize};

use crate::lifecycle::ActionStatus;

/// An ops action request and its fate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct ActionRecord {
    /// `act_` + 24 hex.
    pub id: String,
    /// `query`, `retry`, `reverse`, `force_transition`, `capture`, `void`.
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
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
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
    /// A `capture`: the amount to capture, integer minor units of the payment's currency
    /// (issue 34); None for the other kinds.
    #[serde(default)]
    #[cfg_attr(feature = "sqlx", sqlx(default))]
    pub capture_amount: Option<i64>,
    /// A `capture`: whether it is the final one (the rest of the hold is released after it);
    /// None for the other kinds.
    #[serde(default)]
    #[cfg_attr(feature = "sqlx", sqlx(default))]
    pub capture_final: Option<bool>,
}

/// A request in the approvals inbox with its payment as it stands now (the server builds it
/// from `store::ApprovalRow`).
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
    /// The payment moved (or is gone) since the request pinned its version: approving would
    /// only close it as stale.
    pub stale: bool,
    /// A reverse request: what approving it refunds at the channel now (the amount the
    /// merchant's refunds left), integer minor units of `currency`; `None` for other kinds.
    #[serde(default)]
    pub reversal_refunds: Option<i64>,
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

/// A change that gives power, waiting for (or past) a second admin's decision: the two-person
/// rule on privilege (issue 36). Never carries the new user's password or its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct PrivilegeRequest {
    /// `prv_` + 24 hex.
    pub id: String,
    /// `add_user`, `set_roles`, `enable_user`, `reset_password`, `issue_key`,
    /// `unfreeze_merchant`, `confirm_passkey` or `set_connector`.
    pub kind: String,
    /// The user's name (user kinds) or the merchant's (merchant kinds).
    pub target: String,
    /// The roles asked for, comma-separated (`add_user`, `set_roles`); empty otherwise.
    pub roles: String,
    /// The admin who asked.
    pub requested_by: String,
    /// Why (or what), as recorded with the request.
    pub reason: String,
    /// `pending`, `approved`, `executed`, `failed`, `rejected`, `cancelled`, `expired`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
    pub status: ActionStatus,
    /// The approver (or rejecter).
    pub decided_by: Option<String>,
    /// The decision's reason.
    pub decision_reason: Option<String>,
    /// Execution result, JSON text (never a key or a password).
    pub result: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// A pending request expires at, epoch ms UTC.
    pub expires_at: i64,
    /// Epoch ms UTC.
    pub decided_at: Option<i64>,
    /// Epoch ms UTC.
    pub executed_at: Option<i64>,
}

/// The privilege requests an admin may decide, and the latest decided ones, with the
/// server's clock for ages and expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PrivilegeInbox {
    /// Server time of the listing, epoch ms UTC.
    pub now: i64,
    /// Pending, newest first.
    pub pending: Vec<PrivilegeRequest>,
    /// The latest decided ones, newest first.
    pub decided: Vec<PrivilegeRequest>,
}

/// A privilege request approved and run: the request as it ends, and for an issued merchant
/// key the key itself, shown this once to the approver who let it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PrivilegeApproved {
    /// The request, `executed` or `failed`.
    pub request: PrivilegeRequest,
    /// `issue_key`: the new API key (`ck_live_` + 64 hex digits), never stored in clear.
    pub api_key: Option<String>,
}

/// What a console change came to (issue 36): applied at once (`Done`), or a request that
/// waits for another admin (`Requested`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsoleChange<T> {
    /// Applied: it gives no power.
    Done(T),
    /// Recorded as a pending privilege request.
    Requested(PrivilegeRequest),
}
