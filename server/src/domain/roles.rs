//! Console roles and what each may do (DESIGN.md "Ops console": viewer, operator, approver,
//! auditor, admin; a user may hold several). Checked on the server for every endpoint and
//! server function; a hidden button is not a check.

use std::collections::BTreeSet;

// The roles and their names are defined once in `converge-wire`, which the console shares
// (it lists them and shows controls by them); what each may do is this module's.
pub use converge_wire::Role;

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
