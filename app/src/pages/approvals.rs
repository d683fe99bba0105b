//! Approvals (`/approvals`): pending requests with their payment (merchant, amount and status
//! now, and whether it moved since the request: stale), kind, reason, evidence, target,
//! requester, age and expiry; an approver who is not the requester approves (after
//! re-entering its password, with a reason) or rejects (with a reason); the requester may
//! cancel. Recently decided requests follow, with who decided and when. Queries and retries
//! run at once and are not listed: they need no approver. The server checks every step itself.
//! An admin also sees the privilege requests that wait for another admin (issue 36;
//! [`super::privilege_requests`]).

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use crate::components::layout::{signed_in_has, signed_in_name};
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{
    ErrorNote, JsonFields, Loading, StatusPill, Time, focus_flash_when_set,
};
use crate::dto::{ActionRecord, ApprovalItem, Role};
use crate::{api, api_actions, api_pauses, format};

/// How many decided requests are listed under the pending ones.
const RECENT: i64 = 30;

/// The approvals page.
#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let version = RwSignal::new(0u32);
    let flash = RwSignal::new(None::<String>);
    // The outcome of a decision takes the focus: the decided row leaves the list with the
    // button that had it, and a keyboard user would be left at the top of the page.
    // The outcome of a decision takes the focus: the decided row leaves the list with the
    // button that had it, and a keyboard user would be left at the top of the page.
    let flash_ref = NodeRef::<leptos::html::P>::new();
    focus_flash_when_set(flash, flash_ref);
    // Fetched again on the person's Refresh, after a decision, and (as a background request)
    // when the live stream says the requests changed.
    let live = crate::components::live::use_live(|t| t == "approvals");
    let seen = StoredValue::new(0u64);
    let list = Resource::new(
        move || (version.get(), live.get()),
        move |(_, l)| {
            let background = crate::components::live::moved(l, seen);
            async move {
                if background {
                    api_actions::refresh_approvals_inbox(RECENT).await
                } else {
                    api_actions::approvals_inbox(RECENT).await
                }
            }
        },
    );
    let admin = signed_in_has(Role::Admin);
    let approver = signed_in_has(Role::Approver);
    // Emergency-switch pauses are approved on their own page (issue 17); say they wait.
    // Live too: a pause requested anywhere shows here within a second (issue 41).
    let pauses = Resource::new(
        move || (version.get(), live.get()),
        |_| api_pauses::pending_pauses(),
    );
    view! {
        <div class="page-head">
            <h1>"Approvals"</h1>
            <div class="page-tools">
                <button
                    type="button"
                    class="secondary small"
                    on:click=move |_| version.update(|v| *v = v.wrapping_add(1))
                >
                    "Refresh"
                </button>
            </div>
        </div>
        <p class="flash" data-testid="flash" role="status" tabindex="-1" node_ref=flash_ref>
            {move || flash.get()}
        </p>
        <Transition fallback=|| ()>
            {move || {
                pauses
                    .get()
                    .and_then(Result::ok)
                    .filter(|n| *n > 0)
                    .map(pending_pauses_note)
            }}
        </Transition>
        // Privilege requests (issue 36) wait for another admin, here too.
        <Show when=move || admin.get()>
            <crate::pages::privilege_requests::PrivilegeRequests version flash/>
        </Show>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(l) => {
                        view! { <Inbox pending=l.pending decided=l.decided now=l.now version flash/> }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
        <Show when=move || approver.get() || admin.get()>
            <crate::pages::passkeys::PasskeysPanel/>
        </Show>
    }
}

/// "N emergency-switch pauses wait for approval on the Pauses page." (`n` > 0).
fn pending_pauses_note(n: usize) -> impl IntoView {
    view! {
        <p class="panel" data-testid="pending-pauses">
            {if n == 1 {
                "1 emergency-switch pause waits for approval on the ".to_string()
            } else {
                format!("{n} emergency-switch pauses wait for approval on the ")
            }}
            <A href="/pauses">"Pauses page"</A>
            "."
        </p>
    }
}

