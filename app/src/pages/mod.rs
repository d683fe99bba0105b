//! Console pages, one module per route.

pub mod approvals;
pub mod audit;
pub mod dashboard;
pub mod error_pool;
pub mod key;
pub mod login;
pub mod merchant;
pub mod merchants;
pub mod passkeys;
pub mod pauses;
pub mod payment;
pub mod payments;
pub mod privilege_requests;
pub mod search;
pub mod status;
pub mod users;
pub mod webhooks;
