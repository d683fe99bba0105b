//! One payment's whole story: its current state, the timeline of every event (applied and
//! ignored, with the source and evidence), its compensation jobs, ledger lines, refunds and
//! related error-pool items.

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use crate::api;
use crate::components::widgets::{ErrorNote, Loading, Money, StatusPill, Time};
use crate::dto::{ErrorItem, EventRecord, Job, LedgerEntry, PaymentDetail, Refund};
use crate::format;

/// The payment page (`/payments/:id`).
#[component]
pub fn PaymentPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let version = RwSignal::new(0u32);
    let detail = Resource::new(
        move || (id.get(), version.get()),
        |(id, _)| api::load_payment(id),
    );
    view! {
        <p class="crumbs">
            <A href="/payments">"← Payments"</A>
        </p>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match detail.await {
                    Ok(d) => view! { <Story d version/> }.into_any(),
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Story(d: PaymentDetail, version: RwSignal<u32>) -> impl IntoView {
    let p = d.payment;
    let currency = p.currency.clone();
    view! {
        <div class="page-head">
            <h1 class="mono" data-testid="payment-id">{p.id.clone()}</h1>
            <div class="page-tools">
                <span data-testid="payment-status"><StatusPill status=p.status.clone()/></span>
                <button
                    type="button"
                    class="secondary small"
                    on:click=move |_| version.update(|v| *v = v.wrapping_add(1))
                >
                    "Refresh"
                </button>
            </div>
        </div>
        <section class="panel facts" aria-label="Payment">
            <dl>
                <dt>"Amount"</dt>
                <dd><Money amount=p.amount currency=p.currency.clone()/></dd>
                <dt>"Refunded"</dt>
                <dd><Money amount=p.refunded_amount currency=p.currency.clone()/></dd>
                <dt>"Merchant"</dt>
                <dd>{d.merchant}</dd>
                <dt>"Merchant order id"</dt>
                <dd class="mono">{p.merchant_order_id}</dd>
                <dt>"Created"</dt>
                <dd><Time ms=p.created_at/></dd>
                <dt>"Updated"</dt>
                <dd><Time ms=p.updated_at/></dd>
                <dt>"Version"</dt>
                <dd>{p.version}</dd>
                <dt>"Channel submits"</dt>
                <dd>{p.submit_attempts}</dd>
                <dt>"Channel key"</dt>
                <dd class="mono">{p.channel_key}</dd>
                <dt>"Description"</dt>
                <dd>{if p.description.is_empty() { "—".to_string() } else { p.description }}</dd>
                <dt>"Last error"</dt>
                <dd class="error-text">{p.last_error.unwrap_or_else(|| "—".into())}</dd>
            </dl>
        </section>
        <div class="grid">
            <Timeline events=d.events/>
            <div class="stack">
                <Jobs jobs=d.jobs/>
                <Ledger lines=d.ledger/>
                <Refunds refunds=d.refunds currency/>
                <RelatedErrors items=d.errors/>
            </div>
        </div>
    }
}

#[component]
fn Timeline(events: Vec<EventRecord>) -> impl IntoView {
    let ignored = events.iter().filter(|e| !e.applied).count();
    view! {
        <section class="panel" aria-labelledby="timeline-h">
            <h2 id="timeline-h">
                "Timeline "
                <span class="muted small">
                    {format!("{} events, {ignored} ignored", events.len())}
                </span>
            </h2>
            <ol class="timeline" data-testid="timeline">
                {events
                    .into_iter()
                    .map(|e| {
                        let class = if e.applied { "event applied" } else { "event ignored" };
                        view! {
                            <li class=class>
                                <div class="event-head">
                                    <span class="event-name mono">{e.event}</span>
                                    {match e.to_status {
                                        Some(to) if e.applied => {
                                            view! {
                                                <span class="transition">
                                                    <StatusPill status=e.from_status/>
                                                    " → "
                                                    <StatusPill status=to/>
                                                </span>
                                            }
                                                .into_any()
                                        }
                                        _ => {
                                            view! {
                                                <span class="transition">
                                                    <span class="pill st-ignored">"ignored"</span>
                                                    " in "
                                                    <StatusPill status=e.from_status/>
                                                </span>
                                            }
                                                .into_any()
                                        }
                                    }}
                                </div>
                                <div class="event-meta muted small">
                                    <Time ms=e.created_at/>
                                    {format!(" · from {} · {}", e.source, e.event_id)}
                                </div>
                                {(!e.detail.is_empty()).then(|| view! { <div class="event-detail">{e.detail}</div> })}
                            </li>
                        }
                    })
                    .collect_view()}
            </ol>
        </section>
    }
}

#[component]
fn Jobs(jobs: Vec<Job>) -> impl IntoView {
    view! {
        <section class="panel" aria-labelledby="jobs-h">
            <h2 id="jobs-h">"Jobs"</h2>
            {if jobs.is_empty() {
                view! { <p class="empty">"No jobs."</p> }.into_any()
            } else {
                view! {
                    <table class="data compact" data-testid="jobs">
                        <thead>
                            <tr>
                                <th scope="col">"Kind"</th>
                                <th scope="col">"Status"</th>
                                <th scope="col" class="num">"Attempts"</th>
                                <th scope="col">"Next attempt"</th>
                                <th scope="col">"Last error"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {jobs
                                .into_iter()
                                .map(|j| {
                                    let pending = j.status == "due" || j.status == "leased";
                                    view! {
                                        <tr>
                                            <td class="mono">{j.kind}</td>
                                            <td><StatusPill status=j.status/></td>
                                            <td class="num">{format!("{} / {}", j.attempts, j.max_attempts)}</td>
                                            <td>
                                                {if pending {
                                                    view! { <Time ms=j.run_at/> }.into_any()
                                                } else {
                                                    view! { <span class="muted">"—"</span> }.into_any()
                                                }}
                                            </td>
                                            <td class="error-text">{j.last_error.unwrap_or_default()}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                }
                    .into_any()
            }}
        </section>
    }
}

#[component]
fn Ledger(lines: Vec<LedgerEntry>) -> impl IntoView {
    view! {
        <section class="panel" aria-labelledby="ledger-h">
            <h2 id="ledger-h">"Ledger"</h2>
            {if lines.is_empty() {
                view! { <p class="empty">"Nothing posted."</p> }.into_any()
            } else {
                view! {
                    <table class="data compact" data-testid="ledger">
                        <thead>
                            <tr>
                                <th scope="col" class="num">"Batch"</th>
                                <th scope="col">"Kind"</th>
                                <th scope="col">"Account"</th>
                                <th scope="col" class="num">"Debit"</th>
                                <th scope="col" class="num">"Credit"</th>
                                <th scope="col">"Posted"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {lines
                                .into_iter()
                                .map(|l| {
                                    let amount = format::money(l.amount, &l.currency);
                                    let (debit, credit) = if l.direction == "debit" {
                                        (amount, String::new())
                                    } else {
                                        (String::new(), amount)
                                    };
                                    view! {
                                        <tr>
                                            <td class="num">{l.batch_id}</td>
                                            <td>{l.kind}</td>
                                            <td class="mono">{l.account}</td>
                                            <td class="num">{debit}</td>
                                            <td class="num">{credit}</td>
                                            <td><Time ms=l.created_at/></td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                }
                    .into_any()
            }}
        </section>
    }
}

#[component]
fn Refunds(refunds: Vec<Refund>, currency: String) -> impl IntoView {
    view! {
        <section class="panel" aria-labelledby="refunds-h">
            <h2 id="refunds-h">"Refunds"</h2>
            {if refunds.is_empty() {
                view! { <p class="empty">"No refunds."</p> }.into_any()
            } else {
                view! {
                    <table class="data compact">
                        <thead>
                            <tr>
                                <th scope="col">"Refund"</th>
                                <th scope="col" class="num">"Amount"</th>
                                <th scope="col">"Status"</th>
                                <th scope="col">"Reason"</th>
                                <th scope="col">"Created"</th>
                                <th scope="col">"Last error"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {refunds
                                .into_iter()
                                .map(|r| {
                                    view! {
                                        <tr>
                                            <td class="mono">{r.id}</td>
                                            <td class="num"><Money amount=r.amount currency=currency.clone()/></td>
                                            <td><StatusPill status=r.status/></td>
                                            <td>{r.reason}</td>
                                            <td><Time ms=r.created_at/></td>
                                            <td class="error-text">{r.last_error.unwrap_or_default()}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                }
                    .into_any()
            }}
        </section>
    }
}

#[component]
fn RelatedErrors(items: Vec<ErrorItem>) -> impl IntoView {
    view! {
        <section class="panel" aria-labelledby="errors-h">
            <h2 id="errors-h">"Error-pool items"</h2>
            {if items.is_empty() {
                view! { <p class="empty">"None."</p> }.into_any()
            } else {
                view! {
                    <ul class="itemlist" data-testid="related-errors">
                        {items
                            .into_iter()
                            .map(|i| {
                                let link = format!(
                                    "/error-pool?status={}&kind={}",
                                    format::query_escape(&i.status),
                                    format::query_escape(&i.kind),
                                );
                                view! {
                                    <li>
                                        <StatusPill status=i.status.clone()/>
                                        " "
                                        <A href=link>{format!("#{} {}", i.id, i.kind)}</A>
                                        " "
                                        {i.summary}
                                        {i
                                            .resolution_note
                                            .map(|n| {
                                                view! {
                                                    <div class="muted small">
                                                        {format!(
                                                            "resolved by {}: {n}",
                                                            i.resolved_by.unwrap_or_default(),
                                                        )}
                                                    </div>
                                                }
                                            })}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                    .into_any()
            }}
        </section>
    }
}
