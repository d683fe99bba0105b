//! One payment's whole story: its current state, the timeline of every event (applied and
//! ignored, with the source and evidence), its compensation jobs, ledger lines, refunds and
//! related error-pool items; for operators, the actions panel (query and retry at once;
//! reverse and force transition as requests for an approver), the payment's actions and its
//! audit records.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use crate::components::layout::signed_in_has;
use crate::components::widgets::{ErrorNote, JsonFields, Loading, Money, StatusPill, Time};
use crate::dto::{
    ActionOffer, ActionRecord, AuditRecord, ErrorItem, EventRecord, Job, LedgerEntry,
    PaymentDetail, Refund, Role,
};
use crate::format;
use crate::{api, api_actions};

/// The payment page (`/payments/:id`).
#[component]
pub fn PaymentPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let version = RwSignal::new(0u32);
    // Fetched again on the person's Refresh, after an action, and (as a background request)
    // when the live stream says this payment changed: an approver's decision lands here
    // without a reload.
    let live = crate::components::live::use_live(move |t| {
        t == "payment:*"
            || id
                .try_get_untracked()
                .is_some_and(|id| t.strip_prefix("payment:") == Some(id.as_str()))
    });
    let seen = StoredValue::new(0u64);
    let detail = Resource::new(
        move || (id.get(), version.get(), live.get()),
        move |(id, _, l)| {
            let background = crate::components::live::moved(l, seen);
            async move {
                if background {
                    api::refresh_payment(id).await
                } else {
                    api::load_payment(id).await
                }
            }
        },
    );
    // Outlive a reload of the detail, so the outcome of an action stays in view.
    let flash = RwSignal::new(None::<String>);
    // Set when an action's outcome should take the keyboard focus once the reloaded story is
    // shown (the story is rendered anew, so the focused button is gone).
    let focus_flash = RwSignal::new(false);
    // The request form's state belongs to the page, not to the story: a story redrawn by a
    // live update keeps an open form and what was typed in it.
    let request = RequestState::new();
    // A resource of the page, not of the story: one created inside the story's Suspend was
    // never fetched again after an action reloaded the story, which held the whole panel back.
    let seen_notifications = StoredValue::new(0u64);
    let notifications = Resource::new(
        move || (id.get(), version.get(), live.get()),
        move |(id, _, l)| {
            let background = crate::components::live::moved(l, seen_notifications);
            async move {
                if background {
                    crate::api_webhooks::refresh_payment_webhooks(id).await
                } else {
                    crate::api_webhooks::load_payment_webhooks(id).await
                }
            }
        },
    );
    view! {
        <p class="crumbs">
            <A href="/payments">"← Payments"</A>
        </p>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match detail.await {
                    Ok(d) => view! { <Story d version flash focus_flash request/> }.into_any(),
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
        <Notifications data=notifications/>
    }
}

/// What the operator's request form holds: which form is open, its fields, whether it is
/// being sent and why it was refused.
#[derive(Debug, Clone, Copy)]
struct RequestState {
    /// None, Some("reverse") or Some("force_transition").
    form: RwSignal<Option<&'static str>>,
    reason: RwSignal<String>,
    evidence: RwSignal<String>,
    /// The forced transition's target status (empty: the first allowed).
    target: RwSignal<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
}

impl RequestState {
    fn new() -> Self {
        RequestState {
            form: RwSignal::new(None),
            reason: RwSignal::new(String::new()),
            evidence: RwSignal::new(String::new()),
            target: RwSignal::new(String::new()),
            busy: RwSignal::new(false),
            failure: RwSignal::new(None),
        }
    }
}

