//! Merchants and their API keys (never the keys themselves).

use serde::{Deserialize, Serialize};

/// A merchant account (DESIGN.md "Merchant HTTP API"). The API key itself is never stored,
/// only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct Merchant {
    /// Database id.
    pub id: i64,
    /// Unique name given to `converge merchant add`.
    pub name: String,
    /// A frozen merchant's API refuses new payments, refunds and endpoint changes (403
    /// `merchant_frozen`), and the ledger postings of what was in flight fail, which sends
    /// those payments to SUSPENSE until it is unfrozen.
    pub frozen: bool,
    /// Creation time, epoch ms UTC.
    pub created_at: i64,
}

/// One of a merchant's API keys (issue 13 "Merchant keys"). The key itself is never stored:
/// only its SHA-256, and a visible prefix to recognise it by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct MerchantKey {
    /// `mk_...` id, named by `converge merchant key revoke`.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// The key's first characters (`ck_live_` and 8 more); empty for a key made before
    /// prefixes were kept.
    pub prefix: String,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Last successful authentication, epoch ms UTC, updated at most once a minute.
    pub last_used_at: Option<i64>,
    /// When it was revoked, epoch ms UTC; a revoked key authenticates nothing.
    pub revoked_at: Option<i64>,
}

/// A merchant with its keys (the console's Merchants page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerchantAccount {
    /// The merchant.
    pub merchant: Merchant,
    /// Its keys, oldest first.
    pub keys: Vec<MerchantKey>,
    /// Where its new payments go.
    #[serde(default)]
    pub connector: MerchantConnectorView,
    /// Its current pricing (issue 35); `None` while it has none (no fees).
    #[serde(default)]
    pub pricing: Option<MerchantPricing>,
}

/// A percentage in parts per million as a person reads it: `29000` → `2.9`, `1` → `0.0001`.
pub fn display_percent(ppm: i64) -> String {
    let text = format!("{}.{:04}", ppm / 10_000, ppm % 10_000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl MerchantPricing {
    /// The pricing as a person reads it: `2.9 % + 30 minor units of its currency per
    /// capture, 50 per refund (pricing v2)`.
    pub fn describe(&self) -> String {
        let refunds = match self.refund_fee {
            0 => String::new(),
            fee => format!(", {fee} per refund"),
        };
        format!(
            "{} % + {} minor units of its currency per capture{refunds} (pricing v{})",
            display_percent(self.percent_ppm),
            self.fixed_fee,
            self.version
        )
    }
}

/// One version of a merchant's pricing (issue 35): the fee of each capture is
/// `round_half_even(amount × percent) + fixed_fee`, at most the amount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerchantPricing {
    /// 1 for the first pricing, one more for each change; every fee batch names the version
    /// that priced it.
    pub version: i64,
    /// The percentage in parts per million of the captured amount (2.9 % is 29 000).
    pub percent_ppm: i64,
    /// Added to each capture's fee, minor units of the capture's currency.
    pub fixed_fee: i64,
    /// The fee of each merchant refund, minor units of its currency, at most the refund (0:
    /// none).
    #[serde(default)]
    pub refund_fee: i64,
    /// When it took effect, epoch ms UTC.
    pub created_at: i64,
}

/// Where a merchant's new payments go (issue 38), without any secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerchantConnectorView {
    /// The connector's name: `sandbox` (the default) or its own account's (`stripe-7`).
    pub connector: String,
    /// `default` or `stripe`.
    pub kind: String,
    /// Its own account's API base URL.
    pub api_base: Option<String>,
    /// `…` and the last four characters of its own account's secret key.
    pub key_hint: Option<String>,
}

impl Default for MerchantConnectorView {
    fn default() -> Self {
        Self {
            connector: "sandbox".into(),
            kind: "default".into(),
            api_base: None,
            key_hint: None,
        }
    }
}

impl MerchantConnectorView {
    /// One line for the console: `sandbox (the default)`, or the account, its key's hint and
    /// where its webhooks go.
    pub fn describe(&self) -> String {
        match (&self.api_base, &self.key_hint) {
            (Some(base), Some(hint)) => format!(
                "{} ({} at {base}, key {hint}); its webhooks: POST /v1/connectors/{}/callbacks",
                self.connector, self.kind, self.connector
            ),
            _ => format!("{} (the default)", self.connector),
        }
    }
}

/// One merchant's page (`/merchants/NAME`, issue 41), in one answer: the panels a viewer
/// reads, and those only some roles may (None for the others).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerchantOverview {
    /// The merchant.
    pub merchant: Merchant,
    /// Its latest payments, newest first (at most 20).
    pub payments: Vec<crate::Payment>,
    /// Its webhook endpoints with their 24 h health, newest first.
    pub endpoints: Vec<crate::EndpointRow>,
    /// Its API keys, oldest first (admins only).
    pub keys: Option<Vec<MerchantKey>>,
    /// The audit records naming it (`merchant:NAME`), newest first, at most 50 (auditors
    /// only).
    pub history: Option<Vec<crate::AuditRow>>,
    /// Where its new payments go.
    #[serde(default)]
    pub connector: MerchantConnectorView,
}
