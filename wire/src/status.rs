//! A payment's status: the one definition of the names and of the three classes of state
//! (terminal, settled, charged) that the server's state machine and the console both read.
//!
//! Why here and not in the server's domain: the console (WebAssembly) lists the statuses
//! (search filter, bulk-retry filter) and colours them, and it cannot depend on the server
//! crate. Defining the enum once, in this crate, and re-exporting it from
//! `converge_server::domain::state` leaves no second list to keep in step: a new variant
//! fails to compile in every exhaustive `match` on both sides until it is placed. Which
//! moves between statuses are allowed (the transition table, the force whitelist) stays in
//! the domain; the console learns the forced moves it may offer from the server
//! ([`ActionOffer::targets`](crate::payments::ActionOffer::targets)).

use std::fmt;
use std::str::FromStr;

/// A payment's status. `FAILED`, `REVERSED`, `REFUNDED`, `VOIDED`, `EXPIRED` and `CANCELED`
/// are terminal; `SUCCESS` is final for the charge (only a reversal or refunds leave it). A
/// manual-capture payment (issue 34; seed 000 §4.1) goes PENDING → AUTHORIZING → AUTHORIZED
/// (the hold) → CAPTURING → AUTHORIZED again after a partial capture, or SUCCESS after the
/// final one; a hold ends VOIDED (VOIDING first), EXPIRED, or SUCCESS. Serialised as its upper-case name
/// ([`PaymentStatus::as_str`]), as stored in the database and sent over every API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PaymentStatus {
    /// Created, not yet sent to the channel.
    Pending,
    /// A manual-capture payment's authorization is (or may be) in flight.
    Authorizing,
    /// A channel request is (or may be) in flight.
    Processing,
    /// The channel waits for the customer to authenticate (3-D Secure; Stripe's
    /// `requires_action`): nothing is charged or held yet. Queried until the customer acts,
    /// or until the action window ends and the key is cancelled at the channel (issue 38).
    RequiresAction,
    /// The channel's answer was lost (timeout, 5xx, garbled): never treated as failed.
    Unknown,
    /// The channel charged; the ledger batch is not posted yet.
    ChannelSuccess,
    /// The channel charged but posting failed (e.g. merchant frozen): money held in suspense.
    Suspense,
    /// Funds are held at the channel (a manual-capture payment's hold): captures may follow
    /// until the hold is used up, closed by a final capture, voided or expired.
    Authorized,
    /// A capture of (part of) the hold is (or may be) in flight; its answer is applied, or
    /// found by a query of the hold, never sent again under a new key.
    Capturing,
    /// Charged and posted (for a manual-capture payment: captured, the rest released).
    Success,
    /// A void of the hold is (or may be) in flight; nothing can be captured any more.
    Voiding,
    /// The hold was released by a void before anything was captured.
    Voided,
    /// The hold lapsed before anything was captured; it is released.
    Expired,
    /// Cancelled by the merchant before it reached the channel.
    Canceled,
    /// Explicitly declined, or proven never charged (key fenced at the channel).
    Failed,
    /// Refunded in full by an ops reversal.
    Reversed,
    /// Refunded in full by merchant refunds.
    Refunded,
}

impl PaymentStatus {
    /// Every status, in lifecycle order (the order the console lists them in).
    pub const ALL: [PaymentStatus; 17] = [
        PaymentStatus::Pending,
        PaymentStatus::Authorizing,
        PaymentStatus::Processing,
        PaymentStatus::RequiresAction,
        PaymentStatus::Unknown,
        PaymentStatus::Authorized,
        PaymentStatus::Capturing,
        PaymentStatus::ChannelSuccess,
        PaymentStatus::Suspense,
        PaymentStatus::Success,
        PaymentStatus::Voiding,
        PaymentStatus::Voided,
        PaymentStatus::Expired,
        PaymentStatus::Canceled,
        PaymentStatus::Failed,
        PaymentStatus::Reversed,
        PaymentStatus::Refunded,
    ];

