//! The simulated channel: converge's [`Connector`] contract in process, holding its charges,
//! refunds and fences in memory, with every answer and fault drawn from the seed.
//!
//! Faults, each per call and from [`Faults`]: an error before anything happened (a timeout
//! or 5xx whose request never reached the PSP), an answer lost after the effect (the charge
//! or refund is made, the core hears an error), and a crash after the effect (the process
//! dies while waiting for the answer: [`SimChannel::take_crash`]). Charges also send
//! callbacks, queued here for the callback actor to deliver late, twice or out of order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use converge_server::channel::{
    AuthorizeOutcome, CancelOutcome, CaptureOutcome, ChargeOutcome, Connector, HoldQueryOutcome,
    HoldStatus, QueryOutcome, RefundOutcome, Unsupported, VoidOutcome,
};
use converge_server::domain::clock::{Clock, ManualClock};
use converge_server::verify::{ChannelCharge, ChargeSource};
use tokio::sync::Notify;

use crate::rng::Rng;

/// How often each fault happens, per mille of the calls that can have it.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// An error before the request reached the PSP: nothing happened.
    pub error_before: u64,
    /// The effect happened, its answer was lost (an error).
    pub answer_lost: u64,
    /// The effect happened, then the process crashed waiting for the answer.
    pub crash_after: u64,
    /// A charge is declined.
    pub decline: u64,
    /// A charge sends a callback (then maybe a duplicate, at the same rate).
    pub callback: u64,
    /// A charge times out while its request is still on its way: the PSP gets it later
    /// ([`SimChannel::deliver_late`]), charging unless the key was fenced meanwhile.
    pub late: u64,
}

impl Faults {
    /// The default mix: every fault often enough that a few hundred payments meet each.
    pub fn standard() -> Self {
        Faults {
            error_before: 60,
            answer_lost: 60,
            crash_after: 20,
            decline: 100,
            callback: 500,
            late: 40,
        }
    }
}

/// A charge as the channel holds it.
#[derive(Debug, Clone)]
struct Charge {
    succeeded: bool,
    amount: i64,
    currency: String,
    attempts: i64,
    refunded: i64,
}

/// An authorization hold as the channel holds it (issue 34's connector contract, as the
/// sandbox keeps it: `server/src/channel/sandbox/holds.rs`).
#[derive(Debug, Clone)]
struct Hold {
    declined: bool,
    amount: i64,
    currency: String,
    captured: i64,
    closed: bool,
    voided: bool,
    expires_at_ms: i64,
    refunded: i64,
}

impl Hold {
    /// Where it stands at `now_ms`.
    fn status(&self, now_ms: i64) -> HoldStatus {
        if self.declined {
            HoldStatus::Declined
        } else if self.voided {
            HoldStatus::Voided
        } else if self.closed {
            HoldStatus::Captured
        } else if now_ms >= self.expires_at_ms {
            HoldStatus::Expired
        } else {
            HoldStatus::Authorized
        }
    }

    fn found(&self, now_ms: i64) -> HoldQueryOutcome {
        HoldQueryOutcome::Found {
            status: self.status(now_ms),
            amount: self.amount,
            captured: self.captured,
            currency: self.currency.clone(),
            expires_at_ms: self.expires_at_ms,
        }
    }
}

/// A callback the channel sent, waiting to be delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCallback {
    /// The channel's event id.
    pub event_id: String,
    /// `charge.succeeded` or `charge.failed`.
    pub kind: String,
    /// The payment's channel key.
    pub channel_key: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
}

