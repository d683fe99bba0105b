//! The simulated world: converge's core over an in-memory SQLite store, a manual clock, the
//! simulated channel, and the actors the seed schedules (merchants, the worker, the channel's
//! callbacks, the clock, crashes), with the invariants checked after every step.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use converge_server::config::{IdempotencySettings, JobSettings, WorkerSettings};
use converge_server::domain::accounting::AccountingCalendar;
use converge_server::domain::clock::ManualClock;
use converge_server::domain::idempotency::{Outcome, existing_outcome, request_fingerprint};
use converge_server::domain::secret_box::{Purpose, SecretBox};
use converge_server::service::Core;
use converge_server::service::actions::{ActionError, ActionRequest};
use converge_server::service::callbacks::CallbackEvent;
use converge_server::service::connectors::{Connectors, DEFAULT_CONNECTOR};
use converge_server::service::holds::{CaptureInput, HoldError};
use converge_server::service::pauses::PauseEnd;
use converge_server::service::payments::{CreateError, PaymentInput};
use converge_server::service::refunds::{RefundError, RefundInput};
use converge_server::service::webhooks::{Notifier, WebhookSettings};
use converge_server::service::write::{KeyClaim, Written};
use converge_server::store::{KindFilter, Merchant, SqliteStore, Store, WriteHook};
use converge_server::verify::{self, AuditChain, Scope, Window};
use converge_server::worker::{Worker, WorkerConfig};
use converge_wire::lifecycle::JobStatus;
use converge_wire::payments::CaptureMode;
use tokio::sync::{Notify, oneshot};

use crate::Run;
use crate::channel::{Faults, SimChannel};
use crate::endpoints::SimEndpoints;
use crate::rng::Rng;

/// 2026-12-01T00:00:00Z: every run starts here.
const START_MS: i64 = 1_796_083_200_000;

/// How long a payment may stay unfinished while the run goes on (invariant 4 during the
/// run): generous, since the scheduler may leave the worker idle for a while.
const RUN_WINDOW_MS: i64 = 6 * 3_600_000;

/// Every this many steps the check reads everything, not only what changed.
const FULL_CHECK_EVERY: u64 = 100;

/// The settling phase gives up (a violation: not converged) after this much simulated time:
/// a week past a hold's authorization TTL (a hold nobody captures or voids lapses then, and
/// its expiry job runs).
const SETTLE_LIMIT_MS: i64 =
    converge_server::service::DEFAULT_AUTHORIZATION_TTL_SECS as i64 * 1_000 + 7 * 86_400_000;

/// How big a run is and what it throws at converge.
#[derive(Debug, Clone)]
pub struct Config {
    /// Payments the merchants create before the world is left to settle.
    pub payments: u64,
    /// Most steps before settling, whatever the payments.
    pub max_steps: u64,
    /// The channel's faults.
    pub faults: Faults,
    /// Check the invariants after every step (else only while settling and at the end).
    pub check_every_step: bool,
    /// The planted bugs switched on for this run (issue 39).
    #[cfg(feature = "planted-bugs")]
    pub planted: Vec<converge_server::planted::Bug>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            payments: 200,
            max_steps: 20_000,
            faults: Faults::standard(),
            check_every_step: true,
            #[cfg(feature = "planted-bugs")]
            planted: Vec::new(),
        }
    }
}

/// An invariant broken at a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The seed that breaks it.
    pub seed: u64,
    /// The step at which it was seen (its trace line's number).
    pub step: u64,
    /// The actor of that step.
    pub actor: String,
    /// The invariant, as `converge verify` numbers it, or the simulator's own check.
    pub invariant: String,
    /// What was seen.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} step {} actor {}: invariant {} broken: {}",
            self.seed, self.step, self.actor, self.invariant, self.detail
        )
    }
}

/// A stored answer as the merchant got it: HTTP status and body bytes.
type Answer = (u16, Vec<u8>);

/// An order a merchant placed: its business key, body, and the Idempotency-Keys sent for it.
#[derive(Debug, Clone)]
struct Order {
    merchant: usize,
    order_id: String,
    amount: i64,
    /// A manual-capture order (issue 34): authorized at its create, then captured (in parts)
    /// or voided.
    manual: bool,
    /// Keys sent with this order's body, with the first answer each got.
    keys: Vec<(String, Option<Answer>)>,
    payment: Option<String>,
}

/// The defaults the shipping binary runs with (its flags' defaults; the environment is not
/// read, so a seed runs the same whatever `CONVERGE_*` variables are set).
struct Defaults {
    jobs: JobSettings,
    worker: WorkerSettings,
    keys: IdempotencySettings,
}

fn defaults() -> Defaults {
    use clap::{Args, FromArgMatches};
    let cmd = clap::Command::new("sim");
    let cmd = WorkerSettings::augment_args(IdempotencySettings::augment_args(
        JobSettings::augment_args(cmd),
    ));
    let m = cmd.mut_args(|a| a.env(None)).get_matches_from(["sim"]);
    Defaults {
        jobs: JobSettings::from_arg_matches(&m).expect("job defaults"),
        worker: WorkerSettings::from_arg_matches(&m).expect("worker defaults"),
        keys: IdempotencySettings::from_arg_matches(&m).expect("key defaults"),
    }
}

/// The world of one seed.
pub struct World {
    seed: u64,
    cfg: Config,
    rng: Rng,
    clock: ManualClock,
    store: Arc<dyn Store>,
    channel: SimChannel,
    /// The merchants' webhook endpoints.
    endpoints: SimEndpoints,
    defaults: Defaults,
    core: Core,
    worker: Arc<Worker>,
    restarts: u64,
    merchants: Vec<Merchant>,
    orders: Vec<Order>,
    /// Payment id -> its name in the trace (`p<n>`).
    names: BTreeMap<String, String>,
    keys_made: u64,
    /// (order, key) of creates that crashed before their answer: the client retries them.
    unanswered: Vec<(usize, usize)>,
    /// The channel's charge path is down.
    outage: bool,
    /// Ops requests waiting for an approver (reversals, forces, captures, voids).
    pending_actions: Vec<String>,
    /// Pauses (or their early ends) waiting for an approver.
    pending_pauses: Vec<String>,
    /// The merchants' webhook endpoints' ids.
    endpoint_ids: Vec<String>,
    /// Jobs claimed by a worker that stalled (a long GC pause, a frozen VM) before running
    /// them: it runs them when it wakes, whoever holds them by then.
    stalled: Vec<converge_server::store::LeasedJob>,
    /// The store's write hook's orders: where the process crashes or an operation is held.
    writes: Arc<Mutex<WritePoint>>,
    /// Fired by the write hook when it holds an operation.
    held_signal: Arc<Notify>,
    /// An operation held at a write transaction's start, run on by a later `release` step.
    held: Option<Held>,
    step: u64,
    /// The clock's time at the last check: the incremental check's mark.
    checked_at: i64,
    /// The database's row changes at the last check ([`total_changes`]).
    changes_at_check: i64,
    /// The audit log's head (seq, hash) the last passing check verified the chain up to,
    /// and the records it counted.
    audit_verified: Option<((i64, String), i64)>,
    trace: Vec<String>,
    violation: Option<Violation>,
}

/// Runs `seed`: the steps, then settling, checking after each. Errors: the world could not
/// be built.
pub async fn run(seed: u64, cfg: &Config) -> Result<Run, String> {
    let mut w = World::new(seed, cfg).await?;
    while w.violation.is_none()
        && w.step < w.cfg.max_steps
        && (w.orders.len() as u64) < w.cfg.payments
    {
        w.step().await;
    }
    if w.violation.is_none() {
        w.settle().await;
    }
    Ok(Run {
        seed,
        steps: w.step,
        payments: w.names.len() as u64,
        simulated_ms: w.clock_now() - START_MS,
        trace: w.trace,
        violation: w.violation,
    })
}

