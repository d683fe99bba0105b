//! What the sandbox does with a charge, chosen by the amount's last two digits or by seeded
//! fault injection (DESIGN.md "Sandbox channel" table and `--fault-rate F --seed N`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// The sandbox's behaviour for one channel key, fixed at the key's first attempt and stored,
/// so retries of the same key behave consistently (a 53 stays a timeout, a 56 counts attempts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Success, one `charge.succeeded` callback.
    Normal,
    /// Digits 51: explicit decline (402), stored as declined.
    Decline,
    /// Digits 52: charge committed, answer delayed by `slow_ms`.
    Slow,
    /// Digits 53: nothing committed, 504 after `hang_ms`, on every attempt.
    Timeout,
    /// Digits 54: charge committed, the connection is dropped mid-answer, no callback.
    Dropped,
    /// Digits 55: success, `charge.succeeded` delivered twice, then a stale `charge.failed`.
    DuplicateCallbacks,
    /// Digits 56: 500 on the first two attempts (nothing committed), then success.
    Error5xx,
    /// Digits 57: success, but the statement reports `amount + 1`.
    StatementAmount,
    /// Digits 58: success, but the charge is missing from the statement.
    StatementMissing,
}

impl Behaviour {
    /// The behaviour the DESIGN.md table assigns to `amount` (minor units) by `amount % 100`.
    pub fn for_amount(amount: i64) -> Self {
        match amount.rem_euclid(100) {
            51 => Self::Decline,
            52 => Self::Slow,
            53 => Self::Timeout,
            54 => Self::Dropped,
            55 => Self::DuplicateCallbacks,
            56 => Self::Error5xx,
            57 => Self::StatementAmount,
            58 => Self::StatementMissing,
            _ => Self::Normal,
        }
    }

    /// Stable name, as stored in the sandbox database and shown by `GET /attempts/{key}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Decline => "decline",
            Self::Slow => "slow",
            Self::Timeout => "timeout",
            Self::Dropped => "dropped",
            Self::DuplicateCallbacks => "duplicate_callbacks",
            Self::Error5xx => "error5xx",
            Self::StatementAmount => "statement_amount",
            Self::StatementMissing => "statement_missing",
        }
    }

    /// Inverse of [`Behaviour::as_str`]; an unknown name (a newer writer) reads as `Normal`.
    pub fn parse(s: &str) -> Self {
        [
            Self::Decline,
            Self::Slow,
            Self::Timeout,
            Self::Dropped,
            Self::DuplicateCallbacks,
            Self::Error5xx,
            Self::StatementAmount,
            Self::StatementMissing,
        ]
        .into_iter()
        .find(|b| b.as_str() == s)
        .unwrap_or(Self::Normal)
    }
}

/// Counts of injected faults by kind, as `GET /stats` reports them under `"faults"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FaultCounts {
    /// Injected 52-like slow answers.
    pub slow: u64,
    /// Injected 53-like timeouts.
    pub timeout: u64,
    /// Injected 54-like dropped connections.
    pub dropped: u64,
    /// Injected 56-like 5xx answers.
    pub error5xx: u64,
}

/// Seeded random faults: with probability `rate`, a key whose digits are "other" behaves as
/// one of 52/53/54/56, chosen by the same RNG (or always as `kind` when one is set). The RNG is
/// drawn once per new key, in the order the store sees new keys, so one seed and one request
/// order give one fault sequence. The setting can change while the sandbox runs
/// (`PUT /faults`): an outage drill turns a healthy channel into a failing one and back.
pub struct FaultInjector {
    state: Mutex<(FaultSetting, StdRng)>,
    counts: [AtomicU64; 4],
}

/// What the injector does with a new key of "other" digits: `rate` is the probability (0..=1)
/// of a fault, `kind` the fault's behaviour (`slow`, `timeout`, `dropped`, `error5xx`) or
/// `None` for a seeded draw among the four. Shown and set by `GET`/`PUT /faults`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FaultSetting {
    /// Probability of a fault, 0..=1.
    pub rate: f64,
    /// The one fault to inject, or `None` for a seeded mix.
    #[serde(serialize_with = "kind_name")]
    pub kind: Option<Behaviour>,
}

fn kind_name<S: serde::Serializer>(k: &Option<Behaviour>, s: S) -> Result<S::Ok, S::Error> {
    match k {
        Some(b) => s.serialize_some(b.as_str()),
        None => s.serialize_none(),
    }
}

impl FaultSetting {
    /// A checked setting. Errors (one line, for a 400): a rate outside 0..=1 or NaN, a kind
    /// that is not one of the four injectable faults.
    pub fn new(rate: f64, kind: Option<&str>) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&rate) {
            return Err(format!("rate {rate} must be between 0 and 1"));
        }
        let kind = match kind {
            None => None,
            Some(name) => Some(
                FAULT_KINDS
                    .into_iter()
                    .find(|b| b.as_str() == name)
                    .ok_or_else(|| {
                        format!("kind {name:?} is not one of slow, timeout, dropped, error5xx")
                    })?,
            ),
        };
        Ok(Self { rate, kind })
    }
}

const FAULT_KINDS: [Behaviour; 4] = [
    Behaviour::Slow,
    Behaviour::Timeout,
    Behaviour::Dropped,
    Behaviour::Error5xx,
];