#[derive(Debug)]
struct State {
    rng: Rng,
    faults: Faults,
    charges: BTreeMap<String, Charge>,
    /// Authorization holds by channel key (one key, one payment: never also a charge).
    holds: BTreeMap<String, Hold>,
    /// capture key -> (channel key, amount, last).
    captures: BTreeMap<String, (String, i64, bool)>,
    /// refund key -> (channel key, amount).
    refunds: BTreeMap<String, (String, i64)>,
    fenced: BTreeSet<String>,
    callbacks: Vec<PendingCallback>,
    /// Charge requests on their way (key, amount, currency), in the order sent.
    late: Vec<(String, i64, String)>,
    /// While set, the charge path is down: every charge times out (some still arrive late).
    /// Queries, cancels and refunds still answer.
    outage: bool,
    events: u64,
    /// Keys whose charge was made or changed since [`SimChannel::take_touched`] last ran.
    touched: BTreeSet<String>,
    /// What the channel did, for the trace, drained by the simulator after each step.
    log: Vec<String>,
    crashed: bool,
}

/// The simulated channel (cheap to clone: clones share it).
#[derive(Debug, Clone)]
pub struct SimChannel {
    state: Arc<Mutex<State>>,
    crash: Arc<Notify>,
    clock: ManualClock,
    /// What verify asks of the holds: the same state, without faults.
    holds_view: HoldsView,
}

/// The channel's holds as `converge verify` reads them (invariant 7): the same state as the
/// [`SimChannel`], answered without a fault drawn or a trace line written, so a check
/// changes nothing the seed decides.
#[derive(Debug, Clone)]
pub struct HoldsView {
    state: Arc<Mutex<State>>,
    clock: ManualClock,
}

/// What a call draws: the fault that happens to it.
enum Fate {
    Before,
    Late,
    Lost,
    Crash,
    Answer,
}

