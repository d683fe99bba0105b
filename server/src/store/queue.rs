//! The compensation queue, the error pool, stuck detection and reconciliation runs
//! (DESIGN.md "Compensation queue and error pool"; seed article 004, scheduled compensation
//! with leases and the error pool). Part of the storage abstraction: [`Store`](super::Store)
//! requires it, and the conformance suite runs it on both backends.

use async_trait::async_trait;
use serde::Serialize;

use super::{NewJob, StoreError};
use crate::domain::jobs::JobKind;
use crate::domain::lanes::Lane;
use crate::domain::state::PaymentStatus;
use crate::domain::stuck::{AGE_BUCKETS, StuckThresholds};

/// The stuck-payment predicate over `payments`: one `(status = 'X' AND updated_at <= $n)` per
/// state of [`StuckThresholds::per_state`], in that order, its cut-offs bound from `$first`
/// on. Built from the domain's list so the states that can be stuck are named once.
fn stuck_where(first: usize) -> String {
    StuckThresholds::default()
        .per_state()
        .iter()
        .enumerate()
        .map(|(i, (status, _))| format!("(status = '{status}' AND updated_at <= ${})", first + i))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The SQL of [`Queue::holds_expiring`] (`$1`: the cut-off): what each AUTHORIZED hold still
/// holds is its amount less what was captured and released, as `Payment::held_amount` reads
/// it. The sum is cast to BIGINT: PostgreSQL sums BIGINTs as NUMERIC.
pub fn holds_expiring_sql() -> String {
    format!(
        "SELECT currency, COUNT(*), CAST(SUM(amount - captured_amount - released_amount) AS BIGINT), \
         MIN(hold_expires_at) FROM payments WHERE status = '{}' AND hold_expires_at IS NOT NULL \
         AND hold_expires_at < $1 GROUP BY currency ORDER BY currency",
        PaymentStatus::Authorized
    )
}

/// `CASE ... END`: the [`AGE_BUCKETS`] name of a payment's age (`$1` minus `updated_at`).
fn age_bucket_case() -> String {
    let (last, bounded) = AGE_BUCKETS.split_last().expect("age buckets");
    let whens: String = bounded
        .iter()
        .map(|(name, upper)| format!("WHEN $1 - updated_at < {upper} THEN '{name}' "))
        .collect();
    format!("CASE {whens}ELSE '{}' END", last.0)
}

/// `'A', 'B', ...`: the payment statuses `keep` selects, for an SQL `IN (...)`, so a query
/// names the states of a domain predicate (`is_charged`, ...) without repeating them.
pub(crate) fn status_list(keep: impl Fn(PaymentStatus) -> bool) -> String {
    PaymentStatus::ALL
        .into_iter()
        .filter(|s| keep(*s))
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Stuck payments counted by status and age bucket ([`AGE_BUCKETS`] of the time since their
/// last change): `$1` is now, `$2..=$6` the per-state cut-offs (epoch ms UTC). Served by
/// `payments_status_updated`: each branch of the predicate is one index range. Public so the
/// query benchmark can `EXPLAIN` exactly what the dashboard runs.
pub fn stuck_counts_sql() -> String {
    format!(
        "SELECT status, {} AS bucket, COUNT(*) FROM payments WHERE {} GROUP BY 1, 2 ORDER BY 1, 2",
        age_bucket_case(),
        stuck_where(2)
    )
}

/// The oldest stuck payments, at most `$1`, with the next attempt of their live jobs;
/// `$2..=$6` as in [`stuck_counts_sql`].
pub fn stuck_payments_sql() -> String {
    format!(
        concat!(
            "SELECT p.id, p.merchant_id, p.status, p.amount, p.currency, p.created_at, p.updated_at, p.last_error, \
         (SELECT MIN(j.run_at) FROM jobs j WHERE j.payment_id = p.id AND j.status IN (",
            converge_wire::job_sql!(Due),
            ", ",
            converge_wire::job_sql!(Leased),
            ")) \
         AS next_attempt_at, \
         (SELECT COUNT(*) FROM jobs j WHERE j.payment_id = p.id AND j.status IN (",
            converge_wire::job_sql!(Due),
            ", ",
            converge_wire::job_sql!(Dead),
            ")) AS wakeable_jobs \
         FROM payments p WHERE {} ORDER BY p.updated_at LIMIT $1"
        ),
        stuck_where(2)
    )
}

/// The done jobs of the whole minutes from minute `$1` (epoch minutes, UTC) to now, the
/// current minute included, as `(kind, n)` rows to sum, read from `jobs_done_minutes`: the
/// per-minute counts that migration 0113's triggers keep in the same transaction as each
/// write to `jobs`. Exact for that window: the same rows `status = done AND updated_at >=
/// $1 * 60000` count. Whole minutes, as the dashboard's Idempotency-Key outcome windows
/// are: a window starting mid-minute counted its first, partial minute from `jobs` itself,
/// which under load is up to a minute of completions on pages not yet all-visible (17 / 95
/// ms p50 / p95 for `queue_stats` at 10 M payments while creates ran, BENCHMARKS.md "Under
/// load"); before that, counting the whole window from `jobs` took 38 / 102 ms.
const DONE_IN_WINDOW: &str = "SELECT kind, n FROM jobs_done_minutes WHERE minute >= $1";

/// Live jobs (due, leased, dead) counted by kind and status with the oldest `run_at` and how
/// many are retrying (attempts > 0), and jobs done since minute `$1` (epoch minutes UTC,
/// [`DONE_IN_WINDOW`]) by kind: the dashboard's queue panel and the `converge_jobs` gauges.
/// Done rows carry their count only (`oldest_run_at` None, `retrying` 0). Done jobs are
/// counted over a window, not all time, and from per-minute counts ([`DONE_IN_WINDOW`]);
/// the live half reads `jobs_live` on PostgreSQL (an index of the live jobs only, whose
/// dead versions under load are not in the way), `jobs_due` on SQLite.
pub fn queue_stats_sql() -> String {
    format!(
        concat!(
            "SELECT kind, status, COUNT(*) AS count, MIN(run_at) AS oldest_run_at, \
         CAST(SUM(CASE WHEN attempts > 0 THEN 1 ELSE 0 END) AS BIGINT) AS retrying \
         FROM jobs WHERE status IN (",
            converge_wire::job_sql!(Due),
            ", ",
            converge_wire::job_sql!(Leased),
            ", ",
            converge_wire::job_sql!(Dead),
            ") GROUP BY kind, status \
         UNION ALL SELECT kind, ",
            converge_wire::job_sql!(Done),
            " AS status, CAST(SUM(n) AS BIGINT) AS count, NULL AS oldest_run_at, \
         CAST(0 AS BIGINT) AS retrying FROM ({DONE_IN_WINDOW}) d GROUP BY kind HAVING SUM(n) > 0 \
         ORDER BY kind, status"
        ),
        DONE_IN_WINDOW = DONE_IN_WINDOW,
    )
}

/// Jobs finished since minute `$1` (epoch minutes UTC), the current minute included: the
/// dashboard's throughput figure, summed from per-minute counts ([`DONE_IN_WINDOW`]).
pub fn jobs_done_since_sql() -> String {
    format!("SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM ({DONE_IN_WINDOW}) d")
}

/// Most jobs [`Queue::complete_jobs`] completes in one statement (two bound parameters a job,
/// well under SQLite's and PostgreSQL's limits on parameters).
pub const COMPLETE_JOBS_CHUNK: usize = 500;

/// The statement completing `n` leased jobs (`n` >= 1): `$1` is now, then a (job id, lease
/// token) pair a job in `$2, $3`, `$4, $5`, ... . A row is written only while its job is
/// leased under that exact token; the ids written come back. The same text on both
/// backends (`UPDATE ... FROM` a `VALUES` list; SQLite >= 3.33).
pub fn complete_jobs_sql(n: usize) -> String {
    let pairs: Vec<String> = (0..n)
        .map(|i| format!("(${}, ${})", 2 * i + 2, 2 * i + 3))
        .collect();
    let sql = format!(
        concat!(
            "WITH c (job_id, token) AS (VALUES {}) \
         UPDATE jobs SET status = ",
            converge_wire::job_sql!(Done),
            ", lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, \
         updated_at = $1 FROM c WHERE jobs.id = c.job_id AND jobs.status = ",
            converge_wire::job_sql!(Leased),
            " \
         AND jobs.lease_token = c.token RETURNING id"
        ),
        pairs.join(", ")
    );
    unleased(sql, "jobs.lease_token = c.token")
}

/// A job result's SQL as written: with planted bug 7 (`planted`) on, without its lease
/// token condition `cond` (the token still bound, compared with itself).
#[cfg_attr(not(feature = "planted-bugs"), allow(unused_variables))]
pub(crate) fn unleased(sql: String, cond: &str) -> String {
    match () {
        #[cfg(feature = "planted-bugs")]
        () if crate::planted::on(crate::planted::Bug::ResultWithoutLease) => {
            let token = cond.rsplit(' ').next().unwrap_or_default();
            sql.replace(cond, &format!("{token} = {token}"))
        }
        () => sql,
    }
}

/// Which jobs a claim takes: by kind (stored names) and, optionally, by the channel
/// (connector) of the job's payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindFilter {
    kinds: Kinds,
    channels: Channels,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kinds {
    /// Only these kinds (never empty: a claim with nothing to take is not made).
    Only(Vec<String>),
    /// Every kind but these (empty: every kind).
    Except(Vec<String>),
}

/// Which channels' jobs a claim takes, by the connector name of the job's payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channels {
    /// Every job, whatever its payment's channel (and jobs of no payment).
    Any,
    /// Only jobs of payments routed to this connector.
    Only(String),
    /// Jobs of no payment and of payments routed to none of these connectors.
    Except(Vec<String>),
}

impl KindFilter {
    /// Only the kinds in `kinds` (empty: the claim takes nothing), any channel.
    pub fn only(kinds: Vec<String>) -> Self {
        KindFilter {
            kinds: Kinds::Only(kinds),
            channels: Channels::Any,
        }
    }

    /// Every kind, any channel.
    pub fn all() -> Self {
        KindFilter::except(Vec::new())
    }

    /// Every kind but those in `kinds` (empty: every kind), any channel.
    pub fn except(kinds: Vec<String>) -> Self {
        KindFilter {
            kinds: Kinds::Except(kinds),
            channels: Channels::Any,
        }
    }

    /// This filter's kinds, of the channels `channels` only.
    pub fn on(self, channels: Channels) -> Self {
        KindFilter { channels, ..self }
    }

    /// What a claim of `lane` takes while the kinds in `paused` are held (the emergency
    /// switch, issue 17): the lane's kinds that are not paused, or None when that leaves
    /// nothing. The background lane also takes kinds no lane names
    /// ([`Lane::takes_unknown_kinds`]), so its filter is "every kind but the other lanes'
    /// and the paused ones".
    pub fn for_lane(lane: Lane, paused: &[String]) -> Option<KindFilter> {
        if lane.takes_unknown_kinds() {
            let mut skip: Vec<String> = JobKind::ALL
                .into_iter()
                .filter(|k| k.lane() != lane)
                .map(|k| k.as_str().to_owned())
                .collect();
            skip.extend(
                paused
                    .iter()
                    .filter(|p| !skip.contains(p))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            return Some(KindFilter::except(skip));
        }
        let only: Vec<String> = lane
            .kinds()
            .into_iter()
            .map(|k| k.as_str().to_owned())
            .filter(|k| !paused.contains(k))
            .collect();
        (!only.is_empty()).then_some(KindFilter::only(only))
    }

    /// Whether a claim of this filter can take nothing (an empty list of kinds to take).
    pub fn takes_nothing(&self) -> bool {
        matches!(&self.kinds, Kinds::Only(k) if k.is_empty())
    }

    /// The kinds named (taken, or left out).
    pub fn kinds(&self) -> &[String] {
        match &self.kinds {
            Kinds::Only(k) | Kinds::Except(k) => k,
        }
    }

    /// The values bound after the claim's five parameters, in [`fair_claim_sql`]'s order:
    /// the kinds, then the channels.
    pub fn params(&self) -> Vec<&str> {
        let mut p: Vec<&str> = self.kinds().iter().map(String::as_str).collect();
        match &self.channels {
            Channels::Any => {}
            Channels::Only(c) => p.push(c),
            Channels::Except(cs) => p.extend(cs.iter().map(String::as_str)),
        }
        p
    }

    /// The claim's condition on `kind`, its parameters numbered from `$first`: ` AND kind IN
    /// ($6, ...)` or ` AND kind NOT IN (...)` (nothing for "every kind").
    fn kind_clause(&self, first: usize) -> String {
        let kinds = self.kinds();
        if kinds.is_empty() {
            return String::new();
        }
        let op = match self.kinds {
            Kinds::Only(_) => "IN",
            Kinds::Except(_) => "NOT IN",
        };
        format!(" AND kind {op} ({})", marks(first, kinds.len()))
    }

    /// The claim's condition on the job's channel (`{col}.connector`, the job's payment's
    /// connector, NULL for jobs of no payment), its parameters numbered from `$first`.
    fn channel_clause(&self, first: usize, col: &str) -> String {
        match &self.channels {
            Channels::Any => String::new(),
            Channels::Except(cs) if cs.is_empty() => String::new(),
            Channels::Only(_) => format!(" AND {col}.connector = {}", marks(first, 1)),
            Channels::Except(cs) => format!(
                " AND ({col}.connector IS NULL OR {col}.connector NOT IN ({}))",
                marks(first, cs.len())
            ),
        }
    }
}

/// `$first, $first+1, ...`: `n` numbered parameters.
fn marks(first: usize, n: usize) -> String {
    let m: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
    m.join(", ")
}

/// The SQL dialect of [`fair_claim_sql`]: the two backends differ in how each (kind,
/// merchant)'s oldest claimable jobs are read and in how the planner is kept on the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimDialect {
    /// `CROSS JOIN LATERAL (SELECT ... LIMIT $5)`; the planner chooses the index from its
    /// statistics.
    Postgres,
    /// No LATERAL: a correlated `id IN (SELECT ... LIMIT $5)`, which SQLite runs once per
    /// head (in PostgreSQL it would run once per row of `jobs`). `INDEXED BY
    /// jobs_claim_heads` on every read of `jobs`: without statistics SQLite took the
    /// `(status, updated_at)` index for the kinds' scan and read every live job.
    Sqlite,
}

/// Live jobs: due, or leased (a lapsed lease is claimable again). Written exactly as the
/// partial index `jobs_claim_heads` (migration 0139) states it, so SQLite's planner takes it.
const LIVE: &str = concat!(
    "status IN (",
    converge_wire::job_sql!(Due),
    ", ",
    converge_wire::job_sql!(Leased),
    ")"
);

/// The ids of at most `$5` claimable jobs (due ones whose time came at `$4`, and leased ones
/// whose lease lapsed: a claim sets `run_at` to the lease's expiry) of `filter`'s kinds and
/// channels, taken round-robin across merchants (README "Lanes and fairness"): every
/// claimable job gets its turn within its merchant, 1 for the merchant's oldest (`run_at`,
/// then id), 2 for the next, ...; jobs are taken by turn, then age. So a claim of `n` takes
/// the oldest job of up to `n` merchants before any merchant's second, and a merchant with a
/// backlog of 20,000 delays another's due job by at most one claim's worth of the other
/// merchants' first turns. Jobs of no merchant (reconciliation) are one merchant of their
/// own. Columns: `id, turn, run_at`.
///
/// The cost is bounded by the live kinds and the merchants with live jobs, not by the
/// backlog: a loose index scan of `jobs_claim_heads` (migration 0139) finds the live kinds,
/// then per kind of the filter the merchants with live jobs of it, then per (kind, merchant)
/// at most `$5` oldest claimable jobs ([`ClaimDialect`]), and only those few are ranked. The turns
/// up to `$5` are the same as a ranking of every claimable job would give: a merchant's `$5`
/// oldest are among the union of its `$5` oldest per kind.
pub fn fair_claim_sql(filter: &KindFilter, dialect: ClaimDialect) -> String {
    let kinds = filter.kind_clause(6);
    let channels = filter.channel_clause(6 + filter.kinds().len(), "c");
    let hint = match dialect {
        ClaimDialect::Postgres => "",
        ClaimDialect::Sqlite => " INDEXED BY jobs_claim_heads",
    };
    let jobs = format!("jobs l{hint}");
    let walk = |merchant: &str, cols: &str| {
        format!(
            "SELECT {cols} FROM jobs c{hint} WHERE c.kind = h.kind \
             AND c.merchant_id {merchant} AND c.{LIVE} AND c.run_at <= $4{channels} \
             ORDER BY c.run_at, c.id LIMIT $5"
        )
    };
    let heads = |from: &str, merchant: &str, only: &str| match dialect {
        ClaimDialect::Postgres => format!(
            "SELECT x.id, x.merchant_id, x.run_at FROM {from} h CROSS JOIN LATERAL ({}) x{only}",
            walk(merchant, "c.id, c.merchant_id, c.run_at")
        ),
        ClaimDialect::Sqlite => format!(
            "SELECT j.id, j.merchant_id, j.run_at FROM {from} h, jobs j \
             WHERE j.id IN ({}){}",
            walk(merchant, "c.id"),
            only.replace(" WHERE", " AND")
        ),
    };
    format!(
        "WITH RECURSIVE \
         ks (kind) AS (SELECT MIN(kind) FROM {jobs} WHERE {LIVE} UNION ALL \
           SELECT (SELECT MIN(kind) FROM {jobs} WHERE {LIVE} AND kind > ks.kind) \
           FROM ks WHERE ks.kind IS NOT NULL), \
         lk (kind) AS (SELECT kind FROM ks WHERE kind IS NOT NULL{kinds}), \
         ms (kind, m) AS (SELECT kind, (SELECT MIN(merchant_id) FROM {jobs} \
           WHERE {LIVE} AND kind = lk.kind) FROM lk UNION ALL \
           SELECT ms.kind, (SELECT MIN(merchant_id) FROM {jobs} WHERE {LIVE} \
           AND kind = ms.kind AND merchant_id > ms.m) FROM ms WHERE ms.m IS NOT NULL), \
         cand (id, merchant_id, run_at) AS ({} UNION ALL {}) \
         SELECT id, turn, run_at FROM (SELECT id, run_at, \
         ROW_NUMBER() OVER (PARTITION BY merchant_id ORDER BY run_at, id) AS turn \
         FROM cand) ranked WHERE turn <= $5",
        heads("ms", "= h.m", " WHERE h.m IS NOT NULL"),
        heads("lk", "IS NULL", ""),
    )
}

/// Per lane: its due jobs (their time came, or their lease lapsed), the jobs running (leased,
/// the lease not lapsed), and the oldest due job's `run_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaneLoad {
    /// The lane.
    pub lane: Lane,
    /// Due jobs at the time asked.
    pub due: i64,
    /// Jobs leased to a worker, their lease still holding.
    pub running: i64,
    /// The oldest due job's `run_at` (epoch ms UTC), if any is due.
    pub oldest_due_at: Option<i64>,
    /// The merchants with the most due jobs in the lane, most first (ties by merchant id;
    /// jobs of no merchant as `None`), at most the number asked.
    pub top_merchants: Vec<MerchantDue>,
}

/// A merchant's due jobs in one lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MerchantDue {
    /// Merchant id; None for jobs of no payment (reconciliation).
    pub merchant_id: Option<i64>,
    /// Due jobs.
    pub due: i64,
}

