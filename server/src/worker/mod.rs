//! Compensation workers (DESIGN.md "Compensation queue and error pool"; seed article 004,
//! scheduled compensation with leases). A worker claims a batch of due jobs with a lease,
//! runs each in its own task (one failing or panicking job never blocks the others), and
//! writes each result only while its lease token still holds. Completions are written
//! together: the jobs of a batch that finished by the time one is collected are completed in
//! one statement that still checks each job's own token (a commit per batch, not per job:
//! BENCHMARKS.md "Compensation queue drain"). Failures retry with exponential backoff and
//! full jitter up to the job's maximum attempts, then go to the error pool with their
//! evidence, one job at a time as before.
//!
//! A serving process runs its jobs in lanes ([`lanes`]): one claim loop per lane with its own
//! worker slots, where a slow job holds one slot and never the lane. [`Worker::drain_once`]
//! (a batch of any kind, run to its end) is kept for tests, tools and the drain benchmark.

mod handlers;
pub mod lanes;
pub mod monitor;
pub mod purge_keys;
pub mod relay;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;

use crate::domain::backoff::RetryPolicy;
use crate::service::Core;
use crate::service::resolve::Step;
use crate::store::{KindFilter, LeasedJob, NewErrorItem};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Lease owner name (host/process/worker).
    pub owner: String,
    /// Jobs claimed at once.
    pub batch: i64,
    /// Lease length, ms.
    pub lease_ms: i64,
    /// Sleep when nothing is due.
    pub poll: Duration,
    /// Retry backoff and maximum attempts, per kind.
    pub retry: RetryPolicy,
    /// Jitter seed (0: from the OS).
    pub seed: u64,
}

/// What happened to one claimed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobResult {
    /// Done.
    Completed,
    /// Put back for a retry.
    Retried,
    /// Moved to the error pool.
    Buried,
    /// Another worker holds the job now: our result was not written.
    LeaseLost,
}

impl JobResult {
    /// The lower-case name used as the `result` label of `converge_jobs_processed_total`:
    /// `completed`, `retried`, `dead` (moved to the error pool, the job's status `dead`) or
    /// `lease_lost`.
    pub fn as_str(&self) -> &'static str {
        match self {
            JobResult::Completed => "completed",
            JobResult::Retried => "retried",
            JobResult::Buried => "dead",
            JobResult::LeaseLost => "lease_lost",
        }
    }
}

/// What a job's task hands back to the batch: a result already written (retried, buried,
/// lease lost), or a job whose handler is done and waits to be completed with the others.
enum Outcome {
    Written(i64, JobResult),
    Done(LeasedJob),
}

/// The error-pool item of a job its handler gave up on: it reopens an item a person already
/// resolved, since the failure happened anew.
fn given_up_item(
    job: &LeasedJob,
    kind: &'static str,
    dedupe_key: String,
    summary: &str,
    evidence: &serde_json::Value,
    now: i64,
) -> NewErrorItem {
    NewErrorItem {
        kind: kind.into(),
        dedupe_key,
        payment_id: job.payment_id.clone(),
        summary: summary.to_owned(),
        evidence: evidence.to_string(),
        reopen: true,
        now,
    }
}

/// Counts one job's result in `converge_jobs_processed_total`.
fn processed(job: &LeasedJob, result: &JobResult) {
    metrics::counter!("converge_jobs_processed_total", "kind" => job.kind.clone(), "result" => result.as_str()).increment(1);
}

/// A compensation worker.
pub struct Worker {
    core: Core,
    cfg: WorkerConfig,
    rng: Mutex<StdRng>,
}

impl Worker {
    /// A worker over `core`.
    pub fn new(core: Core, cfg: WorkerConfig) -> Arc<Self> {
        let rng = if cfg.seed == 0 {
            StdRng::from_os_rng()
        } else {
            StdRng::seed_from_u64(cfg.seed)
        };
        Arc::new(Worker {
            core,
            cfg,
            rng: Mutex::new(rng),
        })
    }

