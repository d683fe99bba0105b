//! Console sign-in (DESIGN.md "Ops console": login; OWASP Authentication Cheat Sheet):
//! one answer and similar time for an unknown user, a wrong password and a disabled user;
//! attempts throttled per client address and, with a growing delay, per (account, client
//! address), counted in the database so that servers sharing it share the limits
//! ([`crate::domain::throttle`]); the session id renewed on login and the session destroyed
//! on logout.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tower_sessions::Session;

use super::session::{Activity, SessionUser, USER_KEY};
use crate::domain::roles::{Role, parse_roles};
use crate::domain::throttle::{Admission, AttemptKind, ThrottlePolicy, account_key};
use crate::service::password::PasswordHasherPool;
use crate::store::{AttemptAdmission, Store, StoreError, User};

/// Why a login was refused.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Unknown user, wrong password or disabled user: deliberately one answer.
    #[error("unknown user or wrong password")]
    InvalidCredentials,
    /// Too many failed attempts from this address, or for this account from this address;
    /// retry after the given seconds.
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
    /// Sign-in and step-up throttling, applied over the attempts stored in the database.
    pub policy: ThrottlePolicy,
    /// Refused (rate-limited) sign-ins per client address: the start of the address's
    /// current window and how many refusals in it went unrecorded.
    refused: Mutex<std::collections::HashMap<String, (i64, u64)>>,
    window_ms: i64,
    /// Absolute session lifetime, ms.
    pub absolute_ms: i64,
    /// Idle session lifetime, ms: a session no person used for this long is over
    /// (background refreshes do not count as use).
    pub idle_ms: i64,
}

/// A password check admitted by the throttle; [`Auth::finish_attempt`] records how it ended.
#[derive(Debug)]
#[must_use = "finish the attempt, or it stays counted as a failure"]
pub struct Attempt {
    id: i64,
}

impl Auth {
    /// From the session and sign-in settings.
    pub fn new(settings: &crate::config::SessionSettings) -> Self {
        let policy = settings.throttle();
        Auth {
            hasher: PasswordHasherPool::new(settings.hash_permits),
            policy,
            refused: Mutex::new(std::collections::HashMap::new()),
            window_ms: policy.window_ms.max(1),
            absolute_ms: settings.absolute_ms(),
            idle_ms: settings.idle_ms(),
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

    /// Admits one password check of `username` from `addr` (a sign-in or an approval's
    /// step-up: both count toward the same limits), recording it in the database first, so
    /// that every server sharing the database sees it. Errors: `RateLimited` with the seconds
    /// to wait; `Store`.
    pub async fn begin_attempt(
        &self,
        store: &dyn Store,
        username: &str,
        addr: &str,
        kind: AttemptKind,
        now: i64,
    ) -> Result<Attempt, LoginError> {
        let addr: String = addr.chars().take(64).collect();
        match store
            .begin_auth_attempt(&account_key(username), &addr, kind, &self.policy, now)
            .await?
        {
            AttemptAdmission::Admitted { id } => Ok(Attempt { id }),
            AttemptAdmission::Refused { retry_after_ms } => Err(LoginError::RateLimited(
                Admission::Refused { retry_after_ms }.retry_after_secs(),
            )),
        }
    }

    /// Records how an admitted check ended: `ok` resets the (account, address) delay; a
    /// failure adds to it and to the address's count.
    pub async fn finish_attempt(
        &self,
        store: &dyn Store,
        attempt: Attempt,
        ok: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        store.finish_auth_attempt(attempt.id, ok, now).await
    }

    /// Verifies `password` against the stored user `username`; an unknown name is checked
    /// against a dummy hash (same work) and never matches; a disabled user never matches.
    pub async fn verify_user(
        &self,
        store: &dyn Store,
        username: &str,
        password: &str,
    ) -> Result<Option<User>, StoreError> {
        let user = if username.is_empty() || username.len() > 64 {
            None
        } else {
            store.user_by_name(username).await?
        };
        let ok = self
            .hasher
            .verify(password, user.as_ref().map(|u| u.password_hash.as_str()))
            .await;
        Ok(user.filter(|u| ok && !u.disabled))
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
        if let Ok(p) = &result
            && let Err(e) = store.record_sign_in(&p.username, entry.at).await
        {
            // Only the admin page's summary is behind; the audit record above is the proof.
            tracing::warn!(error = %e, "last sign-in time not recorded");
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
        let attempt = self
            .begin_attempt(store, username, addr, AttemptKind::Login, clock.now_ms())
            .await?;
        let user = self.verify_user(store, username, password).await;
        self.finish_attempt(store, attempt, matches!(user, Ok(Some(_))), clock.now_ms())
            .await?;
        let Some(user) = user? else {
            return Err(LoginError::InvalidCredentials);
        };
        // A new id on login: a session id planted before login is worthless (session fixation).
        session
            .cycle_id()
            .await
            .map_err(|e| LoginError::Session(e.to_string()))?;
        // Read the clock after hashing: the absolute timeout counts from the moment of login.
        let now = clock.now_ms();
        let record = SessionUser {
            username: user.username.clone(),
            epoch: user.session_epoch,
            login_at: now,
            last_active: now,
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
        if let Some(p) = self.current(store, session, now, Activity::Person).await? {
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

    /// The session's user if the session is valid now: within the absolute and the idle
    /// timeout, the user exists, is enabled and its session epoch is unchanged. An invalid
    /// session is flushed. A [`Activity::Person`] request marks the session as used now
    /// (which also slides the stored session's expiry); a [`Activity::Background`] one
    /// (the dashboard's polling) leaves it as it was, so polling alone lets the session end
    /// at its idle timeout (ASVS 5.0 V7.3.1).
    pub async fn current(
        &self,
        store: &dyn Store,
        session: &Session,
        now: i64,
        activity: Activity,
    ) -> Result<Option<Principal>, StoreError> {
        let Ok(Some(su)) = session.get::<SessionUser>(USER_KEY).await else {
            return Ok(None);
        };
        let last_active = su.last_active.max(su.login_at);
        let user = store.user_by_name(&su.username).await?;
        let valid = now - su.login_at <= self.absolute_ms
            && now - last_active <= self.idle_ms
            && user
                .as_ref()
                .is_some_and(|u| !u.disabled && u.session_epoch == su.epoch);
        if !valid {
            let _ = session.flush().await;
            return Ok(None);
        }
        if activity == Activity::Person && su.last_active != now {
            let touched = SessionUser {
                last_active: now,
                ..su
            };
            if let Err(e) = session.insert(USER_KEY, touched).await {
                tracing::warn!(error = %e, "session activity not recorded");
            }
        }
        Ok(user.as_ref().map(Principal::of))
    }
}
