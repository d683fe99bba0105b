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
    /// 1. An UNKNOWN charge (timeout, 5xx, dropped answer) decided FAILED, as a decline.
    UnknownChargeFailed,
    /// 2. A payment not found at the channel failed without fencing its key first (the
    /// cancel skipped), so a request still on its way can charge it after.
    FailedWithoutFence,
}

impl Bug {
    fn bit(self) -> u32 {
        match self {
            Bug::UnknownChargeFailed => 1,
            Bug::FailedWithoutFence => 2,
        }
    }
}

thread_local! {
    static ON: Cell<u32> = const { Cell::new(0) };
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
