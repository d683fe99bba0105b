//! The kinds of ops action on a payment (DESIGN.md "Ops console": `query` and `retry` run at
//! once for an operator; `reverse`, `force_transition` and a manual-capture payment's
//! `capture` and `void` (issue 34) are requested by an operator and approved by a different
//! approver). Here because the console offers, labels and compares
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
    /// Capture an amount of a manual-capture payment's hold (issue 34), in part or as the
    /// final capture that releases the rest.
    Capture,
    /// Void a manual-capture payment's hold: release all of it (issue 34).
    Void,
}

impl ActionKind {
    /// Every kind, in the order the console lists them. The exhaustive match in the test
    /// `every_kind_is_listed` fails to compile when a variant is added and not listed here.
    pub const ALL: [ActionKind; 6] = [
        ActionKind::Query,
        ActionKind::Retry,
        ActionKind::Reverse,
        ActionKind::ForceTransition,
        ActionKind::Capture,
        ActionKind::Void,
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
            ActionKind::Capture => "capture",
            ActionKind::Void => "void",
        }
    }

    /// Whether a second person must approve it (anything that moves money or overrides the
    /// state machine).
    pub fn needs_approval(self) -> bool {
        matches!(
            self,
            ActionKind::Reverse
                | ActionKind::ForceTransition
                | ActionKind::Capture
                | ActionKind::Void
        )
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
        ActionKind::parse(s).ok_or_else(|| {
            format!(
                "unknown action {s:?}: use query, retry, reverse, force_transition, capture or void"
            )
        })
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

/// How a channel's answer to a query reads for ops staff (issue 41: a NotFound showed in
/// green): what the payment's outcome at the channel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerTone {
    /// The channel holds the charge: SUCCESS (green).
    Good,
    /// The channel declined it or fenced its key: FAILED (red).
    Bad,
    /// Nothing decides it yet: not found, or no answer (amber).
    Undecided,
}

/// A channel query's answer as an ops `query` action records it (the action's result JSON):
/// what the channel said, in fields, and the payment's status after it. Records written
/// before these fields carry only `answer` (the server's text of the answer), from which
/// the outcome is still read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QueryAnswer {
    /// `succeeded`, `declined`, `not_found`, `cancelled` or `error`; for a manual-capture
    /// payment's hold (issue 34) `authorized`, `captured`, `voided` or `expired` too.
    #[serde(default)]
    pub outcome: String,
    /// The charged amount (succeeded), minor units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<i64>,
    /// The charge's ISO 4217 code (succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// What the hold has captured so far, minor units (a hold's query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured: Option<i64>,
    /// When the hold lapses (or lapsed), epoch ms UTC (a hold's query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// The channel's decline reason (declined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What went wrong (error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The payment's status after the query (it settles an UNKNOWN payment).
    #[serde(default)]
    pub status: Option<String>,
    /// The server's text of the answer.
    #[serde(default)]
    pub answer: String,
}

impl QueryAnswer {
    /// The outcome, read from `answer` when the record has no `outcome` field.
    fn outcome(&self) -> &str {
        if !self.outcome.is_empty() {
            return &self.outcome;
        }
        [
            ("Succeeded", "succeeded"),
            ("Declined", "declined"),
            ("NotFound", "not_found"),
            ("Cancelled", "cancelled"),
        ]
        .into_iter()
        .find(|(p, _)| self.answer.starts_with(p))
        .map_or("error", |(_, o)| o)
    }

    /// The answer's tone: green only for a charge or a hold the channel holds.
    pub fn tone(&self) -> AnswerTone {
        match self.outcome() {
            "succeeded" | "authorized" | "captured" => AnswerTone::Good,
            "declined" | "cancelled" | "voided" | "expired" => AnswerTone::Bad,
            _ => AnswerTone::Undecided,
        }
    }

    /// The answer as one sentence, then the payment's status after it.
    pub fn sentence(&self) -> String {
        let said = match self.outcome() {
            "succeeded" => match (self.amount, self.currency.as_deref()) {
                (Some(a), Some(c)) => format!(
                    "SUCCESS at the channel: it holds a charge of {} {c} under this payment's key.",
                    crate::money::major(a, c)
                ),
                _ => "SUCCESS at the channel: it holds a charge under this payment's key.".into(),
            },
            "declined" => match self.reason.as_deref() {
                Some(r) => format!("FAILED at the channel: it declined this payment's key ({r})."),
                None => "FAILED at the channel: it declined this payment's key.".into(),
            },
            "cancelled" => "FAILED at the channel: the key is cancelled (fenced), so no charge can be made with it.".into(),
            "not_found" => "Not found at the channel: nothing is committed under this payment's key (yet); not a success.".into(),
            "authorized" | "captured" | "voided" | "expired" => self.hold_sentence(),
            _ => format!(
                "No decidable answer: the query failed ({}); ask again later.",
                self.detail.as_deref().unwrap_or(&self.answer)
            ),
        };
        match &self.status {
            Some(s) => format!("{said} The payment is now {s}."),
            None => said,
        }
    }
}

