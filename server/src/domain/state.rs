//! The payment state machine (DESIGN.md "Payment state machine"; seed article 000 on the
//! order state machine, seed article 004 on UNKNOWN vs FAILED and CHANNEL_SUCCESS/SUSPENSE).
//!
//! The transition table is data ([`TRANSITIONS`]); [`transition`] is the only way to compute a
//! next state. Persistence applies the result with a conditional update on (id, status,
//! version), so two writers racing from one version cannot both win.

use std::fmt;
use std::str::FromStr;

/// A payment's status. `FAILED`, `REVERSED` and `REFUNDED` are terminal; `SUCCESS` is final
/// for the charge (only a reversal or refunds leave it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PaymentStatus {
    /// Created, not yet sent to the channel.
    Pending,
    /// A channel request is (or may be) in flight.
    Processing,
    /// The channel's answer was lost (timeout, 5xx, garbled): never treated as failed.
    Unknown,
    /// The channel charged; the ledger batch is not posted yet.
    ChannelSuccess,
    /// The channel charged but posting failed (e.g. merchant frozen): money held in suspense.
    Suspense,
    /// Charged and posted.
    Success,
    /// Explicitly declined, or proven never charged (key fenced at the channel).
    Failed,
    /// Refunded in full by an ops reversal.
    Reversed,
    /// Refunded in full by merchant refunds.
    Refunded,
}

impl PaymentStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [PaymentStatus; 9] = [
        PaymentStatus::Pending,
        PaymentStatus::Processing,
        PaymentStatus::Unknown,
        PaymentStatus::ChannelSuccess,
        PaymentStatus::Suspense,
        PaymentStatus::Success,
        PaymentStatus::Failed,
        PaymentStatus::Reversed,
        PaymentStatus::Refunded,
    ];

    /// The stable upper-case name stored in the database and sent over the API.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Pending => "PENDING",
            PaymentStatus::Processing => "PROCESSING",
            PaymentStatus::Unknown => "UNKNOWN",
            PaymentStatus::ChannelSuccess => "CHANNEL_SUCCESS",
            PaymentStatus::Suspense => "SUSPENSE",
            PaymentStatus::Success => "SUCCESS",
            PaymentStatus::Failed => "FAILED",
            PaymentStatus::Reversed => "REVERSED",
            PaymentStatus::Refunded => "REFUNDED",
        }
    }

    /// Terminal: nothing moves the payment again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            PaymentStatus::Failed | PaymentStatus::Reversed | PaymentStatus::Refunded
        )
    }

    /// The channel holds (or held) this payment's money: exactly one charge exists.
    pub fn is_charged(self) -> bool {
        matches!(
            self,
            PaymentStatus::ChannelSuccess
                | PaymentStatus::Suspense
                | PaymentStatus::Success
                | PaymentStatus::Reversed
                | PaymentStatus::Refunded
        )
    }
}

impl fmt::Display for PaymentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for PaymentStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl FromStr for PaymentStatus {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PaymentStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownName(s.to_string()))
    }
}

/// A status or event name that is not in the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown name {0:?}")]
pub struct UnknownName(pub String);

/// Something that happened to a payment; the input of [`transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentEvent {
    /// The channel request was sent with the payment's channel key.
    Submit,
    /// The channel confirmed the charge (amount, currency and key matched).
    ChannelSucceeded,
    /// The channel explicitly and decidably declined.
    ChannelDeclined,
    /// Timeout, 5xx or garbled answer: the outcome is unknown.
    ChannelError,
    /// A query by channel key found the charge.
    QuerySucceeded,
    /// A query by channel key found a decline.
    QueryDeclined,
    /// A query found nothing; the request will be resubmitted with the same key.
    QueryNotFound,
    /// A query found nothing, the resubmit budget is spent and the key was cancelled at the
    /// channel (TCC anti-hanging fence), so no late request can charge.
    QueryNotFoundFenced,
    /// The charge's ledger batch was posted.
    LedgerPosted,
    /// Posting failed (e.g. merchant account frozen).
    LedgerFailed,
    /// The remaining amount was refunded at the channel and reversing entries posted.
    Reversed,
    /// Merchant refunds reached the payment amount.
    RefundedInFull,
    /// An approved ops force-transition (outside the table; see
    /// [`FORCE_WHITELIST`](crate::domain::actions::FORCE_WHITELIST)).
    Forced,
}