/// The inbox: the pending requests with their controls, then the recently decided ones.
#[component]
fn Inbox(
    pending: Vec<ApprovalItem>,
    decided: Vec<ApprovalItem>,
    /// The server's clock when it answered, UTC ms: ages and expiries count from it.
    now: i64,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
) -> impl IntoView {
    let (pending_total, nothing_pending) = (pending.len(), pending.is_empty());
    view! {
        <Panel
            id="pending"
            title="Pending"
            heading_extra=move || {
                view! { <span class="count" data-testid="pending-total">{pending_total}</span> }
            }
        >
            <DataTable
                columns=&[
                    "Payment",
                    "Amount and status",
                    "Kind",
                    "Reason and evidence",
                    "Requester",
                    "Age",
                    "Expires",
                    "Decide",
                ]
                class="data inbox"
                testid="pending"
                empty=nothing_pending.then_some("Nothing waits for approval.")
            >
                {pending
                    .into_iter()
                    .map(|item| {
                        view! { <PendingRow item now version flash/> }
                    })
                    .collect_view()}
            </DataTable>
        </Panel>
        <Panel id="decided" title="Recently decided">
            <Decided items=decided/>
        </Panel>
    }
}

/// What the open form of a row does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Approve,
    Reject,
}

/// One pending request with its controls.
#[component]
fn PendingRow(
    item: ApprovalItem,
    now: i64,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
) -> impl IntoView {
    let stale = item.stale;
    let a = item.action.clone();
    let me = signed_in_name();
    let approver = signed_in_has(Role::Approver);
    let operator = signed_in_has(Role::Operator);
    let requester = a.requested_by.clone();
    let mine = {
        let requester = requester.clone();
        Signal::derive(move || me.get().as_deref() == Some(requester.as_str()))
    };
    let d = RowDecision {
        id: StoredValue::new(a.id.clone()),
        open: RwSignal::new(None),
        password: RwSignal::new(String::new()),
        reason: RwSignal::new(String::new()),
        busy: RwSignal::new(false),
        failure: RwSignal::new(None),
        version,
        flash,
    };
    let RowDecision {
        open,
        busy,
        failure,
        ..
    } = d;
    // Keyboard focus follows the decision form: into its first field when it opens, back to
    // the button that opened it when it is cancelled.
    let refs = DecisionRefs {
        approve: NodeRef::new(),
        reject: NodeRef::new(),
        password: NodeRef::new(),
        reason: NodeRef::new(),
    };
    focus_decision_form(open, refs);
    let form_id = StoredValue::new(format!("decision-{}", a.id));
    let confirm_cancel = RwSignal::new(false);
    let expiry = expiry(a.expires_at, now);
    let kind = format::action_kind(&a);
    let payment = a.payment_id.clone();
    view! {
        // A live update waits while this row is being decided.
        <tr
            data-testid=format!("pending-{}", a.id)
            data-live-hold=move || (open.get().is_some() || busy.get() || confirm_cancel.get()).then_some("")
        >
            <td class="mono" data-label="Payment">
                <A href=format!("/payments/{payment}")>{payment.clone()}</A>
                <div class="muted small" data-testid="merchant">
                    {item.merchant.clone().unwrap_or_else(|| "payment not found".into())}
                </div>
            </td>
            <PaymentNow item=item.clone()/>
            <td class="mono" data-label="Kind">{kind}</td>
            <ReasonCell reason=a.reason.clone() evidence=a.evidence.clone()/>
            <td data-testid="requester" data-label="Requested by">{requester}</td>
            <td data-label="Age">{format::age(now - a.created_at)}</td>
            <td data-label="Expires">{expiry}</td>
            <td class="decide">
                {stale
                    .then(|| {
                        view! {
                            <p class="pill st-bad" data-testid="stale">
                                "Stale: the payment moved since the request; reject it, or request again"
                            </p>
                        }
                    })}
                <Show when=move || approver.get() && !mine.get()>
                    <DecideButtons stale open refs form_id/>
                </Show>
                <Show when=move || operator.get() && mine.get()>
                    <CancelRequest d confirm_cancel/>
                </Show>
                <span class="form-message" role="alert">
                    {move || if open.get().is_none() { failure.get() } else { None }}
                </span>
            </td>
        </tr>
        <Show when=move || open.get().is_some()>
            <tr class="resolve-row">
                <td colspan="8">
                    <DecisionForm d refs form_id/>
                </td>
            </tr>
        </Show>
    }
}

