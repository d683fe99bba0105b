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
    #[arg(long, env = "CONVERGE_SIM_SEEDS")]
    seeds: Option<u64>,
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
    let n = args.seeds.unwrap_or(0);
    let started = std::time::Instant::now();
    let (mut payments, mut sim_ms) = (0u64, 0i64);
    for seed in args.base..args.base.saturating_add(n) {
        let run = one(seed, &cfg).await?;
        check(&run, &args)?;
        println!("{} sha256 {}", summary(&run), run.trace_hash());
        payments += run.payments;
        sim_ms += run.simulated_ms;
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
    tokio::task::spawn_blocking(move || converge_sim::run_seed(seed, &cfg))
        .await?
        .map_err(anyhow::Error::msg)
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
