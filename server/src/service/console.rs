//! What the console's use cases need beyond the store and the clock (issue 33, "one use-case
//! shape"): when a payment counts as stuck, how long a maker-checker request stays
//! approvable, how long a pause holds, the audit checkpoint signing key, and the per-user
//! allowances of work that reaches the channel or wakes jobs at once. They live in the
//! [`Core`] so that every adapter (the `/ops/v1` handlers, the console's server functions)
//! calls a use case without threading them in, and each allowance is spent in one place.

use std::sync::{Arc, Mutex, PoisonError};

use ed25519_dalek::SigningKey;

use super::Core;
use super::actions::ActionError;
use super::bulk::BULK_RETRIES_PER_MINUTE;
use super::deliveries::RECOVERIES_PER_MINUTE;
use crate::domain::ratelimit::RateLimiter;
use crate::domain::stuck::StuckThresholds;

/// The console's settings and allowances; cloning shares the allowances.
#[derive(Clone)]
pub struct ConsoleSettings {
    /// When a payment counts as stuck (`--stuck-*-ms`): the dashboard and bulk retries.
    pub stuck: StuckThresholds,
    /// How long a pending maker-checker request (an action, a grant of power, a pause)
    /// stays approvable, ms (`--action-ttl-secs`).
    pub action_ttl_ms: i64,
    /// Single `query` and `retry` actions one user may run a minute
    /// (`--action-limit-per-minute`).
    pub action_limit_per_minute: u32,
    /// How long a pause holds before one operator may end it, ms
    /// (`--pause-min-duration-secs`).
    pub pause_min_ms: i64,
    /// The audit checkpoint signing key (`--audit-signing-key`), when one was given.
    pub audit_key: Option<Arc<SigningKey>>,
    /// The per-user allowances, counted in this process.
    pub limiters: Arc<ConsoleLimiters>,
}

/// The per-user allowances of console work that runs at once, each a sliding minute.
pub struct ConsoleLimiters {
    /// Bulk retries ([`BULK_RETRIES_PER_MINUTE`] a minute): one operator cannot flood the
    /// channel by confirming selections in a loop.
    pub bulk: Mutex<RateLimiter>,
    /// Single `query` and `retry` actions, on a payment or an error-pool item
    /// ([`ConsoleSettings::action_limit_per_minute`] a minute).
    pub action: Mutex<RateLimiter>,
    /// Webhook endpoint recoveries ([`RECOVERIES_PER_MINUTE`] a minute).
    pub recover: Mutex<RateLimiter>,
}

impl ConsoleSettings {
    /// The settings as given, with fresh allowances (nothing spent yet).
    pub fn new(
        stuck: StuckThresholds,
        action_ttl_ms: i64,
        action_limit_per_minute: u32,
        pause_min_ms: i64,
        audit_key: Option<Arc<SigningKey>>,
    ) -> Self {
        let minute = |max: usize| Mutex::new(RateLimiter::new(max, 60_000));
        ConsoleSettings {
            stuck,
            action_ttl_ms,
            action_limit_per_minute,
            pause_min_ms,
            audit_key,
            limiters: Arc::new(ConsoleLimiters {
                bulk: minute(BULK_RETRIES_PER_MINUTE),
                action: minute(action_limit_per_minute as usize),
                recover: minute(RECOVERIES_PER_MINUTE),
            }),
        }
    }
}

impl ConsoleSettings {
    /// For a process that serves no console (a one-off command, a benchmark): the default
    /// stuck thresholds, no signing key, and the command-line defaults of the times and
    /// allowances (a day to approve, 60 actions a minute, 15 minutes a pause holds).
    pub fn one_off() -> Self {
        Self::new(StuckThresholds::default(), 86_400_000, 60, 900_000, None)
    }
}

/// Spends one of `who`'s allowance in `limiter` at `now`; over it, the seconds until one is
/// free again (none: the event was counted).
fn spend(limiter: &Mutex<RateLimiter>, who: &str, now: i64) -> Option<u64> {
    // A panic while the lock was held leaves counts that are still counts.
    let mut limiter = limiter.lock().unwrap_or_else(PoisonError::into_inner);
    if limiter.try_acquire(who, now) {
        None
    } else {
        Some(limiter.retry_after_secs(who, now))
    }
}

impl Core {
    /// Spends one of `username`'s single `query`/`retry` allowance. Errors: `RateLimited`
    /// (429 with `Retry-After`, at least one second) over it.
    pub(crate) fn spend_action_allowance(&self, username: &str) -> Result<(), ActionError> {
        match spend(&self.console.limiters.action, username, self.clock.now_ms()) {
            None => Ok(()),
            Some(secs) => {
                let secs = secs.max(1);
                Err(ActionError::RateLimited(
                    format!(
                        "at most {} query and retry actions a minute; retry in {secs} s",
                        self.console.action_limit_per_minute
                    ),
                    secs,
                ))
            }
        }
    }

    /// Spends one of `username`'s bulk-retry allowance; over it, the seconds to wait.
    pub(crate) fn spend_bulk_allowance(&self, username: &str) -> Option<u64> {
        spend(&self.console.limiters.bulk, username, self.clock.now_ms())
    }

    /// Spends one of `username`'s endpoint-recovery allowance; over it, the seconds to wait.
    pub(crate) fn spend_recover_allowance(&self, username: &str) -> Option<u64> {
        spend(
            &self.console.limiters.recover,
            username,
            self.clock.now_ms(),
        )
    }
}
