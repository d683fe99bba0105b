//! "Your passkeys" (issue 36, passkeys for step-up): on the approvals page, where an approver
//! decides, the signed-in user lists, registers (its password again, then the browser's
//! passkey prompt) and removes its own passkeys. An approval's form then offers "Approve with
//! passkey" beside the password ([`crate::webauthn`]). The server checks every step itself.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, Time};
use crate::{api, api_passkeys, webauthn};

/// The signed-in user's passkeys, with the form that registers one.
#[component]
pub fn PasskeysPanel() -> impl IntoView {
    let version = RwSignal::new(0u32);
    let list = Resource::new(move || version.get(), |_| api_passkeys::list_passkeys());
    let policy = Resource::new(
        move || version.get(),
        |_| api_passkeys::get_passkey_policy(),
    );
    let name = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let outcome = RwSignal::new(None::<String>);
    let failure = RwSignal::new(None::<String>);
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let (n, pw) = (name.get_untracked(), password.get_untracked());
        if n.trim().is_empty() || pw.is_empty() {
            failure.set(Some("Name the passkey and re-enter your password.".into()));
            return;
        }
        busy.set(true);
        failure.set(None);
        outcome.set(None);
        spawn_local(async move {
            let done = async {
                let c = api_passkeys::begin_passkey_registration()
                    .await
                    .map_err(|e| api::error_message(&e))?;
                let credential = webauthn::ceremony("create", &c.options).await?;
                api_passkeys::register_passkey(c.challenge_id, n, credential, pw)
                    .await
                    .map_err(|e| api::error_message(&e))
            }
            .await;
            password.set(String::new());
            busy.set(false);
            match done {
                Ok(p) => {
                    outcome.set(Some(if p.confirmed {
                        format!("Passkey “{}” registered.", p.name)
                    } else {
                        format!(
                            "Passkey “{}” registered; approvals require passkeys, so it approves once another admin confirms it on the Approvals page.",
                            p.name
                        )
                    }));
                    name.set(String::new());
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(m) => failure.set(Some(m)),
            }
        });
    };
    let remove = move |id: String| {
        busy.set(true);
        failure.set(None);
        outcome.set(None);
        spawn_local(async move {
            let r = api_passkeys::remove_passkey(id).await;
            busy.set(false);
            match r {
                Ok(()) => {
                    outcome.set(Some("Passkey removed.".into()));
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => failure.set(Some(api::error_message(&e))),
            }
        });
    };
    view! {
        <Panel id="passkeys" title="Your passkeys">
            <PolicyNote policy/>
            <PasskeyList list busy remove=Callback::new(remove)/>
            <RegisterForm name password busy outcome failure on_submit/>
        </Panel>
    }
}

/// The rule in force, in one sentence.
#[component]
fn PolicyNote(
    policy: Resource<Result<converge_wire::passkeys::PasskeyPolicy, ServerFnError>>,
) -> impl IntoView {
    view! {
    <p class="muted small" data-testid="passkey-policy">
        <Transition fallback=|| ()>
            {move || {
                policy
                    .get()
                    .and_then(Result::ok)
                    .map(|p| {
                        if p.required {
                            "Approvals require a passkey: the password alone no longer approves."
                        } else {
                            "Approve with a passkey instead of your password: register one here."
                        }
                    })
            }}
        </Transition>
    </p>
    }
}

/// The user's passkeys, each with its Remove button.
#[component]
fn PasskeyList(
    list: Resource<Result<Vec<converge_wire::passkeys::PasskeyView>, ServerFnError>>,
    busy: RwSignal<bool>,
    remove: Callback<String>,
) -> impl IntoView {
    view! {
    <Transition fallback=Loading>
        {move || Suspend::new(async move {
            match list.await {
                Ok(items) => {
                    let empty = items.is_empty().then_some("No passkey yet.");
                    view! {
                        <DataTable
                            columns=&["Name", "Registered", "Last used", "Uses", "Actions"]
                            testid="passkeys"
                            empty
                        >
                            {items
                                .into_iter()
                                .map(|p| {
                                    let id = p.id.clone();
                                    view! {
                                        <tr data-testid="passkey-row" data-passkey-id=p.id.clone()>
                                            <td data-testid="passkey-name-cell">
                                                {p.name.clone()}
                                                {(!p.confirmed).then(|| view! {
                                                    " "<span class="pill st-warn" title="It approves once another admin confirms it">"awaiting confirmation"</span>
                                                })}
                                            </td>
                                            <td><Time ms=p.created_at/></td>
                                            <td>
                                                {p.last_used_at
                                                    .map(|t| view! { <Time ms=t/> }.into_any())
                                                    .unwrap_or_else(|| "never".into_any())}
                                            </td>
                                            <td class="num">{p.sign_count}</td>
                                            <td>
                                                <button
                                                    type="button"
                                                    class="small danger"
                                                    data-testid="passkey-remove"
                                                    aria-label=format!("Remove passkey {}", p.name)
                                                    disabled=move || busy.get()
                                                    on:click=move |_| remove.run(id.clone())
                                                >
                                                    "Remove"
                                                </button>
                                            </td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </DataTable>
                    }
                        .into_any()
                }
                Err(e) => view! { <ErrorNote error=e/> }.into_any(),
            }
        })}
    </Transition>
    }
}

/// Registers a passkey: its name and the user's password again.
#[component]
fn RegisterForm(
    name: RwSignal<String>,
    password: RwSignal<String>,
    busy: RwSignal<bool>,
    outcome: RwSignal<Option<String>>,
    failure: RwSignal<Option<String>>,
    on_submit: impl Fn(SubmitEvent) + 'static,
) -> impl IntoView {
    view! {
    <form
        class="inline-form"
        data-testid="passkey-form"
        aria-label="Register a passkey"
        on:submit=on_submit
    >
        <label>
            "Passkey name"
            <input
                type="text"
                name="passkey-name"
                maxlength="64"
                data-testid="passkey-name"
                bind:value=name
            />
        </label>
        <label>
            "Your password"
            <input
                type="password"
                name="password"
                autocomplete="current-password"
                data-testid="passkey-password"
                bind:value=password
            />
        </label>
        <button type="submit" data-testid="passkey-register" disabled=move || busy.get()>
            "Register a passkey"
        </button>
        <span class="form-message" role="status" data-testid="passkey-outcome">
            {move || outcome.get()}
        </span>
        <span class="form-message" role="alert" data-testid="passkey-error">
            {move || failure.get()}
        </span>
    </form>
    }
}

/// The admins' rule (issue 36): whether approvals require a passkey. A change is proven with
/// the admin's password or a passkey; while passkeys are required, only a passkey is
/// accepted (the server says `passkey_required`), in either direction, and every change is
/// audited (`passkeys_required_changed`).
#[component]
pub fn PasskeyPolicyPanel() -> impl IntoView {
    let version = RwSignal::new(0u32);
    let policy = Resource::new(
        move || version.get(),
        |_| api_passkeys::get_passkey_policy(),
    );
    let required = RwSignal::new(false);
    let reason = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let outcome = RwSignal::new(None::<String>);
    let failure = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        if let Some(Ok(p)) = policy.get() {
            required.set(p.required);
        }
    });
    let save = move |with_passkey: bool| {
        save_policy(
            with_passkey,
            PolicyForm {
                required,
                reason,
                password,
                busy,
                outcome,
                failure,
                version,
            },
        )
    };
    view! {
        <Panel id="passkey-policy" title="Passkeys for approvals">
            <form
                class="inline-form"
                data-testid="passkey-policy-form"
                aria-label="Passkeys for approvals"
                on:submit=move |ev: SubmitEvent| {
                    ev.prevent_default();
                    save(false);
                }
            >
                <label>
                    <input type="checkbox" data-testid="passkey-required" bind:checked=required/>
                    " Approvals require a passkey"
                </label>
                <label class="grow">
                    "Reason"
                    <input type="text" maxlength="1000" data-testid="passkey-policy-reason" bind:value=reason/>
                </label>
                <label>
                    "Your password"
                    <input
                        type="password"
                        autocomplete="current-password"
                        data-testid="passkey-policy-password"
                        bind:value=password
                    />
                </label>
                <button type="submit" data-testid="passkey-policy-save" disabled=move || busy.get()>
                    "Save"
                </button>
                <button
                    type="button"
                    class="secondary"
                    data-testid="passkey-policy-save-passkey"
                    disabled=move || busy.get()
                    on:click=move |_| save(true)
                >
                    "Save with passkey"
                </button>
                <span class="form-message" role="status" data-testid="passkey-policy-outcome">
                    {move || outcome.get()}
                </span>
                <span class="form-message" role="alert" data-testid="passkey-policy-error">
                    {move || failure.get()}
                </span>
            </form>
        </Panel>
    }
}

/// The policy form's state.
#[derive(Clone, Copy)]
struct PolicyForm {
    required: RwSignal<bool>,
    reason: RwSignal<String>,
    password: RwSignal<String>,
    busy: RwSignal<bool>,
    outcome: RwSignal<Option<String>>,
    failure: RwSignal<Option<String>>,
    version: RwSignal<u32>,
}

/// Sends the policy change, proven with the password or (`with_passkey`) a passkey.
fn save_policy(with_passkey: bool, f: PolicyForm) {
    let PolicyForm {
        required,
        reason,
        password,
        busy,
        outcome,
        failure,
        version,
    } = f;
    let why = reason.get_untracked();
    let pw = password.get_untracked();
    if why.trim().is_empty() || (!with_passkey && pw.is_empty()) {
        failure.set(Some(
            "Give a reason, and your password or your passkey.".into(),
        ));
        return;
    }
    let want = required.get_untracked();
    busy.set(true);
    failure.set(None);
    outcome.set(None);
    spawn_local(async move {
        let r = async {
            let (challenge, credential) = if with_passkey {
                webauthn::step_up().await?
            } else {
                (String::new(), String::new())
            };
            api_passkeys::set_passkey_policy(want, why, pw, challenge, credential)
                .await
                .map_err(|e| api::error_message(&e))
        }
        .await;
        password.set(String::new());
        busy.set(false);
        match r {
            Ok(p) => {
                outcome.set(Some(if p.required {
                    "Approvals now require a passkey.".into()
                } else {
                    "Approvals accept the password again.".into()
                }));
                reason.set(String::new());
                version.update(|v| *v = v.wrapping_add(1));
            }
            Err(m) => failure.set(Some(m)),
        }
    });
}
