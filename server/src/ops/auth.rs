//! Console sign-in (DESIGN.md "Ops console": login; OWASP Authentication Cheat Sheet):
//! one answer and similar time for an unknown user, a wrong password and a disabled user;
//! attempts rate-limited per username and per client address; the session id renewed on
//! login and the session destroyed on logout.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tower_sessions::Session;

use super::password::PasswordHasherPool;
use super::session::{SessionUser, USER_KEY};
use crate::domain::ratelimit::RateLimiter;
use crate::domain::roles::{Role, parse_roles};
use crate::store::{Store, StoreError, User};

/// Why a login was refused.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Unknown user, wrong password or disabled user: deliberately one answer.
    #[error("unknown user or wrong password")]
    InvalidCredentials,
    /// Too many attempts for this user or address; retry after the given seconds.
    #[error("too many login attempts; retry in {0} s")]
    RateLimited(u64),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session could not be written.
    #[error("session error: {0}")]
    Session(String),
}

/// A signed-in user with its roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Login name.
    pub username: String,
    /// Roles held.
    pub roles: BTreeSet<Role>,
}

impl Principal {
    /// The principal of a stored user (roles that no longer parse are dropped).
    pub fn of(user: &User) -> Self {
        Principal {
            username: user.username.clone(),
            roles: parse_roles(&user.roles).unwrap_or_default(),
        }
    }
}

/// Login machinery shared by the JSON endpoints and the console's server functions.
#[derive(Debug)]
pub struct Auth {
    /// Password hashing pool.
    pub hasher: PasswordHasherPool,
    per_user: Mutex<RateLimiter>,
    per_addr: Mutex<RateLimiter>,
    /// Refused (rate-limited) sign-ins per client address: the start of the address's
    /// current window and how many refusals in it went unrecorded.
    refused: Mutex<std::collections::HashMap<String, (i64, u64)>>,
    window_ms: i64,
    /// Absolute session lifetime, ms.
    pub absolute_ms: i64,
}

impl Auth {
    /// From the settings' limits.
    pub fn new(settings: &crate::config::Settings) -> Self {
        let window = (settings.login_window_secs as i64) * 1000;
        Auth {
            hasher: PasswordHasherPool::new(settings.hash_permits),
            per_user: Mutex::new(RateLimiter::new(
                settings.login_limit_per_user.max(1),
                window,
            )),
            per_addr: Mutex::new(RateLimiter::new(
                settings.login_limit_per_addr.max(1),
                window,
            )),
            refused: Mutex::new(std::collections::HashMap::new()),
            window_ms: window.max(1),
            absolute_ms: (settings.absolute_timeout_secs as i64) * 1000,
        }
    }

    /// Whether a rate-limited sign-in from `addr` at `now` gets its own audit record: the first
    /// of each window per address does, carrying how many were refused unrecorded in the
    /// address's previous window; the rest are only counted. So a client hammering the
    /// login cannot grow the audit log by one row per attempt.
    fn record_refusal(&self, addr: &str, now: i64) -> Option<u64> {
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        if refused.len() > 10_000 {
            let cutoff = now - self.window_ms;
            refused.retain(|_, (start, _)| *start > cutoff);
        }
        match refused.get_mut(addr) {
            Some((start, count)) if now - *start < self.window_ms => {
                *count += 1;
                None
            }
            Some((start, count)) => {
                let before = *count;
                *start = now;
                *count = 0;
                Some(before)
            }
            None => {
                refused.insert(addr.to_string(), (now, 0));
                Some(0)
            }
        }
    }

    fn admit(&self, username: &str, addr: &str, now: i64) -> Result<(), LoginError> {
        let mut by_addr = self.per_addr.lock().unwrap_or_else(|p| p.into_inner());
        if !by_addr.try_acquire(addr, now) {
            return Err(LoginError::RateLimited(
                by_addr.retry_after_secs(addr, now).max(1),
            ));
        }
        drop(by_addr);
        let mut by_user = self.per_user.lock().unwrap_or_else(|p| p.into_inner());
        let key = username.to_lowercase();
        if !by_user.try_acquire(&key, now) {
            return Err(LoginError::RateLimited(
                by_user.retry_after_secs(&key, now).max(1),
            ));
        }
        Ok(())
    }

