//! converge's deterministic simulator (issue 39; README "Deterministic simulation").
//!
//! One seed runs converge's own use cases ([`Core`](converge_server::service::Core)), job
//! handlers ([`Worker`](converge_server::worker::Worker)) and SQLite store (in memory, the
//! shipping migrations) on one thread, with a clock only the simulator moves and a channel
//! ([`channel::SimChannel`]) and merchants' webhook endpoints ([`endpoints::SimEndpoints`])
//! whose answers and faults come from the seed. Each step a seeded
//! scheduler picks an actor ([`world`]); after each step the invariants `converge verify`
//! states are checked with verify's own code ([`converge_server::verify::run`]), plus the
//! simulator's own observations (a replay is byte-identical to the first answer, a reused key
//! is refused). At the end the world is left to settle ([`world::World::settle`]) and must
//! converge. Every step writes a trace line; the trace's SHA-256 is the run's fingerprint: the
//! same seed and commit give the same hash.

pub mod channel;
pub mod endpoints;
pub mod rng;
pub mod world;

use sha2::{Digest, Sha256};

pub use world::{Config, Violation};

/// What a seed's run gave.
#[derive(Debug, Clone)]
pub struct Run {
    /// The seed.
    pub seed: u64,
    /// Steps taken (the settling phase's included).
    pub steps: u64,
    /// Payments the merchants created.
    pub payments: u64,
    /// Simulated time that passed, ms.
    pub simulated_ms: i64,
    /// The trace, one line per step (and one per channel call under it).
    pub trace: Vec<String>,
    /// The first violation, if any (the trace ends at it).
    pub violation: Option<Violation>,
}

impl Run {
    /// SHA-256 of the trace (its lines joined by `\n`), hex.
    pub fn trace_hash(&self) -> String {
        trace_hash(&self.trace)
    }
}

/// SHA-256 of `lines` joined by `\n`, hex.
pub fn trace_hash(lines: &[String]) -> String {
    let mut h = Sha256::new();
    for l in lines {
        h.update(l.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// Runs `seed` with `cfg` on a thread of its own (a current-thread runtime: one order of
/// events per seed; ids drawn on that thread come from the seed). Errors: the simulator could
/// not start (the in-memory database did not open), not a violation.
pub fn run_seed(seed: u64, cfg: &Config) -> Result<Run, String> {
    run_seed_on(seed, cfg, None)
}

/// [`run_seed`] with the seed's thread (and the SQLite connection's thread it starts, which
/// inherits the mask) kept on CPU `cpu`: every query is a hand-over between those two
/// threads, and on one core it costs half what it costs across two (BENCHMARKS.md). A CPU
/// the process may not use is ignored (the seed runs unpinned); the trace is the same either
/// way.
pub fn run_seed_on(seed: u64, cfg: &Config, cpu: Option<usize>) -> Result<Run, String> {
    let cfg = cfg.clone();
    std::thread::Builder::new()
        .name(format!("sim-{seed}"))
        .spawn(move || {
            if let Some(cpu) = cpu {
                pin_this_thread(cpu);
            }
            converge_server::ids::seed_this_thread(Some(seed));
            // converge's warnings (a lease lost, a callback ignored) are the faults the seed
            // throws, not news: this thread logs nothing.
            let _quiet =
                tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
            #[cfg(feature = "planted-bugs")]
            for bug in &cfg.planted {
                converge_server::planted::plant(*bug, true);
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("runtime: {e}"))?;
            rt.block_on(world::run(seed, &cfg))
        })
        .map_err(|e| format!("thread: {e}"))?
        .join()
        .map_err(|_| format!("seed {seed}: the simulator panicked"))?
}

/// The CPUs this process may run on, in order (empty when the mask cannot be read).
pub fn usable_cpus() -> Vec<usize> {
    use nix::sched::{CpuSet, sched_getaffinity};
    use nix::unistd::Pid;
    let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..CpuSet::count())
        .filter(|c| set.is_set(*c).unwrap_or(false))
        .collect()
}

/// Keeps the calling thread on `cpu`; a failure (a CPU outside the process's mask) leaves it
/// where it was.
fn pin_this_thread(cpu: usize) {
    use nix::sched::{CpuSet, sched_setaffinity};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = sched_setaffinity(Pid::from_raw(0), &set);
    }
}
