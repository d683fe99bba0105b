//! The two-person rule on privilege (issue 36, "No one moves money alone"): the console's
//! user and merchant changes that give power become requests another admin approves with
//! step-up ([`crate::domain::privilege`] says which), audited like money actions
//! (`privilege_requested`, `privilege_approved`, `privilege_rejected`, `privilege_executed`,
//! ... with actor and reason), expiring like them, executed exactly once: only one decision
//! can move a request from `pending` to `approved` (a conditional update in the store), and
//! only the approver whose move won runs it.
//!
//! The changes that take power away (a viewer/auditor-only user, disabling a user, removing
//! roles, revoking a key, freezing a merchant) stay one step. The command line on the machine
//! calls [`super::users`] and [`super::merchants`] directly: the bootstrap is not subject to
//! the rule.

use converge_wire::ErrorCode;
use serde_json::json;

use super::Core;
use super::actions::ActionError;
use super::actor::Actor;
use super::merchants::MerchantError;
use super::password::{PasswordHasherPool, check_new_password};
use super::users::{self, UserError, UserView};
use crate::domain::actions::{ActionMoveKind, ActionStatus, check_reason};
use crate::domain::privilege::{
    PrivilegeKind, approval_conflict, creation_needs_approval, grant_needs_approval,
    reset_needs_approval,
};
use crate::domain::roles::{format_roles, parse_roles};
use crate::store::{ActionMove, Merchant, NewPrivilegeRequest, PrivilegeRequest, StoreError};

pub use converge_wire::governance::{PrivilegeApproved, PrivilegeInbox};

/// What a console change came to: applied at once (`Done`), or a request waiting for another
/// admin (`Requested`); the wire shape the console reads as is.
pub use converge_wire::governance::ConsoleChange as Change;

