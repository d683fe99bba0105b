//! `queries`: the console's dashboard and search queries on a large payments table (issue
//! "Ops console I", Performance; issue "Proof", benchmark 5).
//!
//! Seeds `--payments` payments (100 merchants, created evenly over the last 30 days; 97 %
//! SUCCESS, 1 % FAILED, 1 % REFUNDED, 0.1 % left in a non-terminal state long enough to be
//! stuck) with the jobs a real history leaves (a done `submit` and `post_ledger` job per
//! settled payment, a due `query` job per stuck one) and one open error-pool item per 10,000
//! payments, straight into a migrated converge database with set-based SQL. Then times each
//! query through the same [`Store`] calls the console makes, `--iterations` times, and prints
//! `label.query.p50_ms` / `p95_ms` lines; with `--explain FILE` it writes each query's plan
//! (PostgreSQL `EXPLAIN ANALYZE`, SQLite `EXPLAIN QUERY PLAN`) for exactly the SQL the store
//! runs.
//!
//! With `--during-load` (issue 15, "Under load") the timings are taken while the create
//! benchmark runs against the same database: after seeding, `bench load --database-url` starts
//! a release `converge serve` on it and sends creates at `--load-concurrency`; the queries are
//! timed once its create phase has started, and must finish before it ends (an error
//! otherwise: the figures would not be under load). Also prints the creates/s reached while
//! the queries ran (`label.load_window.create_rps`, payments created in that window) and the
//! load tool's own lines (`label.load.create.rps`, ...).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use converge_bench::db::{self, Backend};
use converge_bench::stats::{ms, percentile};
use converge_server::domain::clock::{Clock, SystemClock};
use converge_server::domain::stuck::StuckThresholds;
use converge_server::store::{
    self, DbPool, PaymentFilter, SearchArg, Store, search_sql, stuck_counts_sql, stuck_payments_sql,
};

#[derive(Debug, Parser)]
#[command(about = "Times the console's dashboard and search queries on a large payments table")]
struct Args {
    /// Backend.
    #[arg(long, value_enum)]
    db: Backend,
    /// PostgreSQL server for `--db postgres` (an account that may create databases).
    #[arg(long)]
    pg_url: Option<String>,
    /// Payments to seed.
    #[arg(long, default_value_t = 1_000_000)]
    payments: i64,
    /// Timed runs of each query.
    #[arg(long, default_value_t = 100)]
    iterations: usize,
    /// Prefix of the printed `key=value` lines.
    #[arg(long, default_value = "queries")]
    label: String,
    /// Write each query's plan here.
    #[arg(long)]
    explain: Option<std::path::PathBuf>,
    /// Keep the seeded database (prints its URL) instead of dropping it.
    #[arg(long)]
    keep: bool,
    /// Time the queries on this database, seeded before by a `--keep` run with the same
    /// `--payments`, instead of seeding a new one (it is kept).
    #[arg(long)]
    database_url: Option<String>,
    /// Time the queries while `bench load` sends creates to a `converge serve` on the same
    /// database (needs `--converge`; `--load-bin` defaults to `load` beside this binary).
    #[arg(long)]
    during_load: bool,
    /// The converge binary `load` runs (a release build, for figures).
    #[arg(long, default_value = "target/release/converge")]
    converge: std::path::PathBuf,
    /// The `load` benchmark binary (default: beside this one).
    #[arg(long)]
    load_bin: Option<std::path::PathBuf>,
    /// Creates in flight at once during `--during-load`.
    #[arg(long, default_value_t = 16)]
    load_concurrency: usize,
    /// Creates `load` sends; enough to outlast the timed queries.
    #[arg(long, default_value_t = 40_000)]
    load_requests: usize,
}

