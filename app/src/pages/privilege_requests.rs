//! The privilege requests on the Approvals page (admins; issue 36): a user with operator,
//! approver or admin, a privileged role granted, a disabled user enabled, a merchant key
//! issued, a merchant unfrozen, each waiting for an admin other than its requester and its
//! target. That admin approves it by re-entering their password, with a reason, or rejects it;
//! an issued key is shown once to the approving admin. The server checks every step itself.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api;
use crate::components::layout::signed_in_name;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{CopyButton, ErrorNote, Loading, StatusPill, Time};
use crate::dto::{PrivilegeApproved, PrivilegeRequest};
use crate::format;

/// The pending privilege requests and the latest decided ones, refreshed with `version`.
#[component]
pub fn PrivilegeRequests(version: RwSignal<u32>, flash: RwSignal<Option<String>>) -> impl IntoView {
    let list = Resource::new(move || version.get(), |_| api::privilege_requests());
    // An issued key, shown once to the admin who approved it, until dismissed.
    let key = RwSignal::new(None::<(String, String)>);
    view! {
        {move || {
            key.get()
                .map(|(merchant, k)| {
                    view! {
                        <Panel id="approved-key" title=format!("New API key of {merchant}") class="new-key" testid="new-key">
                            <p>"Copy it now: it is shown this once and stored only as a hash."</p>
                            <p><code class="secret" data-testid="new-key-value">{k.clone()}</code>" "<CopyButton text=k testid="copy-key"/></p>
                            <button type="button" class="secondary small" on:click=move |_| key.set(None)>
                                "I have copied it"
                            </button>
                        </Panel>
                    }
                })
        }}
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(l) => {
                        let now = l.now;
                        let total = l.pending.len();
                        let empty = l.pending.is_empty().then_some("No privilege request waits.");
                        view! {
                            <Panel
                                id="privilege-pending"
                                title="Privilege requests"
                                heading_extra=move || {
                                    view! { <span class="count" data-testid="privilege-total">{total}</span> }
                                }
                            >
                                <DataTable
                                    columns=&["Change", "Requester", "Age", "Expires", "Decide"]
                                    class="data inbox"
                                    testid="privilege-pending"
                                    empty
                                >
                                    {l.pending
                                        .into_iter()
                                        .map(|r| view! { <PrivilegeRow r now version flash key/> })
                                        .collect_view()}
                                </DataTable>
                            </Panel>
                            <Panel id="privilege-decided" title="Recently decided privilege requests">
                                <DataTable
                                    columns=&["Requested", "Change", "Outcome", "Requester", "Decided by"]
                                    class="data compact inbox"
                                    testid="privilege-decided"
                                    empty=l.decided.is_empty().then_some("None yet.")
                                >
                                    {l.decided
                                        .into_iter()
                                        .map(|r| {
                                            view! {
                                                <tr data-testid=format!("privilege-decided-{}", r.id)>
                                                    <td data-label="Requested"><Time ms=r.created_at/></td>
                                                    <td data-label="Change">{r.reason.clone()}</td>
                                                    <td data-label="Outcome"><StatusPill status=r.status/></td>
                                                    <td data-label="Requested by">{r.requested_by.clone()}</td>
                                                    <td data-label="Decided by">{r.decided_by.clone().unwrap_or_default()}</td>
                                                </tr>
                                            }
                                        })
                                        .collect_view()}
                                </DataTable>
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

/// One pending privilege request with its decision form.
#[component]
fn PrivilegeRow(
    r: PrivilegeRequest,
    now: i64,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    key: RwSignal<Option<(String, String)>>,
) -> impl IntoView {
    let me = signed_in_name();
    let own = {
        let (requester, target) = (r.requested_by.clone(), r.target.clone());
        let user_kind = !matches!(
            r.kind.as_str(),
            "issue_key" | "unfreeze_merchant" | "set_connector"
        );
        Signal::derive(move || {
            let me = me.get().unwrap_or_default();
            me == requester || (user_kind && me == target)
        })
    };
    let d = PrivilegeDecision {
        id: StoredValue::new(r.id.clone()),
        target: StoredValue::new(r.target.clone()),
        open: RwSignal::new(None),
        password: RwSignal::new(String::new()),
        reason: RwSignal::new(String::new()),
        busy: RwSignal::new(false),
        failure: RwSignal::new(None),
        version,
        flash,
        key,
    };
    let PrivilegeDecision { open, failure, .. } = d;
    let password_ref = NodeRef::<leptos::html::Input>::new();
    Effect::new(move |_| {
        if open.get() == Some(true)
            && let Some(el) = password_ref.get()
        {
            let _ = el.focus();
        }
    });
    let expires_in = r.expires_at - now;
    let expiry = if expires_in <= 0 {
        "expired".to_string()
    } else {
        format!("in {}", format::age(expires_in))
    };
    view! {
        <tr data-testid=format!("privilege-{}", r.id)>
            <td data-label="Change" data-testid="privilege-change">{r.reason.clone()}</td>
            <td data-label="Requested by" data-testid="requester">{r.requested_by.clone()}</td>
            <td data-label="Age">{format::age(now - r.created_at)}</td>
            <td data-label="Expires">{expiry}</td>
            <td class="decide">
                <Show
                    when=move || !own.get()
                    fallback=|| view! { <span class="muted small" data-testid="privilege-own">"Waits for another admin"</span> }
                >
                    <button
                        type="button"
                        class="small"
                        data-testid="privilege-approve"
                        aria-expanded=move || (open.get() == Some(true)).to_string()
                        on:click=move |_| open.set(Some(true))
                    >
                        "Approve…"
                    </button>
                    " "
                    <button
                        type="button"
                        class="small secondary"
                        data-testid="privilege-reject"
                        aria-expanded=move || (open.get() == Some(false)).to_string()
                        on:click=move |_| open.set(Some(false))
                    >
                        "Reject…"
                    </button>
                </Show>
                <Show when=move || open.get().is_some()>
                    <PrivilegeForm d password_ref/>
                </Show>
                <span class="form-message" role="alert" data-testid="privilege-error">{move || failure.get()}</span>
            </td>
        </tr>
    }
}

/// A privilege request's decision: which form is open (Some(true): approve, Some(false):
/// reject), its fields, whether a request is in flight and why the last one failed; and where
/// the outcome goes (`flash`, `version` bumped so the list reloads, an issued key to `key`
/// with the merchant it is for, `target`).
#[derive(Clone, Copy)]
struct PrivilegeDecision {
    id: StoredValue<String>,
    target: StoredValue<String>,
    open: RwSignal<Option<bool>>,
    password: RwSignal<String>,
    reason: RwSignal<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    key: RwSignal<Option<(String, String)>>,
}

impl PrivilegeDecision {
    /// An approval's outcome: the key it issued (if any) shown once, the request returned.
    fn approved(self, done: PrivilegeApproved) -> PrivilegeRequest {
        if let Some(k) = done.api_key {
            self.key.set(Some((self.target.get_value(), k)));
        }
        done.request
    }

    /// What the server's answer does: the outcome to the flash and a reload, or the refusal
    /// beside the form (the password cleared when `clear_password`).
    fn done(self, result: Result<PrivilegeRequest, String>, clear_password: bool) {
        match result {
            Ok(r) => {
                self.flash.set(Some(format!(
                    "Privilege request {} is now {}.",
                    r.id, r.status
                )));
                self.version.update(|v| *v = v.wrapping_add(1));
            }
            Err(m) => {
                self.failure.set(Some(m));
                if clear_password {
                    self.password.set(String::new());
                }
                self.busy.set(false);
            }
        }
    }

    /// The form's submit: approve (with the password) or reject, with the reason.
    fn submit(self, ev: SubmitEvent) {
        ev.prevent_default();
        let Some(approve) = self.open.get_untracked() else {
            return;
        };
        let why = self.reason.get_untracked();
        if why.trim().is_empty() {
            self.failure
                .set(Some("Give a reason for the decision.".into()));
            return;
        }
        let pw = self.password.get_untracked();
        if approve && pw.is_empty() {
            self.failure
                .set(Some("Re-enter your password to approve.".into()));
            return;
        }
        self.busy.set(true);
        self.failure.set(None);
        let id = self.id.get_value();
        spawn_local(async move {
            let result = if approve {
                api::approve_privilege(id, why, pw)
                    .await
                    .map(|done| self.approved(done))
            } else {
                api::reject_privilege(id, why).await
            };
            self.done(result.map_err(|e| api::error_message(&e)), true);
        });
    }

    /// Approve with a passkey instead of the password (issue 36).
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
            let result = match crate::webauthn::step_up().await {
                Ok((challenge, credential)) => crate::api_passkeys::approve_privilege_by_passkey(
                    id, why, challenge, credential,
                )
                .await
                .map(|done| self.approved(done))
                .map_err(|e| api::error_message(&e)),
                Err(m) => Err(m),
            };
            self.done(result, false);
        });
    }
}

/// The open decision form: the password (to approve), the reason, submit, "Approve with
/// passkey", and "Cancel".
#[component]
fn PrivilegeForm(
    d: PrivilegeDecision,
    password_ref: NodeRef<leptos::html::Input>,
) -> impl IntoView {
    let PrivilegeDecision {
        id,
        open,
        password,
        reason,
        busy,
        failure,
        ..
    } = d;
    view! {
        <form
            class="inline-form"
            data-testid="privilege-form"
            aria-label=move || format!("Decide privilege request {}", id.get_value())
            on:submit=move |ev| d.submit(ev)
        >
            <Show when=move || open.get() == Some(true)>
                <label>
                    "Your password"
                    <input
                        type="password"
                        autocomplete="current-password"
                        data-testid="privilege-password"
                        node_ref=password_ref
                        bind:value=password
                    />
                </label>
            </Show>
            <label class="grow">
                "Reason"
                <textarea rows="2" maxlength="1000" required data-testid="privilege-reason" bind:value=reason></textarea>
            </label>
            <button
                type="submit"
                data-testid="privilege-submit"
                class=move || (open.get() == Some(false)).then_some("danger")
                disabled=move || busy.get()
            >
                {move || if open.get() == Some(false) { "Reject" } else { "Approve and apply" }}
            </button>
            <Show when=move || open.get() == Some(true)>
                <button
                    type="button"
                    class="secondary"
                    data-testid="privilege-approve-passkey"
                    disabled=move || busy.get()
                    on:click=move |_| d.approve_by_passkey()
                >
                    "Approve with passkey"
                </button>
            </Show>
            <button type="button" class="secondary" on:click=move |_| { open.set(None); failure.set(None); }>
                "Cancel"
            </button>
        </form>
    }
}