impl World {
    async fn new(seed: u64, cfg: &Config) -> Result<World, String> {
        let mut rng = Rng::new(seed);
        let clock = ManualClock::new(START_MS);
        let channel = SimChannel::new(rng.fork(), cfg.faults, clock.clone());
        let timeout_ms = WebhookSettings::default().timeout.as_millis() as i64;
        let endpoints =
            SimEndpoints::new(rng.fork(), clock.clone(), timeout_ms).crashing_with(channel.clone());
        let writes = Arc::new(Mutex::new(WritePoint::default()));
        let held_signal = Arc::new(Notify::new());
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(":memory:")
                .await
                .map_err(|e| format!("in-memory SQLite: {e}"))?
                .with_write_hook(write_hook(&writes, &held_signal, &channel)),
        );
        outbox_installed_at_start(store.as_ref()).await?;
        let defaults = defaults();
        let (core, worker) = build(&store, &clock, &channel, &endpoints, &defaults, seed, 0);
        let mut merchants = Vec::new();
        let (mut trace, mut endpoint_ids) = (Vec::new(), Vec::new());
        for name in ["alpha", "beta"] {
            let m = core
                .add_merchant_keyless(START_MS, name, &actor())
                .await
                .map_err(|e| format!("merchant {name}: {e}"))?;
            // One endpoint each (two a quarter of the time), every event type: each outcome
            // is delivered.
            for n in 1..=1 + u64::from(rng.chance(250)) {
                let url = format!("https://{name}-{n}.sim.test/hooks");
                endpoint_ids.push(register_endpoint(&core, m.id, &url).await?);
                let temper = endpoints.open(&url, START_MS);
                trace.push(format!("00000 +0ms setup endpoint {url} {temper:?}"));
            }
            if name == "alpha" {
                trace.push(price_alpha(&core, seed).await?);
            }
            merchants.push(m);
        }
        Ok(World {
            seed,
            cfg: cfg.clone(),
            rng,
            clock,
            store,
            channel,
            endpoints,
            defaults,
            core,
            worker,
            restarts: 0,
            merchants,
            orders: Vec::new(),
            names: BTreeMap::new(),
            keys_made: 0,
            unanswered: Vec::new(),
            pending_actions: Vec::new(),
            pending_pauses: Vec::new(),
            endpoint_ids,
            outage: false,
            stalled: Vec::new(),
            writes,
            held_signal,
            held: None,
            step: 0,
            checked_at: START_MS,
            changes_at_check: -1,
            audit_verified: None,
            trace,
            violation: None,
        })
    }

    fn clock_now(&self) -> i64 {
        use converge_server::domain::clock::Clock;
        self.clock.now_ms()
    }

    /// One scheduled step: an actor drawn by weight acts, then the invariants are checked.
    async fn step(&mut self) {
        self.step += 1;
        let (actor, line) = match self.rng.below(100) {
            0..=29 => ("merchant", self.merchant().await),
            30..=60 => ("worker", self.work().await),
            61 | 62 => ("ops", self.ops().await),
            63..=70 => ("callback", self.callback().await),
            71..=74 => ("network", self.late_request()),
            75..=88 => ("clock", self.tick()),
            89 => ("ntp", self.step_clock()),
            90 | 91 => ("crashpoint", self.crash_at_write().await),
            92 | 93 => ("hold", self.hold().await),
            94 => ("release", self.release().await),
            95 => ("outage", self.outage()),
            96 => ("crash", self.lose_a_lease().await),
            97 if self.rng.chance(500) => ("lapse", self.lapse().await),
            97 => ("stall", self.stall().await),
            _ => ("resume", self.resume().await),
        };
        self.record(actor, line);
        if self.cfg.check_every_step && self.violation.is_none() {
            self.check(actor, RUN_WINDOW_MS, false).await;
        }
    }

    /// Writes the step's trace line and the channel's lines under it.
    fn record(&mut self, actor: &str, line: String) {
        let t = self.clock_now() - START_MS;
        self.trace
            .push(format!("{:05} +{t}ms {actor} {line}", self.step));
        for l in self.channel.drain_log() {
            self.trace.push(format!("      {l}"));
        }
        for l in self.endpoints.drain_log() {
            self.trace.push(format!("      webhook {l}"));
        }
    }

    /// Fails the run at this step with `invariant` and `detail` (the first one counts).
    fn fail(&mut self, actor: &str, invariant: &str, detail: String) {
        if self.violation.is_none() {
            self.trace
                .push(format!("{:05} VIOLATION {invariant}: {detail}", self.step));
            self.violation = Some(Violation {
                seed: self.seed,
                step: self.step,
                actor: actor.into(),
                invariant: invariant.into(),
                detail,
            });
        }
    }

    /// `converge verify`'s checks, by its own code, with the channel's charges, and the
    /// convergence window `window_ms`.
    ///
    /// Incremental (issue 39's speed): the payments changed since the previous check and the
    /// charges the channel changed ([`verify::Scope::Changed`]), since that is all a step can
    /// break; every [`FULL_CHECK_EVERY`] steps and at the end, everything ([`Scope::All`]), in
    /// case a write escaped the marks.
    async fn check(&mut self, actor: &str, window_ms: i64, full: bool) {
        let now = self.clock_now();
        // The simulated channel never asks for the customer's step: no REQUIRES_ACTION here.
        let window = Window {
            now_ms: now,
            window_ms,
            action_window_ms: 0,
        };
        let channel_keys = self.channel.take_touched();
        let changes = match total_changes(self.store.as_ref()).await {
            Ok(n) => n,
            Err(e) => return self.fail(actor, "verify ran", e),
        };
        let database_unchanged = changes == self.changes_at_check;
        let unchanged = channel_keys.is_empty() && now == self.checked_at && database_unchanged;
        let whole = full || self.step.is_multiple_of(FULL_CHECK_EVERY);
        if unchanged && !whole {
            // What verify reads is the database, the channel and the clock: none moved since
            // the last check passed, so this one would pass too (a worker finding nothing due).
            return;
        }
        let head = match self.store.audit_head().await {
            Ok(h) => h,
            Err(e) => return self.fail(actor, "verify ran", e.to_string()),
        };
        let scope = if whole {
            Scope::All
        } else {
            // Audit records come from ops and endpoint changes only: most steps add none,
            // and a chain verified up to an unchanged head need not be read again.
            let audit_unchanged = self
                .audit_verified
                .as_ref()
                .filter(|(seen, _)| *seen == head)
                .map(|(_, records)| *records);
            // A clock step or a late request at the channel writes nothing: only what
            // moves with the clock and the channel is read again.
            Scope::Changed {
                since_ms: self.checked_at,
                channel_keys,
                audit_unchanged,
                database_unchanged,
            }
        };
        (self.checked_at, self.changes_at_check) = (now, changes);
        let store = self.store.as_ref();
        match verify::run_scoped(store, Some(&self.channel), window, &scope).await {
            Ok(report) => {
                self.audit_verified = match &report.audit {
                    AuditChain::Verified { records } if report.breaches.is_empty() => {
                        Some((head, i64::try_from(*records).unwrap_or(i64::MAX)))
                    }
                    _ => None,
                };
                // verify lists the channel's orphan charges in a hash map's order: the first
                // breach by (invariant, text) is the same on every run.
                let first = report
                    .breaches
                    .iter()
                    .min_by_key(|b| (b.invariant(), b.to_string()));
                if let Some(b) = first {
                    let name = b.payment().and_then(|p| self.names.get(p)).cloned();
                    let detail = match name {
                        Some(n) => format!("{n}: {b}"),
                        None => b.to_string(),
                    };
                    self.fail(actor, b.invariant().title(), detail);
                }
            }
            Err(e) => self.fail(actor, "verify ran", e.to_string()),
        }
    }

    /// Runs `fut` unless the channel crashes the process under it: then everything in memory
    /// is lost (the core and the worker are built again over the same store) and None.
    async fn guarded<T>(&mut self, fut: impl Future<Output = T>) -> Option<T> {
        let channel = self.channel.clone();
        let out = tokio::select! {
            biased;
            r = fut => Some(r),
            () = channel.crashed() => None,
        };
        if out.is_none() || self.channel.take_crash() {
            self.restart();
            return None;
        }
        out
    }

    /// A process restart: a new core and worker over the same store; leases held by the old
    /// one lapse in their time.
    fn restart(&mut self) {
        self.restarts += 1;
        // An operation held in the process dies with it: it never writes (a create's client
        // retries).
        if let Some(i) = self.held.take().and_then(|h| h.order) {
            self.unanswered.push((i, 0));
        }
        self.lock_writes().release = None;
        let (core, worker) = build(
            &self.store,
            &self.clock,
            &self.channel,
            &self.endpoints,
            &self.defaults,
            self.seed,
            self.restarts,
        );
        self.core = core;
        self.worker = worker;
    }

    fn tick(&mut self) -> String {
        let ms = if self.rng.chance(50) {
            self.rng.between(60_000, 900_000)
        } else {
            self.rng.between(100, 60_000)
        };
        self.clock.advance(ms);
        format!("advance {ms}ms")
    }

    /// The host's clock stepped by NTP, forward or back: ntpd steps rather than slews an
    /// offset above its 128 ms step threshold (chrony's `makestep` likewise), and a host kept
    /// in sync is never far off, so 129 ms to 1 s either way. Every process of converge reads
    /// the same host clock, so the whole world's time moves (issue 39: "clock jumps within
    /// what NTP allows").
    fn step_clock(&mut self) -> String {
        let ms = self.rng.between(129, 1_000);
        let back = self.rng.chance(500);
        self.clock.advance(if back { -ms } else { ms });
        // The incremental check reads what changed since its mark: after a step back, rows
        // written from now on carry earlier times than the mark.
        self.checked_at = self.checked_at.min(self.clock_now());
        format!("steps {} {ms}ms", if back { "back" } else { "forward" })
    }

    /// A worker claims a due job and stalls before running it (at most three stalled).
    async fn stall(&mut self) -> String {
        if self.stalled.len() >= 3 {
            return "stalled workers at their limit".into();
        }
        let owner = format!("sim-stalled-{}", self.step);
        let lease = self.defaults.worker.lease_ms as i64;
        match self
            .store
            .claim_jobs_of(&owner, 1, lease, self.clock_now(), &KindFilter::all())
            .await
        {
            Ok(mut jobs) => match jobs.pop() {
                Some(job) => {
                    let line = format!("job#{} claimed, worker stalls", job.id);
                    self.stalled.push(job);
                    line
                }
                None => "nothing to claim".into(),
            },
            Err(e) => format!("claim failed: {e}"),
        }
    }

    /// The oldest stalled worker wakes and runs its job with the real handler, writing the
    /// result under its (maybe lapsed) lease.
    async fn resume(&mut self) -> String {
        if self.stalled.is_empty() {
            return "no stalled worker".into();
        }
        let job = self.stalled.remove(0);
        self.run_stalled(job).await
    }

    /// A stalled worker wakes and runs `job` with the real handler, writing its result under
    /// its lease; a result the queue takes while another worker holds the job is a violation.
    async fn run_stalled(&mut self, job: converge_server::store::LeasedJob) -> String {
        let id = job.id;
        let taken = self.leased_by_another(&job).await;
        let worker = self.worker.clone();
        match self
            .guarded(async move { worker.run_claimed(job).await })
            .await
        {
            Some((_, result)) => {
                if taken && result != converge_server::worker::JobResult::LeaseLost {
                    self.fail(
                        "resume",
                        "lease: a lapsed holder's result is refused",
                        format!(
                            "job#{id}, leased by another worker, took this worker's result: {}",
                            result.as_str()
                        ),
                    );
                }
                format!("job#{id} -> {}", result.as_str())
            }
            None => format!("job#{id} -> crashed (restart)"),
        }
    }

    /// A worker claims a due job and pauses past its lease; meanwhile another worker
    /// claims a batch of due jobs (the lapsed one among them) and stalls holding them; the
    /// first wakes and runs its job: the queue must refuse its result.
    async fn lapse(&mut self) -> String {
        let first = self.stall().await;
        let Some(job) = self
            .stalled
            .pop()
            .filter(|_| first.ends_with("worker stalls"))
        else {
            return first;
        };
        let lease = self.defaults.worker.lease_ms as i64;
        let pause = lease + self.rng.between(1, 5_000);
        self.clock.advance(pause);
        let owner = format!("sim-overtaking-{}", self.step);
        let taken = match self
            .store
            .claim_jobs_of(&owner, 8, lease, self.clock_now(), &KindFilter::all())
            .await
        {
            Ok(jobs) => {
                let ids: Vec<String> = jobs.iter().map(|j| format!("job#{}", j.id)).collect();
                self.stalled.extend(jobs);
                ids.join(",")
            }
            Err(e) => format!("claim failed: {e}"),
        };
        let line = self.run_stalled(job).await;
        format!(
            "{first}; {pause}ms later another worker claims {taken} and stalls; the first wakes: {line}"
        )
    }

    /// Whether `job`'s lease lapsed and another worker holds the job now (it claimed it
    /// since: a claim counts an attempt): then the queue must refuse this worker's result.
    async fn leased_by_another(&mut self, job: &converge_server::store::LeasedJob) -> bool {
        match self.store.job(job.id).await {
            Ok(Some(now)) => now.status == JobStatus::Leased && now.attempts > job.attempts,
            _ => false,
        }
    }

    fn lock_writes(&self) -> std::sync::MutexGuard<'_, WritePoint> {
        self.writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arms the write hook for the next operation: its `n`th write transaction crashes the
    /// process or holds it; `n` 0 disarms.
    fn arm(&mut self, n: u64, hold: bool) {
        let mut p = self.lock_writes();
        p.countdown = n;
        p.hold = hold;
    }

    /// The process crashes at the start of the `n`th write transaction of a merchant's
    /// request or a worker's job (between two of its transactions): what committed stays,
    /// the rest of the operation never runs.
    async fn crash_at_write(&mut self) -> String {
        let n = self.rng.between(1, 4) as u64;
        self.arm(n, false);
        let line = if self.rng.chance(500) {
            format!("merchant {}", self.merchant().await)
        } else {
            format!("worker {}", self.work().await)
        };
        self.arm(0, false);
        format!("at write {n}: {line}")
    }

    /// A worker's job or a merchant's new order runs until the start of its `n`th write
    /// transaction and is held there (a pause between its read and its write: a GC pause, a
    /// slow disk) until a `release` step; meanwhile every other actor goes on, and its job's
    /// lease or its key's claim may lapse.
    async fn hold(&mut self) -> String {
        if self.held.is_some() {
            return "an operation is held already".into();
        }
        // A create's second write transaction records its charge's answer; a job's first
        // is its claim, its second and third what its handler decided.
        let mut n = 2;
        let mut order = None;
        let (what, fut): (String, Pin<Box<dyn Future<Output = HeldOut>>>) = if self.rng.chance(500)
            && (self.orders.len() as u64) < self.cfg.payments
        {
            let (i, amount) = self.place_order();
            order = Some(i);
            let (claim, call) = self.create_call(i, 0, amount);
            let what = format!("create o{} {amount} CNY {}", i + 1, claim.idem_key);
            let fut = Box::pin(async move {
                HeldOut::Create {
                    i,
                    amount,
                    claim,
                    out: call.await,
                }
            });
            (what, fut)
        } else {
            n = self.rng.between(2, 3) as u64;
            let worker = self.worker.clone();
            let fut = Box::pin(async move { HeldOut::Work(work_line(worker.drain_once().await)) });
            ("worker".into(), fut)
        };
        self.arm(n, true);
        let mut fut = fut;
        let (signal, channel) = (self.held_signal.clone(), self.channel.clone());
        let out = tokio::select! {
            biased;
            out = &mut fut => Some(Some(out)),
            () = signal.notified() => Some(None),
            () = channel.crashed() => None,
        };
        self.arm(0, false);
        let crashed = out.is_none() || self.channel.take_crash();
        if crashed {
            self.restart();
        }
        match out {
            Some(None) if !crashed => {
                let what = format!("{what} held at write {n}");
                self.held = Some(Held {
                    fut,
                    what: what.clone(),
                    order,
                });
                what
            }
            Some(Some(out)) if !crashed => {
                let line = self.held_answer(Some(out));
                format!("{what} (not held) -> {line}")
            }
            _ => format!("{what} -> crashed (restart)"),
        }
    }

    /// The line of a held operation's end (None: the process crashed under it).
    fn held_answer(&mut self, out: Option<HeldOut>) -> String {
        match out {
            Some(HeldOut::Work(line)) => line,
            Some(HeldOut::Create {
                i,
                amount,
                claim,
                out,
            }) => self.create_answer(i, 0, amount, &claim, Some(out)),
            None => "crashed (restart)".into(),
        }
    }

    /// The held operation goes on from where it was held, to its end.
    async fn release(&mut self) -> String {
        let Some(h) = self.held.take() else {
            return "nothing held".into();
        };
        if let Some(tx) = self.lock_writes().release.take() {
            let _ = tx.send(());
        }
        let out = self.guarded(h.fut).await;
        format!("{} released -> {}", h.what, self.held_answer(out))
    }

    /// A charge request that timed out reaches the channel now (any of those on their way).
    fn late_request(&mut self) -> String {
        let index = self.rng.next_u64();
        self.channel
            .deliver_late(index)
            .unwrap_or_else(|| "no request on its way".into())
    }

    /// The channel's charge path goes down (for a while: the next outage step brings it up).
    fn outage(&mut self) -> String {
        self.outage = !self.outage;
        self.channel.set_outage(self.outage);
        format!("charge path {}", if self.outage { "down" } else { "up" })
    }

    /// The worker runs one due job (a batch of one) with the real handlers.
    async fn work(&mut self) -> String {
        let worker = self.worker.clone();
        match self.guarded(async move { worker.drain_once().await }).await {
            None => "job -> crashed (restart)".into(),
            Some(out) => work_line(out),
        }
    }

    /// A worker that claims a due job and dies before running it: the job's lease lapses.
    async fn lose_a_lease(&mut self) -> String {
        let owner = format!("sim-lost-{}", self.step);
        let lease = self.defaults.worker.lease_ms as i64;
        match self
            .store
            .claim_jobs_of(&owner, 1, lease, self.clock_now(), &KindFilter::all())
            .await
        {
            Ok(jobs) if jobs.is_empty() => "nothing to lose".into(),
            Ok(jobs) => format!("claimed job#{} and died", jobs[0].id),
            Err(e) => format!("claim failed: {e}"),
        }
    }

    /// The channel delivers one of its callbacks: any of them (reordered), sometimes keeping
    /// a copy to deliver again (duplicated), whenever the scheduler gets to it (late).
    async fn callback(&mut self) -> String {
        let index = self.rng.next_u64();
        // Half the time the newest callback, sent as the charge was made: it arrives while
        // the charge's answer is still on its way back (prompt, as most PSPs' are).
        let prompt = self.rng.chance(500);
        let index = match self.channel.pending_callbacks() {
            n if prompt && n > 0 => n as u64 - 1,
            _ => index,
        };
        let dup = self.rng.chance(200);
        let Some(cb) = self.channel.take_callback(index, dup) else {
            return "none pending".into();
        };
        let ev = CallbackEvent {
            event_id: cb.event_id.clone(),
            kind: cb.kind.clone(),
            channel_key: cb.channel_key.clone(),
            capture_key: None,
            amount: cb.amount,
            currency: cb.currency.clone(),
            created_at: self.clock_now() / 1000,
            dispute_id: None,
            reason: None,
        };
        let body = serde_json::json!({"event_id": ev.event_id, "type": ev.kind,
            "channel_key": ev.channel_key, "amount": ev.amount, "currency": ev.currency,
            "created_at": ev.created_at})
        .to_string();
        let core = self.core.clone();
        let out = self
            .guarded(async move {
                core.handle_callback(&ev, body.as_bytes(), "sim", None)
                    .await
            })
            .await;
        let what = format!(
            "{} {}{}",
            cb.event_id,
            cb.kind,
            if dup { " (dup)" } else { "" }
        );
        match out {
            Some(Ok(o)) => format!("{what} -> {o:?}"),
            Some(Err(e)) => format!("{what} -> error {e}"),
            None => format!("{what} -> crashed (restart)"),
        }
    }

    /// A merchant acts: a new payment, a retry (same key, new key, another body), a refund.
    async fn merchant(&mut self) -> String {
        let roll = self.rng.below(100);
        // A client whose request died retries it with the same key, often within the
        // claim's lease (409 in use) and sometimes after it (the crashed request resumed).
        if !self.unanswered.is_empty() && roll < 40 {
            let (i, k) = self.unanswered.remove(0);
            let amount = self.orders[i].amount;
            let what = format!("retry unanswered o{} {}", i + 1, self.orders[i].keys[k].0);
            let answer = self.create(i, k, amount).await;
            return format!("{what} -> {answer}");
        }
        if self.orders.is_empty() || roll < 55 {
            return self.new_order().await;
        }
        let i = usize::try_from(self.rng.below(self.orders.len() as u64)).unwrap_or(0);
        match roll {
            55..=69 => self.retry_same_key(i).await,
            // A hold's own requests take a manual order's share of retries and refunds.
            70..=94 if self.orders[i].manual => match roll {
                70..=81 => self.capture(i).await,
                82..=87 => self.void(i).await,
                _ => self.refund(i).await,
            },
            70..=77 => self.retry_new_key(i).await,
            78..=84 => self.changed_body(i).await,
            85..=94 => self.refund(i).await,
            _ => self.cancel(i).await,
        }
    }

    /// Ops staff at the console (maker-checker, DESIGN.md "Ops console"): an approver
    /// decides the oldest pending request or pause; else an operator pauses or resumes
    /// something, or acts on a payment: a query or retry (run at once), or a reversal,
    /// force, capture or void (pending until approved). Through the core's own paths, as
    /// the ops API calls them.
    async fn ops(&mut self) -> String {
        if !self.pending_pauses.is_empty() && self.rng.chance(400) {
            let id = self.pending_pauses.remove(0);
            return self.decide_pause(id).await;
        }
        if !self.pending_actions.is_empty() && self.rng.chance(500) {
            let id = self.pending_actions.remove(0);
            return self.decide(id).await;
        }
        if self.rng.chance(80) {
            return self.pause_or_resume().await;
        }
        let Some(i) = self.order_with_payment() else {
            return "no payment to act on".into();
        };
        let pid = self.orders[i].payment.clone().unwrap_or_default();
        let mut req = ActionRequest {
            kind: String::new(),
            payment_id: pid.clone(),
            reason: String::new(),
            target_status: None,
            evidence: None,
            capture_amount: None,
            capture_final: None,
        };
        req.kind = match self.rng.below(20) {
            0..=6 => "query".into(),
            7..=11 => "retry".into(),
            12..=15 => "reverse".into(),
            16 | 17 => self.force_target(&mut req).await,
            18 if self.orders[i].manual => {
                let part = self.rng.between(1, self.orders[i].amount);
                req.capture_amount = Some(part);
                req.capture_final = Some(self.rng.chance(500));
                "capture".into()
            }
            _ if self.orders[i].manual => "void".into(),
            _ => "query".into(),
        };
        let kind = req.kind.clone();
        req.reason = format!("sim: {kind}");
        let core = self.core.clone();
        let operator = ops_actor("sim-operator");
        let out = self
            .guarded(async move { core.request_action(&operator, &req).await })
            .await;
        if let Some(Ok(a)) = &out
            && a.status == converge_wire::ActionStatus::Pending
        {
            self.pending_actions.push(a.id.clone());
        }
        let name = self.names.get(&pid).cloned().unwrap_or_default();
        format!("{kind} {name} -> {}", action_line(&out))
    }

    /// What an operator forces `req`'s payment to, from its status and what the channel's
    /// dashboard shows for its key ([`SimChannel::charged`], the evidence): UNKNOWN to
    /// CHANNEL_SUCCESS when charged, else to FAILED (converge fences the key first);
    /// PROCESSING to UNKNOWN; SUSPENSE (when charged) and CHANNEL_SUCCESS to SUCCESS. Any
    /// other payment is only queried (`query` returned).
    async fn force_target(&mut self, req: &mut ActionRequest) -> String {
        use converge_server::domain::state::PaymentStatus as S;
        let Ok(Some(p)) = self.store.payment(&req.payment_id).await else {
            return "query".into();
        };
        let charged = self.channel.charged(&p.channel_key);
        let target = match p.status {
            S::Unknown if charged => S::ChannelSuccess,
            S::Unknown => S::Failed,
            S::Processing => S::Unknown,
            S::Suspense if charged => S::Success,
            S::ChannelSuccess => S::Success,
            _ => return "query".into(),
        };
        req.target_status = Some(target.as_str().into());
        req.evidence = Some(format!(
            "channel dashboard: {} {}",
            p.channel_key,
            if charged { "charged" } else { "no charge" }
        ));
        "force_transition".into()
    }

    /// An operator asks to pause submissions, a job kind or an endpoint (an approver decides
    /// later), or asks to end the oldest pause in force (ended at once, or its early end
    /// awaits an approver).
    async fn pause_or_resume(&mut self) -> String {
        let operator = ops_actor("sim-operator");
        let open = match self.store.pauses(0).await {
            Ok(all) => all
                .into_iter()
                .find(|p| p.status == converge_wire::PauseStatus::Active),
            Err(e) => return format!("pauses unreadable: {e}"),
        };
        if let Some(p) = open.filter(|_| self.rng.chance(600)) {
            let core = self.core.clone();
            let id = p.id.clone();
            let out = self
                .guarded(async move { core.end_pause(&operator, &id, "sim: over").await })
                .await;
            let line = match out {
                None => "crashed (restart)".into(),
                Some(Ok(PauseEnd::Ended(_))) => "ended".into(),
                Some(Ok(PauseEnd::Requested(_))) => {
                    self.pending_pauses.push(p.id.clone());
                    "end requested".into()
                }
                Some(Err(e)) => format!("refused: {e}"),
            };
            return format!("end pause of {} -> {line}", short_target(&p.target));
        }
        let target = match self.rng.below(4) {
            0 => "submissions".to_string(),
            1 if !self.endpoint_ids.is_empty() => {
                let n = self.rng.below(self.endpoint_ids.len() as u64) as usize;
                format!("endpoint:{}", self.endpoint_ids[n])
            }
            _ => {
                let kinds = converge_server::domain::pause::PAUSABLE_JOB_KINDS;
                format!("job:{}", kinds[self.rng.below(kinds.len() as u64) as usize])
            }
        };
        let core = self.core.clone();
        let t = target.clone();
        let out = self
            .guarded(async move { core.request_pause(&operator, &t, "sim: pause").await })
            .await;
        let line = match out {
            None => "crashed (restart)".into(),
            Some(Ok(p)) => {
                self.pending_pauses.push(p.id.clone());
                p.status.to_string()
            }
            Some(Err(e)) => format!("refused: {e}"),
        };
        format!("pause {} -> {line}", short_target(&target))
    }

    /// The approver takes pause `id` up: approves (a pending pause, or an early end) four
    /// times in five, else rejects.
    async fn decide_pause(&mut self, id: String) -> String {
        let core = self.core.clone();
        let approver = ops_actor("sim-approver");
        let approve = !self.rng.chance(200);
        let pid = id.clone();
        let out = self
            .guarded(async move {
                if approve {
                    core.approve_pause(&approver, &pid, "sim: approved").await
                } else {
                    core.reject_pause(&approver, &pid, "sim: rejected").await
                }
            })
            .await;
        let verb = if approve { "approve" } else { "reject" };
        let line = match out {
            None => "crashed (restart)".into(),
            Some(Ok(p)) => format!("{} {}", short_target(&p.target), p.status),
            Some(Err(e)) => format!("refused: {e}"),
        };
        format!("{verb} pause {} -> {line}", short_id(&id))
    }

    /// Settling: every pause still open ends (an operator ends it; an approver approves an
    /// early end), so nothing waits behind a pause forever.
    async fn end_pauses(&mut self) {
        let open = match self.store.pauses(0).await {
            Ok(all) => all,
            Err(e) => return self.fail("settle", "converged", format!("pauses: {e}")),
        };
        for p in open.into_iter().filter(|p| {
            matches!(
                p.status,
                converge_wire::PauseStatus::Active | converge_wire::PauseStatus::Pending
            )
        }) {
            let (core, operator) = (self.core.clone(), ops_actor("sim-operator"));
            let id = p.id.clone();
            let out = core.end_pause(&operator, &id, "sim: settling").await;
            let line = match out {
                Ok(PauseEnd::Requested(_)) => {
                    let approver = ops_actor("sim-approver");
                    match core.approve_pause(&approver, &id, "sim: settling").await {
                        Ok(p) => format!("end approved: {}", p.status),
                        Err(e) => format!("end refused: {e}"),
                    }
                }
                Ok(PauseEnd::Ended(p)) => format!("ended: {}", p.status),
                Err(e) => format!("refused: {e}"),
            };
            self.settled(format!(
                "end pause of {} -> {line}",
                short_target(&p.target)
            ))
            .await;
        }
    }

    /// The approver takes request `id` up again: approves it while pending, runs it again
    /// while a crash or a failure left it approved or failed (the console's "execute"); a
    /// request still undecided afterwards waits for a later turn.
    async fn decide(&mut self, id: String) -> String {
        use converge_wire::ActionStatus as S;
        let status = match self.store.action(&id).await {
            Ok(Some(a)) => a.status,
            Ok(None) => return format!("action {} not found", short_id(&id)),
            Err(e) => return format!("action {} unreadable: {e}", short_id(&id)),
        };
        let core = self.core.clone();
        let approver = ops_actor("sim-approver");
        let (verb, out) = match status {
            S::Pending if self.rng.chance(150) => {
                let id = id.clone();
                let call = async move { core.reject_action(&approver, &id, "sim: rejected").await };
                ("reject", self.guarded(call).await)
            }
            S::Pending => {
                let id = id.clone();
                let call =
                    async move { core.approve_action(&approver, &id, "sim: approved").await };
                ("approve", self.guarded(call).await)
            }
            S::Approved | S::Failed => {
                let id = id.clone();
                let call = async move { core.execute_action(&approver, &id).await };
                ("execute", self.guarded(call).await)
            }
            other => return format!("action {} already {}", short_id(&id), other.as_str()),
        };
        if let Ok(Some(a)) = self.store.action(&id).await
            && matches!(a.status, S::Pending | S::Approved | S::Failed)
        {
            self.pending_actions.push(id.clone());
        }
        format!("{verb} {} -> {}", short_id(&id), action_line(&out))
    }

    /// A random order that has a payment, if any.
    fn order_with_payment(&mut self) -> Option<usize> {
        if self.orders.is_empty() {
            return None;
        }
        let i = usize::try_from(self.rng.below(self.orders.len() as u64)).unwrap_or(0);
        self.orders[i].payment.is_some().then_some(i)
    }

    /// A capture of part (or all: `final`, or the whole amount) of manual order `i`'s hold,
    /// under a new key (`POST /v1/payments/{id}/captures`); more than what is left is refused.
    async fn capture(&mut self, i: usize) -> String {
        let Some(pid) = self.orders[i].payment.clone() else {
            return format!("capture o{}: no payment yet", i + 1);
        };
        let merchant = self.merchants[self.orders[i].merchant].clone();
        let amount = self.rng.between(1, self.orders[i].amount);
        let last = self.rng.chance(500);
        let key = self.new_key();
        let body = serde_json::json!({"amount": amount, "final": last});
        let scope = format!("POST /v1/payments/{pid}/captures");
        let claim = self.claim(
            &merchant,
            &key,
            &scope,
            "POST /v1/payments/{id}/captures",
            &body,
        );
        let input = CaptureInput { amount, last };
        let core = self.core.clone();
        let name = self.names.get(&pid).cloned().unwrap_or_default();
        let out = self
            .guarded(async move { core.capture_keyed(&merchant, &pid, input, &claim).await })
            .await;
        let how = if last { " final" } else { "" };
        format!("capture {name} {amount}{how} {key} -> {}", hold_answer(out))
    }

    /// A void of manual order `i`'s hold under a new key (`POST /v1/payments/{id}/void`).
    async fn void(&mut self, i: usize) -> String {
        let Some(pid) = self.orders[i].payment.clone() else {
            return format!("void o{}: no payment yet", i + 1);
        };
        let merchant = self.merchants[self.orders[i].merchant].clone();
        let key = self.new_key();
        let body = serde_json::json!({});
        let scope = format!("POST /v1/payments/{pid}/void");
        let claim = self.claim(
            &merchant,
            &key,
            &scope,
            "POST /v1/payments/{id}/void",
            &body,
        );
        let core = self.core.clone();
        let name = self.names.get(&pid).cloned().unwrap_or_default();
        let out = self
            .guarded(async move { core.void_keyed(&merchant, &pid, &claim).await })
            .await;
        format!("void {name} {key} -> {}", hold_answer(out))
    }

    /// The merchant's saga coordinator cancels an order by its business key (TCC Cancel,
    /// `POST /v1/payments/cancel`, issue 34): order `i`, or, a third of the time, a new order
    /// whose create (the Try) has not been sent yet and comes later as a retry of its first
    /// key. A cancel that finds no payment tombstones the order; a payment for a tombstoned
    /// order is what verify's tombstone check names, so a create let through after it (or
    /// racing it from a held write) is found there, not by a rule written here.
    async fn cancel(&mut self, i: usize) -> String {
        let i = if self.rng.chance(333) {
            self.place_order().0
        } else {
            i
        };
        let merchant = self.merchants[self.orders[i].merchant].clone();
        let order_id = self.orders[i].order_id.clone();
        let key = self.new_key();
        let route = "POST /v1/payments/cancel";
        let body = serde_json::json!({"merchant_order_id": order_id});
        let claim = self.claim(&merchant, &key, route, route, &body);
        let core = self.core.clone();
        let out = self
            .guarded(async move { core.cancel_order_keyed(&merchant, &order_id, &claim).await })
            .await;
        let answer = match out {
            None => "crashed (restart)".into(),
            Some(Ok(Written::Answered(s))) => {
                let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap_or_default();
                format!("{} {}", s.status, v["outcome"].as_str().unwrap_or("?"))
            }
            Some(Ok(Written::Taken(_))) => "409 key taken".into(),
            Some(Err(e)) => format!("refused: {e}"),
        };
        format!("cancel o{} {key} -> {answer}", i + 1)
    }

    fn new_key(&mut self) -> String {
        self.keys_made += 1;
        format!("key-{}", self.keys_made)
    }

    async fn new_order(&mut self) -> String {
        let (i, amount) = self.place_order();
        let what = format!("create o{} {amount} CNY key-{}", i + 1, self.keys_made);
        let answer = self.create(i, 0, amount).await;
        format!("{what} -> {answer}")
    }

    /// A new order with its first key, of a merchant and an amount drawn from the seed:
    /// its index and amount.
    fn place_order(&mut self) -> (usize, i64) {
        let merchant = usize::try_from(self.rng.below(self.merchants.len() as u64)).unwrap_or(0);
        let n = self.orders.len() + 1;
        let amount = self.rng.between(100, 50_000);
        let manual = self.rng.chance(250);
        let key = self.new_key();
        self.orders.push(Order {
            merchant,
            order_id: format!("order-{n}"),
            amount,
            manual,
            keys: vec![(key, None)],
            payment: None,
        });
        (n - 1, amount)
    }

    async fn retry_same_key(&mut self, i: usize) -> String {
        let k = usize::try_from(self.rng.below(self.orders[i].keys.len() as u64)).unwrap_or(0);
        let amount = self.orders[i].amount;
        let what = format!("retry o{} {}", i + 1, self.orders[i].keys[k].0);
        let answer = self.create(i, k, amount).await;
        format!("{what} -> {answer}")
    }

    async fn retry_new_key(&mut self, i: usize) -> String {
        let key = self.new_key();
        self.orders[i].keys.push((key.clone(), None));
        let k = self.orders[i].keys.len() - 1;
        let amount = self.orders[i].amount;
        let answer = self.create(i, k, amount).await;
        format!("retry o{} new {key} -> {answer}", i + 1)
    }

    /// The same key with another amount, on a key whose request was answered: must be refused
    /// 422 (`idempotency_key_reused`), nothing written.
    async fn changed_body(&mut self, i: usize) -> String {
        let Some(k) = self.orders[i].keys.iter().position(|(_, a)| a.is_some()) else {
            return format!("changed body o{}: no answered key yet", i + 1);
        };
        let amount = self.orders[i].amount + 1;
        let what = format!("changed body o{} {}", i + 1, self.orders[i].keys[k].0);
        let answer = self.create(i, k, amount).await;
        if !answer.starts_with("422") && !answer.starts_with("crashed") {
            self.fail(
                "merchant",
                "Idempotency-Key reused with another body is refused (422)",
                format!("{what} answered {answer}"),
            );
        }
        format!("{what} -> {answer}")
    }

    /// Sends order `i`'s create with its key `k` and `amount`; checks a replay against the
    /// key's first answer. Returns the answer's line.
    async fn create(&mut self, i: usize, k: usize, amount: i64) -> String {
        let (claim, call) = self.create_call(i, k, amount);
        let out = self.guarded(call).await;
        self.create_answer(i, k, amount, &claim, out)
    }

    /// Order `i`'s create with its key `k` and `amount`, as the call the core runs (owning
    /// what it needs, so it can be held across steps) and the claim it makes.
    fn create_call(
        &mut self,
        i: usize,
        k: usize,
        amount: i64,
    ) -> (
        KeyClaim,
        impl Future<Output = Result<Written, CreateError>> + 'static,
    ) {
        let o = self.orders[i].clone();
        let merchant = self.merchants[o.merchant].clone();
        let body = order_body(&o, amount);
        let claim = self.claim(
            &merchant,
            &o.keys[k].0,
            "POST /v1/payments",
            "POST /v1/payments",
            &body,
        );
        let input = PaymentInput {
            amount,
            currency: "CNY".into(),
            merchant_order_id: o.order_id.clone(),
            description: String::new(),
            capture_mode: if o.manual {
                CaptureMode::Manual
            } else {
                CaptureMode::Automatic
            },
        };
        let core = self.core.clone();
        let c = claim.clone();
        let call = async move { core.create_payment_keyed(&merchant, &input, &c).await };
        (claim, call)
    }

    /// The answer's line of order `i`'s create with key `k` (None: the process crashed
    /// under it, and the client retries it).
    fn create_answer(
        &mut self,
        i: usize,
        k: usize,
        amount: i64,
        claim: &KeyClaim,
        out: Option<Result<Written, CreateError>>,
    ) -> String {
        let written = match out {
            None => {
                if amount == self.orders[i].amount {
                    self.unanswered.push((i, k));
                }
                return "crashed (restart)".into();
            }
            Some(Ok(w)) => w,
            Some(Err(CreateError::OrderConflict(_))) => {
                return "409 merchant_order_id_conflict".into();
            }
            Some(Err(CreateError::OrderCancelled)) => return "409 order_cancelled".into(),
            Some(Err(CreateError::Frozen)) => return "403 merchant_frozen".into(),
            Some(Err(CreateError::Missing)) => return "404".into(),
            Some(Err(CreateError::Failed(e))) => return format!("error {e}"),
        };
        self.answered(i, k, claim, written)
    }

    /// What a merchant write's answer says, recorded on order `i`'s key `k` (its first
    /// answer), with the replay check.
    fn answered(&mut self, i: usize, k: usize, claim: &KeyClaim, written: Written) -> String {
        match written {
            Written::Answered(stored) => {
                let line = self.payment_line(i, stored.status, &stored.body);
                if self.orders[i].keys[k].1.is_none() && claim.fingerprint == self.fingerprint_of(i)
                {
                    self.orders[i].keys[k].1 = Some((stored.status, stored.body));
                }
                line
            }
            Written::Taken(rec) => {
                let outcome = existing_outcome(
                    (&rec.fingerprint, &rec.scope, rec.state),
                    &claim.fingerprint,
                    &claim.scope,
                );
                match outcome {
                    Outcome::Replay => self.replay(i, k, &rec),
                    Outcome::Reused => "422 idempotency_key_reused".into(),
                    _ => {
                        if claim.fingerprint == self.fingerprint_of(i) {
                            self.unanswered.push((i, k));
                        }
                        "409 idempotency_key_in_use".into()
                    }
                }
            }
        }
    }

    /// A replay must be the key's first answer byte for byte.
    fn replay(
        &mut self,
        i: usize,
        k: usize,
        rec: &converge_server::store::keys::KeyRecord,
    ) -> String {
        let stored = rec.response_body.clone().unwrap_or_default();
        let body = match self.core.secrets.open_bytes(Purpose::StoredAnswer, &stored) {
            Ok(b) => b.into_owned(),
            Err(e) => {
                self.fail(
                    "merchant",
                    "3. stored responses",
                    format!("{} does not open: {e}", rec.idem_key),
                );
                return "replay unreadable".into();
            }
        };
        let status = rec
            .response_status
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(0);
        match &self.orders[i].keys[k].1 {
            Some((s, b)) if *s != status || *b != body => {
                let detail = format!(
                    "{} replayed {status} {} bytes, first answered {s} {} bytes",
                    rec.idem_key,
                    body.len(),
                    b.len()
                );
                self.fail("merchant", "3. replay byte for byte", detail);
            }
            Some(_) => {}
            // The first request crashed before hearing its answer: this is the first we see.
            None => self.orders[i].keys[k].1 = Some((status, body.clone())),
        }
        format!("replay {}", self.payment_line(i, status, &body))
    }

    fn fingerprint_of(&self, i: usize) -> String {
        let o = &self.orders[i];
        let body = order_body(o, o.amount);
        request_fingerprint(body.to_string().as_bytes(), Some(&body))
    }

    /// `<status> p<n> <STATUS>` of a payment answer, naming the payment on first sight.
    fn payment_line(&mut self, i: usize, status: u16, body: &[u8]) -> String {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let id = v["id"].as_str().unwrap_or("?").to_string();
        let n = self.names.len() + 1;
        let name = self
            .names
            .entry(id.clone())
            .or_insert_with(|| format!("p{n}"))
            .clone();
        if self.orders[i].payment.is_none() {
            self.orders[i].payment = Some(id);
        }
        format!("{status} {name} {}", v["status"].as_str().unwrap_or("?"))
    }

    /// The claim the HTTP layer would make for this request (`api/idempotency.rs`): the body's
    /// fingerprint by the domain's own rule, a fresh lease.
    fn claim(
        &mut self,
        m: &Merchant,
        key: &str,
        scope: &str,
        route: &str,
        body: &serde_json::Value,
    ) -> KeyClaim {
        let now = self.clock_now();
        let bytes = body.to_string();
        KeyClaim {
            merchant_id: m.id,
            scope: scope.into(),
            idem_key: key.into(),
            route: route.into(),
            fingerprint: request_fingerprint(bytes.as_bytes(), Some(body)),
            lease_token: converge_server::ids::new_token(),
            lease_expires_at: now + self.defaults.keys.lease_ms(),
            now,
            expires_at: now + self.defaults.keys.retention_ms(),
        }
    }

    /// A refund of part (or all) of order `i`'s payment, under a new key.
    async fn refund(&mut self, i: usize) -> String {
        let Some(pid) = self.orders[i].payment.clone() else {
            return format!("refund o{}: no payment yet", i + 1);
        };
        let merchant = self.merchants[self.orders[i].merchant].clone();
        let amount = self.rng.between(1, self.orders[i].amount);
        let key = self.new_key();
        let scope = format!("POST /v1/payments/{pid}/refunds");
        let body = serde_json::json!({"amount": amount, "reason": ""});
        let claim = self.claim(
            &merchant,
            &key,
            &scope,
            "POST /v1/payments/{id}/refunds",
            &body,
        );
        let input = RefundInput {
            amount,
            reason: String::new(),
        };
        let core = self.core.clone();
        let name = self.names.get(&pid).cloned().unwrap_or_default();
        let out = self
            .guarded(async move {
                core.create_refund_keyed(&merchant, &pid, &input, &claim)
                    .await
            })
            .await;
        let answer = match out {
            None => "crashed (restart)".into(),
            Some(Ok(Written::Answered(s))) => {
                let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap_or_default();
                format!(
                    "{} refund {}",
                    s.status,
                    v["status"].as_str().unwrap_or("?")
                )
            }
            Some(Ok(Written::Taken(_))) => "409 key taken".into(),
            Some(Err(RefundError::Failed(e))) => format!("error {e}"),
            Some(Err(e)) => format!("refused {}", refusal_name(&e)),
        };
        format!("refund {name} {amount} {key} -> {answer}")
    }

    /// Merchants stop; the worker runs every due job and the channel delivers its callbacks,
    /// the clock jumping to the next due job, until nothing is left to do; then everything
    /// must have converged: no job left, and nothing unfinished outside the error pool.
    pub async fn settle(&mut self) {
        let limit = self.clock_now() + SETTLE_LIMIT_MS;
        if self.outage {
            let line = self.outage();
            self.settled(line).await;
        }
        if self.held.is_some() {
            let line = self.release().await;
            self.settled(line).await;
        }
        while self.violation.is_none() && !self.stalled.is_empty() {
            let line = self.resume().await;
            self.settled(line).await;
        }
        if self.violation.is_none() {
            self.end_pauses().await;
        }
        while self.violation.is_none() {
            self.drain_now().await;
            if self.violation.is_some() {
                return;
            }
            let Some(next) = self.next_job_at().await else {
                if self.channel.late_requests() + self.channel.pending_callbacks() == 0 {
                    break;
                }
                continue;
            };
            if self.clock_now() > limit {
                let days = SETTLE_LIMIT_MS / 86_400_000;
                let detail = format!("jobs still live after {days} days of settling");
                self.fail("settle", "converged", detail);
                return;
            }
            self.clock.advance((next - self.clock_now()).max(1_000));
        }
        if self.violation.is_none() {
            self.step += 1;
            self.record("settle", "quiescent".into());
            // Settled: nothing may be unfinished now unless the error pool has it.
            self.check("settle", 0, true).await;
        }
    }

    /// One settling step's line, then the checks.
    async fn settled(&mut self, line: String) {
        self.step += 1;
        self.record("settle", line);
        if self.violation.is_none() {
            self.check("settle", RUN_WINDOW_MS, false).await;
        }
    }

    /// Everything that can happen now, without the clock moving: the late requests land, the
    /// callbacks are delivered, the worker runs every due job.
    async fn drain_now(&mut self) {
        while self.violation.is_none() && self.channel.late_requests() > 0 {
            let line = self.late_request();
            self.settled(line).await;
        }
        while self.violation.is_none() && self.channel.pending_callbacks() > 0 {
            let line = self.callback().await;
            self.settled(line).await;
        }
        while self.violation.is_none() {
            let line = self.work().await;
            let idle = line == "nothing due";
            self.settled(line).await;
            if idle {
                break;
            }
        }
    }

    /// When the next live job can run (a due job's time, or a lease's end), None when no job
    /// is live.
    async fn next_job_at(&mut self) -> Option<i64> {
        let stats = match self.store.queue_stats(0).await {
            Ok(s) => s,
            Err(e) => {
                self.fail("settle", "converged", format!("queue stats: {e}"));
                return None;
            }
        };
        let lease = self.defaults.worker.lease_ms as i64;
        stats
            .iter()
            .filter_map(|s| match JobStatus::parse(&s.status) {
                Some(JobStatus::Due) => s.oldest_run_at,
                Some(JobStatus::Leased) => s.oldest_run_at.map(|t| t.max(self.clock_now()) + lease),
                _ => None,
            })
            .min()
    }
}

