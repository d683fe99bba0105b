//! The actions panel of the payment page: what an operator may ask for now (query and retry
//! run at once; reverse, force transition, and a manual-capture payment's capture and void
//! wait for an approver) and the payment's actions.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use super::RequestState;
use crate::components::layout::signed_in_has;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{JsonFields, StatusPill, Time};
use crate::dto::{
    ActionKind, ActionOffer, ActionRecord, ActionStatus, AnswerTone, QueryAnswer, Role,
};
use crate::{api, api_actions, format};

/// Default reasons of the actions that run at once (the operator can give its own).
fn quick_reason(kind: ActionKind) -> String {
    format!("{kind} now, from the console")
}

/// The request form's fields and their focus targets, and what its buttons do: one Copy
/// bundle the panel hands to [`ActionButtons`] and [`RequestForm`].
#[derive(Clone, Copy)]
struct FormRefs {
    reverse: NodeRef<leptos::html::Button>,
    force: NodeRef<leptos::html::Button>,
    capture: NodeRef<leptos::html::Button>,
    void: NodeRef<leptos::html::Button>,
    amount: NodeRef<leptos::html::Input>,
    target: NodeRef<leptos::html::Select>,
    reason: NodeRef<leptos::html::Textarea>,
}

impl FormRefs {
    fn new() -> Self {
        FormRefs {
            reverse: NodeRef::new(),
            force: NodeRef::new(),
            capture: NodeRef::new(),
            void: NodeRef::new(),
            amount: NodeRef::new(),
            target: NodeRef::new(),
            reason: NodeRef::new(),
        }
    }
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
    /// A manual-capture payment's hold: what it still holds (integer minor units) in the
    /// payment's currency, for the capture and void forms; 0 for an automatic payment.
    held: i64,
    /// The payment's ISO 4217 code.
    currency: String,
) -> impl IntoView {
    let can_request = signed_in_has(Role::Operator);
    let reversal_refunds = StoredValue::new(reversal_refunds);
    // Only what the payment's state allows is offered; the rest say why not.
    let offered = |kind: ActionKind| offers.iter().any(|o| o.kind == kind && o.available);
    let unavailable: Vec<(String, String)> = offers
        .iter()
        .filter(|o| !o.available)
        .map(|o| (o.kind.as_str().replace('_', " "), o.why.clone()))
        .collect();
    // Keyboard focus: into the request form when it opens (its first field), back to the
    // button that opened it when it is cancelled, and to the outcome once it is shown.
    let refs = FormRefs::new();
    let flash_ref = NodeRef::<leptos::html::P>::new();
    let RequestState {
        form,
        busy,
        failure,
        ..
    } = request;
    // The server lists the targets the whitelist allows from the payment's status now.
    let targets: Vec<String> = offers
        .iter()
        .find(|o| o.kind == ActionKind::ForceTransition)
        .map(|o| o.targets.iter().map(|t| t.to_string()).collect())
        .unwrap_or_default();
    // A target the payment's state no longer allows falls back to the first it does.
    if !targets.iter().any(|t| *t == request.target.get_untracked()) {
        request
            .target
            .set(targets.first().cloned().unwrap_or_default());
    }
    let offers = Offers {
        retry: offered(ActionKind::Retry),
        reverse: offered(ActionKind::Reverse),
        force: !targets.is_empty() && offered(ActionKind::ForceTransition),
        capture: offered(ActionKind::Capture),
        void: offered(ActionKind::Void),
    };
    let hold = StoredValue::new(HeldNow { held, currency });
    let pending = actions
        .iter()
        .filter(|a| a.status == ActionStatus::Pending)
        .count();
    let (targets, unavailable) = (StoredValue::new(targets), StoredValue::new(unavailable));
    focus_on_open_and_outcome(request, refs, flash_ref, focus_flash);
    let send = sender(payment_id, request, version, flash, focus_flash);
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
            <ActionFlash flash answer=request.answer flash_ref/>
            <Show when=move || can_request.get()>
                <ActionButtons offers form busy refs send/>
                <Unavailable unavailable=unavailable.get_value()/>
                <Show when=move || form.get().is_some()>
                    <RequestForm request refs targets=targets.get_value() send reversal_refunds=reversal_refunds.get_value() hold=hold.get_value()/>
                </Show>
            </Show>
            <p class="form-message" role="alert" data-testid="action-error">{move || failure.get()}</p>
            <ActionsTable actions/>
        </Panel>
    }
}

