//! The emergency switch (issue 17 "Emergency switch"; seed 004 §8.4 紧急开关): what can be
//! paused, and how a pause request moves. An operator requests a pause, a different approver
//! approves it, and an operator resumes it in one step. While a pause is active nothing it
//! covers is lost: submissions stay PENDING, paused jobs stay due, paused deliveries stay
//! pending, and all of it proceeds on resume.

/// Job kinds that may be paused on their own, by stored name: defined in `converge-wire`,
/// where the console reads it. `submit` is not among them: pausing submissions is the
/// [`PauseTarget::Submissions`] target, which also stops the request path.
pub use converge_wire::pauses::PAUSABLE_JOB_KINDS;

/// What a pause stops (`submissions`, `job:<kind>`, `endpoint:<id>`) and its one parser:
/// defined in `converge-wire`, where the console words it for people.
pub use converge_wire::pauses::PauseTarget;

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