impl QueryAnswer {
    /// A hold's answer as a sentence: where it stands, what it holds and captured (major
    /// units); its expiry travels in `expires_at`, which the console shows in its own zone.
    fn hold_sentence(&self) -> String {
        let cur = self.currency.as_deref().unwrap_or("");
        let money = |v: Option<i64>| {
            v.map_or_else(
                || "?".to_string(),
                |a| format!("{} {cur}", crate::money::major(a, cur)),
            )
        };
        let (amount, captured) = (money(self.amount), money(self.captured));
        match self.outcome() {
            "authorized" => format!(
                "AUTHORIZED at the channel: it holds {amount} under this payment's key, {captured} captured."
            ),
            "captured" => format!(
                "CAPTURED at the channel: the hold of {amount} is closed with {captured} captured."
            ),
            "voided" => format!(
                "VOIDED at the channel: the hold of {amount} was released; nothing can be captured."
            ),
            _ => format!(
                "EXPIRED at the channel: the hold of {amount} lapsed with {captured} captured."
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holds_answer_reads_as_a_sentence_with_its_tone() {
        let a = answer(
            r#"{"outcome":"authorized","amount":5000,"captured":1000,"currency":"CNY","expires_at":1796101200000,"status":"AUTHORIZED","answer":"Found"}"#,
        );
        assert_eq!(a.tone(), AnswerTone::Good);
        assert_eq!(
            a.sentence(),
            "AUTHORIZED at the channel: it holds 50.00 CNY under this payment's key, 10.00 CNY captured. The payment is now AUTHORIZED."
        );
        let v = answer(r#"{"outcome":"voided","amount":5000,"currency":"CNY","answer":"Found"}"#);
        assert_eq!(v.tone(), AnswerTone::Bad);
        assert!(v.sentence().starts_with("VOIDED at the channel"));
    }

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

    fn answer(json: &str) -> QueryAnswer {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_query_answer_is_green_only_when_the_channel_holds_the_charge() {
        let ok = answer(
            r#"{"outcome":"succeeded","amount":4254,"currency":"CNY","status":"SUCCESS","answer":"Succeeded { amount: 4254, currency: \"CNY\" }"}"#,
        );
        assert_eq!(ok.tone(), AnswerTone::Good);
        assert_eq!(
            ok.sentence(),
            "SUCCESS at the channel: it holds a charge of 42.54 CNY under this payment's key. The payment is now SUCCESS."
        );
        let nf = answer(r#"{"outcome":"not_found","status":"UNKNOWN","answer":"NotFound"}"#);
        assert_eq!(nf.tone(), AnswerTone::Undecided);
        assert!(
            nf.sentence().starts_with("Not found at the channel"),
            "{}",
            nf.sentence()
        );
        assert!(nf.sentence().ends_with("The payment is now UNKNOWN."));
        let declined =
            answer(r#"{"outcome":"declined","reason":"insufficient funds","status":"FAILED"}"#);
        assert_eq!(declined.tone(), AnswerTone::Bad);
        assert!(declined.sentence().contains("insufficient funds"));
        let err = answer(r#"{"outcome":"error","detail":"timed out","status":"UNKNOWN"}"#);
        assert_eq!(err.tone(), AnswerTone::Undecided);
        assert!(err.sentence().contains("timed out"));
    }

    #[test]
    fn an_older_query_record_is_read_from_its_answer_text() {
        assert_eq!(
            answer(r#"{"answer":"NotFound","status":"UNKNOWN"}"#).tone(),
            AnswerTone::Undecided
        );
        assert_eq!(
            answer(r#"{"answer":"Cancelled","status":"FAILED"}"#).tone(),
            AnswerTone::Bad
        );
        assert_eq!(
            answer(r#"{"answer":"Succeeded { amount: 1, currency: \"CNY\" }","status":"SUCCESS"}"#)
                .tone(),
            AnswerTone::Good
        );
        assert_eq!(
            answer(r#"{"answer":"Error { detail: \"x\" }"}"#).tone(),
            AnswerTone::Undecided
        );
    }
}
