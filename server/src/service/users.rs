//! Managing console users (DESIGN.md "Ops console": no default account;
//! `converge user add NAME --role R[,R] --password-stdin`; an admin page to add, disable and
//! reset). Disabling a user or resetting its password ends its sessions.
//!
//! These are the use cases behind both console adapters (the `/ops/v1/users` handlers and
//! the console's server functions) and the `converge user` command: every rule about users,
//! including what an admin may not do to their own account, is here and only here. The
//! adapters check the permission, call, and map [`UserError`] to their answer.
//!
//! The functions here apply a change at once: the command line on the machine (the
//! bootstrap) and the execution of an approved privilege request call them. The console's
//! adapters go through [`crate::service::privilege`], which turns a change that gives power
//! into a request another admin approves (issue 36).

use super::Core;
use super::actor::Actor;
use super::password::{PasswordHasherPool, check_new_password};
use crate::domain::roles::{Role, format_roles, parse_roles};
use crate::store::StoreError;

/// Why a user change was refused.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    /// Bad name, roles or password; the message says which.
    #[error("{0}")]
    Invalid(String),
    /// The name is taken.
    #[error("a user named {0:?} already exists")]
    Exists(String),
    /// No such user.
    #[error("no user named {0:?}")]
    NotFound(String),
    /// The actor asked to disable their own account, which would end their own session and
    /// could leave nobody able to enable it again.
    #[error("you cannot disable yourself")]
    DisableSelf,
    /// The actor asked to take away their own admin role, which could leave nobody able to
    /// give it back.
    #[error("you cannot remove your own admin role")]
    DropOwnAdmin,
    /// The change would leave no enabled admin (the last admin disabled or demoted, even by
    /// two concurrent requests; enforced in the store's statement).
    #[error("this is the last enabled admin: add or enable another admin first")]
    LastAdmin,
    /// Storage failed.
    #[error(transparent)]
    Store(StoreError),
}

/// A store error of a user update: the last-admin refusal becomes [`UserError::LastAdmin`].
fn store_error(e: StoreError) -> UserError {
    match e {
        StoreError::Conflict(m) if m == crate::store::LAST_ADMIN => UserError::LastAdmin,
        e => UserError::Store(e),
    }
}

pub use converge_wire::UserView;

impl From<&crate::store::User> for UserView {
    fn from(u: &crate::store::User) -> Self {
        UserView {
            username: u.username.clone(),
            roles: u
                .roles
                .split(',')
                .filter(|r| !r.is_empty())
                .map(str::to_string)
                .collect(),
            disabled: u.disabled,
            created_at: u.created_at,
            last_sign_in_at: u.last_sign_in_at,
        }
    }
}

impl Core {
    /// Every user, as the console lists them.
    pub async fn list_users(&self) -> Result<Vec<UserView>, UserError> {
        let store = self.store.as_ref();
        Ok(store
            .users()
            .await
            .map_err(UserError::Store)?
            .iter()
            .map(UserView::from)
            .collect())
    }
}

/// Names no console user may take: the audit log's actors for converge itself and for a
/// failed sign-in ([`super::sign_in::ANONYMOUS`]), so no person can pose as either.
const RESERVED_NAMES: [&str; 2] = ["system", super::sign_in::ANONYMOUS];

/// Checks a username: 1 to 64 of `a-z A-Z 0-9 . _ - @`, and none of the reserved names.
pub fn check_username(name: &str) -> Result<(), UserError> {
    if RESERVED_NAMES.iter().any(|r| name.eq_ignore_ascii_case(r)) {
        return Err(UserError::Invalid(format!("username {name:?} is reserved")));
    }
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if ok {
        Ok(())
    } else {
        Err(UserError::Invalid(
            "username must be 1 to 64 of a-z A-Z 0-9 . _ - @".into(),
        ))
    }
}

impl Core {
    /// Adds a user with `roles` (`viewer,operator`) and `password`; audited `user_added` by
    /// `actor` in the same transaction. Spaces around `username` are dropped.
    pub async fn add_user(
        &self,
        hasher: &PasswordHasherPool,
        username: &str,
        roles: &str,
        password: &str,
        now: i64,
        actor: &Actor,
    ) -> Result<UserView, UserError> {
        let username = username.trim();
        check_username(username)?;
        let roles = parse_roles(roles).map_err(UserError::Invalid)?;
        check_new_password(password).map_err(UserError::Invalid)?;
        let hash = hasher
            .hash(password)
            .await
            .map_err(|e| UserError::Invalid(format!("cannot hash password: {e}")))?;
        self.add_user_hashed(username, &hash, &format_roles(&roles), now, actor)
            .await
    }

