//! The simulator's one source of randomness: SplitMix64 (Steele, Lea and Flood, "Fast
//! splittable pseudorandom number generators", 2014), written here so that a seed's run
//! depends on no crate's generator: the same seed draws the same numbers on every build.

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0). The modulo bias is below 2^-40 for the small
    /// `n` the simulator draws, and the same on every run, which is what matters here.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        let span = u64::try_from(hi.saturating_sub(lo)).unwrap_or(0);
        lo.saturating_add(i64::try_from(self.below(span.saturating_add(1))).unwrap_or(0))
    }

    /// True with probability `per_mille`/1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// A child generator for another actor, so one actor's draws do not shift another's.
    pub fn fork(&mut self) -> Rng {
        Rng(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_gives_the_reference_sequence() {
        // The first outputs for seed 0 (the reference implementation's, also Java's
        // SplittableRandom): the generator is the published one, not a look-alike.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut r = Rng::new(9);
        for _ in 0..1000 {
            assert!((3..=5).contains(&r.between(3, 5)));
            assert!(r.below(7) < 7);
        }
    }
}