/// Why a console change, or a decision on a privilege request, was refused.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// The user change itself is refused (bad name, roles or password; no such user; the
    /// last admin).
    #[error(transparent)]
    User(#[from] UserError),
    /// The merchant change itself is refused (no such merchant).
    #[error(transparent)]
    Merchant(#[from] MerchantError),
    /// The request is refused (409 `privilege_pending`, 403 `self_approval`, 409
    /// `not_pending`, `expired`, 404).
    #[error(transparent)]
    Request(#[from] ActionError),
}

impl From<StoreError> for PrivilegeError {
    fn from(e: StoreError) -> Self {
        PrivilegeError::Request(ActionError::Store(e))
    }
}

fn audit_of(to: ActionStatus) -> String {
    format!("privilege_{}", to.as_str())
}

fn request_json(r: &PrivilegeRequest) -> String {
    serde_json::to_string(r).unwrap_or_default()
}

impl Core {
    /// Records a pending privilege request of `kind` for `target` (roles for the user kinds
    /// that carry them; the new user's password hash for `add_user`), audited
    /// `privilege_requested` by `actor` in the same transaction. Errors: 409
    /// `privilege_pending` when the same change for the same target is already pending.
    async fn request_privilege(
        &self,
        actor: &Actor,
        kind: PrivilegeKind,
        target: &str,
        roles: &str,
        password_hash: String,
    ) -> Result<PrivilegeRequest, PrivilegeError> {
        let now = self.clock.now_ms();
        let reason = kind.describe(target, roles);
        let new = NewPrivilegeRequest {
            id: super::ids::new_id("prv"),
            kind: kind.as_str().into(),
            target: target.into(),
            roles: roles.into(),
            password_hash,
            requested_by: actor.username.clone(),
            reason: reason.clone(),
            now,
            expires_at: now + self.console.action_ttl_ms,
        };
        let audit = actor.entry(
            now,
            "privilege_requested",
            &format!("privilege:{}", new.id),
            &reason,
            String::new(),
            json!({"request": new.id, "kind": new.kind, "target": target, "roles": roles})
                .to_string(),
        );
        self.store
            .create_privilege_request(&new, &audit)
            .await?
            .ok_or_else(|| {
                ActionError::Conflict(
                    ErrorCode::PrivilegePending,
                    format!("the same change for {target} already waits for an admin"),
                )
                .into()
            })
    }

    /// The console's "add user": a viewer/auditor-only user is added at once
    /// ([`Self::add_user`]); one with operator, approver or admin becomes a request
    /// (its password is checked and hashed now, and kept only as the hash until the
    /// request is decided). Errors: [`UserError`]'s; `privilege_pending`.
    #[allow(clippy::too_many_arguments)]
    pub async fn console_add_user(
        &self,
        actor: &Actor,
        hasher: &PasswordHasherPool,
        username: &str,
        roles: &str,
        password: &str,
    ) -> Result<Change<UserView>, PrivilegeError> {
        let parsed = parse_roles(roles).map_err(UserError::Invalid)?;
        if !creation_needs_approval(&parsed) {
            let now = self.clock.now_ms();
            let u = self
                .add_user(hasher, username, roles, password, now, actor)
                .await?;
            return Ok(Change::Done(u));
        }
        let username = username.trim();
        users::check_username(username)?;
        check_new_password(password).map_err(UserError::Invalid)?;
        if self.store.user_by_name(username).await?.is_some() {
            return Err(UserError::Exists(username.into()).into());
        }
        let hash = hasher
            .hash(password)
            .await
            .map_err(|e| UserError::Invalid(format!("cannot hash password: {e}")))?;
        let r = self
            .request_privilege(
                actor,
                PrivilegeKind::AddUser,
                username,
                &format_roles(&parsed),
                hash,
            )
            .await?;
        Ok(Change::Requested(r))
    }

    /// The console's "set roles": a change that grants no privileged role the user lacks is
    /// applied at once ([`Self::set_roles`]; the last admin stays, [`UserError::LastAdmin`]);
    /// one that grants operator, approver or admin becomes a request for the whole new set.
    pub async fn console_set_roles(
        &self,
        actor: &Actor,
        username: &str,
        roles: &str,
    ) -> Result<Change<UserView>, PrivilegeError> {
        let parsed = parse_roles(roles).map_err(UserError::Invalid)?;
        let user = self
            .store
            .user_by_name(username)
            .await?
            .ok_or_else(|| UserError::NotFound(username.into()))?;
        let before = parse_roles(&user.roles).unwrap_or_default();
        if !grant_needs_approval(&before, &parsed) {
            let now = self.clock.now_ms();
            let u = self.set_roles(username, roles, now, actor).await?;
            return Ok(Change::Done(u));
        }
        let r = self
            .request_privilege(
                actor,
                PrivilegeKind::SetRoles,
                username,
                &format_roles(&parsed),
                String::new(),
            )
            .await?;
        Ok(Change::Requested(r))
    }

    /// The console's "reset password": one's own, or that of a user without operator,
    /// approver or admin, is reset at once ([`Self::reset_password`]); someone else's who
    /// holds one of those becomes a request (the new password kept only as its hash).
    pub async fn console_reset_password(
        &self,
        actor: &Actor,
        hasher: &PasswordHasherPool,
        username: &str,
        password: &str,
    ) -> Result<Change<()>, PrivilegeError> {
        let user = self
            .store
            .user_by_name(username)
            .await?
            .ok_or_else(|| UserError::NotFound(username.into()))?;
        let roles = parse_roles(&user.roles).unwrap_or_default();
        if !reset_needs_approval(&roles, actor.username == username) {
            let now = self.clock.now_ms();
            self.reset_password(hasher, username, password, now, actor)
                .await?;
            return Ok(Change::Done(()));
        }
        check_new_password(password).map_err(UserError::Invalid)?;
        let hash = hasher
            .hash(password)
            .await
            .map_err(|e| UserError::Invalid(format!("cannot hash password: {e}")))?;
        let r = self
            .request_privilege(actor, PrivilegeKind::ResetPassword, username, "", hash)
            .await?;
        Ok(Change::Requested(r))
    }

    /// The console's "enable user": a disabled user is enabled only through a request; an
    /// enabled one is left as it is (nothing to give, nothing written).
    pub async fn console_enable_user(
        &self,
        actor: &Actor,
        username: &str,
    ) -> Result<Change<()>, PrivilegeError> {
        let user = self
            .store
            .user_by_name(username)
            .await?
            .ok_or_else(|| UserError::NotFound(username.into()))?;
        if !user.disabled {
            return Ok(Change::Done(()));
        }
        let r = self
            .request_privilege(
                actor,
                PrivilegeKind::EnableUser,
                username,
                "",
                String::new(),
            )
            .await?;
        Ok(Change::Requested(r))
    }

    /// The console's connector choice for merchant `merchant` (issue 38): back to the default
    /// connector at once (it sends the merchant's money nowhere new), or its own Stripe
    /// account as a request another admin approves, the account sealed in the request until
    /// then ([`Purpose::ConnectorSecret`](crate::domain::secret_box::Purpose::ConnectorSecret))
    /// and shown only by its API base and key hint. Errors: [`MerchantError::NoMerchant`],
    /// [`MerchantError::InvalidConnector`]; `privilege_pending`.
    pub async fn console_set_merchant_connector(
        &self,
        actor: &Actor,
        merchant: &str,
        choice: &super::merchant_connectors::ConnectorChoice,
        reason: &str,
    ) -> Result<Change<()>, PrivilegeError> {
        use super::merchant_connectors::{ConnectorChoice, check_choice};
        self.merchant_named(merchant).await?;
        let shown = check_choice(choice)?;
        self.check_replacement(merchant, choice).await?;
        if *choice == ConnectorChoice::Default {
            let now = self.clock.now_ms();
            self.set_merchant_connector(now, merchant, choice, reason, actor)
                .await?;
            return Ok(Change::Done(()));
        }
        // Strings and an option only: serialising cannot fail.
        let json = serde_json::to_string(choice).unwrap_or_default();
        let sealed = self
            .secrets
            .seal_text(crate::domain::secret_box::Purpose::ConnectorSecret, &json);
        let r = self
            .request_privilege(actor, PrivilegeKind::SetConnector, merchant, &shown, sealed)
            .await?;
        Ok(Change::Requested(r))
    }

    /// The console's "issue a key": always a request; the key is made when another admin
    /// approves, and shown once to that admin ([`PrivilegeApproved::api_key`]).
    /// Errors: [`MerchantError::NoMerchant`]; `privilege_pending`.
    pub async fn console_issue_key(
        &self,
        actor: &Actor,
        merchant: &str,
    ) -> Result<PrivilegeRequest, PrivilegeError> {
        self.merchant_named(merchant).await?;
        self.request_privilege(actor, PrivilegeKind::IssueKey, merchant, "", String::new())
            .await
    }

    /// Files the `confirm_passkey` request for `who`'s first passkey, registered with the
    /// password alone while approvals require passkeys (issue 36). One already waiting covers
    /// it too when it was filed after this passkey; otherwise the passkey stays unconfirmed
    /// until the user removes it or registers again once that request is decided.
    pub(super) async fn ask_to_confirm_passkey(&self, who: &Actor) -> Result<(), StoreError> {
        match self
            .request_privilege(
                who,
                PrivilegeKind::ConfirmPasskey,
                &who.username,
                "",
                String::new(),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(PrivilegeError::Request(ActionError::Conflict(..))) => Ok(()),
            Err(PrivilegeError::Request(ActionError::Store(e))) => Err(e),
            Err(e) => Err(StoreError::Corrupt(format!("confirm_passkey request: {e}"))),
        }
    }

    /// The console's "add a merchant": the merchant at once, with no key
    /// ([`Self::add_merchant_keyless`]), and its first key as the request
    /// [`Self::console_issue_key`] files, so a lone admin never holds a key that moves money
    /// (issue 36). Should filing the request fail (the database went away in between), the
    /// merchant stays keyless and "Request a new key" files it. Errors: [`MerchantError`]
    /// (400 name, 409 exists); a store error.
    pub async fn console_add_merchant(
        &self,
        actor: &Actor,
        name: &str,
    ) -> Result<(Merchant, PrivilegeRequest), PrivilegeError> {
        let m = self
            .add_merchant_keyless(self.clock.now_ms(), name, actor)
            .await?;
        let r = self
            .request_privilege(actor, PrivilegeKind::IssueKey, &m.name, "", String::new())
            .await?;
        Ok((m, r))
    }

    /// The console's "freeze"/"unfreeze": freezing is one step
    /// ([`Self::set_merchant_frozen`]); unfreezing a frozen merchant is a request (an
    /// unfrozen one is left as it is).
    pub async fn console_set_frozen(
        &self,
        actor: &Actor,
        merchant: &str,
        frozen: bool,
        reason: &str,
    ) -> Result<Change<()>, PrivilegeError> {
        let m = self.merchant_named(merchant).await?;
        if frozen {
            // Freezing stops a merchant's business at once: the admin says why, for the record
            // (issue 41), as a money action's requester does.
            crate::domain::actions::check_reason(reason)
                .map_err(|why| ActionError::Invalid(ErrorCode::InvalidReason, why))?;
            let now = self.clock.now_ms();
            self.set_merchant_frozen(now, merchant, true, reason, actor)
                .await?;
            return Ok(Change::Done(()));
        }
        if !m.frozen {
            return Ok(Change::Done(()));
        }
        let r = self
            .request_privilege(
                actor,
                PrivilegeKind::UnfreezeMerchant,
                merchant,
                "",
                String::new(),
            )
            .await?;
        Ok(Change::Requested(r))
    }

    /// Applies an approved `set_connector` request: its sealed account opened and set, audited
    /// by the approver. Errors: what the merchant change refused, in words.
    async fn approved_connector(
        &self,
        actor: &Actor,
        r: &PrivilegeRequest,
        now: i64,
    ) -> Result<serde_json::Value, String> {
        let sealed = match self.store.privilege_password_hash(&r.id).await {
            Ok(Some(s)) if !s.is_empty() => s,
            Ok(_) => return Err("the request carries no account".into()),
            Err(e) => return Err(e.to_string()),
        };
        let json = self
            .secrets
            .open_text(crate::domain::secret_box::Purpose::ConnectorSecret, &sealed)
            .map_err(|e| e.to_string())?;
        let choice: super::merchant_connectors::ConnectorChoice =
            serde_json::from_str(&json).map_err(|e| e.to_string())?;
        let reason = format!("approved request {}", r.id);
        self.set_merchant_connector(now, &r.target, &choice, &reason, actor)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({"merchant": r.target, "connector": r.roles}))
    }

    async fn merchant_named(&self, name: &str) -> Result<Merchant, PrivilegeError> {
        self.store
            .merchants()
            .await?
            .into_iter()
            .find(|m| m.name == name)
            .ok_or_else(|| MerchantError::NoMerchant(name.into()).into())
    }

    /// The privilege requests waiting for an admin (at most 200), and the `recent` latest
    /// decided ones, newest first.
    pub async fn privilege_inbox(&self, recent: i64) -> Result<PrivilegeInbox, StoreError> {
        Ok(PrivilegeInbox {
            now: self.clock.now_ms(),
            pending: self.store.privilege_requests(true, 200).await?,
            decided: self.store.privilege_requests(false, recent).await?,
        })
    }

    /// Whether `approver` may not approve a money action requested by `requester`: within
    /// the approval-conflict window (`--approval-conflict-window-secs`), `approver` created
    /// `requester`'s account or asked for or approved a grant of power to them.
    pub async fn approval_conflict(
        &self,
        approver: &str,
        requester: &str,
    ) -> Result<bool, StoreError> {
        let since = self.clock.now_ms() - self.timings.approval_conflict_window_ms;
        let grants = self
            .store
            .grants_to(requester, &PrivilegeKind::grant_kinds(), since)
            .await?;
        Ok(approval_conflict(
            approver,
            grants
                .iter()
                .map(|g| (g.requested_by.as_str(), g.decided_by.as_deref(), g.at)),
            since,
        ))
    }

    /// 403 `approval_conflict` when `actor` may not approve a money action `requester` asked
    /// for ([`Self::approval_conflict`]). Not a password oracle: it is decided before, and
    /// without, the approver's password.
    pub async fn refuse_approval_conflict(
        &self,
        actor: &Actor,
        requester: &str,
    ) -> Result<(), ActionError> {
        if self.approval_conflict(&actor.username, requester).await? {
            return Err(ActionError::Forbidden(
                ErrorCode::ApprovalConflict,
                format!(
                    "you created {requester}'s account or gave them power recently: another approver must decide"
                ),
            ));
        }
        Ok(())
    }

    /// Whether `actor` could approve privilege request `id` now, read before the password is
    /// checked: it exists, is pending and unexpired, someone else asked for it, and it does
    /// not give `actor` power. An expired one is closed as such on the way.
    pub async fn privilege_approvable(&self, actor: &Actor, id: &str) -> Result<bool, ActionError> {
        let Some(r) = self.store.privilege_request(id).await? else {
            return Ok(false);
        };
        if Self::own_privilege(actor, &r) || r.status != ActionStatus::Pending {
            return Ok(false);
        }
        if r.expires_at <= self.clock.now_ms() {
            self.close_privilege(
                actor,
                &r,
                ActionMoveKind::Expire,
                "expired before a decision",
            )
            .await?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether `r` is `actor`'s own (asked for by them, or giving them power).
    fn own_privilege(actor: &Actor, r: &PrivilegeRequest) -> bool {
        let kind = r.kind.parse::<PrivilegeKind>();
        r.requested_by == actor.username
            || (kind.is_ok_and(PrivilegeKind::targets_user) && r.target == actor.username)
    }

    async fn pending_privilege(
        &self,
        actor: &Actor,
        id: &str,
    ) -> Result<PrivilegeRequest, ActionError> {
        let r = self
            .store
            .privilege_request(id)
            .await?
            .ok_or(ActionError::NotFound("privilege request"))?;
        if Self::own_privilege(actor, &r) {
            return Err(ActionError::Forbidden(
                ErrorCode::SelfApproval,
                "a privilege request must be decided by another admin".into(),
            ));
        }
        if r.status != ActionStatus::Pending {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                format!("this request is {}", r.status),
            ));
        }
        if r.expires_at <= self.clock.now_ms() {
            self.close_privilege(
                actor,
                &r,
                ActionMoveKind::Expire,
                "expired before a decision",
            )
            .await?;
            return Err(ActionError::Conflict(
                ErrorCode::Expired,
                "this request expired; request again".into(),
            ));
        }
        Ok(r)
    }

    /// Approves pending privilege request `id` as `actor` (an admin other than its requester
    /// and its target; the caller has checked the role and, through
    /// [`Self::approve_privilege_with_step_up`](crate::service::step_up), the password) and
    /// runs it once. Errors: 404; 403 `self_approval`; 409 `not_pending`, `expired`.
    pub async fn approve_privilege(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
    ) -> Result<PrivilegeApproved, ActionError> {
        check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        let r = self.pending_privilege(actor, id).await?;
        let now = self.clock.now_ms();
        let m = ActionMove {
            decision: Some((actor.username.clone(), reason.trim().into())),
            not_by_requester: Some(actor.username.clone()),
            unexpired_at: Some(now),
            ..ActionMove::of(ActionMoveKind::Approve, &r.id, now)
        };
        let audit = actor.entry(
            now,
            &audit_of(m.to),
            &format!("privilege:{}", r.id),
            reason.trim(),
            request_json(&r),
            String::new(),
        );
        if !self.store.move_privilege_request(&m, &audit).await? {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                "this request was already decided".into(),
            ));
        }
        // Only the decision that won the conditional move gets here: the change runs once.
        let (outcome, api_key) = self.run_privilege(actor, &r).await;
        let (step, result) = match outcome {
            Ok(v) => (ActionMoveKind::Execute, v),
            Err(why) => (ActionMoveKind::Fail, json!({"error": why})),
        };
        let now = self.clock.now_ms();
        let m = ActionMove {
            result: Some(result.to_string()),
            ..ActionMove::of(step, &r.id, now)
        };
        let audit = actor.entry(
            now,
            &audit_of(m.to),
            &format!("privilege:{}", r.id),
            &r.reason,
            String::new(),
            result.to_string(),
        );
        self.store.move_privilege_request(&m, &audit).await?;
        let request = self.store.privilege_request(id).await?.unwrap_or(r);
        Ok(PrivilegeApproved { request, api_key })
    }

    /// Applies request `r`'s change as `actor` (each change audited by its own record, as a
    /// one-step change would be). Returns the result to record, or why it failed, and for
    /// an issued key the key itself (never recorded).
    async fn run_privilege(
        &self,
        actor: &Actor,
        r: &PrivilegeRequest,
    ) -> (Result<serde_json::Value, String>, Option<String>) {
        let store = self.store.as_ref();
        let now = self.clock.now_ms();
        let kind = match r.kind.parse::<PrivilegeKind>() {
            Ok(k) => k,
            Err(e) => return (Err(e), None),
        };
        let done = match kind {
            PrivilegeKind::AddUser => match store.privilege_password_hash(&r.id).await {
                Ok(Some(hash)) if !hash.is_empty() => self
                    .add_user_hashed(&r.target, &hash, &r.roles, now, actor)
                    .await
                    .map(|u| json!({"user": u.username, "roles": u.roles}))
                    .map_err(|e| e.to_string()),
                Ok(_) => Err("the request carries no password".into()),
                Err(e) => Err(e.to_string()),
            },
            PrivilegeKind::ResetPassword => match store.privilege_password_hash(&r.id).await {
                Ok(Some(hash)) if !hash.is_empty() => self
                    .reset_password_hashed(&r.target, &hash, now, actor)
                    .await
                    .map(|()| json!({"user": r.target, "password_reset": true}))
                    .map_err(|e| e.to_string()),
                Ok(_) => Err("the request carries no password".into()),
                Err(e) => Err(e.to_string()),
            },
            PrivilegeKind::SetRoles => self
                .set_roles(&r.target, &r.roles, now, actor)
                .await
                .map(|u| json!({"user": u.username, "roles": u.roles}))
                .map_err(|e| e.to_string()),
            PrivilegeKind::EnableUser => self
                .set_user_disabled(&r.target, false, now, actor)
                .await
                .map(|()| json!({"user": r.target, "disabled": false}))
                .map_err(|e| e.to_string()),
            PrivilegeKind::IssueKey => {
                return match self.issue_merchant_key(now, &r.target, actor).await {
                    Ok((key, issued)) => (
                        Ok(json!({"key_id": key.id, "prefix": key.prefix})),
                        Some(issued.key),
                    ),
                    Err(e) => (Err(e.to_string()), None),
                };
            }
            PrivilegeKind::UnfreezeMerchant => self
                .set_merchant_frozen(now, &r.target, false, &r.reason, actor)
                .await
                .map(|()| json!({"merchant": r.target, "frozen": false}))
                .map_err(|e| e.to_string()),
            PrivilegeKind::SetConnector => self.approved_connector(actor, r, now).await,
            PrivilegeKind::ConfirmPasskey => {
                let audit = actor.entry(
                    now,
                    "passkey_confirmed",
                    &format!("user:{}", r.target),
                    &r.reason,
                    String::new(),
                    json!({"request": r.id}).to_string(),
                );
                store
                    .confirm_passkeys(&r.target, r.created_at, now, &audit)
                    .await
                    .map(|n| json!({"user": r.target, "passkeys_confirmed": n}))
                    .map_err(|e| e.to_string())
            }
        };
        (done, None)
    }

    /// Rejects pending privilege request `id` (another admin). Errors as
    /// [`Self::approve_privilege`]'s.
    pub async fn reject_privilege(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
    ) -> Result<PrivilegeRequest, ActionError> {
        check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        let r = self.pending_privilege(actor, id).await?;
        if !self
            .close_privilege(actor, &r, ActionMoveKind::Reject, reason)
            .await?
        {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                "this request was already decided".into(),
            ));
        }
        Ok(self.store.privilege_request(id).await?.unwrap_or(r))
    }

    /// Withdraws one's own pending privilege request. Errors: 404; 403 `not_requester`; 409
    /// `not_pending`.
    pub async fn cancel_privilege(
        &self,
        actor: &Actor,
        id: &str,
    ) -> Result<PrivilegeRequest, ActionError> {
        let r = self
            .store
            .privilege_request(id)
            .await?
            .ok_or(ActionError::NotFound("privilege request"))?;
        if r.requested_by != actor.username {
            return Err(ActionError::Forbidden(
                ErrorCode::NotRequester,
                "only the requester can cancel a request".into(),
            ));
        }
        if !self
            .close_privilege(
                actor,
                &r,
                ActionMoveKind::Cancel,
                "cancelled by the requester",
            )
            .await?
        {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                format!("this request is {}", r.status),
            ));
        }
        Ok(self.store.privilege_request(id).await?.unwrap_or(r))
    }

    async fn close_privilege(
        &self,
        actor: &Actor,
        r: &PrivilegeRequest,
        step: ActionMoveKind,
        reason: &str,
    ) -> Result<bool, ActionError> {
        let now = self.clock.now_ms();
        let m = ActionMove {
            decision: Some((actor.username.clone(), reason.trim().into())),
            ..ActionMove::of(step, &r.id, now)
        };
        let audit = actor.entry(
            now,
            &audit_of(m.to),
            &format!("privilege:{}", r.id),
            reason.trim(),
            request_json(r),
            String::new(),
        );
        Ok(self.store.move_privilege_request(&m, &audit).await?)
    }
}

impl Core {
    /// Approves (and runs) privilege request `id` as `step_up.who` after re-checking its
    /// password, by the same rule as a money action's approval
    /// ([`Core::with_step_up`](super::step_up)): one answer (`Refused`) for a wrong password,
    /// nothing to approve, one's own request or a grant to oneself, and one already decided
    /// or expired. The caller has checked the admin role.
    pub async fn approve_privilege_with_step_up(
        &self,
        step_up: super::step_up::StepUp<'_>,
        id: &str,
        reason: &str,
    ) -> Result<PrivilegeApproved, super::step_up::StepUpError> {
        self.with_step_up(
            step_up,
            reason,
            super::step_up::StepUpTarget {
                target: format!("privilege:{}", id.chars().take(64).collect::<String>()),
                refusal: "wrong password, or a privilege request this admin cannot approve",
            },
            |who| async move { self.privilege_approvable(&who, id).await },
            |who| async move {
                match self.approve_privilege(&who, id, reason).await {
                    Err(
                        ActionError::NotFound(_)
                        | ActionError::Forbidden(..)
                        | ActionError::Conflict(..),
                    ) => None,
                    other => Some(other),
                }
            },
        )
        .await
    }
}