const MERCHANTS: i64 = 100;
const CHUNK: i64 = 200_000;
const DAY_MS: i64 = 86_400_000;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(url) = &args.database_url {
        return run(&args, url).await;
    }
    let dir = tempfile::tempdir()?;
    let (url, admin) = db::scratch(
        args.db,
        args.pg_url.as_deref(),
        dir.path(),
        "converge_bench_queries",
    )
    .await?;
    let result = run(&args, &url).await;
    if args.keep {
        eprintln!("queries: kept {url}");
        if args.db == Backend::Sqlite {
            let _ = dir.keep();
        }
    } else if let Some(admin) = admin {
        db::drop_pg_database(&admin, &url).await?;
    }
    result
}

async fn run(args: &Args, url: &str) -> Result<()> {
    let store = store::connect(url).await?;
    let now = SystemClock.now_ms();
    let l = &args.label;
    println!("{l}.payments={}", args.payments);
    if args.database_url.is_none() {
        let t0 = Instant::now();
        seed(&store.db_pool(), args.payments, now).await?;
        let seed_secs = t0.elapsed().as_secs_f64();
        println!("{l}.seed_s={seed_secs:.1}");
        eprintln!(
            "queries: seeded {} payments in {seed_secs:.1} s",
            args.payments
        );
    }

    let thresholds = StuckThresholds::default();
    // The whole dashboard read model, as the console's refresh computes it.
    let core = dashboard_core(store.clone());
    let cutoffs = thresholds.cutoffs(now);
    let filters = search_filters(args, &store, now).await?;
    let mut queries = dashboard_reads(&store, cutoffs, now);
    let s = &store;
    for (name, f) in &filters {
        queries.push((
            name,
            Box::new(move || Box::pin(async move { Ok(s.search_payments(f).await?.len()) })),
        ));
    }

    let c = &core;
    let dashboard: Query = Box::new(move || {
        Box::pin(async move {
            c.dashboard().await?;
            Ok(1)
        })
    });
    queries.push(("dashboard", dashboard));

    if args.during_load {
        // The same timings idle first, then under load: side by side from one seeding.
        time_all(&format!("{l}.idle"), &queries, args.iterations).await?;
        let child = start_load(args, url).await?;
        let window_start = SystemClock.now_ms();
        let window = Instant::now();
        time_all(l, &queries, args.iterations).await?;
        finish_load(
            args,
            child,
            &store.db_pool(),
            window_start,
            window.elapsed(),
        )
        .await?;
    } else {
        time_all(l, &queries, args.iterations).await?;
    }

    if let Some(path) = &args.explain {
        let plans = explain(&store.db_pool(), &cutoffs, now, &filters).await?;
        std::fs::write(path, plans).with_context(|| format!("writing {}", path.display()))?;
    }
    store.close().await;
    Ok(())
}

/// A core over `store` for the dashboard's read model alone: its channel is never called.
fn dashboard_core(store: Arc<dyn Store>) -> converge_server::service::Core {
    converge_server::service::Core {
        store,
        connectors: Arc::new(converge_server::service::connectors::Connectors::single(
            converge_server::service::connectors::DEFAULT_CONNECTOR,
            Arc::new(converge_server::channel::http::HttpChannel::new(
                "http://127.0.0.1:9",
                Duration::from_secs(1),
            )),
        )),
        clock: Arc::new(SystemClock),
        // The default UTC days: a bench core's postings are not read by accounting day.
        accounting: Default::default(),
        timings: converge_server::service::Timings {
            submit_delay_ms: 10_000,
            query_delay_ms: 2_000,
            max_attempts: 5,
            resubmit_budget: 3,
            approval_conflict_window_ms: 0,
            authorization_ttl_ms: converge_server::service::DEFAULT_AUTHORIZATION_TTL_SECS as i64
                * 1000,
            action_window_ms: converge_server::service::customer_action::DEFAULT_ACTION_WINDOW_SECS
                as i64
                * 1000,
        },
        secrets: converge_server::domain::secret_box::SecretBox::random(),
        notifier: Default::default(),
        pauses: Default::default(),
        outcomes: Default::default(),
        // The default thresholds, as `thresholds` above.
        console: converge_server::service::console::ConsoleSettings::one_off(),
    }
}