impl FaultInjector {
    /// An injector faulting with probability `rate` (clamped to 0..=1; NaN means 0), seeded
    /// with `seed`.
    pub fn new(rate: f64, seed: u64) -> Self {
        let rate = if rate.is_nan() {
            0.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        Self {
            state: Mutex::new((
                FaultSetting { rate, kind: None },
                StdRng::seed_from_u64(seed),
            )),
            counts: Default::default(),
        }
    }

    /// The setting in force.
    pub fn setting(&self) -> FaultSetting {
        self.lock().0
    }

    /// Replaces the setting; keys seen before keep their behaviour (fixed at first attempt).
    pub fn set(&self, setting: FaultSetting) {
        self.lock().0 = setting;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (FaultSetting, StdRng)> {
        // A poisoned lock only means another request panicked mid-draw; the RNG state is
        // still a valid state, so keep going rather than take the sandbox down.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The behaviour for a key seen for the first time with `amount` (minor units).
    pub fn decide(&self, amount: i64) -> Behaviour {
        let by_digits = Behaviour::for_amount(amount);
        if by_digits != Behaviour::Normal {
            return by_digits;
        }
        let drawn = {
            let mut guard = self.lock();
            let (setting, rng) = &mut *guard;
            if setting.rate > 0.0 && rng.random::<f64>() < setting.rate {
                let i = match setting.kind {
                    Some(k) => FAULT_KINDS.iter().position(|f| *f == k).unwrap_or(0),
                    None => rng.random_range(0..FAULT_KINDS.len()),
                };
                Some(i)
            } else {
                None
            }
        };
        match drawn {
            Some(i) => {
                self.counts[i].fetch_add(1, Ordering::Relaxed);
                FAULT_KINDS[i]
            }
            None => Behaviour::Normal,
        }
    }

    /// Faults injected so far, by kind.
    pub fn counts(&self) -> FaultCounts {
        let c = |i: usize| self.counts[i].load(Ordering::Relaxed);
        FaultCounts {
            slow: c(0),
            timeout: c(1),
            dropped: c(2),
            error5xx: c(3),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_follow_the_design_table() {
        assert_eq!(Behaviour::for_amount(1051), Behaviour::Decline);
        assert_eq!(Behaviour::for_amount(52), Behaviour::Slow);
        assert_eq!(Behaviour::for_amount(153), Behaviour::Timeout);
        assert_eq!(Behaviour::for_amount(254), Behaviour::Dropped);
        assert_eq!(Behaviour::for_amount(355), Behaviour::DuplicateCallbacks);
        assert_eq!(Behaviour::for_amount(456), Behaviour::Error5xx);
        assert_eq!(Behaviour::for_amount(557), Behaviour::StatementAmount);
        assert_eq!(Behaviour::for_amount(658), Behaviour::StatementMissing);
        // -51 is 49 modulo 100: negative amounts never reach the store, but must not panic.
        for other in [0, 1, 50, 59, 100, 9999, -51] {
            assert_eq!(Behaviour::for_amount(other), Behaviour::Normal, "{other}");
        }
    }

    #[test]
    fn names_round_trip() {
        for a in 50..60 {
            let b = Behaviour::for_amount(a);
            assert_eq!(Behaviour::parse(b.as_str()), b);
        }
        assert_eq!(Behaviour::parse("???"), Behaviour::Normal);
    }

    #[test]
    fn same_seed_same_faults_and_digits_never_draw() {
        let run = |seed| {
            let f = FaultInjector::new(0.5, seed);
            let seq: Vec<_> = (0..200).map(|_| f.decide(1000)).collect();
            (seq, f.counts())
        };
        let (a, ca) = run(7);
        let (b, cb) = run(7);
        assert_eq!(a, b);
        assert_eq!(ca, cb);
        assert_ne!(a, run(8).0);
        let faults = a.iter().filter(|b| **b != Behaviour::Normal).count() as u64;
        assert_eq!(faults, ca.slow + ca.timeout + ca.dropped + ca.error5xx);
        assert!((50..150).contains(&faults), "{faults}");

        let f = FaultInjector::new(1.0, 7);
        assert_eq!(f.decide(1051), Behaviour::Decline);
        assert_eq!(f.counts(), FaultCounts::default());
    }

    #[test]
    fn a_set_kind_at_full_rate_faults_every_new_key_and_zero_heals() {
        let f = FaultInjector::new(0.0, 3);
        assert_eq!(f.decide(1000), Behaviour::Normal);
        f.set(FaultSetting::new(1.0, Some("error5xx")).unwrap());
        assert!((0..50).all(|_| f.decide(1000) == Behaviour::Error5xx));
        assert_eq!(f.counts().error5xx, 50);
        // Digits still decide their own amounts.
        assert_eq!(f.decide(1051), Behaviour::Decline);
        f.set(FaultSetting::new(0.0, None).unwrap());
        assert!((0..50).all(|_| f.decide(1000) == Behaviour::Normal));
    }

    #[test]
    fn a_bad_fault_setting_is_refused() {
        assert!(FaultSetting::new(1.5, None).is_err());
        assert!(FaultSetting::new(f64::NAN, None).is_err());
        assert!(FaultSetting::new(-0.1, None).is_err());
        let e = FaultSetting::new(0.5, Some("decline")).unwrap_err();
        assert!(e.contains("slow, timeout, dropped, error5xx"), "{e}");
        assert_eq!(
            FaultSetting::new(0.5, Some("timeout")).unwrap().kind,
            Some(Behaviour::Timeout)
        );
    }

    #[test]
    fn rate_zero_or_nan_never_faults() {
        for rate in [0.0, f64::NAN, -3.0] {
            let f = FaultInjector::new(rate, 1);
            assert!((0..100).all(|_| f.decide(1000) == Behaviour::Normal));
        }
    }
}
