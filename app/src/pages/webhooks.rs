//! The Webhooks page: every merchant endpoint with its 24 h health (deliveries, success
//! rate, last failure, disabled and why), the deliveries filtered by status, endpoint, event
//! type, payment and time, each delivery's attempts (time, status, duration, the first KiB of
//! the answer, error), and the operator's actions: redeliver one delivery, recover an
//! endpoint (preview the failed deliveries since a time, then redeliver those still
//! selected), re-enable a disabled endpoint. Each action needs a reason and is audited.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use crate::api::error_message;
use crate::api_webhooks as api;
use crate::components::layout::signed_in_has;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, StatusPill, Time, filter_zone, zone_label};
use crate::dto::{
    DeliveryDetail, DeliveryRow, DeliveryStatus, EndpointRow, EndpointStatus, EventType, Role,
    WebhooksOverview,
};
use crate::format;

/// The delivery filter as typed.
#[derive(Debug, Clone, Default, PartialEq)]
struct Filter {
    status: String,
    endpoint: String,
    event_type: String,
    payment: String,
    from: String,
    to: String,
}

/// The Webhooks page.
#[component]
pub fn WebhooksPage() -> impl IntoView {
    let version = RwSignal::new(0u32);
    let message = RwSignal::new(None::<String>);
    let overview = Resource::new(move || version.get(), |_| api::load_webhooks_overview());
    let typed = RwSignal::new(Filter::default());
    let applied = RwSignal::new(Filter::default());
    // The pages walked so far: each entry is the `before` cursor of a page (None: the newest);
    // the last one is shown, "← Newer" pops it.
    let pages = RwSignal::new(vec![None::<i64>]);
    let deliveries = Resource::new(
        move || {
            (
                applied.get(),
                pages.with(|p| p.last().copied().flatten()),
                version.get(),
            )
        },
        |(f, before, _)| {
            api::webhook_deliveries(
                f.status,
                f.endpoint,
                f.event_type,
                f.payment,
                f.from,
                f.to,
                before,
            )
        },
    );
    let selected = RwSignal::new(None::<i64>);
    let can_act = signed_in_has(Role::Operator);
    let zone = filter_zone();

    view! {
        <div class="page-head">
            <h1>"Webhooks"</h1>
        </div>
        <p class="flash" role="status" data-testid="webhook-message">{move || message.get()}</p>
        <Panel id="endpoints" title="Endpoints">
            <Transition fallback=Loading>
                {move || Suspend::new(async move {
                    match overview.await {
                        Ok(o) => view! { <EndpointTable o can_act version message/> }.into_any(),
                        Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                    }
                })}
            </Transition>
        </Panel>
        <Panel id="deliveries" title="Deliveries">
            <DeliveryFilter typed applied pages zone/>
            <Transition fallback=Loading>
                {move || Suspend::new(async move {
                    match deliveries.await {
                        Ok(list) if list.is_empty() => {
                            view! { <p class="empty" data-testid="deliveries-empty">"No deliveries match."</p> }
                                .into_any()
                        }
                        Ok(mut list) => {
                            let older = (list.len() as i64 > api::DELIVERIES_PAGE).then(|| {
                                list.truncate(api::DELIVERIES_PAGE as usize);
                                list.last().map(|d| d.id)
                            }).flatten();
                            view! {
                                <DataTable
                                    columns=&["#", "Event", "Of", "Endpoint", "Status", "Attempts", "Last answer", "Created", "Action"]
                                    numeric=&["#", "Attempts"]
                                    class="data"
                                    framed=true
                                    testid="deliveries-table"
                                >
                                    {list
                                        .into_iter()
                                        .map(|d| view! { <DeliveryLine d selected/> })
                                        .collect_view()}
                                </DataTable>
                                <DeliveryPager pages older/>
                            }
                                .into_any()
                        }
                        Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                    }
                })}
            </Transition>
        </Panel>
        {move || selected.get().map(|id| view! { <DeliveryPanel id can_act version message selected/> })}
    }
}