/// Live jobs counted by `(kind, merchant, running)` at `$1` (now): `running` is 1 for a
/// leased job whose lease holds, 0 for a due one (its time come, or its lease lapsed); jobs
/// due later are not counted. Columns: `kind, merchant_id, running, count, oldest_run_at`.
/// [`lane_loads`] folds the rows into lanes.
pub fn lane_rows_sql() -> &'static str {
    concat!(
        "SELECT kind, merchant_id, CASE WHEN status = ",
        converge_wire::job_sql!(Leased),
        " AND run_at > $1 THEN 1 ELSE 0 END AS running, \
         COUNT(*) AS count, MIN(run_at) AS oldest_run_at FROM jobs \
         WHERE (status = ",
        converge_wire::job_sql!(Due),
        " AND run_at <= $1) OR status = ",
        converge_wire::job_sql!(Leased),
        " GROUP BY 1, 2, 3"
    )
}

/// One row of [`lane_rows_sql`].
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LaneRow {
    /// Stored kind name.
    pub kind: String,
    /// Merchant, if any.
    pub merchant_id: Option<i64>,
    /// 1: running; 0: due.
    pub running: i32,
    /// Jobs.
    pub count: i64,
    /// Oldest `run_at` of the group, epoch ms UTC.
    pub oldest_run_at: Option<i64>,
}