impl SimChannel {
    /// A channel drawing from `rng` with `faults`; holds lapse by `clock`.
    pub fn new(rng: Rng, faults: Faults, clock: ManualClock) -> Self {
        let state = Arc::new(Mutex::new(State {
            rng,
            faults,
            charges: BTreeMap::new(),
            holds: BTreeMap::new(),
            captures: BTreeMap::new(),
            refunds: BTreeMap::new(),
            fenced: BTreeSet::new(),
            callbacks: Vec::new(),
            late: Vec::new(),
            outage: false,
            events: 0,
            touched: BTreeSet::new(),
            log: Vec::new(),
            crashed: false,
        }));
        SimChannel {
            holds_view: HoldsView {
                state: state.clone(),
                clock: clock.clone(),
            },
            state,
            crash: Arc::new(Notify::new()),
            clock,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the channel holds a succeeded charge under `key`, as an operator reads it on
    /// the PSP's dashboard (no fault, no trace line): the evidence of a forced transition.
    pub fn charged(&self, key: &str) -> bool {
        self.lock().charges.get(key).is_some_and(|c| c.succeeded)
    }

    /// Resolves when a call crashed the process (the caller drops what it was running).
    pub async fn crashed(&self) {
        self.crash.notified().await;
    }

    /// Ends the process now, outside a channel call (a crash point the simulator chose):
    /// `line` goes to the trace, and [`crashed`](Self::crashed) resolves.
    pub fn crash_process(&self, line: &str) {
        {
            let mut st = self.lock();
            st.log.push(line.into());
            st.crashed = true;
        }
        self.crash.notify_one();
    }

    /// Adds `line` to the trace under the current step.
    pub fn note(&self, line: &str) {
        self.lock().log.push(line.into());
    }

    /// Whether a call crashed the process since the last call of this (and forgets it).
    pub fn take_crash(&self) -> bool {
        std::mem::take(&mut self.lock().crashed)
    }

    /// Sets the fault rates (the quiescence phase keeps them; tests may lower them).
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// The channel's lines for the trace since the last call.
    pub fn drain_log(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().log)
    }

    /// Starts or ends an outage of the charge path.
    pub fn set_outage(&self, down: bool) {
        let mut st = self.lock();
        st.outage = down;
        st.log.push(format!(
            "channel charge path {}",
            if down { "down" } else { "up" }
        ));
    }

    /// Charge requests still on their way.
    pub fn late_requests(&self) -> usize {
        self.lock().late.len()
    }

    /// The charge request at `index` (modulo those on their way) reaches the PSP now: it
    /// charges (or is declined) unless its key was fenced first. Returns the trace's line.
    pub fn deliver_late(&self, index: u64) -> Option<String> {
        let mut st = self.lock();
        if st.late.is_empty() {
            return None;
        }
        let i = usize::try_from(index % st.late.len() as u64).unwrap_or(0);
        let (key, amount, currency) = st.late.remove(i);
        let what = match Self::apply_charge(&mut st, &key, amount, &currency) {
            Ok(c) if c.succeeded => "charged",
            Ok(_) => "declined",
            Err(_) => "refused: fenced",
        };
        Some(format!(
            "late charge {} reaches the channel: {what}",
            short(&key)
        ))
    }

    /// A charge request reaching the PSP: the key's charge (made now, or the one it has),
    /// or Err for a fenced key without one.
    fn apply_charge(st: &mut State, key: &str, amount: i64, currency: &str) -> Result<Charge, ()> {
        let rate = st.faults.decline;
        let decline = st.rng.chance(rate);
        let c = match st.charges.get(key).cloned() {
            Some(mut c) => {
                c.attempts += 1;
                c
            }
            None if st.fenced.contains(key) => return Err(()),
            None => {
                let c = Charge {
                    succeeded: !decline,
                    amount,
                    currency: currency.into(),
                    attempts: 1,
                    refunded: 0,
                };
                Self::queue_callbacks(st, key, &c);
                c
            }
        };
        st.charges.insert(key.into(), c.clone());
        st.touched.insert(key.into());
        Ok(c)
    }

    /// The keys whose charge was made or changed (an attempt, a refund) since the last call:
    /// the incremental check's channel side ([`converge_server::verify::Scope::Changed`]).
    pub fn take_touched(&self) -> BTreeSet<String> {
        std::mem::take(&mut self.lock().touched)
    }

    /// Callbacks sent and not yet delivered.
    pub fn pending_callbacks(&self) -> usize {
        self.lock().callbacks.len()
    }

    /// Takes the callback at `index` (modulo the queue: reordering), keeping a copy queued
    /// when `duplicate`.
    pub fn take_callback(&self, index: u64, duplicate: bool) -> Option<PendingCallback> {
        let mut st = self.lock();
        if st.callbacks.is_empty() {
            return None;
        }
        let i = usize::try_from(index % st.callbacks.len() as u64).unwrap_or(0);
        Some(if duplicate {
            st.callbacks[i].clone()
        } else {
            st.callbacks.remove(i)
        })
    }

    /// Draws the fate of a call that has an effect.
    fn fate(st: &mut State) -> Fate {
        let f = st.faults;
        if st.rng.chance(f.late) {
            Fate::Late
        } else if st.rng.chance(f.error_before) {
            Fate::Before
        } else if st.rng.chance(f.answer_lost) {
            Fate::Lost
        } else if st.rng.chance(f.crash_after) {
            Fate::Crash
        } else {
            Fate::Answer
        }
    }

    /// A hold call with an effect (authorize, capture, void): its fate drawn as a charge's
    /// (an outage refuses it before the channel; a late arrival is not simulated for holds:
    /// an error before), `apply` run on the state at the clock's time, its line traced.
    /// The effect stands whatever the fate; the core hears `error` when the answer is lost.
    async fn hold_call<T: std::fmt::Debug>(
        &self,
        what: &str,
        key: &str,
        apply: impl FnOnce(&mut State, i64) -> T,
        error: impl Fn(&str) -> T,
    ) -> T {
        let (fate, outcome) = {
            let mut st = self.lock();
            let fate = Self::fate(&mut st);
            // An outage takes the charge path down (authorize, capture), not voids.
            let down = st.outage && what != "void";
            if down || matches!(fate, Fate::Before | Fate::Late) {
                st.log
                    .push(format!("channel {what} {} error before", short(key)));
                return error("timeout before the channel");
            }
            let outcome = apply(&mut st, self.clock.now_ms());
            st.touched.insert(key.into());
            let how = match fate {
                Fate::Lost => " answer lost",
                Fate::Crash => " crash",
                _ => "",
            };
            st.log
                .push(format!("channel {what} {} {outcome:?}{how}", short(key)));
            (fate, outcome)
        };
        match fate {
            Fate::Lost => error("answer lost after the effect"),
            Fate::Crash => self.crash_now().await,
            _ => outcome,
        }
    }

    /// Ends a call whose effect happened but whose answer the core never hears.
    async fn crash_now(&self) -> ! {
        self.lock().crashed = true;
        self.crash.notify_one();
        std::future::pending::<()>().await;
        unreachable!("a pending future never resolves")
    }

    fn queue_callbacks(st: &mut State, key: &str, c: &Charge) {
        let f = st.faults;
        let mut copies = 0;
        while copies < 2 && st.rng.chance(f.callback) {
            copies += 1;
        }
        if copies == 0 {
            return;
        }
        st.events += 1;
        let cb = PendingCallback {
            event_id: format!("evt_{}", st.events),
            kind: if c.succeeded {
                "charge.succeeded"
            } else {
                "charge.failed"
            }
            .into(),
            channel_key: key.into(),
            amount: c.amount,
            currency: c.currency.clone(),
        };
        for _ in 0..copies {
            st.callbacks.push(cb.clone());
        }
    }
}

fn short(key: &str) -> &str {
    key.get(..9).unwrap_or(key)
}

#[async_trait]
impl Connector for SimChannel {
    async fn charge(&self, channel_key: &str, amount: i64, currency: &str) -> ChargeOutcome {
        let (fate, outcome) = {
            let mut st = self.lock();
            let mut fate = Self::fate(&mut st);
            if st.outage {
                fate = if st.rng.chance(500) {
                    Fate::Late
                } else {
                    Fate::Before
                };
            }
            match fate {
                Fate::Before => {
                    st.log.push(format!(
                        "channel charge {} error before",
                        short(channel_key)
                    ));
                    return ChargeOutcome::Error {
                        detail: "timeout before the channel".into(),
                    };
                }
                Fate::Late => {
                    st.late.push((channel_key.into(), amount, currency.into()));
                    st.log.push(format!(
                        "channel charge {} timed out, request on its way",
                        short(channel_key)
                    ));
                    return ChargeOutcome::Error {
                        detail: "timeout".into(),
                    };
                }
                _ => {}
            }
            let Ok(c) = Self::apply_charge(&mut st, channel_key, amount, currency) else {
                st.log.push(format!(
                    "channel charge {} refused: fenced",
                    short(channel_key)
                ));
                return ChargeOutcome::Declined {
                    reason: "cancelled".into(),
                };
            };
            let outcome = if c.succeeded {
                ChargeOutcome::Succeeded {
                    amount: c.amount,
                    currency: c.currency.clone(),
                }
            } else {
                ChargeOutcome::Declined {
                    reason: "declined".into(),
                }
            };
            let what = if c.succeeded { "charged" } else { "declined" };
            let how = match fate {
                Fate::Lost => " answer lost",
                Fate::Crash => " crash",
                _ => "",
            };
            st.log
                .push(format!("channel charge {} {what}{how}", short(channel_key)));
            (fate, outcome)
        };
        match fate {
            Fate::Lost => ChargeOutcome::Error {
                detail: "answer lost after the charge".into(),
            },
            Fate::Crash => self.crash_now().await,
            _ => outcome,
        }
    }