/// Registers an endpoint of merchant `merchant_id` at `url` for every event type, through
/// the core as the merchant API does; its id.
async fn register_endpoint(core: &Core, merchant_id: i64, url: &str) -> Result<String, String> {
    let id = converge_server::service::webhooks::new_endpoint_id();
    core.create_endpoint(&id, merchant_id, url, &["*".to_string()], "", &actor())
        .await
        .map_err(|e| format!("endpoint {url}: {e}"))?;
    Ok(id)
}

/// An ops user acting in the console.
fn ops_actor(name: &str) -> converge_server::service::actor::Actor {
    converge_server::service::actor::Actor {
        username: name.into(),
        roles: "operator,approver".into(),
        meta: "{}".into(),
    }
}

type ActionOut = Option<Result<converge_wire::governance::ActionRecord, ActionError>>;

fn short_id(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}

/// A pause target as the trace names it (an endpoint by its id's first characters).
fn short_target(target: &str) -> String {
    match target.strip_prefix("endpoint:") {
        Some(id) => format!("endpoint:{}", short_id(id)),
        None => target.to_string(),
    }
}

/// The trace's words for an ops action's answer.
fn action_line(out: &ActionOut) -> String {
    match out {
        None => "crashed (restart)".into(),
        Some(Ok(a)) => a.status.as_str().to_string(),
        Some(Err(e)) => format!("refused: {e}"),
    }
}

