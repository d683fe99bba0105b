//! The dashboard (issue 5): what is stuck, how often clients retry, what the queue is doing,
//! what is in the error pool and how each connector's channel answers (issue 41), at a glance. It refreshes itself without reloading the page
//! when the live stream says something changed (or polls while the stream is down); ages are
//! measured from the server's `generated_at`, never the browser's clock, so the
//! server-rendered and hydrated pages agree.

use leptos::prelude::*;
use leptos_router::components::A;

use crate::api;
use crate::components::bulk_retry::{BulkRetry, RetryButton};
use crate::components::chart::{BarChart, ChartPoint, HitChart};
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, Money, StatusPill};
use crate::dto::{
    AGE_BUCKETS, ChannelHealthView, ConnectorHealth, Dashboard, ErrorPoolView, FailureReason,
    HealthBucket, HealthLevel, IdempotencyView, PaymentStatus, QueueView, StuckPayment, StuckView,
};
use crate::format;

/// The dashboard page.
#[component]
pub fn DashboardPage() -> impl IntoView {
    // (refresh count, whether the refresh is automatic): automatic refreshes are background
    // requests, which do not keep the session alive; opening the page and "Refresh now" do.
    let tick = RwSignal::new((0u64, false));
    let paused = RwSignal::new(false);
    // Automatic refreshes come from the live stream (or its polling fallback while it is
    // down): a change anywhere, or the clock moving the ages. They use `refresh_dashboard`,
    // a background request: a console left open on the dashboard still reaches the
    // session's idle timeout (ASVS 5.0 V7.3.1).
    let live = crate::components::live::use_live(|t| t == "dashboard");
    Effect::new(move |previous: Option<u64>| {
        let now = live.get();
        if previous.is_some_and(|p| p != now) && !paused.get_untracked() {
            tick.update(|t| *t = (t.0.wrapping_add(1), true));
        }
        now
    });
    let data = Resource::new(
        move || tick.get(),
        |(_, automatic)| async move {
            if automatic {
                api::refresh_dashboard().await
            } else {
                api::load_dashboard().await
            }
        },
    );
    // Outside the refreshing part, so a message or a half-done bulk retry survives a refresh.
    let flash = RwSignal::new(None::<String>);
    // Whether the message tells of a refusal or of nothing done: then it is not green.
    let refused = RwSignal::new(false);
    provide_context(Flash(flash, refused));
    let bulk_state = RwSignal::new(String::new());

    view! {
        <div class="page-head">
            <h1>"Dashboard"</h1>
            <div class="page-tools">
                <Transition fallback=|| ()>
                    {move || {
                        data.get()
                            .and_then(Result::ok)
                            .map(|d| {
                                view! {
                                    <span class="muted" data-testid="updated-at">
                                        {format!("updated {}", format::utc_time(d.generated_at))}
                                    </span>
                                }
                            })
                    }}
                </Transition>
                <button
                    type="button"
                    class="secondary small"
                    aria-pressed=move || paused.get().to_string()
                    on:click=move |_| paused.update(|p| *p = !*p)
                >
                    {move || if paused.get() { "Resume auto-refresh" } else { "Pause auto-refresh" }}
                </button>
                <button
                    type="button"
                    class="secondary small"
                    on:click=move |_| tick.update(|t| *t = (t.0.wrapping_add(1), false))
                >
                    "Refresh now"
                </button>
            </div>
        </div>
        <p class=move || if refused.get() { "flash tone-bad" } else { "flash" } role="status" data-testid="flash">
            {move || flash.get()}
        </p>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(d) => view! { <DashboardBody d/> }.into_any(),
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
        <div class="bulk-filter">
            <label>
                "Bulk retry: stuck state"
                <select data-testid="bulk-stuck-state" on:change=move |ev| bulk_state.set(event_target_value(&ev))>
                    <option value="">"all stuck states"</option>
                    // The states that can be stuck are exactly the unsettled ones (the server's
                    // `domain::stuck` is tested to agree).
                    {PaymentStatus::ALL
                        .into_iter()
                        .filter(|s| !s.is_settled())
                        .map(PaymentStatus::as_str)
                        .map(|s| view! { <option value=s>{s}</option> })
                        .collect_view()}
                </select>
            </label>
        </div>
        <BulkRetry source="stuck" filter=bulk_state/>
    }
}

