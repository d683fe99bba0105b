//! The compensation queue's vocabulary (DESIGN.md "Compensation queue"): what a job does and
//! where it is in its life. Plain data; the queue itself is in `store::queue` and `worker`.

use serde::Serialize;

/// Kinds of compensation jobs (DESIGN.md "Compensation queue").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// Send the charge.
    Submit,
    /// Ask the channel what happened.
    Query,
    /// Post the charge's ledger batch.
    PostLedger,
    /// Send a refund.
    Refund,
    /// Deliver one webhook (payload: the delivery id).
    Webhook,
    /// Import a statement.
    Reconcile,
    /// Finish an ops reversal whose payment is reserved (`payments.reversal_id`): refund at the
    /// channel under the action id and record REVERSED, if the executing request died first.
    Reverse,
    /// Settle a CAPTURING payment's capture: query the hold, then apply what it shows or
    /// send the capture again under its own capture key (issue 34).
    Capture,
    /// Void a hold at the channel: a VOIDING payment's, or an expired one's release.
    VoidHold,
    /// End an AUTHORIZED payment's hold at its expiry (EXPIRED, or SUCCESS when a part was
    /// captured).
    ExpireHold,
}

impl JobKind {
    /// Every kind, for gauges that must report zero for an empty kind.
    pub const ALL: [JobKind; 10] = [
        JobKind::Submit,
        JobKind::Query,
        JobKind::PostLedger,
        JobKind::Refund,
        JobKind::Webhook,
        JobKind::Reconcile,
        JobKind::Reverse,
        JobKind::Capture,
        JobKind::VoidHold,
        JobKind::ExpireHold,
    ];

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Submit => "submit",
            JobKind::Query => "query",
            JobKind::PostLedger => "post_ledger",
            JobKind::Refund => "refund",
            JobKind::Webhook => "webhook",
            JobKind::Reconcile => "reconcile",
            JobKind::Reverse => "reverse",
            JobKind::Capture => "capture",
            JobKind::VoidHold => "void_hold",
            JobKind::ExpireHold => "expire_hold",
        }
    }
}

/// Where a job is in its life: defined with its names in the wire crate, which the console
/// shares (`converge_wire::lifecycle`).
pub use converge_wire::JobStatus;

impl JobKind {
    /// The kind stored as `name`, if any.
    pub fn parse(name: &str) -> Option<JobKind> {
        JobKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_round_trip() {
        for k in JobKind::ALL {
            assert_eq!(JobKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(JobKind::parse("nope"), None);
    }
}
