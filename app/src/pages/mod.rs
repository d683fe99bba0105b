//! Console pages, one module per route.

pub mod approvals;
pub mod audit;
pub mod dashboard;
pub mod error_pool;
pub mod login;
pub mod merchants;
pub mod pauses;
pub mod payment;
pub mod payments;
pub mod status;
pub mod users;
pub mod webhooks;
