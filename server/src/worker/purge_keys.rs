//! Deleting expired Idempotency-Keys (DESIGN.md "Idempotency contract": kept at least 24 h,
//! configurable, then purged; after the purge the business key, merchant and
//! merchant_order_id, still prevents a second payment).

use std::sync::Arc;
use std::time::Duration;

use crate::domain::clock::Clock;
use crate::store::KeyStore;

/// Purges the keys whose retention ended ([`KeyStore::purge_keys`]) every `every`, for as
/// long as the task runs (`serve` starts it with `--purge-interval-secs`). A failed purge is
/// logged and tried again on the next tick.
pub async fn run<S: KeyStore + ?Sized>(store: Arc<S>, clock: Arc<dyn Clock>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match store.purge_keys(clock.now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(purged = n, "expired idempotency keys purged"),
            Err(e) => tracing::warn!(error = %e, "idempotency key purge failed; next tick retries"),
        }
    }
}