    /// Claims one batch of any kind and runs it to the end; returns each job's result. Used by
    /// tests and the benchmark that drive the queue step by step (serving processes run lanes
    /// instead: [`lanes::spawn_lanes`]). Jobs of paused kinds (the emergency switch) are not claimed.
    pub async fn drain_once(
        self: &Arc<Self>,
    ) -> Result<Vec<(i64, JobResult)>, crate::store::StoreError> {
        let skip = self.core.active_pauses().await.unleased_kinds();
        let now = self.core.clock.now_ms();
        let jobs = self
            .core
            .store
            .claim_jobs_of(
                &self.cfg.owner,
                self.cfg.batch,
                self.cfg.lease_ms,
                now,
                &KindFilter::except(skip),
            )
            .await?;
        metrics::counter!("converge_jobs_claimed_total").increment(jobs.len() as u64);
        let mut set = tokio::task::JoinSet::new();
        for job in jobs {
            let me = self.clone();
            set.spawn(async move { me.process(job).await });
        }
        let mut results = Vec::new();
        let mut finished = Vec::new();
        while let Some(joined) = set.join_next().await {
            let mut collect = |joined: Result<Outcome, tokio::task::JoinError>| match joined {
                Ok(Outcome::Written(id, r)) => results.push((id, r)),
                Ok(Outcome::Done(job)) => finished.push(job),
                Err(e) => tracing::error!(error = %e, "job task failed outside its handler"),
            };
            collect(joined);
            // Whatever else has finished meanwhile joins this write; jobs still running are
            // completed by a later one, so a slow job never holds back the others' results.
            while let Some(joined) = set.try_join_next() {
                collect(joined);
            }
            if !finished.is_empty() {
                self.complete(std::mem::take(&mut finished), &mut results)
                    .await;
            }
        }
        Ok(results)
    }

    /// Runs one job this worker's caller already claimed (`job` carries its lease token) and
    /// writes its result under that token, as [`drain_once`](Self::drain_once) does for each
    /// job of its batch. The simulator (issue 39) uses it to run a job whose holder stalled
    /// past its lease: the result is then [`JobResult::LeaseLost`] when another worker holds
    /// the job now.
    pub async fn run_claimed(self: &Arc<Self>, job: LeasedJob) -> (i64, JobResult) {
        let id = job.id;
        match self.clone().process(job).await {
            Outcome::Written(id, result) => (id, result),
            Outcome::Done(job) => {
                let mut results = Vec::with_capacity(1);
                self.complete(vec![job], &mut results).await;
                results.pop().unwrap_or((id, JobResult::LeaseLost))
            }
        }
    }

    async fn process(self: Arc<Self>, job: LeasedJob) -> Outcome {
        // The handler runs in its own task so a panic becomes this job's failure, not the
        // batch's.
        let core = self.core.clone();
        let j = job.clone();
        // The job runs in the trace of what wrote it, inside a span naming it, so its events,
        // follow-up jobs and log lines carry the payment's one trace id.
        let trace = j.trace_id.clone().map_or_else(
            crate::telemetry::TraceId::random,
            crate::telemetry::TraceId::stored,
        );
        let span = tracing::info_span!(
            "job",
            job_id = j.id,
            kind = %j.kind,
            payment_id = j.payment_id.as_deref().unwrap_or("-"),
            trace_id = %trace.as_str()
        );
        let step = match tokio::spawn(tracing::Instrument::instrument(
            crate::telemetry::in_trace(trace, async move { handlers::run(&core, &j).await }),
            span,
        ))
        .await
        {
            Ok(Ok(step)) => step,
            Ok(Err(e)) => Step::Retry(format!("{e}")),
            Err(e) => Step::Retry(format!("handler panicked: {e}")),
        };
        if step == Step::Done {
            return Outcome::Done(job);
        }
        let result = self.record(&job, step).await;
        processed(&job, &result);
        Outcome::Written(job.id, result)
    }

    /// Completes `jobs` (their handlers said done) in one store call, each under its own
    /// lease token, and adds each job's result to `results`: completed, or lease lost when
    /// its token no longer held or the write failed (the lease then lapses and the job runs
    /// again, as for a single completion).
    async fn complete(&self, jobs: Vec<LeasedJob>, results: &mut Vec<(i64, JobResult)>) {
        let now = self.core.clock.now_ms();
        let leases: Vec<(i64, &str)> = jobs
            .iter()
            .map(|j| (j.id, j.lease_token.as_str()))
            .collect();
        let completed: Option<std::collections::HashSet<i64>> = match self
            .core
            .store
            .complete_jobs(&leases, now)
            .await
        {
            Ok(ids) => Some(ids.into_iter().collect()),
            Err(e) => {
                tracing::error!(jobs = jobs.len(), error = %e, "job results not written; the leases lapse and they run again");
                None
            }
        };
        for job in &jobs {
            let result = match &completed {
                Some(ids) if ids.contains(&job.id) => JobResult::Completed,
                Some(_) => {
                    tracing::warn!(
                        job = job.id,
                        "lease lost before the result was written; the newer holder decides"
                    );
                    JobResult::LeaseLost
                }
                None => JobResult::LeaseLost,
            };
            processed(job, &result);
            results.push((job.id, result));
        }
    }

