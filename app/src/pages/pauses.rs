//! The emergency switch (`/pauses`, issue 17; seed 004 §8.4): an operator requests a pause of
//! submissions to the channel, of one job kind, or of webhook deliveries to one endpoint,
//! with a reason; a different approver approves it (re-entering its password); an operator
//! ends it, re-entering its password, and before the minimum duration a different approver
//! approves the end too (issue 36). Open pauses come first, then those that ended. While one
//! is in force every console page shows the banner (`components::layout::PauseBanner`).

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::components::layout::{signed_in_has, signed_in_name};
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, StatusPill, Time};
use crate::dto::{PauseItem, PauseStatus, PauseWords, Role};
use crate::{api, api_pauses, format};

/// Job kinds that may be paused on their own (the server checks what is sent).
use converge_wire::pauses::{PAUSABLE_JOB_KINDS as JOB_KINDS, PauseTarget};

/// The pauses page.
#[component]
pub fn PausesPage() -> impl IntoView {
    let version = RwSignal::new(0u32);
    let flash = RwSignal::new(None::<String>);
    let flash_ref = NodeRef::<leptos::html::P>::new();
    Effect::new(move |_| {
        if flash.get().is_some()
            && let Some(el) = flash_ref.get_untracked()
        {
            request_animation_frame(move || {
                let _ = el.focus();
            });
        }
    });
    // Fetched again when the live stream says a pause moved: another approver's decision or
    // a new request shows here without a reload.
    let live = crate::components::live::use_live(|t| t == "pauses");
    let list = Resource::new(
        move || (version.get(), live.get()),
        |_| api_pauses::list_pauses(),
    );
    let operator = signed_in_has(Role::Operator);
    view! {
        <div class="page-head">
            <h1>"Emergency switch"</h1>
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
        <p class="muted">
            "A pause holds work without losing it: paused submissions keep new payments PENDING "
            "with nothing sent to the channel; a paused job kind stays queued, its attempts "
            "unspent; a paused endpoint's webhook deliveries wait. On resume everything held "
            "proceeds. An operator requests, a different approver approves, an operator resumes "
            "with the password again; ending a pause before its minimum duration is a request "
            "another approver approves."
        </p>
        <p class="flash" data-testid="flash" role="status" tabindex="-1" node_ref=flash_ref>
            {move || flash.get()}
        </p>
        <Show when=move || operator.get()>
            <RequestForm version flash/>
        </Show>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(l) => {
                        let now = l.now;
                        let (open, ended): (Vec<_>, Vec<_>) = l
                            .items
                            .into_iter()
                            .partition(|p| matches!(p.status, PauseStatus::Pending | PauseStatus::Active));
                        view! {
                            <Panel id="open" title="Pending and active">
                                <DataTable
                                    columns=&["Paused", "Status", "Reason", "Requested", "Approved", "Act"]
                                    class="data"
                                    testid="open-pauses"
                                    empty=open.is_empty().then_some("Nothing is paused or waiting for approval.")
                                >
                                    {open
                                        .into_iter()
                                        .map(|p| view! { <OpenRow p now version flash/> })
                                        .collect_view()}
                                </DataTable>
                            </Panel>
                            <Panel id="ended" title="Ended">
                                <Ended items=ended/>
                            </Panel>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The request form (operators).
#[component]
fn RequestForm(version: RwSignal<u32>, flash: RwSignal<Option<String>>) -> impl IntoView {
    let choice = RwSignal::new(PauseTarget::Submissions.to_string());
    let endpoint = RwSignal::new(String::new());
    let reason = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let why = reason.get_untracked();
        if why.trim().is_empty() {
            failure.set(Some("Give a reason for the pause.".into()));
            return;
        }
        let target = match choice.get_untracked().as_str() {
            "endpoint" => {
                PauseTarget::Endpoint(endpoint.get_untracked().trim().to_string()).to_string()
            }
            other => other.to_string(),
        };
        busy.set(true);
        failure.set(None);
        spawn_local(async move {
            match api_pauses::request_pause(target, why).await {
                Ok(p) => {
                    flash.set(Some(format!(
                        "Pause {} of {} requested: it takes effect when another person approves it.",
                        p.id, p.what()
                    )));
                    reason.set(String::new());
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => failure.set(Some(api::error_message(&e))),
            }
            busy.set(false);
        });
    };
    view! {
        <Panel id="request" title="Request a pause">
            <form class="inline-form" data-testid="pause-form" on:submit=on_submit>
                <label>
                    "What to pause"
                    <select
                        name="target"
                        data-testid="pause-target"
                        on:change=move |ev| choice.set(event_target_value(&ev))
                        prop:value=move || choice.get()
                    >
                        <option value=PauseTarget::Submissions.to_string()>"Submissions to the channel"</option>
                        {JOB_KINDS
                            .into_iter()
                            .map(|k| view! { <option value=PauseTarget::JobKind(k.to_string()).to_string()>{format!("Job kind: {k}")}</option> })
                            .collect_view()}
                        <option value="endpoint">"Webhook deliveries to one endpoint"</option>
                    </select>
                </label>
                <Show when=move || choice.get() == "endpoint">
                    <label>
                        "Endpoint id"
                        <input
                            type="text"
                            name="endpoint"
                            maxlength="64"
                            data-testid="pause-endpoint"
                            bind:value=endpoint
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
                        data-testid="pause-reason"
                        bind:value=reason
                    ></textarea>
                </label>
                <button type="submit" class="danger" data-testid="pause-submit" disabled=move || busy.get()>
                    "Request pause"
                </button>
                <span class="form-message" role="alert" data-testid="pause-error">
                    {move || failure.get()}
                </span>
            </form>
        </Panel>
    }
}

/// What the open form of a row does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Approve,
    Reject,
    Resume,
}

/// One pending or active pause with its controls.
#[component]
fn OpenRow(
    p: PauseItem,
    now: i64,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
) -> impl IntoView {
    let me = signed_in_name();
    let approver = signed_in_has(Role::Approver);
    let operator = signed_in_has(Role::Operator);
    let pending = p.status == PauseStatus::Pending;
    // Who asked to end this active pause early, while that request is open.
    let end_asked = p.open_end_request(now).map(str::to_owned);
    let ending = end_asked.is_some();
    // The person an approver must not be: the requester of a pending pause, or whoever
    // asked for its early end.
    let mine = {
        let maker = end_asked.clone().unwrap_or_else(|| p.requested_by.clone());
        Signal::derive(move || me.get().as_deref() == Some(maker.as_str()))
    };
    let s = PauseStep {
        id: StoredValue::new(p.id.clone()),
        open: RwSignal::new(None),
        password: RwSignal::new(String::new()),
        reason: RwSignal::new(String::new()),
        busy: RwSignal::new(false),
        failure: RwSignal::new(None),
        form_id: StoredValue::new(format!("pause-step-{}", p.id)),
        version,
        flash,
    };
    let open = s.open;
    let first_ref = NodeRef::<leptos::html::Textarea>::new();
    let password_ref = NodeRef::<leptos::html::Input>::new();
    Effect::new(move |_| match open.get() {
        Some(Step::Approve | Step::Resume) => {
            if let Some(el) = password_ref.get() {
                let _ = el.focus();
            }
        }
        Some(_) => {
            if let Some(el) = first_ref.get() {
                let _ = el.focus();
            }
        }
        None => {}
    });
    let expires_in = p.expires_at - now;
    let requested = format!(
        "{} · {} ago",
        p.requested_by,
        format::age(now - p.requested_at)
    );
    let approved = p.approved_by.clone().map(|by| {
        let since = p.approved_at.unwrap_or_default();
        view! { {by} " · since " <Time ms=since/> }
    });
    let end_note = end_asked.map(|by| end_request_note(&p, &by, now));
    view! {
        <tr data-testid=format!("pause-{}", p.id) data-target=p.target.clone() data-status=p.status.as_str()>
            <td>
                <strong>{p.what()}</strong>
                <div class="muted small mono">{p.target.clone()}</div>
            </td>
            <td><StatusPill status=p.status/>{end_note}</td>
            <td>{p.reason.clone()}</td>
            <td>
                {requested}
                {(pending && expires_in > 0)
                    .then(|| view! { <div class="muted small">{format!("approvable for {}", format::age(expires_in))}</div> })}
            </td>
            <td>{approved}</td>
            <td class="decide">
                <Show when=move || (pending || ending) && approver.get() && !mine.get()>
                    {s.button(Step::Approve, "Approve…", "pause-approve", "small")}
                    " "
                    {s.button(Step::Reject, "Reject…", "pause-reject", "small secondary")}
                </Show>
                " "
                <Show when=move || operator.get()>
                    {s.button(
                        Step::Resume,
                        if pending { "Cancel request…" } else { "Resume…" },
                        "pause-resume",
                        "small secondary",
                    )}
                </Show>
            </td>
        </tr>
        <Show when=move || open.get().is_some()>
            <tr class="resolve-row">
                <td colspan="6">
                    <StepForm s pending ending first_ref password_ref/>
                </td>
            </tr>
        </Show>
    }
}

/// "Early end asked by BY: WHY (approvable for AGE)", for a pause whose early end `by` asked
/// for and is still open at `now`.
fn end_request_note(p: &PauseItem, by: &str, now: i64) -> impl IntoView + use<> {
    let why = p.end_reason.clone().unwrap_or_default();
    let left = p.end_expires_at.unwrap_or_default() - now;
    let text = format!(
        "Early end asked by {by}: {why} (approvable for {})",
        format::age(left)
    );
    view! {
        <div class="small" data-testid="pause-end-request">
            {text}
        </div>
    }
}

/// A pause row's step: which form is open, its fields, whether a request is in flight and
/// why the last one failed, the form's id; and where the outcome goes (`flash`, and
/// `version` bumped so the list reloads).
#[derive(Clone, Copy)]
struct PauseStep {
    id: StoredValue<String>,
    open: RwSignal<Option<Step>>,
    password: RwSignal<String>,
    reason: RwSignal<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
    form_id: StoredValue<String>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
}

impl PauseStep {
    /// A button that opens the form for `step`.
    fn button(
        self,
        step: Step,
        label: &'static str,
        testid: &'static str,
        class: &'static str,
    ) -> impl IntoView {
        let (open, failure, form_id) = (self.open, self.failure, self.form_id);
        view! {
            <button
                type="button"
                class=class
                data-testid=testid
                aria-expanded=move || (open.get() == Some(step)).to_string()
                aria-controls=move || (open.get() == Some(step)).then(|| form_id.get_value())
                on:click=move |_| {
                    failure.set(None);
                    open.set(Some(step));
                }
            >
                {label}
            </button>
        }
    }

    /// The form's submit: approve or resume (with the password), or reject, with the reason.
    fn submit(self, ev: SubmitEvent) {
        ev.prevent_default();
        let Some(step) = self.open.get_untracked() else {
            return;
        };
        let why = self.reason.get_untracked();
        if why.trim().is_empty() {
            self.failure.set(Some("Give a reason.".into()));
            return;
        }
        let pw = self.password.get_untracked();
        if step != Step::Reject && pw.is_empty() {
            self.failure.set(Some("Re-enter your password.".into()));
            return;
        }
        self.busy.set(true);
        self.failure.set(None);
        let id = self.id.get_value();
        spawn_local(async move {
            let r = match step {
                Step::Approve => api_pauses::approve_pause(id, pw, why).await,
                Step::Reject => api_pauses::reject_pause(id, why).await,
                Step::Resume => api_pauses::resume_pause(id, pw, why).await,
            };
            match r {
                Ok(p)
                    if step == Step::Resume
                        && p.status == PauseStatus::Active
                        && p.end_requested_by.is_some() =>
                {
                    self.flash.set(Some(format!(
                        "Pause of {}: still in force. Ending it before its minimum duration needs another person's approval: requested.",
                        p.what()
                    )));
                    self.version.update(|v| *v = v.wrapping_add(1));
                }
                Ok(p) => {
                    self.flash
                        .set(Some(format!("Pause of {}: now {}.", p.what(), p.status)));
                    self.version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => {
                    self.failure.set(Some(api::error_message(&e)));
                    self.password.set(String::new());
                    self.busy.set(false);
                }
            }
        });
    }

    /// Approve with a passkey instead of the password (issue 36).
    fn approve_by_passkey(self) {
        let why = self.reason.get_untracked();
        if why.trim().is_empty() {
            self.failure.set(Some("Give a reason.".into()));
            return;
        }
        self.busy.set(true);
        self.failure.set(None);
        let id = self.id.get_value();
        spawn_local(async move {
            let r = match crate::webauthn::step_up().await {
                Ok((challenge, credential)) => {
                    crate::api_passkeys::approve_pause_by_passkey(id, challenge, credential, why)
                        .await
                        .map_err(|e| api::error_message(&e))
                }
                Err(m) => Err(m),
            };
            match r {
                Ok(p) => {
                    self.flash
                        .set(Some(format!("Pause of {}: now {}.", p.what(), p.status)));
                    self.version.update(|v| *v = v.wrapping_add(1));
                }
                Err(m) => {
                    self.failure.set(Some(m));
                    self.busy.set(false);
                }
            }
        });
    }
}

/// The open step's form: the password (to approve or resume), the reason, submit, "Approve
/// with passkey", and "Cancel". `pending`: the pause waits for approval; `ending`: its early
/// end does.
#[component]
fn StepForm(
    s: PauseStep,
    pending: bool,
    ending: bool,
    first_ref: NodeRef<leptos::html::Textarea>,
    password_ref: NodeRef<leptos::html::Input>,
) -> impl IntoView {
    let PauseStep {
        open,
        password,
        reason,
        busy,
        failure,
        form_id,
        ..
    } = s;
    view! {
        <form
            class="inline-form"
            data-testid="pause-step-form"
            id=form_id.get_value()
            aria-label=move || match open.get() {
                Some(Step::Approve) if ending => "Approve the early end",
                Some(Step::Reject) if ending => "Reject the early end",
                Some(Step::Approve) => "Approve the pause",
                Some(Step::Reject) => "Reject the pause",
                _ => "Resume the pause",
            }
            on:submit=move |ev| s.submit(ev)
        >
            <Show when=move || matches!(open.get(), Some(Step::Approve | Step::Resume))>
                <label>
                    "Your password"
                    <input
                        type="password"
                        name="password"
                        autocomplete="current-password"
                        data-testid="pause-password"
                        node_ref=password_ref
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
                    data-testid="pause-step-reason"
                    node_ref=first_ref
                    bind:value=reason
                ></textarea>
            </label>
            <button
                type="submit"
                data-testid="pause-step-submit"
                class=move || (open.get() == Some(Step::Reject)).then_some("danger")
                disabled=move || busy.get()
            >
                {move || match open.get() {
                    Some(Step::Approve) if ending => "Approve: end the pause now",
                    Some(Step::Approve) => "Approve: pause now",
                    Some(Step::Reject) => "Reject",
                    _ if pending => "Cancel the request",
                    _ => "Resume now",
                }}
            </button>
            <Show when=move || open.get() == Some(Step::Approve)>
                <button
                    type="button"
                    class="secondary"
                    data-testid="pause-approve-passkey"
                    disabled=move || busy.get()
                    on:click=move |_| s.approve_by_passkey()
                >
                    "Approve with passkey"
                </button>
            </Show>
            <button
                type="button"
                class="secondary"
                on:click=move |_| {
                    open.set(None);
                    failure.set(None);
                }
            >
                "Cancel"
            </button>
            <span class="form-message" role="alert" data-testid="pause-step-error">
                {move || failure.get()}
            </span>
        </form>
    }
}

/// Pauses that ended, newest first.
#[component]
fn Ended(items: Vec<PauseItem>) -> impl IntoView {
    let empty = items.is_empty().then_some("None yet.");
    view! {
        <DataTable
            columns=&["Requested", "Paused", "Status", "Reason", "Approved by", "Ended"]
            testid="ended-pauses"
            empty
        >
            {items
                .into_iter()
                .map(|p| {
                    let ended = match (p.resumed_by.clone(), p.resumed_at) {
                        (Some(by), Some(at)) => {
                            let why = p.resume_reason.clone().unwrap_or_default();
                            view! { {by} ": " {why} " · " <Time ms=at/> }.into_any()
                        }
                        _ => view! { {p.decision_reason.clone().unwrap_or_else(|| "—".into())} }.into_any(),
                    };
                    view! {
                        <tr data-testid=format!("ended-{}", p.id)>
                            <td><Time ms=p.requested_at/></td>
                            <td>{p.what()}</td>
                            <td><StatusPill status=p.status/></td>
                            <td>{p.reason}</td>
                            <td>{p.approved_by.unwrap_or_else(|| "—".into())}</td>
                            <td>{ended}</td>
                        </tr>
                    }
                })
                .collect_view()}
        </DataTable>
    }
}
