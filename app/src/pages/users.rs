//! Console users (admin): add a user with roles and a password, change a user's roles (each
//! request reads the roles afresh, so a change applies to the user's open sessions at their
//! next request), disable or enable one (a disabled user's sessions end at once), reset a
//! password (its sessions end too). Each user's last sign-in is shown.
//!
//! Adding a user with operator, approver or admin, granting one of those roles and enabling a
//! disabled user give power: each becomes a request another admin approves with their
//! password on the Approvals page (issue 36), and the page says so. The last enabled admin
//! can be neither disabled nor demoted.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, Time};
use crate::dto::{ConsoleChange, Role, UserView};
use crate::format::awaiting;

/// The users page.
#[component]
pub fn UsersPage() -> impl IntoView {
    let version = RwSignal::new(0u32);
    let flash = RwSignal::new(None::<String>);
    let users = Resource::new(move || version.get(), |_| api::list_users());
    view! {
        <div class="page-head">
            <h1>"Users"</h1>
        </div>
        <p class="flash" role="status" data-testid="flash">{move || flash.get()}</p>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match users.await {
                    Ok(list) => {
                        view! {
                            <div class="grid users-grid">
                                <Panel
                                    id="users"
                                    title=match list.len() {
                                        1 => "1 user".to_string(),
                                        n => format!("{n} users"),
                                    }
                                >
                                    <DataTable
                                        columns=&["User", "Roles", "State", "Created", "Last sign-in", "Actions"]
                                        class="data inbox"
                                        testid="users-table"
                                    >
                                        {list
                                            .into_iter()
                                            .map(|u| view! { <UserRow user=u version flash/> })
                                            .collect_view()}
                                    </DataTable>
                                </Panel>
                                <AddUser version flash/>
                            </div>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
        <crate::pages::passkeys::PasskeyPolicyPanel/>
    }
}

/// One user with its actions.
#[component]
fn UserRow(
    user: UserView,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
) -> impl IntoView {
    let name = user.username.clone();
    let disabled = user.disabled;
    let editing = RwSignal::new(false);
    let chosen = RwSignal::new(user.roles.clone());
    let resetting = RwSignal::new(false);
    let confirming = RwSignal::new(false);
    let password = RwSignal::new(String::new());
    let change = UserChange {
        name: StoredValue::new(name.clone()),
        busy: RwSignal::new(false),
        failure: RwSignal::new(None),
        version,
        flash,
    };
    let failure = change.failure;
    view! {
        <tr data-testid=format!("user-{name}")>
            <td class="strong" data-label="User">{name.clone()}</td>
            <td data-label="Roles">
                <span data-testid="roles">{user.roles.join(", ")}</span>
                <Show when=move || editing.get()>
                    <RolesForm change chosen/>
                </Show>
            </td>
            <td data-label="State">
                {if disabled {
                    view! { <span class="pill st-bad">"disabled"</span> }
                } else {
                    view! { <span class="pill st-ok">"active"</span> }
                }}
            </td>
            <td data-label="Created"><Time ms=user.created_at/></td>
            <td data-testid="last-sign-in" data-label="Last sign-in">
                {match user.last_sign_in_at {
                    Some(ms) => view! { <Time ms/> }.into_any(),
                    None => view! { <span class="muted">"never"</span> }.into_any(),
                }}
            </td>
            <td>
                <div class="actions">
                <button
                    type="button"
                    class="secondary small"
                    data-testid="edit-roles"
                    aria-expanded=move || editing.get().to_string()
                    on:click=move |_| editing.update(|e| *e = !*e)
                >
                    "Edit roles…"
                </button>
                <EnableToggle disabled change confirming/>
                <button
                    type="button"
                    class="secondary small"
                    aria-expanded=move || resetting.get().to_string()
                    on:click=move |_| resetting.update(|r| *r = !*r)
                >
                    "Reset password…"
                </button>
                <Show when=move || resetting.get()>
                    <ResetPasswordForm change password/>
                </Show>
                </div>
                <span class="form-message" role="alert">{move || failure.get()}</span>
            </td>
        </tr>
    }
}

/// A change to one user from its row: the user, whether a change is in flight and why the
/// last one failed; and where the outcome goes (`flash`, and `version` bumped so the list
/// reloads).
#[derive(Clone, Copy)]
struct UserChange {
    name: StoredValue<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
}

impl UserChange {
    /// A change is sent: busy, the last failure cleared.
    fn start(self) {
        self.busy.set(true);
        self.failure.set(None);
    }

    /// What the server's answer to a change does: a request that waits for another admin
    /// (said as such), or `done`'s sentence for an applied change, to the flash and a
    /// reload; or the refusal beside the row. True when the server took the change.
    fn answered<T>(
        self,
        result: Result<ConsoleChange<T>, ServerFnError>,
        done: impl FnOnce(T) -> String,
    ) -> bool {
        match result {
            Ok(ConsoleChange::Requested(r)) => {
                self.flash.set(Some(awaiting(&r)));
                self.version.update(|v| *v = v.wrapping_add(1));
                true
            }
            Ok(ConsoleChange::Done(t)) => {
                self.flash.set(Some(done(t)));
                self.version.update(|v| *v = v.wrapping_add(1));
                true
            }
            Err(e) => {
                self.failure.set(Some(api::error_message(&e)));
                self.busy.set(false);
                false
            }
        }
    }
}

/// The roles form: a box per role, and "Save roles".
#[component]
fn RolesForm(change: UserChange, chosen: RwSignal<Vec<String>>) -> impl IntoView {
    let on_roles = move |ev: SubmitEvent| {
        ev.prevent_default();
        let name = change.name.get_value();
        let roles = chosen.get_untracked();
        if roles.is_empty() {
            change.failure.set(Some("Choose at least one role.".into()));
            return;
        }
        change.start();
        spawn_local(async move {
            let result = api::set_user_roles(name.clone(), roles.join(",")).await;
            change.answered(result, |u| {
                format!(
                    "Roles of {name} are now {}; they apply from the user's next request.",
                    u.roles.join(", ")
                )
            });
        });
    };
    let roles_label = format!("Roles of {}", change.name.get_value());
    view! {
        <form class="inline-form" data-testid="roles-form" on:submit=on_roles>
            <fieldset class="roles">
                <legend class="visually-hidden">{roles_label}</legend>
                {Role::ALL
                    .iter()
                    .map(|r| {
                        let r = r.to_string();
                        let checked = {
                            let r = r.clone();
                            move || chosen.read().contains(&r)
                        };
                        let toggle = {
                            let r = r.clone();
                            move |_| {
                                chosen.update(|list| {
                                    if let Some(i) = list.iter().position(|x| *x == r) {
                                        list.remove(i);
                                    } else {
                                        list.push(r.clone());
                                    }
                                })
                            }
                        };
                        view! {
                            <label class="check">
                                <input type="checkbox" value=r.clone() prop:checked=checked on:change=toggle/>
                                {r.clone()}
                            </label>
                        }
                    })
                    .collect_view()}
            </fieldset>
            <button type="submit" class="small" data-testid="roles-save" disabled=move || change.busy.get()>
                "Save roles"
            </button>
        </form>
    }
}

/// "Enable" for a disabled user; "Disable…" for an enabled one, which asks once more:
/// disabling ends the user's sessions at once.
#[component]
fn EnableToggle(disabled: bool, change: UserChange, confirming: RwSignal<bool>) -> impl IntoView {
    let busy = change.busy;
    let toggle = move |_| {
        let name = change.name.get_value();
        change.start();
        spawn_local(async move {
            let result = if disabled {
                api::enable_user(name.clone()).await
            } else {
                api::disable_user(name.clone())
                    .await
                    .map(ConsoleChange::Done)
            };
            change.answered(result, |()| {
                let what = if disabled {
                    "enabled"
                } else {
                    "disabled; its sessions ended"
                };
                format!("User {name} {what}.")
            });
        });
    };
    // Disabling ends the user's sessions at once: it asks once more; enabling does not.
    if disabled {
        view! {
            <button type="button" class="secondary small" on:click=toggle disabled=move || busy.get()>
                "Enable"
            </button>
        }
        .into_any()
    } else {
        view! {
            <Show
                when=move || confirming.get()
                fallback=move || view! {
                    <button type="button" class="secondary small" on:click=move |_| confirming.set(true)>
                        "Disable…"
                    </button>
                }
            >
                <button type="button" class="danger small" on:click=toggle disabled=move || busy.get()>
                    {move || format!("Confirm: disable {}", change.name.get_value())}
                </button>
                <button type="button" class="secondary small" on:click=move |_| confirming.set(false)>
                    "Keep"
                </button>
            </Show>
        }
        .into_any()
    }
}

/// The reset-password form (the user's sessions end when it is applied).
#[component]
fn ResetPasswordForm(change: UserChange, password: RwSignal<String>) -> impl IntoView {
    let on_reset = move |ev: SubmitEvent| {
        ev.prevent_default();
        let name = change.name.get_value();
        let pass = password.get_untracked();
        change.start();
        spawn_local(async move {
            let result = api::reset_password(name.clone(), pass).await;
            if change.answered(result, |()| {
                format!("Password of {name} reset; its sessions ended.")
            }) {
                password.set(String::new());
            }
        });
    };
    view! {
        <form class="inline-form" on:submit=on_reset>
            <label>
                "New password"
                <input
                    type="password"
                    autocomplete="new-password"
                    required
                    bind:value=password
                />
            </label>
            <button type="submit" class="small" disabled=move || change.busy.get()>
                "Set password"
            </button>
        </form>
    }
}

/// The add-user form.
#[component]
fn AddUser(version: RwSignal<u32>, flash: RwSignal<Option<String>>) -> impl IntoView {
    let username = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let roles = RwSignal::new(vec![Role::Viewer.to_string()]);
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let name = username.get_untracked().trim().to_string();
        let chosen = roles.get_untracked();
        if name.is_empty() {
            failure.set(Some("Give a username.".into()));
            return;
        }
        if chosen.is_empty() {
            failure.set(Some("Choose at least one role.".into()));
            return;
        }
        let pass = password.get_untracked();
        busy.set(true);
        failure.set(None);
        spawn_local(async move {
            match api::add_user(name, chosen.join(","), pass).await {
                Ok(ConsoleChange::Requested(r)) => {
                    password.set(String::new());
                    flash.set(Some(awaiting(&r)));
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Ok(ConsoleChange::Done(u)) => {
                    flash.set(Some(format!(
                        "User {} added with roles {}.",
                        u.username,
                        u.roles.join(", ")
                    )));
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => {
                    failure.set(Some(api::error_message(&e)));
                    busy.set(false);
                }
            }
        });
    };
    view! {
        <Panel id="add-user" title="Add a user">
            <form class="stacked-form" on:submit=on_submit data-testid="add-user">
                <label>
                    "Username"
                    <input type="text" autocomplete="off" required maxlength="64" bind:value=username/>
                </label>
                <fieldset>
                    <legend>"Roles"</legend>
                    {Role::ALL
                        .iter()
                        .map(|r| {
                            let r = r.to_string();
                            let checked = {
                                let r = r.clone();
                                move || roles.read().contains(&r)
                            };
                            let on_change = {
                                let r = r.clone();
                                move |ev| {
                                    let on = event_target_checked(&ev);
                                    roles.update(|list| {
                                        list.retain(|x| x != &r);
                                        if on {
                                            list.push(r.clone());
                                        }
                                    });
                                }
                            };
                            view! {
                                <label class="check">
                                    <input type="checkbox" value=r.clone() prop:checked=checked on:change=on_change/>
                                    {r}
                                </label>
                            }
                        })
                        .collect_view()}
                </fieldset>
                <label>
                    "Password"
                    <input type="password" autocomplete="new-password" required bind:value=password/>
                    <span class="hint">"12 characters or more."</span>
                </label>
                <button type="submit" disabled=move || busy.get()>"Add user"</button>
                <p class="form-message" role="alert">{move || failure.get()}</p>
            </form>
        </Panel>
    }
}