/// When a request expires, from `now` (UTC ms): "expired", or "in 2h 5m".
fn expiry(expires_at: i64, now: i64) -> String {
    let expires_in = expires_at - now;
    if expires_in <= 0 {
        "expired".to_string()
    } else {
        format!("in {}", format::age(expires_in))
    }
}

/// The request's reason, with its evidence behind a toggle when it has any.
#[component]
fn ReasonCell(reason: String, evidence: String) -> impl IntoView {
    view! {
        <td data-label="Reason">
            {reason}
            {(!evidence.is_empty())
                .then(|| {
                    view! {
                        <details>
                            <summary>"Evidence"</summary>
                            <pre class="evidence">{evidence.clone()}</pre>
                        </details>
                    }
                })}
        </td>
    }
}

/// A pending row's decision: which form is open, its fields, whether a request is in flight
/// and why the last one failed; and where the outcome goes (`flash`, and `version` bumped so
/// the inbox reloads).
#[derive(Clone, Copy)]
struct RowDecision {
    id: StoredValue<String>,
    open: RwSignal<Option<Decision>>,
    password: RwSignal<String>,
    reason: RwSignal<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
}

impl RowDecision {
    /// What the server's answer to a decision does: the outcome to the flash and a reload, or
    /// the refusal beside the form (the password cleared).
    fn done(self, r: Result<ActionRecord, ServerFnError>, verb: &'static str) {
        match r {
            Ok(a) => {
                self.flash
                    .set(Some(format!("Request {} {verb}: now {}.", a.id, a.status)));
                self.version.update(|v| *v = v.wrapping_add(1));
            }
            Err(e) => {
                self.failure.set(Some(api::error_message(&e)));
                self.password.set(String::new());
                self.busy.set(false);
            }
        }
    }

    /// The form's submit: approve (with the password) or reject, with the reason.
    fn submit(self, ev: SubmitEvent) {
        ev.prevent_default();
        let Some(decision) = self.open.get_untracked() else {
            return;
        };
        let why = self.reason.get_untracked();
        if why.trim().is_empty() {
            self.failure
                .set(Some("Give a reason for the decision.".into()));
            return;
        }
        let pw = self.password.get_untracked();
        if decision == Decision::Approve && pw.is_empty() {
            self.failure
                .set(Some("Re-enter your password to approve.".into()));
            return;
        }
        self.busy.set(true);
        self.failure.set(None);
        let id = self.id.get_value();
        spawn_local(async move {
            match decision {
                Decision::Approve => {
                    self.done(api_actions::approve_action(id, pw, why).await, "approved")
                }
                Decision::Reject => {
                    self.done(api_actions::reject_action(id, why).await, "rejected")
                }
            }
        });
    }

    /// Approve with a passkey instead of the password (issue 36): the browser's passkey
    /// prompt answers a step-up the server began.
    fn approve_by_passkey(self) {
        let why = self.reason.get_untracked();
        if why.trim().is_empty() {
            self.failure
                .set(Some("Give a reason for the decision.".into()));
            return;
        }
        self.busy.set(true);
        self.failure.set(None);
        let id = self.id.get_value();
        spawn_local(async move {
            match crate::webauthn::step_up().await {
                Ok((challenge, credential)) => self.done(
                    crate::api_passkeys::approve_action_by_passkey(id, challenge, credential, why)
                        .await,
                    "approved",
                ),
                Err(m) => {
                    self.failure.set(Some(m));
                    self.busy.set(false);
                }
            }
        });
    }
}

/// The decision form's focus targets: the buttons that open it and its first fields.
#[derive(Clone, Copy)]
struct DecisionRefs {
    approve: NodeRef<leptos::html::Button>,
    reject: NodeRef<leptos::html::Button>,
    password: NodeRef<leptos::html::Input>,
    reason: NodeRef<leptos::html::Textarea>,
}

/// Focus into the decision form's first field when it opens (the password to approve, the
/// reason to reject).
fn focus_decision_form(open: RwSignal<Option<Decision>>, refs: DecisionRefs) {
    Effect::new(move |_| match open.get() {
        Some(Decision::Approve) => {
            if let Some(el) = refs.password.get() {
                let _ = el.focus();
            }
        }
        Some(Decision::Reject) => {
            if let Some(el) = refs.reason.get() {
                let _ = el.focus();
            }
        }
        None => {}
    });
}

