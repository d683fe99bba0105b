//! The circuit breaker of a webhook endpoint (issue 37, bulkheads; the closed / open /
//! half-open breaker of Nygard, *Release It!*). Plain rules over the state the store keeps
//! per endpoint, so every server decides alike:
//!
//! - **closed**: deliveries are attempted. Each failed attempt adds to a run of failures, a
//!   success ends it; `failures` failures in a row open the breaker.
//! - **open** until the end of a cool-down: the endpoint's deliveries wait until then without
//!   an attempt (no attempt spent, no worker held). The cool-down doubles with each opening in
//!   a row, from `base_cooldown_ms` up to `max_cooldown_ms`.
//! - **half-open** once the cool-down is over: one delivery takes the probe (a lease as long
//!   as an attempt may take), the others wait for its end. The probe's success closes the
//!   breaker; its failure opens it again with the next, longer cool-down.

/// The breaker's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Failed attempts in a row that open the breaker (at least 1).
    pub failures: u32,
    /// The first cool-down, ms.
    pub base_cooldown_ms: i64,
    /// The longest cool-down, ms.
    pub max_cooldown_ms: i64,
}

impl Default for BreakerPolicy {
    /// 5 failures in a row; 30 s, doubling, up to 10 min.
    fn default() -> Self {
        BreakerPolicy {
            failures: 5,
            base_cooldown_ms: 30_000,
            max_cooldown_ms: 600_000,
        }
    }
}

/// One endpoint's breaker as stored (the default: closed, no failures).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BreakerState {
    /// Failed attempts in a row.
    pub failures: i64,
    /// Openings in a row without a success between.
    pub opens: i64,
    /// None while closed; the end of the cool-down (epoch ms UTC) while open.
    pub open_until: Option<i64>,
    /// While half-open: the probe's lease (epoch ms UTC).
    pub probe_until: Option<i64>,
}

/// What a delivery may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Closed: attempt.
    Pass,
    /// Half-open and no probe in flight: take the probe, then attempt.
    Probe,
    /// Open, or a probe in flight: wait until this time (epoch ms UTC) without an attempt.
    WaitUntil(i64),
}

/// The breaker as operators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerView {
    /// Attempts go ahead.
    Closed,
    /// Deliveries wait until this time (epoch ms UTC).
    Open(i64),
    /// The cool-down is over: the next delivery is the probe (or it is in flight).
    HalfOpen,
}

impl BreakerState {
    /// How it looks at `now`.
    pub fn view(&self, now: i64) -> BreakerView {
        match self.open_until {
            None => BreakerView::Closed,
            Some(t) if now < t => BreakerView::Open(t),
            Some(_) => BreakerView::HalfOpen,
        }
    }
}

impl BreakerPolicy {
    /// The cool-down of the `opens`-th opening in a row (1 for the first), ms:
    /// `base * 2^(opens-1)`, at most `max_cooldown_ms`.
    pub fn cooldown_ms(&self, opens: i64) -> i64 {
        let doublings = u32::try_from(opens.saturating_sub(1).clamp(0, 62)).unwrap_or(62);
        self.base_cooldown_ms
            .max(1)
            .saturating_mul(1_i64.checked_shl(doublings).unwrap_or(i64::MAX))
            .min(self.max_cooldown_ms.max(self.base_cooldown_ms))
    }

    /// What a delivery of an endpoint whose breaker is `s` may do at `now`.
    pub fn gate(&self, s: &BreakerState, now: i64) -> Gate {
        match (s.open_until, s.probe_until) {
            (None, _) => Gate::Pass,
            (Some(t), _) if now < t => Gate::WaitUntil(t),
            (Some(_), Some(p)) if now < p => Gate::WaitUntil(p),
            (Some(_), _) => Gate::Probe,
        }
    }

    /// The breaker after an attempt that ended at `now`, a success or not. A failure after
    /// the cool-down (the probe's) reopens with the next cool-down; one during it (an attempt
    /// that began before the opening) changes only the count.
    pub fn after(&self, s: &BreakerState, success: bool, now: i64) -> BreakerState {
        if success {
            return BreakerState::default();
        }
        let failures = s.failures.saturating_add(1);
        let reopen = |opens: i64| BreakerState {
            failures,
            opens,
            open_until: Some(now.saturating_add(self.cooldown_ms(opens))),
            probe_until: None,
        };
        match s.open_until {
            Some(t) if now >= t => reopen(s.opens.saturating_add(1)),
            Some(_) => BreakerState { failures, ..*s },
            None if failures >= i64::from(self.failures.max(1)) => {
                reopen(s.opens.saturating_add(1))
            }
            None => BreakerState { failures, ..*s },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: BreakerPolicy = BreakerPolicy {
        failures: 3,
        base_cooldown_ms: 30_000,
        max_cooldown_ms: 600_000,
    };

    #[test]
    fn failures_in_a_row_open_the_breaker_and_a_success_ends_the_run() {
        let mut s = BreakerState::default();
        s = P.after(&s, false, 0);
        s = P.after(&s, false, 1);
        assert_eq!(P.gate(&s, 2), Gate::Pass);
        let reset = P.after(&s, true, 2);
        assert_eq!(reset, BreakerState::default());
        s = P.after(&s, false, 10);
        assert_eq!(s.open_until, Some(30_010));
        assert_eq!(P.gate(&s, 20), Gate::WaitUntil(30_010));
        assert_eq!(s.view(20), BreakerView::Open(30_010));
        assert_eq!(s.view(30_010), BreakerView::HalfOpen);
    }

    #[test]
    fn one_probe_after_the_cool_down_and_a_failed_probe_waits_longer() {
        let open = BreakerState {
            failures: 3,
            opens: 1,
            open_until: Some(30_000),
            probe_until: None,
        };
        assert_eq!(P.gate(&open, 30_000), Gate::Probe);
        let probing = BreakerState {
            probe_until: Some(45_000),
            ..open
        };
        assert_eq!(P.gate(&probing, 31_000), Gate::WaitUntil(45_000));
        assert_eq!(P.gate(&probing, 45_000), Gate::Probe, "a lapsed probe");
        let reopened = P.after(&probing, false, 32_000);
        assert_eq!(reopened.opens, 2);
        assert_eq!(reopened.open_until, Some(32_000 + 60_000));
        assert_eq!(reopened.probe_until, None);
        assert_eq!(P.after(&probing, true, 32_000), BreakerState::default());
        // A straggler's failure during the cool-down does not extend it.
        let during = P.after(&open, false, 10_000);
        assert_eq!(during.open_until, Some(30_000));
    }

    #[test]
    fn the_cool_down_doubles_up_to_its_cap() {
        let waits: Vec<i64> = (1..=7).map(|n| P.cooldown_ms(n)).collect();
        assert_eq!(
            waits,
            [30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000]
        );
        assert_eq!(P.cooldown_ms(i64::MAX), 600_000);
    }
}