    /// Checks the credentials and, on success, renews the session id and stores the user in
    /// the session. `addr` is the client address (for rate limiting).
    pub async fn login(
        &self,
        store: &dyn Store,
        session: &Session,
        username: &str,
        password: &str,
        addr: &str,
        clock: &dyn crate::domain::clock::Clock,
    ) -> Result<Principal, LoginError> {
        let result = self
            .try_login(store, session, username, password, addr, clock)
            .await;
        // Every sign-in, refused or not, is in the audit log (DESIGN.md "Ops console").
        let (action, roles, reason) = match &result {
            Ok(p) => (
                "login",
                crate::domain::roles::format_roles(&p.roles),
                String::new(),
            ),
            Err(e) => ("login_failed", String::new(), e.to_string()),
        };
        let actor = username.chars().take(64).collect::<String>();
        let mut after = String::new();
        if matches!(result, Err(LoginError::RateLimited(_))) {
            match self.record_refusal(addr, clock.now_ms()) {
                None => return result,
                Some(unrecorded) => {
                    after = serde_json::json!({
                        "rate_limited": true,
                        "unrecorded_refusals_in_previous_window": unrecorded,
                        "window_secs": self.window_ms / 1000,
                    })
                    .to_string();
                }
            }
        }
        let entry = crate::store::AuditEntry {
            at: clock.now_ms(),
            actor: actor.clone(),
            roles,
            action: action.into(),
            target: format!("user:{actor}"),
            reason,
            before: String::new(),
            after,
            meta: serde_json::json!({"addr": addr}).to_string(),
        };
        if let Err(e) = store.append_audit(&entry).await {
            tracing::error!(error = %e, "login not recorded in the audit log");
            if result.is_ok() {
                // No unaudited sessions: undo the login.
                let _ = session.flush().await;
                return Err(LoginError::Store(e));
            }
        }
        result
    }

    async fn try_login(
        &self,
        store: &dyn Store,
        session: &Session,
        username: &str,
        password: &str,
        addr: &str,
        clock: &dyn crate::domain::clock::Clock,
    ) -> Result<Principal, LoginError> {
        self.admit(username, addr, clock.now_ms())?;
        let user = if username.is_empty() || username.len() > 64 {
            None
        } else {
            store.user_by_name(username).await?
        };
        let ok = self
            .hasher
            .verify(password, user.as_ref().map(|u| u.password_hash.as_str()))
            .await;
        let user = match user {
            Some(u) if ok && !u.disabled => u,
            _ => return Err(LoginError::InvalidCredentials),
        };
        // A new id on login: a session id planted before login is worthless (session fixation).
        session
            .cycle_id()
            .await
            .map_err(|e| LoginError::Session(e.to_string()))?;
        // Read the clock after hashing: the absolute timeout counts from the moment of login.
        let record = SessionUser {
            username: user.username.clone(),
            epoch: user.session_epoch,
            login_at: clock.now_ms(),
        };
        session
            .insert(USER_KEY, record)
            .await
            .map_err(|e| LoginError::Session(e.to_string()))?;
        Ok(Principal::of(&user))
    }

    /// Destroys the session (its id is deleted from the store) and records the logout.
    pub async fn logout(
        &self,
        store: &dyn Store,
        session: &Session,
        addr: &str,
        now: i64,
    ) -> Result<(), LoginError> {
        if let Some(p) = self.current(store, session, now).await? {
            let entry = crate::store::AuditEntry {
                at: now,
                actor: p.username.clone(),
                roles: crate::domain::roles::format_roles(&p.roles),
                action: "logout".into(),
                target: format!("user:{}", p.username),
                reason: String::new(),
                before: String::new(),
                after: String::new(),
                meta: serde_json::json!({"addr": addr}).to_string(),
            };
            store.append_audit(&entry).await?;
        }
        session
            .flush()
            .await
            .map_err(|e| LoginError::Session(e.to_string()))
    }

    /// The session's user if the session is valid now: within the absolute timeout, the user
    /// exists, is enabled and its session epoch is unchanged. An invalid session is flushed.
    pub async fn current(
        &self,
        store: &dyn Store,
        session: &Session,
        now: i64,
    ) -> Result<Option<Principal>, StoreError> {
        let Ok(Some(su)) = session.get::<SessionUser>(USER_KEY).await else {
            return Ok(None);
        };
        let user = store.user_by_name(&su.username).await?;
        let valid = now - su.login_at <= self.absolute_ms
            && user
                .as_ref()
                .is_some_and(|u| !u.disabled && u.session_epoch == su.epoch);
        if !valid {
            let _ = session.flush().await;
            return Ok(None);
        }
        Ok(user.as_ref().map(Principal::of))
    }
}
