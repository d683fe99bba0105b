//! Lanes: the bulkheads of the job queue (DESIGN.md "Connectors and lanes"; seed 000 §7.4 and
//! its pitfall 8; issue 37). Every job kind belongs to exactly one lane, and each lane has its
//! own claim loop, its own worker slots and so its own share of database connections
//! (`worker::lanes`), so a storm of refunds, a stalled channel or a merchant's hanging webhook
//! endpoints fill only their own lane.
//!
//! Within a lane the claim is fair between merchants: due jobs are ranked per merchant by age
//! (`ROW_NUMBER() OVER (PARTITION BY merchant ORDER BY run_at, id)`) and taken in rank order,
//! so a claim of `n` jobs takes each merchant's oldest due job before anyone's second (README
//! "Lanes and fairness").
//!
//! Plain data and arithmetic: no SQL, no clock of its own (the token bucket is given the time).

use serde::Serialize;

use super::jobs::JobKind;

/// A lane of the job queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// The payment's way forward: submit, query, capture, post the ledger batch.
    Forward,
    /// Money going back or a hold let go: refund, reversal, void, hold expiry.
    Compensation,
    /// Webhook deliveries.
    Delivery,
    /// Everything else (reconciliation imports, and any kind no other lane names).
    Background,
}

impl Lane {
    /// Every lane, in the order the console and the gauges list them.
    pub const ALL: [Lane; 4] = [
        Lane::Forward,
        Lane::Compensation,
        Lane::Delivery,
        Lane::Background,
    ];

    /// The lane's name: `forward`, `compensation`, `delivery`, `background` (the `lane` label
    /// of the `converge_lane_*` gauges, the flags' names).
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Forward => "forward",
            Lane::Compensation => "compensation",
            Lane::Delivery => "delivery",
            Lane::Background => "background",
        }
    }

    /// The lane named `name`, if any.
    pub fn parse(name: &str) -> Option<Lane> {
        Lane::ALL.into_iter().find(|l| l.as_str() == name)
    }

    /// The job kinds this lane runs (each kind is in exactly one lane: [`JobKind::lane`]).
    pub fn kinds(self) -> Vec<JobKind> {
        JobKind::ALL
            .into_iter()
            .filter(|k| k.lane() == self)
            .collect()
    }

    /// Whether this lane also takes jobs of kinds no lane names (stored names this build does
    /// not know): the background lane, so such a job still reaches its handler, which sends
    /// it to the error pool instead of leaving it due for ever.
    pub fn takes_unknown_kinds(self) -> bool {
        self == Lane::Background
    }
}

impl JobKind {
    /// The lane that runs jobs of this kind: the one place kinds are assigned to lanes.
    pub fn lane(self) -> Lane {
        match self {
            JobKind::Submit | JobKind::Query | JobKind::Capture | JobKind::PostLedger => {
                Lane::Forward
            }
            JobKind::Refund | JobKind::Reverse | JobKind::VoidHold | JobKind::ExpireHold => {
                Lane::Compensation
            }
            JobKind::Webhook => Lane::Delivery,
            JobKind::Reconcile => Lane::Background,
        }
    }
}

