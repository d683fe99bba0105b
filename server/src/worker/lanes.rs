//! The job queue's bulkheads (issue 37; DESIGN.md "Connectors and lanes"; README "Lanes and
//! fairness"): one claim loop per [`Lane`], each with its own worker slots.
//!
//! A lane has `slots` worker slots (a semaphore). Its loop waits for a free slot, then claims
//! at most as many due jobs of its lane's kinds as it has free slots (the claim is fair across
//! merchants: [`fair_claim_sql`](crate::store::fair_claim_sql)) and spawns each job holding
//! one slot. A slot is given back when its job's result is written, so a slow job holds one
//! slot and never the lane: the loop goes on claiming for the free ones.
//!
//! Database connections: a job's task makes its store calls one at a time (no handler keeps
//! a transaction open across another call), so a lane holds at most `slots + 2` connections
//! at once: one per running job, one for its claim, one for its completion writer. The
//! PostgreSQL pool is sized to the sum of that over the lanes plus `--api-db-connections`
//! ([`LaneSettings::pool_size`](crate::config::LaneSettings::pool_size)), so however stuck a
//! lane is (every slot waiting on a hanging channel, or a database call that does not
//! return), it can neither take another lane's connections nor the reserve of the API's
//! requests and the process's other loops. SQLite writes through its one writer connection
//! whatever the lanes; there a lane's slots bound its jobs, and the WAL readers are shared.
//!
//! The compensation lane's claim also takes no more jobs than its [`TokenBucket`]s allow
//! (`--compensation-rate-per-sec`): one bucket per channel (the connector the job's payment
//! was routed to), so refunds, reversals, voids and expiries reach each channel at most at
//! that rate, oldest first within the fairness rule, and a storm toward one channel spends
//! none of another's tokens. The lane claims channel by channel (the configured connectors in
//! turn, then one more claim for the jobs of any other channel, which share a bucket), each
//! claim no bigger than its channel's tokens. The buckets are per process: N serving
//! processes drain each channel at up to N times the rate. A claim for the other channels
//! that found nothing is not made again within the poll interval: its walk reads past every
//! live job of the configured channels (none matches), which under a storm of 22,000 refunds
//! cost 55 ms idle and ~300 ms under full-rate creates on PostgreSQL, each time holding the
//! loop from the configured channels' claims (BENCHMARKS.md "Bulkheads"). The other
//! channels' jobs (a connector since removed from the configuration) wait at most one poll
//! interval more.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use super::{Outcome, Worker};
use crate::domain::lanes::{Lane, TokenBucket};
use crate::store::{COMPLETE_JOBS_CHUNK, Channels, KindFilter, LeasedJob, StoreError};

/// How long a lane waits after its `failures`-th claim in a row failed (the database gone,
/// or failing over: issue 40): the poll interval doubled per failure after the first, at most
/// [`MAX_CLAIM_BACKOFF`] (or the poll interval, when that is longer), so a lost database is
/// not hammered by every lane of every process.
pub fn claim_backoff(poll: Duration, failures: u32) -> Duration {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let policy = crate::domain::backoff::Backoff {
        base_ms: ms(poll),
        cap_ms: ms(MAX_CLAIM_BACKOFF.max(poll)),
    };
    Duration::from_millis(policy.ceiling_ms(failures))
}

/// The longest wait between a lane's failed claims.
pub const MAX_CLAIM_BACKOFF: Duration = Duration::from_secs(5);

/// The bucket key of the jobs whose channel is none of the configured connectors (a
/// connector since removed from the configuration), which share one bucket.
pub const OTHER_CHANNELS: &str = "";

/// How one lane runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaneConfig {
    /// The lane.
    pub lane: Lane,
    /// Worker slots: jobs of the lane running at once in this process (at least 1).
    pub slots: usize,
    /// Jobs claimed a second at most per channel (a token bucket per connector whose burst
    /// is one second's worth); 0: no limit.
    pub rate_per_sec: f64,
}

