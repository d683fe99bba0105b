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
}
