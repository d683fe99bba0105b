//! Storage of merchants and their API keys. Part of the storage abstraction:
//! [`Store`](super::Store) requires it, the SQL is `merchants_sql.rs`, and the conformance
//! suite runs it on both backends.

use async_trait::async_trait;

use converge_wire::merchants::MerchantPricing;

use super::{
    AuditEntry, Merchant, MerchantConnector, MerchantKey, NewMerchantConnector, NewMerchantKey,
    StoreError,
};

/// Merchants and their API keys.
#[async_trait]
pub trait Merchants: Send + Sync + 'static {
    /// Inserts a merchant. Errors: `Conflict` when the name is taken.
    async fn create_merchant(
        &self,
        name: &str,
        api_key_hash: &str,
        now: i64,
    ) -> Result<Merchant, StoreError>;
    /// The merchant whose API key hashes to `api_key_hash`.
    async fn merchant_by_key_hash(
        &self,
        api_key_hash: &str,
    ) -> Result<Option<Merchant>, StoreError>;
    /// The merchant with this id.
    async fn merchant(&self, id: i64) -> Result<Option<Merchant>, StoreError>;
    /// Sets the frozen flag; false when there is no such merchant.
    async fn set_merchant_frozen(&self, name: &str, frozen: bool) -> Result<bool, StoreError>;
    /// [`set_merchant_frozen`](Self::set_merchant_frozen) with `audit` in the same transaction
    /// (nothing written when there is no such merchant).
    async fn set_merchant_frozen_audited(
        &self,
        name: &str,
        frozen: bool,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// Creates merchant `name` with its first API key and `audit` in one transaction.
    /// Errors: `Conflict` when the name (or key) exists.
    async fn create_merchant_with_key(
        &self,
        name: &str,
        key: &NewMerchantKey,
        audit: &AuditEntry,
    ) -> Result<Merchant, StoreError>;
    /// Creates merchant `name` with no API key yet (it can move no money until a key is
    /// issued) and `audit`, in one transaction. Errors: `Conflict` when the name exists.
    async fn create_merchant_keyless(
        &self,
        name: &str,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<Merchant, StoreError>;
    /// Adds an API key to merchant `name`, with `audit` in the same transaction; None when
    /// there is no such merchant. The merchant's other keys keep working (rotation).
    async fn add_merchant_key(
        &self,
        name: &str,
        key: &NewMerchantKey,
        audit: &AuditEntry,
    ) -> Result<Option<MerchantKey>, StoreError>;
    /// Merchant `name`'s keys, oldest first; None when there is no such merchant.
    async fn merchant_keys(&self, name: &str) -> Result<Option<Vec<MerchantKey>>, StoreError>;
    /// Revokes key `key_id` of merchant `name` at `now`, with `audit` in the same
    /// transaction; false when it is not that merchant's key or was already revoked.
    async fn revoke_merchant_key(
        &self,
        name: &str,
        key_id: &str,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// Records that the key with this hash authenticated at `now` (at most one write a
    /// minute per key).
    async fn touch_merchant_key(&self, api_key_hash: &str, now: i64) -> Result<(), StoreError>;
    /// Sets merchant `name`'s own PSP account at `now` (`Some`: written and routed), or
    /// routes its new payments back to the default connector (`None`: an account it had is
    /// kept, unrouted, for its open payments), with `audit` in the same transaction; false
    /// when there is no such merchant (nothing written).
    async fn set_merchant_connector_audited(
        &self,
        name: &str,
        account: Option<&NewMerchantConnector>,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// Every merchant's own PSP account, by merchant id.
    async fn merchant_connectors(&self) -> Result<Vec<MerchantConnector>, StoreError>;
    /// Gives merchant `name` a new pricing version at `now` (one more than its last: a
    /// percentage in parts per million, a fixed fee per capture and one per refund, minor
    /// units), with
    /// `audit` in the same transaction: charges and captures posted after the commit are
    /// priced by it. `None` when there is no such merchant (nothing written). Errors:
    /// `Conflict` when another change took the same version first.
    async fn set_merchant_pricing_audited(
        &self,
        name: &str,
        percent_ppm: i64,
        fixed_fee: i64,
        refund_fee: i64,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<Option<MerchantPricing>, StoreError>;
    /// Every merchant's current (latest) pricing version, by merchant id: one read for the
    /// merchants page, however many merchants there are.
    async fn current_pricings(&self) -> Result<Vec<(i64, MerchantPricing)>, StoreError>;
    /// Merchant `name`'s pricing versions, newest first (empty: it has none); `None` when
    /// there is no such merchant.
    async fn merchant_pricing(
        &self,
        name: &str,
    ) -> Result<Option<Vec<MerchantPricing>>, StoreError>;
}

/// The columns of a `merchant_pricing` row that [`pricing_of`] reads, in its order.
pub(crate) const PRICING_COLUMNS: &str = "version, percent_ppm, fixed_fee, refund_fee, created_at";

/// A `merchant_pricing` row read as [`PRICING_COLUMNS`] (amounts in minor units, percent in
/// parts per million, `created_at` epoch ms UTC).
pub(crate) fn pricing_of(row: (i64, i64, i64, i64, i64)) -> MerchantPricing {
    let (version, percent_ppm, fixed_fee, refund_fee, created_at) = row;
    MerchantPricing {
        version,
        percent_ppm,
        fixed_fee,
        refund_fee,
        created_at,
    }
}
