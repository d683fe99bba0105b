//! The bulkheads of webhook delivery (issue 37, "Fairness between merchants and endpoints"):
//! before an attempt, a delivery passes its endpoint's circuit breaker
//! ([`crate::domain::breaker`], stored per endpoint so every server sees it) and takes one of
//! the endpoint's in-flight slots (`--webhook-inflight-per-endpoint`) and one of its merchant's
//! (`--webhook-inflight-per-merchant`: a merchant's many endpoints together), both counted in
//! this process. A delivery that may not go now is put back until it may, without an attempt
//! spent ([`Step::WaitUntil`]): endpoints that hang or fail cannot hold every delivery worker,
//! nor burn their deliveries' attempts while they are down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::resolve::Step;
use super::{Core, ServiceError};
use crate::domain::breaker::{BreakerState, Gate};

/// How long a delivery put back by a full in-flight cap waits before it looks again, ms.
pub const INFLIGHT_RECHECK_MS: i64 = 1_000;
/// What a probe's lease adds to the attempt's time limit, ms (the record of its end).
pub const PROBE_LEASE_MARGIN_MS: i64 = 5_000;

/// The attempts in flight per endpoint in this process.
#[derive(Debug, Default)]
pub struct InFlight {
    counts: Mutex<HashMap<String, usize>>,
}

/// One in-flight slot of an endpoint, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    owner: Arc<InFlight>,
    endpoint: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.owner.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.endpoint) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.endpoint);
            }
        }
    }
}

impl InFlight {
    /// A slot of `endpoint` when fewer than `cap` are taken; None when it is full.
    pub fn try_take(self: &Arc<Self>, endpoint: &str, cap: usize) -> Option<Slot> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(endpoint.to_string()).or_insert(0);
        if *n >= cap.max(1) {
            return None;
        }
        *n += 1;
        Some(Slot {
            owner: self.clone(),
            endpoint: endpoint.to_string(),
        })
    }

    /// Slots of `endpoint` taken now.
    pub fn in_flight(&self, endpoint: &str) -> usize {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(endpoint)
            .copied()
            .unwrap_or(0)
    }
}

/// The [`InFlight`] key of merchant `id`'s slots (all its endpoints' attempts together).
pub fn merchant_key(id: i64) -> String {
    format!("merchant:{id}")
}

/// What a delivery found at its endpoint's gate.
#[derive(Debug)]
pub enum Passage {
    /// Attempt now, holding `slot` and `merchant_slot` until the attempt ends; `breaker` is
    /// the state read (its outcome is recorded against it).
    Go {
        /// The endpoint's in-flight slot.
        slot: Slot,
        /// The merchant's in-flight slot.
        merchant_slot: Slot,
        /// The breaker as read before the attempt.
        breaker: BreakerState,
    },
    /// Not now: the job's result (a wait that spends no attempt).
    Wait(Step),
}

fn wait(at: i64, why: String, reason: &'static str) -> Passage {
    metrics::counter!("converge_webhook_deferred_total", "reason" => reason).increment(1);
    Passage::Wait(Step::WaitUntil { at, why })
}

impl Core {
    /// The gate of a delivery to `endpoint` of merchant `merchant_id` at `now`: its breaker
    /// (open: wait until the cool-down ends; half-open: take the one probe or wait for it),
    /// then an in-flight slot of the endpoint and one of the merchant (either full: look again
    /// in [`INFLIGHT_RECHECK_MS`]). Errors: the store's.
    pub async fn delivery_gate(
        &self,
        endpoint: &str,
        merchant_id: i64,
        now: i64,
    ) -> Result<Passage, ServiceError> {
        let settings = &self.notifier.settings;
        let breaker = self.store.endpoint_breaker(endpoint).await?;
        let gate = settings.breaker.gate(&breaker, now);
        if let Gate::WaitUntil(at) = gate {
            return Ok(wait(
                at,
                format!("endpoint {endpoint}: circuit breaker open"),
                "breaker_open",
            ));
        }
        let Some(slot) = self
            .notifier
            .inflight
            .try_take(endpoint, settings.inflight_per_endpoint)
        else {
            return Ok(wait(
                now.saturating_add(INFLIGHT_RECHECK_MS),
                format!(
                    "endpoint {endpoint}: {} attempts in flight",
                    settings.inflight_per_endpoint
                ),
                "in_flight",
            ));
        };
        let Some(merchant_slot) = self
            .notifier
            .inflight
            .try_take(&merchant_key(merchant_id), settings.inflight_per_merchant)
        else {
            return Ok(wait(
                now.saturating_add(INFLIGHT_RECHECK_MS),
                format!(
                    "merchant {merchant_id}: {} webhook attempts in flight",
                    settings.inflight_per_merchant
                ),
                "merchant_in_flight",
            ));
        };
        if gate == Gate::Probe {
            let lease = now
                .saturating_add(i64::try_from(settings.timeout.as_millis()).unwrap_or(i64::MAX))
                .saturating_add(PROBE_LEASE_MARGIN_MS);
            if !self.store.claim_breaker_probe(endpoint, now, lease).await? {
                return Ok(wait(
                    lease,
                    format!("endpoint {endpoint}: circuit breaker half-open, probe in flight"),
                    "breaker_open",
                ));
            }
            tracing::info!(
                endpoint,
                "circuit breaker half-open: this delivery is the probe"
            );
        }
        Ok(Passage::Go {
            slot,
            merchant_slot,
            breaker,
        })
    }

    /// Records the end of an attempt to `endpoint` in its breaker: a failure always, a
    /// success only when it changes the breaker read before it (most attempts succeed on a
    /// full window without failures, and write nothing). Logs the breaker opening; when the
    /// breaker closes, makes the endpoint's waiting deliveries due now. Errors: the store's.
    pub async fn record_breaker_outcome(
        &self,
        endpoint: &str,
        before: &BreakerState,
        success: bool,
        now: i64,
    ) -> Result<(), ServiceError> {
        let policy = &self.notifier.settings.breaker;
        if success && policy.after(before, true, now) == *before {
            return Ok(());
        }
        let after = self
            .store
            .record_breaker(endpoint, success, now, policy)
            .await?;
        match (before.open_until, after.open_until) {
            (_, Some(until)) if after.opens > before.opens => tracing::warn!(
                endpoint,
                failures = after.failures,
                attempts = after.attempts,
                open_until = %crate::domain::clock::rfc3339(until),
                "circuit breaker opened: deliveries wait without attempts until the probe"
            ),
            (Some(_), None) => {
                // The probe went through: what waited behind the breaker goes now, not at
                // each delivery's own later time (up to the cool-down's 10 min).
                let woken = self.store.hasten_endpoint_deliveries(endpoint, now).await?;
                tracing::info!(endpoint, woken, "circuit breaker closed");
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_has_at_most_its_cap_of_slots_and_a_dropped_one_is_given_back() {
        let f = Arc::new(InFlight::default());
        let a = f.try_take("we_a", 2).unwrap();
        let _b = f.try_take("we_a", 2).unwrap();
        assert!(f.try_take("we_a", 2).is_none());
        assert!(f.try_take("we_b", 2).is_some(), "per endpoint");
        drop(a);
        assert_eq!(f.in_flight("we_a"), 1);
        assert!(f.try_take("we_a", 2).is_some());
    }
}
