//! Storage of the emergency switch's pauses (issue 17 "Emergency switch"): each request, its
//! approval and its resumption, every step written in one transaction with its audit record.
//! Every `serve` and `worker` process reads the active ones
//! ([`Pauses::active_pause_targets`]), so a pause holds across all processes sharing the
//! database.

use async_trait::async_trait;

use super::StoreError;
use super::governance::AuditEntry;

pub use converge_wire::pauses::PauseRecord;

use crate::domain::pause::PauseStatus;

/// A new pause request (status `pending`).
#[derive(Debug, Clone)]
pub struct NewPause {
    /// Id.
    pub id: String,
    /// Target, as [`PauseTarget::as_string`](crate::domain::pause::PauseTarget::as_string).
    pub target: String,
    /// Reason.
    pub reason: String,
    /// Requester.
    pub requested_by: String,
    /// Epoch ms UTC.
    pub now: i64,
    /// Epoch ms UTC.
    pub expires_at: i64,
}

/// Result of [`Pauses::create_pause`].
#[derive(Debug, Clone, PartialEq, Eq)]
// Matched once where it is returned: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum CreatePause {
    /// Inserted.
    Created(PauseRecord),
    /// The target already has a pending or active pause.
    OpenExists,
}

/// A conditional move of a pause between statuses.
#[derive(Debug, Clone)]
pub struct PauseMove {
    /// Pause id.
    pub id: String,
    /// The status it must be in.
    pub from: PauseStatus,
    /// The status it moves to: `active` or `rejected` record the decision
    /// (approved_by/at, decision_reason); `resumed` or `cancelled` record the resumption.
    pub to: PauseStatus,
    /// Who.
    pub by: String,
    /// Why.
    pub reason: String,
    /// Refuse when `by` is the requester (maker-checker).
    pub not_by_requester: bool,
    /// Refuse when the request expired before this time (epoch ms).
    pub unexpired_at: Option<i64>,
    /// The approval of an early end (issue 36): refuse unless the pause carries an end
    /// request, unexpired at `now`, that someone other than `by` made.
    pub end_approval: bool,
    /// Epoch ms UTC.
    pub now: i64,
}

/// An early end asked of an active pause (issue 36): it ends when a different approver
/// approves it.
#[derive(Debug, Clone)]
pub struct PauseEndRequest {
    /// Pause id.
    pub id: String,
    /// Who asks.
    pub by: String,
    /// Why.
    pub reason: String,
    /// Epoch ms UTC.
    pub now: i64,
    /// Approvable until then, epoch ms UTC.
    pub expires_at: i64,
}

/// Pauses.
#[async_trait]
pub trait Pauses: Send + Sync + 'static {
    /// Inserts a pending pause with its audit record, in one transaction; `OpenExists` (and
    /// nothing written) when its target already has a pending or active one.
    async fn create_pause(
        &self,
        p: &NewPause,
        audit: &AuditEntry,
    ) -> Result<CreatePause, StoreError>;
    /// The pause with this id.
    async fn pause(&self, id: &str) -> Result<Option<PauseRecord>, StoreError>;
    /// Pending and active pauses (oldest first), then up to `limit` ended ones (newest
    /// first).
    async fn pauses(&self, limit: i64) -> Result<Vec<PauseRecord>, StoreError>;
    /// The targets of the active pauses.
    async fn active_pause_targets(&self) -> Result<Vec<String>, StoreError>;
    /// Applies `m` if the pause is in `m.from` (and the maker-checker and expiry conditions
    /// hold), appending `audit` in the same transaction; false when it did not apply
    /// (nothing written).
    async fn move_pause(&self, m: &PauseMove, audit: &AuditEntry) -> Result<bool, StoreError>;
    /// Records an early end request on an active pause, appending `audit` in the same
    /// transaction; false (nothing written) unless the pause is active with no end request
    /// unexpired at `r.now`.
    async fn request_pause_end(
        &self,
        r: &PauseEndRequest,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// Clears an active pause's unexpired end request (an approver rejected it; the pause
    /// stays in force), appending `audit` in the same transaction; false (nothing written)
    /// when there is none or `by` made it.
    async fn reject_pause_end(
        &self,
        id: &str,
        by: &str,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
}
