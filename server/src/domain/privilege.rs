//! The two-person rule on privilege (issue 36, "No one moves money alone"): which console
//! changes give power, and so wait for a second admin, and which remove it and stay one step.
//!
//! A change that gives power — a user created with operator, approver or admin; any of those
//! roles granted; a disabled user enabled; a merchant API key issued; a merchant unfrozen — is
//! a request another admin approves with step-up; so is resetting the password of someone
//! else who holds a privileged role (whoever picks it could sign in as them). A change that
//! takes power away (a
//! viewer/auditor-only user, a user disabled, roles removed, a key revoked, a merchant frozen)
//! stays one step. The command line on the machine (`converge user add`, the bootstrap) is
//! not subject to the rule. Requests live like maker-checker actions ([`ActionMoveKind`]).
//!
//! [`ActionMoveKind`]: super::actions::ActionMoveKind

use std::collections::BTreeSet;
use std::str::FromStr;

use super::roles::Role;

/// Default of `--approval-conflict-window-secs`: 30 days.
pub const DEFAULT_CONFLICT_WINDOW_SECS: u64 = 30 * 86_400;

/// A change that gives power.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrivilegeKind {
    /// A console user created with a privileged role.
    AddUser,
    /// A privileged role granted to an existing user (the whole new role set is applied).
    SetRoles,
    /// A disabled user enabled again.
    EnableUser,
    /// The password of a user holding a privileged role reset by someone else: whoever
    /// chooses it could sign in as that user.
    ResetPassword,
    /// Another API key issued to a merchant.
    IssueKey,
    /// A frozen merchant unfrozen.
    UnfreezeMerchant,
    /// A user's first passkey, registered with the password alone while approvals require
    /// passkeys, confirmed: until then it proves nothing the password did not.
    ConfirmPasskey,
    /// A merchant put on its own PSP account (issue 38): its new payments' money goes where
    /// the account says, so one admin alone may not choose it.
    SetConnector,
}

impl PrivilegeKind {
    /// Every kind.
    pub const ALL: [PrivilegeKind; 8] = [
        PrivilegeKind::AddUser,
        PrivilegeKind::SetRoles,
        PrivilegeKind::EnableUser,
        PrivilegeKind::ResetPassword,
        PrivilegeKind::IssueKey,
        PrivilegeKind::UnfreezeMerchant,
        PrivilegeKind::ConfirmPasskey,
        PrivilegeKind::SetConnector,
    ];

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            PrivilegeKind::AddUser => "add_user",
            PrivilegeKind::SetRoles => "set_roles",
            PrivilegeKind::EnableUser => "enable_user",
            PrivilegeKind::ResetPassword => "reset_password",
            PrivilegeKind::IssueKey => "issue_key",
            PrivilegeKind::UnfreezeMerchant => "unfreeze_merchant",
            PrivilegeKind::ConfirmPasskey => "confirm_passkey",
            PrivilegeKind::SetConnector => "set_connector",
        }
    }

    /// Whether it hands a console user power (else it is about a merchant, or, for a
    /// passkey's confirmation, about a proof the user already has the role for): these are
    /// the grants the approval-conflict rule looks at.
    pub fn targets_user(self) -> bool {
        matches!(
            self,
            PrivilegeKind::AddUser
                | PrivilegeKind::SetRoles
                | PrivilegeKind::EnableUser
                | PrivilegeKind::ResetPassword
        )
    }

    /// The stored names of the kinds that give a user power (what the approval-conflict
    /// rule counts as a grant).
    pub fn grant_kinds() -> Vec<&'static str> {
        Self::ALL
            .into_iter()
            .filter(|k| k.targets_user())
            .map(PrivilegeKind::as_str)
            .collect()
    }

    /// What the request asks, in words, for its audit record and the approvals page.
    pub fn describe(self, target: &str, roles: &str) -> String {
        match self {
            PrivilegeKind::AddUser => format!("add user {target} with roles {roles}"),
            PrivilegeKind::SetRoles => format!("set the roles of {target} to {roles}"),
            PrivilegeKind::EnableUser => format!("enable user {target}"),
            PrivilegeKind::ResetPassword => format!("reset the password of {target}"),
            PrivilegeKind::IssueKey => format!("issue an API key to merchant {target}"),
            PrivilegeKind::UnfreezeMerchant => format!("unfreeze merchant {target}"),
            PrivilegeKind::ConfirmPasskey => format!(
                "confirm the first passkey of {target}, registered with the password alone while approvals require passkeys"
            ),
            PrivilegeKind::SetConnector => format!("put merchant {target} on {roles}"),
        }
    }
}