/// The console's payment searches, each as its filter: the latest page, by status, by
/// merchant, by order id, by an hour's range, and a page deep into the SUCCESS ones.
async fn search_filters(
    args: &Args,
    store: &Arc<dyn Store>,
    now: i64,
) -> Result<Vec<(&'static str, PaymentFilter)>> {
    let mid = now - 15 * DAY_MS;
    let some_order = format!("ord-{}", args.payments / 2);
    Ok(vec![
        (
            "search_latest",
            PaymentFilter {
                limit: 50,
                ..Default::default()
            },
        ),
        (
            "search_status",
            PaymentFilter {
                status: Some("UNKNOWN".into()),
                limit: 50,
                ..Default::default()
            },
        ),
        (
            "search_merchant",
            PaymentFilter {
                merchant_id: Some(first_merchant(store).await? + 7),
                limit: 50,
                ..Default::default()
            },
        ),
        (
            "search_order_id",
            PaymentFilter {
                merchant_order_id: Some(some_order),
                limit: 50,
                ..Default::default()
            },
        ),
        (
            "search_time_range",
            PaymentFilter {
                from: Some(mid),
                to: Some(mid + 3_600_000),
                limit: 50,
                ..Default::default()
            },
        ),
        (
            "search_page_deep",
            PaymentFilter {
                status: Some("SUCCESS".into()),
                after: Some((mid, "pay_b".into())),
                limit: 50,
                ..Default::default()
            },
        ),
        // The newer page above a deep one ("← Newer", issue 41): the rows nearest above the
        // cursor, ascending, turned newest first.
        (
            "search_page_newer",
            PaymentFilter {
                status: Some("SUCCESS".into()),
                before: Some((mid, "pay_b".into())),
                limit: 51,
                ..Default::default()
            },
        ),
    ])
}

/// The dashboard's reads through the same [`Store`] calls the console makes, each as a timed
/// query, in the order they are printed.
fn dashboard_reads(
    store: &Arc<dyn Store>,
    cutoffs: converge_server::domain::stuck::PerState,
    now: i64,
) -> Vec<(&'static str, Query<'_>)> {
    let mut queries: Vec<(&'static str, Query<'_>)> = Vec::new();
    let s = store;
    queries.push((
        "stuck_counts",
        Box::new(move || Box::pin(async move { Ok(s.stuck_counts(&cutoffs, now).await?.len()) })),
    ));
    queries.push((
        "stuck_oldest",
        Box::new(move || Box::pin(async move { Ok(s.stuck_payments(&cutoffs, 10).await?.len()) })),
    ));
    queries.push((
        "queue_stats",
        Box::new(move || {
            Box::pin(async move { Ok(s.queue_stats(now / 60_000 - 59).await?.len()) })
        }),
    ));
    queries.push((
        "jobs_done_5m",
        Box::new(move || {
            Box::pin(async move { Ok(s.jobs_done_since(now / 60_000 - 4).await? as usize) })
        }),
    ));
    queries.push((
        "error_pool_open",
        Box::new(move || {
            Box::pin(async move {
                Ok(s.error_items(
                    Some(converge_server::store::ErrorItemStatus::Open),
                    None,
                    10,
                )
                .await?
                .len())
            })
        }),
    ));
    // The dashboard's other reads, so that its refresh time is accounted for query by query.
    let minute = now.div_euclid(60_000);
    queries.push((
        "outcome_counts_24h",
        Box::new(move || Box::pin(async move { Ok(s.outcome_counts(minute - 1439).await?.len()) })),
    ));
    queries.push((
        "outcome_series_1h",
        Box::new(move || Box::pin(async move { Ok(s.outcome_series(minute - 59).await?.len()) })),
    ));
    queries.push((
        "error_counts",
        Box::new(move || Box::pin(async move { Ok(s.error_counts().await?.len()) })),
    ));
    queries.push((
        "webhook_backlog",
        Box::new(move || {
            Box::pin(async move {
                let b = s.webhook_backlog(now - 3_600_000).await?;
                Ok((b.pending + b.dead) as usize)
            })
        }),
    ));
    queries.push((
        "relay_status",
        Box::new(move || {
            Box::pin(async move {
                let r = s
                    .relay_status(converge_server::worker::relay::LEASE, now)
                    .await?;
                Ok(r.backlog as usize)
            })
        }),
    ));
    queries.push((
        "payment_by_id",
        Box::new(move || {
            Box::pin(async move { Ok(s.payment("pay_b12345").await?.iter().count()) })
        }),
    ));
    queries
}

