//! The circuit breaker of a webhook endpoint (issue 37, bulkheads; the closed / open /
//! half-open breaker of Nygard, *Release It!*). Plain rules over the state the store keeps
//! per endpoint, so every server decides alike:
//!
//! - **closed**: deliveries are attempted. The breaker keeps the outcomes of the endpoint's
//!   last `window` attempts; a failure opens it when, among them, the failures are at least
//!   `min_failures` **and** their share exceeds `failure_share_pct` percent. A failure rate,
//!   not a run: a flaky receiver (a fault now and then, even several in a row) keeps its
//!   breaker closed, a dead one opens it after `min_failures` attempts.
//! - **open** until the end of a cool-down: the endpoint's deliveries wait until then without
//!   an attempt (no attempt spent, no worker held). The cool-down doubles with each opening in
//!   a row, from `base_cooldown_ms` up to `max_cooldown_ms`.
//! - **half-open** once the cool-down is over: one delivery takes the probe (a lease as long
//!   as an attempt may take), the others wait for its end. The probe's success closes the
//!   breaker with an empty window; its failure opens it again with the next, longer cool-down.

/// The most attempts the window may hold (the outcomes are one bit each in an `i64`).
pub const MAX_WINDOW: u32 = 62;

/// The breaker's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Attempts the failure rate is taken over: the endpoint's last ones (1..=[`MAX_WINDOW`]).
    pub window: u32,
    /// Failures in the window below which the breaker never opens (at least 1).
    pub min_failures: u32,
    /// The share of failures in the window (percent, 0..=100) that must be exceeded to open.
    pub failure_share_pct: u32,
    /// The first cool-down, ms.
    pub base_cooldown_ms: i64,
    /// The longest cool-down, ms.
    pub max_cooldown_ms: i64,
}

impl Default for BreakerPolicy {
    /// Of the last 20 attempts, at least 5 failed and more than 50%; 30 s, doubling, up to
    /// 10 min.
    fn default() -> Self {
        BreakerPolicy {
            window: 20,
            min_failures: 5,
            failure_share_pct: 50,
            base_cooldown_ms: 30_000,
            max_cooldown_ms: 600_000,
        }
    }
}

