//! `rawinsert`: the raw SQLite baseline (issue "Proof", benchmark 1): single-row insert
//! transactions per second through the same driver (sqlx) and the same settings converge's
//! SQLite store uses (WAL, `synchronous=NORMAL`, one writer connection, `BEGIN IMMEDIATE`),
//! at a given concurrency. PostgreSQL's baseline is pgbench (see bench/bench.sh).
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
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await?;
    sqlx::query("CREATE TABLE bench_raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL, created_at INTEGER NOT NULL)")
        .execute(&pool)
        .await?;
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
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                sqlx::query("INSERT INTO bench_raw (v, created_at) VALUES ($1, $2)")
                    .bind(format!("task-{t}-row-{i}"))
                    .bind(i as i64)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
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
