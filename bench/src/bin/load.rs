//! `load`: merchant API throughput on a real `converge serve` (issue "Payment core",
//! Performance; issue "Proof", benchmarks 2 and 3).
//!
//! Starts `converge serve` on a fresh database (SQLite file or a new PostgreSQL database)
//! with its in-process sandbox channel, adds a merchant, then:
//! 1. create-payment with a new Idempotency-Key and merchant_order_id per request (ordinary
//!    amounts: the sandbox charges at once), at `--concurrency`, for `--requests`;
//! 2. replays of completed keys (each key of phase 1 sent again), for `--replays`.
//!
//! Prints `key=value` lines (req/s, p50/p99 in ms, errors) for the benchmark script. With
//! `--database-url` it runs against an existing database instead (kept afterwards): `bench
//! queries --during-load` uses that to time the console's queries on a large seeded history
//! while creates run against it, and waits for the `load: create phase started` line on
//! standard error.
//!
//! ```text
//! cargo run --release -p converge-bench --bin load -- --converge target/release/converge --db sqlite
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use converge_bench::db::{self, Backend};
use converge_bench::procs::{Converge, Proc, free_port};
use converge_bench::stats::{ms, percentile};

/// Merchant API load: create-payment with new keys, then replays of completed keys.
#[derive(Debug, Parser)]
#[command(name = "load", version)]
struct Args {
    /// The converge binary to run (use a release build for figures).
    #[arg(long, default_value = "target/release/converge")]
    converge: PathBuf,
    /// Directory the converge process runs in (the repository root).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Database backend.
    #[arg(long, value_enum, default_value = "sqlite")]
    db: Backend,
    /// PostgreSQL account that may create databases (default: CONVERGE_TEST_PG_URL).
    #[arg(long)]
    pg_url: Option<String>,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Create-payment requests (each with a new key).
    #[arg(long, default_value_t = 5_000)]
    requests: usize,
    /// Replay requests (completed keys sent again).
    #[arg(long, default_value_t = 5_000)]
    replays: usize,
    /// Unmeasured create requests first (connections, caches).
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Prefix of the printed keys.
    #[arg(long, default_value = "load")]
    label: String,
    /// Use this existing database (migrated and kept; a PostgreSQL URL or a SQLite path
    /// matching `--db`) instead of a fresh one.
    #[arg(long)]
    database_url: Option<String>,
    /// Relay the outbox to this NATS server during the run (`serve --nats-url`) and report
    /// the relay's lag over the created payments' events: time from the event's commit to its
    /// publication being recorded (after the broker's acknowledgement), p50/p99/max.
    #[arg(long)]
    nats_url: Option<String>,
}

struct Phase {
    rps: f64,
    p50: Duration,
    p99: Duration,
    errors: usize,
}

async fn phase(
    client: &reqwest::Client,
    base: &str,
    api_key: &str,
    concurrency: usize,
    count: usize,
    request: impl Fn(usize) -> (String, String) + Send + Sync + 'static,
    expect_replay: bool,
) -> Result<Phase> {
    let request = Arc::new(request);
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    let started = Instant::now();
    for _ in 0..concurrency {
        let (client, base, key, next, request) = (
            client.clone(),
            base.to_string(),
            api_key.to_string(),
            next.clone(),
            request.clone(),
        );
        set.spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return (lat, errors);
                }
                let (idem, body) = request(i);
                let t = Instant::now();
                let r = client
                    .post(format!("{base}/v1/payments"))
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .header("Idempotency-Key", idem)
                    .body(body)
                    .send()
                    .await;
                let ok = match r {
                    Ok(r) => {
                        let good = r.status().is_success()
                            && (!expect_replay
                                || r.headers()
                                    .get("idempotent-replayed")
                                    .is_some_and(|v| v == "true"));
                        r.bytes().await.is_ok() && good
                    }
                    Err(_) => false,
                };
                lat.push(t.elapsed());
                if !ok {
                    errors += 1;
                }
            }
        });
    }
    let mut all = Vec::with_capacity(count);
    let mut errors = 0;
    while let Some(r) = set.join_next().await {
        let (lat, e) = r.context("a load task panicked")?;
        all.extend(lat);
        errors += e;
    }
    let elapsed = started.elapsed();
    all.sort_unstable();
    Ok(Phase {
        rps: count as f64 / elapsed.as_secs_f64(),
        p50: percentile(&all, 0.50),
        p99: percentile(&all, 0.99),
        errors,
    })
}

