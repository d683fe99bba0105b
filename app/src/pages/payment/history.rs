//! What happened to a payment, one panel each: its timeline of events, compensation jobs,
//! ledger lines, refunds, error-pool items, outbox events with their deliveries, and the
//! audit records about it.

use leptos::prelude::*;
use leptos_router::components::A;

use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, Money, StatusPill, Time};
use crate::dto::{AuditRecord, ErrorItem, EventRecord, Job, JobStatus, LedgerEntry, Refund, Role};
use crate::format;

/// The audit records about this payment, in order, and (for auditors) a link to them in the
/// audit viewer, which adds those of its actions and error-pool items and the chain status.
#[component]
pub(super) fn PaymentAudit(records: Vec<AuditRecord>, payment_id: String) -> impl IntoView {
    let auditor = crate::components::layout::signed_in_has(Role::Auditor);
    let href = format!("/audit?payment={}", format::query_escape(&payment_id));
    let empty = records.is_empty().then_some("None.");
    view! {
        <Panel id="audit" title="Audit records">
            <Show when=move || auditor.get()>
                <p class="small">
                    <A href=href.clone() attr:data-testid="payment-audit-link">
                        "All audit records of this payment, with the chain status →"
                    </A>
                </p>
            </Show>
            <DataTable
                columns=&["Seq", "At", "Actor", "Action", "Reason", "After"]
                numeric=&["Seq"]
                testid="payment-audit"
                empty
            >
                {records
                    .into_iter()
                    .map(|r| {
                        view! {
                            <tr>
                                <td class="num">{r.seq}</td>
                                <td><Time ms=r.at/></td>
                                <td>{format!("{} ({})", r.actor, r.roles)}</td>
                                <td class="mono">{r.action}</td>
                                <td>{r.reason}</td>
                                <td class="mono small">{format::clip(&r.after_state, 160)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

/// Every event the payment received, applied or ignored, with its source and evidence.
#[component]
pub(super) fn Timeline(events: Vec<EventRecord>) -> impl IntoView {
    let ignored = events.iter().filter(|e| !e.applied).count();
    view! {
        <Panel id="timeline" title="Timeline" note=format!("{} events, {ignored} ignored", events.len())>
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
                                                    <StatusPill status=format::Pill::payment(&e.from_status)/>
                                                    " → "
                                                    <StatusPill status=format::Pill::payment(&to)/>
                                                </span>
                                            }
                                                .into_any()
                                        }
                                        _ => {
                                            view! {
                                                <span class="transition">
                                                    <span class="pill st-ignored">"ignored"</span>
                                                    " in "
                                                    <StatusPill status=format::Pill::payment(&e.from_status)/>
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
        </Panel>
    }
}

/// The payment's compensation jobs (submit, query, post ledger, ...).
#[component]
pub(super) fn Jobs(jobs: Vec<Job>) -> impl IntoView {
    let empty = jobs.is_empty().then_some("No jobs.");
    view! {
        <Panel id="jobs" title="Jobs">
            <DataTable
                columns=&["Kind", "Status", "Attempts", "Next attempt", "Last error"]
                numeric=&["Attempts"]
                testid="jobs"
                empty
            >
                {jobs
                    .into_iter()
                    .map(|j| {
                        let pending = !j.status.is_final();
                        let open = j.status != JobStatus::Done;
                        view! {
                            <tr>
                                <td class="mono">{j.kind}</td>
                                <td><StatusPill status=j.status/></td>
                                // "done 0 / 8" beside an error read as a contradiction: a finished
                                // job shows the attempts it used, and its last error as history.
                                <td class="num">
                                    {if open {
                                        format!("{} / {}", j.attempts, j.max_attempts)
                                    } else {
                                        j.attempts.to_string()
                                    }}
                                </td>
                                <td>
                                    {if pending {
                                        view! { <Time ms=j.run_at/> }.into_any()
                                    } else {
                                        view! { <span class="muted">"—"</span> }.into_any()
                                    }}
                                </td>
                                <td class="error-text">
                                    {match (j.last_error, open) {
                                        (Some(e), false) => format!("before it finished: {e}"),
                                        (Some(e), true) => e,
                                        (None, _) => String::new(),
                                    }}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

/// The payment's ledger lines, debit and credit in their own columns.
#[component]
pub(super) fn Ledger(lines: Vec<LedgerEntry>) -> impl IntoView {
    let empty = lines.is_empty().then_some("Nothing posted.");
    view! {
        <Panel id="ledger" title="Ledger">
            <DataTable
                columns=&["Batch", "Kind", "Account", "Debit", "Credit", "Posted", "Accounting day"]
                numeric=&["Batch", "Debit", "Credit"]
                testid="ledger"
                empty
            >
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
                                <td class="mono">{l.accounting_date}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

/// The merchant's refunds and, on a reversed payment, the reversal's refund at the channel.
#[component]
pub(super) fn Refunds(
    refunds: Vec<Refund>,
    currency: String,
    /// (reverse action id, amount refunded at the channel in minor units).
    reversal: Option<(String, i64)>,
) -> impl IntoView {
    let reversal_row = reversal.map(|(by, amount)| {
        let currency = currency.clone();
        view! {
            <p data-testid="reversal-refund">
                {format!("Reversal{}: ", if by.is_empty() { String::new() } else { format!(" {by}") })}
                <Money amount currency/>
                " refunded at the channel; the ledger entries are under Ledger."
            </p>
        }
    });
    let empty = refunds.is_empty().then_some("No merchant refunds.");
    view! {
        <Panel id="refunds" title="Refunds">
            {reversal_row}
            <DataTable
                columns=&["Refund", "Amount", "Status", "Reason", "Created", "Last error"]
                numeric=&["Amount"]
                empty
            >
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
            </DataTable>
        </Panel>
    }
}

/// The payment's outbox events (and its refunds') with each delivery's state: what the
/// merchant was told, and whether it got it. Nothing at all when the payment itself did not
/// load (a missing payment has no events to show: issue 41).
#[component]
pub(super) fn Notifications(
    data: Resource<Result<crate::dto::PaymentWebhooks, ServerFnError>>,
    /// The payment's own load; the panel waits for it and stays away when it failed.
    payment: Resource<Result<crate::dto::PaymentDetail, ServerFnError>>,
) -> impl IntoView {
    view! {
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                if payment.await.is_err() {
                    return ().into_any();
                }
                let body = match data.await {
                    Ok(w) => view! { <EventRows w/> }.into_any(),
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                };
                view! { <Panel id="events" title="Events and webhooks" testid="payment-events">{body}</Panel> }
                    .into_any()
            })}
        </Transition>
    }
}

/// The events table of [`Notifications`], each event with its deliveries.
#[component]
fn EventRows(w: crate::dto::PaymentWebhooks) -> impl IntoView {
    let empty = w
        .events
        .is_empty()
        .then_some("No events yet: the payment has reached no outcome.");
    let link = (!w.events.is_empty())
        .then(|| view! { <p class="small"><A href="/webhooks">"Webhooks page"</A></p> });
    let deliveries = w.deliveries;
    view! {
        <DataTable columns=&["Event", "Of", "Written", "Deliveries"] empty>
            {w
                .events
                .into_iter()
                .map(|e| {
                    let mine: Vec<String> = deliveries
                        .iter()
                        .filter(|d| d.event_id == e.id)
                        .map(|d| format!("#{} {} ({} attempts) to {}", d.id, d.status, d.attempts, d.url))
                        .collect();
                    view! {
                        <tr>
                            <td class="mono">{e.event_type.clone()}</td>
                            <td class="mono">{e.aggregateid.clone()}</td>
                            <td><Time ms=e.created_at/></td>
                            <td class="small">
                                {if mine.is_empty() {
                                    "no subscribed endpoint".to_string()
                                } else {
                                    mine.join("; ")
                                }}
                            </td>
                        </tr>
                    }
                })
                .collect_view()}
        </DataTable>
        {link}
    }
}

/// The error-pool items about this payment, open or resolved.
#[component]
pub(super) fn RelatedErrors(items: Vec<ErrorItem>) -> impl IntoView {
    view! {
        <Panel id="errors" title="Error-pool items">
            {if items.is_empty() {
                view! { <p class="empty">"None."</p> }.into_any()
            } else {
                view! {
                    <ul class="itemlist" data-testid="related-errors">
                        {items
                            .into_iter()
                            .map(|i| {
                                let link = format!("/error-pool?status=all&item={}", i.id);
                                view! {
                                    <li>
                                        <StatusPill status=i.status/>
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
        </Panel>
    }
}
