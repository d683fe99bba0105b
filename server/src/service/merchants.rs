//! Merchants and their API keys (issue 13 "Merchant keys"; DESIGN.md "Merchant keys"):
//! several keys per merchant, each with an id and a visible prefix, revocable at once. Every
//! change is audited in the same transaction, by the console user or `cli:<OS user>`.
//!
//! Keys are `ck_live_` + 64 hex digits (256 random bits). The prefix makes a leaked key
//! recognisable to secret scanners; only the key's SHA-256 is stored. A request is
//! authenticated by looking the hash up in the database every time (no cache), so a revoked
//! key answers 401 at once on every server sharing the database.

use super::Core;
use rand::Rng;
use serde_json::json;

use super::actor::Actor;
use crate::domain::fingerprint::sha256_hex;
use crate::store::{Merchant, MerchantKey, NewMerchantKey, StoreError};

/// Every API key starts with this.
pub const KEY_PREFIX: &str = "ck_live_";

/// Characters of a key shown as its prefix (`ck_live_` and 8 hex digits).
pub const SHOWN_PREFIX_LEN: usize = KEY_PREFIX.len() + 8;

/// A key just issued: the only time the key itself exists outside the client.
#[derive(Debug, Clone)]
pub struct IssuedKey {
    /// `mk_...` id.
    pub id: String,
    /// The key, shown once.
    pub key: String,
    /// Its visible prefix.
    pub prefix: String,
}

/// A new random key.
pub fn new_api_key() -> IssuedKey {
    let bytes: [u8; 32] = rand::rng().random();
    let key = format!("{KEY_PREFIX}{}", hex::encode(bytes));
    IssuedKey {
        id: super::ids::new_id("mk"),
        prefix: key[..SHOWN_PREFIX_LEN].to_string(),
        key,
    }
}

/// Why a merchant change was refused.
#[derive(Debug, thiserror::Error)]
pub enum MerchantError {
    /// Bad name (400).
    #[error("merchant name must be 1 to 64 characters without control characters")]
    InvalidName,
    /// The name is taken (409).
    #[error("a merchant named {0:?} already exists")]
    Exists(String),
    /// No such merchant (404).
    #[error("no merchant named {0:?}")]
    NoMerchant(String),
    /// A connector account that cannot be used: which field and why (400).
    #[error("connector: {0}")]
    InvalidConnector(String),
    /// A pricing that cannot be used (400 `invalid_pricing`).
    #[error(transparent)]
    InvalidPricing(#[from] crate::domain::fees::PricingError),
    /// No such live key of that merchant (404).
    #[error("merchant {0:?} has no unrevoked key {1:?}")]
    NoKey(String, String),
    /// Storage failed.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for MerchantError {
    fn from(e: StoreError) -> Self {
        MerchantError::Store(e)
    }
}

fn check_name(name: &str) -> Result<String, MerchantError> {
    let name = name.trim();
    if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
        return Err(MerchantError::InvalidName);
    }
    Ok(name.to_string())
}

fn new_key(k: &IssuedKey, now: i64) -> NewMerchantKey {
    NewMerchantKey {
        id: k.id.clone(),
        prefix: k.prefix.clone(),
        key_hash: sha256_hex(k.key.as_bytes()),
        now,
    }
}