fn body(tag: &str, i: usize) -> String {
    // Ordinary amounts (last two digits below 50): the sandbox charges at once.
    let amount = 1_000 + (i % 40) as i64 * 100 + (i % 50) as i64;
    format!(
        r#"{{"amount":{amount},"currency":"CNY","merchant_order_id":"{tag}-{i}","description":"load"}}"#
    )
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("load: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    if args.concurrency == 0 || args.requests == 0 {
        bail!("--concurrency and --requests must be at least 1");
    }
    let conv = Converge::new(&args.converge, &args.root)?;
    let work = std::env::temp_dir().join(format!("converge-load-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    if let Some(url) = &args.database_url {
        let result = measure(&args, &conv, &work, url).await;
        let _ = std::fs::remove_dir_all(&work);
        return result;
    }
    let admin = match args.db {
        Backend::Postgres => {
            Some(db::pg_admin_url(args.pg_url.as_deref()).context("--db postgres needs --pg-url")?)
        }
        Backend::Sqlite => None,
    };
    let db_url = match &admin {
        Some(a) => db::create_pg_database(a, "converge_bench").await?,
        None => work.join("converge.db").to_string_lossy().into_owned(),
    };
    let result = measure(&args, &conv, &work, &db_url).await;
    if let Some(a) = &admin {
        db::drop_pg_database(a, &db_url).await?;
    }
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// One measurement against the database at `db_url`: a server of its own, a warm-up, the
/// create phase (with its CPU time and, on PostgreSQL, its statements and transactions), the
/// replay phase and, with a broker, the relay's lag; the figures printed as `label.key=value`.
/// Errors: a request of either phase failed.
async fn measure(args: &Args, conv: &Converge, work: &std::path::Path, db_url: &str) -> Result<()> {
    let (mut server, base, api_key) = start_server(args, conv, work, db_url).await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;

    let c = args.concurrency;
    let pid = server.pid();
    phase(
        &client,
        &base,
        &api_key,
        c,
        args.warmup,
        |i| (format!("warm-{i}"), body("warm", i)),
        false,
    )
    .await?;
    eprintln!("load: create phase started");
    let (cpu0, db0) = (cpu_ms(pid), db_counts(args.db, db_url).await);
    let create = phase(
        &client,
        &base,
        &api_key,
        c,
        args.requests,
        |i| (format!("new-{i}"), body("new", i)),
        false,
    )
    .await?;
    let (cpu1, db1) = (cpu_ms(pid), db_counts(args.db, db_url).await);
    let n = args.requests;
    let replay = phase(
        &client,
        &base,
        &api_key,
        c,
        args.replays,
        move |i| (format!("new-{}", i % n), body("new", i % n)),
        true,
    )
    .await?;
    let cpu2 = cpu_ms(pid);
    let lag = match &args.nats_url {
        Some(_) => Some(relay_lag(db_url).await?),
        None => None,
    };
    server.stop(Duration::from_secs(10)).await;
    print_figures(
        args,
        &Measured {
            create: &create,
            replay: &replay,
            cpu: [cpu0, cpu1, cpu2],
            db: (db0, db1),
            lag,
        },
    );
    if create.errors + replay.errors > 0 {
        bail!(
            "{} create and {} replay requests failed; see the figures above",
            create.errors,
            replay.errors
        );
    }
    Ok(())
}

/// Migrates the database, adds a merchant of this run's own and starts `converge serve` (the
/// sandbox channel in-process, the relay when `--nats-url` is given). Returns the server,
/// its base URL and the merchant's API key.
async fn start_server(
    args: &Args,
    conv: &Converge,
    work: &std::path::Path,
    db_url: &str,
) -> Result<(Proc, String, String)> {
    conv.run(&["migrate", "--database-url", db_url]).await?;
    // A merchant of its own each run, so a database kept for reuse (`--database-url`) takes
    // a second run: merchant names are unique.
    let merchant = format!(
        "load-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
    let api_key = conv
        .run(&["merchant", "add", &merchant, "--database-url", db_url])
        .await?
        .trim()
        .to_string();
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let serve = vec![
        "serve".to_string(),
        "--database-url".into(),
        db_url.into(),
        "--bind".into(),
        format!("127.0.0.1:{port}"),
        "--channel-db".into(),
        work.join("channel.db").to_string_lossy().into_owned(),
    ];
    let mut serve = serve;
    if let Some(url) = &args.nats_url {
        serve.extend(["--nats-url".into(), url.clone()]);
    }
    let server = Proc::start(
        conv,
        "serve",
        serve,
        work.join("serve.log"),
        format!("{base}/health"),
    )
    .await?;
    Ok((server, base, api_key))
}

/// What one measurement found, for [`print_figures`].
struct Measured<'a> {
    /// The create phase.
    create: &'a Phase,
    /// The replay phase.
    replay: &'a Phase,
    /// The server's CPU time, ms, before the create phase, after it and after the replays.
    cpu: [Option<f64>; 3],
    /// PostgreSQL's (statements, transactions) before and after the create phase.
    db: (DbCounts, DbCounts),
    /// The relay's lag (events, p50, p99, max ms), when there was a broker.
    lag: Option<(usize, i64, i64, i64)>,
}

/// Prints the figures as `label.key=value` lines.
fn print_figures(args: &Args, m: &Measured<'_>) {
    let l = &args.label;
    let (c, create, replay) = (args.concurrency, m.create, m.replay);
    let [cpu0, cpu1, cpu2] = m.cpu;
    if let Some((events, p50, p99, max)) = m.lag {
        println!("{l}.relay.events={events}");
        println!("{l}.relay.lag_p50_ms={p50}");
        println!("{l}.relay.lag_p99_ms={p99}");
        println!("{l}.relay.lag_max_ms={max}");
    }
    println!("{l}.backend={:?}", args.db);
    println!("{l}.concurrency={c}");
    println!("{l}.create.requests={}", args.requests);
    println!("{l}.create.rps={:.0}", create.rps);
    println!("{l}.create.p50_ms={}", ms(create.p50));
    println!("{l}.create.p99_ms={}", ms(create.p99));
    println!("{l}.create.errors={}", create.errors);
    println!("{l}.replay.requests={}", args.replays);
    println!("{l}.replay.rps={:.0}", replay.rps);
    println!("{l}.replay.p50_ms={}", ms(replay.p50));
    println!("{l}.replay.p99_ms={}", ms(replay.p99));
    println!("{l}.replay.errors={}", replay.errors);
    let per = |a: Option<f64>, b: Option<f64>, n: usize| match (a, b) {
        (Some(a), Some(b)) if n > 0 => format!("{:.2}", (b - a) / n as f64),
        _ => "-".into(),
    };
    println!(
        "{l}.create.cpu_ms_per_req={}",
        per(cpu0, cpu1, args.requests)
    );
    println!(
        "{l}.replay.cpu_ms_per_req={}",
        per(cpu1, cpu2, args.replays)
    );
    if let (Some((s0, x0)), Some((s1, x1))) = m.db {
        let n = args.requests as f64;
        match (s0, s1) {
            (Some(s0), Some(s1)) => {
                println!("{l}.create.statements_per_req={:.1}", (s1 - s0) as f64 / n)
            }
            _ => println!("{l}.create.statements_per_req=-"),
        }
        println!(
            "{l}.create.transactions_per_req={:.2}",
            (x1 - x0) as f64 / n
        );
    }
}

/// CPU time (user + system) the process `pid` has used, in ms (Linux `/proc/PID/stat`,
/// clock ticks of 10 ms).
// The workspace denies unsafe code; sysconf(3) has no safe wrapper in std.
#[allow(unsafe_code)]
fn cpu_ms(pid: Option<u32>) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks * 1000.0 / hz.max(1.0))
}

