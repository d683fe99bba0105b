//! `rawinsert`: the raw SQLite baselines (issue "Proof", benchmark 1; issue 15) through the
//! same driver (sqlx) and the same settings converge's SQLite store uses (WAL,
//! `synchronous=NORMAL`, one writer connection, `BEGIN IMMEDIATE`), at a given concurrency:
//! single-row insert transactions per second, or with `--two-phase` the two transactions of a
//! create that no create can avoid, on converge's own schema (the statements of
//! bench/two_phase.sql, PostgreSQL's baseline through pgbench; see bench/bench.sh).
//!
//! ```text
//! cargo run --release -p converge-bench --bin rawinsert -- --concurrency 16 --seconds 10
//! ```

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Parser;
use converge_bench::stats::{ms, percentile};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

/// Raw SQLite single-row insert transactions per second.
#[derive(Debug, Parser)]
#[command(name = "rawinsert", version)]
struct Args {
    /// Tasks inserting at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// How long to insert, seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Prefix of the printed keys.
    #[arg(long, default_value = "raw.sqlite")]
    label: String,
    /// Each unit of work is a create's two transactions (bench/two_phase.sql) on a database
    /// migrated by converge, instead of a single-row insert.
    #[arg(long)]
    two_phase: bool,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rawinsert: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    if args.concurrency == 0 || args.seconds == 0 {
        bail!("--concurrency and --seconds must be at least 1");
    }
    let dir = std::env::temp_dir().join(format!("converge-rawinsert-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("raw.db");
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10));
    if args.two_phase {
        // converge's own schema and merchant 1.
        let store = converge_server::store::SqliteStore::open(&path.to_string_lossy()).await?;
        use converge_server::store::{Merchants, Store};
        store.create_merchant("bench", "bench-key-hash", 0).await?;
        store.close().await;
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await?;
    if !args.two_phase {
        sqlx::query("CREATE TABLE bench_raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL, created_at INTEGER NOT NULL)")
            .execute(&pool)
            .await?;
    }
    let two_phase = args.two_phase;
    let version: String = sqlx::query_scalar("SELECT sqlite_version()")
        .fetch_one(&pool)
        .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    let started = Instant::now();
    for t in 0..args.concurrency {
        let (pool, stop, count) = (pool.clone(), stop.clone(), count.clone());
        set.spawn(async move {
            let mut lat = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                if two_phase {
                    create_two_phase(&pool, &format!("{t}-{i}")).await?;
                } else {
                    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                    sqlx::query("INSERT INTO bench_raw (v, created_at) VALUES ($1, $2)")
                        .bind(format!("task-{t}-row-{i}"))
                        .bind(i as i64)
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                }
                lat.push(t0.elapsed());
                count.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            anyhow::Ok(lat)
        });
    }
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    while let Some(r) = set.join_next().await {
        all.extend(r??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let n = count.load(Ordering::Relaxed);
    pool.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    let l = &args.label;
    println!("{l}.version={version}");
    println!("{l}.concurrency={}", args.concurrency);
    println!("{l}.tps={:.0}", n as f64 / elapsed);
    println!("{l}.p50_ms={}", ms(percentile(&all, 0.5)));
    println!("{l}.p99_ms={}", ms(percentile(&all, 0.99)));
    Ok(())
}

/// One create's two transactions, the statements of bench/two_phase.sql (`n` makes the ids).
async fn create_two_phase(pool: &sqlx::SqlitePool, n: &str) -> Result<()> {
    let (key, id) = (format!("k-{n}"), format!("pay-{n}"));
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(
        "INSERT INTO idempotency_keys (merchant_id, scope, idem_key, route, fingerprint, state, lease_token, \
         lease_expires_at, created_at, expires_at, resource_id) \
         VALUES (1, 'POST /v1/payments', $1, 'POST /v1/payments', 'fingerprint', 'running', 'lease', 60000, 0, 86400000, $2)",
    )
    .bind(&key)
    .bind(&id)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, params_hash, \
         status, version, channel_key, created_at, updated_at) \
         VALUES ($1, 1, $2, 1999, 'CNY', '', 'params', 'PROCESSING', 2, $3, 0, 0)",
    )
    .bind(&id)
    .bind(format!("o-{n}"))
    .bind(format!("ck-{n}"))
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO jobs (kind, payment_id, refund_id, status, attempts, max_attempts, run_at, created_at, updated_at) \
         VALUES ('submit', $1, NULL, 'due', 0, 5, 60000, 0, 0)",
    )
    .bind(&id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(
        "UPDATE payments SET status = 'SUCCESS', version = version + 1, updated_at = 1 \
         WHERE id = $1 AND status = 'PROCESSING' AND version = 2",
    )
    .bind(&id)
    .execute(&mut *tx)
    .await?;
    let batch: i64 = sqlx::query_scalar(
        "INSERT INTO ledger_batches (payment_id, refund_id, kind, currency, created_at) \
         VALUES ($1, NULL, 'charge', 'CNY', 1) RETURNING id",
    )
    .bind(&id)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO ledger_entries (batch_id, account, direction, amount, currency) \
         VALUES ($1, 'merchant:1:receivable', 'debit', 1999, 'CNY'), ($1, 'merchant:1:payable', 'credit', 1999, 'CNY')",
    )
    .bind(batch)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE idempotency_keys SET state = 'done', response_status = 201, response_headers = '[]', \
         response_body = CAST('{\"status\":\"SUCCESS\"}' AS BLOB), lease_token = NULL, lease_expires_at = NULL \
         WHERE merchant_id = 1 AND idem_key = $1 AND state = 'running' AND lease_token = 'lease'",
    )
    .bind(&key)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
