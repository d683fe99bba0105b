//! The ops console's backend (DESIGN.md "Ops console"): sign-in, sessions, roles, CSRF, and
//! the stable JSON endpoints under `/ops/v1` that scripts, tests and the console's server
//! functions use.

pub mod actions;
pub mod audit;
pub mod auth;
pub mod csrf;
pub mod error_pool;
pub mod extract;
pub mod handlers;
pub mod live;
pub mod lookup;
pub mod passkeys;
pub mod pauses;
pub mod payments_export;
pub mod principal;
pub mod privilege;
pub mod session;
pub mod webhooks;

pub use handlers::routes;
// The user use cases and password hashing live in the service layer; these paths stay for
// the callers that still name them here.
pub use crate::service::{password, users};

use std::sync::Arc;

use crate::service::Core;

/// What the console's handlers and server functions share: the use cases (with the settings
/// and per-user allowances they need, [`Core::console`]) and the console's own machinery
/// (sign-in, the live hub). The merchant API's state is [`crate::api::ApiState`].
#[derive(Clone)]
pub struct OpsState {
    /// The use cases.
    pub core: Core,
    /// Console sign-in machinery.
    pub auth: Arc<auth::Auth>,
    /// The live console's change watcher and its subscribers (`GET /ops/v1/live`).
    pub live: Arc<live::LiveHub>,
}

impl OpsState {
    /// The step-up of console user `p` at client address `addr`, with the password as
    /// entered: what an approval that asks for the password again takes
    /// ([`crate::service::step_up`]).
    pub fn step_up<'a>(
        &'a self,
        p: &'a auth::Principal,
        addr: &'a str,
        password: &'a str,
    ) -> crate::service::step_up::StepUp<'a> {
        self.step_up_with(p, addr, crate::service::step_up::Proof::Password(password))
    }

    /// The step-up of console user `p` at client address `addr` with `proof`: the password,
    /// or a passkey assertion.
    pub fn step_up_with<'a>(
        &'a self,
        p: &'a auth::Principal,
        addr: &'a str,
        proof: crate::service::step_up::Proof<'a>,
    ) -> crate::service::step_up::StepUp<'a> {
        crate::service::step_up::StepUp {
            credentials: &self.auth.credentials,
            passkeys: &self.auth.passkeys,
            who: p.actor(addr),
            addr,
            proof,
        }
    }
}