/// The dashboard's message line and whether it tells of a refusal, shared with the rows'
/// retry buttons.
#[derive(Clone, Copy)]
struct Flash(RwSignal<Option<String>>, RwSignal<bool>);

/// A headline number with its label.
#[component]
fn Kpi(
    label: &'static str,
    value: String,
    testid: &'static str,
    /// `ok`, `warn` or `bad` colouring.
    tone: &'static str,
    #[prop(optional, into)] note: String,
) -> impl IntoView {
    view! {
        <div class=format!("kpi {tone}")>
            <div class="kpi-label">{label}</div>
            <div class="kpi-value" data-testid=testid>{value}</div>
            <div class="kpi-note">{note}</div>
        </div>
    }
}

fn tone(n: i64, bad: bool) -> &'static str {
    match (n, bad) {
        (0, _) => "ok",
        (_, true) => "bad",
        _ => "warn",
    }
}

#[component]
fn DashboardBody(d: Dashboard) -> impl IntoView {
    let now = d.generated_at;
    let five = d
        .idempotency
        .windows
        .iter()
        .find(|w| w.window == "5m")
        .cloned();
    let backlog: i64 = d.queue.kinds.iter().map(|k| k.due + k.retrying).sum();
    let dead: i64 = d.queue.kinds.iter().map(|k| k.dead).sum();
    view! {
        {relay_alert(&d.relay, now)}
        <section class="kpis" aria-label="Headline figures">
            <Kpi
                label="Stuck payments"
                value=d.stuck.total.to_string()
                testid="kpi-stuck"
                tone=tone(d.stuck.total, false)
                note="past their state's threshold"
            />
            <Kpi
                label="Key hit rate, 5 min"
                value=five.as_ref().map_or("–".into(), |w| hit_rate(w.keyed, w.rate))
                testid="kpi-hit-rate"
                tone="neutral"
                note=five
                    .as_ref()
                    .map_or(String::new(), |w| format!("{} replays / {} keyed", w.replays, w.keyed))
            />
            <Kpi
                label="Queue backlog"
                value=backlog.to_string()
                testid="kpi-backlog"
                tone=if backlog == 0 { "ok" } else { "neutral" }
                note=format!("{} done in the last 5 min", d.queue.done_last_5m)
            />
            <Kpi label="Dead jobs" value=dead.to_string() testid="kpi-dead" tone=tone(dead, true) note="gave up; see the error pool"/>
            <Kpi
                label="Webhooks waiting"
                value=d.webhooks.pending.to_string()
                testid="kpi-webhooks"
                tone=tone(d.webhooks.dead, true)
                note=format!(
                    "{} dead, {} failed attempts in 1 h{}",
                    d.webhooks.dead,
                    d.webhooks.failed_attempts,
                    d.webhooks
                        .oldest_pending_at
                        .map(|t| format!("; oldest {}", format::age(now - t)))
                        .unwrap_or_default(),
                )
            />
            <Kpi
                label="Error pool, open"
                value=d.error_pool.open_total.to_string()
                testid="kpi-pool-open"
                tone=tone(d.error_pool.open_total, true)
                note="need a person"
            />
        </section>
        <ChannelPanel channels=d.channels now/>
        <div class="grid">
            <StuckPanel stuck=d.stuck now/>
            <IdempotencyPanel idem=d.idempotency now/>
            <QueuePanel queue=d.queue now/>
            <PoolPanel pool=d.error_pool now/>
            <HoldsPanel holds=d.holds now/>
        </div>
    }
}

