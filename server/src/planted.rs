//! Planted bugs (issue 39): real mistakes a payment engineer could make, compiled only with
//! the `planted-bugs` feature, which only the simulator's own test run enables
//! (`cargo test -p converge-sim --features planted-bugs`, a line of its own in
//! `scripts/test.sh`). No build of the server, the binary or `cargo test --workspace` has
//! this module. Each bug is off until a thread switches it on ([`plant`]); the simulator
//! runs converge on one thread, so a planted bug stays in the run that asked for it.

use std::cell::Cell;

/// A planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// Bug 1: An UNKNOWN charge (timeout, 5xx, dropped answer) decided FAILED, as a decline.
    UnknownChargeFailed,
    /// Bug 2: A payment not found at the channel failed without fencing its key first (the
    /// cancel skipped), so a request still on its way can charge it after.
    FailedWithoutFence,
    /// Bug 3: A transition's UPDATE written without its version condition (nor the status
    /// read with it): the last writer wins, so a writer holding an old read (a create whose
    /// charge answer is recorded after the worker's own submit moved the payment on)
    /// overwrites the newer state.
    TransitionWithoutVersion,
    /// Bug 4: A refund inserted and sent to the channel without reserving its amount on the
    /// payment (what remains is checked by a read, nothing is held), so nothing stops a
    /// reversal or a second refund from counting the same money.
    RefundWithoutReserve,
    /// Bug 5: A completed Idempotency-Key whose stored answer is written after the commit that
    /// completes it, in a transaction of its own: a crash between leaves a completed key
    /// with no answer to replay.
    AnswerAfterCommit,
    /// Bug 6: A transition's outbox event written after its commit, in a transaction of its
    /// own: a crash between leaves an outcome nobody is told of.
    EventOutsideTransition,
    /// Bug 7: A lease honoured after it lapsed: a job's result written without checking the
    /// lease token, so a worker that lost its lease overwrites the new holder's job.
    ResultWithoutLease,
}

impl Bug {
    /// Every planted bug, in its number's order (bug N is `ALL[N - 1]`).
    pub const ALL: [Bug; 7] = [
        Bug::UnknownChargeFailed,
        Bug::FailedWithoutFence,
        Bug::TransitionWithoutVersion,
        Bug::RefundWithoutReserve,
        Bug::AnswerAfterCommit,
        Bug::EventOutsideTransition,
        Bug::ResultWithoutLease,
    ];

    /// Bug `n` (1 to 7), as the README and BENCHMARKS.md number them.
    pub fn numbered(n: usize) -> Option<Bug> {
        Self::ALL.get(n.checked_sub(1)?).copied()
    }

    fn bit(self) -> u32 {
        match self {
            Bug::UnknownChargeFailed => 1,
            Bug::FailedWithoutFence => 2,
            Bug::TransitionWithoutVersion => 4,
            Bug::RefundWithoutReserve => 8,
            Bug::AnswerAfterCommit => 16,
            Bug::EventOutsideTransition => 32,
            Bug::ResultWithoutLease => 64,
        }
    }
}

thread_local! {
    static ON: Cell<u32> = const { Cell::new(0) };
    static DEFERRED: Cell<bool> = const { Cell::new(false) };
}

/// Bug 6: the payment transition being written leaves its outcome event for after its
/// commit (set around each step of `apply_transitions`; callbacks and creates still write
/// theirs inside).
pub fn defer_events(on: bool) {
    DEFERRED.with(|d| d.set(on));
}

/// Bug 6: whether the step being written leaves its event for after the commit.
pub fn events_deferred() -> bool {
    DEFERRED.with(Cell::get)
}

/// Switches `bug` on (or off) for the calling thread.
pub fn plant(bug: Bug, on: bool) {
    ON.with(|b| {
        let bits = if on {
            b.get() | bug.bit()
        } else {
            b.get() & !bug.bit()
        };
        b.set(bits);
    });
}

/// Whether `bug` is on for the calling thread.
pub fn on(bug: Bug) -> bool {
    ON.with(|b| b.get() & bug.bit() != 0)
}
