//! The emergency switch (issue 17 "Emergency switch"; seed 004 §8.4 紧急开关): what can be
//! paused, and how a pause request moves. An operator requests a pause, a different approver
//! approves it, and an operator resumes it in one step. While a pause is active nothing it
//! covers is lost: submissions stay PENDING, paused jobs stay due, paused deliveries stay
//! pending, and all of it proceeds on resume.

use std::fmt;
use std::str::FromStr;

/// Job kinds that may be paused on their own, by stored name: defined in `converge-wire`,
/// where the console reads it. `submit` is not among them: pausing submissions is the
/// [`PauseTarget::Submissions`] target, which also stops the request path.
pub use converge_wire::pauses::PAUSABLE_JOB_KINDS;

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

/// A pause request's status, as stored (`converge_wire::PauseStatus`).
pub use converge_wire::PauseStatus;

/// What is in force now: the set of active targets, as every process reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivePauses {
    targets: std::collections::BTreeSet<PauseTarget>,
}

impl ActivePauses {
    /// The active set from stored targets; an unparsable one is skipped (it cannot have
    /// been stored through the service).
    pub fn from_targets<'a>(targets: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            targets: targets.into_iter().filter_map(|t| t.parse().ok()).collect(),
        }
    }

    /// Whether submissions to the channel are paused.
    pub fn submissions(&self) -> bool {
        self.targets.contains(&PauseTarget::Submissions)
    }

    /// Job kinds the queue must not lease: the paused kinds, and `submit` while submissions
    /// are paused (so held payments burn no attempts).
    pub fn unleased_kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self
            .targets
            .iter()
            .filter_map(|t| match t {
                PauseTarget::JobKind(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        if self.submissions() {
            kinds.push("submit".into());
        }
        kinds
    }

    /// Whether jobs of `kind` (stored name) are paused on their own.
    pub fn job_kind(&self, kind: &str) -> bool {
        self.targets
            .iter()
            .any(|t| matches!(t, PauseTarget::JobKind(k) if k == kind))
    }

    /// Whether webhook deliveries to `endpoint_id` are paused.
    pub fn endpoint(&self, endpoint_id: &str) -> bool {
        self.targets
            .iter()
            .any(|t| matches!(t, PauseTarget::Endpoint(id) if id == endpoint_id))
    }

    /// Whether nothing is paused.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// The active targets, in order.
    pub fn targets(&self) -> impl Iterator<Item = &PauseTarget> {
        self.targets.iter()
    }
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

    #[test]
    fn paused_submissions_also_keep_submit_jobs_unleased() {
        let a = ActivePauses::from_targets(["submissions", "job:refund", "endpoint:we_1"]);
        assert!(a.submissions());
        assert_eq!(
            a.unleased_kinds(),
            vec!["refund".to_string(), "submit".into()]
        );
        assert!(a.endpoint("we_1"));
        assert!(a.job_kind("refund") && !a.job_kind("query"));
        assert!(!a.endpoint("we_2"));
        let none = ActivePauses::from_targets(["bogus"]);
        assert!(none.is_empty() && !none.submissions() && none.unleased_kinds().is_empty());
    }
}
