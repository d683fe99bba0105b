//! The ops console's backend (DESIGN.md "Ops console"): sign-in, sessions, roles, CSRF, and
//! the stable JSON endpoints under `/ops/v1` that scripts, tests and the console's server
//! functions use.

pub mod actions;
pub mod audit;
pub mod auth;
pub mod csrf;
pub mod dashboard;
pub mod error_pool;
pub mod extract;
pub mod handlers;
pub mod live;
pub mod lookup;
pub mod pauses;
pub mod payments_export;
pub mod principal;
pub mod session;
pub mod webhooks;

pub use handlers::{SearchQuery, routes, run_search};
// The user use cases and password hashing live in the service layer; these paths stay for
// the callers that still name them here.
pub use crate::service::{password, users};
