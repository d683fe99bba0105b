//! "Find anything, by any id" and the Idempotency-Key page (issue 17): what the console's
//! search box and key page show, for the `/ops/v1` handlers and the console's server
//! functions alike.

use base64::Engine;
use serde::Serialize;
use utoipa::ToSchema;

use super::Core;
use crate::domain::money;
use crate::idempotency::key::{MAX_KEY_LEN, validate_key};
use crate::store::{IdKind, IdMatch, KeyOutcomeCount, MAX_ID_MATCHES, StoreError};

/// The longest query, in characters: the longest Idempotency-Key (longer than any id).
pub const MAX_QUERY_LEN: usize = MAX_KEY_LEN;

/// Why a search was refused.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// Nothing to search for: blank, or containing control characters (no id has them).
    #[error("type an id, or the start of one")]
    Invalid,
    /// Longer than [`MAX_QUERY_LEN`] characters.
    #[error("a search is at most 255 characters")]
    TooLong,
    /// A key that cannot exist (not 1 to 255 visible ASCII characters).
    #[error("an Idempotency-Key is 1 to 255 visible ASCII characters")]
    InvalidKey,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One thing found, with where the console shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(example = json!({
    "kind": "idempotency_key", "id": "order-1-create", "label": "key of acme · done · payment pay_7f3a9c2e4b1d8f6a0c5e2b9d",
    "link": "/keys/1/order-1-create", "payment_id": "pay_7f3a9c2e4b1d8f6a0c5e2b9d", "merchant": "acme"
}))]
pub struct SearchHit {
    /// Which kind of id matched.
    pub kind: IdKind,
    /// The id that matched, as stored.
    pub id: String,
    /// One line saying what it is (merchant, amount in major units, status).
    pub label: String,
    /// The console page that shows it: the payment page for a payment, order, channel key,
    /// refund, action or an error-pool item of a payment; the key page for a key; the
    /// approvals inbox for a pending action; the error pool for an item without a payment.
    pub link: String,
    /// The payment it is or belongs to.
    pub payment_id: Option<String>,
    /// The owning merchant's name, when known.
    pub merchant: Option<String>,
}

/// The answer of a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SearchResult {
    /// The query as searched (trimmed).
    pub query: String,
    /// At most 20, by kind (payment, merchant order, key, channel key, refund, error item,
    /// action) and id.
    pub hits: Vec<SearchHit>,
    /// More things match than were returned: type more of the id.
    pub truncated: bool,
}

/// Searches every kind of id for `raw` (trimmed) by prefix, ignoring case.
///
/// Errors: `Invalid` for a blank query or one with control characters, `TooLong` past
/// [`MAX_QUERY_LEN`] characters, `Store` when storage fails.
pub async fn search(core: &Core, raw: &str) -> Result<SearchResult, LookupError> {
    let query = raw.trim();
    if query.is_empty() || query.chars().any(char::is_control) {
        return Err(LookupError::Invalid);
    }
    if query.chars().count() > MAX_QUERY_LEN {
        return Err(LookupError::TooLong);
    }
    // One more than shown, to know whether there are more.
    let mut found = core.store.find_ids(query, MAX_ID_MATCHES + 1).await?;
    let truncated = found.len() as i64 > MAX_ID_MATCHES;
    found.truncate(MAX_ID_MATCHES as usize);
    let merchants = core.store.merchants().await?;
    let name = |id: Option<i64>| {
        id.and_then(|id| merchants.iter().find(|m| m.id == id))
            .map(|m| m.name.clone())
    };
    let hits = found
        .into_iter()
        .filter_map(|m| {
            let merchant = name(m.merchant_id);
            hit(m, merchant)
        })
        .collect();
    Ok(SearchResult {
        query: query.to_string(),
        hits,
        truncated,
    })
}

fn hit(m: IdMatch, merchant: Option<String>) -> Option<SearchHit> {
    let kind = IdKind::ALL.into_iter().find(|k| k.as_str() == m.kind)?;
    let pid = m.payment_id.clone();
    let pay = pid.as_deref().unwrap_or("");
    let amount = match (m.amount, m.currency.as_deref()) {
        (Some(a), Some(c)) => money::display(a, c),
        _ => String::new(),
    };
    let of = merchant.as_deref().unwrap_or("unknown merchant");
    let payment_link = format!("/payments/{}", path_segment(pay));
    let (label, link) = match kind {
        IdKind::Payment => (
            format!("payment of {of} · {amount} · {}", m.status),
            payment_link,
        ),
        IdKind::MerchantOrder => (
            format!("order of {of} · payment {pay} · {amount} · {}", m.status),
            payment_link,
        ),
        IdKind::IdempotencyKey => (
            match &pid {
                Some(p) => format!("key of {of} · {} · payment {p}", m.status),
                None => format!("key of {of} · {}", m.status),
            },
            key_link(m.merchant_id.unwrap_or_default(), &m.value),
        ),
        IdKind::ChannelKey => (
            format!("channel key of payment {pay} · {amount} · {}", m.status),
            payment_link,
        ),
        IdKind::Refund => (
            format!("refund of {pay} · {amount} · {}", m.status),
            payment_link,
        ),
        IdKind::ErrorItem => match &pid {
            Some(p) => (
                format!("error-pool item #{} · {} · payment {p}", m.value, m.status),
                payment_link,
            ),
            None => (
                format!("error-pool item #{} · {}", m.value, m.status),
                "/error-pool".to_string(),
            ),
        },
        IdKind::Action => (
            format!("action on {pay} · {}", m.status),
            if m.status == "pending" {
                "/approvals".to_string()
            } else {
                payment_link
            },
        ),
    };
    Some(SearchHit {
        kind,
        id: m.value,
        label,
        link,
        payment_id: pid,
        merchant,
    })
}