    async fn query(&self, channel_key: &str) -> QueryOutcome {
        let mut st = self.lock();
        let rate = st.faults.error_before;
        if st.rng.chance(rate) {
            st.log
                .push(format!("channel query {} error", short(channel_key)));
            return QueryOutcome::Error {
                detail: "query timed out".into(),
            };
        }
        let answer = match st.charges.get(channel_key) {
            Some(c) if c.succeeded => QueryOutcome::Succeeded {
                amount: c.amount,
                currency: c.currency.clone(),
            },
            Some(_) => QueryOutcome::Declined {
                reason: "declined".into(),
            },
            None if st.fenced.contains(channel_key) => QueryOutcome::Cancelled,
            None => QueryOutcome::NotFound,
        };
        st.log
            .push(format!("channel query {} {answer:?}", short(channel_key)));
        answer
    }

    async fn cancel(&self, channel_key: &str) -> CancelOutcome {
        let mut st = self.lock();
        let rate = st.faults.error_before;
        if st.rng.chance(rate) {
            st.log
                .push(format!("channel cancel {} error", short(channel_key)));
            return CancelOutcome::Error {
                detail: "cancel timed out".into(),
            };
        }
        let answer = match st.charges.get(channel_key) {
            Some(c) if c.succeeded => CancelOutcome::AlreadyCharged {
                amount: c.amount,
                currency: c.currency.clone(),
            },
            _ => {
                st.fenced.insert(channel_key.into());
                CancelOutcome::Cancelled
            }
        };
        st.log
            .push(format!("channel cancel {} {answer:?}", short(channel_key)));
        answer
    }

