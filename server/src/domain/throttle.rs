//! Sign-in throttling (DESIGN.md "Ops console": login attempts rate-limited; OWASP
//! Authentication Cheat Sheet, "Login Throttling"; ASVS 5.0 V6.3.1). Plain rules over the
//! attempt history the store keeps, so every server sharing the database decides alike.
//!
//! Attempts are counted per client *network*, not per raw address ([`throttle_addr`]): an
//! IPv4 address stands alone, an IPv6 address counts as its /64, since one host is usually
//! handed a whole /64 and could otherwise rotate through it to escape every limit (issue 36).
//!
//! Two limits, checked before any password is verified:
//! - **per client network**: at most `per_addr` failed (or still running) sign-ins in any
//!   `window_ms`, whatever the account. A flood from a shared address (an office, a NAT) must
//!   not lock out the people behind it (issue 36), so two kinds of attempt are exempt:
//!   - a sign-in of an account that signed in successfully from this network within the
//!     lookback (a *known* pair) and has fewer than `free` failures since: a sprayer cycling
//!     through names or an attacker guessing one name is still held (no success, or its
//!     free failures spent), while the people who work there keep signing in. A newcomer who
//!     never signed in from the flooded network waits like everyone else.
//!   - an approval's step-up: it runs inside a signed-in session for that session's own
//!     account only, so the address limit (which exists against spraying many accounts)
//!     adds nothing there, while it would let anyone behind the approvers' address block
//!     approvals.
//! - **per (account, client network)**: up to `free` failures since the pair's last success
//!   cost nothing; from then on each attempt must wait a delay that doubles with every
//!   further failure (`base_delay_ms`, 2x, 4x, ... up to `max_delay_ms`). The delay belongs to
//!   the pair, so someone hammering `alice` from one address slows only that address: alice
//!   still signs in from hers (no lockout of the person, OWASP "Account Lockout"). A sign-in
//!   counts the failures of both kinds; a step-up counts only step-up failures, so failed
//!   sign-ins typed as an approver's name from a shared address cannot delay the approver's
//!   step-up either.

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
    /// Whether the pair has a successful attempt within the lookback (a known pair: the
    /// account signed in from this network before).
    pub pair_known: bool,
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

    /// Whether the per-network limit applies to an attempt of `kind` with history `h`: not
    /// to a step-up, nor to a known pair still within its free failures (module docs).
    pub fn addr_limit_applies(&self, h: &AttemptHistory, kind: AttemptKind) -> bool {
        match kind {
            AttemptKind::StepUp => false,
            AttemptKind::Login => !(h.pair_known && h.pair_failures < self.free.max(0)),
        }
    }

    /// Whether an attempt of `kind` with history `h` may be checked at `now`.
    pub fn admit(&self, h: &AttemptHistory, kind: AttemptKind, now: i64) -> Admission {
        let mut wait = 0i64;
        if h.addr_failures >= self.per_addr.max(1) && self.addr_limit_applies(h, kind) {
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

/// The network key an attempt from client address `addr` is counted under: an IPv4 address
/// as is, an IPv6 address as its /64 (`2001:db8:1:2::/64`; IPv4-mapped ones as IPv4), since
/// a single host or customer line is commonly given a whole /64 (RFC 6177) and could rotate
/// through it. Anything that is not an address (`unknown`) stays as it is, cut to 64
/// characters.
pub fn throttle_addr(addr: &str) -> String {
    match addr.trim().parse::<std::net::IpAddr>() {
        Ok(ip) => match crate::domain::netaddr::canonical(ip) {
            std::net::IpAddr::V6(v6) => {
                let net = u128::from(v6) & (u128::MAX << 64);
                format!("{}/64", std::net::Ipv6Addr::from(net))
            }
            v4 => v4.to_string(),
        },
        Err(_) => addr.chars().take(64).collect(),
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
            p.admit(&h, AttemptKind::Login, 10_500),
            Admission::Refused {
                retry_after_ms: 1_500
            }
        );
        assert_eq!(p.admit(&h, AttemptKind::Login, 12_000), Admission::Allowed);
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
        assert_eq!(p.admit(&h, AttemptKind::Login, 10_000), Admission::Allowed);
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
            p.admit(&h, AttemptKind::Login, 31_000),
            Admission::Refused {
                retry_after_ms: 30_000
            }
        );
        let h = AttemptHistory {
            addr_failures: 9,
            addr_oldest_at: Some(1_000),
            ..Default::default()
        };
        assert_eq!(p.admit(&h, AttemptKind::Login, 31_000), Admission::Allowed);
    }

    #[test]
    fn ipv6_addresses_count_as_their_64_and_ipv4_addresses_alone() {
        assert_eq!(throttle_addr("2001:db8:1:2::1"), "2001:db8:1:2::/64");
        assert_eq!(
            throttle_addr("2001:db8:1:2:ffff:eeee:dddd:cccc"),
            "2001:db8:1:2::/64"
        );
        assert_ne!(throttle_addr("2001:db8:1:3::1"), "2001:db8:1:2::/64");
        assert_eq!(throttle_addr("198.51.100.7"), "198.51.100.7");
        assert_eq!(throttle_addr("::ffff:198.51.100.7"), "198.51.100.7");
        assert_eq!(throttle_addr("unknown"), "unknown");
    }

    #[test]
    fn a_flooded_network_still_admits_known_pairs_within_their_free_failures_and_step_ups() {
        let p = policy();
        let flooded = AttemptHistory {
            addr_failures: 10,
            addr_oldest_at: Some(1_000),
            ..Default::default()
        };
        // A stranger to this network waits.
        assert!(matches!(
            p.admit(&flooded, AttemptKind::Login, 2_000),
            Admission::Refused { .. }
        ));
        // Someone who signed in from here before does not.
        let known = AttemptHistory {
            pair_known: true,
            ..flooded
        };
        assert_eq!(
            p.admit(&known, AttemptKind::Login, 2_000),
            Admission::Allowed
        );
        // Unless their own free failures are spent.
        let spent = AttemptHistory {
            pair_failures: 3,
            pair_last_at: Some(1_500),
            ..known
        };
        assert!(matches!(
            p.admit(&spent, AttemptKind::Login, 2_000),
            Admission::Refused { .. }
        ));
        // A step-up never meets the network limit, only its own pair's delay.
        assert_eq!(
            p.admit(&flooded, AttemptKind::StepUp, 2_000),
            Admission::Allowed
        );
    }

    #[test]
    fn account_keys_fold_case_and_are_bounded() {
        assert_eq!(account_key(" Alice "), "alice");
        assert_eq!(account_key(&"x".repeat(500)).len(), 64);
    }
}
