//! Who may act: the console's password checks (sign-in and an approval's step-up) and their
//! audit records, with no sessions and no HTTP (DESIGN.md "Ops console": login; OWASP
//! Authentication Cheat Sheet). One answer and similar time for an unknown user, a wrong
//! password and a disabled user; attempts throttled per client address (IPv6 per /64) and,
//! with a growing delay, per (account, client address), counted in the database so that
//! servers sharing it share the limits ([`crate::domain::throttle`], which also says who a
//! flooded address still admits). A failed sign-in is audited without the name typed. The
//! session that a sign-in starts is the console adapter's (`ops::auth`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use super::actor::Actor;
use super::password::PasswordHasherPool;
use crate::domain::clock::Clock;
use crate::domain::roles::{Role, format_roles, parse_roles};
use crate::domain::throttle::{Admission, AttemptKind, ThrottlePolicy, account_key, throttle_addr};
use crate::store::{AttemptAdmission, AuditEntry, Store, StoreError, User};

/// Why a sign-in was refused.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Unknown user, wrong password or disabled user: deliberately one answer.
    #[error("unknown user or wrong password")]
    InvalidCredentials,
    /// Too many failed attempts from this address, or for this account from this address;
    /// retry after the given seconds.
    #[error("too many password attempts; retry in {0} s")]
    RateLimited(u64),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session could not be written.
    #[error("session error: {0}")]
    Session(String),
}

/// The audit actor of a failed sign-in: the name typed is not a person yet (issue 36).
pub const ANONYMOUS: &str = "anonymous";

/// A bounded, one-way stand-in for a name typed at sign-in, for the audit log and the logs:
/// the first 16 hex digits (64 bits) of the SHA-256 of its account key
/// ([`account_key`]: trimmed, lowercased), so case variants of one name share it.
pub fn typed_name_hash(username: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(account_key(username).as_bytes());
    hex::encode(&digest[..8])
}

/// A signed-in console user with its roles.
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

    /// This user as the actor of an audited change made from client address `addr`
    /// ([`Actor::console`]).
    pub fn actor(&self, addr: &str) -> Actor {
        Actor::console(&self.username, &format_roles(&self.roles), addr)
    }
}

/// A password check admitted by the throttle; [`Credentials::finish_attempt`] records how
/// it ended.
#[derive(Debug)]
#[must_use = "finish the attempt, or it stays counted as a failure"]
pub struct Attempt {
    id: i64,
}

/// The password checks: hashing, throttling, and the audit records of sign-in and sign-out.
#[derive(Debug)]
pub struct Credentials {
    /// Password hashing pool.
    pub hasher: PasswordHasherPool,
    /// Sign-in and step-up throttling, applied over the attempts stored in the database.
    pub policy: ThrottlePolicy,
    /// Refused (rate-limited) sign-ins per client address: the start of the address's
    /// current window and how many refusals in it went unrecorded.
    refused: Mutex<HashMap<String, (i64, u64)>>,
    window_ms: i64,
}

