//! `drain`: compensation queue throughput (issue "Convergence", Performance; issue "Proof",
//! benchmark 4). Runs converge's own [`Worker`]s in this process against a fresh database:
//!
//! - `noop`: `--jobs` due `post_ledger` jobs without a payment (the real handler finds
//!   nothing to post and finishes without a read), drained by
//!   `--workers` workers claiming `--batch` at a time: jobs/s is the queue's own cost (claim
//!   with a lease, run, write the result under the lease token);
//! - `query`: `--jobs` UNKNOWN payments with a due query job each, against the sandbox channel
//!   (over HTTP) holding their charges: the real handler queries by channel key, moves the
//!   payment to CHANNEL_SUCCESS, posts the ledger batch and reaches SUCCESS;
//! - `webhook`: `--jobs` pending webhook deliveries (an event, a delivery and its job each)
//!   to a `webhook-sink` in this process that answers 200 at once: deliveries/s of the real
//!   handler (sign, POST over HTTP, record the attempt and the delivery's state);
//! - `relay`: `--jobs` outbox events published to a `nats-server -js` started for the run
//!   by the event-stream relay (PubAcks awaited, sequences recorded): events/s;
//! - claim latency: `--workers` claimers repeatedly claiming `--batch` due no-op jobs and
//!   completing them; p50/p99 of the claim statement alone.
//!
//! The set-up (bulk inserts, pre-made channel charges) is not measured. Prints `key=value`
//! lines for the benchmark script.

use converge_server::store::KindFilter;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use converge_bench::db::{self, Backend};
use converge_bench::stats::{ms, percentile};
use converge_server::channel::http::HttpChannel;
use converge_server::channel::sandbox::{self, SandboxConfig};
use converge_server::domain::backoff::{Backoff, RetryPolicy};
use converge_server::domain::clock::{Clock, SystemClock};
use converge_server::service::connectors::{Connectors, DEFAULT_CONNECTOR};
use converge_server::service::{Core, Timings};
use converge_server::store::Store;
use converge_server::worker::{JobResult, Worker, WorkerConfig};

