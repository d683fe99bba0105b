//! The proof that the simulator finds what matters (issue 39): with a planted bug switched
//! on, a seed within the test command's budget breaks an invariant, and the same seeds pass
//! without it. Built only by `cargo test -p converge-sim --features planted-bugs`.
#![cfg(feature = "planted-bugs")]

use converge_server::planted::Bug;
use converge_sim::{Config, run_seed};

/// Seeds tried per planted bug: the test command's budget.
const BUDGET: u64 = 20;
/// Payments per seed.
const PAYMENTS: u64 = 60;

/// The first seed in `1..=BUDGET` whose run with `bug` planted breaks an invariant, with the
/// invariant's name.
fn first_catch(bug: Bug) -> Option<(u64, String)> {
    (1..=BUDGET).find_map(|seed| {
        let cfg = Config {
            payments: PAYMENTS,
            planted: vec![bug],
            ..Config::default()
        };
        let run = run_seed(seed, &cfg).expect("the simulator starts");
        run.violation.map(|v| (seed, v.invariant))
    })
}

#[test]
fn an_unknown_charge_decided_failed_is_found_as_a_charge_on_a_failed_payment() {
    let (seed, invariant) =
        first_catch(Bug::UnknownChargeFailed).expect("found within the seed budget");
    assert_eq!(invariant, "1. channel charges", "seed {seed}");
    // Without the bug, the seed that found it passes.
    let clean = run_seed(
        seed,
        &Config {
            payments: PAYMENTS,
            ..Config::default()
        },
    )
    .expect("the simulator starts");
    assert_eq!(clean.violation, None, "seed {seed} without the planted bug");
    println!("planted bug 1 (UnknownChargeFailed) found by seed {seed} of {BUDGET}");
}
