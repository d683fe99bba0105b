//! Console users and the signed-in user.

use serde::{Deserialize, Serialize};

/// The signed-in user: name and roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "utoipa", schema(example = json!({"username": "alice", "roles": ["viewer", "operator"]})))]
pub struct PrincipalView {
    /// User name.
    pub username: String,
    /// Roles (`viewer`, `operator`, `approver`, `auditor`, `admin`).
    pub roles: Vec<String>,
}

impl PrincipalView {
    /// Whether the user holds `role`. Only for showing or hiding controls: the server checks
    /// every call itself.
    pub fn has(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

/// A user as the console shows it (never the hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct UserView {
    /// Login name.
    pub username: String,
    /// Roles, sorted.
    pub roles: Vec<String>,
    /// Disabled users cannot sign in.
    pub disabled: bool,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// The last successful sign-in, epoch ms UTC; absent: never.
    pub last_sign_in_at: Option<i64>,
}