/// Every lane's load from the rows of [`lane_rows_sql`], with at most `top` merchants each,
/// in [`Lane::ALL`] order; a lane without jobs has zeros. A kind no lane names counts in the
/// background lane (which runs it).
pub fn lane_loads(rows: &[LaneRow], top: usize) -> Vec<LaneLoad> {
    Lane::ALL
        .into_iter()
        .map(|lane| {
            let mine = rows.iter().filter(|r| {
                JobKind::parse(&r.kind).map_or(Lane::Background, JobKind::lane) == lane
            });
            let mut load = LaneLoad {
                lane,
                due: 0,
                running: 0,
                oldest_due_at: None,
                top_merchants: Vec::new(),
            };
            let mut per_merchant: std::collections::BTreeMap<Option<i64>, i64> = Default::default();
            for r in mine {
                if r.running == 1 {
                    load.running += r.count;
                    continue;
                }
                load.due += r.count;
                load.oldest_due_at = match (load.oldest_due_at, r.oldest_run_at) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                *per_merchant.entry(r.merchant_id).or_default() += r.count;
            }
            let mut merchants: Vec<MerchantDue> = per_merchant
                .into_iter()
                .map(|(merchant_id, due)| MerchantDue { merchant_id, due })
                .collect();
            merchants.sort_by(|a, b| b.due.cmp(&a.due).then(a.merchant_id.cmp(&b.merchant_id)));
            merchants.truncate(top);
            load.top_merchants = merchants;
            load
        })
        .collect()
}