impl PaymentEvent {
    /// Every event.
    pub const ALL: [PaymentEvent; 13] = [
        PaymentEvent::Submit,
        PaymentEvent::ChannelSucceeded,
        PaymentEvent::ChannelDeclined,
        PaymentEvent::ChannelError,
        PaymentEvent::QuerySucceeded,
        PaymentEvent::QueryDeclined,
        PaymentEvent::QueryNotFound,
        PaymentEvent::QueryNotFoundFenced,
        PaymentEvent::LedgerPosted,
        PaymentEvent::LedgerFailed,
        PaymentEvent::Reversed,
        PaymentEvent::RefundedInFull,
        PaymentEvent::Forced,
    ];

    /// The stable snake_case name recorded with each event.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentEvent::Submit => "submit",
            PaymentEvent::ChannelSucceeded => "channel_succeeded",
            PaymentEvent::ChannelDeclined => "channel_declined",
            PaymentEvent::ChannelError => "channel_error",
            PaymentEvent::QuerySucceeded => "query_succeeded",
            PaymentEvent::QueryDeclined => "query_declined",
            PaymentEvent::QueryNotFound => "query_not_found",
            PaymentEvent::QueryNotFoundFenced => "query_not_found_fenced",
            PaymentEvent::LedgerPosted => "ledger_posted",
            PaymentEvent::LedgerFailed => "ledger_failed",
            PaymentEvent::Reversed => "reversed",
            PaymentEvent::RefundedInFull => "refunded_in_full",
            PaymentEvent::Forced => "force_transition",
        }
    }
}

impl fmt::Display for PaymentEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PaymentEvent {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PaymentEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| UnknownName(s.to_string()))
    }
}

use PaymentEvent as E;
use PaymentStatus as S;

/// The whitelist: (from, event) -> to, exactly the table in DESIGN.md.
pub const TRANSITIONS: &[(PaymentStatus, PaymentEvent, PaymentStatus)] = &[
    (S::Pending, E::Submit, S::Processing),
    (S::Processing, E::ChannelSucceeded, S::ChannelSuccess),
    (S::Processing, E::ChannelDeclined, S::Failed),
    (S::Processing, E::ChannelError, S::Unknown),
    (S::Unknown, E::QuerySucceeded, S::ChannelSuccess),
    (S::Unknown, E::QueryDeclined, S::Failed),
    (S::Unknown, E::QueryNotFound, S::Processing),
    (S::Unknown, E::QueryNotFoundFenced, S::Failed),
    (S::ChannelSuccess, E::LedgerPosted, S::Success),
    (S::ChannelSuccess, E::LedgerFailed, S::Suspense),
    (S::Suspense, E::LedgerPosted, S::Success),
    (S::Suspense, E::Reversed, S::Reversed),
    (S::Success, E::Reversed, S::Reversed),
    (S::Success, E::RefundedInFull, S::Refunded),
];

/// Why an event cannot move a payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The payment is terminal; nothing moves it (late callbacks land here).
    #[error("payment is {from}, a terminal state; {event} ignored")]
    Terminal {
        /// Current status.
        from: PaymentStatus,
        /// Refused event.
        event: PaymentEvent,
    },
    /// The pair is not in the whitelist (e.g. a stale failure after success).
    #[error("{event} is not allowed from {from}")]
    Forbidden {
        /// Current status.
        from: PaymentStatus,
        /// Refused event.
        event: PaymentEvent,
    },
    /// The pair is whitelisted but leads elsewhere (e.g. `channel_error` written as FAILED).
    #[error("{event} from {from} leads to {expected}, not {to}")]
    WrongTarget {
        /// Current status.
        from: PaymentStatus,
        /// The event.
        event: PaymentEvent,
        /// The status asked for.
        to: PaymentStatus,
        /// The status the whitelist gives.
        expected: PaymentStatus,
    },
}