#[component]
fn Story(
    d: PaymentDetail,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    focus_flash: RwSignal<bool>,
    request: RequestState,
) -> impl IntoView {
    let p = d.payment;
    let currency = p.currency.clone();
    let payment_id = p.id.clone();
    let audit_payment = p.id.clone();
    // The server says what the reversal refunded (`PaymentDetail::reversal`).
    let reversal = d
        .reversal
        .clone()
        .map(|r| (r.action_id.unwrap_or_default(), r.amount));
    view! {
        <div class="page-head">
            <h1 class="mono" data-testid="payment-id">{p.id.clone()}</h1>
            <div class="page-tools">
                <span data-testid="payment-status"><StatusPill status=p.status.to_string()/></span>
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
                <dd><Money amount=p.refunded_amount currency=p.currency.clone()/>" by the merchant"</dd>
                {reversal
                    .clone()
                    .map(|(_, amount)| {
                        view! {
                            <dt>"Reversed"</dt>
                            <dd data-testid="reversed-amount">
                                <Money amount currency=p.currency.clone()/>
                                " refunded at the channel by the reversal"
                            </dd>
                        }
                    })}
                <dt>"Merchant"</dt>
                <dd>{d.merchant}</dd>
                <dt>"Merchant order id"</dt>
                <dd class="mono">{p.merchant_order_id}</dd>
                <dt>"Idempotency-Keys"</dt>
                <dd data-testid="payment-keys">
                    {if d.idempotency_keys.is_empty() {
                        view! { "—" }.into_any()
                    } else {
                        let pid = p.id.clone();
                        d.idempotency_keys
                            .clone()
                            .into_iter()
                            .map(|k| {
                                let what = if k.resource_id.as_deref() == Some(pid.as_str()) {
                                    String::new()
                                } else {
                                    format!(" (refund {})", k.resource_id.clone().unwrap_or_default())
                                };
                                view! {
                                    <span class="key-link">
                                        <A href=crate::api_lookup::key_path(k.merchant_id, &k.idem_key) attr:class="mono">
                                            {k.idem_key.clone()}
                                        </A>
                                        {what}
                                    </span>
                                }
                            })
                            .collect_view()
                            .into_any()
                    }}
                </dd>
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
        <ActionsPanel payment_id actions=d.actions offers=d.offers version flash focus_flash request/>
        <div class="grid">
            <Timeline events=d.events/>
            <div class="stack">
                <Jobs jobs=d.jobs/>
                <Ledger lines=d.ledger/>
                <Refunds refunds=d.refunds currency reversal/>
                <RelatedErrors items=d.errors/>
            </div>
        </div>
        <PaymentAudit records=d.audit payment_id=audit_payment/>
    }
}

/// Default reasons of the actions that run at once (the operator can give its own).
fn quick_reason(kind: &str) -> String {
    format!("{kind} now, from the console")
}

