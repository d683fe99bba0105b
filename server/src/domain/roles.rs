//! Console roles and what each may do (DESIGN.md "Ops console": viewer, operator, approver,
//! auditor, admin; a user may hold several). Checked on the server for every endpoint and
//! server function; a hidden button is not a check.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// A console role.
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
    /// Every role.
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
                format!("unknown role {s:?}: use viewer, operator, approver, auditor or admin")
            })
    }
}

/// Parses `viewer,operator` into a non-empty role set. Errors name the bad role.
pub fn parse_roles(list: &str) -> Result<BTreeSet<Role>, String> {
    let roles = list
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect::<Result<BTreeSet<_>, _>>()?;
    if roles.is_empty() {
        return Err("give at least one role".into());
    }
    Ok(roles)
}

/// Formats a role set as stored (`operator,viewer`, sorted).
pub fn format_roles(roles: &BTreeSet<Role>) -> String {
    roles
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Something a console user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Dashboards, payments, error pool (read).
    View,
    /// Resolve error-pool items.
    ResolveErrors,
    /// Request query, retry, reverse or force actions.
    RequestActions,
    /// Approve or reject action requests.
    ApproveActions,
    /// Export and verify the audit log.
    Audit,
    /// Add, disable and reset users.
    ManageUsers,
}

/// Whether a user holding `roles` has `permission`.
pub fn allows(roles: &BTreeSet<Role>, permission: Permission) -> bool {
    let has = |r| roles.contains(&r);
    match permission {
        Permission::View => !roles.is_empty(),
        Permission::ResolveErrors | Permission::RequestActions => has(Role::Operator),
        Permission::ApproveActions => has(Role::Approver),
        Permission::Audit => has(Role::Auditor),
        Permission::ManageUsers => has(Role::Admin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_and_format_sorted() {
        let r = parse_roles("operator, viewer").unwrap();
        assert_eq!(format_roles(&r), "viewer,operator");
        assert!(parse_roles("root").unwrap_err().contains("root"));
        assert!(parse_roles("").is_err());
    }

    #[test]
    fn each_permission_needs_its_role() {
        let viewer = parse_roles("viewer").unwrap();
        assert!(allows(&viewer, Permission::View));
        assert!(!allows(&viewer, Permission::ResolveErrors));
        assert!(!allows(&viewer, Permission::ManageUsers));
        let op = parse_roles("operator").unwrap();
        assert!(
            allows(&op, Permission::RequestActions) && !allows(&op, Permission::ApproveActions)
        );
        assert!(allows(
            &parse_roles("approver").unwrap(),
            Permission::ApproveActions
        ));
        assert!(allows(&parse_roles("auditor").unwrap(), Permission::Audit));
        assert!(allows(
            &parse_roles("admin").unwrap(),
            Permission::ManageUsers
        ));
    }
}
