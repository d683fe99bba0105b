//! The JSON shapes the ops console exchanges with the server, in one place for both sides:
//! the server serialises these very types for `/ops/v1` and the console's server functions,
//! and the browser (WebAssembly, which must not depend on the server crate) deserialises
//! them. A field renamed here is renamed on both sides at once.
//!
//! Plain data with serde only, so it builds for `wasm32-unknown-unknown`. The `utoipa`
//! feature (the server's) derives `utoipa::ToSchema` for the OpenAPI document. Times are
//! epoch ms UTC; amounts are integer minor units.

pub mod audit;
pub mod bulk;
pub mod dashboard;
pub mod error_pool;
pub mod governance;
pub mod merchants;
pub mod users;
pub mod webhooks;

pub use audit::{AuditList, AuditRecord, AuditRow};
pub use bulk::{BulkItem, BulkOutcome};
pub use dashboard::{
    Dashboard, ErrorPoolView, HitRate, IdempotencyView, MinutePoint, QueueRow, QueueView,
    RelayStatus, RouteOutcomes, StuckPayment, StuckView,
};
pub use error_pool::{ErrorItem, KindCount, PoolPage, ResolveOutcome};
pub use governance::ActionRecord;
pub use merchants::{Merchant, MerchantKey};
pub use users::{PrincipalView, UserView};
pub use webhooks::{
    AttemptRow, DeliveryDetail, DeliveryRow, EndpointRow, OutboxEvent, WebhookBacklog,
    WebhooksOverview,
};
