//! Merchant authentication: `Authorization: Bearer <key>`; the key's SHA-256 is looked up.
//! API keys are 256-bit random, so a fast hash is enough (no password stretching needed).

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::domain::fingerprint::sha256_hex;
use crate::error::ApiError;

/// Puts the authenticated [`Merchant`](crate::store::Merchant) in the request extensions, or
/// answers 401 `unauthorized`.
pub async fn merchant(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let Some(token) = token else {
        return unauthorized().into_response();
    };
    match st
        .core
        .store
        .merchant_by_key_hash(&sha256_hex(token.as_bytes()))
        .await
    {
        Ok(Some(m)) => {
            req.extensions_mut().insert(m);
            next.run(req).await
        }
        Ok(None) => unauthorized().into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

fn unauthorized() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
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
