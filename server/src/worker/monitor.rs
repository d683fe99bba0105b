//! Refreshes the `/metrics` gauges for stuck payments (by state and age bucket), the queue
//! (by kind and status, and by lane: due, running, oldest due), open error-pool items (by kind) and whether the database answers, so
//! Prometheus sees what the console shows (and `deploy/prometheus/alerts.yml` can alert on it).

use std::time::Duration;

use crate::domain::stuck::{AGE_BUCKETS, StuckThresholds};
use crate::domain::webhooks::DeliveryStatus;
use crate::service::Core;
use crate::store::{JobKind, JobStatus};

/// Deletes the channel attempts older than [`ATTEMPT_RETENTION_MS`] every `every` until the
/// task is aborted (the sign-in attempts' purge runs beside it in `startup`).
///
/// [`ATTEMPT_RETENTION_MS`]: crate::domain::channel_health::ATTEMPT_RETENTION_MS
pub async fn purge_channel_attempts(core: Core, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let before = core.clock.now_ms() - crate::domain::channel_health::ATTEMPT_RETENTION_MS;
        if let Err(e) = core.store.purge_channel_attempts(before).await {
            tracing::warn!(error = %e, "channel attempt purge failed; next tick retries");
        }
    }
}

/// Recomputes the gauges every `every` until the task is aborted.
pub async fn run(core: Core, thresholds: StuckThresholds, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if let Err(e) = refresh(&core, &thresholds).await {
            tracing::warn!(error = %e, "monitor refresh failed");
        }
    }
}

/// One refresh of every gauge. `converge_database_up` is set first: 1 when the database
/// answers ([`Store::health`](crate::store::Store::health)), else 0, and the other gauges
/// keep their last values (the error is returned).
pub async fn refresh(
    core: &Core,
    thresholds: &StuckThresholds,
) -> Result<(), crate::store::StoreError> {
    let health = core.store.health().await;
    metrics::gauge!("converge_database_up").set(if health.is_ok() { 1.0 } else { 0.0 });
    // The configured thresholds, so the alert rule compares the undecidable share of
    // `converge_channel_attempts_total` with the same red line as the dashboard's tile.
    metrics::gauge!("converge_channel_amber_threshold_ratio")
        .set(f64::from(thresholds.channel.amber_pct) / 100.0);
    metrics::gauge!("converge_channel_red_threshold_ratio")
        .set(f64::from(thresholds.channel.red_pct) / 100.0);
    health?;
    // First, so a failing query below cannot leave the switch's state unreported: a read
    // that refreshes the process's view also sets `converge_pause_active`.
    core.active_pauses().await;
    let now = core.clock.now_ms();
    let counts = core
        .store
        .stuck_counts(&thresholds.cutoffs(now), now)
        .await?;
    for (state, _) in thresholds.per_state() {
        for (bucket, _) in AGE_BUCKETS {
            let n = counts
                .iter()
                .find(|(s, b, _)| s == state.as_str() && b == bucket)
                .map_or(0, |c| c.2);
            metrics::gauge!("converge_stuck_payments", "state" => state.as_str().to_ascii_lowercase(), "bucket" => bucket).set(n as f64);
        }
    }
    let stats = core
        .store
        .queue_stats(now.div_euclid(60_000) - 60 + 1)
        .await?;
    // Every (kind, status) pair is set, zero when the query has no row for it: a gauge only
    // set when non-zero would keep its last value after its group empties.
    for kind in JobKind::ALL.map(JobKind::as_str) {
        for status in JobStatus::ALL.map(JobStatus::as_str) {
            let stat = stats.iter().find(|s| s.kind == kind && s.status == status);
            metrics::gauge!("converge_jobs", "kind" => kind, "status" => status)
                .set(stat.map_or(0, |s| s.count) as f64);
            if status == JobStatus::Due.as_str() {
                let age = stat
                    .and_then(|s| s.oldest_run_at)
                    .map_or(0, |t| (now - t).max(0));
                metrics::gauge!("converge_jobs_oldest_due_seconds", "kind" => kind)
                    .set(age as f64 / 1000.0);
            }
        }
    }
    // Per lane (issue 37): every lane is set each time, zero when it has no jobs.
    for load in core.store.lane_loads(now, 0).await? {
        let lane = load.lane.as_str();
        metrics::gauge!("converge_lane_due_jobs", "lane" => lane).set(load.due as f64);
        metrics::gauge!("converge_lane_running_jobs", "lane" => lane).set(load.running as f64);
        metrics::gauge!("converge_lane_oldest_due_seconds", "lane" => lane)
            .set(load.oldest_due_at.map_or(0, |t| (now - t).max(0)) as f64 / 1000.0);
    }
    // Items are never deleted, so every kind that ever had one is in the answer: a kind whose
    // items are all resolved is set to 0, not left at its last count.
    for k in core.store.error_counts().await? {
        metrics::gauge!("converge_error_pool_open_items", "kind" => k.kind).set(k.open as f64);
    }
    let backlog = core.store.webhook_backlog(now - 3_600_000).await?;
    metrics::gauge!("converge_webhook_deliveries", "status" => DeliveryStatus::Pending.as_str())
        .set(backlog.pending as f64);
    metrics::gauge!("converge_webhook_deliveries", "status" => DeliveryStatus::Dead.as_str())
        .set(backlog.dead as f64);
    metrics::gauge!("converge_webhook_oldest_pending_seconds")
        .set(backlog.oldest_pending_at.map_or(0, |t| (now - t).max(0)) as f64 / 1000.0);
    // Open and half-open alike: the endpoints whose deliveries do not flow freely.
    let open = core.store.open_breakers().await?;
    metrics::gauge!("converge_webhook_breaker_open").set(open.len() as f64);
    let longest = open.iter().filter_map(|(_, b)| b.held_ms(now)).max();
    metrics::gauge!("converge_webhook_breaker_open_longest_seconds")
        .set(longest.unwrap_or(0) as f64 / 1000.0);
    let relay = core
        .store
        .relay_status(crate::worker::relay::LEASE, now)
        .await?;
    metrics::gauge!("converge_relay_backlog_events").set(relay.backlog as f64);
    metrics::gauge!("converge_relay_lag_seconds")
        .set(relay.oldest_unpublished_at.map_or(0, |t| (now - t).max(0)) as f64 / 1000.0);
    metrics::gauge!("converge_relay_connected").set(if relay.connected { 1.0 } else { 0.0 });
    Ok(())
}
