//! Deleting expired Idempotency-Keys (DESIGN.md "Idempotency contract": kept at least 24 h,
//! configurable, then purged; after the purge the business key, merchant and
//! merchant_order_id, still prevents a second payment), and, alongside them, the tombstones
//! of orders cancelled before their create once their own, longer retention ended (TCC by
//! business key, issue 34: `--tombstone-retention-days`).

use std::sync::Arc;
use std::time::Duration;

use crate::domain::clock::Clock;
use crate::store::{KeyStore, Payments};

/// Purges the keys whose retention ended ([`KeyStore::purge_keys`]) and the tombstones older
/// than `tombstone_retention_ms` ([`Payments::purge_order_tombstones`]) every `every`, for as
/// long as the task runs (`serve` starts it with `--purge-interval-secs`). A failed purge is
/// logged and tried again on the next tick.
pub async fn run<S: KeyStore + Payments + ?Sized>(
    store: Arc<S>,
    clock: Arc<dyn Clock>,
    every: Duration,
    tombstone_retention_ms: i64,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let now = clock.now_ms();
        match store.purge_keys(now).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(purged = n, "expired idempotency keys purged"),
            Err(e) => tracing::warn!(error = %e, "idempotency key purge failed; next tick retries"),
        }
        match store
            .purge_order_tombstones(now.saturating_sub(tombstone_retention_ms))
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(purged = n, "expired order tombstones purged"),
            Err(e) => tracing::warn!(error = %e, "order tombstone purge failed; next tick retries"),
        }
    }
}