/// A token bucket: up to `burst` tokens, refilled at `rate_per_sec` tokens a second, taken
/// whole. The compensation lane's claim takes no more jobs than it has tokens, so refunds,
/// reversals and voids reach the channel at most at that rate (plus the burst) however many
/// are due. Time is given by the caller (epoch ms), so tests drive it with a manual clock.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_per_sec: f64,
    burst: f64,
    tokens: f64,
    last_ms: Option<i64>,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `rate_per_sec` a second. A rate of 0 or
    /// less means no limit ([`take`](Self::take) grants all it is asked); a burst below 1
    /// is taken as 1, so some job always gets through eventually.
    pub fn new(rate_per_sec: f64, burst: f64) -> Self {
        let burst = burst.max(1.0);
        TokenBucket {
            rate_per_sec,
            burst,
            tokens: burst,
            last_ms: None,
        }
    }

    /// Whether the bucket limits anything.
    pub fn is_limited(&self) -> bool {
        self.rate_per_sec > 0.0
    }

    /// The configured rate, tokens a second (0: unlimited).
    pub fn rate_per_sec(&self) -> f64 {
        self.rate_per_sec.max(0.0)
    }

    fn refill(&mut self, now_ms: i64) {
        if let Some(last) = self.last_ms {
            // A clock that went backwards adds nothing (and takes nothing away).
            let elapsed = now_ms.saturating_sub(last).max(0) as f64 / 1000.0;
            self.tokens = (self.tokens + elapsed * self.rate_per_sec).min(self.burst);
        }
        self.last_ms = Some(self.last_ms.map_or(now_ms, |l| l.max(now_ms)));
    }

    /// How many whole tokens are there at `now_ms` (at most `want`), without taking them.
    pub fn available(&mut self, want: usize, now_ms: i64) -> usize {
        if !self.is_limited() {
            return want;
        }
        self.refill(now_ms);
        (self.tokens.floor() as usize).min(want)
    }

    /// Takes up to `want` whole tokens at `now_ms`; returns how many were taken.
    pub fn take(&mut self, want: usize, now_ms: i64) -> usize {
        let n = self.available(want, now_ms);
        if self.is_limited() {
            self.tokens -= n as f64;
        }
        n
    }

    /// Gives back `n` tokens taken but not used (a claim that found fewer jobs than it was
    /// allowed), never above the burst.
    pub fn give_back(&mut self, n: usize) {
        if self.is_limited() {
            self.tokens = (self.tokens + n as f64).min(self.burst);
        }
    }

    /// Milliseconds until one whole token is there at `now_ms` (0 when one is).
    pub fn wait_ms(&mut self, now_ms: i64) -> u64 {
        if !self.is_limited() {
            return 0;
        }
        self.refill(now_ms);
        if self.tokens >= 1.0 {
            return 0;
        }
        ((1.0 - self.tokens) / self.rate_per_sec * 1000.0).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_in_exactly_one_lane() {
        for k in JobKind::ALL {
            let lanes: Vec<Lane> = Lane::ALL
                .into_iter()
                .filter(|l| l.kinds().contains(&k))
                .collect();
            assert_eq!(lanes, vec![k.lane()], "{k:?}");
        }
    }

    #[test]
    fn the_lanes_hold_the_kinds_the_issue_names() {
        let names = |l: Lane| l.kinds().iter().map(|k| k.as_str()).collect::<Vec<_>>();
        assert_eq!(
            names(Lane::Forward),
            ["submit", "query", "post_ledger", "capture"]
        );
        assert_eq!(
            names(Lane::Compensation),
            ["refund", "reverse", "void_hold", "expire_hold"]
        );
        assert_eq!(names(Lane::Delivery), ["webhook"]);
        assert_eq!(names(Lane::Background), ["reconcile"]);
    }

    #[test]
    fn lane_names_round_trip() {
        for l in Lane::ALL {
            assert_eq!(Lane::parse(l.as_str()), Some(l));
        }
        assert_eq!(Lane::parse("fast"), None);
    }

    #[test]
    fn the_token_bucket_bounds_claims_per_second_under_an_injected_clock() {
        let mut b = TokenBucket::new(50.0, 50.0);
        let start = 1_000_000;
        // A full bucket grants its burst at once, then nothing more at the same instant.
        assert_eq!(b.take(200, start), 50);
        assert_eq!(b.take(200, start), 0);
        // 100 ms later: 5 more tokens.
        assert_eq!(b.take(200, start + 100), 5);
        // Over ten more seconds of claims every 10 ms, no more than rate x time is granted.
        let mut granted = 0;
        for step in 1..=1_000 {
            granted += b.take(200, start + 100 + step * 10);
        }
        assert_eq!(granted, 500, "50 a second for 10 s");
    }

    #[test]
    fn the_token_bucket_never_grows_past_its_burst_and_returns_unused_tokens() {
        let mut b = TokenBucket::new(10.0, 20.0);
        assert_eq!(b.take(5, 0), 5);
        b.give_back(5);
        // An hour idle still leaves only the burst.
        assert_eq!(b.take(1_000, 3_600_000), 20);
        b.give_back(100);
        assert_eq!(b.available(1_000, 3_600_000), 20);
    }

    #[test]
    fn the_token_bucket_says_how_long_until_the_next_token() {
        let mut b = TokenBucket::new(4.0, 1.0);
        assert_eq!(b.wait_ms(0), 0);
        assert_eq!(b.take(1, 0), 1);
        assert_eq!(b.wait_ms(0), 250);
        assert_eq!(b.wait_ms(100), 150);
        assert_eq!(b.take(1, 250), 1);
    }

    #[test]
    fn a_rate_of_zero_means_no_limit_and_a_clock_going_back_adds_nothing() {
        let mut free = TokenBucket::new(0.0, 1.0);
        assert_eq!(free.take(10_000, 0), 10_000);
        let mut b = TokenBucket::new(1.0, 1.0);
        assert_eq!(b.take(1, 10_000), 1);
        assert_eq!(b.take(1, 5_000), 0);
        assert_eq!(b.take(1, 10_999), 0);
        assert_eq!(b.take(1, 11_000), 1);
    }
}
