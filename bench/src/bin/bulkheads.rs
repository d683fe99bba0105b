//! `bulkheads`: the proof of issue 37 (lanes, the compensation rate, webhook bulkheads), three
//! ratios each measured in one run on real processes: a release `converge serve` with
//! `--channel-url` to a `converge channel-sim` (the sandbox channel over HTTP, its own SQLite
//! file) and, for webhooks, a `converge webhook-sink`.
//!
//! - `storm`: creates at full rate (closed loop, `--concurrency`) alone, then the same while
//!   `--refunds` refunds and `--reversals` reversals are queued and due: create throughput and
//!   p99 with the storm against without; the storm's drain rate at the channel (refunds and
//!   reversal refunds counted in the channel's own store every second) against
//!   `--compensation-rate-per-sec`; then the rest drained with the limit lifted and `converge
//!   verify` run (nothing lost). The refunds are made through the merchant API while the
//!   channel is down (each answers pending and leaves a due `refund` job: the storm after a
//!   channel outage) by a server without workers; the reversals are reserved through the
//!   store's `reserve_reversal` with their `reverse` job due now (the state an approved ops
//!   reversal whose executing request died leaves), since the ops API's four-eyes approval
//!   per reversal is not what is measured.
//! - `neighbour`: merchant A registers 16 endpoints that hang (the sink's `/hooks/hang`; the
//!   delivery time-out, 15 s by default, ends each attempt), merchant B one endpoint that
//!   answers 200; both make declined and succeeded payments for `--window-secs`. B's delivery
//!   latency (event commit to delivery recorded) p50/p99/max, and A's attempts against the
//!   retry schedule (each attempt's gap from the one before against the schedule's delay).
//! - `stall`: `--stall-refunds` refunds queued as for `storm` (one endpoint that answers 200
//!   subscribed to every event), then the channel restarted with `--hang-submit-ms` (every
//!   charge held 10 s, then 504) and the server's channel time-out above it, while
//!   `--concurrency` clients keep creating payments: refunds reaching the channel per second
//!   and webhooks delivered (count, latency) during `--window-secs` of the stall.
//!
//! Every server runs with the defaults of issue 37 (lanes, caps, breaker, time-outs) unless
//! named above. Prints `key=value` lines; exits non-zero when a run could not be made (not
//! when a goal is missed: the figures say so).
//!
//! ```text
//! cargo run --release -p converge-bench --bin bulkheads -- --converge target/release/converge --scenario all
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use converge_bench::db::{self, Backend};
use converge_bench::procs::{Converge, Proc, free_port};
use converge_bench::stats::{ms, percentile};
use serde_json::{Value, json};

/// Issue 37's bulkhead benchmarks.
#[derive(Debug, Clone, Parser)]
#[command(name = "bulkheads", version)]
struct Args {
    /// The converge binary to run (a release build for figures).
    #[arg(long, default_value = "target/release/converge")]
    converge: PathBuf,
    /// Directory the converge processes run in (the repository root).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Database backend.
    #[arg(long, value_enum, default_value = "sqlite")]
    db: Backend,
    /// PostgreSQL account that may create databases (default: CONVERGE_TEST_PG_URL).
    #[arg(long)]
    pg_url: Option<String>,
    /// storm, neighbour, stall or all.
    #[arg(long, default_value = "all")]
    scenario: String,
    /// Clients creating payments at once (closed loop).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// storm: refunds queued (one per payment, its whole amount).
    #[arg(long, default_value_t = 20_000)]
    refunds: usize,
    /// storm: reversals queued.
    #[arg(long, default_value_t = 2_000)]
    reversals: usize,
    /// storm: creates measured per phase (alone, then with the storm).
    #[arg(long, default_value_t = 6_000)]
    creates: usize,
    /// storm: seconds the drain is measured alone after the creates with the storm.
    #[arg(long, default_value_t = 20)]
    drain_secs: u64,
    /// The servers' `--compensation-rate-per-sec` (the default of `serve`).
    #[arg(long, default_value_t = 50)]
    compensation_rate: u32,
    /// neighbour and stall: seconds measured.
    #[arg(long, default_value_t = 120)]
    window_secs: u64,
    /// neighbour: merchant B's payments per second (every other one declined).
    #[arg(long, default_value_t = 4.0)]
    b_rate: f64,
    /// neighbour: merchant A's payments over the window (every other one declined), evenly
    /// spread; each is delivered to A's 16 endpoints.
    #[arg(long, default_value_t = 6)]
    a_payments: usize,
    /// stall: refunds queued before the stall.
    #[arg(long, default_value_t = 3_000)]
    stall_refunds: usize,
    /// stall: how long the channel holds every charge (channel-sim --hang-submit-ms).
    #[arg(long, default_value_t = 10_000)]
    hang_submit_ms: u64,
    /// Keep the work directory (logs, SQLite files) and the PostgreSQL database.
    #[arg(long)]
    keep: bool,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bulkheads: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    if args.concurrency == 0 || args.creates == 0 {
        bail!("--concurrency and --creates must be at least 1");
    }
    let scenarios: Vec<&str> = match args.scenario.as_str() {
        "all" => vec!["storm", "neighbour", "stall"],
        s @ ("storm" | "neighbour" | "stall") => vec![s],
        other => bail!("--scenario must be storm, neighbour, stall or all, not {other:?}"),
    };
    let conv = Converge::new(&args.converge, &args.root)?;
    println!("bulkheads.backend={:?}", args.db);
    println!("bulkheads.load_avg_start={}", load_avg());
    for s in scenarios {
        let mut bed = Bed::new(&args, &conv, s).await?;
        eprintln!("bulkheads: {s}: work directory {}", bed.work.display());
        let result = match s {
            "storm" => storm(&args, &mut bed).await,
            "neighbour" => neighbour(&args, &mut bed).await,
            _ => stall(&args, &mut bed).await,
        };
        bed.teardown(args.keep && result.is_ok()).await;
        result.with_context(|| format!("scenario {s}"))?;
    }
    println!("bulkheads.load_avg_end={}", load_avg());
    Ok(())
}

