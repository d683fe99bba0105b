//! The proof that the simulator finds what matters (issue 39): with a planted bug switched
//! on, a seed within the test command's budget breaks an invariant, and the same seeds pass
//! without it. Built only by `cargo test -p converge-sim --features planted-bugs`.
#![cfg(feature = "planted-bugs")]

use converge_server::planted::Bug;
use converge_sim::{Config, run_seed};

/// Seeds tried per planted bug: the test command's budget (a bug found early costs only the
/// seeds up to its first; bugs 3 and 6 need rarer interleavings, so the budget has room).
const BUDGET: u64 = 40;
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

/// `bug` is found within the budget, as a breach of `invariant`, and the seed that found it
/// passes without it.
fn found(bug: Bug, invariant: &str) {
    found_as(bug, &[invariant]);
}

/// [`found`], as a breach of one of `invariants` (a bug whose damage takes several forms).
fn found_as(bug: Bug, invariants: &[&str]) {
    let (seed, seen) = first_catch(bug).expect("found within the seed budget");
    assert!(
        invariants.contains(&seen.as_str()),
        "{bug:?}, seed {seed}: {seen}"
    );
    let clean = run_seed(
        seed,
        &Config {
            payments: PAYMENTS,
            ..Config::default()
        },
    )
    .expect("the simulator starts");
    assert_eq!(clean.violation, None, "seed {seed} without the planted bug");
    println!("planted {bug:?} found by seed {seed} of {BUDGET}");
}

#[test]
fn an_unknown_charge_decided_failed_is_found_as_a_charge_on_a_failed_payment() {
    found(Bug::UnknownChargeFailed, "1. channel charges");
}

#[test]
fn a_payment_failed_without_its_fence_is_found_when_a_late_request_charges_it() {
    found(Bug::FailedWithoutFence, "1. channel charges");
}

#[test]
fn a_transition_without_its_version_condition_is_found_when_a_held_create_overwrites_the_worker() {
    // A stale transition written over a newer one undoes what the newer one wrote with it:
    // its ledger batch, its hold, or (closing the payment's jobs) its event's delivery job.
    found_as(
        Bug::TransitionWithoutVersion,
        &["2. ledger", "6. events and deliveries", "7. holds"],
    );
}

#[test]
fn a_refund_that_reserves_nothing_is_found_as_refunds_above_the_reservation() {
    found(Bug::RefundWithoutReserve, "2. ledger");
}

#[test]
fn an_answer_stored_after_its_key_completed_is_found_when_the_process_dies_between() {
    found(Bug::AnswerAfterCommit, "3. stored responses");
}

#[test]
fn an_outcome_event_written_after_its_transition_commits_is_found_when_the_process_dies_between() {
    found(Bug::EventOutsideTransition, "6. events and deliveries");
}

#[test]
fn a_job_result_written_without_its_lease_token_is_found_when_a_lapsed_worker_wakes() {
    found(
        Bug::ResultWithoutLease,
        "lease: a lapsed holder's result is refused",
    );
}