/// The console path of a key's page: `/keys/{merchant_id}/{key}`, the key percent-encoded
/// as one path segment.
pub fn key_link(merchant_id: i64, idem_key: &str) -> String {
    format!("/keys/{merchant_id}/{}", path_segment(idem_key))
}

/// `s` percent-encoded as one URL path segment: every byte but ASCII letters, digits, `-`,
/// `_` and `~` (a `.` too, so no key reads as a dot segment part).
pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A stored response header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct HeaderLine {
    /// Lower-case name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// The response a key replays, exactly as a retry receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct StoredResponseView {
    /// HTTP status.
    pub status: i64,
    /// The headers sent with it, in order: the stored ones, then `idempotent-replayed: true`,
    /// which every replay adds.
    pub headers: Vec<HeaderLine>,
    /// The body as text, byte for byte, when it is UTF-8 (JSON always is).
    pub body: Option<String>,
    /// The body in base64 when it is not UTF-8.
    pub body_base64: Option<String>,
    /// Body length in bytes.
    pub body_bytes: i64,
}

/// Everything about one stored Idempotency-Key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct KeyDetail {
    /// Owner's id.
    pub merchant_id: i64,
    /// Owner's name.
    pub merchant: String,
    /// The client's key.
    pub idem_key: String,
    /// Route template, e.g. `POST /v1/payments/{id}/refunds`.
    pub route: String,
    /// The route with its ids, e.g. `POST /v1/payments/pay_x/refunds`: a retry must match it.
    pub scope: String,
    /// SHA-256 of the canonical request body: a retry must match it.
    pub fingerprint: String,
    /// `running` (its request has not finished; others get 409) or `done` (replayed).
    pub state: String,
    /// While running: when its claim lapses and a retry may take it over, epoch ms UTC.
    pub lease_expires_at: Option<i64>,
    /// What its request created (payment, refund or webhook endpoint id).
    pub resource_id: Option<String>,
    /// The payment it made, or whose refund it made.
    pub payment_id: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// When it is purged and the key may be used again, epoch ms UTC.
    pub expires_at: i64,
    /// The stored response (done keys only).
    pub response: Option<StoredResponseView>,
    /// What later requests with it got: `replay`, `in_use`, `reused`.
    pub outcomes: Vec<KeyOutcomeCount>,
}

/// Key `idem_key` of merchant `merchant_id`; None when there is none (never stored, refused,
/// or purged).
///
/// Errors: `InvalidKey` for a key no request could have stored, `Store` when storage fails.
pub async fn key_detail(
    core: &Core,
    merchant_id: i64,
    idem_key: &str,
) -> Result<Option<KeyDetail>, LookupError> {
    let key = validate_key(Some(idem_key.as_bytes())).map_err(|_| LookupError::InvalidKey)?;
    let store = &core.store;
    let Some(rec) = store.idempotency_key(merchant_id, &key).await? else {
        return Ok(None);
    };
    let merchant = store
        .merchant(merchant_id)
        .await?
        .map(|m| m.name)
        .unwrap_or_default();
    let payment_id = match rec.resource_id.as_deref() {
        None => None,
        Some(r) => match store.payment(r).await? {
            Some(p) => Some(p.id),
            None => store.refund(r).await?.map(|f| f.payment_id),
        },
    };
    let response = rec.response_status.map(|status| {
        let mut headers: Vec<HeaderLine> = rec
            .response_headers
            .as_deref()
            .and_then(|h| serde_json::from_str::<Vec<(String, String)>>(h).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|(name, value)| HeaderLine { name, value })
            .collect();
        headers.push(HeaderLine {
            name: crate::idempotency::key::REPLAYED.to_string(),
            value: "true".into(),
        });
        let bytes = rec.response_body.clone().unwrap_or_default();
        let (body, body_base64) = match String::from_utf8(bytes.clone()) {
            Ok(text) => (Some(text), None),
            Err(_) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
            ),
        };
        StoredResponseView {
            status,
            headers,
            body,
            body_base64,
            body_bytes: bytes.len() as i64,
        }
    });
    // This process's own outcome counts are written before they are read.
    if let Err(e) = core.flush_outcomes().await {
        tracing::warn!(error = %e, "idempotency outcome counts not flushed; the key's counts lag");
    }
    let outcomes = store.key_outcomes(merchant_id, &key).await?;
    Ok(Some(KeyDetail {
        merchant_id,
        merchant,
        lease_expires_at: rec.lease_expires_at.filter(|_| rec.state == "running"),
        idem_key: rec.idem_key,
        route: rec.route,
        scope: rec.scope,
        fingerprint: rec.fingerprint,
        state: rec.state,
        resource_id: rec.resource_id,
        payment_id,
        created_at: rec.created_at,
        expires_at: rec.expires_at,
        response,
        outcomes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_becomes_one_path_segment() {
        assert_eq!(path_segment("Order-1_a~"), "Order-1_a~");
        assert_eq!(path_segment("a/b?c#d%e"), "a%2Fb%3Fc%23d%25e");
        assert_eq!(path_segment(".."), "%2E%2E");
        assert_eq!(key_link(3, "k 1"), "/keys/3/k%201");
    }
}