/// A job claimed with a lease. Results are written only while `lease_token` still holds.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LeasedJob {
    /// Id.
    pub id: i64,
    /// Kind name (`submit`, `query`, ...).
    pub kind: String,
    /// Payment, if any.
    pub payment_id: Option<String>,
    /// Refund, if any.
    pub refund_id: Option<String>,
    /// Kind-specific data (e.g. the reconciliation day).
    pub payload: String,
    /// Attempts including this one.
    pub attempts: i64,
    /// Attempts allowed before the error pool.
    pub max_attempts: i64,
    /// This claim's token.
    pub lease_token: String,
    /// The trace of the request or job that wrote it ([`crate::telemetry::TraceId`]); the
    /// worker runs it in that trace.
    pub trace_id: Option<String>,
}

pub use converge_wire::{ErrorItem, ErrorItemStatus};

/// An error-pool report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewErrorItem {
    /// Kind.
    pub kind: String,
    /// Dedupe key.
    pub dedupe_key: String,
    /// Payment, if any.
    pub payment_id: Option<String>,
    /// One line.
    pub summary: String,
    /// JSON evidence.
    pub evidence: String,
    /// Whether a report of an item a person already resolved opens it again. True for
    /// failures that happen anew (a job dying again after a retry, a payment back in
    /// SUSPENSE): hiding them would leave a non-terminal payment outside the error pool
    /// (DESIGN.md invariant 4). False for a restatement of the same fact (re-running one
    /// day's reconciliation), which must not undo a person's resolution. It only reopens an
    /// item resolved at or before `now`: a report that reaches the store after a person
    /// resolved the item, of a fact older than that resolution, is no news to them.
    pub reopen: bool,
    /// When the reported fact happened (first/last seen), epoch ms UTC.
    pub now: i64,
}

