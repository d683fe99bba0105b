//! `export`: the auditors' export at scale (issue "Ops console II": the export streams with
//! memory flat as rows grow; issue "Proof", benchmark 6: rows/s and peak memory at 1 M rows).
//!
//! Seeds `--records` audit records as one valid hash chain (computed with the same
//! `domain::audit::chain` the server uses, written in multi-row batches), then runs the real
//! `converge audit export --format csv|ndjson` as a child process, reads its standard output,
//! and reports rows/s, bytes and the child's peak resident memory (`ru_maxrss` from
//! `wait4`). The export path is the one `GET /ops/v1/audit/export` streams from
//! (`service::audit_export::stream`). Finally `converge audit verify` must pass on the seeded chain.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use converge_bench::db::{self, Backend};
use converge_server::domain::audit::{AuditEntry, AuditRecord, GENESIS, chain};
use converge_server::store::{self, DbPool};

#[derive(Debug, Parser)]
#[command(about = "Measures `converge audit export` rows/s and peak memory on a large audit log")]
struct Args {
    /// The converge binary.
    #[arg(long)]
    converge: PathBuf,
    /// Backend.
    #[arg(long, value_enum)]
    db: Backend,
    /// PostgreSQL server for `--db postgres` (an account that may create databases).
    #[arg(long)]
    pg_url: Option<String>,
    /// Audit records to seed.
    #[arg(long, default_value_t = 1_000_000)]
    records: i64,
    /// Prefix of the printed `key=value` lines.
    #[arg(long, default_value = "export")]
    label: String,
}

const BATCH: usize = 500;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let (url, admin) = db::scratch(
        args.db,
        args.pg_url.as_deref(),
        dir.path(),
        "converge_bench_export",
    )
    .await?;
    let result = run(&args, &url).await;
    if let Some(admin) = admin {
        db::drop_pg_database(&admin, &url).await?;
    }
    result
}

async fn run(args: &Args, url: &str) -> Result<()> {
    let l = &args.label;
    let t0 = Instant::now();
    seed(url, args.records).await?;
    println!("{l}.records={}", args.records);
    println!("{l}.seed_s={:.1}", t0.elapsed().as_secs_f64());
    for (i, format) in ["csv", "ndjson"].into_iter().enumerate() {
        // The figure is only as good as the machine was idle: say how busy it was.
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "{l}.{format}.loadavg={}",
            load.split_whitespace().next().unwrap_or("-")
        );
        let (secs, bytes, lines, maxrss_kib) = export(&args.converge, url, format)?;
        // Each export appends its own record first, so it holds one more than the last.
        let rows = args.records + 1 + i as i64;
        let header = i64::from(format == "csv");
        if lines != rows + header {
            bail!(
                "{format} export has {lines} lines, expected {}",
                rows + header
            );
        }
        println!("{l}.{format}.rows_per_s={:.0}", rows as f64 / secs);
        println!("{l}.{format}.seconds={secs:.2}");
        println!("{l}.{format}.mib={:.1}", bytes as f64 / 1_048_576.0);
        println!(
            "{l}.{format}.peak_rss_mib={:.1}",
            maxrss_kib as f64 / 1024.0
        );
    }
    let t = Instant::now();
    let out = Command::new(&args.converge)
        .args(["audit", "verify", "--database-url", url])
        .output()
        .context("running converge audit verify")?;
    if !out.status.success() {
        bail!(
            "audit verify failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    println!(
        "{l}.verify.rows_per_s={:.0}",
        (args.records + 3) as f64 / t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs one export; returns (seconds, bytes, lines, the child's peak RSS in KiB).
// The workspace denies unsafe code; wait4(2) has no safe wrapper in std.
#[allow(unsafe_code)]
fn export(bin: &PathBuf, url: &str, format: &str) -> Result<(f64, u64, i64, i64)> {
    let t = Instant::now();
    let mut child = Command::new(bin)
        .args(["audit", "export", "--format", format, "--database-url", url])
        .env("USER", "bench")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting converge audit export")?;
    let mut out = child.stdout.take().context("no stdout")?;
    let (mut bytes, mut lines) = (0u64, 0i64);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = out.read(&mut buf)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        lines += buf[..n].iter().filter(|b| **b == b'\n').count() as i64;
    }
    // wait4 rather than Child::wait: it also gives the child's resource usage.
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own child, not yet reaped; both out-pointers are valid.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    if pid < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let secs = t.elapsed().as_secs_f64();
    let exit = std::process::ExitStatus::from_raw(status);
    if !exit.success() {
        bail!("converge audit export --format {format} exited with {exit}");
    }
    Ok((secs, bytes, lines, usage.ru_maxrss))
}

fn entry(i: i64, at: i64) -> AuditEntry {
    const ACTIONS: [&str; 6] = [
        "login",
        "action_requested",
        "action_approved",
        "action_executed",
        "error_resolved",
        "logout",
    ];
    AuditEntry {
        at,
        actor: format!("ops{}", i % 40),
        roles: "operator,approver".into(),
        action: ACTIONS[(i % 6) as usize].into(),
        target: format!("payment:pay_b{}", i * 7919 % 1_000_003),
        reason: format!(
            "customer ticket #{} asked for a reversal of a double order",
            100_000 + i
        ),
        before: format!(r#"{{"status":"UNKNOWN","version":{}}}"#, i % 9 + 1),
        after: format!(r#"{{"status":"FAILED","version":{}}}"#, i % 9 + 2),
        meta: format!(r#"{{"addr":"10.1.{}.{}"}}"#, i % 200, i % 250),
    }
}

/// Writes `n` chained records in multi-row batches, one transaction per batch.
async fn seed(url: &str, n: i64) -> Result<()> {
    let store = store::connect(url).await?;
    let pool = store.db_pool();
    let start = 1_790_000_000_000_i64;
    let (mut seq, mut prev) = (0_i64, GENESIS.to_string());
    let mut batch: Vec<AuditRecord> = Vec::with_capacity(BATCH);
    while seq < n {
        batch.clear();
        while batch.len() < BATCH && seq < n {
            let r = chain(seq, &prev, entry(seq + 1, start + seq * 50));
            seq = r.seq;
            prev = r.hash.clone();
            batch.push(r);
        }
        let mut sql = String::from(
            "INSERT INTO audit_log (seq, at, actor, roles, action, target, reason, before_state, \
             after_state, request_meta, prev_hash, hash) VALUES ",
        );
        for i in 0..batch.len() {
            let b = i * 12;
            if i > 0 {
                sql.push(',');
            }
            sql.push('(');
            sql.push_str(
                &(1..=12)
                    .map(|k| format!("${}", b + k))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            sql.push(')');
        }
        macro_rules! bind_all {
            ($pool:expr) => {{
                let mut q = sqlx::query(&sql);
                for r in &batch {
                    q = q
                        .bind(r.seq)
                        .bind(r.at)
                        .bind(&r.actor)
                        .bind(&r.roles)
                        .bind(&r.action)
                        .bind(&r.target)
                        .bind(&r.reason)
                        .bind(&r.before_state)
                        .bind(&r.after_state)
                        .bind(&r.request_meta)
                        .bind(&r.prev_hash)
                        .bind(&r.hash);
                }
                q.execute($pool).await.context("seeding audit_log")?;
            }};
        }
        match &pool {
            DbPool::Sqlite(p) => bind_all!(p),
            DbPool::Postgres(p) => bind_all!(p),
        }
        if seq % 200_000 == 0 {
            eprintln!("export: seeded {seq} / {n}");
        }
    }
    store.close().await;
    Ok(())
}