/// An approver's "Approve…" (hidden on a stale request) and "Reject…", which open the
/// decision form.
#[component]
fn DecideButtons(
    stale: bool,
    open: RwSignal<Option<Decision>>,
    refs: DecisionRefs,
    form_id: StoredValue<String>,
) -> impl IntoView {
    view! {
        <button
            type="button"
            class="small"
            data-testid="approve"
            hidden=stale
            node_ref=refs.approve
            aria-expanded=move || (open.get() == Some(Decision::Approve)).to_string()
            aria-controls=move || (open.get() == Some(Decision::Approve)).then(|| form_id.get_value())
            on:click=move |_| open.set(Some(Decision::Approve))
        >
            "Approve…"
        </button>
        " "
        <button
            type="button"
            class="small secondary"
            data-testid="reject"
            node_ref=refs.reject
            aria-expanded=move || (open.get() == Some(Decision::Reject)).to_string()
            aria-controls=move || (open.get() == Some(Decision::Reject)).then(|| form_id.get_value())
            on:click=move |_| open.set(Some(Decision::Reject))
        >
            "Reject…"
        </button>
    }
}

/// The requester's "Cancel request…", which asks once more before withdrawing it.
#[component]
fn CancelRequest(d: RowDecision, confirm_cancel: RwSignal<bool>) -> impl IntoView {
    let cancel = move |_| {
        d.busy.set(true);
        d.failure.set(None);
        let id = d.id.get_value();
        spawn_local(async move { d.done(api_actions::cancel_action(id).await, "cancelled") });
    };
    view! {
        // Withdrawing a request asks once more.
        <Show
            when=move || confirm_cancel.get()
            fallback=move || view! {
                <button
                    type="button"
                    class="small secondary"
                    data-testid="cancel-request"
                    on:click=move |_| confirm_cancel.set(true)
                >
                    "Cancel request…"
                </button>
            }
        >
            <button
                type="button"
                class="small danger"
                data-testid="cancel-confirm"
                disabled=move || d.busy.get()
                on:click=cancel
            >
                "Confirm: cancel this request"
            </button>
            <button type="button" class="small secondary" on:click=move |_| confirm_cancel.set(false)>
                "Keep it"
            </button>
        </Show>
    }
}

/// The open decision form: the password (to approve), the reason, submit, "Approve with
/// passkey", and "Cancel", which closes it and gives the focus back to the button that
/// opened it.
#[component]
fn DecisionForm(d: RowDecision, refs: DecisionRefs, form_id: StoredValue<String>) -> impl IntoView {
    let RowDecision {
        id,
        open,
        password,
        reason,
        busy,
        failure,
        ..
    } = d;
    let close = move |_| {
        let was = open.get_untracked();
        open.set(None);
        failure.set(None);
        let trigger = if was == Some(Decision::Reject) {
            refs.reject.get_untracked().map(|b| b.focus())
        } else {
            refs.approve.get_untracked().map(|b| b.focus())
        };
        drop(trigger);
    };
    view! {
        <form
            class="inline-form"
            data-testid="decision-form"
            id=form_id.get_value()
            aria-label=move || match open.get() {
                Some(Decision::Reject) => format!("Reject request {}", id.get_value()),
                _ => format!("Approve request {}", id.get_value()),
            }
            on:submit=move |ev| d.submit(ev)
        >
            <Show when=move || open.get() == Some(Decision::Approve)>
                <label>
                    "Your password"
                    <input
                        type="password"
                        name="password"
                        autocomplete="current-password"
                        data-testid="approve-password"
                        node_ref=refs.password
                        bind:value=password
                    />
                </label>
            </Show>
            <label class="grow">
                "Reason"
                <textarea
                    name="reason"
                    rows="2"
                    maxlength="1000"
                    required
                    data-testid="decision-reason"
                    node_ref=refs.reason
                    bind:value=reason
                ></textarea>
            </label>
            // A rejection must not look like an approval at a glance.
            <button
                type="submit"
                data-testid="decision-submit"
                class=move || (open.get() == Some(Decision::Reject)).then_some("danger")
                disabled=move || busy.get()
            >
                {move || match open.get() {
                    Some(Decision::Reject) => "Reject",
                    _ => "Approve and execute",
                }}
            </button>
            <Show when=move || open.get() == Some(Decision::Approve)>
                <button
                    type="button"
                    class="secondary"
                    data-testid="approve-passkey"
                    disabled=move || busy.get()
                    on:click=move |_| d.approve_by_passkey()
                >
                    "Approve with passkey"
                </button>
            </Show>
            <button type="button" class="secondary" on:click=close>
                "Cancel"
            </button>
            <span class="form-message" role="alert" data-testid="decision-error">
                {move || failure.get()}
            </span>
        </form>
    }
}