/// The operator's controls and the payment's actions (pending ones block a second request:
/// the server says so, and the message is shown).
#[component]
fn ActionsPanel(
    payment_id: String,
    actions: Vec<ActionRecord>,
    /// The server's offers, each with why not; the forced transition's with its targets.
    offers: Vec<ActionOffer>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    focus_flash: RwSignal<bool>,
    request: RequestState,
) -> impl IntoView {
    let can_request = signed_in_has(Role::Operator);
    // Only what the payment's state allows is offered; the rest say why not.
    let offered = |kind: &str| offers.iter().any(|o| o.kind == kind && o.available);
    let (can_retry, can_reverse) = (offered("retry"), offered("reverse"));
    let unavailable: Vec<(String, String)> = offers
        .iter()
        .filter(|o| !o.available)
        .map(|o| (o.kind.replace('_', " "), o.why.clone()))
        .collect();
    let unavailable = StoredValue::new(unavailable);
    // Keyboard focus: into the request form when it opens (its first field), back to the
    // button that opened it when it is cancelled, and to the outcome once it is shown.
    let reverse_ref = NodeRef::<leptos::html::Button>::new();
    let force_ref = NodeRef::<leptos::html::Button>::new();
    let target_ref = NodeRef::<leptos::html::Select>::new();
    let reason_ref = NodeRef::<leptos::html::Textarea>::new();
    let flash_ref = NodeRef::<leptos::html::P>::new();
    let RequestState {
        form,
        reason,
        evidence,
        target,
        busy,
        failure,
    } = request;
    // The server lists the targets the whitelist allows from the payment's status now.
    let targets: Vec<String> = offers
        .iter()
        .find(|o| o.kind == "force_transition")
        .map(|o| o.targets.iter().map(|t| t.to_string()).collect())
        .unwrap_or_default();
    let options = StoredValue::new(targets.clone());
    // A target the payment's state no longer allows falls back to the first it does.
    if !targets.iter().any(|t| *t == target.get_untracked()) {
        target.set(targets.first().cloned().unwrap_or_default());
    }
    let can_force = !targets.is_empty() && offered("force_transition");
    let pending = actions.iter().filter(|a| a.status == "pending").count();
    Effect::new(move |_| match form.get() {
        Some("force_transition") => {
            if let Some(el) = target_ref.get() {
                let _ = el.focus();
            }
        }
        Some(_) => {
            if let Some(el) = reason_ref.get() {
                let _ = el.focus();
            }
        }
        None => {}
    });
    Effect::new(move |_| {
        if let Some(el) = flash_ref.get()
            && focus_flash.get_untracked()
        {
            focus_flash.set(false);
            let _ = el.focus();
        }
    });
    let close = move |_| {
        let was = form.get_untracked();
        form.set(None);
        failure.set(None);
        let back = if was == Some("force_transition") {
            force_ref.get_untracked()
        } else {
            reverse_ref.get_untracked()
        };
        if let Some(b) = back {
            let _ = b.focus();
        }
    };

    // (kind, reason, target status, evidence): a Copy callback, so every handler can use it.
    type Ask = (&'static str, String, Option<String>, Option<String>);
    let send = Callback::new(move |(kind, why, target, evidence): Ask| {
        let payment_id = payment_id.clone();
        busy.set(true);
        failure.set(None);
        flash.set(None);
        spawn_local(async move {
            match api_actions::request_action(kind.into(), payment_id, why, target, evidence).await
            {
                Ok(a) => {
                    let what = match a.status.as_str() {
                        "pending" => {
                            format!("{} requested ({}); waiting for an approver.", a.kind, a.id)
                        }
                        other => format!("{} {other}: {}", a.kind, a.result.unwrap_or_default()),
                    };
                    flash.set(Some(what));
                    focus_flash.set(true);
                    form.set(None);
                    busy.set(false);
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => {
                    failure.set(Some(api::error_message(&e)));
                    busy.set(false);
                }
            }
        });
    });
    // Query and retry have no form: their reason is their own, never the text of a request
    // form that happens to be open beside them (that once recorded and audited a Retry with
    // the Reverse form's reason).
    let quick = move |kind: &'static str| send.run((kind, quick_reason(kind), None, None));
    // Each request form owns its fields: opening another one starts it empty.
    Effect::new(move |previous: Option<Option<&'static str>>| {
        let now = form.get();
        if previous.is_some_and(|was| was != now) {
            reason.set(String::new());
            evidence.set(String::new());
        }
        now
    });
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let Some(kind) = form.get_untracked() else {
            return;
        };
        let why = reason.get_untracked();
        if why.trim().is_empty() {
            failure.set(Some("Give a reason.".into()));
            return;
        }
        if kind == "force_transition" {
            let ev_text = evidence.get_untracked();
            if ev_text.trim().is_empty() {
                failure.set(Some("Give the evidence for the forced transition.".into()));
                return;
            }
            send.run((kind, why, Some(target.get_untracked()), Some(ev_text)));
        } else {
            send.run((kind, why, None, None));
        }
    };
    view! {
        // A live update waits while a request is being written or sent.
        <section
            class="panel actions-panel"
            aria-labelledby="actions-h"
            data-live-hold=move || (form.get().is_some() || busy.get()).then_some("")
        >
            <h2 id="actions-h">
                "Actions "
                {(pending > 0)
                    .then(|| {
                        view! {
                            <span class="pill st-busy" data-testid="pending-count">
                                {format!("{pending} pending approval")}
                            </span>
                            <A href="/approvals">"Approvals"</A>
                        }
                    })}
            </h2>
            <p class="flash" data-testid="action-flash" role="status" tabindex="-1" node_ref=flash_ref>
                {move || flash.get()}
            </p>
            <Show when=move || can_request.get()>
                <div class="inline-form">
                    <button
                        type="button"
                        data-testid="action-query"
                        disabled=move || busy.get()
                        on:click=move |_| quick("query")
                    >
                        "Query channel"
                    </button>
                    {can_retry
                        .then(|| {
                            view! {
                                <button
                                    type="button"
                                    data-testid="action-retry"
                                    disabled=move || busy.get()
                                    on:click=move |_| quick("retry")
                                >
                                    "Retry jobs"
                                </button>
                            }
                        })}
                    {can_reverse
                        .then(|| {
                            view! {
                                <button
                                    type="button"
                                    class="secondary"
                                    data-testid="action-reverse"
                                    node_ref=reverse_ref
                                    aria-expanded=move || (form.get() == Some("reverse")).to_string()
                                    aria-controls=move || (form.get() == Some("reverse")).then_some("action-form")
                                    disabled=move || busy.get()
                                    on:click=move |_| form.set(Some("reverse"))
                                >
                                    "Reverse…"
                                </button>
                            }
                        })}
                    {can_force
                        .then(|| {
                            view! {
                                <button
                                    type="button"
                                    class="secondary"
                                    data-testid="action-force"
                                    node_ref=force_ref
                                    aria-expanded=move || (form.get() == Some("force_transition")).to_string()
                                    aria-controls=move || (form.get() == Some("force_transition")).then_some("action-form")
                                    disabled=move || busy.get()
                                    on:click=move |_| form.set(Some("force_transition"))
                                >
                                    "Force transition…"
                                </button>
                            }
                        })}
                </div>
                {unavailable
                    .with_value(|u| !u.is_empty())
                    .then(|| {
                        view! {
                            <ul class="muted small unavailable" data-testid="unavailable-actions">
                                {unavailable
                                    .get_value()
                                    .into_iter()
                                    .map(|(kind, why)| view! { <li>{format!("No {kind}: {why}.")}</li> })
                                    .collect_view()}
                            </ul>
                        }
                    })}
                <Show when=move || form.get().is_some()>
                    <form
                        class="stacked-form action-form"
                        id="action-form"
                        aria-labelledby="action-form-h"
                        data-testid="action-form"
                        on:submit=on_submit
                    >
                        <h3 id="action-form-h">
                            {move || match form.get() {
                                Some("force_transition") => "Request a forced transition (needs an approver)",
                                _ => "Request a reversal: refund the rest and reverse the ledger (needs an approver)",
                            }}
                        </h3>
                        <Show when=move || form.get() == Some("force_transition")>
                            <label>
                                "Target status"
                                <select name="target" data-testid="action-target" node_ref=target_ref bind:value=target>
                                    {options
                                        .get_value()
                                        .into_iter()
                                        .map(|t| {
                                            let label = t.clone();
                                            view! { <option value=t>{label}</option> }
                                        })
                                        .collect_view()}
                                </select>
                            </label>
                            <label>
                                "Evidence"
                                <textarea
                                    name="evidence"
                                    rows="3"
                                    maxlength="4000"
                                    data-testid="action-evidence"
                                    bind:value=evidence
                                ></textarea>
                            </label>
                        </Show>
                        <label>
                            "Reason"
                            <textarea
                                name="reason"
                                rows="2"
                                maxlength="1000"
                                required
                                data-testid="action-reason"
                                node_ref=reason_ref
                                bind:value=reason
                            ></textarea>
                        </label>
                        <div class="inline-form">
                            <button type="submit" data-testid="action-submit" disabled=move || busy.get()>
                                "Request"
                            </button>
                            <button type="button" class="secondary" on:click=close>
                                "Cancel"
                            </button>
                        </div>
                    </form>
                </Show>
            </Show>
            <p class="form-message" role="alert" data-testid="action-error">{move || failure.get()}</p>
            <ActionsTable actions/>
        </section>
    }
}