    async fn refund(&self, channel_key: &str, refund_key: &str, amount: i64) -> RefundOutcome {
        let (fate, outcome) = {
            let mut st = self.lock();
            let fate = Self::fate(&mut st);
            // Refund requests arriving late are not simulated yet: a late draw is an error
            // before the channel.
            if let Fate::Before | Fate::Late = fate {
                st.log
                    .push(format!("channel refund {} error before", short(refund_key)));
                return RefundOutcome::Error {
                    detail: "timeout before the channel".into(),
                };
            }
            let outcome = refund_at(&mut st, channel_key, refund_key, amount);
            let how = match fate {
                Fate::Lost => " answer lost",
                Fate::Crash => " crash",
                _ => "",
            };
            st.log.push(format!(
                "channel refund {} {outcome:?}{how}",
                short(refund_key)
            ));
            (fate, outcome)
        };
        match fate {
            Fate::Lost => RefundOutcome::Error {
                detail: "answer lost after the refund".into(),
            },
            Fate::Crash => self.crash_now().await,
            _ => outcome,
        }
    }

    async fn authorize(
        &self,
        channel_key: &str,
        amount: i64,
        currency: &str,
        ttl_secs: i64,
    ) -> Result<AuthorizeOutcome, Unsupported> {
        let expires = self
            .clock
            .now_ms()
            .saturating_add(ttl_secs.saturating_mul(1_000));
        let apply =
            |st: &mut State, now| authorize_at(st, channel_key, amount, currency, expires, now);
        let error = |d: &str| AuthorizeOutcome::Error { detail: d.into() };
        Ok(self.hold_call("authorize", channel_key, apply, error).await)
    }

    async fn capture(
        &self,
        channel_key: &str,
        capture_key: &str,
        amount: i64,
        last: bool,
    ) -> Result<CaptureOutcome, Unsupported> {
        let apply =
            |st: &mut State, now| capture_at(st, channel_key, capture_key, amount, last, now);
        let error = |d: &str| CaptureOutcome::Error { detail: d.into() };
        Ok(self.hold_call("capture", channel_key, apply, error).await)
    }

    async fn void(&self, channel_key: &str) -> Result<VoidOutcome, Unsupported> {
        let apply = |st: &mut State, now| void_at(st, channel_key, now);
        let error = |d: &str| VoidOutcome::Error { detail: d.into() };
        Ok(self.hold_call("void", channel_key, apply, error).await)
    }

