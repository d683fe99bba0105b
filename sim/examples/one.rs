//! Runs one seed and prints its trace (a developer's tool; `converge simulate` is the
//! user's): `cargo run -p converge-sim --example one -- SEED PAYMENTS`. With
//! `--features planted-bugs` and `SIM_PLANT=N`, planted bug N is on; `SIM_CHECK_EVERY=0`
//! checks only while settling.
fn main() {
    let seed: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let payments: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let mut cfg = converge_sim::Config {
        payments,
        ..Default::default()
    };
    #[cfg(feature = "planted-bugs")]
    if let Ok(n) = std::env::var("SIM_PLANT") {
        let bug = n
            .parse()
            .ok()
            .and_then(converge_server::planted::Bug::numbered);
        cfg.planted = bug.into_iter().collect();
    }
    // SIM_CHECK_EVERY=0: verify only while settling and at the end (where the time goes).
    if std::env::var("SIM_CHECK_EVERY").is_ok_and(|v| v == "0") {
        cfg.check_every_step = false;
    }
    let t = std::time::Instant::now();
    let r = converge_sim::run_seed(seed, &cfg).expect("the simulator starts");
    for l in &r.trace {
        println!("{l}");
    }
    eprintln!(
        "{:?} steps {} payments {} simulated_ms {} wall {:?} sha256 {}",
        r.violation,
        r.steps,
        r.payments,
        r.simulated_ms,
        t.elapsed(),
        r.trace_hash()
    );
}
