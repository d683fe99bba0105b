//! The read models of the console: the dashboard (stuck states, idempotency hit rate, queue,
//! error pool) and a payment's whole story (DESIGN.md "Ops console"). Plain data, serialised
//! as the `/ops/v1` JSON; the shapes are `converge-wire` types, which the console shares.

use super::Core;
use crate::domain::actions::{ActionKind, ActionStatus};
use crate::domain::idempotency::Outcome;
use crate::domain::jobs::JobStatus;
use crate::domain::stuck::StuckThresholds;
use crate::store::{ErrorItemStatus, QueueStat, StoreError};

pub use converge_wire::dashboard::{
    ChannelHealthView, ConnectorHealth, Dashboard, ErrorPoolView, FailureGroup, HealthBucket,
    HitRate, HoldsExpiring, IdempotencyView, MinutePoint, QueueRow, QueueView, RouteOutcomes,
    StuckView,
};

fn keyed(outcome: &str) -> bool {
    matches!(outcome, "first" | "replay" | "in_use" | "reused")
}

impl Core {
    /// Computes the dashboard now, with the console's stuck and channel-health thresholds
    /// ([`super::console::ConsoleSettings::stuck`]).
    pub async fn dashboard(&self) -> Result<Dashboard, StoreError> {
        dashboard(self, &self.console.stuck).await
    }

    /// Each job lane's load now (due, running, oldest due) with its top 5 merchants by due
    /// jobs (issue 37, "which merchant holds a lane's backlog"), in lane order: for the
    /// dashboard's queue panel.
    pub async fn lane_loads(&self) -> Result<Vec<crate::store::LaneLoad>, StoreError> {
        self.store.lane_loads(self.clock.now_ms(), 5).await
    }
}

/// The dashboard over `core` with `thresholds` ([`Core::dashboard`]).
async fn dashboard(core: &Core, thresholds: &StuckThresholds) -> Result<Dashboard, StoreError> {
    let store = &core.store;
    // This process's own outcome counts are written before they are read.
    if let Err(e) = core.flush_outcomes().await {
        tracing::warn!(error = %e, "idempotency outcome counts not flushed; the hit rates lag");
    }
    let now = core.clock.now_ms();
    let minute = now.div_euclid(60_000);

    let cutoffs = thresholds.cutoffs(now);
    // The reads are independent, so they run at once: a refresh waits for the slowest one
    // instead of for the sum of a dozen round trips, each queued for a connection and a CPU
    // when the incident that brought ops staff here is loading the database (issue 15,
    // "Under load"). Each is its own statement, so the figures may come from instants a few
    // milliseconds apart, as they did one after the other.
    let (
        counts,
        oldest,
        (five, hour, day),
        series_rows,
        queue_stats,
        done_last_5m,
        error_counts,
        recent_errors,
        webhooks,
        relay,
        (attempts, failures),
        holds,
        lanes,
    ) = tokio::try_join!(
        store.stuck_counts(&cutoffs, now),
        store.stuck_payments(&cutoffs, 10),
        async {
            tokio::try_join!(
                store.outcome_counts(minute - 5 + 1),
                store.outcome_counts(minute - 60 + 1),
                store.outcome_counts(minute - 1440 + 1),
            )
        },
        store.outcome_series(minute - 59),
        // Whole minutes, the current one included, as the outcome windows above.
        store.queue_stats(minute - 60 + 1),
        store.jobs_done_since(minute - 5 + 1),
        store.error_counts(),
        store.error_items(Some(ErrorItemStatus::Open), None, 10),
        store.webhook_backlog(now - 3_600_000),
        store.relay_status(crate::store::RELAY_LEASE, now),
        async {
            let day = health_day_start(now);
            tokio::try_join!(
                store.channel_attempts_since(day),
                store.failure_groups_since(day)
            )
        },
        store.holds_expiring(now + HOLDS_WINDOW_MS),
        store.lane_loads(now, 5),
    )?;
    let stuck = StuckView {
        thresholds: thresholds
            .per_state()
            .iter()
            .map(|(s, t)| (s.as_str().to_string(), *t))
            .collect(),
        total: counts.iter().map(|c| c.2).sum(),
        counts,
        oldest: oldest
            .into_iter()
            .map(|mut p| {
                let jobs = usize::try_from(p.wakeable_jobs).unwrap_or(0);
                p.retry_why = crate::domain::actions::retry_refusal(jobs).unwrap_or_default();
                p
            })
            .collect(),
    };
    let queue = QueueView {
        kinds: queue_rows(queue_stats, now),
        done_last_5m,
        lanes: lane_rows(core, lanes).await?,
    };
    Ok(Dashboard {
        generated_at: now,
        stuck,
        idempotency: IdempotencyView {
            windows: hit_rates([("5m", &five[..]), ("1h", &hour[..]), ("24h", &day[..])]),
            routes: route_outcomes(&day),
            series: minute_series(series_rows),
        },
        queue,
        error_pool: error_pool_view(error_counts, recent_errors),
        webhooks,
        relay,
        channels: channel_health(attempts, failures, &thresholds.channel, now),
        holds: HoldsExpiring::of(now + HOLDS_WINDOW_MS, holds),
    })
}