/// The backlog sentence and the endpoints, each with its actions for operators.
#[component]
fn EndpointTable(
    o: WebhooksOverview,
    can_act: Signal<bool>,
    version: RwSignal<u32>,
    message: RwSignal<Option<String>>,
) -> impl IntoView {
    let backlog = o.backlog.clone();
    let now = o.now;
    view! {
        <p class="muted" data-testid="webhook-backlog">
            {format!(
                "{} waiting, {} dead, {} failed attempts in 24 h{}",
                backlog.pending,
                backlog.dead,
                backlog.failed_attempts,
                backlog
                    .oldest_pending_at
                    .map(|t| format!("; oldest waiting {}", format::age(now - t)))
                    .unwrap_or_default(),
            )}
        </p>
        <DataTable
            columns=&["Endpoint", "Merchant", "URL", "Events", "Status", "24 h", "Last failure", "Action"]
            numeric=&["24 h"]
            class="data"
            framed=true
            empty=o.endpoints.is_empty().then_some("No merchant has registered an endpoint.")
        >
            {o
                .endpoints
                .into_iter()
                .map(|e| view! { <EndpointLine e can_act version message/> })
                .collect_view()}
        </DataTable>
    }
}

/// The deliveries' filter form: `typed` as the person types; submitting applies it (its
/// times read in `zone`) and goes back to the newest page.
#[component]
fn DeliveryFilter(
    typed: RwSignal<Filter>,
    applied: RwSignal<Filter>,
    pages: RwSignal<Vec<Option<i64>>>,
    zone: Signal<Option<String>>,
) -> impl IntoView {
    let on_filter = move |ev: SubmitEvent| {
        ev.prevent_default();
        // The times as typed are meant in the zone the labels name.
        let mut f = typed.get_untracked();
        let tz = zone.get_untracked();
        let at = |v: String| format::as_rfc3339_in(Some(v), tz.as_deref()).unwrap_or_default();
        f.from = at(f.from);
        f.to = at(f.to);
        pages.set(vec![None]);
        applied.set(f);
    };
    view! {
        <form class="filters" role="search" on:submit=on_filter>
            <label>
                "Status"
                <select on:change=move |ev| typed.update(|f| f.status = event_target_value(&ev))>
                    <option value="">"any"</option>
                    {DeliveryStatus::ALL.map(|s| s.as_str()).into_iter().map(|s| view! { <option value=s>{s}</option> }).collect_view()}
                </select>
            </label>
            <label>
                "Event type"
                <select on:change=move |ev| typed.update(|f| f.event_type = event_target_value(&ev))>
                    <option value="">"any"</option>
                    {EventType::ALL.map(EventType::as_str).into_iter().map(|t| view! { <option value=t>{t}</option> }).collect_view()}
                </select>
            </label>
            <label>
                "Endpoint"
                <input
                    type="search"
                    placeholder="we_…"
                    prop:value=move || typed.get().endpoint
                    on:input=move |ev| typed.update(|f| f.endpoint = event_target_value(&ev))
                />
            </label>
            <label>
                "Payment"
                <input
                    type="search"
                    placeholder="pay_…"
                    prop:value=move || typed.get().payment
                    on:input=move |ev| typed.update(|f| f.payment = event_target_value(&ev))
                />
            </label>
            <label>
                {move || zone_label("From", zone.get().as_deref())}
                <input
                    type="datetime-local"
                    prop:value=move || typed.get().from
                    on:input=move |ev| typed.update(|f| f.from = event_target_value(&ev))
                />
            </label>
            <label>
                {move || zone_label("To", zone.get().as_deref())}
                <input
                    type="datetime-local"
                    prop:value=move || typed.get().to
                    on:input=move |ev| typed.update(|f| f.to = event_target_value(&ev))
                />
            </label>
            <div class="filter-actions">
                <button type="submit">"Filter"</button>
            </div>
        </form>
    }
}

/// "← Newer" and "Older →" under the deliveries: each page is [`api::DELIVERIES_PAGE`]
/// deliveries; `older` is the cursor of the next one, when there is one.
#[component]
fn DeliveryPager(pages: RwSignal<Vec<Option<i64>>>, older: Option<i64>) -> impl IntoView {
    let newer = move || pages.with(|p| p.len() > 1);
    let page_no = move || pages.with(Vec::len);
    view! {
        <nav class="pager" aria-label="Deliveries pages" data-testid="deliveries-pager">
            <Show when=newer>
                <button type="button" class="secondary small" data-testid="deliveries-newer" on:click=move |_| pages.update(|p| { p.pop(); })>
                    "← Newer"
                </button>
            </Show>
            <span class="muted small">{move || format!("Page {}", page_no())}</span>
            {older.map(|o| view! {
                <button type="button" class="secondary small" data-testid="deliveries-older" on:click=move |_| pages.update(|p| p.push(Some(o)))>
                    "Older →"
                </button>
            })}
        </nav>
    }
}