/// A create's body as the merchant sends it (a manual order names its capture mode).
fn order_body(o: &Order, amount: i64) -> serde_json::Value {
    let mut body = serde_json::json!({"amount": amount, "currency": "CNY",
        "merchant_order_id": o.order_id, "description": ""});
    if o.manual {
        body["capture"] = "manual".into();
    }
    body
}

/// The trace's words for a capture's or a void's answer.
fn hold_answer(out: Option<Result<Written, HoldError>>) -> String {
    match out {
        None => "crashed (restart)".into(),
        Some(Ok(Written::Answered(s))) => {
            let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap_or_default();
            format!("{} {}", s.status, v["status"].as_str().unwrap_or("?"))
        }
        Some(Ok(Written::Taken(_))) => "409 key taken".into(),
        Some(Err(e)) => format!("refused: {e}"),
    }
}

/// Dates the outbox's installation (`schema_marks`, written by its migration with the
/// database's wall clock) to the simulated world's start: verify checks "every outcome has its
/// event" only for payments updated since then, and a run's simulated time starts before
/// today's date, so with the migration's mark the check would see no payment at all.
async fn outbox_installed_at_start(store: &dyn Store) -> Result<(), String> {
    let converge_server::store::DbPool::Sqlite(pool) = store.db_pool() else {
        return Err("the simulator's store is SQLite".into());
    };
    sqlx::query("UPDATE schema_marks SET at = $1 WHERE name = 'outbox'")
        .bind(START_MS)
        .execute(&pool)
        .await
        .map_err(|e| format!("outbox mark: {e}"))?;
    Ok(())
}