impl Core {
    /// Creates a merchant with its first key (audited `merchant_added`): the bootstrap on the
    /// machine (`converge merchant add`), one step as the first admin is (issue 36).
    pub async fn add_merchant(
        &self,
        now: i64,
        name: &str,
        actor: &Actor,
    ) -> Result<(Merchant, IssuedKey), MerchantError> {
        let store = self.store.as_ref();
        let name = check_name(name)?;
        let key = new_api_key();
        let audit = actor.entry(
            now,
            "merchant_added",
            &format!("merchant:{name}"),
            "",
            String::new(),
            json!({"key_id": key.id, "prefix": key.prefix}).to_string(),
        );
        match store
            .create_merchant_with_key(&name, &new_key(&key, now), &audit)
            .await
        {
            Ok(m) => Ok((m, key)),
            Err(StoreError::Conflict(_)) => Err(MerchantError::Exists(name)),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates merchant `name` with no key yet (audited `merchant_added` with `"first_key":
    /// "requested"`): the console's add, whose first key is a request another admin approves
    /// (issue 36), so no admin alone holds a key that moves money. Errors: `Invalid` name,
    /// `Exists`.
    pub async fn add_merchant_keyless(
        &self,
        now: i64,
        name: &str,
        actor: &Actor,
    ) -> Result<Merchant, MerchantError> {
        let store = self.store.as_ref();
        let name = check_name(name)?;
        let audit = actor.entry(
            now,
            "merchant_added",
            &format!("merchant:{name}"),
            "",
            String::new(),
            json!({"first_key": "requested"}).to_string(),
        );
        match store.create_merchant_keyless(&name, now, &audit).await {
            Ok(m) => Ok(m),
            Err(StoreError::Conflict(_)) => Err(MerchantError::Exists(name)),
            Err(e) => Err(e.into()),
        }
    }

    /// Issues another key to merchant `name` (audited `merchant_key_issued`); the others keep
    /// working until revoked, so a rotation has no gap.
    pub async fn issue_merchant_key(
        &self,
        now: i64,
        name: &str,
        actor: &Actor,
    ) -> Result<(MerchantKey, IssuedKey), MerchantError> {
        let store = self.store.as_ref();
        let key = new_api_key();
        let audit = actor.entry(
            now,
            "merchant_key_issued",
            &format!("merchant:{name}"),
            "",
            String::new(),
            json!({"key_id": key.id, "prefix": key.prefix}).to_string(),
        );
        match store
            .add_merchant_key(name, &new_key(&key, now), &audit)
            .await?
        {
            Some(k) => Ok((k, key)),
            None => Err(MerchantError::NoMerchant(name.to_string())),
        }
    }

    /// Merchant `name`'s keys, oldest first.
    pub async fn list_merchant_keys(&self, name: &str) -> Result<Vec<MerchantKey>, MerchantError> {
        let store = self.store.as_ref();
        store
            .merchant_keys(name)
            .await?
            .ok_or_else(|| MerchantError::NoMerchant(name.to_string()))
    }

    /// Every merchant with its keys (oldest first), merchants by name: the console's Merchants
    /// page.
    pub async fn merchant_accounts(
        &self,
    ) -> Result<Vec<converge_wire::merchants::MerchantAccount>, MerchantError> {
        let store = self.store.as_ref();
        let connectors = self.merchant_connector_views().await?;
        let mut pricings: std::collections::HashMap<_, _> =
            store.current_pricings().await?.into_iter().collect();
        let mut out = Vec::new();
        for merchant in store.merchants().await? {
            let keys = self.list_merchant_keys(&merchant.name).await?;
            let connector = connectors.get(&merchant.id).cloned().unwrap_or_default();
            let pricing = pricings.remove(&merchant.id);
            out.push(converge_wire::merchants::MerchantAccount {
                merchant,
                keys,
                connector,
                pricing,
            });
        }
        Ok(out)
    }

    /// Gives merchant `name` a new pricing (issue 35): `percent` as a person writes it
    /// (`2.9`: see [`fees::parse_percent`](crate::domain::fees::parse_percent)), a fixed fee
    /// per capture and one per merchant refund, in minor units; charges, captures and refunds
    /// posted from the commit on are priced by it, earlier ones keep theirs. Audited
    /// `merchant_pricing_set` with the pricing before and after, in the same transaction.
    /// Errors: `InvalidPricing`, `NoMerchant`.
    pub async fn set_merchant_pricing(
        &self,
        now: i64,
        name: &str,
        percent: &str,
        (fixed_fee, refund_fee): (i64, i64),
        actor: &Actor,
    ) -> Result<converge_wire::merchants::MerchantPricing, MerchantError> {
        use crate::domain::fees;
        let percent_ppm = fees::parse_percent(percent.trim())?;
        let (fixed_fee, refund_fee) = (
            fees::validate_fixed(fixed_fee)?,
            fees::validate_fixed(refund_fee)?,
        );
        let store = self.store.as_ref();
        let before = self.merchant_pricing(name).await?.into_iter().next();
        let shown = |ppm: i64, fixed: i64, refund: i64| json!({"percent": fees::display_percent(ppm), "fixed_fee": fixed, "refund_fee": refund});
        let audit = actor.entry(
            now,
            "merchant_pricing_set",
            &format!("merchant:{name}"),
            "",
            before
                .map(|p| shown(p.percent_ppm, p.fixed_fee, p.refund_fee).to_string())
                .unwrap_or_default(),
            shown(percent_ppm, fixed_fee, refund_fee).to_string(),
        );
        store
            .set_merchant_pricing_audited(name, percent_ppm, fixed_fee, refund_fee, now, &audit)
            .await?
            .ok_or_else(|| MerchantError::NoMerchant(name.to_string()))
    }

    /// Merchant `name`'s pricing versions, newest first (empty: no fees). Errors:
    /// `NoMerchant`.
    pub async fn merchant_pricing(
        &self,
        name: &str,
    ) -> Result<Vec<converge_wire::merchants::MerchantPricing>, MerchantError> {
        self.store
            .as_ref()
            .merchant_pricing(name)
            .await?
            .ok_or_else(|| MerchantError::NoMerchant(name.to_string()))
    }

    /// Revokes key `key_id` of merchant `name` (audited `merchant_key_revoked`): from the
    /// commit on, every server answers 401 to it.
    pub async fn revoke_merchant_key(
        &self,
        now: i64,
        name: &str,
        key_id: &str,
        actor: &Actor,
    ) -> Result<(), MerchantError> {
        let store = self.store.as_ref();
        let audit = actor.entry(
            now,
            "merchant_key_revoked",
            &format!("merchant:{name}"),
            "",
            json!({"key_id": key_id}).to_string(),
            json!({"key_id": key_id, "revoked_at": now}).to_string(),
        );
        if store.revoke_merchant_key(name, key_id, now, &audit).await? {
            Ok(())
        } else if store.merchant_keys(name).await?.is_none() {
            Err(MerchantError::NoMerchant(name.to_string()))
        } else {
            Err(MerchantError::NoKey(name.to_string(), key_id.to_string()))
        }
    }

    /// Freezes or unfreezes merchant `name` (audited `merchant_frozen` / `merchant_unfrozen`, with
    /// `reason` as the record's reason, in the same transaction). Frozen: its API refuses new
    /// payments, refunds and endpoint changes (403 `merchant_frozen`, see
    /// `api::auth::refuse_frozen`), and ledger postings of what was in flight wait in SUSPENSE.
    /// Errors: [`MerchantError::NoMerchant`].
    pub async fn set_merchant_frozen(
        &self,
        now: i64,
        name: &str,
        frozen: bool,
        reason: &str,
        actor: &Actor,
    ) -> Result<(), MerchantError> {
        let store = self.store.as_ref();
        let audit = actor.entry(
            now,
            if frozen {
                "merchant_frozen"
            } else {
                "merchant_unfrozen"
            },
            &format!("merchant:{name}"),
            reason.trim(),
            json!({"frozen": !frozen}).to_string(),
            json!({"frozen": frozen}).to_string(),
        );
        if store
            .set_merchant_frozen_audited(name, frozen, &audit)
            .await?
        {
            Ok(())
        } else {
            Err(MerchantError::NoMerchant(name.to_string()))
        }
    }
}
impl super::Core {
    /// Every merchant's name by its id: how the console and its exports name a payment's
    /// merchant. Errors: the store's.
    pub async fn merchant_names(
        &self,
    ) -> Result<std::collections::HashMap<i64, String>, StoreError> {
        Ok(self
            .store
            .merchants()
            .await?
            .into_iter()
            .map(|m| (m.id, m.name))
            .collect())
    }
}

/// Payments a merchant's page lists.
const OVERVIEW_PAYMENTS: i64 = 20;

impl super::Core {
    /// Merchant `name`'s page (issue 41) in one read: the merchant, its latest payments, its
    /// endpoints with their health, and, when `with_keys` (admins) and `with_history`
    /// (auditors), its keys and the audit records naming it. None when there is no such
    /// merchant. Errors: the store's.
    pub async fn merchant_overview(
        &self,
        name: &str,
        with_keys: bool,
        with_history: bool,
    ) -> Result<Option<converge_wire::MerchantOverview>, super::queries::FilterError> {
        let store = self.store.as_ref();
        let Some(merchant) = store
            .merchants()
            .await?
            .into_iter()
            .find(|m| m.name == name)
        else {
            return Ok(None);
        };
        let payments = self
            .search_payments(&converge_wire::PaymentSearch {
                merchant: Some(name.to_string()),
                limit: Some(OVERVIEW_PAYMENTS),
                ..Default::default()
            })
            .await?
            .items;
        let endpoints = self.endpoint_rows(Some(merchant.id)).await?;
        let keys = match with_keys {
            true => store.merchant_keys(name).await?,
            false => None,
        };
        let history = match with_history {
            true => {
                let q = converge_wire::AuditListQuery {
                    target: Some(format!("merchant:{name}")),
                    ..Default::default()
                };
                Some(self.audit_list(&q).await?.items)
            }
            false => None,
        };
        let connector = self
            .merchant_connector_views()
            .await?
            .remove(&merchant.id)
            .unwrap_or_default();
        Ok(Some(converge_wire::MerchantOverview {
            merchant,
            payments,
            endpoints,
            keys,
            history,
            connector,
        }))
    }
}