/// One endpoint's breaker as stored (the default: closed, no attempts in the window).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BreakerState {
    /// Attempts in the window (at most the policy's `window`).
    pub attempts: i64,
    /// Their outcomes, one bit each, the latest in bit 0: 1 a failure, 0 a success.
    pub recent: i64,
    /// Failures in the window (the ones in `recent`), kept beside it for operators' queries.
    pub failures: i64,
    /// Openings in a row without a success between.
    pub opens: i64,
    /// None while closed; the end of the cool-down (epoch ms UTC) while open.
    pub open_until: Option<i64>,
    /// While half-open: the probe's lease (epoch ms UTC).
    pub probe_until: Option<i64>,
    /// None while closed; when it opened (epoch ms UTC): the first opening of the current run
    /// of openings, kept through failed probes.
    pub opened_at: Option<i64>,
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
    /// How long it has been not closed at `now` (open or half-open since its first opening
    /// of this run), ms; None while closed.
    pub fn held_ms(&self, now: i64) -> Option<i64> {
        self.opened_at.map(|t| now.saturating_sub(t).max(0))
    }

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

    /// The window with one more outcome: the last `window` attempts, `failed` the latest.
    fn pushed(&self, s: &BreakerState, failed: bool) -> BreakerState {
        let window = self.window.clamp(1, MAX_WINDOW);
        let mask = (1_i64 << window) - 1;
        let recent = ((s.recent << 1) | i64::from(failed)) & mask;
        BreakerState {
            attempts: s.attempts.saturating_add(1).clamp(1, i64::from(window)),
            recent,
            failures: i64::from(recent.count_ones()),
            ..*s
        }
    }

    /// Whether a closed breaker's window `s` opens it: at least `min_failures` failures, and
    /// more than `failure_share_pct` percent of its attempts.
    pub fn trips(&self, s: &BreakerState) -> bool {
        s.failures >= i64::from(self.min_failures.max(1))
            && s.failures.saturating_mul(100)
                > i64::from(self.failure_share_pct.min(100)).saturating_mul(s.attempts)
    }

    /// The breaker after an attempt that ended at `now`, a success or not. A success closes
    /// an open breaker with an empty window (the probe's, or a straggler's: the endpoint
    /// answers). A failure after the cool-down (the probe's) reopens with the next cool-down;
    /// one during it (an attempt that began before the opening) changes only the window.
    pub fn after(&self, s: &BreakerState, success: bool, now: i64) -> BreakerState {
        if success && s.open_until.is_some() {
            return BreakerState::default();
        }
        let next = self.pushed(s, !success);
        let reopen = |opens: i64| BreakerState {
            opens,
            open_until: Some(now.saturating_add(self.cooldown_ms(opens))),
            probe_until: None,
            opened_at: s.opened_at.or(Some(now)),
            ..next
        };
        match s.open_until {
            Some(t) if now >= t => reopen(s.opens.saturating_add(1)),
            Some(_) => next,
            None if !success && self.trips(&next) => reopen(s.opens.saturating_add(1)),
            None => next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: BreakerPolicy = BreakerPolicy {
        window: 20,
        min_failures: 5,
        failure_share_pct: 50,
        base_cooldown_ms: 30_000,
        max_cooldown_ms: 600_000,
    };

    /// The breaker after `outcomes` (true: a failure), one per ms from 0.
    fn run(outcomes: impl IntoIterator<Item = bool>) -> (BreakerState, Option<usize>) {
        let mut s = BreakerState::default();
        let mut opened_at = None;
        for (i, failed) in outcomes.into_iter().enumerate() {
            s = P.after(&s, !failed, i as i64);
            if opened_at.is_none() && s.open_until.is_some() {
                opened_at = Some(i);
            }
        }
        (s, opened_at)
    }

    #[test]
    fn a_dead_receiver_opens_the_breaker_at_the_fifth_failure() {
        let (s, opened_at) = run([true; 5]);
        assert_eq!(opened_at, Some(4));
        assert_eq!((s.failures, s.attempts, s.opens), (5, 5, 1));
        assert_eq!(s.open_until, Some(4 + 30_000));
        assert_eq!(s.opened_at, Some(4));
        assert_eq!(P.gate(&s, 10), Gate::WaitUntil(30_004));
        assert_eq!(s.view(10), BreakerView::Open(30_004));
        assert_eq!(s.view(30_004), BreakerView::HalfOpen);
    }

    #[test]
    fn a_flaky_receiver_never_opens_it_even_with_failures_in_a_row() {
        // 37.5% failures, five and six in a row among them, over 1,000 attempts.
        let pattern = [
            true, true, true, true, true, false, false, false, false, false, //
            false, false, false, false, true, true, true, false, false, false, //
            true, true, true, true, true, true, false, false, false, false, //
            false, false, false, false, false, false, false, false, false, true,
        ];
        let (s, opened_at) = run(pattern.iter().copied().cycle().skip(5).take(1_000));
        assert_eq!(opened_at, None, "{s:?}");
        assert_eq!(P.gate(&s, 1_000), Gate::Pass);
        // Exactly half failing is not more than half either.
        let (_, half) = run([false, true].iter().copied().cycle().take(1_000));
        assert_eq!(half, None);
    }

    #[test]
    fn a_receiver_that_turns_bad_opens_it_once_failures_outnumber_the_window() {
        let healthy = std::iter::repeat_n(false, 40);
        let (s, opened_at) = run(healthy.chain(std::iter::repeat_n(true, 20)));
        // 11 failures of the last 20 is the first share above 50%.
        assert_eq!(opened_at, Some(40 + 10), "{s:?}");
    }

    #[test]
    fn fewer_than_the_minimum_failures_never_open_it() {
        let (s, opened_at) = run([true; 4]);
        assert_eq!(opened_at, None);
        assert_eq!((s.failures, s.attempts), (4, 4));
    }

    #[test]
    fn the_window_keeps_only_the_last_attempts() {
        let (s, _) = run(std::iter::repeat_n(false, 30).chain([true, false, true]));
        assert_eq!((s.attempts, s.failures, s.recent), (20, 2, 0b101));
        // A success on a full clean window changes nothing (no write needed).
        let (clean, _) = run([false; 25]);
        assert_eq!(P.after(&clean, true, 99), clean);
    }

    #[test]
    fn one_probe_after_the_cool_down_and_a_failed_probe_waits_longer() {
        let (open, _) = run([true; 5]);
        let open = BreakerState {
            open_until: Some(30_000),
            ..open
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
        assert_eq!(reopened.opened_at, Some(4), "held since the first opening");
        assert_eq!(reopened.held_ms(604), Some(600));
        assert_eq!(P.after(&probing, true, 32_000), BreakerState::default());
        assert_eq!(BreakerState::default().held_ms(32_000), None);
        // A straggler's failure during the cool-down does not extend it.
        let during = P.after(&open, false, 10_000);
        assert_eq!(during.open_until, Some(30_000));
        assert_eq!(during.opens, 1);
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