/// One endpoint with its health and, for operators, re-enable and recover.
#[component]
fn EndpointLine(
    e: EndpointRow,
    can_act: Signal<bool>,
    version: RwSignal<u32>,
    message: RwSignal<Option<String>>,
) -> impl IntoView {
    let rate = format::endpoint_health(e.attempts_24h, e.succeeded_24h);
    let breaker = format::breaker(e.breaker, e.breaker_open_until);
    let disabled = e.status == EndpointStatus::Disabled;
    let deleted = e.status == EndpointStatus::Deleted;
    let open = RwSignal::new(false);
    let id = e.id.clone();
    view! {
        <tr data-testid="endpoint-row">
            <td class="mono">{e.id.clone()}</td>
            <td>{e.merchant.clone()}</td>
            <td class="mono wrap">{e.url.clone()}</td>
            <td class="small">{e.enabled_events.join(", ")}</td>
            <td>
                <StatusPill status=e.status/>
                {e.disabled_reason.clone().map(|r| view! { <div class="muted small">{r}</div> })}
                <div class="muted small" data-testid="endpoint-breaker">{breaker}</div>
            </td>
            <td class="num">{rate}</td>
            <td class="small">
                {e.last_failure_at.map(|t| view! { <Time ms=t/> })}
                {e.last_failure.clone().map(|r| view! { <div class="muted">{format::clip(&r, 120)}</div> })}
            </td>
            <td class="nowrap">
                <Show when=move || can_act.get() && !deleted>
                    <button type="button" class="small" on:click=move |_| open.update(|o| *o = !*o)>
                        {if disabled { "Re-enable or recover…" } else { "Recover…" }}
                    </button>
                </Show>
            </td>
        </tr>
        <Show when=move || open.get()>
            <tr class="resolve-row">
                <td colspan="8">
                    <EndpointActions id=id.clone() disabled version message/>
                </td>
            </tr>
        </Show>
    }
}

/// Re-enable (when disabled) and recover: preview the failed deliveries since a time, then
/// redeliver those still ticked.
#[component]
fn EndpointActions(
    id: String,
    disabled: bool,
    version: RwSignal<u32>,
    message: RwSignal<Option<String>>,
) -> impl IntoView {
    let r = Recovery {
        id: StoredValue::new(id),
        reason: RwSignal::new(String::new()),
        since: RwSignal::new(String::new()),
        failure: RwSignal::new(None),
        preview: RwSignal::new(None),
        ticked: RwSignal::new(Vec::new()),
        busy: RwSignal::new(false),
        version,
        message,
    };
    let Recovery {
        reason,
        since,
        failure,
        busy,
        ..
    } = r;
    view! {
        <div class="inline-form" data-testid="endpoint-actions">
            <label class="grow">
                "Reason"
                <input type="text" maxlength="2000" bind:value=reason/>
            </label>
            {disabled
                .then(|| {
                    view! {
                        <button type="button" on:click=move |_| r.enable() disabled=move || busy.get()>
                            "Re-enable"
                        </button>
                    }
                })}
            <label>
                "Failed since (UTC)"
                <input type="datetime-local" bind:value=since/>
            </label>
            <button type="button" class="secondary" on:click=move |_| r.load_preview()>
                "Preview recovery"
            </button>
            <span class="form-message" role="alert">{move || failure.get()}</span>
        </div>
        <RecoveryPreview r/>
    }
}

/// An endpoint's actions: its id, the reason and the time the recovery starts from, the
/// recovery's preview and the deliveries ticked in it, whether a request is in flight and why
/// the last one failed; and where the outcome goes (`message`, and `version` bumped so the
/// page reloads).
#[derive(Clone, Copy)]
struct Recovery {
    id: StoredValue<String>,
    reason: RwSignal<String>,
    since: RwSignal<String>,
    failure: RwSignal<Option<String>>,
    preview: RwSignal<Option<Vec<DeliveryRow>>>,
    ticked: RwSignal<Vec<i64>>,
    busy: RwSignal<bool>,
    version: RwSignal<u32>,
    message: RwSignal<Option<String>>,
}