/// The payment's amount (major units and currency) and its status now.
#[component]
fn PaymentNow(item: ApprovalItem) -> impl IntoView {
    let amount = match (item.amount, item.currency.as_deref()) {
        (Some(minor), Some(currency)) => format::money(minor, currency),
        _ => "—".into(),
    };
    // A reversal's card says what approving it refunds now (the rest after the merchant's
    // refunds), which may be less than the amount.
    let refunds = match (item.reversal_refunds, item.currency.as_deref()) {
        (Some(minor), Some(currency)) => Some(format::money(minor, currency)),
        _ => None,
    };
    // A capture's card says what approving it captures (issue 34), and whether it is final.
    let a = &item.action;
    let captures = match (a.capture_amount, item.currency.as_deref()) {
        (Some(minor), Some(currency)) => Some(format!(
            "{}{}",
            format::money(minor, currency),
            if a.capture_final == Some(true) {
                ", final"
            } else {
                ", partial"
            }
        )),
        _ => None,
    };
    view! {
        <td class="amount-cell" data-label="Amount">
            <span class="num" data-testid="amount">{amount}</span>
            {refunds.map(|r| view! { <div class="small" data-testid="reversal-refunds">"refunds " <span class="num">{r}</span></div> })}
            {captures.map(|c| view! { <div class="small" data-testid="capture-amount">"captures " <span class="num">{c}</span></div> })}
            <div>
                {item
                    .payment_status
                    .map(|s| view! { <StatusPill status=format::Pill::payment(&s)/> })}
            </div>
        </td>
    }
}

/// Decided requests, newest first, with who decided and when.
#[component]
fn Decided(items: Vec<ApprovalItem>) -> impl IntoView {
    let empty = items.is_empty().then_some("None yet.");
    view! {
        <DataTable
            columns=&["Requested", "Payment", "Amount and status", "Kind", "Outcome", "Requester", "Decided", "Result"]
            class="data compact inbox"
            testid="decided"
            empty
        >
            {items
                .into_iter()
                .map(|item| {
                    let a = item.action.clone();
                    let kind = format::action_kind(&a);
                    let decided = format::action_decision(&a);
                    // Expired and cancelled requests were never decided by an approver;
                    // their time is when they ended.
                    let decided_at = a.decided_at.or(a.executed_at);
                    let payment = a.payment_id.clone();
                    view! {
                        <tr data-testid=format!("decided-{}", a.id)>
                            <td data-label="Requested"><Time ms=a.created_at/></td>
                            <td class="mono" data-label="Payment">
                                <A href=format!("/payments/{payment}")>{payment.clone()}</A>
                                <div class="muted small">{item.merchant.clone().unwrap_or_default()}</div>
                            </td>
                            <PaymentNow item=item.clone()/>
                            <td class="mono" data-label="Kind">{kind}</td>
                            <td data-label="Outcome"><StatusPill status=a.status/></td>
                            <td data-label="Requested by">{a.requested_by}</td>
                            <td data-testid="decided-by" data-label="Decided">
                                {decided}
                                {decided_at.map(|ms| view! { <div class="muted small"><Time ms/></div> })}
                            </td>
                            <td class="small" data-label="Result">
                                <JsonFields text=a.result.clone().unwrap_or_default() currency=item.currency.clone().unwrap_or_default()/>
                            </td>
                        </tr>
                    }
                })
                .collect_view()}
        </DataTable>
    }
}
