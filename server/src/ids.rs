//! Identifiers: `pay_`/`re_`/`ck_` + 24 lowercase hex characters (96 random bits), and
//! opaque tokens for leases.
//!
//! Below the store (which makes lease tokens) and the services alike; not in the domain,
//! which takes no randomness from the process.
//!
//! The one place ids and tokens draw their randomness, so it is the one seam the
//! deterministic simulator (`sim/`, issue 39) needs for them: [`seed_this_thread`] makes
//! every id drawn on the calling thread come from a seeded generator instead of the OS.
//! The simulator runs converge on one thread (a current-thread runtime), so a seed gives
//! the same ids, and so the same row order wherever rows sort by id, on every run.

use std::cell::RefCell;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

thread_local! {
    /// The seeded generator of this thread, when [`seed_this_thread`] set one.
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// From now on, ids and tokens drawn on this thread come from a generator seeded with
/// `seed` (Some), or from the OS again (None). Only the simulator calls it; a serving process
/// never does. Determinism holds for one build: `StdRng`'s algorithm is the locked `rand`'s.
pub fn seed_this_thread(seed: Option<u64>) {
    SEEDED.with(|s| *s.borrow_mut() = seed.map(StdRng::seed_from_u64));
}

/// `N` random bytes: from this thread's seeded generator if it has one, else from the OS.
fn random_bytes<const N: usize>() -> [u8; N] {
    SEEDED.with(|s| match s.borrow_mut().as_mut() {
        Some(rng) => rng.random(),
        None => rand::rng().random(),
    })
}

/// A new id with `prefix` and 96 random bits in hex, e.g. `pay_3f2a...`.
pub fn new_id(prefix: &str) -> String {
    let bytes: [u8; 12] = random_bytes();
    format!("{prefix}_{}", hex::encode(bytes))
}

/// A lease token: 128 random bits in hex.
pub fn new_token() -> String {
    let bytes: [u8; 16] = random_bytes();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_prefix_and_24_hex() {
        let id = new_id("pay");
        assert!(id.starts_with("pay_"));
        assert_eq!(id.len(), 28);
        assert_ne!(id, new_id("pay"));
    }

    #[test]
    fn a_seeded_thread_draws_the_same_ids_again() {
        let draw = || {
            std::thread::spawn(|| {
                seed_this_thread(Some(7));
                (new_id("pay"), new_token())
            })
            .join()
            .expect("thread")
        };
        assert_eq!(draw(), draw());
        // Other threads are not seeded.
        assert_ne!(new_id("pay"), new_id("pay"));
    }
}