    /// Writes the result `step` of `job` under its lease: what the job became, or lease lost
    /// when its token no longer held or the write failed (logged; the lease then lapses and
    /// the job runs again).
    async fn record(&self, job: &LeasedJob, step: Step) -> JobResult {
        match self.write_step(job, step).await {
            Ok((true, r)) => r,
            Ok((false, _)) => {
                tracing::warn!(
                    job = job.id,
                    "lease lost before the result was written; the newer holder decides"
                );
                JobResult::LeaseLost
            }
            Err(e) => {
                tracing::error!(job = job.id, error = %e, "job result not written; the lease lapses and it runs again");
                JobResult::LeaseLost
            }
        }
    }

    /// The one store write of `step` for `job`: completed, retried (after its kind's backoff,
    /// the handler's time, or the pause's recheck), or buried with its error-pool item once
    /// its attempts are spent or the handler gives up. Returns whether the lease still held,
    /// with what the job became.
    async fn write_step(
        &self,
        job: &LeasedJob,
        step: Step,
    ) -> Result<(bool, JobResult), crate::store::StoreError> {
        let store = &self.core.store;
        let now = self.core.clock.now_ms();
        let backoff = self.cfg.retry.backoff(&job.kind);
        let max_attempts = self.cfg.retry.max_attempts(&job.kind, job.max_attempts);
        match step {
            // Not reached from `process` (done jobs are completed in batches); kept so a
            // single result is still written whole.
            Step::Done => store
                .complete_job(job.id, &job.lease_token, now)
                .await
                .map(|ok| (ok, JobResult::Completed)),
            Step::Wait(why) => {
                let at = now.saturating_add(i64::try_from(backoff.cap_ms).unwrap_or(i64::MAX));
                self.retry(job, at, &why, true, now).await
            }
            Step::Held(why) => {
                let at = now.saturating_add(crate::service::pauses::HOLD_RECHECK_MS);
                self.retry(job, at, &why, true, now).await
            }
            Step::Retry(error) if job.attempts < max_attempts => {
                let delay = {
                    let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
                    backoff.delay_ms(u32::try_from(job.attempts).unwrap_or(u32::MAX), &mut *rng)
                };
                let at = now.saturating_add(i64::try_from(delay).unwrap_or(i64::MAX));
                self.retry(job, at, &error, false, now).await
            }
            Step::Retry(error) => {
                let item = self.dead_item(job, &error, now).await;
                self.bury(job, &error, &item, now).await
            }
            Step::RetryAt { at, error } => self.retry(job, at, &error, false, now).await,
            Step::WaitUntil { at, why } => self.retry(job, at, &why, true, now).await,
            Step::GiveUpWith {
                kind,
                dedupe_key,
                summary,
                evidence,
            } => {
                let item = given_up_item(job, kind, dedupe_key, &summary, &evidence, now);
                self.bury(job, &summary, &item, now).await
            }
            Step::GiveUp {
                kind,
                summary,
                evidence,
            } => {
                let dedupe_key = format!("job:{}:{kind}", job.id);
                let item = given_up_item(job, kind, dedupe_key, &summary, &evidence, now);
                self.bury(job, &summary, &item, now).await
            }
        }
    }

    /// Schedules `job` again at `at` with `error` (`waiting`: without spending an attempt),
    /// under its lease.
    async fn retry(
        &self,
        job: &LeasedJob,
        at: i64,
        error: &str,
        waiting: bool,
        now: i64,
    ) -> Result<(bool, JobResult), crate::store::StoreError> {
        self.core
            .store
            .retry_job(job.id, &job.lease_token, at, error, waiting, now)
            .await
            .map(|ok| (ok, JobResult::Retried))
    }

    /// Buries `job` with `error` and its error-pool `item`, under its lease.
    async fn bury(
        &self,
        job: &LeasedJob,
        error: &str,
        item: &NewErrorItem,
        now: i64,
    ) -> Result<(bool, JobResult), crate::store::StoreError> {
        self.core
            .store
            .bury_job(job.id, &job.lease_token, error, item, now)
            .await
            .map(|ok| (ok, JobResult::Buried))
    }

    async fn dead_item(&self, job: &LeasedJob, error: &str, now: i64) -> NewErrorItem {
        let state = match &job.payment_id {
            Some(id) => self
                .core
                .store
                .payment(id)
                .await
                .ok()
                .flatten()
                .map(|p| p.status.as_str()),
            None => None,
        };
        NewErrorItem {
            kind: "job_dead".into(),
            dedupe_key: format!("job:{}", job.id),
            payment_id: job.payment_id.clone(),
            summary: format!("{} job failed {} times: {error}", job.kind, job.attempts),
            evidence: json!({
                "job_id": job.id, "kind": job.kind, "attempts": job.attempts, "last_error": error,
                "payment_status": state, "refund_id": job.refund_id,
            })
            .to_string(),
            reopen: true,
            now,
        }
    }
}