    async fn query_hold(&self, channel_key: &str) -> Result<HoldQueryOutcome, Unsupported> {
        let mut st = self.lock();
        let rate = st.faults.error_before;
        if st.rng.chance(rate) {
            st.log
                .push(format!("channel query_hold {} error", short(channel_key)));
            return Ok(HoldQueryOutcome::Error {
                detail: "query timed out".into(),
            });
        }
        let answer = hold_answer(&st, channel_key, self.clock.now_ms());
        st.log.push(format!(
            "channel query_hold {} {answer:?}",
            short(channel_key)
        ));
        Ok(answer)
    }
}

/// An authorization's effect: the key's hold as it stands, or a new one (declined at the
/// seed's rate) lapsing after `ttl_ms`; a fenced key is declined.
fn authorize_at(
    st: &mut State,
    key: &str,
    amount: i64,
    currency: &str,
    expires_at_ms: i64,
    now_ms: i64,
) -> AuthorizeOutcome {
    if !st.holds.contains_key(key) {
        if st.fenced.contains(key) || st.charges.contains_key(key) {
            return AuthorizeOutcome::Declined {
                reason: "cancelled".into(),
            };
        }
        let rate = st.faults.decline;
        let declined = st.rng.chance(rate);
        let hold = Hold {
            declined,
            amount,
            currency: currency.into(),
            captured: 0,
            closed: false,
            voided: false,
            expires_at_ms,
            refunded: 0,
        };
        st.holds.insert(key.into(), hold);
    }
    let h = &st.holds[key];
    match h.status(now_ms) {
        HoldStatus::Declined => AuthorizeOutcome::Declined {
            reason: "card_declined".into(),
        },
        _ => AuthorizeOutcome::Authorized {
            amount: h.amount,
            currency: h.currency.clone(),
            expires_at_ms: h.expires_at_ms,
        },
    }
}

/// A capture's effect: idempotent on the capture key, never above what is held, never after
/// a void, an expiry or a closing capture.
fn capture_at(
    st: &mut State,
    key: &str,
    capture_key: &str,
    amount: i64,
    last: bool,
    now_ms: i64,
) -> CaptureOutcome {
    let rejected = |reason: &str| CaptureOutcome::Rejected {
        reason: reason.into(),
    };
    let prior = st.captures.get(capture_key).cloned();
    let Some(h) = st.holds.get_mut(key) else {
        return rejected(if prior.is_some() {
            "capture_key_reused"
        } else {
            "not_found"
        });
    };
    if let Some((k, a, l)) = prior {
        return if k == key && a == amount && l == last {
            CaptureOutcome::Captured {
                amount,
                captured_total: h.captured,
                currency: h.currency.clone(),
                closed: h.closed,
            }
        } else {
            rejected("capture_key_reused")
        };
    }
    match h.status(now_ms) {
        HoldStatus::Authorized if amount <= 0 => rejected("amount_not_positive"),
        HoldStatus::Authorized if h.captured + amount > h.amount => rejected("exceeds_authorized"),
        HoldStatus::Authorized => {
            h.captured += amount;
            h.closed = last || h.captured == h.amount;
            let out = CaptureOutcome::Captured {
                amount,
                captured_total: h.captured,
                currency: h.currency.clone(),
                closed: h.closed,
            };
            st.captures
                .insert(capture_key.into(), (key.into(), amount, last));
            out
        }
        HoldStatus::Captured => rejected("closed"),
        HoldStatus::Voided => rejected("voided"),
        HoldStatus::Expired => rejected("expired"),
        HoldStatus::Declined | HoldStatus::RequiresAction => rejected("declined"),
    }
}

/// A void's effect: the uncaptured hold released; with no hold (or a declined one) the key
/// fenced instead, so a late authorization cannot hold funds (TCC empty rollback).
fn void_at(st: &mut State, key: &str, now_ms: i64) -> VoidOutcome {
    let already = || VoidOutcome::Rejected {
        reason: "already_captured".into(),
    };
    let Some(h) = st.holds.get_mut(key) else {
        if st.charges.get(key).is_some_and(|c| c.succeeded) {
            return already();
        }
        st.fenced.insert(key.into());
        return VoidOutcome::Voided;
    };
    match h.status(now_ms) {
        HoldStatus::Voided => VoidOutcome::Voided,
        HoldStatus::Declined => {
            st.fenced.insert(key.into());
            VoidOutcome::Voided
        }
        HoldStatus::Expired if h.captured == 0 => VoidOutcome::Expired,
        HoldStatus::Authorized if h.captured == 0 => {
            h.voided = true;
            VoidOutcome::Voided
        }
        _ => already(),
    }
}

/// A refund's effect at the channel: idempotent on the refund key, never above what is left.
fn refund_at(st: &mut State, channel_key: &str, refund_key: &str, amount: i64) -> RefundOutcome {
    if let Some((key, earlier)) = st.refunds.get(refund_key) {
        return if key == channel_key && *earlier == amount {
            RefundOutcome::Succeeded
        } else {
            RefundOutcome::Rejected {
                reason: "refund_key_reused".into(),
            }
        };
    }
    // A charge's refunds come out of its amount, a hold's out of what it captured.
    let (refunded, refundable) =
        if let Some(c) = st.charges.get_mut(channel_key).filter(|c| c.succeeded) {
            (&mut c.refunded, c.amount)
        } else if let Some(h) = st.holds.get_mut(channel_key).filter(|h| h.captured > 0) {
            (&mut h.refunded, h.captured)
        } else {
            return RefundOutcome::Rejected {
                reason: "no_charge".into(),
            };
        };
    if amount <= 0 || *refunded + amount > refundable {
        return RefundOutcome::Rejected {
            reason: "exceeds_remaining".into(),
        };
    }
    *refunded += amount;
    st.touched.insert(channel_key.into());
    st.refunds
        .insert(refund_key.into(), (channel_key.into(), amount));
    RefundOutcome::Succeeded
}

#[async_trait]
impl ChargeSource for SimChannel {
    async fn all_charges(&self) -> Result<Vec<ChannelCharge>, String> {
        let st = self.lock();
        Ok(st
            .charges
            .iter()
            .map(|(key, c)| ChannelCharge {
                key: key.clone(),
                status: if c.succeeded { "succeeded" } else { "declined" }.into(),
                amount: c.amount,
                currency: c.currency.clone(),
                attempts: c.attempts,
                refunded: c.refunded,
            })
            .collect())
    }

