//! A token bucket per key, counted in this process: the merchant API's rate limit per API key
//! (issue 37, bulkheads). Each key's bucket holds up to `burst` tokens and refills at
//! `rate_per_sec`; a request takes one token or is refused. Servers sharing a database do not
//! share buckets: with N servers behind a balancer a key may get up to N times the rate.

use std::collections::HashMap;

/// A bucket's shape: its size and its refill rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketPolicy {
    /// Tokens added per second (at least 1).
    pub rate_per_sec: u32,
    /// The most tokens a bucket holds: the longest run of requests allowed at once (at
    /// least 1).
    pub burst: u32,
}

impl BucketPolicy {
    /// Seconds a bucket takes to refill from empty, rounded up (at least 1): the window of
    /// the quota the `RateLimit-Policy` header names.
    pub fn window_secs(&self) -> u64 {
        u64::from(self.burst)
            .div_ceil(u64::from(self.rate_per_sec.max(1)))
            .max(1)
    }
}

/// What one request got from its key's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether it took a token (else it is refused).
    pub allowed: bool,
    /// Whole tokens left after it.
    pub remaining: u64,
    /// Seconds until the bucket is full again, rounded up (0 when full).
    pub reset_secs: u64,
    /// When refused: seconds until a token is there, rounded up, at least 1; else 0.
    pub retry_after_secs: u64,
}

/// Keys with a bucket kept before full ones are forgotten (a full bucket and no bucket are
/// the same thing, so forgetting one changes no decision).
const MAX_KEYS: usize = 100_000;

/// The buckets of every key seen, by key.
#[derive(Debug)]
pub struct TokenBuckets {
    policy: BucketPolicy,
    /// Tokens and the time (epoch ms) they were counted at, per key.
    buckets: HashMap<String, (f64, i64)>,
}

impl TokenBuckets {
    /// Empty: every key starts with a full bucket.
    pub fn new(policy: BucketPolicy) -> Self {
        TokenBuckets {
            policy: BucketPolicy {
                rate_per_sec: policy.rate_per_sec.max(1),
                burst: policy.burst.max(1),
            },
            buckets: HashMap::new(),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> BucketPolicy {
        self.policy
    }

    /// Takes one token from `key`'s bucket at `now` (epoch ms), or refuses when it has less
    /// than one. A clock that went back refills nothing.
    pub fn take(&mut self, key: &str, now: i64) -> Decision {
        let rate = f64::from(self.policy.rate_per_sec);
        let burst = f64::from(self.policy.burst);
        if self.buckets.len() >= MAX_KEYS && !self.buckets.contains_key(key) {
            self.forget_full(now);
        }
        let (tokens, at) = self.buckets.entry(key.to_string()).or_insert((burst, now));
        let elapsed = (now - *at).max(0) as f64 / 1000.0;
        *tokens = (*tokens + elapsed * rate).min(burst);
        *at = now.max(*at);
        let allowed = *tokens >= 1.0;
        if allowed {
            *tokens -= 1.0;
        }
        let secs = |missing: f64| (missing / rate).ceil().max(0.0) as u64;
        Decision {
            allowed,
            remaining: tokens.floor() as u64,
            reset_secs: secs(burst - *tokens),
            retry_after_secs: if allowed {
                0
            } else {
                secs(1.0 - *tokens).max(1)
            },
        }
    }

    fn forget_full(&mut self, now: i64) {
        let (rate, burst) = (
            f64::from(self.policy.rate_per_sec),
            f64::from(self.policy.burst),
        );
        self.buckets
            .retain(|_, (t, at)| *t + (now - *at).max(0) as f64 / 1000.0 * rate < burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_its_rate() {
        let mut b = TokenBuckets::new(BucketPolicy {
            rate_per_sec: 2,
            burst: 3,
        });
        for left in [2, 1, 0] {
            let d = b.take("k", 0);
            assert!(d.allowed);
            assert_eq!(d.remaining, left);
        }
        let refused = b.take("k", 0);
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_secs, 1);
        assert_eq!(refused.reset_secs, 2, "3 tokens at 2/s");
        assert!(b.take("other", 0).allowed, "keys are independent");
        assert!(!b.take("k", 400).allowed, "0.8 of a token");
        assert!(b.take("k", 500).allowed, "one token after 500 ms");
        assert!(b.take("k", 10_000).allowed);
        assert_eq!(b.take("k", 10_000).remaining, 1, "capped at the burst");
    }

    #[test]
    fn the_window_is_the_time_to_refill_from_empty() {
        let p = BucketPolicy {
            rate_per_sec: 200,
            burst: 400,
        };
        assert_eq!(p.window_secs(), 2);
        let p = BucketPolicy {
            rate_per_sec: 200,
            burst: 1,
        };
        assert_eq!(p.window_secs(), 1);
    }
}
