//! Storage of privilege requests (issue 36, the two-person rule on privilege): each request
//! and every move of it written in one transaction with its audit record, like maker-checker
//! actions ([`super::Governance`]), whose conditional [`ActionMove`] it reuses.

use async_trait::async_trait;

use super::StoreError;
use super::governance::{ActionMove, AuditEntry};

pub use converge_wire::governance::PrivilegeRequest;

/// A new privilege request (status `pending`).
#[derive(Debug, Clone)]
pub struct NewPrivilegeRequest {
    /// `prv_` + 24 hex.
    pub id: String,
    /// [`PrivilegeKind`](crate::domain::privilege::PrivilegeKind) name.
    pub kind: String,
    /// Username or merchant name.
    pub target: String,
    /// Roles asked for (comma-separated), or empty.
    pub roles: String,
    /// The new user's password hash (`add_user`), or empty. Never read back into a view.
    pub password_hash: String,
    /// Requester.
    pub requested_by: String,
    /// Why, or what.
    pub reason: String,
    /// Epoch ms UTC.
    pub now: i64,
    /// Epoch ms UTC.
    pub expires_at: i64,
}

/// One grant of power to a user, as the approval-conflict rule reads it: who asked for it,
/// who approved it (`None` for a one-step account creation), and when it took effect
/// (epoch ms UTC).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Grant {
    /// Who asked (or, for a one-step creation, who created the account).
    pub requested_by: String,
    /// Who approved it.
    pub decided_by: Option<String>,
    /// When it took effect.
    pub at: i64,
}

/// Privilege requests.
#[async_trait]
pub trait Privileges: Send + Sync + 'static {
    /// Inserts a pending request with its audit record in one transaction; `None` (nothing
    /// written) when the same kind of request for the same target is already pending.
    async fn create_privilege_request(
        &self,
        r: &NewPrivilegeRequest,
        audit: &AuditEntry,
    ) -> Result<Option<PrivilegeRequest>, StoreError>;
    /// The request with this id.
    async fn privilege_request(&self, id: &str) -> Result<Option<PrivilegeRequest>, StoreError>;
    /// The password hash an `add_user` request carries (empty for the other kinds).
    async fn privilege_password_hash(&self, id: &str) -> Result<Option<String>, StoreError>;
    /// Pending requests (`pending`), or the decided ones, newest first; at most `limit`.
    async fn privilege_requests(
        &self,
        pending: bool,
        limit: i64,
    ) -> Result<Vec<PrivilegeRequest>, StoreError>;
    /// Applies `m` if the request is in one of `m.from` (and the requester and expiry
    /// conditions hold), appending `audit` in the same transaction; false when it did not
    /// apply (nothing written). Two deciders racing cannot both win.
    async fn move_privilege_request(
        &self,
        m: &ActionMove,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// The grants of power to `username` that took effect at or after `since`: executed
    /// requests of the `kinds` given naming it, and console creations of its account
    /// (`user_added` audit records).
    async fn grants_to(
        &self,
        username: &str,
        kinds: &[&str],
        since: i64,
    ) -> Result<Vec<Grant>, StoreError>;
}
