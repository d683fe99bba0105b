//! One payment's whole story: its current state, the timeline of every event (applied and
//! ignored, with the source and evidence), its compensation jobs, ledger lines, refunds and
//! related error-pool items; for operators, the actions panel (query and retry at once;
//! reverse and force transition as requests for an approver), the payment's actions and its
//! audit records. The panels live beside this file: actions.rs (the operator's requests and
//! the payment's actions), history.rs (what happened to it).

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use crate::components::widgets::{ErrorNote, Loading, Money, StatusPill, Time};
use crate::dto::{ActionKind, CaptureMode, KeySummary, PaymentDetail};
use crate::{api, format};

mod actions;
mod history;
mod hold;

use actions::ActionsPanel;
use history::{Jobs, Ledger, Notifications, PaymentAudit, Refunds, RelatedErrors, Timeline};
use hold::HoldStory;

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
        <Notifications data=notifications payment=detail/>
    }
}

/// What the operator's request form holds: which form is open, its fields, whether it is
/// being sent and why it was refused.
#[derive(Debug, Clone, Copy)]
struct RequestState {
    /// The request form open: none, a reversal's or a forced transition's.
    form: RwSignal<Option<ActionKind>>,
    reason: RwSignal<String>,
    evidence: RwSignal<String>,
    /// The forced transition's target status (empty: the first allowed).
    target: RwSignal<String>,
    /// A capture's amount as typed, in major units of the payment's currency.
    amount: RwSignal<String>,
    /// A capture is the final one (the rest of the hold is released).
    last: RwSignal<bool>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
    /// The last query's answer (its result JSON), shown under the outcome as fields with
    /// the raw JSON behind a toggle; None after any other action.
    answer: RwSignal<Option<String>>,
}

impl RequestState {
    fn new() -> Self {
        RequestState {
            form: RwSignal::new(None),
            reason: RwSignal::new(String::new()),
            evidence: RwSignal::new(String::new()),
            target: RwSignal::new(String::new()),
            amount: RwSignal::new(String::new()),
            last: RwSignal::new(false),
            busy: RwSignal::new(false),
            failure: RwSignal::new(None),
            answer: RwSignal::new(None),
        }
    }
}

/// The fee and net of what a payment captured (issue 35), once it captured anything.
fn fee_facts(p: &converge_wire::Payment) -> Option<impl IntoView + use<>> {
    let gross = p.captured_gross()?;
    let (fee, currency) = (p.fee, p.currency.clone());
    Some(view! {
        <dt>"Fee"</dt>
        <dd data-testid="payment-fee">
            <Money amount=fee currency=currency.clone()/>
            " · net "
            <Money amount=gross - fee currency=currency/>
        </dd>
    })
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
    let reversal_refunds = format::money(p.unrefunded(), &p.currency);
    let payment_id = p.id.clone();
    let audit_payment = p.id.clone();
    let held = p.held_amount();
    // Only a manual-capture payment has a hold to tell.
    let hold = (p.capture_mode == CaptureMode::Manual)
        .then(|| view! { <HoldStory payment=p.clone() captures=d.captures.clone() events=d.events.clone()/> });
    // The server says what the reversal refunded (`PaymentDetail::reversal`).
    let reversal = d
        .reversal
        .clone()
        .map(|r| (r.action_id.unwrap_or_default(), r.amount));
    view! {
        <div class="page-head">
            <h1 class="mono" data-testid="payment-id">{p.id.clone()}</h1>
            <div class="page-tools">
                <span data-testid="payment-status"><StatusPill status=p.status/></span>
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
                {fee_facts(&p)}
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
                <IdempotencyKeys payment_id=p.id.clone() keys=d.idempotency_keys.clone()/>
                <dt>"Created"</dt>
                <dd><Time ms=p.created_at/></dd>
                <dt>"Updated"</dt>
                <dd><Time ms=p.updated_at/></dd>
                <dt>"Version"</dt>
                <dd>{p.version}</dd>
                <dt>"Channel submits"</dt>
                <dd>{p.submit_attempts}</dd>
                <dt>"Connector"</dt>
                <dd class="mono" data-testid="payment-connector">{p.connector.clone()}</dd>
                <dt>"Channel key"</dt>
                <dd class="mono">{p.channel_key}</dd>
                <dt>"Description"</dt>
                <dd>{if p.description.is_empty() { "—".to_string() } else { p.description }}</dd>
                <dt>"Last error"</dt>
                <dd class="error-text">{p.last_error.unwrap_or_else(|| "—".into())}</dd>
            </dl>
        </section>
        {hold}
        <ActionsPanel payment_id actions=d.actions offers=d.offers version flash focus_flash request reversal_refunds held currency=currency.clone()/>
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

/// The payment's Idempotency-Keys, each linked to its key page (a refund's key says which
/// refund it made), or "—".
#[component]
fn IdempotencyKeys(payment_id: String, keys: Vec<KeySummary>) -> impl IntoView {
    view! {
        <dd data-testid="payment-keys">
            {if keys.is_empty() {
                view! { "—" }.into_any()
            } else {
                let pid = payment_id;
                keys
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
    }
}