/// A worker slot taken by one job: given back (and the in-use gauge lowered) when dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    in_use: Arc<AtomicUsize>,
    lane: Lane,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let n = self.in_use.fetch_sub(1, Ordering::SeqCst).saturating_sub(1);
        metrics::gauge!("converge_lane_slots_in_use", "lane" => self.lane.as_str()).set(n as f64);
    }
}

/// One lane's claim loop and its slots.
pub struct LaneRunner {
    worker: Arc<Worker>,
    cfg: LaneConfig,
    slots: Arc<Semaphore>,
    in_use: Arc<AtomicUsize>,
    /// The rate-limited lane's buckets, by channel (connector name, or [`OTHER_CHANNELS`]).
    buckets: Mutex<HashMap<String, TokenBucket>>,
    /// Turns of the per-channel claims (which channel claims first).
    turn: AtomicUsize,
    /// Until when (epoch ms UTC, the core's clock) the claim for [`OTHER_CHANNELS`] is not
    /// made: set one poll interval ahead when it found nothing.
    others_quiet_until: AtomicI64,
}

impl LaneRunner {
    /// A runner of `cfg.lane` whose jobs `worker` runs (its owner name, lease, retry policy
    /// and poll interval are the lane's).
    pub fn new(worker: Arc<Worker>, cfg: LaneConfig) -> Arc<Self> {
        let slots = cfg.slots.max(1);
        metrics::gauge!("converge_lane_slots", "lane" => cfg.lane.as_str()).set(slots as f64);
        metrics::gauge!("converge_lane_slots_in_use", "lane" => cfg.lane.as_str()).set(0.0);
        metrics::gauge!("converge_lane_rate_limit_per_second", "lane" => cfg.lane.as_str())
            .set(cfg.rate_per_sec.max(0.0));
        Arc::new(LaneRunner {
            worker,
            cfg: LaneConfig { slots, ..cfg },
            slots: Arc::new(Semaphore::new(slots)),
            in_use: Arc::new(AtomicUsize::new(0)),
            buckets: Mutex::new(HashMap::new()),
            turn: AtomicUsize::new(0),
            others_quiet_until: AtomicI64::new(i64::MIN),
        })
    }

    /// The lane.
    pub fn lane(&self) -> Lane {
        self.cfg.lane
    }

    /// Slots held by running jobs now.
    pub fn slots_in_use(&self) -> usize {
        self.in_use.load(Ordering::SeqCst)
    }