type Query<'a> = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Result<usize>> + Send + 'a>> + 'a>;

/// Times each query `iterations` times after a warm-up; prints `label.query.rows`, `p50_ms`
/// and `p95_ms` lines.
async fn time_all(label: &str, queries: &[(&str, Query<'_>)], iterations: usize) -> Result<()> {
    for (name, q) in queries {
        let rows = q().await.with_context(|| format!("query {name}"))?; // warm-up
        let mut times = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let t = Instant::now();
            q().await?;
            times.push(t.elapsed());
        }
        times.sort();
        if *name != "dashboard" {
            println!("{label}.{name}.rows={rows}");
        }
        println!("{label}.{name}.p50_ms={}", ms(percentile(&times, 0.5)));
        println!("{label}.{name}.p95_ms={}", ms(percentile(&times, 0.95)));
    }
    Ok(())
}

/// Starts `load` on `url` and returns once its create phase has started (its warm-up done).
async fn start_load(args: &Args, url: &str) -> Result<tokio::process::Child> {
    use tokio::io::AsyncBufReadExt;
    let bin = match &args.load_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?.with_file_name("load"),
    };
    let mut child = tokio::process::Command::new(&bin)
        .arg("--converge")
        .arg(&args.converge)
        .args([
            "--db",
            if url.starts_with("postgres") {
                "postgres"
            } else {
                "sqlite"
            },
        ])
        .args(["--database-url", url])
        .args(["--concurrency", &args.load_concurrency.to_string()])
        .args(["--requests", &args.load_requests.to_string()])
        .args(["--replays", "0", "--label", &format!("{}.load", args.label)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let stderr = child.stderr.take().context("load's stderr")?;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let started = tokio::time::timeout(Duration::from_secs(300), async {
        while let Some(line) = lines.next_line().await? {
            eprintln!("{line}");
            if line.starts_with("load: create phase started") {
                return Ok(true);
            }
        }
        anyhow::Ok(false)
    })
    .await
    .context("load did not start its create phase within 300 s")??;
    if !started {
        anyhow::bail!(
            "load stopped before its create phase: {:?}",
            child.wait().await?
        );
    }
    // Keep draining its standard error so it never blocks on a full pipe.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
        }
    });
    Ok(child)
}

/// Checks that `load` outlasted the timed queries, prints the creates/s reached meanwhile
/// (payments created since `window_start`, epoch ms, over `elapsed`), then waits for `load`
/// and prints its own lines.
async fn finish_load(
    args: &Args,
    mut child: tokio::process::Child,
    pool: &DbPool,
    window_start: i64,
    elapsed: Duration,
) -> Result<()> {
    use tokio::io::AsyncReadExt;
    let window_end = SystemClock.now_ms();
    if let Some(status) = child.try_wait()? {
        anyhow::bail!(
            "load ended ({status}) before the queries did: raise --load-requests so every timing is under load"
        );
    }
    let sql = format!(
        "SELECT COUNT(*) FROM payments WHERE created_at >= {window_start} AND created_at <= {window_end}"
    );
    let created: i64 = match pool {
        DbPool::Sqlite(p) => sqlx::query_scalar(&sql).fetch_one(p).await?,
        DbPool::Postgres(p) => sqlx::query_scalar(&sql).fetch_one(p).await?,
    };
    let l = &args.label;
    println!("{l}.load_window.secs={:.1}", elapsed.as_secs_f64());
    println!("{l}.load_window.created={created}");
    println!(
        "{l}.load_window.create_rps={:.0}",
        created as f64 / elapsed.as_secs_f64()
    );
    let mut out = String::new();
    child
        .stdout
        .take()
        .context("load's stdout")?
        .read_to_string(&mut out)
        .await?;
    let status = child.wait().await?;
    print!("{out}");
    if !status.success() {
        anyhow::bail!("load failed ({status})");
    }
    Ok(())
}

