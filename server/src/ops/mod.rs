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

use crate::config::ActionSettings;
use crate::service::Core;

/// What the console's handlers and server functions share: the use cases, their settings, and
/// the console's own machinery (sign-in, rate limits of bulk work, the audit signing key, the
/// live hub). The merchant API's state is [`crate::api::ApiState`].
#[derive(Clone)]
pub struct OpsState {
    /// The use cases.
    pub core: Core,
    /// When a payment counts as stuck (`--stuck-*-ms`): the dashboard and bulk retries.
    pub stuck: crate::domain::stuck::StuckThresholds,
    /// Maker-checker requests (`--action-ttl-secs`).
    pub actions: ActionSettings,
    /// Console sign-in machinery.
    pub auth: Arc<auth::Auth>,
    /// Bulk retries per user ([`actions::BULK_RETRIES_PER_MINUTE`] a minute): one operator
    /// cannot flood the channel by confirming selections in a loop.
    pub bulk_limiter: Arc<std::sync::Mutex<crate::domain::ratelimit::RateLimiter>>,
    /// Single `query` and `retry` actions per user (`--action-limit-per-minute` a minute):
    /// they run at once, so without it one operator could hammer the channel in a loop.
    pub action_limiter: Arc<std::sync::Mutex<crate::domain::ratelimit::RateLimiter>>,
    /// Webhook endpoint recoveries per user ([`webhooks::RECOVERIES_PER_MINUTE`] a minute).
    pub recover_limiter: Arc<std::sync::Mutex<crate::domain::ratelimit::RateLimiter>>,
    /// The audit checkpoint signing key (`--audit-signing-key`), when one was given.
    pub audit_key: Option<Arc<ed25519_dalek::SigningKey>>,
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

    /// Requests action `req` as console user `p` from client address `addr`
    /// ([`Core::request_action`]), a `query` or `retry` first spending one of `p`'s
    /// allowance in [`Self::action_limiter`]; the JSON endpoint and the console's server
    /// function both come here. Errors: `RateLimited` (429 `rate_limited` with
    /// `Retry-After`) over the allowance, with nothing recorded; the rest as
    /// [`Core::request_action`]'s.
    pub async fn request_action(
        &self,
        p: &auth::Principal,
        addr: &str,
        req: &crate::service::actions::ActionRequest,
    ) -> Result<crate::store::ActionRecord, crate::service::actions::ActionError> {
        use crate::domain::actions::ActionKind;
        if matches!(
            req.kind.parse::<ActionKind>(),
            Ok(ActionKind::Query | ActionKind::Retry)
        ) {
            let now = self.core.clock.now_ms();
            let mut limiter = self
                .action_limiter
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !limiter.try_acquire(&p.username, now) {
                let secs = limiter.retry_after_secs(&p.username, now).max(1);
                return Err(crate::service::actions::ActionError::RateLimited(
                    format!(
                        "at most {} query and retry actions a minute; retry in {secs} s",
                        self.actions.action_limit_per_minute
                    ),
                    secs,
                ));
            }
        }
        self.core
            .request_action(&p.actor(addr), req, self.actions.ttl_ms())
            .await
    }

    /// What bounds an error-pool item's retry or query (issue 41): the action lifetime and
    /// the same per-user allowance as a single query or retry
    /// ([`crate::service::pool_actions`]).
    pub fn item_limits(&self) -> crate::service::pool_actions::ItemLimits<'_> {
        crate::service::pool_actions::ItemLimits {
            ttl_ms: self.actions.ttl_ms(),
            limiter: &self.action_limiter,
            per_minute: self.actions.action_limit_per_minute,
        }
    }

    /// What bounds a bulk retry from the console: the stuck thresholds, the action lifetime
    /// and the per-user allowance ([`crate::service::bulk`]).
    pub fn bulk_limits(&self) -> crate::service::bulk::BulkLimits<'_> {
        crate::service::bulk::BulkLimits {
            thresholds: &self.stuck,
            ttl_ms: self.actions.ttl_ms(),
            limiter: &self.bulk_limiter,
        }
    }
}