    /// Adds a user whose password was already hashed (an approved privilege request carries only
    /// the hash), with `roles` as stored; audited `user_added` by `actor` in the same
    /// transaction. Errors: [`UserError::Exists`].
    pub async fn add_user_hashed(
        &self,
        username: &str,
        hash: &str,
        roles: &str,
        now: i64,
        actor: &Actor,
    ) -> Result<UserView, UserError> {
        let store = self.store.as_ref();
        let audit = actor.entry(
            now,
            "user_added",
            &format!("user:{username}"),
            "",
            String::new(),
            serde_json::json!({"roles": roles}).to_string(),
        );
        match store.create_user(username, hash, roles, now, &audit).await {
            Ok(u) => Ok(UserView::from(&u)),
            Err(StoreError::Conflict(_)) => Err(UserError::Exists(username.into())),
            Err(e) => Err(UserError::Store(e)),
        }
    }

    /// Disables (or re-enables) a user; disabling ends its sessions. Audited `user_disabled` /
    /// `user_enabled` by `actor` in the same transaction. Nobody disables themselves
    /// ([`UserError::DisableSelf`]).
    pub async fn set_user_disabled(
        &self,
        username: &str,
        disabled: bool,
        now: i64,
        actor: &Actor,
    ) -> Result<(), UserError> {
        let store = self.store.as_ref();
        if disabled && actor.username == username {
            return Err(UserError::DisableSelf);
        }
        let audit = actor.entry(
            now,
            if disabled {
                "user_disabled"
            } else {
                "user_enabled"
            },
            &format!("user:{username}"),
            "",
            String::new(),
            "{}".into(),
        );
        match store
            .set_user_disabled(username, disabled, now, &audit)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(UserError::NotFound(username.into())),
            Err(e) => Err(store_error(e)),
        }
    }

    /// Resets a user's password; its sessions end. Audited `user_password_reset` by `actor` in
    /// the same transaction.
    pub async fn reset_password(
        &self,
        hasher: &PasswordHasherPool,
        username: &str,
        password: &str,
        now: i64,
        actor: &Actor,
    ) -> Result<(), UserError> {
        check_new_password(password).map_err(UserError::Invalid)?;
        let hash = hasher
            .hash(password)
            .await
            .map_err(|e| UserError::Invalid(format!("cannot hash password: {e}")))?;
        self.reset_password_hashed(username, &hash, now, actor)
            .await
    }

    /// Sets a user's password to one already hashed (an approved privilege request carries only
    /// the hash); its sessions end. Audited `user_password_reset` by `actor` in the same
    /// transaction. Errors: [`UserError::NotFound`].
    pub async fn reset_password_hashed(
        &self,
        username: &str,
        hash: &str,
        now: i64,
        actor: &Actor,
    ) -> Result<(), UserError> {
        let store = self.store.as_ref();
        let audit = actor.entry(
            now,
            "user_password_reset",
            &format!("user:{username}"),
            "",
            String::new(),
            "{}".into(),
        );
        match store.set_user_password(username, hash, now, &audit).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(UserError::NotFound(username.into())),
            Err(e) => Err(UserError::Store(e)),
        }
    }

    /// Replaces a user's roles; the user's open sessions get them at their next request. Audited
    /// `user_roles_changed` by `actor` in the same transaction. An admin keeps their own admin
    /// role ([`UserError::DropOwnAdmin`]).
    pub async fn set_roles(
        &self,
        username: &str,
        roles: &str,
        now: i64,
        actor: &Actor,
    ) -> Result<UserView, UserError> {
        let store = self.store.as_ref();
        let parsed = parse_roles(roles).map_err(UserError::Invalid)?;
        if actor.username == username && !parsed.contains(&Role::Admin) {
            return Err(UserError::DropOwnAdmin);
        }
        let roles = format_roles(&parsed);
        let audit = actor.entry(
            now,
            "user_roles_changed",
            &format!("user:{username}"),
            "",
            String::new(),
            serde_json::json!({"roles": roles}).to_string(),
        );
        match store.set_user_roles(username, &roles, now, &audit).await {
            Ok(true) => {}
            Ok(false) => return Err(UserError::NotFound(username.into())),
            Err(e) => return Err(store_error(e)),
        }
        let user = store
            .user_by_name(username)
            .await
            .map_err(UserError::Store)?
            .ok_or_else(|| UserError::NotFound(username.into()))?;
        Ok(UserView::from(&user))
    }
}
