//! The statuses of the other lifecycles the console shows beside a payment's: a job of the
//! compensation queue, a merchant refund, a maker-checker request, a webhook delivery and its
//! endpoint, an error-pool item, an emergency-switch pause, an Idempotency-Key. Each is one enum whose
//! names are stored in the database and sent over every API as the lower-case words below.
//!
//! Why here: the console (WebAssembly) compares and colours them and cannot depend on the
//! server crate, and the server's domain re-exports them (`domain::jobs`, `domain::refunds`,
//! `domain::actions`, `domain::webhooks`, `domain::pause`), so there is one list of names. What moves a status to another (the
//! queue's leases, the refund job, the maker-checker moves) stays in the server's domain.

use std::fmt;
use std::str::FromStr;

use crate::status::UnknownName;

/// Defines a status enum whose variants travel as fixed names: `ALL` in lifecycle order,
/// `as_str`, `parse`, `Display`, `FromStr` and serde as the name (so a renamed variant keeps
/// its stored name, and an unknown name is an error rather than a default).
///
/// With `sql $macro;` first, it also exports `$macro!(Variant)`: the status as an SQL string
/// literal (`'due'`), for SQL text built at compile time (`concat!`, `format!`). The stored
/// queries use it instead of writing a status by hand, so each status name is written once,
/// here, and the SQL text stays a literal the planners match partial indexes against
/// (`jobs_live ... WHERE status IN ('due', 'leased', 'dead')`), which a bound parameter would
/// not (issue 33; `server/tests/it/source_rules.rs` keeps the names out of every other file).
macro_rules! named_status {
    (
        sql $sql:ident;
        $(#[$meta:meta])*
        pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+ }
    ) => {
        named_status! {
            $(#[$meta])*
            pub enum $name { $( $(#[$vmeta])* $variant = $text, )+ }
        }

        #[doc = concat!("A [`", stringify!($name), "`] as an SQL string literal: `", stringify!($sql), "!(Variant)` is `'name'`.")]
        #[macro_export]
        macro_rules! $sql {
            $( ($variant) => { concat!("'", $text, "'") }; )+
        }
    };
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+ }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $( $(#[$vmeta])* $variant, )+ }

        impl $name {
            /// Every status, in lifecycle order.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            /// The stored and sent name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }

            /// The status named `name`, if any.
            pub fn parse(name: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|s| s.as_str() == name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::parse(s).ok_or_else(|| UnknownName(s.to_string()))
            }
        }

        // What the server's row types decode the stored text with (`sqlx(try_from)`).
        impl TryFrom<String> for $name {
            type Error = UnknownName;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

named_status! {
    sql job_sql;
    /// Where a job is in its life (DESIGN.md "Compensation queue"): `due` waits for its
    /// `run_at`; `leased` runs under a lease token until it completes, fails or the lease
    /// lapses (then it is due again); `done` and `dead` are final (dead: attempts spent,
    /// waiting in the error pool for a person).
    pub enum JobStatus {
        /// Waiting for its `run_at`.
        Due = "due",
        /// Held by a worker under a lease token.
        Leased = "leased",
        /// Completed (or closed by the transition that made it pointless).
        Done = "done",
        /// Attempts spent.
        Dead = "dead",
    }
}

impl JobStatus {
    /// Final: nothing runs the job again unless a person wakes it (retry of a dead job).
    pub fn is_final(self) -> bool {
        matches!(self, JobStatus::Done | JobStatus::Dead)
    }
}

named_status! {
    sql refund_sql;
    /// A merchant refund's status (DESIGN.md "Refunds"): created `pending` with its job, then
    /// `succeeded` when the channel refunded it or `failed` when the channel refused it.
    pub enum RefundStatus {
        /// Not yet decided at the channel; its job sends (or asks) again.
        Pending = "pending",
        /// Refunded at the channel; counted in the payment's `refunded_amount`.
        Succeeded = "succeeded",
        /// Refused by the channel; nothing moved.
        Failed = "failed",
    }
}

named_status! {
    sql capture_sql;
    /// A capture of a hold (issue 34): `pending` while it is in flight (its payment
    /// CAPTURING), then `captured` or `refused` (by the channel, or by the void or expiry
    /// that ended the hold first).
    pub enum CaptureStatus {
        /// Sent or about to be; settled by its answer or by a query of the hold.
        Pending = "pending",
        /// Made at the channel; counted in the payment's captured amount.
        Captured = "captured",
        /// Nothing was captured.
        Refused = "refused",
    }
}

impl RefundStatus {
    /// Decided: nothing sends it again.
    pub fn is_final(self) -> bool {
        !matches!(self, RefundStatus::Pending)
    }
}

named_status! {
    sql action_sql;
    /// Where a maker-checker request is in its life (DESIGN.md "Ops console").
    pub enum ActionStatus {
        /// Waiting for a second person's decision.
        Pending = "pending",
        /// Approved (or needing no approval) and not yet run to the end.
        Approved = "approved",
        /// Refused by an approver. Final.
        Rejected = "rejected",
        /// Not decided within its time to live. Final.
        Expired = "expired",
        /// Withdrawn by its requester. Final.
        Cancelled = "cancelled",
        /// Its payment moved since the request pinned its version. Final.
        Stale = "stale",
        /// Run to the end. Final.
        Executed = "executed",
        /// Run and stopped short; executing it again resumes (each step is idempotent).
        Failed = "failed",
    }
}

named_status! {
    sql delivery_sql;
    /// A webhook delivery's status (DESIGN.md "Webhooks"): `pending` until a 2xx
    /// (`succeeded`), the schedule runs out (`dead`, with an error-pool item) or its endpoint
    /// is disabled or deleted first (`abandoned`). Ops may send a dead or abandoned one again.
    pub enum DeliveryStatus {
        /// Waiting for an attempt (first or retry).
        Pending = "pending",
        /// A 2xx was received.
        Succeeded = "succeeded",
        /// Every attempt of the schedule failed; an error-pool item names it.
        Dead = "dead",
        /// The endpoint was disabled or deleted before the delivery succeeded.
        Abandoned = "abandoned",
    }
}

named_status! {
    sql endpoint_sql;
    /// A merchant's webhook endpoint's status (DESIGN.md "Webhooks").
    pub enum EndpointStatus {
        /// Receives deliveries.
        Enabled = "enabled",
        /// Disabled by converge (410 Gone, failing for days) or by ops; ops may re-enable it.
        Disabled = "disabled",
        /// Deleted by the merchant; kept for its history, never re-enabled.
        Deleted = "deleted",
    }
}

named_status! {
    sql error_item_sql;
    /// An error-pool item's status (DESIGN.md "Error pool"): `open` until a person (or the
    /// system, when the fault heals) resolves it with a note; a new occurrence of the same
    /// fault may open it again.
    pub enum ErrorItemStatus {
        /// Waiting for a person.
        Open = "open",
        /// Resolved, with who, when and a note.
        Resolved = "resolved",
    }
}

named_status! {
    sql key_sql;
    /// Where a stored Idempotency-Key is in its life (DESIGN.md "Idempotency contract";
    /// `idempotency_keys.state`): `running` while a request holds its claim under a lease (or
    /// held it until the lease lapsed: a retry of the same request takes it over), `done` once
    /// its answer is stored and replayed.
    pub enum KeyState {
        /// Claimed: a request holds it under a lease, or held it until the lease lapsed.
        Running = "running",
        /// Its answer is stored and replayed.
        Done = "done",
    }
}

named_status! {
    sql pause_sql;
    /// An emergency-switch pause request's status (DESIGN.md "Emergency switches"): `pending`
    /// until a second person approves (`active`) or refuses it (`rejected`), or it is
    /// withdrawn or expires undecided (`cancelled`); an active pause ends `resumed`.
    pub enum PauseStatus {
        /// Waiting for an approver.
        Pending = "pending",
        /// In force.
        Active = "active",
        /// Ended by an operator (was active).
        Resumed = "resumed",
        /// Refused by an approver (was pending).
        Rejected = "rejected",
        /// Withdrawn by an operator, or expired, before a decision (was pending).
        Cancelled = "cancelled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_and_travels_as_itself() {
        fn check<T>(all: &[T])
        where
            T: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr + serde::Serialize,
            T: for<'de> serde::Deserialize<'de>,
        {
            let mut names: Vec<String> = all.iter().map(|s| s.to_string()).collect();
            for (s, name) in all.iter().zip(&names) {
                assert_eq!(name.parse::<T>().ok(), Some(*s));
                assert_eq!(serde_json::to_string(s).unwrap(), format!("\"{name}\""));
                assert_eq!(
                    serde_json::from_str::<T>(&format!("\"{name}\"")).unwrap(),
                    *s
                );
            }
            names.sort();
            names.dedup();
            assert_eq!(names.len(), all.len(), "names are unique");
        }
        check(&JobStatus::ALL);
        check(&RefundStatus::ALL);
        check(&ActionStatus::ALL);
        check(&DeliveryStatus::ALL);
        check(&EndpointStatus::ALL);
        check(&ErrorItemStatus::ALL);
        check(&PauseStatus::ALL);
        check(&KeyState::ALL);
        assert!(serde_json::from_str::<JobStatus>("\"DUE\"").is_err());
        assert_eq!(RefundStatus::parse("done"), None);
    }

    #[test]
    fn sql_literals_are_the_stored_names_quoted() {
        let quoted = |s: &dyn fmt::Display| format!("'{s}'");
        assert_eq!(job_sql!(Due), quoted(&JobStatus::Due));
        assert_eq!(job_sql!(Leased), quoted(&JobStatus::Leased));
        assert_eq!(job_sql!(Done), quoted(&JobStatus::Done));
        assert_eq!(job_sql!(Dead), quoted(&JobStatus::Dead));
        assert_eq!(delivery_sql!(Pending), quoted(&DeliveryStatus::Pending));
        assert_eq!(delivery_sql!(Abandoned), quoted(&DeliveryStatus::Abandoned));
        assert_eq!(refund_sql!(Failed), quoted(&RefundStatus::Failed));
        assert_eq!(capture_sql!(Refused), quoted(&CaptureStatus::Refused));
        assert_eq!(key_sql!(Running), quoted(&KeyState::Running));
        assert_eq!(action_sql!(Executed), quoted(&ActionStatus::Executed));
        assert_eq!(pause_sql!(Active), quoted(&PauseStatus::Active));
        assert_eq!(error_item_sql!(Open), quoted(&ErrorItemStatus::Open));
        assert_eq!(endpoint_sql!(Deleted), quoted(&EndpointStatus::Deleted));
    }

    #[test]
    fn only_the_open_statuses_are_not_final() {
        let open: Vec<JobStatus> = JobStatus::ALL
            .into_iter()
            .filter(|s| !s.is_final())
            .collect();
        assert_eq!(open, [JobStatus::Due, JobStatus::Leased]);
        let open: Vec<RefundStatus> = RefundStatus::ALL
            .into_iter()
            .filter(|s| !s.is_final())
            .collect();
        assert_eq!(open, [RefundStatus::Pending]);
    }
}