impl Credentials {
    /// Checks with at most `hash_permits` argon2 verifications at once, throttled by `policy`.
    pub fn new(hash_permits: usize, policy: ThrottlePolicy) -> Self {
        Credentials {
            hasher: PasswordHasherPool::new(hash_permits),
            policy,
            refused: Mutex::new(HashMap::new()),
            window_ms: policy.window_ms.max(1),
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
    /// step-up, by the rules of [`crate::domain::throttle`]; counted under the address's
    /// network, [`throttle_addr`]), recording it in the database first, so
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
        let addr = throttle_addr(addr);
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

    /// A sign-in's password check of `username` from `addr`: admitted by the throttle, the
    /// password verified, the attempt's end recorded. The user on success; errors:
    /// `InvalidCredentials` (one answer for an unknown, wrong or disabled user),
    /// `RateLimited`, `Store`.
    pub async fn check_sign_in(
        &self,
        store: &dyn Store,
        username: &str,
        password: &str,
        addr: &str,
        clock: &dyn Clock,
    ) -> Result<User, LoginError> {
        let attempt = self
            .begin_attempt(store, username, addr, AttemptKind::Login, clock.now_ms())
            .await?;
        let user = self.verify_user(store, username, password).await;
        self.finish_attempt(store, attempt, matches!(user, Ok(Some(_))), clock.now_ms())
            .await?;
        user?.ok_or(LoginError::InvalidCredentials)
    }

    /// Audits a sign-in of `username` from `addr` at `now` (epoch ms UTC), whatever its
    /// outcome (DESIGN.md "Ops console": every sign-in, refused or not): `login` by the user
    /// with the roles, or `login_failed` with the reason. Of the rate-limited ones only the
    /// first of each window per address is written ([`Self::record_refusal`]), carrying the
    /// count of the previous window's unrecorded ones. Returns whether a record was written;
    /// errors: the store's (the caller then undoes a successful sign-in: no unaudited
    /// sessions).
    ///
    /// A failed sign-in never writes what was typed as the name into the append-only log
    /// (issue 36): its actor is [`ANONYMOUS`] and its target `login:<16 hex>`
    /// ([`typed_name_hash`]), so a name such as `system` or `cli:root` cannot pose as an
    /// actor and a password typed into the name field is not kept. The hash still lets an
    /// auditor group the attempts on one name, or check a name they suspect.
    pub async fn audit_sign_in(
        &self,
        store: &dyn Store,
        username: &str,
        addr: &str,
        outcome: &Result<Principal, LoginError>,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut after = String::new();
        if matches!(outcome, Err(LoginError::RateLimited(_))) {
            let Some(unrecorded) = self.record_refusal(&throttle_addr(addr), now) else {
                return Ok(false);
            };
            after = serde_json::json!({
                "rate_limited": true,
                "unrecorded_refusals_in_previous_window": unrecorded,
                "window_secs": self.window_ms / 1000,
            })
            .to_string();
        }
        let (actor, action, target, reason) = match outcome {
            Ok(p) => (
                Actor::console(&p.username, &format_roles(&p.roles), addr),
                "login",
                format!("user:{}", p.username),
                String::new(),
            ),
            Err(e) => (
                Actor::console(ANONYMOUS, "", addr),
                "login_failed",
                format!("login:{}", typed_name_hash(username)),
                e.to_string(),
            ),
        };
        let entry: AuditEntry = actor.entry(now, action, &target, &reason, String::new(), after);
        store.append_audit(&entry).await?;
        if let Ok(p) = outcome
            && let Err(e) = store.record_sign_in(&p.username, now).await
        {
            // Only the admin page's summary is behind; the audit record is the proof.
            tracing::warn!(error = %e, "last sign-in time not recorded");
        }
        Ok(true)
    }

    /// Audits `p`'s sign-out from `addr` at `now` (epoch ms UTC) as `logout`. Errors: the
    /// store's.
    pub async fn audit_sign_out(
        &self,
        store: &dyn Store,
        p: &Principal,
        addr: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        let entry = p.actor(addr).entry(
            now,
            "logout",
            &format!("user:{}", p.username),
            "",
            String::new(),
            String::new(),
        );
        store.append_audit(&entry).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(window_ms: i64) -> Credentials {
        Credentials::new(
            1,
            ThrottlePolicy {
                per_addr: 30,
                window_ms,
                free: 5,
                base_delay_ms: 1_000,
                max_delay_ms: 60_000,
                pair_lookback_ms: crate::domain::throttle::PAIR_LOOKBACK_MS,
            },
        )
    }

    #[test]
    fn only_the_first_refused_sign_in_of_each_window_per_address_is_audited() {
        let c = credentials(60_000);
        assert_eq!(c.record_refusal("10.0.0.1", 0), Some(0));
        assert_eq!(c.record_refusal("10.0.0.1", 1_000), None);
        assert_eq!(c.record_refusal("10.0.0.1", 59_999), None);
        // Another address has its own window.
        assert_eq!(c.record_refusal("10.0.0.2", 2_000), Some(0));
        // The next window's first carries the two the previous one did not record.
        assert_eq!(c.record_refusal("10.0.0.1", 60_000), Some(2));
        assert_eq!(c.record_refusal("10.0.0.1", 60_001), None);
    }
}