impl Recovery {
    /// Re-enables the endpoint, with the reason.
    fn enable(self) {
        let id = self.id.get_value();
        let why = self.reason.get_untracked();
        self.busy.set(true);
        spawn_local(async move {
            match api::webhook_enable(id, why).await {
                Ok(m) => {
                    self.message.set(Some(m));
                    self.version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => self.failure.set(Some(error_message(&e))),
            }
            self.busy.set(false);
        });
    }

    /// Asks for the failed deliveries since the time given, all ticked.
    fn load_preview(self) {
        let id = self.id.get_value();
        let s = self.since.get_untracked();
        self.failure.set(None);
        spawn_local(async move {
            match api::webhook_recover_preview(id, s).await {
                Ok(list) => {
                    self.ticked.set(list.iter().map(|d| d.id).collect());
                    self.preview.set(Some(list));
                }
                Err(e) => self.failure.set(Some(error_message(&e))),
            }
        });
    }

    /// Redelivers the ticked deliveries, with the reason.
    fn recover(self) {
        let id = self.id.get_value();
        let ids = self
            .ticked
            .get_untracked()
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let (s, why) = (self.since.get_untracked(), self.reason.get_untracked());
        self.busy.set(true);
        spawn_local(async move {
            match api::webhook_recover(id, s, ids, why).await {
                Ok(m) => {
                    self.message.set(Some(m));
                    self.preview.set(None);
                    self.version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => self.failure.set(Some(error_message(&e))),
            }
            self.busy.set(false);
        });
    }
}

/// The recovery's preview: each failed delivery with a tick box, and "Redeliver N selected".
#[component]
fn RecoveryPreview(r: Recovery) -> impl IntoView {
    let Recovery {
        preview,
        ticked,
        busy,
        ..
    } = r;
    move || {
        preview.get().map(|list| {
            if list.is_empty() {
                return view! { <p class="empty">"No failed deliveries since then."</p> }.into_any();
            }
            view! {
                <ul class="plain" data-testid="recovery-preview">
                    {list
                        .into_iter()
                        .map(|d| {
                            let id = d.id;
                            view! {
                                <li>
                                    <label>
                                        <input
                                            type="checkbox"
                                            prop:checked=move || ticked.get().contains(&id)
                                            on:change=move |_| {
                                                ticked
                                                    .update(|t| {
                                                        if let Some(i) = t.iter().position(|x| *x == id) {
                                                            t.remove(i);
                                                        } else {
                                                            t.push(id);
                                                        }
                                                    })
                                            }
                                        />
                                        {format!(
                                            " #{} {} of {} ({}, {} attempts)",
                                            d.id,
                                            d.event_type,
                                            d.aggregateid,
                                            d.status,
                                            d.attempts,
                                        )}
                                    </label>
                                </li>
                            }
                        })
                        .collect_view()}
                </ul>
                <button
                    type="button"
                    on:click=move |_| r.recover()
                    disabled=move || busy.get() || ticked.get().is_empty()
                >
                    {move || format!("Redeliver {} selected", ticked.get().len())}
                </button>
            }
            .into_any()
        })
    }
}

/// One delivery.
#[component]
fn DeliveryLine(d: DeliveryRow, selected: RwSignal<Option<i64>>) -> impl IntoView {
    let id = d.id;
    let of = if d.event_type.starts_with("payment.") {
        view! { <A href=format!("/payments/{}", d.aggregateid)>{d.aggregateid.clone()}</A> }
            .into_any()
    } else {
        view! { <span>{d.aggregateid.clone()}</span> }.into_any()
    };
    let answer = match (d.last_status, d.last_error.clone()) {
        (Some(s), None) => format!("HTTP {s}"),
        (Some(s), Some(e)) => format!("HTTP {s}: {}", format::clip(&e, 80)),
        (None, Some(e)) => format::clip(&e, 80),
        (None, None) => "—".into(),
    };
    view! {
        <tr data-testid="delivery-row">
            <td class="num">{id}</td>
            <td class="mono">{d.event_type.clone()}</td>
            <td class="mono">{of}</td>
            <td class="mono">{d.endpoint_id.clone()}</td>
            <td><StatusPill status=d.status/></td>
            <td class="num">{d.attempts}</td>
            <td class="small">{answer}</td>
            <td><Time ms=d.created_at/></td>
            <td>
                <button
                    type="button"
                    class="small"
                    data-attempts=id
                    aria-expanded=move || (selected.get() == Some(id)).to_string()
                    aria-controls=move || (selected.get() == Some(id)).then_some("delivery-detail")
                    on:click=move |_| selected.set(Some(id))
                >
                    "Attempts"
                </button>
            </td>
        </tr>
    }
}

/// A delivery's attempts and event, with the redeliver form for operators.
#[component]
fn DeliveryPanel(
    id: i64,
    can_act: Signal<bool>,
    version: RwSignal<u32>,
    message: RwSignal<Option<String>>,
    selected: RwSignal<Option<i64>>,
) -> impl IntoView {
    let detail = Resource::new(move || version.get(), move |_| api::webhook_delivery(id));
    let reason = RwSignal::new(String::new());
    let failure = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    // Keyboard focus: to the panel's heading when it opens (it is below the lists), back to
    // the row's "Attempts" button when it is closed.
    let heading = NodeRef::<leptos::html::H2>::new();
    Effect::new(move |_| {
        if let Some(h) = heading.get() {
            let _ = h.focus();
        }
    });
    let close = move |_| {
        selected.set(None);
        if let Ok(Some(b)) = document().query_selector(&format!("button[data-attempts=\"{id}\"]"))
            && let Ok(b) = wasm_bindgen::JsCast::dyn_into::<leptos::web_sys::HtmlElement>(b)
        {
            let _ = b.focus();
        }
    };
    let on_redeliver = move |ev: SubmitEvent| {
        ev.prevent_default();
        let why = reason.get_untracked();
        busy.set(true);
        failure.set(None);
        spawn_local(async move {
            match api::redeliver_webhook(id, why).await {
                Ok(m) => {
                    message.set(Some(m));
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => failure.set(Some(error_message(&e))),
            }
            busy.set(false);
        });
    };
    view! {
        <Panel
            id="delivery"
            title=format!("Delivery #{id}")
            heading_ref=heading
            actions=move || {
                view! {
                    <button type="button" class="secondary small" on:click=close>
                        "Close"
                    </button>
                }
            }
            testid="delivery-detail"
            attr:id="delivery-detail"
        >
            <Transition fallback=Loading>
                {move || Suspend::new(async move {
                    match detail.await {
                        Ok(d) => view! { <DeliveryAttempts d id/> }.into_any(),
                        Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                    }
                })}
            </Transition>
            <Show when=move || can_act.get()>
                <form class="inline-form" on:submit=on_redeliver>
                    <label class="grow">
                        "Reason"
                        <input type="text" maxlength="2000" required bind:value=reason/>
                    </label>
                    <button type="submit" disabled=move || busy.get()>
                        "Redeliver"
                    </button>
                    <span class="form-message" role="alert">{move || failure.get()}</span>
                </form>
            </Show>
        </Panel>
    }
}

/// A delivery's summary, its attempts, and its event (behind a toggle).
#[component]
fn DeliveryAttempts(d: DeliveryDetail, id: i64) -> impl IntoView {
    let event = d.event.clone();
    view! {
        <p>
            {format!(
                "{} to {} — {} after {} attempts",
                d.delivery.event_type,
                d.delivery.url,
                d.delivery.status,
                d.delivery.attempts,
            )}
            {d.delivery.next_attempt_at.map(|t| view! { ", next at " <Time ms=t/> })}
        </p>
        <DataTable
            columns=&["Attempted", "Status", "Duration", "Answer (first KiB)", "Error"]
            numeric=&["Status", "Duration"]
            class="data"
            label=format!("Attempts of delivery #{id}")
            framed=true
        >
            {d
                .attempts
                .into_iter()
                .map(|a| {
                    view! {
                        <tr>
                            <td><Time ms=a.attempted_at/></td>
                            <td class="num">
                                {a.status_code.map(|s| s.to_string()).unwrap_or_else(|| "—".into())}
                            </td>
                            <td class="num">{format!("{} ms", a.duration_ms)}</td>
                            <td class="mono small wrap">{format::clip(&a.response, 1024)}</td>
                            <td class="small">{a.error.unwrap_or_default()}</td>
                        </tr>
                    }
                })
                .collect_view()}
        </DataTable>
        {event
            .map(|e| {
                view! {
                    <details>
                        <summary>{format!("Event {} (webhook-id)", e.id)}</summary>
                        <pre class="evidence">{format::pretty_json(&e.payload)}</pre>
                    </details>
                }
            })}
    }
}
