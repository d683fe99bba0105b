//! The console's data as the browser sees it. Compiled for both the server and the
//! WebAssembly bundle, which must not depend on the `server` crate.
//!
//! Every shape the server produces for the console lives in the `converge-wire` crate, which
//! the server serialises and the browser deserialises: it is re-exported here, never
//! mirrored (the approvals inbox, the audit chain's verdict, the pauses, the merchants and
//! their keys, a payment's webhooks, the search and the key page included). So is the
//! vocabulary both sides name: the payment statuses, the statuses of jobs, refunds,
//! maker-checker requests, webhook deliveries and endpoints, error-pool items and pauses, the
//! roles and the stuck-age buckets (`PaymentStatus::ALL`, `JobStatus`, `RefundStatus`,
//! `ActionStatus`, `DeliveryStatus`, `EndpointStatus`, `ErrorItemStatus`, `PauseStatus`,
//! `Role::ALL`, `AGE_BUCKETS`), and what the
//! payment page may offer (`ActionOffer`, forced-transition targets included, computed by
//! the server's domain).
//! So are the filters of the payment search and the audit viewer (`PaymentSearch`,
//! `AuditListQuery`), which the server's endpoints read too.
//! What is defined below is the console's own: the pauses' wording.
//! Times are epoch ms UTC; amounts are integer minor units.

pub use converge_wire::dashboard::AGE_BUCKETS;
pub use converge_wire::lifecycle::{
    ActionStatus, DeliveryStatus, EndpointStatus, ErrorItemStatus, JobStatus, KeyState,
    PauseStatus, RefundStatus,
};
pub use converge_wire::payments::{CaptureMode, CaptureRecord, Hold};
pub use converge_wire::{
    ActionKind, ActionOffer, ActionRecord, ApprovalInbox, ApprovalItem, AttemptRow, AuditList,
    AuditListQuery, AuditRecord, AuditRow, AuditVerify, BulkItem, BulkOutcome, Dashboard,
    DeliveryDetail, DeliveryRow, EndpointRow, ErrorItem, ErrorPoolView, EventRecord, EventType,
    HitRate, IdempotencyView, Job, KeySummary, KindCount, LedgerEntry, Merchant, MerchantAccount,
    MerchantKey, MerchantOverview, MinutePoint, OutboxEvent, PauseOverview,
    PauseRecord as PauseItem, Payment, PaymentDetail, PaymentPage, PaymentSearch, PaymentStatus,
    PaymentWebhooks, PoolPage, PrincipalView as Principal, QueueRow, QueueView, Refund,
    RelayStatus, ResolveOutcome, ReversalView, Role, RouteOutcomes, StuckPayment, StuckView,
    UserView, WebhookBacklog, WebhooksOverview,
};
pub use converge_wire::{AnswerTone, ItemAction, ItemActionOffer, ItemActionOutcome, QueryAnswer};
pub use converge_wire::{
    ChannelHealthView, ConnectorHealth, FailureGroup, FailureReason, HealthBucket, HealthLevel,
};
pub use converge_wire::{ConsoleChange, PrivilegeApproved, PrivilegeInbox, PrivilegeRequest};

/// What a pause stops, in words for people (the pauses page and every page's banner).
/// Console wording only: the server stores and checks the target, the console says it.
pub trait PauseWords {
    /// "submissions to the channel", "query jobs", "webhook deliveries to endpoint we_1";
    /// a target of another form as it is.
    fn what(&self) -> String;
}

impl PauseWords for PauseItem {
    fn what(&self) -> String {
        use converge_wire::pauses::PauseTarget;
        match self.target.parse::<PauseTarget>() {
            Ok(PauseTarget::Submissions) => "submissions to the channel".into(),
            Ok(PauseTarget::JobKind(kind)) => format!("{kind} jobs"),
            Ok(PauseTarget::Endpoint(id)) => format!("webhook deliveries to endpoint {id}"),
            Err(_) => self.target.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(target: &str) -> PauseItem {
        PauseItem {
            id: "pause_1".into(),
            target: target.into(),
            reason: "r".into(),
            status: PauseStatus::Active,
            requested_by: "op".into(),
            requested_at: 0,
            expires_at: 0,
            approved_by: None,
            approved_at: None,
            decision_reason: None,
            resumed_by: None,
            resumed_at: None,
            resume_reason: None,
            end_requested_by: None,
            end_requested_at: None,
            end_reason: None,
            end_expires_at: None,
        }
    }

    #[test]
    fn a_pause_says_what_it_stops_in_words() {
        assert_eq!(pause("submissions").what(), "submissions to the channel");
        assert_eq!(pause("job:query").what(), "query jobs");
        assert_eq!(
            pause("endpoint:we_1").what(),
            "webhook deliveries to endpoint we_1"
        );
        assert_eq!(pause("something:else").what(), "something:else");
    }
}

/// Passkeys for step-up (issue 36): the user's own, the admins' rule, a ceremony begun.
pub use converge_wire::passkeys::{PasskeyChallenge, PasskeyPolicy, PasskeyView};