async fn first_merchant(store: &Arc<dyn Store>) -> Result<i64> {
    Ok(store
        .merchants()
        .await?
        .iter()
        .map(|m| m.id)
        .min()
        .unwrap_or(1))
}

/// Set-based seeding, `CHUNK` payments per statement; portable SQL (a recursive CTE rather
/// than PostgreSQL's generate_series) so both backends get the same rows.
async fn seed(pool: &DbPool, n: i64, now: i64) -> Result<()> {
    let t0 = now - 30 * DAY_MS;
    let step = (30 * DAY_MS - 3_600_000) / n.max(1);
    exec(
        pool,
        &format!(
            "WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < {MERCHANTS}) \
             INSERT INTO merchants (name, api_key_hash, frozen, created_at) \
             SELECT 'bench-m' || x, 'bench-hash-' || x, FALSE, {t0} FROM g"
        ),
    )
    .await?;
    let m0 = match pool {
        DbPool::Sqlite(p) => {
            sqlx::query_scalar::<_, i64>("SELECT MIN(id) FROM merchants")
                .fetch_one(p)
                .await?
        }
        DbPool::Postgres(p) => {
            sqlx::query_scalar::<_, i64>("SELECT MIN(id) FROM merchants")
                .fetch_one(p)
                .await?
        }
    };
    // Status by position: every 1000th payment is stuck (cycling through the five
    // non-terminal states), 1 % FAILED, 1 % REFUNDED, the rest SUCCESS.
    let status = "CASE WHEN x % 1000 = 1 THEN (CASE (x / 1000) % 5 WHEN 0 THEN 'PENDING' WHEN 1 THEN 'PROCESSING' \
                  WHEN 2 THEN 'UNKNOWN' WHEN 3 THEN 'CHANNEL_SUCCESS' ELSE 'SUSPENSE' END) \
                  WHEN x % 100 = 2 THEN 'FAILED' WHEN x % 100 = 3 THEN 'REFUNDED' ELSE 'SUCCESS' END";
    let mut lo = 1;
    while lo <= n {
        let hi = (lo + CHUNK - 1).min(n);
        let range = format!(
            "WITH RECURSIVE g(x) AS (SELECT CAST({lo} AS BIGINT) UNION ALL SELECT x + 1 FROM g WHERE x < {hi})"
        );
        exec(
            pool,
            &format!(
                "{range} INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, \
                 params_hash, status, version, channel_key, submit_attempts, refunded_amount, last_error, created_at, updated_at) \
                 SELECT 'pay_b' || x, {m0} + (x % {MERCHANTS}), 'ord-' || x, 100 + (x % 100000), 'CNY', '', 'h', {status}, \
                 3, 'ck_b' || x, 1, CASE WHEN x % 100 = 3 THEN 100 + (x % 100000) ELSE 0 END, \
                 CASE WHEN x % 1000 = 1 THEN 'channel timeout' ELSE NULL END, {t0} + x * {step}, {t0} + x * {step} + 800 FROM g"
            ),
        )
        .await?;
        exec(
            pool,
            &format!(
                "{range}, k(kind) AS (SELECT 'submit' UNION ALL SELECT 'post_ledger') \
                 INSERT INTO jobs (kind, payment_id, refund_id, payload, status, attempts, max_attempts, run_at, created_at, updated_at) \
                 SELECT k.kind, 'pay_b' || x, NULL, '', 'done', 1, 5, {t0} + x * {step}, {t0} + x * {step}, {t0} + x * {step} + 800 \
                 FROM g, k WHERE x % 1000 <> 1"
            ),
        )
        .await?;
        exec(
            pool,
            &format!(
                "{range} INSERT INTO jobs (kind, payment_id, refund_id, payload, status, attempts, max_attempts, run_at, created_at, updated_at) \
                 SELECT 'query', 'pay_b' || x, NULL, '', 'due', 3, 8, {now} + 60000, {t0} + x * {step}, {t0} + x * {step} \
                 FROM g WHERE x % 1000 = 1"
            ),
        )
        .await?;
        exec(
            pool,
            &format!(
                "{range} INSERT INTO error_pool (kind, dedupe_key, payment_id, summary, evidence, status, occurrences, first_seen, last_seen) \
                 SELECT 'job_exhausted', 'bench:' || x, 'pay_b' || x, 'query: channel timeout', '{{}}', 'open', 1, \
                 {t0} + x * {step}, {t0} + x * {step} FROM g WHERE x % 10000 = 1"
            ),
        )
        .await?;
        eprintln!("queries: seeded {hi} / {n}");
        lo = hi + 1;
    }
    match pool {
        DbPool::Sqlite(p) => {
            sqlx::query("ANALYZE").execute(p).await?;
        }
        DbPool::Postgres(p) => {
            sqlx::query("VACUUM ANALYZE").execute(p).await?;
        }
    }
    Ok(())
}

