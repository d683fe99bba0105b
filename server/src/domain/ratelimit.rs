//! A sliding-window limiter counted per key in this process: bulk retries and webhook
//! recoveries per user. (Sign-in attempts are counted in the database, so that servers
//! sharing it share the limits: see [`super::throttle`].)

use std::collections::{HashMap, VecDeque};

/// At most `max` events per key in any `window_ms` milliseconds.
#[derive(Debug)]
pub struct RateLimiter {
    max: usize,
    window_ms: i64,
    events: HashMap<String, VecDeque<i64>>,
}

impl RateLimiter {
    /// A limiter allowing `max` events per `window_ms`.
    pub fn new(max: usize, window_ms: i64) -> Self {
        RateLimiter {
            max,
            window_ms,
            events: HashMap::new(),
        }
    }

    /// Records an event for `key` at `now` (epoch ms) if allowed; returns false (and records
    /// nothing) when the key is over its limit.
    pub fn try_acquire(&mut self, key: &str, now: i64) -> bool {
        let q = self.events.entry(key.to_string()).or_default();
        while q.front().is_some_and(|t| *t <= now - self.window_ms) {
            q.pop_front();
        }
        if q.len() >= self.max {
            return false;
        }
        q.push_back(now);
        // Bound memory: forget keys with nothing in the window.
        if self.events.len() > 10_000 {
            let cutoff = now - self.window_ms;
            self.events
                .retain(|_, q| q.back().is_some_and(|t| *t > cutoff));
        }
        true
    }

    /// Seconds until `key` may try again (0 when it may now).
    pub fn retry_after_secs(&self, key: &str, now: i64) -> u64 {
        match self.events.get(key) {
            Some(q) if q.len() >= self.max => {
                let oldest = q.front().copied().unwrap_or(now);
                (((oldest + self.window_ms - now).max(0) + 999) / 1000) as u64
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_max_per_window_then_refuses_until_it_slides() {
        let mut l = RateLimiter::new(3, 1_000);
        assert!(l.try_acquire("a", 0));
        assert!(l.try_acquire("a", 10));
        assert!(l.try_acquire("a", 20));
        assert!(!l.try_acquire("a", 30));
        assert!(l.try_acquire("b", 30), "keys are independent");
        assert_eq!(l.retry_after_secs("a", 30), 1);
        assert!(l.try_acquire("a", 1_001));
    }
}
