//! The kinds of ops action on a payment (DESIGN.md "Ops console": `query` and `retry` run at
//! once for an operator; `reverse` and `force_transition` are requested by an operator and
//! approved by a different approver). Here because the console offers, labels and compares
//! them and cannot depend on the server crate; the server's domain re-exports the enum
//! (`domain::actions::ActionKind`) and keeps the rules of when each may run.

use std::fmt;
use std::str::FromStr;

use crate::lifecycle::ActionStatus;

/// An action kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// Every kind, in the order the console lists them. The exhaustive match in the test
    /// `every_kind_is_listed` fails to compile when a variant is added and not listed here.
    pub const ALL: [ActionKind; 4] = [
        ActionKind::Query,
        ActionKind::Retry,
        ActionKind::Reverse,
        ActionKind::ForceTransition,
    ];

    /// The stored names of the kinds a second person approves: what the approvals inbox
    /// lists (issue 17: retries and queries run at once and would only flood it).
    pub fn approval_kinds() -> Vec<&'static str> {
        Self::ALL
            .into_iter()
            .filter(|k| k.needs_approval())
            .map(ActionKind::as_str)
            .collect()
    }

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

    /// The status a new request of this kind starts in: pending when a second person must
    /// approve it, approved otherwise.
    pub fn initial_status(self) -> ActionStatus {
        if self.needs_approval() {
            ActionStatus::Pending
        } else {
            ActionStatus::Approved
        }
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

impl ActionKind {
    /// The kind stored and sent as `name`, if any.
    pub fn parse(name: &str) -> Option<ActionKind> {
        ActionKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ActionKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ActionKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_travel_as_their_stored_names() {
        for k in ActionKind::ALL {
            assert_eq!(k.as_str().parse::<ActionKind>(), Ok(k));
            assert_eq!(ActionKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{k}\""));
            assert_eq!(
                serde_json::from_str::<ActionKind>(&format!("\"{k}\"")).unwrap(),
                k
            );
        }
        assert!(serde_json::from_str::<ActionKind>("\"Retry\"").is_err());
        assert_eq!(ActionKind::parse("refund"), None);
    }
}