/// PostgreSQL's (statements, transactions) counts, statements None without
/// `pg_stat_statements`; None on SQLite.
type DbCounts = Option<(Option<i64>, i64)>;

/// PostgreSQL only: the statements run in the database so far (pg_stat_statements' calls,
/// None when the extension is not loaded) and the transactions committed or rolled back
/// (pg_stat_database). Both count everything the server does meanwhile (its workers too).
async fn db_counts(backend: Backend, db_url: &str) -> DbCounts {
    if backend != Backend::Postgres {
        return None;
    }
    let pool = sqlx::PgPool::connect(db_url).await.ok()?;
    // pg_stat_database is written when a backend goes idle (at most once a second).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let _ = sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&pool)
        .await;
    let statements: Option<i64> = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(calls), 0) AS BIGINT) FROM pg_stat_statements s \
         JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()",
    )
    .fetch_one(&pool)
    .await
    .ok();
    let xacts: i64 = sqlx::query_scalar(
        "SELECT CAST(xact_commit + xact_rollback AS BIGINT) FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&pool)
    .await
    .ok()?;
    pool.close().await;
    Some((statements, xacts))
}

/// The relay's lag per event once every event is published (waits up to 30 s): (events, p50,
/// p99, max) of `published_at - created_at` in ms. A plain read of the run's own database.
async fn relay_lag(db_url: &str) -> Result<(usize, i64, i64, i64)> {
    const PENDING: &str = "SELECT COUNT(*) FROM events e WHERE NOT EXISTS \
        (SELECT 1 FROM event_publications p WHERE p.event_id = e.id)";
    const LAGS: &str = "SELECT p.published_at - e.created_at FROM event_publications p \
        JOIN events e ON e.id = p.event_id ORDER BY 1";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut lags: Vec<i64>;
    loop {
        let (pending, l) = if db_url.starts_with("postgres") {
            let pool = sqlx::PgPool::connect(db_url).await?;
            let n: i64 = sqlx::query_scalar(PENDING).fetch_one(&pool).await?;
            let l: Vec<i64> = sqlx::query_scalar(LAGS).fetch_all(&pool).await?;
            pool.close().await;
            (n, l)
        } else {
            let pool = sqlx::SqlitePool::connect(&format!("sqlite://{db_url}")).await?;
            let n: i64 = sqlx::query_scalar(PENDING).fetch_one(&pool).await?;
            let l: Vec<i64> = sqlx::query_scalar(LAGS).fetch_all(&pool).await?;
            pool.close().await;
            (n, l)
        };
        lags = l;
        if pending == 0 {
            break;
        }
        if std::time::Instant::now() > deadline {
            bail!("{pending} events still unpublished 30 s after the create phase");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if lags.is_empty() {
        bail!("no event was published: is the relay connected (--nats-url)?");
    }
    let at = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize];
    Ok((lags.len(), at(0.5), at(0.99), *lags.last().unwrap_or(&0)))
}
