//! "Find anything, by any id" and the Idempotency-Key page (issue 17): what the console's
//! search box and key page show, for the `/ops/v1` handlers and the console's server
//! functions alike.

use base64::Engine;

use super::Core;
use crate::domain::idempotency::{KeyState, MAX_KEY_LEN, validate_key};
use crate::domain::money;
use crate::domain::secret_box::{self, Purpose};
use crate::domain::webhooks as wh;
use crate::store::{IdKind, IdMatch, MAX_ID_MATCHES, StoreError};

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

pub use converge_wire::lookup::{SearchHit, SearchResult};

impl Core {
    /// Searches every kind of id for `raw` (trimmed) by prefix, ignoring case; merchant order
    /// ids also by what they hold further in, and payments by amount (issue 41; see
    /// [`Lookup::find_ids`](crate::store::Lookup::find_ids)).
    ///
    /// Errors: `Invalid` for a blank query or one with control characters, `TooLong` past
    /// [`MAX_QUERY_LEN`] characters, `Store` when storage fails.
    pub async fn lookup(&self, raw: &str) -> Result<SearchResult, LookupError> {
        let query = raw.trim();
        if query.is_empty() || query.chars().any(char::is_control) {
            return Err(LookupError::Invalid);
        }
        if query.chars().count() > MAX_QUERY_LEN {
            return Err(LookupError::TooLong);
        }
        // One more than shown, to know whether there are more.
        let mut found = self.store.find_ids(query, MAX_ID_MATCHES + 1).await?;
        let truncated = found.len() as i64 > MAX_ID_MATCHES;
        found.truncate(MAX_ID_MATCHES as usize);
        let merchants = self.store.merchants().await?;
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
        IdKind::Payment | IdKind::Amount => (
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
            if m.status == converge_wire::lifecycle::ActionStatus::Pending.as_str() {
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

pub use converge_wire::lookup::{HeaderLine, KeyDetail, StoredResponseView};

impl Core {
    /// Key `idem_key` of merchant `merchant_id`; None when there is none (never stored, refused,
    /// or purged).
    ///
    /// Errors: `InvalidKey` for a key no request could have stored, `Store` when storage fails.
    pub async fn key_detail(
        &self,
        merchant_id: i64,
        idem_key: &str,
    ) -> Result<Option<KeyDetail>, LookupError> {
        let key = validate_key(Some(idem_key.as_bytes())).map_err(|_| LookupError::InvalidKey)?;
        let store = &self.store;
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
                name: crate::domain::idempotency::REPLAYED.to_string(),
                value: "true".into(),
            });
            let stored = rec.response_body.clone().unwrap_or_default();
            // No view shows a secret (issue 36): a sealed answer is opened only to be shown with
            // its secrets replaced, and a plain one is redacted the same way. One that does not
            // open is withheld whole.
            let bytes = match self.secrets.open_bytes(Purpose::StoredAnswer, &stored) {
                Ok(b) => b.into_owned(),
                Err(_) => secret_box::REDACTED.as_bytes().to_vec(),
            };
            let (body, body_base64) = match String::from_utf8(bytes.clone()) {
                Ok(text) => (Some(secret_box::redact_secrets(&text)), None),
                Err(_)
                    if bytes
                        .windows(wh::SECRET_PREFIX.len())
                        .any(|w| w == wh::SECRET_PREFIX.as_bytes()) =>
                {
                    (Some(secret_box::REDACTED.to_string()), None)
                }
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
        if let Err(e) = self.flush_outcomes().await {
            tracing::warn!(error = %e, "idempotency outcome counts not flushed; the key's counts lag");
        }
        let outcomes = store.key_outcomes(merchant_id, &key).await?;
        let lease_lapsed = rec.state == KeyState::Running
            && rec
                .lease_expires_at
                .is_some_and(|t| t <= self.clock.now_ms());
        Ok(Some(KeyDetail {
            lease_lapsed,
            merchant_id,
            merchant,
            lease_expires_at: rec
                .lease_expires_at
                .filter(|_| rec.state == KeyState::Running),
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
