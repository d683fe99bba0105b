//! Idempotency-Key outcome counts kept in memory and written in batches (issue 15: an outcome
//! counter is not a write per request). Two kinds are counted: per route and minute (the
//! dashboard's hit rates, DESIGN.md "Idempotency contract") and per stored key (what later
//! requests with a key got, on the key's page). A flush writes everything pending in one
//! transaction; [`OutcomeBuffer::flush`] runs once a second from `serve` ([`flush_every`])
//! and before every read of the counts in this process
//! ([`Core::flush_outcomes`](crate::service::Core::flush_outcomes)), so a process's own counts are never stale to it and
//! another process's lag by at most the flush interval.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::domain::idempotency::Outcome;
use crate::store::StoreError;
use crate::store::keys::{KeyOutcomeDelta, KeyStore, RouteOutcomeDelta};

/// Counts not yet written.
#[derive(Debug, Default)]
pub struct OutcomeBuffer {
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    /// (route, outcome, epoch minute) -> count.
    routes: HashMap<(String, &'static str, i64), i64>,
    /// (merchant id, key, outcome) -> (count, first at, last at), epoch ms UTC.
    keys: HashMap<(i64, String, &'static str), (i64, i64, i64)>,
}

impl OutcomeBuffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves counts, not broken invariants: keep going.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one request on `route` (`POST /v1/...`, the scope the store counts by) that
    /// got `outcome` at `now_ms` (epoch ms UTC): in the Prometheus counter
    /// `converge_idempotency_requests_total` (labels `method`, `route` template, `outcome`)
    /// and in the route's count for that minute.
    pub fn count_request(&self, route: &str, outcome: Outcome, now_ms: i64) {
        // The metric splits the route into a lower-case method and the route template.
        let (method, template) = route.split_once(' ').unwrap_or(("", route));
        metrics::counter!(
            "converge_idempotency_requests_total",
            "method" => method.to_ascii_lowercase(),
            "route" => template.to_owned(),
            "outcome" => outcome.as_str()
        )
        .increment(1);
        self.count_route(route, outcome.as_str(), now_ms.div_euclid(60_000));
    }

    /// Counts one request on `route` (`POST /v1/...`) that got `outcome` in epoch minute
    /// `minute`.
    pub fn count_route(&self, route: &str, outcome: &'static str, minute: i64) {
        *self
            .lock()
            .routes
            .entry((route.to_owned(), outcome, minute))
            .or_insert(0) += 1;
    }

    /// Counts one request with stored key `idem_key` of merchant `merchant_id` that got
    /// `outcome` at `now` (epoch ms UTC).
    pub fn count_key(&self, merchant_id: i64, idem_key: &str, outcome: &'static str, now: i64) {
        let mut p = self.lock();
        let e = p
            .keys
            .entry((merchant_id, idem_key.to_owned(), outcome))
            .or_insert((0, now, now));
        e.0 += 1;
        e.1 = e.1.min(now);
        e.2 = e.2.max(now);
    }

    fn take(&self) -> (Vec<RouteOutcomeDelta>, Vec<KeyOutcomeDelta>) {
        let mut p = self.lock();
        let routes = p
            .routes
            .drain()
            .map(|((route, outcome, minute), count)| RouteOutcomeDelta {
                route,
                outcome: outcome.to_owned(),
                minute,
                count,
            })
            .collect();
        let keys = p
            .keys
            .drain()
            .map(
                |((merchant_id, idem_key, outcome), (count, first_at, last_at))| KeyOutcomeDelta {
                    merchant_id,
                    idem_key,
                    outcome: outcome.to_owned(),
                    count,
                    first_at,
                    last_at,
                },
            )
            .collect();
        (routes, keys)
    }

    /// Puts counts whose write failed back, so the next flush writes them.
    fn put_back(&self, routes: Vec<RouteOutcomeDelta>, keys: Vec<KeyOutcomeDelta>) {
        let mut p = self.lock();
        for r in routes {
            let outcome = known_outcome(&r.outcome);
            *p.routes.entry((r.route, outcome, r.minute)).or_insert(0) += r.count;
        }
        for k in keys {
            let outcome = known_outcome(&k.outcome);
            let e = p
                .keys
                .entry((k.merchant_id, k.idem_key, outcome))
                .or_insert((0, k.first_at, k.last_at));
            e.0 += k.count;
            e.1 = e.1.min(k.first_at);
            e.2 = e.2.max(k.last_at);
        }
    }
}

/// The static name of an outcome the buffer counted (every name comes from
/// [`Outcome::as_str`]).
fn known_outcome(name: &str) -> &'static str {
    Outcome::ALL
        .iter()
        .map(|o| o.as_str())
        .find(|o| *o == name)
        .unwrap_or("unknown")
}

impl OutcomeBuffer {
    /// Writes the pending counts to `store` in one transaction. Errors: the store's; the
    /// counts stay pending for the next flush.
    pub async fn flush<S: KeyStore + ?Sized>(&self, store: &S) -> Result<(), StoreError> {
        let (routes, keys) = self.take();
        if routes.is_empty() && keys.is_empty() {
            return Ok(());
        }
        match store.add_outcome_counts(&routes, &keys).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.put_back(routes, keys);
                Err(e)
            }
        }
    }
}

/// Flushes `buffer` to `store` every `every`, for as long as the task runs (`serve` starts it
/// with one second and flushes once more at shutdown).
pub async fn flush_every<S: KeyStore + ?Sized>(
    buffer: Arc<OutcomeBuffer>,
    store: Arc<S>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if let Err(e) = buffer.flush(store.as_ref()).await {
            tracing::warn!(error = %e, "idempotency outcome counts not flushed; next tick retries");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_of_one_route_minute_and_key_add_up_and_keep_the_first_and_last_time() {
        let b = OutcomeBuffer::default();
        b.count_route("POST /v1/payments", "first", 7);
        b.count_route("POST /v1/payments", "first", 7);
        b.count_route("POST /v1/payments", "replay", 7);
        b.count_key(1, "k", "replay", 2_000);
        b.count_key(1, "k", "replay", 1_000);
        let (mut routes, keys) = b.take();
        routes.sort_by(|a, b| a.outcome.cmp(&b.outcome));
        assert_eq!(
            routes
                .iter()
                .map(|r| (r.outcome.as_str(), r.count))
                .collect::<Vec<_>>(),
            [("first", 2), ("replay", 1)]
        );
        assert_eq!(keys.len(), 1);
        assert_eq!(
            (keys[0].count, keys[0].first_at, keys[0].last_at),
            (2, 1_000, 2_000)
        );
        let (routes, keys) = b.take();
        assert!(
            routes.is_empty() && keys.is_empty(),
            "taken counts are gone"
        );
    }

    #[test]
    fn counts_put_back_after_a_failed_write_merge_with_new_ones() {
        let b = OutcomeBuffer::default();
        b.count_route("POST /v1/payments", "replay", 7);
        b.count_key(1, "k", "in_use", 5_000);
        let (routes, keys) = b.take();
        b.count_route("POST /v1/payments", "replay", 7);
        b.count_key(1, "k", "in_use", 4_000);
        b.put_back(routes, keys);
        let (routes, keys) = b.take();
        assert_eq!(routes.len(), 1);
        assert_eq!(routes[0].count, 2);
        assert_eq!(
            (keys[0].count, keys[0].first_at, keys[0].last_at),
            (2, 4_000, 5_000)
        );
    }
}
