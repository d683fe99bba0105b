//! The JSON shapes the ops console exchanges with the server, in one place for both sides:
//! the server serialises these very types for `/ops/v1` and the console's server functions,
//! and the browser (WebAssembly, which must not depend on the server crate) deserialises
//! them. A field renamed here is renamed on both sides at once.
//!
//! Besides the shapes, the vocabulary both sides name: the payment statuses
//! ([`PaymentStatus`]), the statuses of the other lifecycles (jobs, refunds, maker-checker
//! requests, webhook deliveries and endpoints, error-pool items, pauses: [`lifecycle`]), the
//! webhook event types ([`EventType`]), the ops action kinds ([`ActionKind`]), the stable
//! error codes ([`ErrorCode`]), the currencies' minor units ([`money`]), the console roles
//! ([`Role`]) and the stuck-age buckets ([`dashboard::AGE_BUCKETS`]) are defined here once
//! and re-exported by the server's domain, so the console lists them without a copy to keep
//! in step.
//!
//! Plain data with serde only, so it builds for `wasm32-unknown-unknown`. The `utoipa`
//! feature (the server's) derives `utoipa::ToSchema` for the OpenAPI document; the `sqlx`
//! feature (the server's) derives `sqlx::FromRow` on the records the store reads as rows, so
//! no row type repeats their fields. Times are
//! epoch ms UTC; amounts are integer minor units.

pub mod actions;
pub mod audit;
pub mod bulk;
pub mod codes;
pub mod dashboard;
pub mod error_pool;
pub mod governance;
pub mod lifecycle;
pub mod lookup;
pub mod merchants;
pub mod money;
pub mod passkeys;
pub mod pauses;
pub mod payments;
#[cfg(feature = "utoipa")]
pub mod schema;
pub mod status;
pub mod users;
pub mod webhooks;

pub use actions::{ActionKind, AnswerTone, QueryAnswer};
pub use audit::{
    AuditList, AuditListQuery, AuditRecord, AuditRow, AuditVerify, Break, ChainHead, CheckpointView,
};
pub use bulk::{BulkItem, BulkOutcome};
pub use codes::ErrorCode;
pub use dashboard::{
    AttemptOutcome, ChannelHealthView, ConnectorHealth, Dashboard, ErrorPoolView, FailureGroup,
    FailureReason, HealthBucket, HealthLevel, HitRate, IdempotencyView, MinutePoint, QueueRow,
    QueueView, RelayStatus, RouteOutcomes, StuckPayment, StuckView,
};
pub use error_pool::{
    ErrorItem, ItemAction, ItemActionOffer, ItemActionOutcome, KindCount, PoolPage, ResolveOutcome,
};
pub use governance::{
    ActionRecord, ApprovalInbox, ApprovalItem, ConsoleChange, PrivilegeApproved, PrivilegeInbox,
    PrivilegeRequest,
};
pub use lifecycle::{
    ActionStatus, CaptureStatus, DeliveryStatus, EndpointStatus, ErrorItemStatus, JobStatus,
    PauseStatus, RefundStatus,
};
pub use lookup::{
    HeaderLine, IdKind, KeyDetail, KeyOutcomeCount, SearchHit, SearchResult, StoredResponseView,
};
pub use merchants::{Merchant, MerchantAccount, MerchantKey, MerchantOverview};
pub use pauses::{PauseOverview, PauseRecord};
pub use payments::{
    ActionOffer, EventRecord, Job, KeySummary, LedgerEntry, Payment, PaymentDetail, PaymentPage,
    PaymentSearch, Refund, ReversalView,
};
pub use status::{PaymentStatus, UnknownName};
pub use users::{PrincipalView, Role, UserView};
pub use webhooks::{
    AttemptRow, BreakerStatus, DeliveryDetail, DeliveryRow, DeliverySearch, EndpointRow, EventType,
    OutboxEvent, PaymentWebhooks, WebhookBacklog, WebhooksOverview,
};