    /// Claims and runs the lane's jobs until `stop` turns true, then waits for the jobs
    /// running to finish and their results to be written.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(self.clone().write_completions(done_rx));
        let mut failures = 0u32;
        loop {
            if *stop.borrow() {
                break;
            }
            // A stop sender gone (its process state dropped without a shutdown) stops the
            // lane too, rather than waking it at once for ever.
            let first = tokio::select! {
                p = self.slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
                changed = stop.changed() => if changed.is_err() { break } else { continue },
            };
            let mut permits = vec![first];
            while let Ok(p) = self.slots.clone().try_acquire_owned() {
                permits.push(p);
            }
            let claimed = self.claim_with(permits, &done_tx).await;
            failures = if claimed.is_err() {
                failures.saturating_add(1)
            } else {
                0
            };
            let pause = match claimed {
                Ok(0) => self.idle_wait(),
                Ok(_) => Duration::ZERO,
                Err(e) => {
                    let wait = claim_backoff(self.worker.cfg.poll, failures);
                    tracing::warn!(lane = self.cfg.lane.as_str(), error = %e, retry_in_ms = wait.as_millis() as u64, "claiming jobs failed; retrying with backoff");
                    wait
                }
            };
            if !pause.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    changed = stop.changed() => if changed.is_err() { break },
                }
            }
        }
        // Every slot back means every job's task has ended (its result written or sent).
        let all = u32::try_from(self.cfg.slots).unwrap_or(u32::MAX);
        let _ = self.slots.acquire_many(all).await;
        drop(done_tx);
        let _ = writer.await;
    }

    /// One turn of [`run`](Self::run)'s loop without its waits: a claim for every free slot,
    /// the jobs claimed spawned (their results written as they finish). Returns how many were
    /// claimed. For tests and benchmarks that drive a lane claim by claim.
    pub async fn claim_once(self: &Arc<Self>) -> Result<usize, StoreError> {
        let mut permits = Vec::new();
        while let Ok(p) = self.slots.clone().try_acquire_owned() {
            permits.push(p);
        }
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        tokio::spawn(self.clone().write_completions(done_rx));
        self.claim_with(permits, &done_tx).await
    }

    /// How long an idle loop sleeps: the poll interval, or less when an empty bucket was
    /// what held a claim back and its token comes sooner.
    fn idle_wait(&self) -> Duration {
        let now = self.worker.core.clock.now_ms();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let wait = buckets
            .values_mut()
            .map(|b| b.wait_ms(now))
            .filter(|w| *w > 0)
            .min();
        match wait {
            Some(w) => Duration::from_millis(w).min(self.worker.cfg.poll),
            None => self.worker.cfg.poll,
        }
    }

    /// One claim for the slots in `permits` (taken by the caller): at most that many due jobs
    /// of the lane (in a rate-limited lane, channel by channel and no more than each
    /// channel's bucket allows), each spawned holding one slot; the slots not used are given
    /// back. Done jobs go to `done` to be completed together. Returns how many jobs were
    /// claimed.
    async fn claim_with(
        self: &Arc<Self>,
        mut permits: Vec<OwnedSemaphorePermit>,
        done: &mpsc::UnboundedSender<(LeasedJob, Slot)>,
    ) -> Result<usize, StoreError> {
        let core = &self.worker.core;
        let paused = core.active_pauses().await.unleased_kinds();
        let Some(filter) = KindFilter::for_lane(self.cfg.lane, &paused) else {
            return Ok(0);
        };
        if self.cfg.rate_per_sec <= 0.0 {
            let jobs = self.claim(&filter, permits.len()).await?;
            return Ok(self.spawn_jobs(jobs, &mut permits, done));
        }
        let mut channels: Vec<String> = core.connectors.names();
        let others = Channels::Except(channels.clone());
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        if !channels.is_empty() {
            let len = channels.len();
            channels.rotate_left(turn % len);
        }
        let mut claimed = 0;
        let each = channels
            .into_iter()
            .map(|c| (c.clone(), Channels::Only(c)))
            .chain(std::iter::once((OTHER_CHANNELS.to_owned(), others)));
        for (key, on) in each {
            if permits.is_empty() {
                break;
            }
            let now = core.clock.now_ms();
            let others = key == OTHER_CHANNELS;
            if others && now < self.others_quiet_until.load(Ordering::Relaxed) {
                continue;
            }
            let allowed = self.take_tokens(&key, permits.len(), now);
            if allowed == 0 {
                continue;
            }
            let jobs = match self.claim(&filter.clone().on(on), allowed).await {
                Ok(jobs) => jobs,
                Err(e) => {
                    self.give_back_tokens(&key, allowed);
                    return Err(e);
                }
            };
            if others && jobs.is_empty() {
                let poll = i64::try_from(self.worker.cfg.poll.as_millis()).unwrap_or(i64::MAX);
                self.others_quiet_until
                    .store(now.saturating_add(poll), Ordering::Relaxed);
            }
            self.give_back_tokens(&key, allowed.saturating_sub(jobs.len()));
            claimed += self.spawn_jobs(jobs, &mut permits, done);
        }
        Ok(claimed)
    }

    /// Claims at most `n` due jobs of `filter`, counted in the claim metrics.
    async fn claim(&self, filter: &KindFilter, n: usize) -> Result<Vec<LeasedJob>, StoreError> {
        let core = &self.worker.core;
        let jobs = core
            .store
            .claim_jobs_of(
                &self.worker.cfg.owner,
                n as i64,
                self.worker.cfg.lease_ms,
                core.clock.now_ms(),
                filter,
            )
            .await?;
        metrics::counter!("converge_jobs_claimed_total").increment(jobs.len() as u64);
        metrics::counter!("converge_lane_jobs_claimed_total", "lane" => self.cfg.lane.as_str())
            .increment(jobs.len() as u64);
        Ok(jobs)
    }

    /// Spawns each of `jobs` holding one of `permits`; returns how many were spawned.
    fn spawn_jobs(
        self: &Arc<Self>,
        jobs: Vec<LeasedJob>,
        permits: &mut Vec<OwnedSemaphorePermit>,
        done: &mpsc::UnboundedSender<(LeasedJob, Slot)>,
    ) -> usize {
        let mut n = 0;
        for job in jobs {
            let Some(permit) = permits.pop() else { break };
            n += 1;
            let slot = self.slot(permit);
            let me = self.clone();
            let done = done.clone();
            tokio::spawn(async move {
                match me.worker.clone().process(job).await {
                    Outcome::Written(..) => drop(slot),
                    // The completion writer gives the slot back once the result is written;
                    // if it is gone (shutting down), dropping the message gives it back.
                    Outcome::Done(job) => {
                        let _ = done.send((job, slot));
                    }
                }
            });
        }
        n
    }

    fn slot(&self, permit: OwnedSemaphorePermit) -> Slot {
        let n = self.in_use.fetch_add(1, Ordering::SeqCst) + 1;
        metrics::gauge!("converge_lane_slots_in_use", "lane" => self.cfg.lane.as_str())
            .set(n as f64);
        Slot {
            _permit: permit,
            in_use: self.in_use.clone(),
            lane: self.cfg.lane,
        }
    }

    /// Takes up to `want` tokens of channel `key`'s bucket (a full one when first seen).
    fn take_tokens(&self, key: &str, want: usize, now: i64) -> usize {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let rate = self.cfg.rate_per_sec;
        buckets
            .entry(key.to_owned())
            .or_insert_with(|| TokenBucket::new(rate, rate))
            .take(want, now)
    }

    fn give_back_tokens(&self, key: &str, n: usize) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = buckets.get_mut(key) {
            b.give_back(n);
        }
    }

    /// Completes the done jobs sent on `rx`: whatever has arrived by the time one is received
    /// is written in one store call (each under its own lease token: `Worker::complete`),
    /// and their slots are given back after the write.
    async fn write_completions(
        self: Arc<Self>,
        mut rx: mpsc::UnboundedReceiver<(LeasedJob, Slot)>,
    ) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < COMPLETE_JOBS_CHUNK {
                match rx.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let (jobs, slots): (Vec<LeasedJob>, Vec<Slot>) = batch.into_iter().unzip();
            let mut results = Vec::with_capacity(jobs.len());
            self.worker.complete(jobs, &mut results).await;
            drop(slots);
        }
    }
}

/// Starts one runner per lane over `worker` with `configs`, each stopping on `stop`.
pub fn spawn_lanes(
    worker: &Arc<Worker>,
    configs: &[LaneConfig],
    stop: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    configs
        .iter()
        .map(|cfg| tokio::spawn(LaneRunner::new(worker.clone(), *cfg).run(stop.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_claim_backs_off_from_the_poll_interval_doubling_up_to_five_seconds() {
        let poll = Duration::from_millis(100);
        let waits: Vec<u64> = (1..=8)
            .map(|n| claim_backoff(poll, n).as_millis() as u64)
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(claim_backoff(poll, u32::MAX), MAX_CLAIM_BACKOFF);
        // A poll interval above the cap is kept, never shortened.
        assert_eq!(
            claim_backoff(Duration::from_secs(9), 3),
            Duration::from_secs(9)
        );
    }
}