    /// The stable upper-case name stored in the database and sent over the API.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Pending => "PENDING",
            PaymentStatus::Authorizing => "AUTHORIZING",
            PaymentStatus::Authorized => "AUTHORIZED",
            PaymentStatus::Capturing => "CAPTURING",
            PaymentStatus::Voiding => "VOIDING",
            PaymentStatus::Voided => "VOIDED",
            PaymentStatus::Expired => "EXPIRED",
            PaymentStatus::Canceled => "CANCELED",
            PaymentStatus::Processing => "PROCESSING",
            PaymentStatus::RequiresAction => "REQUIRES_ACTION",
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
            PaymentStatus::Failed
                | PaymentStatus::Reversed
                | PaymentStatus::Refunded
                | PaymentStatus::Voided
                | PaymentStatus::Expired
                | PaymentStatus::Canceled
        )
    }

    /// Converged: nothing drives the payment further without a person (a terminal state, or
    /// SUCCESS, which only a reversal or refunds leave). Every other state is one the
    /// compensation queue still owns and that can be stuck (the server's `domain::stuck`
    /// ties its thresholds to exactly these; the console's bulk-retry filter lists them).
    ///
    /// AUTHORIZED is settled too: a hold waits for the merchant's capture or void, for days,
    /// and its expiry job ends it; it is never stuck.
    pub fn is_settled(self) -> bool {
        self.is_terminal() || matches!(self, PaymentStatus::Success | PaymentStatus::Authorized)
    }

    /// Funds are held at the channel for this payment and not yet captured in full: the
    /// hold's states (AUTHORIZED, and CAPTURING and VOIDING while their call is out).
    pub fn is_held(self) -> bool {
        matches!(
            self,
            PaymentStatus::Authorized | PaymentStatus::Capturing | PaymentStatus::Voiding
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

impl FromStr for PaymentStatus {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PaymentStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownName(s.to_string()))
    }
}

// What the server's row types decode the stored text with (`sqlx(try_from)`).
impl TryFrom<String> for PaymentStatus {
    type Error = UnknownName;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

// By hand rather than derived, so the names come from `as_str` alone.
impl serde::Serialize for PaymentStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for PaymentStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A status or event name that is not in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName(pub String);

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown name {:?}", self.0)
    }
}

impl std::error::Error for UnknownName {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_is_listed_once_and_its_name_parses_back() {
        for s in PaymentStatus::ALL {
            // A new variant breaks this match until it is added to `ALL` as well.
            match s {
                PaymentStatus::Pending
                | PaymentStatus::Authorizing
                | PaymentStatus::Authorized
                | PaymentStatus::Capturing
                | PaymentStatus::Voiding
                | PaymentStatus::Voided
                | PaymentStatus::Expired
                | PaymentStatus::Canceled
                | PaymentStatus::Processing
                | PaymentStatus::RequiresAction
                | PaymentStatus::Unknown
                | PaymentStatus::ChannelSuccess
                | PaymentStatus::Suspense
                | PaymentStatus::Success
                | PaymentStatus::Failed
                | PaymentStatus::Reversed
                | PaymentStatus::Refunded => {}
            }
            assert_eq!(s.as_str().parse::<PaymentStatus>(), Ok(s));
            assert_eq!(PaymentStatus::ALL.iter().filter(|t| **t == s).count(), 1);
        }
        assert_eq!(
            "pending".parse::<PaymentStatus>(),
            Err(UnknownName("pending".into()))
        );
    }

    #[test]
    fn a_status_travels_as_its_name() {
        let json = serde_json::to_string(&PaymentStatus::ChannelSuccess).unwrap();
        assert_eq!(json, r#""CHANNEL_SUCCESS""#);
        assert_eq!(
            serde_json::from_str::<PaymentStatus>(&json).unwrap(),
            PaymentStatus::ChannelSuccess
        );
        assert!(serde_json::from_str::<PaymentStatus>(r#""channel_success""#).is_err());
    }

    #[test]
    fn terminal_states_are_settled_and_charged_ones_include_the_refunded() {
        for s in PaymentStatus::ALL {
            if s.is_terminal() {
                assert!(s.is_settled(), "{s}");
            }
        }
        assert!(PaymentStatus::Success.is_settled() && !PaymentStatus::Success.is_terminal());
        assert!(PaymentStatus::Refunded.is_charged() && !PaymentStatus::Failed.is_charged());
    }
}
