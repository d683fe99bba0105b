//! The emergency switch's pauses (issue 17 "Emergency switch") as `/ops/v1/pauses` and the
//! console's pauses page and banner receive them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Job kinds that may be paused on their own (`job:<kind>` targets), by stored name: every
/// kind of the compensation queue but `submit`, whose pause is the `submissions` target (it
/// also stops the request path). The server checks a requested target against this list and
/// the console offers it.
pub const PAUSABLE_JOB_KINDS: [&str; 6] = [
    "query",
    "post_ledger",
    "refund",
    "webhook",
    "reconcile",
    "reverse",
];

/// Longest webhook endpoint id accepted in a target, in characters.
const MAX_ENDPOINT_ID: usize = 64;

/// What a pause stops.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PauseTarget {
    /// Submissions to the channel: new payments are accepted and held as PENDING; nothing is
    /// sent (no charge of a PENDING or PROCESSING payment).
    Submissions,
    /// One job kind (a name from [`PAUSABLE_JOB_KINDS`]): the queue does not lease it.
    JobKind(String),
    /// Webhook deliveries to one endpoint (its id): held pending, not attempted.
    Endpoint(String),
}

impl PauseTarget {
    /// The stored and displayed form: `submissions`, `job:<kind>` or `endpoint:<id>`.
    pub fn as_string(&self) -> String {
        match self {
            PauseTarget::Submissions => "submissions".into(),
            PauseTarget::JobKind(k) => format!("job:{k}"),
            PauseTarget::Endpoint(id) => format!("endpoint:{id}"),
        }
    }
}

impl fmt::Display for PauseTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_string())
    }
}

impl FromStr for PauseTarget {
    type Err = String;
    /// Parses `submissions`, `job:<kind>` (a pausable kind) or `endpoint:<id>` (letters,
    /// digits, `_` and `-`, at most 64). Errors say what is accepted.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "submissions" {
            return Ok(PauseTarget::Submissions);
        }
        if let Some(kind) = s.strip_prefix("job:") {
            if kind == "submit" {
                return Err("pause submit jobs with the target `submissions`".into());
            }
            return PAUSABLE_JOB_KINDS
                .iter()
                .find(|k| **k == kind)
                .map(|k| PauseTarget::JobKind((*k).to_string()))
                .ok_or_else(|| {
                    format!(
                        "unknown job kind {kind:?}: use one of {}",
                        PAUSABLE_JOB_KINDS.join(", ")
                    )
                });
        }
        if let Some(id) = s.strip_prefix("endpoint:") {
            let ok = !id.is_empty()
                && id.chars().count() <= MAX_ENDPOINT_ID
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            return if ok {
                Ok(PauseTarget::Endpoint(id.to_string()))
            } else {
                Err(format!(
                    "endpoint id must be 1 to {MAX_ENDPOINT_ID} letters, digits, _ or -"
                ))
            };
        }
        Err("target must be `submissions`, `job:<kind>` or `endpoint:<id>`".into())
    }
}

/// A pause request and its fate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct PauseRecord {
    /// `pause_` + 24 hex.
    pub id: String,
    /// `submissions`, `job:<kind>` or `endpoint:<id>`.
    pub target: String,
    /// Why it was requested.
    pub reason: String,
    /// `pending`, `active`, `resumed`, `rejected` or `cancelled`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
    pub status: crate::PauseStatus,
    /// The operator who asked.
    pub requested_by: String,
    /// Epoch ms UTC.
    pub requested_at: i64,
    /// A pending request can be approved until then, epoch ms UTC.
    pub expires_at: i64,
    /// The approver (or rejecter).
    pub approved_by: Option<String>,
    /// When it was approved (in force since) or rejected, epoch ms UTC.
    pub approved_at: Option<i64>,
    /// The approver's reason.
    pub decision_reason: Option<String>,
    /// Who resumed (or cancelled) it.
    pub resumed_by: Option<String>,
    /// Epoch ms UTC.
    pub resumed_at: Option<i64>,
    /// Why it was resumed or cancelled.
    pub resume_reason: Option<String>,
    /// Who asked to end it before its minimum duration (an active pause whose early end
    /// awaits a different approver, issue 36); cleared when an approver rejects the end.
    pub end_requested_by: Option<String>,
    /// When the early end was asked for, epoch ms UTC.
    pub end_requested_at: Option<i64>,
    /// Why it should end early.
    pub end_reason: Option<String>,
    /// The early end can be approved until then, epoch ms UTC.
    pub end_expires_at: Option<i64>,
}

impl PauseRecord {
    /// The early end awaiting an approver at `now` (epoch ms): who asked, while the pause
    /// is active and the request unexpired.
    pub fn open_end_request(&self, now: i64) -> Option<&str> {
        match (&self.end_requested_by, self.end_expires_at) {
            (Some(by), Some(until)) if self.status == crate::PauseStatus::Active && until > now => {
                Some(by)
            }
            _ => None,
        }
    }
}

/// The console's pauses page: pending and active pauses first (oldest first), then the
/// latest that ended, with the server's clock for ages and expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseOverview {
    /// The pauses.
    pub items: Vec<PauseRecord>,
    /// The server's clock, epoch ms UTC.
    pub now: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print_back() {
        for t in ["submissions", "job:refund", "endpoint:we_0123abc"] {
            assert_eq!(t.parse::<PauseTarget>().unwrap().as_string(), t);
        }
        assert!(" submissions".parse::<PauseTarget>().is_err());
    }

    #[test]
    fn unknown_or_malformed_targets_are_refused_with_what_is_accepted() {
        assert!("everything".parse::<PauseTarget>().is_err());
        assert!("job:".parse::<PauseTarget>().is_err());
        assert!(
            "job:mine"
                .parse::<PauseTarget>()
                .unwrap_err()
                .contains("refund")
        );
        assert!(
            "job:submit"
                .parse::<PauseTarget>()
                .unwrap_err()
                .contains("submissions")
        );
        assert!("endpoint:".parse::<PauseTarget>().is_err());
        assert!("endpoint:we 1".parse::<PauseTarget>().is_err());
        assert!("endpoint:<script>".parse::<PauseTarget>().is_err());
        assert!(
            format!("endpoint:{}", "a".repeat(65))
                .parse::<PauseTarget>()
                .is_err()
        );
    }
}
