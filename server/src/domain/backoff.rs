//! Exponential backoff with full jitter for compensation retries (DESIGN.md "Compensation
//! queue"; seed article 004, scheduled compensation). Full jitter spreads retries of jobs that
//! failed together, so a recovering channel is not hit by a synchronized wave.

use rand::Rng;

/// Backoff policy: the n-th retry (n starting at 1) waits a uniformly random time in
/// `[0, min(cap_ms, base_ms * 2^(n-1))]` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// First ceiling, in milliseconds.
    pub base_ms: u64,
    /// Largest ceiling, in milliseconds.
    pub cap_ms: u64,
}

impl Backoff {
    /// The ceiling of the wait before retry `attempt` (1-based), in milliseconds, without
    /// jitter. Saturates instead of overflowing for large attempts.
    pub fn ceiling_ms(&self, attempt: u32) -> u64 {
        let exp = attempt.saturating_sub(1).min(62);
        self.base_ms.saturating_mul(1u64 << exp).min(self.cap_ms)
    }

    /// The jittered wait before retry `attempt` (1-based), in milliseconds, drawn from `rng`
    /// (seeded in tests and simulations).
    pub fn delay_ms<R: Rng + ?Sized>(&self, attempt: u32, rng: &mut R) -> u64 {
        let ceiling = self.ceiling_ms(attempt);
        if ceiling == 0 {
            0
        } else {
            rng.random_range(0..=ceiling)
        }
    }
}

/// Limits one job kind sets apart from the defaults: its own backoff cap (ms) and maximum
/// attempts before the error pool. `None` keeps the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KindLimits {
    /// Largest retry ceiling for this kind, in milliseconds.
    pub cap_ms: Option<u64>,
    /// Attempts before this kind's job goes to the error pool.
    pub max_attempts: Option<i64>,
}

/// Longest backoff cap a job kind may be given: 30 days, in milliseconds. Longer waits are
/// a job parked forever, which the error pool (not the queue) is for.
pub const MAX_CAP_MS: u64 = 30 * 86_400_000;

/// Per-kind overrides of the retry limits, parsed from `KIND=CAP_MS/MAX_ATTEMPTS[,...]`
/// (either side of `/` may be empty to keep the default), e.g.
/// `query=60000/20,post_ledger=/50`. The empty string means no overrides.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetryOverrides(pub std::collections::BTreeMap<String, KindLimits>);

impl RetryOverrides {
    /// Parses `spec`, accepting only kinds in `known`. Errors name the offending part.
    pub fn parse(spec: &str, known: &[&str]) -> Result<Self, String> {
        let mut map = std::collections::BTreeMap::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (kind, limits) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected KIND=CAP_MS/MAX_ATTEMPTS"))?;
            let kind = kind.trim();
            if !known.contains(&kind) {
                return Err(format!(
                    "{part:?}: unknown job kind {kind:?} (one of {})",
                    known.join(", ")
                ));
            }
            let (cap, max) = limits.split_once('/').unwrap_or((limits, ""));
            let cap_ms = match cap.trim() {
                "" => None,
                c => Some(
                    c.parse::<u64>()
                        .ok()
                        .filter(|ms| (1..=MAX_CAP_MS).contains(ms))
                        .ok_or_else(|| {
                            format!("{part:?}: cap {c:?} is not 1 to {MAX_CAP_MS} ms")
                        })?,
                ),
            };
            let max_attempts = match max.trim() {
                "" => None,
                m => Some(m.parse::<i64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    format!("{part:?}: max attempts {m:?} is not a whole number >= 1")
                })?),
            };
            if cap_ms.is_none() && max_attempts.is_none() {
                return Err(format!("{part:?}: give a cap, a maximum, or both"));
            }
            if map
                .insert(
                    kind.to_owned(),
                    KindLimits {
                        cap_ms,
                        max_attempts,
                    },
                )
                .is_some()
            {
                return Err(format!("{kind:?} is given twice"));
            }
        }
        Ok(RetryOverrides(map))
    }
}

/// The retry rules of the compensation queue: one backoff and maximum for every kind, with
/// per-kind overrides (issue "Convergence": per-kind cap and maximum attempts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Backoff of every kind without its own cap.
    pub default: Backoff,
    /// Per-kind overrides.
    pub overrides: RetryOverrides,
}

impl RetryPolicy {
    /// The backoff of `kind`.
    pub fn backoff(&self, kind: &str) -> Backoff {
        match self.overrides.0.get(kind).and_then(|l| l.cap_ms) {
            Some(cap_ms) => Backoff {
                base_ms: self.default.base_ms.min(cap_ms),
                cap_ms,
            },
            None => self.default,
        }
    }

    /// The attempts `kind`'s job may make: the kind's override, else the maximum stored
    /// with the job when it was written.
    pub fn max_attempts(&self, kind: &str, stored: i64) -> i64 {
        self.overrides
            .0
            .get(kind)
            .and_then(|l| l.max_attempts)
            .unwrap_or(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn ceiling_doubles_then_caps() {
        let b = Backoff {
            base_ms: 100,
            cap_ms: 1_000,
        };
        assert_eq!(b.ceiling_ms(1), 100);
        assert_eq!(b.ceiling_ms(2), 200);
        assert_eq!(b.ceiling_ms(4), 800);
        assert_eq!(b.ceiling_ms(5), 1_000);
        assert_eq!(b.ceiling_ms(500), 1_000);
    }

    #[test]
    fn delay_stays_within_ceiling_and_is_reproducible_with_a_seed() {
        let b = Backoff {
            base_ms: 50,
            cap_ms: 10_000,
        };
        let mut r1 = StdRng::seed_from_u64(7);
        let mut r2 = StdRng::seed_from_u64(7);
        for attempt in 1..20 {
            let d = b.delay_ms(attempt, &mut r1);
            assert!(d <= b.ceiling_ms(attempt));
            assert_eq!(d, b.delay_ms(attempt, &mut r2));
        }
    }

    const KINDS: &[&str] = &["submit", "query", "post_ledger"];

    #[test]
    fn per_kind_overrides_replace_the_cap_and_maximum_of_that_kind_only() {
        let policy = RetryPolicy {
            default: Backoff {
                base_ms: 1_000,
                cap_ms: 300_000,
            },
            overrides: RetryOverrides::parse("query=60000/20, post_ledger=/50", KINDS).unwrap(),
        };
        assert_eq!(policy.backoff("query").cap_ms, 60_000);
        assert_eq!(policy.max_attempts("query", 8), 20);
        assert_eq!(policy.backoff("post_ledger").cap_ms, 300_000);
        assert_eq!(policy.max_attempts("post_ledger", 8), 50);
        assert_eq!(policy.backoff("submit"), policy.default);
        assert_eq!(policy.max_attempts("submit", 8), 8);
        // a cap below the base lowers the base too: no wait longer than the cap
        let tight = RetryPolicy {
            overrides: RetryOverrides::parse("submit=10/", KINDS).unwrap(),
            ..policy
        };
        assert_eq!(tight.backoff("submit").ceiling_ms(1), 10);
    }

    #[test]
    fn malformed_overrides_are_refused_with_the_part_named() {
        assert_eq!(
            RetryOverrides::parse("", KINDS).unwrap(),
            RetryOverrides::default()
        );
        for bad in [
            "query",
            "refnd=1/2",
            "query=abc/2",
            "query=1/0",
            "query=1/-3",
            "query=/",
            "query=1/2,query=3/4",
            "query=0/2",
            "query=9223372036854775807/",
            "query=18446744073709551615/",
        ] {
            let err = RetryOverrides::parse(bad, KINDS).unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
    }
}
