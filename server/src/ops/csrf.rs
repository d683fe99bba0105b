//! CSRF defence for the console (DESIGN.md "Ops console": state-changing ops requests accept
//! JSON only and check Origin; OWASP CSRF Prevention Cheat Sheet, "Verifying Origin with
//! Standard Headers" and "Fetch Metadata"). Applies to every non-GET request under `/ops/`
//! and to the console's server functions under `/api/`, and to the GETs that write: the two
//! exports ([`AUDITED_READS`]), each of which appends an audit record; the merchant API
//! (`/v1/`) uses bearer keys, not cookies, and is left alone.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;

use crate::error::ApiError;

/// GETs with a side effect (each export is audited before it starts): a page on a sibling
/// origin could otherwise start one with the user's cookie (`<img src>`, a link), and fill
/// the audit log in their name (issue 36). They stay GETs, so the console's download links
/// and scripts keep working: a same-origin link sends `Sec-Fetch-Site: same-origin`, a typed
/// address or a bookmark `none`, and a script (curl, the CLI) neither header.
pub const AUDITED_READS: [&str; 2] = ["/ops/v1/audit/export", "/ops/v1/payments/export"];

/// Refuses cross-site state changes and [`AUDITED_READS`]: an `Origin` must name this host;
/// without one, a `Sec-Fetch-Site` other than `same-origin`/`none` is refused. `/ops/v1`
/// writes must also be `application/json` (a cross-site form cannot send that without a CORS
/// preflight). A request with neither header (a script, an old browser) passes.
pub async fn guard(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let guarded = path.starts_with("/ops/") || path.starts_with("/api/");
    let safe = match *req.method() {
        Method::GET | Method::HEAD => !AUDITED_READS.contains(&path),
        Method::OPTIONS => true,
        _ => false,
    };
    if !guarded || safe {
        return next.run(req).await;
    }
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Some(origin) = headers.get(header::ORIGIN) {
        let same = origin
            .to_str()
            .ok()
            .and_then(|o| {
                o.strip_prefix("http://")
                    .or_else(|| o.strip_prefix("https://"))
            })
            .is_some_and(|o| !host.is_empty() && o.eq_ignore_ascii_case(host));
        if !same {
            return forbidden("cross-origin request refused");
        }
    } else if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && site != "same-origin"
        && site != "none"
    {
        return forbidden("cross-site request refused");
    }
    // `/ops/v1` changes are JSON: their handlers take `ApiJson` (or, for logout, which has no
    // body, check the content type), so a method a route does not take reaches the router and
    // gets its 405 (schemathesis found PUT, POST and TRACE on GET routes answered 415 here).
    next.run(req).await
}

fn forbidden(message: &str) -> Response {
    ApiError::new(StatusCode::FORBIDDEN, ErrorCode::CsrfRejected, message).into_response()
}

/// Refuses console and ops requests whose `Host` is not one of `allowed` (DNS rebinding: a
/// page on an attacker's name that resolves to this server must not read the console). The
/// merchant API (`/v1`), `/health` and `/metrics` answer any Host.
pub async fn host_guard(
    axum::extract::State(allowed): axum::extract::State<std::sync::Arc<Vec<String>>>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if path == "/v1" || path.starts_with("/v1/") || path == "/health" || path == "/metrics" {
        return next.run(req).await;
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(crate::config::host_name)
        .or_else(|| req.uri().host().map(crate::config::host_name));
    match host {
        Some(h) if allowed.contains(&h) => next.run(req).await,
        _ => ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::HostNotAllowed,
            "this Host is not one the console answers to (see --allowed-hosts)",
        )
        .into_response(),
    }
}
