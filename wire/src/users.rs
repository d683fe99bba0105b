//! Console users, their roles and the signed-in user.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A console role (DESIGN.md "Ops console": viewer, operator, approver, auditor, admin; a
/// user may hold several).
///
/// Defined here, once, and re-exported by `converge_server::domain::roles` (which adds what
/// each role may do): the console lists the roles on the Users page and asks "does the
/// signed-in user hold this one" to show controls, and it cannot depend on the server crate.
/// A new role is then one variant, which every exhaustive `match` on both sides must place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads dashboards, payments and the error pool.
    Viewer,
    /// Viewer + resolves error-pool items and requests actions.
    Operator,
    /// Viewer + approves or rejects others' action requests.
    Approver,
    /// Viewer + exports and verifies the audit log.
    Auditor,
    /// Manages users.
    Admin,
}

impl Role {
    /// Every role, in the order the console lists them.
    pub const ALL: [Role; 5] = [
        Role::Viewer,
        Role::Operator,
        Role::Approver,
        Role::Auditor,
        Role::Admin,
    ];

    /// Stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Approver => "approver",
            Role::Auditor => "auditor",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s.trim())
            .ok_or_else(|| {
                let (last, rest) = Role::ALL.split_last().expect("there are roles");
                let rest: Vec<&str> = rest.iter().map(|r| r.as_str()).collect();
                format!("unknown role {s:?}: use {} or {last}", rest.join(", "))
            })
    }
}

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
    pub fn has(&self, role: Role) -> bool {
        self.roles.iter().any(|r| r == role.as_str())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_is_listed_and_its_name_parses_back() {
        for r in Role::ALL {
            // A new variant breaks this match until it is added to `ALL` as well.
            match r {
                Role::Viewer | Role::Operator | Role::Approver | Role::Auditor | Role::Admin => {}
            }
            assert_eq!(r.as_str().parse::<Role>(), Ok(r));
        }
        assert_eq!(
            "root".parse::<Role>(),
            Err(
                "unknown role \"root\": use viewer, operator, approver, auditor or admin"
                    .to_string()
            )
        );
    }
}