impl NewErrorItem {
    /// The SUSPENSE item of payment `p` (charged, its posting waiting on a frozen merchant):
    /// kind `suspense`, one per payment by [`suspense_key`](crate::domain::state::suspense_key),
    /// dated `now`. Opened by the parking step's effect
    /// ([`SuspenseItem::Open`](crate::domain::state::SuspenseItem)) with `reopen`; restated by
    /// the posting's retries without it.
    pub fn suspense(p: &super::Payment, reopen: bool, now: i64) -> Self {
        NewErrorItem {
            kind: "suspense".into(),
            dedupe_key: crate::domain::state::suspense_key(&p.id),
            payment_id: Some(p.id.clone()),
            summary: format!(
                "{} charged but not posted: merchant account frozen",
                crate::domain::money::display(p.amount, &p.currency)
            ),
            evidence: serde_json::json!({"status": p.status.as_str(), "merchant_id": p.merchant_id, "last_error": p.last_error}).to_string(),
            reopen,
            now,
        }
    }
}

pub use converge_wire::KindCount;

/// Filters of a page of error-pool items; all optional, combined with AND. Items come
/// grouped by kind (kinds in name order), newest `last_seen` first within a kind, paged by
/// offset.
#[derive(Debug, Clone, Default)]
pub struct ErrorFilter {
    /// `open` or `resolved`; both when None.
    pub status: Option<ErrorItemStatus>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this item.
    pub id: Option<i64>,
    /// Rows to skip (page × page size).
    pub offset: i64,
    /// Page size (clamped to 1..=500).
    pub limit: i64,
}