/// The lanes as the dashboard shows them, each top merchant by its name (a handful of
/// lookups: at most 5 per lane).
async fn lane_rows(
    core: &Core,
    lanes: Vec<crate::store::LaneLoad>,
) -> Result<Vec<converge_wire::dashboard::LaneRow>, StoreError> {
    let mut rows = Vec::with_capacity(lanes.len());
    for l in lanes {
        let mut top = Vec::with_capacity(l.top_merchants.len());
        for m in l.top_merchants {
            let name = match m.merchant_id {
                Some(id) => core
                    .store
                    .merchant(id)
                    .await?
                    .map_or_else(|| format!("#{id}"), |m| m.name),
                None => "(none)".to_string(),
            };
            top.push((name, m.due));
        }
        rows.push(converge_wire::dashboard::LaneRow {
            lane: l.lane.as_str().to_string(),
            due: l.due,
            running: l.running,
            oldest_due_at: l.oldest_due_at,
            top,
        });
    }
    Ok(rows)
}

/// How far ahead the dashboard's "Holds expiring" panel looks: 24 hours (issue 34).
pub const HOLDS_WINDOW_MS: i64 = 24 * 3_600_000;

/// Idempotency outcome counts as the store reads them: (route, outcome, count).
type OutcomeRows = [(String, String, i64)];

/// The idempotency hit rate of each named window from its rows: the replays among the keyed
/// requests (0 when none was keyed).
fn hit_rates(windows: [(&str, &OutcomeRows); 3]) -> Vec<HitRate> {
    let mut out = Vec::new();
    for (name, rows) in windows {
        let keyed_n: i64 = rows.iter().filter(|r| keyed(&r.1)).map(|r| r.2).sum();
        let replays: i64 = rows.iter().filter(|r| r.1 == "replay").map(|r| r.2).sum();
        let rate = if keyed_n == 0 {
            0.0
        } else {
            replays as f64 / keyed_n as f64
        };
        out.push(HitRate {
            window: name.into(),
            keyed: keyed_n,
            replays,
            rate,
        });
    }
    out
}

/// Each route's count of every outcome over the (route, outcome, count) rows of `day`, the
/// routes in their first row's order.
fn route_outcomes(day: &OutcomeRows) -> Vec<RouteOutcomes> {
    let mut routes: Vec<RouteOutcomes> = Vec::new();
    for (route, _, _) in day {
        if routes.iter().any(|r| &r.route == route) {
            continue;
        }
        let counts = Outcome::ALL
            .iter()
            .map(|o| {
                let n = day
                    .iter()
                    .filter(|r| &r.0 == route && r.1 == o.as_str())
                    .map(|r| r.2)
                    .sum();
                (o.as_str().to_string(), n)
            })
            .collect();
        routes.push(RouteOutcomes {
            route: route.clone(),
            counts,
        });
    }
    routes
}

/// The keyed requests and replays per minute from (minute, outcome, count) rows ordered by
/// minute; minutes without rows are left out.
fn minute_series(series_rows: Vec<(i64, String, i64)>) -> Vec<MinutePoint> {
    let mut series: Vec<MinutePoint> = Vec::new();
    for (m, outcome, n) in series_rows {
        if series.last().is_none_or(|p| p.minute != m) {
            series.push(MinutePoint {
                minute: m,
                keyed: 0,
                replays: 0,
            });
        }
        let point = series.last_mut().expect("pushed above");
        if keyed(&outcome) {
            point.keyed += n;
        }
        if outcome == "replay" {
            point.replays += n;
        }
    }
    series
}

