//! `converge simulate` (issue 39; README "Deterministic simulation"): runs seeds of the
//! deterministic simulator ([`converge_sim`]) and reports each run's trace hash, or the first
//! violation with the command that replays it.

use anyhow::{Result, bail};
use clap::Args;
use converge_sim::{Config, Run};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["seed", "seeds"])))]
pub(super) struct SimulateArgs {
    /// Run this one seed; its trace's SHA-256 is printed last.
    #[arg(long, env = "CONVERGE_SIM_SEED")]
    seed: Option<u64>,
    /// Run this many seeds, from --base on; stops at the first violation, naming its seed.
    #[arg(long, env = "CONVERGE_SIM_SEEDS",
        value_parser = clap::value_parser!(u64).range(1..))]
    seeds: Option<u64>,
    /// Seeds run at once by --seeds, each on a CPU of its own (default: every CPU this
    /// process may use).
    #[arg(long, env = "CONVERGE_SIM_THREADS",
        value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: Option<u64>,
    /// The first seed of --seeds.
    #[arg(long, env = "CONVERGE_SIM_BASE", default_value_t = 1)]
    base: u64,
    /// Payments the merchants create in each seed before the world settles.
    #[arg(long, env = "CONVERGE_SIM_PAYMENTS", default_value_t = Config::default().payments,
        value_parser = clap::value_parser!(u64).range(1..=100_000))]
    payments: u64,
    /// Print the whole trace of --seed (one line per step, the channel's calls under it).
    #[arg(long, env = "CONVERGE_SIM_TRACE")]
    trace: bool,
}

/// Runs `converge simulate`: one seed (`--seed`, trace hash last) or many (`--seeds`). A
/// violation is an error naming the seed, the step, the actor and the invariant, after the
/// trace's last lines, with the command that replays it.
pub(super) async fn run(args: SimulateArgs) -> Result<()> {
    let cfg = Config {
        payments: args.payments,
        ..Config::default()
    };
    if let Some(seed) = args.seed {
        let run = one(seed, &cfg).await?;
        if args.trace {
            for l in &run.trace {
                println!("{l}");
            }
        }
        check(&run, &args)?;
        println!("{}", summary(&run));
        println!("trace sha256 {}", run.trace_hash());
        return Ok(());
    }
    let n = args.seeds.unwrap_or(1);
    let started = std::time::Instant::now();
    let (bad, payments, sim_ms) = many(args.base, n, args.threads, &cfg).await?;
    if let Some(run) = bad {
        check(&run, &args)?;
    }
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    println!(
        "{n} seeds passed ({}..={}): {payments} payments, {:.1} simulated hours in {wall:.1} s ({:.0} payments/s, {:.0} simulated hours per wall minute)",
        args.base,
        args.base.saturating_add(n).saturating_sub(1),
        sim_ms as f64 / 3.6e6,
        payments as f64 / wall,
        sim_ms as f64 / 3.6e6 / (wall / 60.0)
    );
    Ok(())
}

async fn one(seed: u64, cfg: &Config) -> Result<Run> {
    let cfg = cfg.clone();
    let cpu = converge_sim::usable_cpus().first().copied();
    tokio::task::spawn_blocking(move || converge_sim::run_seed_on(seed, &cfg, cpu))
        .await?
        .map_err(anyhow::Error::msg)
}

/// Seeds `base..base + n` on `threads` runners (each kept on a CPU of its own); each passing
/// run's line is printed in seed order as soon as the seeds before it are done. After a
/// violation no new seed starts; the lowest seed that broke an invariant is returned (the
/// runs after it are not reported), with the passing runs' payments and simulated ms.
async fn many(
    base: u64,
    n: u64,
    threads: Option<u64>,
    cfg: &Config,
) -> Result<(Option<Run>, u64, i64)> {
    let cpus = converge_sim::usable_cpus();
    let threads = threads.unwrap_or(cpus.len().max(1) as u64).min(n).max(1);
    let cfg = cfg.clone();
    tokio::task::spawn_blocking(move || {
        let next = std::sync::atomic::AtomicU64::new(base);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let end = base.saturating_add(n);
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            let runners: Vec<_> = (0..threads as usize)
                .map(|i| {
                    let (next, stop, cfg, tx) = (&next, &stop, &cfg, tx.clone());
                    let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
                    scope.spawn(move || runner(next, stop, end, cfg, cpu, tx))
                })
                .collect();
            drop(tx);
            // Runs arrive in any order: each is held until the seeds before it are in.
            let mut waiting = std::collections::BTreeMap::new();
            let (mut due, mut payments, mut sim_ms) = (base, 0u64, 0i64);
            for run in rx {
                waiting.insert(run.seed, run);
                while let Some(run) = waiting.remove(&due) {
                    if run.violation.is_some() {
                        stop.store(true, std::sync::atomic::Ordering::SeqCst);
                        drop(waiting);
                        return finish(runners, Some(run)).map(|b| (b, payments, sim_ms));
                    }
                    println!("{} sha256 {}", summary(&run), run.trace_hash());
                    (payments, sim_ms) = (payments + run.payments, sim_ms + run.simulated_ms);
                    due += 1;
                }
            }
            finish(runners, None).map(|b| (b, payments, sim_ms))
        })
    })
    .await?
}

/// Joins the runners; the first runner's error (the simulator could not start) wins over
/// `bad`.
fn finish(
    runners: Vec<std::thread::ScopedJoinHandle<'_, Result<()>>>,
    bad: Option<Run>,
) -> Result<Option<Run>> {
    for r in runners {
        r.join()
            .map_err(|_| anyhow::anyhow!("a runner panicked"))??;
    }
    Ok(bad)
}

/// One runner of [`many`]: takes the next seed until none is left or a violation was seen,
/// and sends each run.
fn runner(
    next: &std::sync::atomic::AtomicU64,
    stop: &std::sync::atomic::AtomicBool,
    end: u64,
    cfg: &Config,
    cpu: Option<usize>,
    runs: std::sync::mpsc::Sender<Run>,
) -> Result<()> {
    use std::sync::atomic::Ordering;
    while !stop.load(Ordering::SeqCst) {
        let seed = next.fetch_add(1, Ordering::SeqCst);
        if seed >= end {
            break;
        }
        let run = converge_sim::run_seed_on(seed, cfg, cpu).map_err(anyhow::Error::msg)?;
        if run.violation.is_some() {
            stop.store(true, Ordering::SeqCst);
        }
        if runs.send(run).is_err() {
            break; // the collector stopped at an earlier violation
        }
    }
    Ok(())
}

fn summary(run: &Run) -> String {
    format!(
        "seed {}: {} steps, {} payments, {:.1} simulated hours, converged",
        run.seed,
        run.steps,
        run.payments,
        run.simulated_ms as f64 / 3.6e6
    )
}

/// A violation: the trace's last lines on stderr, then the error (one line).
fn check(run: &Run, args: &SimulateArgs) -> Result<()> {
    let Some(v) = &run.violation else {
        return Ok(());
    };
    if !args.trace || args.seed.is_none() {
        let from = run.trace.len().saturating_sub(40);
        for l in &run.trace[from..] {
            eprintln!("{l}");
        }
    }
    bail!(
        "{v}; trace sha256 {}; replay: converge simulate --seed {} --payments {} --trace",
        run.trace_hash(),
        v.seed,
        args.payments
    )
}
