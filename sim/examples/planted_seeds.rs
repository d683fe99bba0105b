//! Which seeds find a planted bug (BENCHMARKS.md "Deterministic simulator"): runs seeds
//! 1..=N with the bug on and prints, per seed, the violation (step, actor, invariant) or
//! `passes`, then how many found it.
//!
//! `cargo run -p converge-sim --features planted-bugs --example planted_seeds -- BUG [N] [PAYMENTS]`
//! with BUG 1-7 (`converge_server::planted::Bug`, in its order) or `none`; N 20 and
//! PAYMENTS 60 by default (the test command's budget).

use converge_sim::{Config, run_seed};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bug = args.get(1).cloned().unwrap_or_else(|| "none".into());
    let seeds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let payments: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(60);
    #[allow(unused_mut)]
    let mut cfg = Config {
        payments,
        ..Config::default()
    };
    #[cfg(feature = "planted-bugs")]
    {
        let n = bug
            .parse()
            .ok()
            .and_then(converge_server::planted::Bug::numbered);
        cfg.planted = n.into_iter().collect();
    }
    let mut found = 0;
    for seed in 1..=seeds {
        let started = std::time::Instant::now();
        let run = match run_seed(seed, &cfg) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("seed {seed}: {e}");
                std::process::exit(2);
            }
        };
        let what = match &run.violation {
            Some(v) => {
                found += 1;
                format!(
                    "step {} ({}): {}: {}",
                    v.step, v.actor, v.invariant, v.detail
                )
            }
            None => "passes".into(),
        };
        let secs = started.elapsed().as_secs_f64();
        println!("seed {seed} ({} steps, {secs:.1} s): {what}", run.steps);
    }
    println!("bug {bug}: found by {found} of seeds 1-{seeds} ({payments} payments each)");
}