/// The error pool's panel: open items per kind (the kinds with any), their total and the
/// newest open items.
fn error_pool_view(
    error_counts: Vec<crate::store::ErrorKindCount>,
    recent: Vec<converge_wire::error_pool::ErrorItem>,
) -> ErrorPoolView {
    let open_by_kind: Vec<(String, i64, i64)> = error_counts
        .into_iter()
        .filter_map(|k| Some((k.kind, k.open, k.oldest_open?)))
        .collect();
    ErrorPoolView {
        open_total: open_by_kind.iter().map(|k| k.1).sum(),
        open_by_kind,
        recent,
    }
}

/// The first hour of the dashboard's 24-hour channel window at `now`: the current hour (UTC)
/// and the 23 before it, as whole hours.
fn health_day_start(now: i64) -> i64 {
    (now.div_euclid(3_600_000) - 23) * 3_600_000
}

/// Channel health per connector from the attempts of the 24-hour window (oldest first): per
/// minute for the last 60 minutes (the current one included), per hour for the 24 hours,
/// the last hour and the last five minutes summed, and the tile's level decided on the five
/// minutes ([`ChannelThresholds::level`]).
///
/// [`ChannelThresholds::level`]: crate::domain::channel_health::ChannelThresholds::level
pub fn channel_health(
    attempts: Vec<crate::store::ChannelAttemptRow>,
    failures: Vec<FailureGroup>,
    thresholds: &crate::domain::channel_health::ChannelThresholds,
    now: i64,
) -> ChannelHealthView {
    use crate::domain::channel_health::LEVEL_WINDOW_MINUTES;
    let minute = now.div_euclid(60_000);
    let first_minute = minute - 59;
    let first_hour = health_day_start(now) / 3_600_000;
    let mut names: Vec<&str> = attempts.iter().map(|a| a.connector.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let connectors = names
        .into_iter()
        .map(|name| {
            let mine: Vec<&crate::store::ChannelAttemptRow> =
                attempts.iter().filter(|a| a.connector == name).collect();
            let bucket = |start_ms: i64, end_ms: i64| {
                summed(
                    start_ms,
                    mine.iter()
                        .filter(|a| a.created_at >= start_ms && a.created_at < end_ms)
                        .copied(),
                )
            };
            let minutes: Vec<HealthBucket> = (first_minute..=minute)
                .map(|m| bucket(m * 60_000, (m + 1) * 60_000))
                .collect();
            let hours: Vec<HealthBucket> = (first_hour..first_hour + 24)
                .map(|h| bucket(h * 3_600_000, (h + 1) * 3_600_000))
                .collect();
            let last_5m = bucket((minute - LEVEL_WINDOW_MINUTES + 1) * 60_000, i64::MAX);
            let last_hour = bucket(first_minute * 60_000, i64::MAX);
            ConnectorHealth {
                connector: name.to_owned(),
                level: thresholds.level(last_5m.attempts, last_5m.undecidable),
                last_5m,
                last_hour,
                minutes,
                hours,
            }
        })
        .collect();
    ChannelHealthView {
        amber_pct: thresholds.amber_pct,
        red_pct: thresholds.red_pct,
        connectors,
        failures,
    }
}

/// The counts and latency percentiles of `rows`, as the bucket starting at `start`.
fn summed<'a>(
    start: i64,
    rows: impl Iterator<Item = &'a crate::store::ChannelAttemptRow>,
) -> HealthBucket {
    use crate::domain::channel_health::{AttemptOutcome, percentile};
    let mut b = HealthBucket {
        start,
        ..HealthBucket::default()
    };
    let mut durations = Vec::new();
    for a in rows {
        b.attempts += 1;
        match AttemptOutcome::parse(&a.outcome) {
            Some(AttemptOutcome::Success) => b.successes += 1,
            Some(AttemptOutcome::Decline) => b.declines += 1,
            // An outcome this build does not know is not a success: counted as undecidable.
            Some(AttemptOutcome::Undecidable) | None => b.undecidable += 1,
        }
        durations.push(a.duration_ms);
    }
    durations.sort_unstable();
    b.p50_ms = percentile(&durations, 0.5);
    b.p99_ms = percentile(&durations, 0.99);
    b
}