/// `part` of `total` as a percentage with one decimal, `–` without a total.
fn share(part: i64, total: i64) -> String {
    if total == 0 {
        "–".into()
    } else {
        format::percent(part as f64 / total as f64)
    }
}

/// The tile's words and colour class for a level.
fn level_words(level: HealthLevel) -> (&'static str, &'static str) {
    match level {
        HealthLevel::Ok => ("OK", "ok"),
        HealthLevel::Amber => ("Amber", "warn"),
        HealthLevel::Red => ("Red", "bad"),
    }
}

/// Channel health: a tile per connector (coloured by the undecidable share of the last five
/// minutes against the configured thresholds) with its attempts per minute and per hour, and
/// the last day's failures by reason, each linking to its payments.
#[component]
fn ChannelPanel(channels: ChannelHealthView, now: i64) -> impl IntoView {
    let ChannelHealthView {
        amber_pct,
        red_pct,
        connectors,
        failures,
    } = channels;
    let none = connectors.is_empty();
    view! {
        <Panel
            id="channels"
            title="Channel health"
            note=format!("undecidable share of the last 5 min: amber from {amber_pct}%, red from {red_pct}%")
            testid="channel-health"
        >
            {none.then(|| view! { <p class="muted">"No charge attempts in the last 24 hours."</p> })}
            <div class="channel-tiles">
                {connectors.into_iter().map(|c| view! { <ConnectorTile c now/> }).collect_view()}
            </div>
            <h3>"Failures by reason, 24 h"</h3>
            <DataTable
                columns=&["Reason", "Count", "Last"]
                numeric=&["Count"]
                label="Failures by reason"
                testid="channel-failures"
                empty=failures.is_empty().then_some("No failed charge attempts in the last 24 hours.")
            >
                {failures
                    .into_iter()
                    .map(|f| {
                        let href = format!("/payments{}", format::query_string(&[("reason", Some(f.reason.as_str()))]));
                        let label = FailureReason::label_of(&f.reason);
                        let (link_id, count_id) = (format!("failure-link-{}", f.reason), format!("failure-count-{}", f.reason));
                        view! {
                            <tr>
                                <th scope="row">
                                    <A href=href attr:data-testid=link_id>{label}</A>
                                </th>
                                <td class="num" data-testid=count_id>{f.count}</td>
                                <td class="nowrap">{format!("{} ago", format::age(now - f.last_at))}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

/// One connector's tile.
#[component]
fn ConnectorTile(c: ConnectorHealth, now: i64) -> impl IntoView {
    let (word, tone) = level_words(c.level);
    let name = c.connector.clone();
    let five: &HealthBucket = &c.last_5m;
    let hour: &HealthBucket = &c.last_hour;
    let latency = match (hour.p50_ms, hour.p99_ms) {
        (Some(p50), Some(p99)) => format!("p50 {p50} ms, p99 {p99} ms"),
        _ => "no attempts".into(),
    };
    let points = |buckets: &[HealthBucket]| -> Vec<ChartPoint> {
        buckets
            .iter()
            .filter(|b| b.attempts > 0)
            .map(|b| ChartPoint {
                start: b.start,
                total: b.attempts,
                part: b.undecidable,
            })
            .collect()
    };
    let minutes = points(&c.minutes);
    let hours = points(&c.hours);
    let summary = |span: &str| {
        format!(
            "Charge attempts and undecidable answers at {name} per {span}: {} attempts, {} undecidable in the last hour.",
            hour.attempts, hour.undecidable
        )
    };
    let (per_minute, per_hour) = (summary("minute"), summary("hour"));
    view! {
        <div
            class=format!("kpi channel-tile {tone}")
            data-testid=format!("channel-tile-{name}")
            data-level=c.level.as_str()
        >
            <div class="kpi-label">
                {format!("Connector {name} ")}
                <span class=format!("pill st-{tone}") data-testid=format!("channel-level-{name}")>{word}</span>
            </div>
            <div class="kpi-value" data-testid=format!("channel-share-{name}")>
                {share(five.undecidable, five.attempts)}
            </div>
            <div class="kpi-note">
                {format!(
                    "undecidable in 5 min: {} of {} attempts ({} charged, {} declined)",
                    five.undecidable, five.attempts, five.successes, five.declines
                )}
            </div>
            <dl class="channel-figures" data-testid=format!("channel-hour-{name}")>
                <dt>"Last hour"</dt>
                <dd>
                    {format!(
                        "{} attempts: {} charged, {} declined, {} undecidable",
                        hour.attempts, hour.successes, hour.declines, hour.undecidable
                    )}
                </dd>
                <dt>"Latency, 1 h"</dt>
                <dd>{latency}</dd>
            </dl>
            <BarChart
                points=minutes
                now_ms=now
                summary=per_minute
                testid="channel-chart-minutes"
                names=("attempts", "undecidable")
                legend=("attempts ", "undecidable (per minute, UTC)")
            />
            <details>
                <summary>"Per hour, 24 h"</summary>
                <BarChart
                    points=hours
                    now_ms=now
                    summary=per_hour
                    testid="channel-chart-hours"
                    names=("attempts", "undecidable")
                    legend=("attempts ", "undecidable (per hour, UTC)")
                    hourly=true
                />
            </details>
        </div>
    }
}

#[component]
fn StuckPanel(stuck: StuckView, now: i64) -> impl IntoView {
    let Flash(flash, refused) = expect_context::<Flash>();
    let rows = stuck
        .thresholds
        .clone()
        .into_iter()
        .map(|(state, limit)| {
            let cells = AGE_BUCKETS
                .iter()
                .enumerate()
                .map(|(i, (bucket, _))| {
                    let n = stuck.count(&state, bucket);
                    let class = match (n, i) {
                        (0, _) => "num zero",
                        (_, 0) => "num warn-cell",
                        _ => "num bad-cell",
                    };
                    view! {
                        <td class=class data-testid=format!("stuck-{state}-{bucket}")>{n}</td>
                    }
                })
                .collect_view();
            let total: i64 = AGE_BUCKETS
                .iter()
                .map(|(b, _)| stuck.count(&state, b))
                .sum();
            let link = format!("/payments?status={state}");
            view! {
                <tr>
                    <th scope="row">
                        <A href=link>
                            <StatusPill status=format::Pill::payment(&state)/>
                        </A>
                    </th>
                    <td class="muted">{format::threshold(limit)}</td>
                    {cells}
                    <td class="num strong">{total}</td>
                </tr>
            }
        })
        .collect_view();
    let oldest = stuck.oldest;
    let total = stuck.total;
    let buckets = || AGE_BUCKETS.iter().map(|(b, _)| *b);
    let columns: Vec<&'static str> = ["State", "Stuck after"]
        .into_iter()
        .chain(buckets())
        .chain(["Total"])
        .collect();
    let numeric: Vec<&'static str> = buckets().chain(["Total"]).collect();
    let nothing_stuck = oldest.is_empty().then_some("Nothing is stuck.");
    view! {
        <Panel
            id="stuck"
            title="Stuck payments"
            heading_extra=move || view! { <span class="count" data-testid="stuck-total">{total}</span> }
        >
            <p class="muted small">"Payments past their state's threshold, by time in the state."</p>
            <DataTable columns numeric label="Stuck payments by time in state">
                {rows}
            </DataTable>
            <h3>"Oldest stuck"</h3>
            <DataTable
                columns=&["Payment / last error", "State", "In state", "Amount", "Next attempt", "Action"]
                numeric=&["In state", "Amount"]
                label="Oldest stuck payments"
                testid="stuck-oldest"
                empty=nothing_stuck
            >
                {oldest
                    .into_iter()
                    .map(|p| view! { <OldestStuckRow p now flash refused/> })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

/// One of the oldest stuck payments: its last error, state, time in it, amount, next
/// attempt, and a retry.
#[component]
fn OldestStuckRow(
    p: StuckPayment,
    now: i64,
    flash: RwSignal<Option<String>>,
    refused: RwSignal<bool>,
) -> impl IntoView {
    let next = p.next_attempt_at.map_or("—".to_string(), |t| {
        if t <= now {
            "due now".to_string()
        } else {
            format!("in {}", format::age(t - now))
        }
    });
    let retry_id = p.id.clone();
    let retry_why = p.retry_why.clone();
    view! {
        <tr>
            <td>
                <A href=format!("/payments/{}", p.id) attr:class="mono">
                    {p.id.clone()}
                </A>
                <div class="error-text">
                    {format::clip(p.last_error.as_deref().unwrap_or(""), 90)}
                </div>
            </td>
            <td><StatusPill status=p.status/></td>
            <td class="num">{format::age(now - p.updated_at)}</td>
            <td class="num"><Money amount=p.amount currency=p.currency/></td>
            <td class="nowrap">{next}</td>
            <td>
                <RetryButton
                    payment_id=retry_id
                    reason="retry from the dashboard's stuck list".to_string()
                    flash=flash
                    why=retry_why
                    refused=refused
                />
            </td>
        </tr>
    }
}

/// The share of keyed requests that were replays, or "no keyed requests" when there were
/// none: a rate of nothing is not 0 %, and a "0.0%" reads as "nothing was ever replayed".
fn hit_rate(keyed: i64, rate: f64) -> String {
    if keyed == 0 {
        "no keyed requests".into()
    } else {
        format::percent(rate)
    }
}

#[component]
fn IdempotencyPanel(idem: IdempotencyView, now: i64) -> impl IntoView {
    let outcome_names = vec!["first", "replay", "in_use", "reused", "missing", "invalid"];
    let columns: Vec<&'static str> = std::iter::once("Route")
        .chain(outcome_names.iter().copied())
        .collect();
    view! {
        <Panel id="idem" title="Idempotency-Key hit rate">
            <div class="windows">
                {idem
                    .windows
                    .iter()
                    .map(|w| {
                        view! {
                            <div class="window">
                                <div class="kpi-label">{format!("last {}", w.window)}</div>
                                <div class="window-rate" data-testid=format!("hit-rate-{}", w.window)>
                                    {hit_rate(w.keyed, w.rate)}
                                </div>
                                <div class="muted small">
                                    <span data-testid=format!("replays-{}", w.window)>{w.replays}</span>
                                    " replays / "
                                    <span data-testid=format!("keyed-{}", w.window)>{w.keyed}</span>
                                    " keyed"
                                </div>
                            </div>
                        }
                    })
                    .collect_view()}
            </div>
            <HitChart series=idem.series now_ms=now/>
            <h3>"Outcomes per route, 24 h"</h3>
            <DataTable
                columns
                numeric=outcome_names.clone()
                label="Outcomes per route"
                empty=idem.routes.is_empty().then_some("No requests in the last 24 hours.")
            >
                {idem
                    .routes
                    .into_iter()
                    .map(|r| {
                        let cells = outcome_names
                            .iter()
                            .map(|o| {
                                let n: i64 = r
                                    .counts
                                    .iter()
                                    .filter(|c| c.0 == *o)
                                    .map(|c| c.1)
                                    .sum();
                                view! {
                                    <td class=if n == 0 { "num zero" } else { "num" }>{n}</td>
                                }
                            })
                            .collect_view();
                        view! {
                            <tr>
                                <th scope="row" class="mono">{r.route}</th>
                                {cells}
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

/// The manual-capture holds that lapse within 24 hours (issue 34): how many, what they still
/// hold per currency in major units, and the soonest expiry (already past when the expiry job
/// has not released it yet), linked to the AUTHORIZED payments.
#[component]
fn HoldsPanel(holds: converge_wire::dashboard::HoldsExpiring, now: i64) -> impl IntoView {
    let oldest = holds.oldest_expiry.map_or("—".to_string(), |t| {
        if t <= now {
            format!("{} ago (not released yet)", format::age(now - t))
        } else {
            format!("in {}", format::age(t - now))
        }
    });
    let amounts = if holds.held.is_empty() {
        "—".to_string()
    } else {
        holds
            .held
            .iter()
            .map(|(currency, minor)| format::money(*minor, currency))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let link = format!(
        "/payments?status={}&expires_before={}",
        PaymentStatus::Authorized,
        format::query_escape(&format::iso(holds.before))
    );
    view! {
        <Panel
            id="holds"
            title="Holds expiring within 24 h"
            heading_extra=move || view! { <span class="count" data-testid="holds-expiring-count">{holds.count}</span> }
        >
            <dl class="facts">
                <dt>"Held"</dt>
                <dd class="num" data-testid="holds-expiring-amounts">{amounts}</dd>
                <dt>"Soonest expiry"</dt>
                <dd data-testid="holds-expiring-oldest">{oldest}</dd>
            </dl>
            <p class="small">
                <A href=link attr:data-testid="holds-expiring-link">"AUTHORIZED payments →"</A>
            </p>
        </Panel>
    }
}

#[component]
fn QueuePanel(queue: QueueView, now: i64) -> impl IntoView {
    view! {
        <Panel id="queue" title="Compensation queue">
            <p class="muted">
                <span class="strong" data-testid="queue-done-5m">{queue.done_last_5m}</span>
                " jobs done in the last 5 minutes"
            </p>
            <DataTable
                columns=&["Kind", "Due", "Leased", "Retrying", "Dead", "Done (1 h)", "Oldest due"]
                numeric=&["Due", "Leased", "Retrying", "Dead", "Done (1 h)", "Oldest due"]
                titles=&[("Done (1 h)", "Jobs finished in the last hour")]
                testid="queue-table"
                empty=queue.kinds.is_empty().then_some("No jobs yet.")
            >
                {queue
                    .kinds
                    .into_iter()
                    .map(|k| {
                        view! {
                            <tr>
                                <th scope="row" class="mono">{k.kind}</th>
                                <td class=if k.due == 0 { "num zero" } else { "num" }>{k.due}</td>
                                <td class=if k.leased == 0 { "num zero" } else { "num" }>{k.leased}</td>
                                <td class=if k.retrying == 0 { "num zero" } else { "num warn-cell" }>
                                    {k.retrying}
                                </td>
                                <td class=if k.dead == 0 { "num zero" } else { "num bad-cell" }>{k.dead}</td>
                                <td class="num muted">{k.done}</td>
                                <td class="num">
                                    {if k.oldest_due_ms > 0 { format::age(k.oldest_due_ms) } else { "—".into() }}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
            <LanesTable lanes=queue.lanes now=now/>
        </Panel>
    }
}

/// The lanes (issue 37): each lane's due and running jobs, its oldest due job, and the
/// merchants who hold its backlog (top 5 by due jobs).
#[component]
fn LanesTable(lanes: Vec<converge_wire::dashboard::LaneRow>, now: i64) -> impl IntoView {
    view! {
        <DataTable
            columns=&["Lane", "Due", "Running", "Oldest due", "Backlog by merchant (top 5)"]
            numeric=&["Due", "Running", "Oldest due"]
            testid="lanes-table"
            empty=lanes.is_empty().then_some("No lanes.")
        >
            {lanes
                .into_iter()
                .map(|l| {
                    let top = if l.top.is_empty() {
                        "—".to_string()
                    } else {
                        l.top.iter().map(|(m, n)| format!("{m} {n}")).collect::<Vec<_>>().join(", ")
                    };
                    let oldest = l
                        .oldest_due_at
                        .map_or_else(|| "—".to_string(), |t| format::age((now - t).max(0)));
                    let testid = format!("lane-{}", l.lane);
                    view! {
                        <tr data-testid=testid>
                            <th scope="row" class="mono">{l.lane}</th>
                            <td class=if l.due == 0 { "num zero" } else { "num" }>{l.due}</td>
                            <td class=if l.running == 0 { "num zero" } else { "num" }>{l.running}</td>
                            <td class="num">{oldest}</td>
                            <td class="small">{top}</td>
                        </tr>
                    }
                })
                .collect_view()}
        </DataTable>
    }
}

#[component]
fn PoolPanel(pool: ErrorPoolView, now: i64) -> impl IntoView {
    let open_total = pool.open_total;
    view! {
        <Panel
            id="pool"
            title="Error pool"
            heading_extra=move || {
                view! {
                    <span class="count" data-testid="pool-open-total">{open_total}</span>
                    " open"
                }
            }
        >
            {if pool.open_by_kind.is_empty() {
                view! { <p class="empty">"The error pool is empty."</p> }.into_any()
            } else {
                view! {
                    <DataTable columns=&["Kind", "Open", "Oldest"] numeric=&["Open", "Oldest"]>
                            {pool
                                .open_by_kind
                                .into_iter()
                                .map(|(kind, n, oldest)| {
                                    view! {
                                        <tr>
                                            <th scope="row">
                                                <A href=format!("/error-pool?status=open&kind={}", format::query_escape(&kind))>{kind.clone()}</A>
                                            </th>
                                            <td class="num strong">{n}</td>
                                            <td class="num">{format::age(now - oldest)}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                    </DataTable>
                    <h3>"Newest open"</h3>
                    <ul class="itemlist">
                        {pool
                            .recent
                            .into_iter()
                            .map(|i| {
                                view! {
                                    <li>
                                        <span class="pill st-other">{i.kind}</span>
                                        " "
                                        {i.summary}
                                        " "
                                        {i
                                            .payment_id
                                            .map(|p| {
                                                view! {
                                                    <A href=format!("/payments/{p}") attr:class="mono">{p.clone()}</A>
                                                }
                                            })}
                                        <span class="muted small">{format!(" · {} ago", format::age(now - i.last_seen))}</span>
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                    .into_any()
            }}
            <p>
                <A href="/error-pool">"Open the error pool →"</A>
            </p>
        </Panel>
    }
}

/// The event stream's state: an alert when a relay ran here and is stopped or disconnected
/// (silence would look like "no events"), a quiet line when it runs, nothing when no relay
/// was ever configured.
fn relay_alert(r: &crate::dto::RelayStatus, now: i64) -> impl IntoView + use<> {
    if !r.configured {
        return None;
    }
    let lag = r
        .oldest_unpublished_at
        .map(|t| format::age(now - t))
        .unwrap_or_else(|| "none".into());
    let (class, text) = if !r.running {
        (
            "error-note",
            format!(
                "Event stream relay is not running: {} events wait to be published (oldest {lag}).",
                r.backlog
            ),
        )
    } else if !r.connected {
        (
            "error-note",
            format!(
                "Event stream relay is disconnected from NATS: {} events wait (oldest {lag}). {}",
                r.backlog,
                r.last_error.clone().unwrap_or_default()
            ),
        )
    } else {
        (
            "muted",
            format!(
                "Event stream: connected, {} events waiting, lag {lag}{}.",
                r.backlog,
                if r.refused > 0 {
                    format!(", {} refused by the broker (error pool)", r.refused)
                } else {
                    String::new()
                }
            ),
        )
    };
    let role = if class == "error-note" {
        "alert"
    } else {
        "status"
    };
    Some(view! { <p class=class role=role data-testid="relay-status">{text}</p> })
}

#[cfg(test)]
mod tests {
    use super::hit_rate;

    #[test]
    fn a_window_without_keyed_requests_has_no_rate_rather_than_zero() {
        assert_eq!(hit_rate(0, 0.0), "no keyed requests");
        assert_eq!(hit_rate(0, f64::NAN), "no keyed requests");
        assert_eq!(hit_rate(4, 0.25), "25.0%");
        assert_eq!(hit_rate(3, 0.0), "0.0%");
    }
}