/// Which of the buttons the payment's state allows (query always is).
#[derive(Clone, Copy)]
struct Offers {
    retry: bool,
    reverse: bool,
    force: bool,
    capture: bool,
    void: bool,
}

/// What a manual-capture payment's hold still holds (integer minor units of `currency`):
/// the capture form's limit and what a void releases.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HeldNow {
    held: i64,
    currency: String,
}

/// (kind, reason, target status, evidence, capture's (amount in minor units, final)): what
/// [`sender`]'s callback sends.
type Ask = (
    ActionKind,
    String,
    Option<String>,
    Option<String>,
    Option<(i64, bool)>,
);

/// Moves the keyboard focus: into the request form when it opens (the target for a forced
/// transition, else the reason), and to the outcome message once one is shown. Each request
/// form owns its fields: opening another one starts it empty.
fn focus_on_open_and_outcome(
    request: RequestState,
    refs: FormRefs,
    flash_ref: NodeRef<leptos::html::P>,
    focus_flash: RwSignal<bool>,
) {
    let form = request.form;
    Effect::new(move |_| match form.get() {
        Some(ActionKind::ForceTransition) => {
            if let Some(el) = refs.target.get() {
                let _ = el.focus();
            }
        }
        Some(ActionKind::Capture) => {
            if let Some(el) = refs.amount.get() {
                let _ = el.focus();
            }
        }
        Some(_) => {
            if let Some(el) = refs.reason.get() {
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
    Effect::new(move |previous: Option<Option<ActionKind>>| {
        let now = form.get();
        if previous.is_some_and(|was| was != now) {
            request.reason.set(String::new());
            request.evidence.set(String::new());
            request.amount.set(String::new());
            request.last.set(false);
        }
        now
    });
}

/// The callback that sends a request and shows its outcome (a Copy callback, so every
/// handler can use it).
fn sender(
    payment_id: String,
    request: RequestState,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    focus_flash: RwSignal<bool>,
) -> Callback<Ask> {
    let RequestState {
        form,
        busy,
        failure,
        ..
    } = request;
    let answer = request.answer;
    Callback::new(move |(kind, why, target, evidence, capture): Ask| {
        let payment_id = payment_id.clone();
        busy.set(true);
        failure.set(None);
        flash.set(None);
        answer.set(None);
        spawn_local(async move {
            let is_query = kind == ActionKind::Query;
            let kind = kind.as_str().to_string();
            let (amount, last) = capture.unzip();
            match api_actions::request_action(kind, payment_id, why, target, evidence, amount, last)
                .await
            {
                Ok(a) => {
                    let what = match a.status {
                        ActionStatus::Pending => {
                            format!("{} requested ({}); waiting for an approver.", a.kind, a.id)
                        }
                        // A query's answer as a sentence with its tone, then its fields
                        // (issue 41: a NotFound read as a green "query executed").
                        ActionStatus::Executed if is_query => {
                            let result = a.result.unwrap_or_default();
                            let said = query_answer(&result).sentence();
                            answer.set(Some(result));
                            format!("{} executed: {said}", a.kind)
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
    })
}

/// The action buttons: query and retry run at once, reverse, force, capture and void open
/// their form.
#[component]
fn ActionButtons(
    offers: Offers,
    form: RwSignal<Option<ActionKind>>,
    busy: RwSignal<bool>,
    refs: FormRefs,
    send: Callback<Ask>,
) -> impl IntoView {
    // Query and retry have no form: their reason is their own, never the text of a request
    // form that happens to be open beside them (that once recorded and audited a Retry with
    // the Reverse form's reason).
    let quick = move |kind: ActionKind| send.run((kind, quick_reason(kind), None, None, None));
    view! {
        <div class="inline-form">
            <button
                type="button"
                data-testid="action-query"
                disabled=move || busy.get()
                on:click=move |_| quick(ActionKind::Query)
            >
                "Query channel"
            </button>
            {offers
                .retry
                .then(|| {
                    view! {
                        <button
                            type="button"
                            data-testid="action-retry"
                            disabled=move || busy.get()
                            on:click=move |_| quick(ActionKind::Retry)
                        >
                            "Retry jobs"
                        </button>
                    }
                })}
            {offers.reverse.then(|| view! { <FormButton kind=ActionKind::Reverse label="Reverse…" testid="action-reverse" node_ref=refs.reverse form busy/> })}
            {offers.force.then(|| view! { <FormButton kind=ActionKind::ForceTransition label="Force transition…" testid="action-force" node_ref=refs.force form busy/> })}
            {offers.capture.then(|| view! { <FormButton kind=ActionKind::Capture label="Capture…" testid="action-capture" node_ref=refs.capture form busy/> })}
            {offers.void.then(|| view! { <FormButton kind=ActionKind::Void label="Void…" testid="action-void" node_ref=refs.void form busy/> })}
        </div>
    }
}

/// A button that opens the request form of `kind` (its form is one at a time: the button
/// says whether it is the one open).
#[component]
fn FormButton(
    kind: ActionKind,
    label: &'static str,
    testid: &'static str,
    node_ref: NodeRef<leptos::html::Button>,
    form: RwSignal<Option<ActionKind>>,
    busy: RwSignal<bool>,
) -> impl IntoView {
    let is_open = move || form.get() == Some(kind);
    view! {
        <button
            type="button"
            class="secondary"
            data-testid=testid
            node_ref=node_ref
            aria-expanded=move || is_open().to_string()
            aria-controls=move || is_open().then_some("action-form")
            disabled=move || busy.get()
            on:click=move |_| form.set(Some(kind))
        >
            {label}
        </button>
    }
}

/// Why the actions not offered are not, one line each (nothing when all are offered).
#[component]
fn Unavailable(unavailable: Vec<(String, String)>) -> impl IntoView {
    (!unavailable.is_empty()).then(|| {
        view! {
            <ul class="muted small unavailable" data-testid="unavailable-actions">
                {unavailable
                    .into_iter()
                    .map(|(kind, why)| view! { <li>{format!("No {kind}: {why}.")}</li> })
                    .collect_view()}
            </ul>
        }
    })
}

/// The open request form (a reversal's, a forced transition's with its target and evidence,
/// a capture's with its amount and whether it is final, or a void's): checks that a reason
/// (and the evidence, the amount) is given, then sends it; Cancel closes it and gives the
/// focus back to the button that opened it.
#[component]
fn RequestForm(
    request: RequestState,
    refs: FormRefs,
    targets: Vec<String>,
    send: Callback<Ask>,
    /// What approving a reversal refunds now, in major units with its currency.
    reversal_refunds: String,
    /// What the hold still holds (the capture's limit, what a void releases).
    hold: HeldNow,
) -> impl IntoView {
    let RequestState {
        form,
        reason,
        evidence,
        target,
        busy,
        failure,
        ..
    } = request;
    let is = move |kind: ActionKind| form.get() == Some(kind);
    let close = move |_| {
        let was = form.get_untracked();
        form.set(None);
        failure.set(None);
        let back = match was {
            Some(ActionKind::ForceTransition) => refs.force.get_untracked(),
            Some(ActionKind::Capture) => refs.capture.get_untracked(),
            Some(ActionKind::Void) => refs.void.get_untracked(),
            _ => refs.reverse.get_untracked(),
        };
        if let Some(b) = back {
            let _ = b.focus();
        }
    };
    let limit = hold.clone();
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let Some(kind) = form.get_untracked() else {
            return;
        };
        match ask_of(kind, request, &limit) {
            Ok(ask) => send.run(ask),
            Err(why) => failure.set(Some(why)),
        }
    };
    let options = StoredValue::new(targets);
    let held = StoredValue::new(hold);
    view! {
        <form
            class="stacked-form action-form"
            id="action-form"
            aria-labelledby="action-form-h"
            data-testid="action-form"
            on:submit=on_submit
        >
            <h3 id="action-form-h">{move || form_title(form.get())}</h3>
            <Show when=move || is(ActionKind::Reverse)>
                <WillRefund amount=reversal_refunds.clone()/>
            </Show>
            <Show when=move || is(ActionKind::ForceTransition)>
                <ForceFields targets=options.get_value() target evidence target_ref=refs.target/>
            </Show>
            <Show when=move || is(ActionKind::Capture)>
                <CaptureFields hold=held.get_value() request amount_ref=refs.amount/>
            </Show>
            <Show when=move || is(ActionKind::Void)>
                <WillRelease hold=held.get_value()/>
            </Show>
            <label>
                "Reason"
                <textarea
                    name="reason"
                    rows="2"
                    maxlength="1000"
                    required
                    data-testid="action-reason"
                    node_ref=refs.reason
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
    }
}

/// The request form's heading for the request of `kind`.
fn form_title(kind: Option<ActionKind>) -> &'static str {
    match kind {
        Some(ActionKind::ForceTransition) => "Request a forced transition (needs an approver)",
        Some(ActionKind::Capture) => {
            "Request a capture: take an amount of the hold (needs an approver)"
        }
        Some(ActionKind::Void) => "Request a void: release the whole hold (needs an approver)",
        _ => "Request a reversal: refund the rest and reverse the ledger (needs an approver)",
    }
}

/// What the open form of `kind` sends, or why it cannot yet (in words for the form): a
/// reason always; a forced transition's evidence; a capture's amount, read in the currency's
/// major units, more than nothing and at most what is held.
fn ask_of(kind: ActionKind, request: RequestState, hold: &HeldNow) -> Result<Ask, String> {
    let why = request.reason.get_untracked();
    if why.trim().is_empty() {
        return Err("Give a reason.".into());
    }
    match kind {
        ActionKind::ForceTransition => {
            let ev_text = request.evidence.get_untracked();
            if ev_text.trim().is_empty() {
                return Err("Give the evidence for the forced transition.".into());
            }
            let target = Some(request.target.get_untracked());
            Ok((kind, why, target, Some(ev_text), None))
        }
        ActionKind::Capture => {
            let amount = capture_amount(&request.amount.get_untracked(), hold)?;
            Ok((
                kind,
                why,
                None,
                None,
                Some((amount, request.last.get_untracked())),
            ))
        }
        _ => Ok((kind, why, None, None, None)),
    }
}

/// A capture's amount typed in major units of the hold's currency, as integer minor units:
/// a number with at most the currency's decimals, more than nothing and at most what is held.
fn capture_amount(text: &str, hold: &HeldNow) -> Result<i64, String> {
    let limit = format::money(hold.held, &hold.currency);
    match converge_wire::money::minor(text, &hold.currency) {
        None | Some(0) => Err(format!(
            "Give the amount to capture in {} (for example {}), more than 0 and at most {limit}.",
            hold.currency,
            converge_wire::money::major(hold.held.max(1), &hold.currency)
        )),
        Some(m) if m > hold.held => Err(format!("At most {limit} is held.")),
        Some(m) => Ok(m),
    }
}

/// A capture's own fields: the amount in major units of the payment's currency, and whether
/// it is the final capture (the rest of the hold is released after it).
#[component]
fn CaptureFields(
    hold: HeldNow,
    request: RequestState,
    amount_ref: NodeRef<leptos::html::Input>,
) -> impl IntoView {
    let limit = format::money(hold.held, &hold.currency);
    view! {
        <p class="will-refund" data-testid="capture-held">
            "The hold still holds " <strong class="num">{limit}</strong> "."
        </p>
        <label>
            {format!("Amount ({})", hold.currency)}
            <input
                type="text"
                name="amount"
                inputmode="decimal"
                autocomplete="off"
                required
                data-testid="action-amount"
                node_ref=amount_ref
                bind:value=request.amount
            />
        </label>
        <label>
            <input type="checkbox" name="final" data-testid="action-final" bind:checked=request.last/>
            " final (release the rest)"
        </label>
    }
}

/// What approving a void releases now, said before anyone signs off.
#[component]
fn WillRelease(hold: HeldNow) -> impl IntoView {
    let amount = format::money(hold.held, &hold.currency);
    view! {
        <p class="will-refund" data-testid="void-releases">
            "Approving it voids the hold at the channel and releases " <strong class="num">{amount}</strong> "."
        </p>
    }
}

/// What approving a reversal refunds now (`amount`: major units with the currency), said
/// before anyone signs off.
#[component]
fn WillRefund(amount: String) -> impl IntoView {
    view! {
        <p class="will-refund" data-testid="reversal-refunds">
            "Approving it refunds " <strong class="num">{amount}</strong> " at the channel and reverses the ledger."
        </p>
    }
}

/// A forced transition's own fields: the target status (among the ones the server allows)
/// and the evidence.
#[component]
fn ForceFields(
    targets: Vec<String>,
    target: RwSignal<String>,
    evidence: RwSignal<String>,
    target_ref: NodeRef<leptos::html::Select>,
) -> impl IntoView {
    view! {
        <label>
            "Target status"
            <select name="target" data-testid="action-target" node_ref=target_ref bind:value=target>
                {targets
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

/// A query action's recorded result read as the channel's answer (an unreadable one reads as
/// no decidable answer).
fn query_answer(result: &str) -> QueryAnswer {
    serde_json::from_str(result).unwrap_or_else(|_| QueryAnswer {
        answer: result.to_string(),
        ..QueryAnswer::default()
    })
}

/// The answer's tone as the `data-tone` the flash carries: `good`, `bad` or `undecided`.
fn tone_name(result: &str) -> &'static str {
    match query_answer(result).tone() {
        AnswerTone::Good => "good",
        AnswerTone::Bad => "bad",
        AnswerTone::Undecided => "undecided",
    }
}

/// The outcome's classes: green by default, red or amber for a query answer that is not a
/// success at the channel.
fn flash_class(answer: Option<&str>) -> &'static str {
    match answer.map(|r| query_answer(r).tone()) {
        Some(AnswerTone::Bad) => "flash tone-bad",
        Some(AnswerTone::Undecided) => "flash tone-warn",
        _ => "flash",
    }
}

/// The outcome of the last action (focused once shown): a query's answer in its tone, then
/// its fields.
#[component]
fn ActionFlash(
    flash: RwSignal<Option<String>>,
    answer: RwSignal<Option<String>>,
    flash_ref: NodeRef<leptos::html::P>,
) -> impl IntoView {
    view! {
        <p
            class=move || flash_class(answer.get().as_deref())
            data-testid="action-flash"
            data-tone=move || answer.get().map(|r| tone_name(&r))
            role="status"
            tabindex="-1"
            node_ref=flash_ref
        >
            {move || flash.get()}
        </p>
        {move || answer.get().map(|r| view! { <QueryFields result=r/> })}
    }
}

/// A query's answer in fields (what the channel said, the charge, the reason, the payment's
/// status after it), with the recorded JSON behind a toggle.
#[component]
fn QueryFields(result: String) -> impl IntoView {
    let a = query_answer(&result);
    let money = |m: Option<i64>| {
        m.zip(a.currency.clone())
            .map(|(m, c)| format!("{} {c}", converge_wire::money::major(m, &c)))
    };
    // A hold's query (issue 34) names what is held, what was captured and when it lapses.
    let hold = a.captured.is_some();
    let rows: Vec<(&'static str, String)> = [
        (
            "Channel answer",
            Some(a.answer.clone()).filter(|s| !s.is_empty()),
        ),
        (if hold { "Hold" } else { "Charge" }, money(a.amount)),
        ("Captured", money(a.captured)),
        ("Hold expires", a.expires_at.map(format::utc)),
        ("Decline reason", a.reason.clone()),
        ("Error", a.detail.clone()),
        ("Payment status now", a.status.clone()),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect();
    let raw = format::pretty_json(&result);
    view! {
        <div class="query-answer small" data-testid="query-answer">
            <dl class="fields">
                {rows.into_iter().map(|(k, v)| view! { <div><dt>{k}</dt><dd>{v}</dd></div> }).collect_view()}
            </dl>
            <details data-testid="query-raw">
                <summary>"Raw JSON"</summary>
                <pre class="evidence">{raw}</pre>
            </details>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_amount_is_read_in_major_units_within_the_hold() {
        let hold = HeldNow {
            held: 6_000,
            currency: "CNY".into(),
        };
        let read = |t: &str| capture_amount(t, &hold);
        assert_eq!(read("40.00"), Ok(4_000));
        assert_eq!(read(" 60 "), Ok(6_000));
        assert!(read("60.01").unwrap_err().contains("At most 60.00 CNY"));
        assert!(read("0").is_err());
        assert!(read("4,00").is_err());
        assert!(read("").unwrap_err().contains("in CNY"));
    }

    #[test]
    fn each_request_form_has_its_own_heading() {
        assert!(form_title(Some(ActionKind::Capture)).starts_with("Request a capture"));
        assert!(form_title(Some(ActionKind::Void)).starts_with("Request a void"));
        assert!(form_title(Some(ActionKind::Reverse)).starts_with("Request a reversal"));
        assert!(form_title(Some(ActionKind::ForceTransition)).starts_with("Request a forced"));
    }
}