/// Queue drain benchmark.
#[derive(Debug, Parser)]
#[command(name = "drain", version)]
struct Args {
    /// Database backend.
    #[arg(long, value_enum, default_value = "sqlite")]
    db: Backend,
    /// PostgreSQL account that may create databases (default: CONVERGE_TEST_PG_URL).
    #[arg(long)]
    pg_url: Option<String>,
    /// Jobs per measurement.
    #[arg(long, default_value_t = 10_000)]
    jobs: usize,
    /// Concurrent workers (each claims a batch, runs it, claims again).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Jobs claimed at once by a worker.
    #[arg(long, default_value_t = 16)]
    batch: i64,
    /// The nats-server binary for the relay measurement (default: CONVERGE_NATS_SERVER).
    #[arg(long, env = "CONVERGE_NATS_SERVER", default_value = "nats-server")]
    nats_server: String,
    /// Which measurements: noop, query, webhook, relay or all (all runs relay only when
    /// --nats-server names a working binary).
    #[arg(long, default_value = "all")]
    kind: String,
    /// Prefix of the printed keys.
    #[arg(long, default_value = "drain")]
    label: String,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("drain: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A fresh database for one measurement: (url, admin url to drop it, temp dir).
async fn fresh(args: &Args, tag: &str) -> Result<(String, Option<String>, std::path::PathBuf)> {
    let dir = std::env::temp_dir().join(format!("converge-drain-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(match args.db {
        Backend::Sqlite => (
            dir.join("converge.db").to_string_lossy().into_owned(),
            None,
            dir,
        ),
        Backend::Postgres => {
            let admin =
                db::pg_admin_url(args.pg_url.as_deref()).context("--db postgres needs --pg-url")?;
            (
                db::create_pg_database(&admin, "converge_bench").await?,
                Some(admin),
                dir,
            )
        }
    })
}

async fn cleanup(url: &str, admin: Option<String>, dir: &std::path::Path) -> Result<()> {
    if let Some(a) = admin {
        db::drop_pg_database(&a, url).await?;
    }
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// Runs `sqls` (each with `$1` = now, `$2` = row index as text) `n` times in one transaction.
async fn bulk(url: &str, n: usize, sqls: &[&str]) -> Result<()> {
    let now = SystemClock.now_ms();
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await?;
        let mut tx = pool.begin().await?;
        for i in 0..n {
            for sql in sqls {
                sqlx::query(sql)
                    .bind(now)
                    .bind(format!("{i:08}"))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        pool.close().await;
    } else {
        let opts = sqlx::sqlite::SqliteConnectOptions::from_str(&format!("sqlite://{url}"))?;
        let pool = sqlx::SqlitePool::connect_with(opts).await?;
        let mut tx = pool.begin().await?;
        for i in 0..n {
            for sql in sqls {
                sqlx::query(sql)
                    .bind(now)
                    .bind(format!("{i:08}"))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        pool.close().await;
    }
    Ok(())
}

const NOOP_JOB: &str = "INSERT INTO jobs (kind, payment_id, refund_id, payload, status, attempts, max_attempts, run_at, \
     created_at, updated_at) VALUES ('post_ledger', NULL, NULL, $2, 'due', 0, 5, $1, $1, $1)";

fn core(store: Arc<dyn Store>, channel_url: &str) -> Core {
    Core {
        store,
        connectors: Arc::new(Connectors::single(
            DEFAULT_CONNECTOR,
            Arc::new(HttpChannel::new(channel_url, Duration::from_secs(5))),
        )),
        clock: Arc::new(SystemClock),
        // The default UTC days: a bench core's postings are not read by accounting day.
        accounting: Default::default(),
        timings: Timings {
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
        // The webhook measurement's receiver listens on loopback.
        secrets: converge_server::domain::secret_box::SecretBox::random(),
        notifier: converge_server::service::webhooks::Notifier::new(
            converge_server::service::webhooks::WebhookSettings {
                allow_private: true,
                // The measurement's one endpoint takes every delivery: the in-flight caps
                // (bulkheads between endpoints and merchants) would measure themselves, not
                // the delivery path, so they are as wide as every worker's batch.
                inflight_per_endpoint: usize::MAX,
                inflight_per_merchant: usize::MAX,
                ..Default::default()
            },
        ),
        pauses: Default::default(),
        outcomes: Default::default(),
        console: converge_server::service::console::ConsoleSettings::one_off(),
    }
}

/// Drains `n` due jobs with the configured workers; returns (jobs/s, completed).
async fn drain(args: &Args, core: Core, n: usize) -> Result<(f64, u64)> {
    let done = Arc::new(AtomicU64::new(0));
    let other = Arc::new(AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    let started = Instant::now();
    for w in 0..args.workers {
        let worker = Worker::new(
            core.clone(),
            WorkerConfig {
                owner: format!("bench-{}-{w}", std::process::id()),
                batch: args.batch,
                lease_ms: 60_000,
                poll: Duration::from_millis(5),
                retry: RetryPolicy {
                    default: Backoff {
                        base_ms: 1_000,
                        cap_ms: 60_000,
                    },
                    overrides: Default::default(),
                },
                seed: 1 + w as u64,
            },
        );
        let (done, other) = (done.clone(), other.clone());
        set.spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(600);
            loop {
                let results = worker.drain_once().await?;
                for (_, r) in &results {
                    if *r == JobResult::Completed {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        other.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if results.is_empty() {
                    if done.load(Ordering::Relaxed) + other.load(Ordering::Relaxed) >= n as u64 {
                        return anyhow::Ok(());
                    }
                    if Instant::now() > deadline {
                        bail!("the queue did not drain within 600 s");
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let secs = started.elapsed().as_secs_f64();
    let completed = done.load(Ordering::Relaxed);
    if other.load(Ordering::Relaxed) > 0 {
        bail!(
            "{} jobs did not complete (retried, buried or lease lost)",
            other.load(Ordering::Relaxed)
        );
    }
    Ok((completed as f64 / secs, completed))
}

async fn noop(args: &Args) -> Result<()> {
    let (url, admin, dir) = fresh(args, "noop").await?;
    let store = converge_server::store::connect(&url).await?;
    bulk(&url, args.jobs, &[NOOP_JOB]).await?;
    let (rate, n) = drain(args, core(store.clone(), "http://127.0.0.1:9"), args.jobs).await?;
    store.close().await;
    cleanup(&url, admin, &dir).await?;
    let l = &args.label;
    println!("{l}.noop.jobs={n}");
    println!("{l}.noop.jobs_per_s={rate:.0}");
    Ok(())
}

async fn query(args: &Args) -> Result<()> {
    let (url, admin, dir) = fresh(args, "query").await?;
    let store = converge_server::store::connect(&url).await?;
    let merchant = store
        .create_merchant("drain", "drain-key-hash", SystemClock.now_ms())
        .await?;
    let m = merchant.id.to_string();
    let payment = format!(
        "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, params_hash, status, \
         version, channel_key, submit_attempts, refunded_amount, created_at, updated_at) \
         VALUES ('pay_' || $2, {m}, 'o-' || $2, 1000, 'CNY', '', 'h', 'UNKNOWN', 3, 'ck_' || $2, 1, 0, $1, $1)"
    );
    let job = "INSERT INTO jobs (kind, payment_id, refund_id, payload, status, attempts, max_attempts, run_at, \
         created_at, updated_at) VALUES ('query', 'pay_' || $2, NULL, '', 'due', 0, 5, $1, $1, $1)";
    bulk(&url, args.jobs, &[&payment, job]).await?;
    // The channel holds each payment's charge, as after a timed-out answer that did commit.
    let sb = sandbox::spawn(
        SandboxConfig {
            database_url: dir.join("channel.db").to_string_lossy().into_owned(),
            ..SandboxConfig::default()
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let client = reqwest::Client::new();
    let next = Arc::new(AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let (client, next, base, n) = (
            client.clone(),
            next.clone(),
            sb.url.clone(),
            args.jobs as u64,
        );
        set.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return anyhow::Ok(());
                }
                let r = client
                    .post(format!("{base}/charges"))
                    .json(&serde_json::json!({"key": format!("ck_{i:08}"), "amount": 1000, "currency": "CNY"}))
                    .send()
                    .await?;
                if !r.status().is_success() {
                    bail!("pre-charging the sandbox: {}", r.status());
                }
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let (rate, n) = drain(args, core(store.clone(), &sb.url), args.jobs).await?;
    let stats = store.queue_stats(0).await?;
    let success = store
        .verify_payments_page("", 1)
        .await?
        .first()
        .map(|p| p.status.clone())
        .unwrap_or_default();
    store.close().await;
    sb.shutdown().await;
    cleanup(&url, admin, &dir).await?;
    if success != "SUCCESS" {
        bail!("query drain left payments {success}, not SUCCESS; queue: {stats:?}");
    }
    let l = &args.label;
    println!("{l}.query.jobs={n}");
    println!("{l}.query.jobs_per_s={rate:.0}");
    Ok(())
}

async fn claims(args: &Args) -> Result<()> {
    let (url, admin, dir) = fresh(args, "claim").await?;
    let store = converge_server::store::connect(&url).await?;
    let n = args.jobs.min(5_000);
    bulk(&url, n, &[NOOP_JOB]).await?;
    let mut set = tokio::task::JoinSet::new();
    for w in 0..args.workers {
        let (store, batch) = (store.clone(), args.batch);
        set.spawn(async move {
            let mut lat = Vec::new();
            loop {
                let t = Instant::now();
                let jobs = store
                    .claim_jobs_of(
                        &format!("claimer-{w}"),
                        batch,
                        60_000,
                        SystemClock.now_ms(),
                        &KindFilter::all(),
                    )
                    .await?;
                lat.push(t.elapsed());
                if jobs.is_empty() {
                    return anyhow::Ok(lat);
                }
                for j in jobs {
                    store
                        .complete_job(j.id, &j.lease_token, SystemClock.now_ms())
                        .await?;
                }
            }
        });
    }
    let mut all = Vec::new();
    while let Some(r) = set.join_next().await {
        all.extend(r??);
    }
    all.sort_unstable();
    store.close().await;
    cleanup(&url, admin, &dir).await?;
    let l = &args.label;
    println!("{l}.claim.batch={}", args.batch);
    println!("{l}.claim.p50_ms={}", ms(percentile(&all, 0.5)));
    println!("{l}.claim.p99_ms={}", ms(percentile(&all, 0.99)));
    Ok(())
}

async fn webhook(args: &Args) -> Result<()> {
    use converge_server::channel::webhook_sink::{self, SinkConfig};
    use converge_server::service::actor::Actor;
    use converge_server::service::webhooks::new_endpoint_id;
    let (url, admin, dir) = fresh(args, "webhook").await?;
    let store = converge_server::store::connect(&url).await?;
    let sink = webhook_sink::spawn(
        SinkConfig {
            fault_rate: 0.0,
            seed: 1,
        },
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let core = core(store.clone(), "http://127.0.0.1:9");
    let merchant = store
        .create_merchant("drain", "drain-key-hash", SystemClock.now_ms())
        .await?;
    let endpoint = core
        .create_endpoint(
            &new_endpoint_id(),
            merchant.id,
            &format!("{}/hooks/ok", sink.url),
            &["*".to_string()],
            "",
            &Actor::system(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (m, e) = (merchant.id, endpoint.endpoint.id);
    let event = format!(
        "INSERT INTO events (id, merchant_id, aggregatetype, aggregateid, type, payload, created_at) \
         VALUES ('ev-' || $2, {m}, 'payment', 'pay_' || $2, 'payment.succeeded', \
         '{{\"id\":\"pay_x\",\"status\":\"SUCCESS\",\"amount\":1000,\"currency\":\"CNY\",\"version\":4}}', $1)"
    );
    let delivery = format!(
        "INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at) \
         VALUES ('ev-' || $2, '{e}', 'pending', 0, $1, $1, $1)"
    );
    let job = "INSERT INTO jobs (kind, payment_id, refund_id, payload, status, attempts, max_attempts, run_at, \
         created_at, updated_at) VALUES ('webhook', NULL, NULL, \
         (SELECT CAST(id AS TEXT) FROM webhook_deliveries WHERE event_id = 'ev-' || $2), 'due', 0, 9, $1, $1, $1)";
    bulk(&url, args.jobs, &[&event, &delivery, job]).await?;
    let (rate, n) = drain(args, core, args.jobs).await?;
    let delivered = store.webhook_backlog(0).await?;
    store.close().await;
    sink.task.abort();
    cleanup(&url, admin, &dir).await?;
    if delivered.pending != 0 || delivered.dead != 0 {
        bail!("webhook drain left deliveries undone: {delivered:?}");
    }
    let l = &args.label;
    println!("{l}.webhook.deliveries={n}");
    println!("{l}.webhook.deliveries_per_s={rate:.0}");
    Ok(())
}

async fn relay(args: &Args) -> Result<()> {
    use converge_server::worker::relay::{self, RelayConfig};
    let (url, admin, dir) = fresh(args, "relay").await?;
    let store = converge_server::store::connect(&url).await?;
    let merchant = store
        .create_merchant("drain", "drain-key-hash", SystemClock.now_ms())
        .await?;
    let m = merchant.id;
    let event = format!(
        "INSERT INTO events (id, merchant_id, aggregatetype, aggregateid, type, payload, created_at) \
         VALUES ('ev-' || $2, {m}, 'payment', 'pay_' || $2, 'payment.succeeded', \
         '{{\"id\":\"pay_x\",\"status\":\"SUCCESS\",\"amount\":1000,\"currency\":\"CNY\",\"version\":4}}', $1)"
    );
    bulk(&url, args.jobs, &[&event]).await?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let nats_dir = dir.join("nats");
    let mut nats = tokio::process::Command::new(&args.nats_server)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(&nats_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {} (--nats-server)", args.nats_server))?;
    let t0 = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if t0.elapsed() > Duration::from_secs(15) {
            bail!("nats-server did not listen");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cfg = RelayConfig {
        url: format!("nats://127.0.0.1:{port}"),
        prefix: "converge".into(),
        stream: "CONVERGE".into(),
        duplicate_window: Duration::from_secs(120),
        lease_ms: 10_000,
        batch: 256,
        poll: Duration::from_millis(10),
        retention_ms: i64::MAX / 2,
        owner: "bench".into(),
    };
    let core = core(store.clone(), "http://127.0.0.1:9");
    let connected = relay::connect(&cfg).await?;
    let now = SystemClock.now_ms();
    if !store
        .acquire_relay_lease(relay::LEASE, "bench", "bench-token", now, now + 600_000)
        .await?
    {
        bail!("relay lease taken");
    }
    let started = Instant::now();
    let mut published = 0usize;
    while published < args.jobs {
        let n = relay::round(&core, &cfg, &connected, "bench-token").await?;
        if n == 0 {
            bail!("the relay stopped at {published} of {} events", args.jobs);
        }
        published += n;
    }
    let rate = published as f64 / started.elapsed().as_secs_f64();
    let status = store
        .relay_status(relay::LEASE, SystemClock.now_ms())
        .await?;
    store.close().await;
    let _ = nats.kill().await;
    cleanup(&url, admin, &dir).await?;
    if status.backlog != 0 {
        bail!("relay left {} events unpublished", status.backlog);
    }
    let l = &args.label;
    println!("{l}.relay.events={published}");
    println!("{l}.relay.events_per_s={rate:.0}");
    Ok(())
}

async fn run(args: Args) -> Result<()> {
    if args.jobs == 0 || args.workers == 0 || args.batch < 1 {
        bail!("--jobs, --workers and --batch must be at least 1");
    }
    let l = &args.label;
    println!("{l}.backend={:?}", args.db);
    println!("{l}.workers={}", args.workers);
    println!("{l}.batch={}", args.batch);
    match args.kind.as_str() {
        "noop" => noop(&args).await,
        "query" => query(&args).await,
        "webhook" => webhook(&args).await,
        "relay" => relay(&args).await,
        "all" => {
            noop(&args).await?;
            query(&args).await?;
            webhook(&args).await?;
            if std::process::Command::new(&args.nats_server)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
            {
                relay(&args).await?;
            }
            claims(&args).await
        }
        other => bail!("--kind must be noop, query, webhook, relay or all, not {other:?}"),
    }
}