/// A payment's actions, newest first.
#[component]
fn ActionsTable(actions: Vec<ActionRecord>) -> impl IntoView {
    if actions.is_empty() {
        return view! { <p class="empty">"No actions."</p> }.into_any();
    }
    view! {
        <table class="data compact" data-testid="actions">
            <thead>
                <tr>
                    <th scope="col">"Requested"</th>
                    <th scope="col">"Kind"</th>
                    <th scope="col">"Status"</th>
                    <th scope="col">"Requester"</th>
                    <th scope="col">"Reason"</th>
                    <th scope="col">"Approver"</th>
                    <th scope="col">"Result"</th>
                </tr>
            </thead>
            <tbody>
                {actions
                    .into_iter()
                    .map(|a| {
                        let kind = match &a.target_status {
                            Some(t) => format!("{} → {t}", a.kind),
                            None => a.kind.clone(),
                        };
                        let decided = a
                            .decided_by
                            .clone()
                            .map(|d| match a.decision_reason.clone().filter(|r| !r.is_empty()) {
                                Some(r) => format!("{d}: {r}"),
                                None => d,
                            })
                            .unwrap_or_else(|| "—".into());
                        view! {
                            <tr data-testid=format!("action-{}", a.id)>
                                <td><Time ms=a.created_at/></td>
                                <td class="mono">{kind}</td>
                                <td><StatusPill status=a.status/></td>
                                <td>{a.requested_by}</td>
                                <td>{a.reason}</td>
                                <td>{decided}</td>
                                <td class="small"><JsonFields text=a.result.unwrap_or_default()/></td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// The audit records about this payment, in order, and (for auditors) a link to them in the
/// audit viewer, which adds those of its actions and error-pool items and the chain status.
#[component]
fn PaymentAudit(records: Vec<AuditRecord>, payment_id: String) -> impl IntoView {
    let auditor = crate::components::layout::signed_in_has(Role::Auditor);
    let href = format!("/audit?payment={}", format::query_escape(&payment_id));
    view! {
        <section class="panel" aria-labelledby="audit-h">
            <h2 id="audit-h">"Audit records"</h2>
            <Show when=move || auditor.get()>
                <p class="small">
                    <A href=href.clone() attr:data-testid="payment-audit-link">
                        "All audit records of this payment, with the chain status →"
                    </A>
                </p>
            </Show>
            {if records.is_empty() {
                view! { <p class="empty">"None."</p> }.into_any()
            } else {
                view! {
                    <table class="data compact" data-testid="payment-audit">
                        <thead>
                            <tr>
                                <th scope="col" class="num">"Seq"</th>
                                <th scope="col">"At"</th>
                                <th scope="col">"Actor"</th>
                                <th scope="col">"Action"</th>
                                <th scope="col">"Reason"</th>
                                <th scope="col">"After"</th>
                            </tr>
                        </thead>
                        <tbody>
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
                        </tbody>
                    </table>
                }
                    .into_any()
            }}
        </section>
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
                                    let open = pending || j.status == "dead";
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

/// The merchant's refunds and, on a reversed payment, the reversal's refund at the channel.
#[component]
fn Refunds(
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
    view! {
        <section class="panel" aria-labelledby="refunds-h">
            <h2 id="refunds-h">"Refunds"</h2>
            {reversal_row}
            {if refunds.is_empty() {
                view! { <p class="empty">"No merchant refunds."</p> }.into_any()
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

/// The payment's outbox events (and its refunds') with each delivery's state: what the
/// merchant was told, and whether it got it.
#[component]
fn Notifications(
    data: Resource<Result<crate::dto::PaymentWebhooks, ServerFnError>>,
) -> impl IntoView {
    view! {
        <section class="panel" aria-labelledby="events-h" data-testid="payment-events">
            <h2 id="events-h">"Events and webhooks"</h2>
            <Transition fallback=Loading>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(w) if w.events.is_empty() => {
                            view! { <p class="empty">"No events yet: the payment has reached no outcome."</p> }.into_any()
                        }
                        Ok(w) => {
                            view! {
                                <table class="data compact">
                                    <thead>
                                        <tr>
                                            <th scope="col">"Event"</th>
                                            <th scope="col">"Of"</th>
                                            <th scope="col">"Written"</th>
                                            <th scope="col">"Deliveries"</th>
                                        </tr>
                                    </thead>
                                    <tbody>
                                        {w
                                            .events
                                            .into_iter()
                                            .map(|e| {
                                                let mine: Vec<String> = w
                                                    .deliveries
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
                                    </tbody>
                                </table>
                                <p class="small">
                                    <A href="/webhooks">"Webhooks page"</A>
                                </p>
                            }
                                .into_any()
                        }
                        Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                    }
                })}
            </Transition>
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
                                let link = format!("/error-pool?status=all&item={}", i.id);
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