/// The 1, 5 and 15 minute load averages (Linux), for the report.
fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "-".into())
}

// ---------------------------------------------------------------------------------------------
// The test bed: database, channel, sink, server.

/// One scenario's processes and database.
struct Bed {
    conv: Converge,
    work: PathBuf,
    db_url: String,
    admin: Option<String>,
    secret: String,
    serve_port: u16,
    channel_port: u16,
    serve: Option<Proc>,
    channel: Option<Proc>,
    sink: Option<Proc>,
    compensation_rate: u32,
}

impl Bed {
    async fn new(args: &Args, conv: &Converge, tag: &str) -> Result<Self> {
        let work =
            std::env::temp_dir().join(format!("converge-bulkheads-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&work)?;
        let (db_url, admin) =
            db::scratch(args.db, args.pg_url.as_deref(), &work, "converge_bulk").await?;
        conv.run(&["migrate", "--database-url", &db_url]).await?;
        Ok(Self {
            conv: conv.clone(),
            work,
            db_url,
            admin,
            secret: format!("bulkheads-callback-secret-{}", "0123456789abcdef".repeat(2)),
            serve_port: free_port()?,
            channel_port: free_port()?,
            serve: None,
            channel: None,
            sink: None,
            compensation_rate: args.compensation_rate,
        })
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.serve_port)
    }

    fn channel_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.channel_port)
    }

    fn channel_db(&self) -> PathBuf {
        self.work.join("channel.db")
    }

    /// Adds a merchant; returns its API key.
    async fn merchant(&self, name: &str) -> Result<String> {
        Ok(self
            .conv
            .run(&["merchant", "add", name, "--database-url", &self.db_url])
            .await?
            .trim()
            .to_string())
    }

    /// (Re)starts the channel, holding every charge `hang_submit_ms` when above 0.
    async fn start_channel(&mut self, hang_submit_ms: u64) -> Result<()> {
        self.stop_channel().await;
        let s = |v: &str| v.to_string();
        let a = vec![
            s("channel-sim"),
            s("--bind"),
            format!("127.0.0.1:{}", self.channel_port),
            s("--database-url"),
            self.channel_db().to_string_lossy().into_owned(),
            s("--callback-url"),
            format!("{}/v1/channel/callbacks", self.base()),
            s("--callback-secret"),
            self.secret.clone(),
            s("--hang-submit-ms"),
            hang_submit_ms.to_string(),
        ];
        let url = self.channel_url();
        self.channel = Some(
            Proc::start(
                &self.conv,
                "channel-sim",
                a,
                self.work.join("channel.log"),
                format!("{url}/health"),
            )
            .await?,
        );
        Ok(())
    }

    async fn stop_channel(&mut self) {
        if let Some(mut c) = self.channel.take() {
            c.stop(Duration::from_secs(5)).await;
        }
    }

    /// (Re)starts `converge serve` with the bed's flags and `extra`.
    async fn start_serve(&mut self, extra: &[&str]) -> Result<()> {
        self.stop_serve().await;
        let s = |v: &str| v.to_string();
        let mut a = vec![
            s("serve"),
            s("--database-url"),
            self.db_url.clone(),
            s("--bind"),
            format!("127.0.0.1:{}", self.serve_port),
            s("--channel-url"),
            self.channel_url(),
            s("--callback-secret"),
            self.secret.clone(),
            s("--data-dir"),
            self.work.to_string_lossy().into_owned(),
            s("--webhook-allow-private"),
            s("--compensation-rate-per-sec"),
            self.compensation_rate.to_string(),
        ];
        a.extend(extra.iter().map(|v| v.to_string()));
        let health = format!("{}/health", self.base());
        self.serve =
            Some(Proc::start(&self.conv, "serve", a, self.work.join("serve.log"), health).await?);
        Ok(())
    }

    async fn stop_serve(&mut self) {
        if let Some(mut p) = self.serve.take() {
            p.stop(Duration::from_secs(20)).await;
        }
    }

    /// Starts `converge webhook-sink` (no faults); returns its base URL.
    async fn start_sink(&mut self) -> Result<String> {
        let port = free_port()?;
        let url = format!("http://127.0.0.1:{port}");
        self.sink = Some(
            Proc::start(
                &self.conv,
                "webhook-sink",
                vec![
                    "webhook-sink".into(),
                    "--bind".into(),
                    format!("127.0.0.1:{port}"),
                ],
                self.work.join("sink.log"),
                format!("{url}/health"),
            )
            .await?,
        );
        Ok(url)
    }

    async fn teardown(mut self, keep: bool) {
        self.stop_serve().await;
        self.stop_channel().await;
        if let Some(mut s) = self.sink.take() {
            s.stop(Duration::from_secs(2)).await;
        }
        if keep {
            eprintln!("bulkheads: kept {} ({})", self.work.display(), self.db_url);
            return;
        }
        if let Some(a) = &self.admin {
            let _ = db::drop_pg_database(a, &self.db_url).await;
        }
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

// ---------------------------------------------------------------------------------------------
// Merchant API client and load shapes.

/// A merchant's API client.
#[derive(Clone)]
struct Api {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    fn new(base: &str, key: &str) -> Result<Self> {
        Ok(Self {
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .timeout(Duration::from_secs(60))
                .build()?,
            base: base.to_string(),
            key: key.to_string(),
        })
    }

    /// POSTs `body` under a new Idempotency-Key; returns (status, answer).
    async fn post(&self, path: &str, idem: &str, body: &Value) -> Result<(u16, Value)> {
        let r = self
            .client
            .post(format!("{}/v1{path}", self.base))
            .bearer_auth(&self.key)
            .header("Idempotency-Key", idem)
            .json(body)
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    /// Creates a payment of `amount` (its last two digits pick the sandbox's behaviour: 51
    /// declines); returns (status, payment id, payment status).
    async fn create(&self, tag: &str, amount: i64) -> Result<(u16, String, String)> {
        let body = json!({"amount": amount, "currency": "CNY", "merchant_order_id": tag,
            "description": "bulkheads"});
        let (status, v) = self.post("/payments", tag, &body).await?;
        let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        Ok((status, field("id"), field("status")))
    }

    /// Registers an endpoint for every event; returns its id. Errors: not 201.
    async fn endpoint(&self, url: &str, idem: &str) -> Result<String> {
        let (status, v) = self
            .post(
                "/webhook_endpoints",
                idem,
                &json!({"url": url, "enabled_events": ["*"]}),
            )
            .await?;
        if status != 201 {
            bail!("registering {url}: {status} {v}");
        }
        Ok(v["id"].as_str().unwrap_or_default().to_string())
    }
}

/// An ordinary amount (charged at once by the sandbox): last two digits below 50.
fn ordinary(i: usize) -> i64 {
    1_000 + (i % 40) as i64 * 100 + (i % 50) as i64
}

/// What a closed loop did: latencies (sorted), the successful results by index, failures.
struct Loop<T> {
    lat: Vec<Duration>,
    ok: Vec<(usize, T)>,
    errors: usize,
    first_error: Option<String>,
    elapsed: Duration,
}

impl<T> Loop<T> {
    fn rate(&self) -> f64 {
        (self.ok.len() + self.errors) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs `f(0..count)` with `concurrency` in flight, each started when one ends.
async fn closed_loop<T, F, Fut>(concurrency: usize, count: usize, f: F) -> Loop<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T>> + Send,
{
    let f = Arc::new(f);
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    let started = Instant::now();
    for _ in 0..concurrency.min(count.max(1)) {
        let (f, next) = (f.clone(), next.clone());
        set.spawn(async move {
            let (mut lat, mut ok, mut errors) = (Vec::new(), Vec::new(), Vec::new());
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return (lat, ok, errors);
                }
                let t = Instant::now();
                match f(i).await {
                    Ok(v) => ok.push((i, v)),
                    Err(e) => errors.push(format!("{e:#}")),
                }
                lat.push(t.elapsed());
            }
        });
    }
    let mut out = Loop {
        lat: Vec::with_capacity(count),
        ok: Vec::with_capacity(count),
        errors: 0,
        first_error: None,
        elapsed: Duration::ZERO,
    };
    while let Some(r) = set.join_next().await {
        let Ok((lat, ok, errors)) = r else {
            out.errors += 1;
            continue;
        };
        out.lat.extend(lat);
        out.ok.extend(ok);
        out.errors += errors.len();
        if out.first_error.is_none() {
            out.first_error = errors.into_iter().next();
        }
    }
    out.elapsed = started.elapsed();
    out.lat.sort_unstable();
    out.ok.sort_by_key(|(i, _)| *i);
    out
}

/// Creates `count` payments (ordinary amounts) at `concurrency`, tags `{tag}-{i}`; a create
/// answered other than 201 SUCCESS is an error. Returns the payment ids by index.
async fn create_phase(api: &Api, concurrency: usize, count: usize, tag: &str) -> Loop<String> {
    let (api, tag) = (api.clone(), tag.to_string());
    closed_loop(concurrency, count, move |i| {
        let (api, tag) = (api.clone(), tag.clone());
        async move {
            let (status, id, st) = api.create(&format!("{tag}-{i}"), ordinary(i)).await?;
            if status != 201 || st != "SUCCESS" {
                bail!("create answered {status} {st}");
            }
            Ok(id)
        }
    })
    .await
}

/// Refunds each payment of `ids` in full through the merchant API, `concurrency` at once.
/// With the channel down each answers 201/202 pending. Returns how many were accepted.
async fn refund_all(api: &Api, concurrency: usize, ids: Vec<(String, i64)>) -> Result<usize> {
    let (api, ids) = (api.clone(), Arc::new(ids));
    let n = ids.len();
    let l = closed_loop(concurrency, n, move |i| {
        let (api, ids) = (api.clone(), ids.clone());
        async move {
            let (id, amount) = &ids[i];
            let (status, v) = api
                .post(
                    &format!("/payments/{id}/refunds"),
                    &format!("refund-{id}"),
                    &json!({"amount": amount, "reason": "storm"}),
                )
                .await?;
            if !(200..300).contains(&status) {
                bail!("refund answered {status} {v}");
            }
            Ok(())
        }
    })
    .await;
    if l.errors > 0 {
        bail!(
            "{} of {n} refunds refused; first: {}",
            l.errors,
            l.first_error.unwrap_or_default()
        );
    }
    Ok(l.ok.len())
}

// ---------------------------------------------------------------------------------------------
// Reading the databases.

/// The first column of the first row of `sql`.
async fn int_one(url: &str, sql: &str) -> Result<i64> {
    Ok(db::int_rows(url, sql)
        .await?
        .first()
        .and_then(|r| r.first().copied())
        .unwrap_or(0))
}

/// (refunds, reversal refunds) the channel holds: merchant refunds are keyed by the refund id
/// (`re_...`), reversals by their action id.
async fn channel_refunds(channel_db: &Path) -> Result<(i64, i64)> {
    let r = db::int_rows(
        &channel_db.to_string_lossy(),
        "SELECT COALESCE(SUM(CASE WHEN refund_key LIKE 're\\_%' ESCAPE '\\' THEN 1 ELSE 0 END), 0), \
         COALESCE(SUM(CASE WHEN refund_key LIKE 're\\_%' ESCAPE '\\' THEN 0 ELSE 1 END), 0) \
         FROM sandbox_refunds",
    )
    .await?;
    let row = r.first().cloned().unwrap_or_default();
    Ok((
        row.first().copied().unwrap_or(0),
        row.get(1).copied().unwrap_or(0),
    ))
}

/// Counts the channel's refunds every second until stopped: (seconds since start, refunds,
/// reversal refunds) samples.
struct Sampler {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Vec<(f64, i64, i64)>>,
}

impl Sampler {
    fn start(channel_db: PathBuf) -> Self {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let t0 = Instant::now();
            let mut out = Vec::new();
            loop {
                if let Ok((r, v)) = channel_refunds(&channel_db).await {
                    out.push((t0.elapsed().as_secs_f64(), r, v));
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stopped.changed() => return out,
                }
            }
        });
        Self { stop, task }
    }

    async fn finish(self) -> Vec<(f64, i64, i64)> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// Refunds + reversal refunds per second between the samples nearest `from` and `to`
/// (seconds since the sampler started), and the samples' own span.
fn rate_between(samples: &[(f64, i64, i64)], from: f64, to: f64) -> (f64, f64, i64) {
    let pick = |t: f64| {
        samples
            .iter()
            .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
            .copied()
    };
    match (pick(from), pick(to)) {
        (Some(a), Some(b)) if b.0 > a.0 => {
            let n = (b.1 + b.2) - (a.1 + a.2);
            (n as f64 / (b.0 - a.0), b.0 - a.0, n)
        }
        _ => (0.0, 0.0, 0),
    }
}

/// One figure of the server's `/metrics`: the first sample of `name` whose labels contain
/// `label` (e.g. `lane="forward"`).
async fn metric(base: &str, name: &str, label: &str) -> Option<f64> {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

// ---------------------------------------------------------------------------------------------
// Scenario 1: the refund storm.

async fn storm(args: &Args, bed: &mut Bed) -> Result<()> {
    let seeded = args.refunds + args.reversals;
    bed.start_channel(0).await?;
    bed.start_serve(&[]).await?;
    let api = Api::new(&bed.base(), &bed.merchant("storm").await?)?;
    let t = Instant::now();
    let seed = create_phase(&api, args.concurrency, seeded, "seed").await;
    if seed.errors > 0 {
        bail!(
            "{} seed creates failed: {}",
            seed.errors,
            seed.first_error.unwrap_or_default()
        );
    }
    println!("storm.seed.payments={seeded}");
    println!("storm.seed.secs={:.1}", t.elapsed().as_secs_f64());
    let _ = create_phase(&api, args.concurrency, 200, "warm-a").await;
    let alone = create_phase(&api, args.concurrency, args.creates, "alone").await;
    phase_figures("storm.alone", &alone);

    // The storm: refunds made while the channel is down (each pending, its job due), by a
    // server without workers, then the reversals reserved.
    bed.stop_channel().await;
    bed.start_serve(&["--no-workers"]).await?;
    let t = Instant::now();
    let amounts: Vec<(String, i64)> = seed
        .ok
        .iter()
        .map(|(i, id)| (id.clone(), ordinary(*i)))
        .collect();
    let (to_refund, to_reverse) = amounts.split_at(args.refunds);
    let accepted = refund_all(&api, args.concurrency, to_refund.to_vec()).await?;
    println!("storm.seed.refund_requests={accepted}");
    let reserved = reserve_reversals(&bed.db_url, to_reverse).await?;
    println!("storm.seed.reversals_reserved={reserved}");
    println!("storm.seed.storm_secs={:.1}", t.elapsed().as_secs_f64());
    bed.stop_serve().await;
    let due = int_one(
        &bed.db_url,
        "SELECT COUNT(*) FROM jobs WHERE kind IN ('refund', 'reverse') AND status = 'due'",
    )
    .await?;
    println!("storm.queued_due={due}");

    bed.start_channel(0).await?;
    let sampler = Sampler::start(bed.channel_db());
    let t0 = Instant::now();
    bed.start_serve(&[]).await?;
    let _ = create_phase(&api, args.concurrency, 200, "warm-b").await;
    let from = t0.elapsed().as_secs_f64();
    let with = create_phase(&api, args.concurrency, args.creates, "storm").await;
    let to = t0.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(args.drain_secs)).await;
    let end = t0.elapsed().as_secs_f64();
    let samples = sampler.finish().await;
    phase_figures("storm.with", &with);
    storm_figures(args, &alone, &with, &samples, (from, to, end));
    finish_storm(args, bed).await
}

/// Reserves a reversal of each payment (action `act_bench_<i>`) with its `reverse` job due
/// now, through the store. Returns how many were reserved.
async fn reserve_reversals(db_url: &str, payments: &[(String, i64)]) -> Result<usize> {
    use converge_server::domain::clock::{Clock, SystemClock};
    use converge_server::domain::jobs::JobKind;
    use converge_server::store::{NewJob, ReserveReversal, ReversalReservation};
    let store = converge_server::store::connect(db_url).await?;
    let mut reserved = 0;
    for (i, (id, _)) in payments.iter().enumerate() {
        let p = store
            .payment(id)
            .await?
            .with_context(|| format!("payment {id} missing"))?;
        let now = SystemClock.now_ms();
        let r = store
            .reserve_reversal(&ReserveReversal {
                payment_id: id.clone(),
                action_id: format!("act_bench_{i:06}"),
                pinned_version: p.version,
                now,
                job: NewJob {
                    kind: JobKind::Reverse,
                    payment_id: Some(id.clone()),
                    refund_id: None,
                    run_at: now,
                    max_attempts: 5,
                },
            })
            .await?;
        if matches!(r, ReversalReservation::Reserved(_)) {
            reserved += 1;
        }
    }
    store.close().await;
    Ok(reserved)
}

fn phase_figures(l: &str, p: &Loop<String>) {
    println!("{l}.creates={}", p.lat.len());
    println!("{l}.rps={:.1}", p.rate());
    println!("{l}.p50_ms={}", ms(percentile(&p.lat, 0.5)));
    println!("{l}.p99_ms={}", ms(percentile(&p.lat, 0.99)));
    println!("{l}.errors={}", p.errors);
    if let Some(e) = &p.first_error {
        println!("{l}.first_error={e}");
    }
}

fn storm_figures(
    args: &Args,
    alone: &Loop<String>,
    with: &Loop<String>,
    samples: &[(f64, i64, i64)],
    (from, to, end): (f64, f64, f64),
) {
    let ratio_rps = with.rate() / alone.rate().max(1e-9);
    let p99 = |l: &Loop<String>| percentile(&l.lat, 0.99).as_secs_f64();
    let ratio_p99 = p99(with) / p99(alone).max(1e-9);
    println!("storm.ratio.rps={ratio_rps:.2}");
    println!("storm.ratio.p99={ratio_p99:.2}");
    println!(
        "storm.goal.rps={}",
        if ratio_rps >= 0.8 { "met" } else { "NOT met" }
    );
    println!(
        "storm.goal.p99={}",
        if ratio_p99 <= 1.5 { "met" } else { "NOT met" }
    );
    let (during, secs, n) = rate_between(samples, from, to);
    println!("storm.drain.during_creates_per_s={during:.1} ({n} in {secs:.1} s)");
    let (after, secs, n) = rate_between(samples, to, end);
    println!("storm.drain.alone_per_s={after:.1} ({n} in {secs:.1} s)");
    println!("storm.drain.configured_per_s={}", args.compensation_rate);
    // Issue 37: the storm drains at the configured channel rate while the creates run: within
    // a tenth of it (a bucket refills continuously, the samples are a second apart).
    let rate = f64::from(args.compensation_rate);
    println!(
        "storm.goal.drain={}",
        if (during - rate).abs() <= rate * 0.1 {
            "met"
        } else {
            "NOT met"
        }
    );
    // Per-second counts, to see the shape (bursts, stalls).
    let per_sec: Vec<String> = samples
        .windows(2)
        .map(|w| format!("{}", (w[1].1 + w[1].2) - (w[0].1 + w[0].2)))
        .collect();
    println!("storm.drain.per_second={}", per_sec.join(","));
}

/// Lifts the rate limit, waits for every refund and reversal to settle, checks the channel
/// holds each once and runs `converge verify`.
async fn finish_storm(args: &Args, bed: &mut Bed) -> Result<()> {
    let t = Instant::now();
    bed.compensation_rate = 0;
    bed.start_serve(&[]).await?;
    wait_for(
        &bed.db_url,
        "SELECT (SELECT COUNT(*) FROM refunds WHERE status = 'pending') + \
         (SELECT COUNT(*) FROM payments WHERE reversal_id IS NOT NULL AND status <> 'REVERSED')",
        Duration::from_secs(900),
    )
    .await?;
    println!(
        "storm.finish.unlimited_drain_secs={:.1}",
        t.elapsed().as_secs_f64()
    );
    let (r, v) = channel_refunds(&bed.channel_db()).await?;
    println!("storm.channel.refunds={r}");
    println!("storm.channel.reversals={v}");
    let refunded = int_one(
        &bed.db_url,
        "SELECT COUNT(*) FROM refunds WHERE status = 'succeeded'",
    )
    .await?;
    let reversed = int_one(
        &bed.db_url,
        "SELECT COUNT(*) FROM payments WHERE status = 'REVERSED'",
    )
    .await?;
    println!("storm.local.refunds_succeeded={refunded}");
    println!("storm.local.reversed={reversed}");
    let complete =
        r == args.refunds as i64 && v == args.reversals as i64 && refunded == r && reversed == v;
    println!("storm.nothing_lost={complete}");
    bed.stop_serve().await;
    let (ok, out, err) = bed
        .conv
        .run_status(&[
            "verify",
            "--database-url",
            &bed.db_url,
            "--channel-url",
            &bed.channel_url(),
            "--window-secs",
            "0",
        ])
        .await?;
    let last = out.trim().lines().last().unwrap_or("").to_string();
    println!("storm.verify.passed={ok}");
    println!("storm.verify.summary={last}");
    if !ok {
        eprintln!("{out}{err}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scenario 2: the noisy neighbour.

async fn neighbour(args: &Args, bed: &mut Bed) -> Result<()> {
    bed.start_channel(0).await?;
    let sink = bed.start_sink().await?;
    bed.start_serve(&[]).await?;
    let a = Api::new(&bed.base(), &bed.merchant("noisy-a").await?)?;
    let b = Api::new(&bed.base(), &bed.merchant("quiet-b").await?)?;
    let mut a_endpoints = Vec::new();
    for i in 0..16 {
        a_endpoints.push(
            a.endpoint(&format!("{sink}/hooks/hang"), &format!("a-ep-{i}"))
                .await?,
        );
    }
    let (over, v) = a
        .post(
            "/webhook_endpoints",
            "a-ep-16",
            &json!({"url": format!("{sink}/hooks/hang"), "enabled_events": ["*"]}),
        )
        .await?;
    println!(
        "neighbour.a.seventeenth_endpoint={over} {}",
        v["error"]["code"].as_str().unwrap_or("")
    );
    let b_endpoint = b.endpoint(&format!("{sink}/hooks/ok"), "b-ep").await?;
    let window = Duration::from_secs(args.window_secs);
    let b_count = (args.b_rate * window.as_secs_f64()).round() as usize;
    let (ra, rb) = tokio::join!(
        paced(a.clone(), "a", args.a_payments, window),
        paced(b.clone(), "b", b_count, window)
    );
    let (ra, rb) = (ra?, rb?);
    println!("neighbour.a.payments={ra}");
    println!("neighbour.b.payments={rb}");
    // B's last deliveries, well inside its goal, and A's attempts in flight.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let base = bed.base();
    for reason in ["breaker_open", "in_flight"] {
        let n = metric(
            &base,
            "converge_webhook_deferred_total",
            &format!("reason=\"{reason}\""),
        )
        .await;
        println!(
            "neighbour.deferred.{reason}={}",
            n.map_or("-".into(), |n| format!("{n:.0}"))
        );
    }
    let open = metric(&base, "converge_webhook_breaker_open", "").await;
    println!(
        "neighbour.breakers_open={}",
        open.map_or("-".into(), |n| format!("{n:.0}"))
    );
    bed.stop_serve().await;
    b_latency(&bed.db_url, &b_endpoint).await?;
    a_schedule(&bed.db_url, &a_endpoints).await
}

/// Makes `count` payments evenly over `window` (open loop: each starts on time whatever the
/// others take), every other one declined (digits 51). Returns how many were answered 201.
async fn paced(api: Api, tag: &str, count: usize, window: Duration) -> Result<usize> {
    let period = window.div_f64(count.max(1) as f64);
    let start = tokio::time::Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..count {
        tokio::time::sleep_until(start + period * i as u32).await;
        let (api, tag) = (api.clone(), format!("{tag}-{i}"));
        let amount = if i % 2 == 0 { 1_051 } else { ordinary(i) };
        set.spawn(async move { api.create(&tag, amount).await });
    }
    let mut ok = 0;
    while let Some(r) = set.join_next().await {
        if matches!(r, Ok(Ok((status, _, _))) if (200..300).contains(&status)) {
            ok += 1;
        }
    }
    Ok(ok)
}

/// Merchant B's deliveries: latency from the event's commit to the delivery recorded.
async fn b_latency(db_url: &str, endpoint: &str) -> Result<()> {
    let rows = db::int_rows(
        db_url,
        &format!(
            "SELECT d.delivered_at - e.created_at FROM webhook_deliveries d \
             JOIN events e ON e.id = d.event_id \
             WHERE d.endpoint_id = '{endpoint}' AND d.status = 'succeeded'"
        ),
    )
    .await?;
    let mut lat: Vec<Duration> = rows
        .iter()
        .map(|r| Duration::from_millis(r[0].max(0) as u64))
        .collect();
    lat.sort_unstable();
    let pending = int_one(
        db_url,
        &format!(
            "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = '{endpoint}' \
             AND status <> 'succeeded'"
        ),
    )
    .await?;
    println!("neighbour.b.delivered={}", lat.len());
    println!("neighbour.b.undelivered={pending}");
    println!("neighbour.b.p50_ms={}", ms(percentile(&lat, 0.5)));
    println!("neighbour.b.p99_ms={}", ms(percentile(&lat, 0.99)));
    println!(
        "neighbour.b.max_ms={}",
        ms(lat.last().copied().unwrap_or_default())
    );
    let p99 = percentile(&lat, 0.99);
    println!(
        "neighbour.goal.b_p99_under_2s={}",
        if p99 < Duration::from_secs(2) && pending == 0 && !lat.is_empty() {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}

/// The default retry schedule's delays (`--webhook-retry-schedule`), ms: attempt `k` (from 1)
/// is due `SCHEDULE[k - 1]` after attempt `k - 1` started (±10 % jitter).
const SCHEDULE: [i64; 9] = [
    0, 30_000, 60_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 86_400_000,
];

/// Merchant A's attempts against the schedule: per attempt number, how many, and the gap from
/// the attempt before (min, median, max) against the scheduled delay; "early" attempts (gap
/// under 90 % of the delay) break the schedule, late ones were held by a bulkhead (in-flight
/// caps, the breaker).
async fn a_schedule(db_url: &str, endpoints: &[String]) -> Result<()> {
    let list = endpoints
        .iter()
        .map(|e| format!("'{e}'"))
        .collect::<Vec<_>>()
        .join(",");
    let rows = db::int_rows(
        db_url,
        &format!(
            "SELECT a.delivery_id, a.attempted_at, e.created_at FROM webhook_attempts a \
             JOIN webhook_deliveries d ON d.id = a.delivery_id \
             JOIN events e ON e.id = d.event_id \
             WHERE d.endpoint_id IN ({list}) ORDER BY a.delivery_id, a.attempted_at"
        ),
    )
    .await?;
    let deliveries = int_one(
        db_url,
        &format!("SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id IN ({list})"),
    )
    .await?;
    let mut by_delivery: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for r in &rows {
        by_delivery.entry(r[0]).or_default().push((r[1], r[2]));
    }
    // gaps[k]: attempt k+1's gap from attempt k (k = 0: from the event's commit).
    let mut gaps: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    for attempts in by_delivery.values() {
        for (k, (at, created)) in attempts.iter().enumerate() {
            let prev = if k == 0 { *created } else { attempts[k - 1].0 };
            gaps.entry(k).or_default().push(at - prev);
        }
    }
    println!("neighbour.a.deliveries={deliveries}");
    println!("neighbour.a.attempts={}", rows.len());
    for (k, mut g) in gaps {
        g.sort_unstable();
        let delay = SCHEDULE.get(k).copied().unwrap_or(0);
        let early = g.iter().filter(|&&x| x < delay * 9 / 10).count();
        let on_time = g
            .iter()
            .filter(|&&x| x >= delay * 9 / 10 && x <= delay * 11 / 10 + 2_000)
            .count();
        println!(
            "neighbour.a.attempt{}=n {} scheduled_gap_s {} gap_s min/median/max {:.1}/{:.1}/{:.1} on_time {} early {} late {}",
            k + 1,
            g.len(),
            delay / 1000,
            g[0] as f64 / 1000.0,
            g[g.len() / 2] as f64 / 1000.0,
            g[g.len() - 1] as f64 / 1000.0,
            on_time,
            early,
            g.len() - on_time - early
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scenario 3: the forward-path stall.

async fn stall(args: &Args, bed: &mut Bed) -> Result<()> {
    bed.start_channel(0).await?;
    let sink = bed.start_sink().await?;
    // The server waits out the channel's hang (a submit holds its slot the whole 10 s).
    let timeout = (args.hang_submit_ms + 5_000).to_string();
    let serve_flags = ["--channel-timeout-ms", timeout.as_str()];
    bed.start_serve(&serve_flags).await?;
    let api = Api::new(&bed.base(), &bed.merchant("stall").await?)?;
    let endpoint = api
        .endpoint(&format!("{sink}/hooks/ok"), "stall-ep")
        .await?;
    let seed = create_phase(&api, args.concurrency, args.stall_refunds, "seed").await;
    if seed.errors > 0 {
        bail!(
            "{} seed creates failed: {}",
            seed.errors,
            seed.first_error.unwrap_or_default()
        );
    }
    wait_for(
        &bed.db_url,
        "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'",
        Duration::from_secs(300),
    )
    .await?;
    bed.stop_channel().await;
    bed.start_serve(&["--no-workers"]).await?;
    let ids: Vec<(String, i64)> = seed
        .ok
        .iter()
        .map(|(i, id)| (id.clone(), ordinary(*i)))
        .collect();
    let accepted = refund_all(&api, args.concurrency, ids).await?;
    println!("stall.queued_refunds={accepted}");
    bed.stop_serve().await;

    bed.start_channel(args.hang_submit_ms).await?;
    let sampler = Sampler::start(bed.channel_db());
    let t0 = Instant::now();
    let stall_start_ms = now_ms();
    bed.start_serve(&serve_flags).await?;
    let window = Duration::from_secs(args.window_secs);
    let load = stalled_creates(api.clone(), args.concurrency, window);
    let probe = async {
        tokio::time::sleep(window / 2).await;
        let base = bed.base();
        (
            metric(&base, "converge_lane_running_jobs", "lane=\"forward\"").await,
            metric(&base, "converge_lane_slots_in_use", "lane=\"forward\"").await,
            metric(&base, "converge_lane_slots_in_use", "lane=\"compensation\"").await,
        )
    };
    let (creates, (running, fwd_slots, comp_slots)) = tokio::join!(load, probe);
    let end = t0.elapsed().as_secs_f64();
    let stall_end_ms = now_ms();
    let samples = sampler.finish().await;
    bed.stop_serve().await;
    let show = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
    println!("stall.mid.forward_running_jobs={}", show(running));
    println!("stall.mid.forward_slots_in_use={}", show(fwd_slots));
    println!("stall.mid.compensation_slots_in_use={}", show(comp_slots));
    println!("stall.creates={}", creates.len());
    println!("stall.creates_p50_ms={}", ms(percentile(&creates, 0.5)));
    let charges = channel_charges(&bed.channel_db()).await?;
    println!("stall.channel.charges_after_stall={charges}");
    let (rate, secs, n) = rate_between(&samples, 0.0, end);
    println!("stall.refunds_per_s_whole_window={rate:.1} ({n} in {secs:.1} s)");
    // While the queue still held refunds: from the first refund at the channel to the last.
    let first = samples.iter().find(|s| s.1 + s.2 > 0).map_or(0.0, |s| s.0);
    let last = samples.iter().find(|s| s.1 + s.2 >= n).map_or(end, |s| s.0);
    let (rate, secs, n) = rate_between(&samples, first, last);
    println!("stall.refunds_per_s_while_queued={rate:.1} ({n} in {secs:.1} s)");
    let per_sec: Vec<String> = samples
        .windows(2)
        .map(|w| format!("{}", (w[1].1 + w[1].2) - (w[0].1 + w[0].2)))
        .collect();
    println!("stall.refunds_per_second={}", per_sec.join(","));
    println!("stall.configured_per_s={}", args.compensation_rate);
    stall_webhooks(&bed.db_url, &endpoint, stall_start_ms, stall_end_ms).await
}

/// Polls `sql` (a count) every second until it is 0. Errors: still above 0 after `limit`.
async fn wait_for(db_url: &str, sql: &str, limit: Duration) -> Result<()> {
    let t = Instant::now();
    loop {
        let left = int_one(db_url, sql).await?;
        if left == 0 {
            return Ok(());
        }
        if t.elapsed() > limit {
            bail!("{left} left after {} s: {sql}", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Milliseconds since the epoch (UTC).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Creates payments with `concurrency` clients until `window` ends (each hangs as long as the
/// channel does); their answers do not matter, only that the forward path is kept stalled.
/// Returns each create's latency, sorted.
async fn stalled_creates(api: Api, concurrency: usize, window: Duration) -> Vec<Duration> {
    let deadline = Instant::now() + window;
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (api, next) = (api.clone(), next.clone());
        set.spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                let _ = api.create(&format!("stalled-{i}"), ordinary(i)).await;
                lat.push(t.elapsed());
            }
            lat
        });
    }
    let mut all = Vec::new();
    while let Some(r) = set.join_next().await {
        all.extend(r.unwrap_or_default());
    }
    all.sort_unstable();
    all
}

/// Charges the channel holds (nothing is committed while every charge hangs).
async fn channel_charges(channel_db: &Path) -> Result<i64> {
    int_one(
        &channel_db.to_string_lossy(),
        "SELECT COUNT(*) FROM sandbox_charges",
    )
    .await
}

/// Deliveries recorded during the stall: how many, and their latency from the event's commit.
async fn stall_webhooks(db_url: &str, endpoint: &str, from: i64, to: i64) -> Result<()> {
    let rows = db::int_rows(
        db_url,
        &format!(
            "SELECT d.delivered_at - e.created_at FROM webhook_deliveries d \
             JOIN events e ON e.id = d.event_id WHERE d.endpoint_id = '{endpoint}' \
             AND d.status = 'succeeded' AND d.delivered_at BETWEEN {from} AND {to}"
        ),
    )
    .await?;
    let mut lat: Vec<Duration> = rows
        .iter()
        .map(|r| Duration::from_millis(r[0].max(0) as u64))
        .collect();
    lat.sort_unstable();
    let secs = (to - from) as f64 / 1000.0;
    println!("stall.webhooks.delivered={}", lat.len());
    println!(
        "stall.webhooks.per_s={:.1}",
        lat.len() as f64 / secs.max(1e-9)
    );
    println!("stall.webhooks.p50_ms={}", ms(percentile(&lat, 0.5)));
    println!("stall.webhooks.p99_ms={}", ms(percentile(&lat, 0.99)));
    Ok(())
}
