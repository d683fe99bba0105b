//! Sign-in throttling (DESIGN.md "Ops console": login attempts rate-limited; OWASP
//! Authentication Cheat Sheet, "Login Throttling"; ASVS 5.0 V6.3.1). Plain rules over the
//! attempt history the store keeps, so every server sharing the database decides alike.
//!
//! Two limits, checked before any password is verified:
//! - **per client address**: at most `per_addr` failed (or still running) attempts in any
//!   `window_ms`, whatever the account;
//! - **per (account, client address)**: up to `free` failures since the pair's last success
//!   cost nothing; from then on each attempt must wait a delay that doubles with every
//!   further failure (`base_delay_ms`, 2x, 4x, ... up to `max_delay_ms`). The delay belongs to
//!   the pair, so someone hammering `alice` from one address slows only that address: alice
//!   still signs in from hers (no lockout of the person, OWASP "Account Lockout").

/// The throttling rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottlePolicy {
    /// Failed attempts allowed per client address in any `window_ms`.
    pub per_addr: i64,
    /// The per-address window, ms.
    pub window_ms: i64,
    /// Failures of one (account, address) pair that cost no delay.
    pub free: i64,
    /// The delay after the first failure beyond `free`, ms; doubles with each further one.
    pub base_delay_ms: i64,
    /// The longest delay, ms.
    pub max_delay_ms: i64,
    /// How far back a pair's failures count, ms (older ones are forgotten).
    pub pair_lookback_ms: i64,
}

/// How long a pair's failures are remembered: a day.
pub const PAIR_LOOKBACK_MS: i64 = 24 * 3_600_000;

/// What the store found about one (account, address) before an attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttemptHistory {
    /// Failed or unfinished attempts from the address since `now - window_ms`.
    pub addr_failures: i64,
    /// The oldest of those, epoch ms (None when there are none).
    pub addr_oldest_at: Option<i64>,
    /// Failed or unfinished attempts of the pair since its last success (within the lookback).
    pub pair_failures: i64,
    /// The newest of those, epoch ms.
    pub pair_last_at: Option<i64>,
}

/// Whether an attempt may go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Verify the password.
    Allowed,
    /// Refused without verifying; the client may retry after this many ms.
    Refused {
        /// Milliseconds to wait (at least 1).
        retry_after_ms: i64,
    },
}

impl Admission {
    /// Whole seconds to wait, rounded up, at least 1 (for `Retry-After`); 0 when allowed.
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Admission::Allowed => 0,
            Admission::Refused { retry_after_ms } => {
                ((*retry_after_ms).max(1) as u64).div_ceil(1000)
            }
        }
    }
}

impl ThrottlePolicy {
    /// The start of the per-address window at `now`.
    pub fn window_start(&self, now: i64) -> i64 {
        now.saturating_sub(self.window_ms.max(1))
    }

    /// The oldest pair failure still counted at `now`.
    pub fn pair_since(&self, now: i64) -> i64 {
        now.saturating_sub(self.pair_lookback_ms.max(self.window_ms).max(1))
    }

    /// The wait a pair owes after `failures` failures: 0 below `free`, then
    /// `base_delay_ms * 2^(failures - free)`, at most `max_delay_ms`.
    pub fn delay_ms(&self, failures: i64) -> i64 {
        let beyond = failures - self.free.max(0);
        if beyond < 0 {
            return 0;
        }
        let shift = beyond.min(40) as u32;
        self.base_delay_ms
            .max(0)
            .saturating_mul(1i64 << shift)
            .min(self.max_delay_ms.max(0))
    }

    /// Whether an attempt with history `h` may be checked at `now`.
    pub fn admit(&self, h: &AttemptHistory, now: i64) -> Admission {
        let mut wait = 0i64;
        if h.addr_failures >= self.per_addr.max(1) {
            let oldest = h.addr_oldest_at.unwrap_or(now);
            wait = wait.max(oldest.saturating_add(self.window_ms) - now);
        }
        let delay = self.delay_ms(h.pair_failures);
        if delay > 0 {
            let last = h.pair_last_at.unwrap_or(now);
            wait = wait.max(last.saturating_add(delay) - now);
        }
        if wait > 0 {
            Admission::Refused {
                retry_after_ms: wait,
            }
        } else {
            Admission::Allowed
        }
    }
}

/// What is being attempted, kept with each attempt (the limits count both kinds together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptKind {
    /// A sign-in.
    Login,
    /// A password re-entered to approve an action (step-up).
    StepUp,
}

impl AttemptKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::Login => "login",
            AttemptKind::StepUp => "step_up",
        }
    }
}

/// The account key an attempt is counted under: the name as typed, trimmed, lowercased and
/// cut to 64 characters (names longer than that never exist), without NUL (which
/// PostgreSQL text cannot hold), so case variants and padding share one count and a huge
/// name cannot grow the table.
pub fn account_key(username: &str) -> String {
    username
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| *c != '\0')
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ThrottlePolicy {
        ThrottlePolicy {
            per_addr: 10,
            window_ms: 60_000,
            free: 3,
            base_delay_ms: 1_000,
            max_delay_ms: 8_000,
            pair_lookback_ms: PAIR_LOOKBACK_MS,
        }
    }

    #[test]
    fn the_pair_delay_doubles_after_the_free_failures_up_to_the_cap() {
        let p = policy();
        let delays: Vec<i64> = (0..9).map(|f| p.delay_ms(f)).collect();
        assert_eq!(delays, [0, 0, 0, 1_000, 2_000, 4_000, 8_000, 8_000, 8_000]);
        assert_eq!(p.delay_ms(10_000), 8_000, "no overflow");
    }

    #[test]
    fn a_pair_waits_its_delay_from_its_last_failure() {
        let p = policy();
        let h = AttemptHistory {
            pair_failures: 4,
            pair_last_at: Some(10_000),
            ..Default::default()
        };
        assert_eq!(
            p.admit(&h, 10_500),
            Admission::Refused {
                retry_after_ms: 1_500
            }
        );
        assert_eq!(p.admit(&h, 12_000), Admission::Allowed);
        assert_eq!(
            Admission::Refused {
                retry_after_ms: 1_500
            }
            .retry_after_secs(),
            2
        );
        // Below the free failures nothing waits.
        let h = AttemptHistory {
            pair_failures: 2,
            pair_last_at: Some(10_000),
            ..Default::default()
        };
        assert_eq!(p.admit(&h, 10_000), Admission::Allowed);
    }

    #[test]
    fn an_address_over_its_limit_waits_for_its_oldest_failure_to_leave_the_window() {
        let p = policy();
        let h = AttemptHistory {
            addr_failures: 10,
            addr_oldest_at: Some(1_000),
            ..Default::default()
        };
        assert_eq!(
            p.admit(&h, 31_000),
            Admission::Refused {
                retry_after_ms: 30_000
            }
        );
        let h = AttemptHistory {
            addr_failures: 9,
            addr_oldest_at: Some(1_000),
            ..Default::default()
        };
        assert_eq!(p.admit(&h, 31_000), Admission::Allowed);
    }

    #[test]
    fn account_keys_fold_case_and_are_bounded() {
        assert_eq!(account_key(" Alice "), "alice");
        assert_eq!(account_key(&"x".repeat(500)).len(), 64);
    }
}