pub use converge_wire::StuckPayment;

/// Jobs per (kind, status) with the oldest `run_at`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, Serialize)]
pub struct QueueStat {
    /// Kind.
    pub kind: String,
    /// `due`, `leased`, `done` or `dead`.
    pub status: String,
    /// Number of jobs.
    pub count: i64,
    /// Oldest `run_at`, epoch ms UTC.
    pub oldest_run_at: Option<i64>,
    /// Jobs that already failed at least once (attempts > 0) and wait for a retry.
    pub retrying: i64,
}

/// A charged payment, for reconciliation against the channel's statement.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ChargedPayment {
    /// Payment id.
    pub id: String,
    /// Channel key.
    pub channel_key: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Status name.
    pub status: String,
}

/// Queue, error pool, stuck detection and reconciliation storage.
#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Leases up to `batch` jobs that are due (or whose lease lapsed) at `now` to `owner` for
    /// `lease_ms`, of the kinds (and channels) `filter` takes ([`KindFilter`]: a lane's claim
    /// is `KindFilter::for_lane`; every kind is `KindFilter::all()`; the emergency switch's
    /// paused kinds, issue 17, are left out with `KindFilter::except`), taken round-robin
    /// across merchants ([`fair_claim_sql`]); each claim counts an attempt. Never returns more
    /// than `batch` rows, no job is leased to two claimers at once, and a job the filter
    /// leaves out stays as it is: due, unleased, its attempts not counted.
    async fn claim_jobs_of(
        &self,
        owner: &str,
        batch: i64,
        lease_ms: i64,
        now: i64,
        filter: &KindFilter,
    ) -> Result<Vec<LeasedJob>, StoreError>;
    /// Each lane's load at `now` ([`LaneLoad`]: due, running, oldest due) with the `top`
    /// merchants by due jobs in it, in [`Lane::ALL`] order: the `converge_lane_*` gauges and
    /// the console's queue panel.
    async fn lane_loads(&self, now: i64, top: usize) -> Result<Vec<LaneLoad>, StoreError>;
    /// Marks a leased job done; false when the lease was lost.
    async fn complete_job(&self, id: i64, token: &str, now: i64) -> Result<bool, StoreError>;
    /// Marks each leased job of `leases` (job id, lease token) done in one statement per
    /// [`COMPLETE_JOBS_CHUNK`] jobs, each only while its own token still holds: a job whose
    /// lease was lost (retaken, or already written) is left as it is and does not stop the
    /// others. Returns the ids that were completed, in no particular order; an id missing
    /// from the answer lost its lease. The worker's batched form of
    /// [`complete_job`](Self::complete_job) (one commit per batch instead of one per job).
    async fn complete_jobs(&self, leases: &[(i64, &str)], now: i64)
    -> Result<Vec<i64>, StoreError>;
    /// Puts a leased job back, due at `run_at`; `refund_attempt` gives back the attempt the
    /// claim counted (a wait, not a failure). False when the lease was lost.
    async fn retry_job(
        &self,
        id: i64,
        token: &str,
        run_at: i64,
        error: &str,
        refund_attempt: bool,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Marks a leased job dead and reports it to the error pool, in one transaction; false
    /// when the lease was lost.
    async fn bury_job(
        &self,
        id: i64,
        token: &str,
        error: &str,
        item: &NewErrorItem,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Inserts a job on its own (reconciliation, ops retries); returns its id.
    async fn enqueue_job(&self, job: &NewJob, payload: &str, now: i64) -> Result<i64, StoreError>;
    /// The job with this id.
    async fn job(&self, id: i64) -> Result<Option<super::Job>, StoreError>;
    /// Makes a payment's due, retrying or dead jobs run now (ops retry); returns how many.
    async fn wake_jobs(&self, payment_id: &str, now: i64) -> Result<u64, StoreError>;
    /// Makes a payment's due jobs of `kinds` whose `run_at` is later than `now` run now,
    /// without touching other kinds (a hold's expiry job stays at its expiry), leased, done
    /// or dead ones, or any attempts: a channel callback's hint (issue 34) that what the job
    /// waits for has happened. Returns how many.
    async fn hasten_jobs(
        &self,
        payment_id: &str,
        kinds: &[crate::domain::jobs::JobKind],
        now: i64,
    ) -> Result<u64, StoreError>;
    /// How many of the payment's jobs [`wake_jobs`](Self::wake_jobs) would wake now (due or
    /// dead): what decides whether a retry is offered (issue 41: a retry that woke nothing
    /// said "its jobs run now").
    async fn wakeable_jobs(&self, payment_id: &str) -> Result<u64, StoreError>;
    /// Queues `job` (a reconcile job whose payload is `day`, `YYYY-MM-DD`) unless `day` was
    /// scheduled before, atomically across processes. The new job's id, or `None` when
    /// another process (or an earlier run) already scheduled the day.
    async fn schedule_reconcile(
        &self,
        day: &str,
        job: &NewJob,
        now: i64,
    ) -> Result<Option<i64>, StoreError>;
    /// Live jobs (due, leased, dead) per kind and status, and jobs done per kind since the
    /// start of minute `done_since_minute` (epoch minutes UTC; the current minute included)
    /// ([`queue_stats_sql`]; done rows carry the count only).
    async fn queue_stats(&self, done_since_minute: i64) -> Result<Vec<QueueStat>, StoreError>;

    /// Reports an item; a report with a known dedupe key updates `last_seen` and counts an
    /// occurrence instead of adding a row. The summary and evidence shown are the latest
    /// fact's: a report dated before the item's `last_seen` (one that reached the store late)
    /// is counted but does not replace them. Returns the item id.
    async fn report_error(&self, item: &NewErrorItem) -> Result<i64, StoreError>;
    /// Resolves an open item with a note; false when it is not open.
    async fn resolve_error(
        &self,
        id: i64,
        note: &str,
        by: &str,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Resolves the open item with this dedupe key, if any.
    async fn resolve_error_by_key(
        &self,
        dedupe_key: &str,
        note: &str,
        by: &str,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Items, newest first, filtered by status and kind, at most `limit`.
    async fn error_items(
        &self,
        status: Option<ErrorItemStatus>,
        kind: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ErrorItem>, StoreError>;
    /// The kinds of items with `status` (any status when None), with how many each, by
    /// kind name.
    async fn error_kinds(
        &self,
        status: Option<ErrorItemStatus>,
    ) -> Result<Vec<KindCount>, StoreError>;
    /// One page of items matching `filter`, grouped by kind ([`ErrorFilter`]).
    async fn error_items_page(&self, filter: &ErrorFilter) -> Result<Vec<ErrorItem>, StoreError>;
    /// Resolves item `id` with a note, only while it is open and was reported exactly
    /// `occurrences` times (what the person saw when they chose it), appending `audit` in the
    /// same transaction. False (nothing written) when the item is gone, resolved, or was
    /// reported again since.
    async fn resolve_error_audited(
        &self,
        id: i64,
        occurrences: i64,
        note: &str,
        by: &str,
        now: i64,
        audit: &super::AuditEntry,
    ) -> Result<bool, StoreError>;
    /// The item with this id.
    async fn error_item(&self, id: i64) -> Result<Option<ErrorItem>, StoreError>;
    /// Items of a payment.
    async fn payment_error_items(&self, payment_id: &str) -> Result<Vec<ErrorItem>, StoreError>;

    /// Stuck payments counted by (status, age bucket) at `now`, given per-state `updated_at`
    /// cut-offs.
    async fn stuck_counts(
        &self,
        cutoffs: &[(PaymentStatus, i64); crate::domain::stuck::STUCK_STATES],
        now: i64,
    ) -> Result<Vec<(String, String, i64)>, StoreError>;
    /// The manual-capture holds that lapse before `before` (epoch ms UTC; already lapsed
    /// ones not yet released included): AUTHORIZED payments with an expiry, per currency as
    /// (ISO 4217 code, count, what they still hold in integer minor units, the soonest
    /// expiry), ordered by code. The dashboard's "Holds expiring within 24 h".
    async fn holds_expiring(&self, before: i64)
    -> Result<Vec<(String, i64, i64, i64)>, StoreError>;
    /// The oldest stuck payments, at most `limit`.
    async fn stuck_payments(
        &self,
        cutoffs: &[(PaymentStatus, i64); crate::domain::stuck::STUCK_STATES],
        limit: i64,
    ) -> Result<Vec<StuckPayment>, StoreError>;

    /// Charged automatic-capture payments created in `[from, to)` (epoch ms). A manual
    /// payment's money is its captures ([`captures_settled`](Queue::captures_settled)).
    async fn charged_payments_created(
        &self,
        from: i64,
        to: i64,
    ) -> Result<Vec<ChargedPayment>, StoreError>;
    /// Manual-capture payments with captures settled (status `captured`) in `[from, to)`
    /// (epoch ms), each once, `amount` being the sum of those captures (minor units): what the
    /// channel's statement of that day lists under the payment's key.
    async fn captures_settled(&self, from: i64, to: i64)
    -> Result<Vec<ChargedPayment>, StoreError>;
    /// Records a reconciliation run and its differences in one transaction.
    async fn record_reconciliation(
        &self,
        day: &str,
        source: &str,
        rows: i64,
        items: &[NewErrorItem],
        now: i64,
    ) -> Result<(), StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stuck_predicate_binds_one_cutoff_per_unsettled_state_in_threshold_order() {
        assert_eq!(
            stuck_where(2),
            "(status = 'PENDING' AND updated_at <= $2) \
             OR (status = 'AUTHORIZING' AND updated_at <= $3) \
             OR (status = 'PROCESSING' AND updated_at <= $4) \
             OR (status = 'REQUIRES_ACTION' AND updated_at <= $5) \
             OR (status = 'UNKNOWN' AND updated_at <= $6) \
             OR (status = 'CAPTURING' AND updated_at <= $7) \
             OR (status = 'CHANNEL_SUCCESS' AND updated_at <= $8) \
             OR (status = 'SUSPENSE' AND updated_at <= $9) \
             OR (status = 'VOIDING' AND updated_at <= $10)"
        );
    }

    #[test]
    fn the_age_case_names_every_bucket_and_leaves_the_last_open() {
        assert_eq!(
            age_bucket_case(),
            "CASE WHEN $1 - updated_at < 300000 THEN '<5m' \
             WHEN $1 - updated_at < 3600000 THEN '5m-1h' \
             WHEN $1 - updated_at < 86400000 THEN '1h-24h' ELSE '>24h' END"
        );
    }

    #[test]
    fn the_charged_status_list_is_the_domain_predicate() {
        assert_eq!(
            status_list(PaymentStatus::is_charged),
            "'CHANNEL_SUCCESS', 'SUSPENSE', 'SUCCESS', 'REVERSED', 'REFUNDED'"
        );
    }
}
