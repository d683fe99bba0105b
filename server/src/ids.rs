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

/// A new outbox event id: a UUIDv7 (RFC 9562 §5.7) of `now_ms` (the injected clock's time,
/// epoch ms UTC) and 74 random bits, hyphenated lower-case, as the event stream and the
/// `webhook-id` header carry it. The time comes from the caller, not the OS, so a
/// simulated run draws the same ids every time (issue 39).
pub fn new_event_id(now_ms: i64) -> String {
    let bytes: [u8; 10] = random_bytes();
    uuid::Builder::from_unix_timestamp_millis(u64::try_from(now_ms).unwrap_or(0), &bytes)
        .into_uuid()
        .to_string()
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
    fn an_event_id_is_a_uuid_v7_of_the_given_time() {
        let id = new_event_id(1_796_083_200_000);
        let u = uuid::Uuid::parse_str(&id).expect("a UUID");
        assert_eq!(u.get_version_num(), 7);
        let (secs, nanos) = u.get_timestamp().expect("v7 has a time").to_unix();
        assert_eq!((secs, nanos), (1_796_083_200, 0));
        assert_ne!(id, new_event_id(1_796_083_200_000));
    }

    #[test]
    fn a_seeded_thread_draws_the_same_ids_again() {
        let draw = || {
            std::thread::spawn(|| {
                seed_this_thread(Some(7));
                (new_id("pay"), new_token(), new_event_id(1))
            })
            .join()
            .expect("thread")
        };
        assert_eq!(draw(), draw());
        // Other threads are not seeded.
        assert_ne!(new_id("pay"), new_id("pay"));
    }
}
