//! The merchant API's rate limit per API key (issue 37, bulkheads): a token bucket per key
//! ([`crate::domain::bucket`]), `--merchant-rate-per-sec` tokens a second up to
//! `--merchant-burst`, counted **per process** (servers sharing a database each count on
//! their own). Runs after authentication (it needs the key) and before the Idempotency-Key
//! layer, so a refused request claims no key and writes nothing.
//!
//! A refusal is 429 `rate_limited` with `Retry-After` (whole seconds). Every answer that went
//! through the limit carries the RateLimit header fields of
//! [draft-ietf-httpapi-ratelimit-headers-11](https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/)
//! (May 2026, the current draft; Structured Field Lists since -08):
//! `RateLimit-Policy: "merchant";q=<burst>;w=<seconds to refill>` and
//! `RateLimit: "merchant";r=<tokens left>;t=<seconds until full>`.

use std::sync::Mutex;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;

use super::ApiState;
use crate::domain::bucket::{BucketPolicy, Decision, TokenBuckets};
use crate::error::ApiError;

/// The policy's name in both header fields.
pub const POLICY: &str = "merchant";

/// The SHA-256 (hex) of the API key a request authenticated with: the rate limit's key.
/// Put in the request's extensions by the authentication layer.
#[derive(Debug, Clone)]
pub struct ApiKeyHash(pub String);

/// The buckets of this process, one per API key.
#[derive(Debug)]
pub struct MerchantLimiter {
    buckets: Mutex<TokenBuckets>,
}

impl MerchantLimiter {
    /// Buckets of `policy`.
    pub fn new(policy: BucketPolicy) -> Self {
        MerchantLimiter {
            buckets: Mutex::new(TokenBuckets::new(policy)),
        }
    }

    /// Takes a token for `key` at `now` (epoch ms); with the policy in force.
    pub fn take(&self, key: &str, now: i64) -> (Decision, BucketPolicy) {
        let mut b = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        (b.take(key, now), b.policy())
    }
}

/// Answers 429 `rate_limited` when the request's key has no token left; otherwise runs the
/// request. Both carry `RateLimit-Policy` and `RateLimit`; the refusal also `Retry-After`
/// and counts in `converge_rate_limited_total{scope="merchant"}`. A request without an
/// [`ApiKeyHash`] (none reaches here unauthenticated) is not limited.
pub async fn layer(State(st): State<ApiState>, req: Request, next: Next) -> Response {
    let Some(key) = req.extensions().get::<ApiKeyHash>().cloned() else {
        return next.run(req).await;
    };
    let (decision, policy) = st.limiter.take(&key.0, st.core.clock.now_ms());
    let mut resp = if decision.allowed {
        next.run(req).await
    } else {
        metrics::counter!("converge_rate_limited_total", "scope" => POLICY).increment(1);
        let mut r = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
            format!(
                "at most {} requests a second (bursts of {}) per API key; retry in {} s",
                policy.rate_per_sec, policy.burst, decision.retry_after_secs
            ),
        )
        .into_response();
        r.headers_mut()
            .insert("retry-after", number(decision.retry_after_secs));
        r
    };
    headers(resp.headers_mut(), &decision, &policy);
    resp
}

fn number(n: u64) -> HeaderValue {
    HeaderValue::from(n)
}

/// Writes the two RateLimit header fields of `decision` under `policy`.
fn headers(h: &mut HeaderMap, decision: &Decision, policy: &BucketPolicy) {
    let field = |s: String| HeaderValue::from_str(&s).ok();
    if let Some(v) = field(format!(
        "\"{POLICY}\";q={};w={}",
        policy.burst,
        policy.window_secs()
    )) {
        h.insert("ratelimit-policy", v);
    }
    if let Some(v) = field(format!(
        "\"{POLICY}\";r={};t={}",
        decision.remaining, decision.reset_secs
    )) {
        h.insert("ratelimit", v);
    }
}