    fn describe(&self) -> String {
        "the simulated channel".into()
    }

    fn holds(&self, connector: &str) -> Option<&dyn Connector> {
        let _ = connector;
        Some(&self.holds_view)
    }
}

#[async_trait]
impl Connector for HoldsView {
    async fn charge(&self, _: &str, _: i64, _: &str) -> ChargeOutcome {
        ChargeOutcome::Error {
            detail: "verify charges nothing".into(),
        }
    }

    async fn query(&self, _: &str) -> QueryOutcome {
        QueryOutcome::Error {
            detail: "verify reads holds only".into(),
        }
    }

    async fn cancel(&self, _: &str) -> CancelOutcome {
        CancelOutcome::Error {
            detail: "verify cancels nothing".into(),
        }
    }

    async fn refund(&self, _: &str, _: &str, _: i64) -> RefundOutcome {
        RefundOutcome::Error {
            detail: "verify refunds nothing".into(),
        }
    }

    async fn query_hold(&self, channel_key: &str) -> Result<HoldQueryOutcome, Unsupported> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        Ok(hold_answer(&st, channel_key, self.clock.now_ms()))
    }
}

/// What a query of the hold under `key` finds at `now_ms`.
fn hold_answer(st: &State, key: &str, now_ms: i64) -> HoldQueryOutcome {
    match st.holds.get(key) {
        Some(h) => h.found(now_ms),
        None if st.fenced.contains(key) => HoldQueryOutcome::Cancelled,
        None => HoldQueryOutcome::NotFound,
    }
}
