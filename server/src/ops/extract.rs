//! What the console's handlers read from a request besides its body: the client address
//! ([`ClientAddr`], for rate limits and the audit log); and the empty body ([`Empty`]) that a
//! state change without fields still sends as JSON. Every console module takes it from
//! here, so none imports another's handlers for it. The time filters are
//! `service::queries::parse_time`'s.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use serde::Deserialize;
use utoipa::ToSchema;

/// An empty JSON object body (`{}`), required so that state changes are JSON.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// The client's IP address as text (`unknown` when the server runs without connect info),
/// for rate limiting and the audit log. Derived once per request by [`resolve_client_addr`]
/// (the one place that reads `X-Forwarded-For`, and only from `--trusted-proxy` peers); the
/// console's server functions read the same value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddr(pub String);

/// The client address of a request with `extensions` (its connect info) and `headers`:
/// the TCP peer, or behind a trusted proxy the rightmost untrusted `X-Forwarded-For` hop
/// ([`crate::domain::netaddr::client_ip`]).
pub fn client_addr_of(
    extensions: &axum::http::Extensions,
    headers: &axum::http::HeaderMap,
    trusted: &[crate::domain::netaddr::Cidr],
) -> String {
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let forwarded: Vec<&str> = if trusted.is_empty() {
        Vec::new()
    } else {
        headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    };
    crate::domain::netaddr::client_ip(peer, &forwarded, trusted)
        .map_or_else(|| "unknown".into(), |ip| ip.to_string())
}

/// Middleware: puts the request's [`ClientAddr`] in its extensions (state: the trusted
/// proxies).
pub async fn resolve_client_addr(
    State(trusted): State<std::sync::Arc<Vec<crate::domain::netaddr::Cidr>>>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let addr = client_addr_of(req.extensions(), req.headers(), &trusted);
    req.extensions_mut().insert(ClientAddr(addr));
    next.run(req).await
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        // Without the middleware (a router built by hand) no forwarded header is believed.
        Ok(parts
            .extensions
            .get::<ClientAddr>()
            .cloned()
            .unwrap_or_else(|| ClientAddr(client_addr_of(&parts.extensions, &parts.headers, &[]))))
    }
}