/// Rows inserted, updated or deleted on the world's database since it opened (SQLite's
/// `total_changes()`, triggers' included): the world's store is one in-memory connection, so
/// every write of every actor is counted, and an unchanged count means nothing was written.
async fn total_changes(store: &dyn Store) -> Result<i64, String> {
    let converge_server::store::DbPool::Sqlite(pool) = store.db_pool() else {
        return Err("the simulator's store is SQLite".into());
    };
    sqlx::query_scalar("SELECT total_changes()")
        .fetch_one(&pool)
        .await
        .map_err(|e| format!("total_changes: {e}"))
}

/// The trace line of a worker's pass: its jobs' results.
fn work_line(
    out: Result<Vec<(i64, converge_server::worker::JobResult)>, converge_server::store::StoreError>,
) -> String {
    match out {
        Ok(results) if results.is_empty() => "nothing due".into(),
        Ok(results) => results
            .iter()
            .map(|(id, r)| format!("job#{id} -> {}", r.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("claim failed: {e}"),
    }
}

fn refusal_name(e: &RefundError) -> &'static str {
    match e {
        RefundError::NoPayment => "404",
        RefundError::Frozen => "403 merchant_frozen",
        RefundError::NotRefundable(_) => "409 payment_not_refundable",
        RefundError::ExceedsRemaining { .. } => "409 refund_exceeds_remaining",
        RefundError::Reversing => "409 payment_reversing",
        RefundError::KeyLost => "409 idempotency_key_in_use",
        RefundError::Failed(_) => "error",
    }
}

fn actor() -> converge_server::service::actor::Actor {
    converge_server::service::actor::Actor {
        username: "cli:sim".into(),
        roles: String::new(),
        meta: "{}".into(),
    }
}

/// A process's core and worker over the shared store, clock and channel: the shipping
/// defaults, a secrets key and jitter of the seed, a lease owner of the restart.
fn build(
    store: &Arc<dyn Store>,
    clock: &ManualClock,
    channel: &SimChannel,
    endpoints: &SimEndpoints,
    d: &Defaults,
    seed: u64,
    restart: u64,
) -> (Core, Arc<Worker>) {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let core = Core {
        store: store.clone(),
        connectors: Arc::new(Connectors::single(
            DEFAULT_CONNECTOR,
            Arc::new(channel.clone()),
        )),
        clock: Arc::new(clock.clone()),
        timings: d.jobs.timings(),
        // Shanghai days closing at 23:00 (issue 35), so the simulated clock's days cross a
        // cut-off that is neither UTC's nor midnight.
        accounting: AccountingCalendar::new("Asia/Shanghai", "23:00")
            .expect("a literal calendar the domain's tests accept"),
        secrets: SecretBox::new(key),
        // Endpoints' names never reach a resolver here: the sender is the simulated one.
        notifier: Notifier::new(WebhookSettings {
            jitter_seed: seed | 1,
            allow_private: true,
            ..Default::default()
        })
        .with_sender(Arc::new(endpoints.clone())),
        pauses: Default::default(),
        outcomes: Default::default(),
        console: converge_server::service::console::ConsoleSettings::one_off(),
    };
    let worker = Worker::new(
        core.clone(),
        WorkerConfig {
            owner: format!("sim-{restart}"),
            batch: 1,
            lease_ms: d.worker.lease_ms as i64,
            poll: d.worker.poll(),
            retry: d.worker.retry(),
            // A worker's jitter seed 0 means "from the OS": never 0 here.
            seed: seed.wrapping_mul(31).wrapping_add(restart) | 1,
        },
    );
    (core, worker)
}

/// Where the next write transaction's start ends the process or holds its operation
/// ([`WriteHook`]): armed by an actor for one operation, disarmed after it.
#[derive(Debug, Default)]
struct WritePoint {
    /// Write transactions to let start before the fault; 0 when none is armed.
    countdown: u64,
    /// Hold the operation (else crash the process).
    hold: bool,
    /// The held operation's release.
    release: Option<oneshot::Sender<()>>,
}

/// What a held operation gave when it ended.
enum HeldOut {
    /// A worker's pass: its line.
    Work(String),
    /// Order `i`'s create with its first key: the answer (recorded when it comes).
    Create {
        i: usize,
        amount: i64,
        claim: KeyClaim,
        out: Result<Written, CreateError>,
    },
}

/// An operation held at the start of one of its write transactions.
struct Held {
    /// The rest of the operation.
    fut: Pin<Box<dyn Future<Output = HeldOut>>>,
    /// What it is, for the trace.
    what: String,
    /// The order whose create it is: its client retries when the process dies under it.
    order: Option<usize>,
}

/// Merchant alpha's pricing (issue 35), chosen by the seed without a draw so every seed's
/// draws stay what they were: no fee, a percentage that rounds with a refund fee, a fixed fee
/// larger than small captures (the fee capped at the amount), everything and a refund fee
/// larger than small refunds. Beta pays none. Returns the trace line.
async fn price_alpha(core: &Core, seed: u64) -> Result<String, String> {
    const PRICINGS: [(&str, i64, i64); 4] = [
        ("0", 0, 0),
        ("2.9", 30, 50),
        ("1.5", 5_000, 0),
        ("100", 0, 10_000),
    ];
    let (percent, fixed, refund) = PRICINGS[(seed % PRICINGS.len() as u64) as usize];
    core.set_merchant_pricing(START_MS, "alpha", percent, (fixed, refund), &actor())
        .await
        .map_err(|e| format!("pricing of alpha: {e}"))?;
    Ok(format!(
        "00000 +0ms setup pricing alpha {percent} % + {fixed}, {refund} per refund"
    ))
}

/// The store's write hook: at the armed write transaction's start, the process crashes (the
/// caller never resolves; the channel's crash signal drops it) or the operation waits for its
/// release (never, when the process died meanwhile).
fn write_hook(
    point: &Arc<Mutex<WritePoint>>,
    held: &Arc<Notify>,
    channel: &SimChannel,
) -> WriteHook {
    let (point, held, channel) = (point.clone(), held.clone(), channel.clone());
    WriteHook(Arc::new(move || {
        let mut p = point.lock().unwrap_or_else(|e| e.into_inner());
        if p.countdown == 0 {
            return None;
        }
        p.countdown -= 1;
        if p.countdown > 0 {
            return None;
        }
        if !p.hold {
            channel.crash_process("process crashes at a write transaction's start");
            return Some(Box::pin(std::future::pending::<()>()));
        }
        let (tx, rx) = oneshot::channel::<()>();
        p.release = Some(tx);
        channel.note("held at a write transaction's start");
        held.notify_one();
        Some(Box::pin(async move {
            if rx.await.is_err() {
                std::future::pending::<()>().await;
            }
        }))
    }))
}
