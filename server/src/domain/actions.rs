//! Ops actions on a payment under maker-checker (DESIGN.md "Ops console": `query` and `retry`
//! run at once for an operator; `reverse` and `force_transition` are requested by an operator
//! and approved by a different approver; a reason is required; force needs evidence and only
//! whitelisted transitions, never out of a terminal state).

use std::str::FromStr;

use super::state::PaymentStatus;

/// Longest reason, in bytes.
pub const MAX_REASON: usize = 1000;
/// Longest evidence text, in bytes.
pub const MAX_EVIDENCE: usize = 4000;

/// An action kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// Ask the channel now and apply what the answer justifies.
    Query,
    /// Make the payment's waiting or dead jobs run now.
    Retry,
    /// Refund the remaining amount at the channel and post reversing entries -> REVERSED.
    Reverse,
    /// Move to a whitelisted target status on the operator's evidence.
    ForceTransition,
}

impl ActionKind {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Query => "query",
            ActionKind::Retry => "retry",
            ActionKind::Reverse => "reverse",
            ActionKind::ForceTransition => "force_transition",
        }
    }

    /// Whether a second person must approve it (anything that moves money or overrides the
    /// state machine).
    pub fn needs_approval(self) -> bool {
        matches!(self, ActionKind::Reverse | ActionKind::ForceTransition)
    }
}

impl FromStr for ActionKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "query" => Ok(ActionKind::Query),
            "retry" => Ok(ActionKind::Retry),
            "reverse" => Ok(ActionKind::Reverse),
            "force_transition" => Ok(ActionKind::ForceTransition),
            other => Err(format!(
                "unknown action {other:?}: use query, retry, reverse or force_transition"
            )),
        }
    }
}

/// Forced transitions an approver may sign off, each with why it is safe:
/// - UNKNOWN -> FAILED: the key is cancelled at the channel first (refused if it charged).
/// - UNKNOWN -> CHANNEL_SUCCESS: the channel's own record shows the charge (evidence).
/// - PROCESSING -> UNKNOWN: a request died mid-call; the query path then resolves it.
/// - SUSPENSE -> SUCCESS and CHANNEL_SUCCESS -> SUCCESS: the charge batch is posted now on
///   the approver's authority (e.g. after the merchant's account issue was settled).
pub const FORCE_WHITELIST: &[(PaymentStatus, PaymentStatus)] = &[
    (PaymentStatus::Unknown, PaymentStatus::Failed),
    (PaymentStatus::Unknown, PaymentStatus::ChannelSuccess),
    (PaymentStatus::Processing, PaymentStatus::Unknown),
    (PaymentStatus::Suspense, PaymentStatus::Success),
    (PaymentStatus::ChannelSuccess, PaymentStatus::Success),
];

/// Whether forcing `from -> to` is allowed.
pub fn force_allowed(from: PaymentStatus, to: PaymentStatus) -> bool {
    !from.is_terminal() && FORCE_WHITELIST.contains(&(from, to))
}

/// Checks a reason: not blank, at most [`MAX_REASON`] characters (as the OpenAPI document's
/// `maxLength` counts them).
pub fn check_reason(reason: &str) -> Result<(), String> {
    if reason.trim().is_empty() {
        Err("a reason is required".into())
    } else if reason.chars().count() > MAX_REASON {
        Err(format!("reason is longer than {MAX_REASON} characters"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PaymentStatus as S;

    #[test]
    fn only_money_moving_actions_need_approval() {
        assert!(!ActionKind::Query.needs_approval());
        assert!(!ActionKind::Retry.needs_approval());
        assert!(ActionKind::Reverse.needs_approval());
        assert!(ActionKind::ForceTransition.needs_approval());
    }

    #[test]
    fn force_never_leaves_a_terminal_state_and_only_follows_the_whitelist() {
        for from in S::ALL {
            for to in S::ALL {
                let listed = FORCE_WHITELIST.contains(&(from, to));
                assert_eq!(force_allowed(from, to), listed && !from.is_terminal());
            }
        }
        assert!(!force_allowed(S::Failed, S::Success));
        assert!(!force_allowed(S::Success, S::Failed));
    }

    #[test]
    fn reasons_are_required_and_bounded() {
        assert!(check_reason("  ").is_err());
        assert!(check_reason(&"x".repeat(MAX_REASON + 1)).is_err());
        assert!(check_reason("customer called").is_ok());
        assert!("refund".parse::<ActionKind>().is_err());
    }
}
