//! Merchant authentication: `Authorization: Bearer <key>`; the key's SHA-256 is looked up.
//! API keys are 256-bit random, so a fast hash is enough (no password stretching needed).

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;

use super::ApiState;
use crate::domain::fingerprint::sha256_hex;
use crate::domain::freeze::{self, Frozen, NewWork};
use crate::error::ApiError;
use crate::store::Merchant;

/// 403 `merchant_frozen` when `m` is frozen and so may not start `work`: the rule is
/// `domain::freeze`'s.
pub fn refuse_frozen(m: &Merchant, work: NewWork) -> Result<(), ApiError> {
    freeze::may_start(m.frozen, work).map_err(frozen)
}

/// 403 `merchant_frozen`, with the refusal's message.
pub fn frozen(refused: Frozen) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::MerchantFrozen,
        refused.to_string(),
    )
}

/// Puts the authenticated [`Merchant`](crate::store::Merchant) in the request extensions, or
/// answers 401 `unauthorized`.
pub async fn merchant(State(st): State<ApiState>, mut req: Request, next: Next) -> Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let Some(token) = token else {
        return unauthorized().into_response();
    };
    // Looked up in the database on every request (no cache): a revoked key is refused at once
    // by every server sharing it.
    let hash = sha256_hex(token.as_bytes());
    match st.core.store.merchant_by_key_hash(&hash).await {
        Ok(Some(m)) => {
            // Last use, at most one write a minute per key and process; a failure here refuses
            // nothing.
            let now = st.core.clock.now_ms();
            if touch_due(&hash, now)
                && let Err(e) = st.core.store.touch_merchant_key(&hash, now).await
            {
                tracing::warn!(error = %e, "key last-use not recorded");
            }
            req.extensions_mut().insert(m);
            req.extensions_mut()
                .insert(super::ratelimit::ApiKeyHash(hash));
            next.run(req).await
        }
        Ok(None) => unauthorized().into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Whether this process should record a use of the key with this hash now: once a minute per
/// key, so authentication does not write on every request. Only timestamps live here; the
/// key's validity is always read from the database.
fn touch_due(hash: &str, now: i64) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static LAST: OnceLock<Mutex<HashMap<String, i64>>> = OnceLock::new();
    let mut last = LAST
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if last.len() > 100_000 {
        last.clear();
    }
    match last.get(hash) {
        Some(&t) if now - t < 60_000 => false,
        _ => {
            last.insert(hash.to_string(), now);
            true
        }
    }
}

fn unauthorized() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        ErrorCode::Unauthorized,
        "send Authorization: Bearer <merchant API key>",
    )
}

/// The token of an `Authorization: Bearer <token>` value. The scheme name is case-insensitive
/// (RFC 9110 section 11.1), so `bearer x` is the same credential as `Bearer x`.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_needs_a_token() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }
}
