//! Console sessions (DESIGN.md "Ops console": login; OWASP Session Management Cheat Sheet):
//! the session id renewed on login and the session destroyed on logout, absolute and idle
//! timeouts. The password checks, their throttling and the sign-in audit are the service's
//! ([`crate::service::sign_in`]).

use tower_sessions::Session;

use super::session::{Activity, SessionUser, USER_KEY};
pub use crate::service::sign_in::{Attempt, Credentials, LoginError, Principal};
use crate::store::{Store, StoreError};

/// The console's sessions over the service's password checks, shared by the JSON endpoints
/// and the console's server functions.
#[derive(Debug)]
pub struct Auth {
    /// Password checks, throttling and the sign-in audit.
    pub credentials: Credentials,
    /// Absolute session lifetime, ms.
    pub absolute_ms: i64,
    /// Idle session lifetime, ms: a session no person used for this long is over
    /// (background refreshes do not count as use).
    pub idle_ms: i64,
    /// The relying party that registers and verifies passkeys (`--webauthn-origin`).
    pub passkeys: std::sync::Arc<crate::service::passkeys::RelyingParty>,
}

impl Auth {
    /// From the session and sign-in settings, with the relying party of the console's
    /// origin for passkeys.
    pub fn new(
        settings: &crate::config::SessionSettings,
        passkeys: crate::service::passkeys::RelyingParty,
    ) -> Self {
        Auth {
            passkeys: std::sync::Arc::new(passkeys),
            credentials: Credentials::new(settings.hash_permits, settings.throttle()),
            absolute_ms: settings.absolute_ms(),
            idle_ms: settings.idle_ms(),
        }
    }

    /// Checks the credentials and, on success, renews the session id and stores the user in
    /// the session. `addr` is the client address (for rate limiting). Every sign-in, refused
    /// or not, is audited ([`Credentials::audit_sign_in`]); when a successful one cannot be,
    /// the session is undone and the answer is the store's error. A sign-in and a refusal are
    /// logged here (the user, or for a refusal the typed name's hash, and the address, both
    /// quoted), once for the JSON endpoint and the console.
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
        if let Err(e) = self
            .credentials
            .audit_sign_in(store, username, addr, &result, clock.now_ms())
            .await
        {
            tracing::error!(error = %e, "login not recorded in the audit log");
            if result.is_ok() {
                // No unaudited sessions: undo the login.
                let _ = session.flush().await;
                return Err(LoginError::Store(e));
            }
        }
        // Values quoted (Debug) and escaped, so a typed name cannot pass for another field
        // or line; a refused sign-in logs only the typed name's hash, as its audit record
        // does, since what was typed may be a password (issue 36).
        let at = crate::telemetry::log_safe(addr, 64);
        match &result {
            Ok(p) => tracing::info!(user = ?p.username, addr = ?at, "console login"),
            Err(LoginError::InvalidCredentials | LoginError::RateLimited(_)) => {
                let name_hash = crate::service::sign_in::typed_name_hash(username);
                tracing::warn!(name_hash = ?name_hash, addr = ?at, "console login refused")
            }
            // A failure's cause is logged once, where it becomes an answer.
            Err(LoginError::Store(_) | LoginError::Session(_)) => {}
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
        let user = self
            .credentials
            .check_sign_in(store, username, password, addr, clock)
            .await?;
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
            self.credentials
                .audit_sign_out(store, &p, addr, now)
                .await?;
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
    /// at its idle timeout (ASVS 5.0 V7.3.1). Errors: `Unavailable` when the session store
    /// (the database) could not be read: 503, never a sign-out.
    pub async fn current(
        &self,
        store: &dyn Store,
        session: &Session,
        now: i64,
        activity: Activity,
    ) -> Result<Option<Principal>, StoreError> {
        let su = match session.get::<SessionUser>(USER_KEY).await {
            Ok(Some(su)) => su,
            // The sessions live in the database: one it could not read (a failover, issue 40)
            // is 503 to retry, not a sign-out the person would have to undo.
            Err(tower_sessions::session::Error::Store(e)) => {
                return Err(StoreError::Unavailable(sqlx::Error::Io(
                    std::io::Error::other(format!("session store: {e}")),
                )));
            }
            // None, or a session written in another shape: signed out.
            Ok(None) | Err(tower_sessions::session::Error::SerdeJson(_)) => return Ok(None),
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