/// The next status for `event` in status `from`, or why the event must be ignored.
pub fn transition(
    from: PaymentStatus,
    event: PaymentEvent,
) -> Result<PaymentStatus, TransitionError> {
    if let Some((_, _, to)) = TRANSITIONS
        .iter()
        .find(|(f, e, _)| *f == from && *e == event)
    {
        return Ok(*to);
    }
    if from.is_terminal() {
        Err(TransitionError::Terminal { from, event })
    } else {
        Err(TransitionError::Forbidden { from, event })
    }
}

/// Checks a whole `(from, event) -> to` triple against the whitelist, for writers that are
/// handed a precomputed target (the store checks every transition it applies).
pub fn check(
    from: PaymentStatus,
    event: PaymentEvent,
    to: PaymentStatus,
) -> Result<(), TransitionError> {
    // An approved force-transition follows its own whitelist instead of the table.
    if event == PaymentEvent::Forced {
        return if crate::domain::actions::force_allowed(from, to) {
            Ok(())
        } else if from.is_terminal() {
            Err(TransitionError::Terminal { from, event })
        } else {
            Err(TransitionError::Forbidden { from, event })
        };
    }
    match transition(from, event)? {
        expected if expected == to => Ok(()),
        expected => Err(TransitionError::WrongTarget {
            from,
            event,
            to,
            expected,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_accepts_exactly_the_table_and_the_force_whitelist() {
        for from in PaymentStatus::ALL {
            for event in PaymentEvent::ALL {
                for to in PaymentStatus::ALL {
                    let listed = TRANSITIONS.contains(&(from, event, to))
                        || (event == E::Forced && crate::domain::actions::force_allowed(from, to));
                    assert_eq!(
                        check(from, event, to).is_ok(),
                        listed,
                        "{from} --{event}--> {to}"
                    );
                }
            }
        }
        assert!(matches!(
            check(S::Processing, E::ChannelError, S::Failed),
            Err(TransitionError::WrongTarget { .. })
        ));
    }

    #[test]
    fn every_whitelisted_row_is_applied() {
        for (from, event, to) in TRANSITIONS {
            assert_eq!(transition(*from, *event), Ok(*to), "{from} --{event}-->");
        }
    }

    #[test]
    fn every_pair_outside_the_table_is_refused() {
        for from in PaymentStatus::ALL {
            for event in PaymentEvent::ALL {
                let listed = TRANSITIONS
                    .iter()
                    .any(|(f, e, _)| *f == from && *e == event);
                assert_eq!(
                    transition(from, event).is_ok(),
                    listed,
                    "{from} --{event}-->"
                );
            }
        }
    }

    #[test]
    fn terminal_states_refuse_every_event() {
        for from in [S::Failed, S::Reversed, S::Refunded] {
            for event in PaymentEvent::ALL {
                assert_eq!(
                    transition(from, event),
                    Err(TransitionError::Terminal { from, event })
                );
            }
        }
    }

    #[test]
    fn stale_failure_after_success_is_forbidden() {
        assert!(matches!(
            transition(S::Success, E::ChannelDeclined),
            Err(TransitionError::Forbidden { .. })
        ));
        assert!(matches!(
            transition(S::ChannelSuccess, E::ChannelError),
            Err(TransitionError::Forbidden { .. })
        ));
    }

    #[test]
    fn channel_error_never_fails_a_payment() {
        assert_eq!(transition(S::Processing, E::ChannelError), Ok(S::Unknown));
    }

    #[test]
    fn names_round_trip() {
        for s in PaymentStatus::ALL {
            assert_eq!(s.as_str().parse::<PaymentStatus>(), Ok(s));
        }
        for e in PaymentEvent::ALL {
            assert_eq!(e.as_str().parse::<PaymentEvent>(), Ok(e));
        }
        assert!("NOPE".parse::<PaymentStatus>().is_err());
    }
}