fn queue_rows(stats: Vec<QueueStat>, now: i64) -> Vec<QueueRow> {
    let mut rows: Vec<QueueRow> = Vec::new();
    for s in stats {
        let i = match rows.iter().position(|r| r.kind == s.kind) {
            Some(i) => i,
            None => {
                rows.push(QueueRow {
                    kind: s.kind.clone(),
                    ..QueueRow::default()
                });
                rows.len() - 1
            }
        };
        let row = &mut rows[i];
        match JobStatus::parse(&s.status) {
            Some(JobStatus::Due) => {
                row.due += s.count - s.retrying;
                row.retrying += s.retrying;
                row.oldest_due_ms = s.oldest_run_at.map_or(0, |t| (now - t).max(0));
            }
            Some(JobStatus::Leased) => row.leased += s.count,
            Some(JobStatus::Dead) => row.dead += s.count,
            Some(JobStatus::Done) => row.done += s.count,
            None => {}
        }
    }
    rows
}

/// A payment's whole story for its console page, and the refund a reversal made at the
/// channel: wire types, sent by `GET /ops/v1/payments/{id}` and the console's server function
/// alike.
pub use converge_wire::{PaymentDetail, ReversalView};

/// Audit records about a payment and about each action on it (approvals and rejections are
/// filed under the action), oldest first.
async fn payment_audit(
    store: &dyn crate::store::Store,
    id: &str,
) -> Result<Vec<crate::store::AuditRecord>, StoreError> {
    let mut records = store.audit_for_target(&format!("payment:{id}")).await?;
    for a in store.actions(None, Some(id), 50).await? {
        records.extend(store.audit_for_target(&format!("action:{}", a.id)).await?);
    }
    records.sort_by_key(|r| r.seq);
    Ok(records)
}

impl Core {
    /// Loads a payment's story; None when there is no such payment.
    pub async fn payment_detail(&self, id: &str) -> Result<Option<PaymentDetail>, StoreError> {
        let store = &self.store;
        let Some(payment) = store.payment(id).await? else {
            return Ok(None);
        };
        let merchant = store
            .merchant(payment.merchant_id)
            .await?
            .map(|m| m.name)
            .unwrap_or_default();
        let jobs = store.payment_jobs(id).await?;
        // The jobs an ops retry wakes (`Store::wake_jobs`).
        let wakeable = jobs
            .iter()
            .filter(|j| matches!(j.status, JobStatus::Due | JobStatus::Dead))
            .count();
        let actions = store.actions(None, Some(id), 50).await?;
        let reversal =
            (payment.status == crate::domain::state::PaymentStatus::Reversed).then(|| {
                ReversalView {
                    action_id: actions
                        .iter()
                        .find(|a| {
                            a.kind == ActionKind::Reverse.as_str()
                                && a.status == ActionStatus::Executed
                        })
                        .map(|a| a.id.clone()),
                    amount: payment.unrefunded(),
                }
            });
        fn wire<T: Into<W>, W>(rows: Vec<T>) -> Vec<W> {
            rows.into_iter().map(Into::into).collect()
        }
        Ok(Some(PaymentDetail {
            merchant,
            reversal,
            offers: crate::domain::actions::offers_with_pending(
                payment.status,
                wakeable,
                crate::domain::actions::HoldFacts::of(&payment, self.clock.now_ms()),
                actions
                    .iter()
                    .find(|a| a.status == ActionStatus::Pending)
                    .map(|a| a.id.as_str()),
            ),
            events: wire(store.payment_events(id).await?),
            jobs: wire(jobs),
            ledger: wire(store.payment_ledger(id).await?),
            refunds: wire(store.payment_refunds(id).await?),
            errors: store.payment_error_items(id).await?,
            audit: payment_audit(store.as_ref(), id).await?,
            actions,
            idempotency_keys: wire(store.payment_keys(id).await?),
            captures: store.payment_captures(id).await?,
            payment,
        }))
    }
}