async fn exec(pool: &DbPool, sql: &str) -> Result<()> {
    match pool {
        DbPool::Sqlite(p) => sqlx::query(sql).execute(p).await.map(drop),
        DbPool::Postgres(p) => sqlx::query(sql).execute(p).await.map(drop),
    }
    .with_context(|| format!("seeding: {}", &sql[..sql.len().min(120)]))
}

/// Each query's plan, for exactly the SQL the store runs with the benchmark's arguments.
async fn explain(
    pool: &DbPool,
    cutoffs: &converge_server::domain::stuck::PerState,
    now: i64,
    filters: &[(&str, PaymentFilter)],
) -> Result<String> {
    let cut: Vec<SearchArg> = cutoffs.iter().map(|(_, c)| SearchArg::Int(*c)).collect();
    let mut list: Vec<(String, String, Vec<SearchArg>)> = vec![
        (
            "stuck_counts".into(),
            stuck_counts_sql(),
            [vec![SearchArg::Int(now)], cut.clone()].concat(),
        ),
        (
            "stuck_oldest".into(),
            stuck_payments_sql(),
            [vec![SearchArg::Int(10)], cut.clone()].concat(),
        ),
        (
            "queue_stats".into(),
            store::queue_stats_sql(),
            vec![SearchArg::Int(now / 60_000 - 59)],
        ),
        (
            "jobs_done_5m".into(),
            store::jobs_done_since_sql(),
            vec![SearchArg::Int(now / 60_000 - 4)],
        ),
    ];
    for (name, f) in filters {
        let (sql, args) = search_sql(f);
        list.push((name.to_string(), sql, args));
    }
    let mut out = String::new();
    for (name, sql, args) in list {
        out.push_str(&format!("### {name}\n\n```sql\n{sql}\n```\n\n```\n"));
        let lines: Vec<String> = match pool {
            DbPool::Postgres(p) => {
                let text = format!("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {sql}");
                let mut q = sqlx::query_scalar::<_, String>(&text);
                for a in &args {
                    q = match a {
                        SearchArg::Text(t) => q.bind(t.to_string()),
                        SearchArg::Int(i) => q.bind(*i),
                    };
                }
                q.fetch_all(p).await?
            }
            DbPool::Sqlite(p) => {
                let text = format!("EXPLAIN QUERY PLAN {sql}");
                let mut q = sqlx::query_as::<_, (i64, i64, i64, String)>(&text);
                for a in &args {
                    q = match a {
                        SearchArg::Text(t) => q.bind(t.to_string()),
                        SearchArg::Int(i) => q.bind(*i),
                    };
                }
                q.fetch_all(p).await?.into_iter().map(|r| r.3).collect()
            }
        };
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out.push_str("```\n\n");
    }
    Ok(out)
}
