//! The actions panel of the payment page: what an operator may ask for now (query and retry
//! run at once; reverse and force transition wait for an approver) and the payment's actions.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use super::RequestState;
use crate::components::layout::signed_in_has;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{JsonFields, StatusPill, Time};
use crate::dto::{ActionOffer, ActionRecord, ActionStatus, Role};
use crate::{api, api_actions, format};

/// Default reasons of the actions that run at once (the operator can give its own).
fn quick_reason(kind: &str) -> String {
    format!("{kind} now, from the console")
}

/// The operator's controls and the payment's actions (pending ones block a second request:
/// the server says so, and the message is shown).
#[component]
pub(super) fn ActionsPanel(
    payment_id: String,
    actions: Vec<ActionRecord>,
    /// The server's offers, each with why not; the forced transition's with its targets.
    offers: Vec<ActionOffer>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    focus_flash: RwSignal<bool>,
    request: RequestState,
    /// What a reversal would refund now (the amount the merchant's refunds left), in major
    /// units with its currency: the request form says it before anyone signs off.
    reversal_refunds: String,
) -> impl IntoView {
    let can_request = signed_in_has(Role::Operator);
    let reversal_refunds = StoredValue::new(reversal_refunds);
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
    let pending = actions
        .iter()
        .filter(|a| a.status == ActionStatus::Pending)
        .count();
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
                    let what = match a.status {
                        ActionStatus::Pending => {
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
        <Panel
            id="actions"
            title="Actions"
            heading_extra=move || {
                (pending > 0)
                    .then(|| {
                        view! {
                            <span class="pill st-busy" data-testid="pending-count">
                                {format!("{pending} pending approval")}
                            </span>
                            <A href="/approvals">"Approvals"</A>
                        }
                    })
            }
            class="actions-panel"
            attr:data-live-hold=move || (form.get().is_some() || busy.get()).then_some("")
        >
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
                        <Show when=move || form.get() == Some("reverse")>
                            <p class="will-refund" data-testid="reversal-refunds">
                                "Approving it refunds "
                                <strong class="num">{reversal_refunds.get_value()}</strong>
                                " at the channel and reverses the ledger."
                            </p>
                        </Show>
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
        </Panel>
    }
}

/// A payment's actions, newest first.
#[component]
fn ActionsTable(actions: Vec<ActionRecord>) -> impl IntoView {
    let empty = actions.is_empty().then_some("No actions.");
    view! {
        <DataTable
            columns=&["Requested", "Kind", "Status", "Requester", "Reason", "Approver", "Result"]
            testid="actions"
            empty
        >
            {actions
                .into_iter()
                .map(|a| {
                    let kind = format::action_kind(&a);
                    let decided = format::action_decision(&a);
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
        </DataTable>
    }
}
