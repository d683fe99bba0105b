//! Shared parts of the proof tools (issue "Proof: chaos convergence run, `converge verify`, and
//! benchmarks"): starting and killing real `converge` processes, throw-away databases, and
//! latency percentiles. The binaries are `chaos` (DESIGN.md "Convergence invariants" under
//! faults and SIGKILL), `load` (merchant API throughput), `drain` (compensation queue
//! throughput), `rawinsert` (the SQLite single-row insert baseline) and `bulkheads` (issue
//! 37: the refund storm, the noisy neighbour and the forward-path stall).

pub mod db;
pub mod procs;
pub mod stats;