impl FromStr for PrivilegeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown privilege request kind {s:?}"))
    }
}

/// The roles that let a person move money or hand out power: operator (requests),
/// approver (approves) and admin (manages users and keys).
pub fn is_privileged(role: Role) -> bool {
    matches!(role, Role::Operator | Role::Approver | Role::Admin)
}

/// Whether resetting the password of a user holding `roles` needs a second admin: when the
/// user holds a privileged role and is not the one resetting it.
pub fn reset_needs_approval(roles: &BTreeSet<Role>, own: bool) -> bool {
    !own && creation_needs_approval(roles)
}

/// Whether a user created with `roles` needs a second admin: any privileged role.
pub fn creation_needs_approval(roles: &BTreeSet<Role>) -> bool {
    roles.iter().any(|r| is_privileged(*r))
}

/// Whether replacing `before` with `after` grants a privileged role the user does not hold:
/// then the change needs a second admin; removing roles, or adding viewer or auditor, does not.
pub fn grant_needs_approval(before: &BTreeSet<Role>, after: &BTreeSet<Role>) -> bool {
    after
        .iter()
        .any(|r| is_privileged(*r) && !before.contains(r))
}

/// Whether approver `approver` is barred from approving a money action requested by a user
/// who received power through `grants` (each: who requested it, who approved it, and when it
/// ran, epoch ms UTC) at or after `since`. A grant counts for both people who made it.
pub fn approval_conflict<'a>(
    approver: &str,
    grants: impl IntoIterator<Item = (&'a str, Option<&'a str>, i64)>,
    since: i64,
) -> bool {
    grants.into_iter().any(|(requested_by, decided_by, at)| {
        at >= since && (requested_by == approver || decided_by == Some(approver))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::roles::parse_roles;

    #[test]
    fn every_kind_parses_back_and_only_user_kinds_are_grants() {
        for k in PrivilegeKind::ALL {
            assert_eq!(k.as_str().parse::<PrivilegeKind>(), Ok(k));
        }
        assert_eq!(
            PrivilegeKind::grant_kinds(),
            ["add_user", "set_roles", "enable_user", "reset_password"]
        );
        assert!("drop_table".parse::<PrivilegeKind>().is_err());
    }

    #[test]
    fn a_user_with_operator_approver_or_admin_needs_a_second_admin_viewer_and_auditor_do_not() {
        let r = |s| parse_roles(s).unwrap();
        assert!(!creation_needs_approval(&r("viewer,auditor")));
        for p in ["operator", "approver", "admin", "viewer,operator"] {
            assert!(creation_needs_approval(&r(p)), "{p}");
        }
    }

    #[test]
    fn resetting_someone_elses_privileged_password_needs_a_second_admin() {
        let r = |s| parse_roles(s).unwrap();
        assert!(reset_needs_approval(&r("viewer,approver"), false));
        assert!(!reset_needs_approval(&r("viewer,approver"), true));
        assert!(!reset_needs_approval(&r("viewer,auditor"), false));
    }

    #[test]
    fn only_adding_a_privileged_role_is_a_grant() {
        let r = |s| parse_roles(s).unwrap();
        assert!(grant_needs_approval(&r("viewer"), &r("viewer,operator")));
        assert!(grant_needs_approval(&r("operator"), &r("approver")));
        assert!(!grant_needs_approval(&r("viewer,operator"), &r("viewer")));
        assert!(!grant_needs_approval(&r("admin"), &r("admin,auditor")));
        assert!(!grant_needs_approval(&r("viewer"), &r("viewer,auditor")));
    }

    #[test]
    fn a_grant_bars_both_its_requester_and_its_approver_within_the_window_only() {
        let grants = [("ann", Some("bob"), 1_000)];
        assert!(approval_conflict("ann", grants, 500));
        assert!(approval_conflict("bob", grants, 1_000));
        assert!(!approval_conflict("cat", grants, 500));
        assert!(!approval_conflict("ann", grants, 1_001));
        assert!(approval_conflict("ann", [("ann", None, 10)], 0));
    }
}
