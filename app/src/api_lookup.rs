//! Server functions and data of "find anything, by any id" and the Idempotency-Key page
//! (issue 17): thin over `converge_server::service::lookup`, viewer role, refusals with the
//! `/ops/v1` endpoints' statuses and codes. The data types are `converge_wire::lookup`'s,
//! which the server builds; times are epoch ms UTC, amounts minor units.

use leptos::prelude::*;

pub use converge_wire::lookup::{
    HeaderLine, IdKind, KeyDetail, KeyOutcomeCount as KeyOutcome, SearchHit, SearchResult,
    StoredResponseView as StoredResponse,
};

/// The console path of a key's page (the server builds the same in search hits): the key
/// percent-encoded as one path segment.
pub fn key_path(merchant_id: i64, idem_key: &str) -> String {
    let mut out = format!("/keys/{merchant_id}/");
    for b in idem_key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `s` with its `%XX` sequences decoded once (and `+` as a space when `plus` is set, as
/// forms encode it); a malformed sequence stays as it is. The router decodes query values
/// twice, which would turn a searched `%25` into `%`, so the pages decode the raw URL.
pub fn percent_decode(s: &str, plus: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let hex = |c: u8| char::from(c).to_digit(16);
        if b == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(if plus && b == b'+' { b' ' } else { b });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of `name` in a raw query string (`a=1&q=x%20y`, without `?`), decoded once.
pub fn query_value(search: &str, name: &str) -> Option<String> {
    search
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| percent_decode(v, true))
}

/// Finds things whose id starts with `q`, any case (viewer). Refusals: 400 `invalid_query`
/// (blank, control characters), 400 `query_too_long` (over 255 characters).
#[server(endpoint = "find")]
pub async fn find_ids(q: String) -> Result<SearchResult, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = crate::api::ssr::authorize(Permission::View).await?;
    st.core
        .lookup(&q)
        .await
        .map_err(|e| crate::api::ssr::api_error(e.into()))
}

/// Key `key` of merchant `merchant_id` (viewer). Refusals: 400 `idempotency_key_invalid`,
/// 404 `not_found`.
#[server(endpoint = "idempotency_key")]
pub async fn load_key(merchant_id: i64, key: String) -> Result<KeyDetail, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = crate::api::ssr::authorize(Permission::View).await?;
    match st
        .core
        .key_detail(merchant_id, &key)
        .await
        .map_err(|e| crate::api::ssr::api_error(e.into()))?
    {
        Some(d) => Ok(d),
        None => Err(crate::api::ssr::api_error(
            converge_server::error::ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                converge_wire::ErrorCode::NotFound,
                format!(
                    "merchant {merchant_id} has no stored key {key:?} (never used, refused, or purged after its retention)"
                ),
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_value_is_decoded_once() {
        assert_eq!(query_value("q=ORD_A%251", "q").as_deref(), Some("ORD_A%1"));
        assert_eq!(query_value("x=1&q=a+b%2Fc", "q").as_deref(), Some("a b/c"));
        assert_eq!(query_value("q=%", "q").as_deref(), Some("%"));
        assert_eq!(query_value("q=%4", "q").as_deref(), Some("%4"));
        assert_eq!(query_value("a=1", "q"), None);
        assert_eq!(percent_decode("a%2Fb+c", false), "a/b+c");
    }

    #[test]
    fn a_key_path_encodes_the_key_as_one_segment() {
        assert_eq!(key_path(2, "Pay/Key?1#x%"), "/keys/2/Pay%2FKey%3F1%23x%25");
    }
}
