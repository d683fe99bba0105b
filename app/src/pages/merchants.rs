//! Merchants (admin): each merchant's state and API keys; add a merchant, request a key,
//! revoke a key (401 at once on every server), freeze or unfreeze a merchant (issue 13
//! "Merchant keys"). A rotation is "issue a new key, move the client, revoke the old one": the
//! old key keeps working until it is revoked, so there is no gap.
//!
//! Issuing a key (a new merchant's first one too) and unfreezing a merchant give power, so
//! each is a request another admin approves with their password on the Approvals page
//! (issue 36), where the key is shown once to that admin; adding a merchant, freezing and
//! revoking stay one step, as none of them lets money move.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use crate::api::error_message;
use crate::api_merchants as api;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, Time};
use crate::dto::{ConsoleChange, MerchantAccount, MerchantKey};
use crate::format::awaiting;

/// The merchants page.
#[component]
pub fn MerchantsPage() -> impl IntoView {
    let version = RwSignal::new(0u32);
    let flash = RwSignal::new(None::<String>);
    let accounts = Resource::new(move || version.get(), |_| api::merchant_accounts());
    view! {
        <div class="page-head">
            <h1>"Merchants"</h1>
        </div>
        <p class="flash" role="status" data-testid="flash">{move || flash.get()}</p>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match accounts.await {
                    Ok(list) => {
                        view! {
                            <div class="grid users-grid">
                                <div>
                                    {list
                                        .into_iter()
                                        .map(|a| view! { <MerchantPanel account=a version flash/> })
                                        .collect_view()}
                                </div>
                                <AddMerchant version flash/>
                            </div>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// One merchant: state, freeze switch, keys.
#[component]
fn MerchantPanel(
    account: MerchantAccount,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
) -> impl IntoView {
    let name = account.merchant.name.clone();
    let frozen = account.merchant.frozen;
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let panel_id = format!("merchant-{}", account.merchant.id);
    // Freezing stops the merchant's business at once, so it is confirmed with a reason
    // (audited), as revoking a key is confirmed; unfreezing is a request another admin approves.
    let confirming = RwSignal::new(false);
    let reason = RwSignal::new(String::new());
    let toggle = freeze_toggle(name.clone(), frozen, reason, busy, failure, flash, version);
    let unfreeze = toggle.clone();
    let issue = {
        let name = name.clone();
        move |_| {
            let name = name.clone();
            busy.set(true);
            failure.set(None);
            spawn_local(async move {
                match api::issue_merchant_key(name.clone()).await {
                    Ok(r) => {
                        // The key is made when another admin approves, and shown to them.
                        flash.set(Some(awaiting(&r)));
                        version.update(|v| *v = v.wrapping_add(1));
                    }
                    Err(e) => {
                        failure.set(Some(error_message(&e)));
                        busy.set(false);
                    }
                }
            });
        }
    };
    let keys = account.keys;
    let live = keys.iter().filter(|k| k.revoked_at.is_none()).count();
    let name_for_confirm = name.clone();
    view! {
        <Panel
            id=panel_id
            title=name.clone()
            heading_extra=move || {
                if frozen {
                    view! { <span class="pill st-bad">"frozen"</span> }
                } else {
                    view! { <span class="pill st-ok">"active"</span> }
                }
            }
            testid=format!("merchant-{name}")
        >
            <Facts created=account.merchant.created_at live name=name.clone() connector=account.connector.describe() pricing=account.pricing.clone()/>
            <div class="actions">
                <button type="button" class="secondary small" on:click=issue disabled=move || busy.get()>
                    "Request a new key"
                </button>
                {if frozen {
                    view! {
                        <button type="button" class="secondary small" on:click=move |_| unfreeze(()) disabled=move || busy.get()>
                            "Unfreeze"
                        </button>
                    }
                        .into_any()
                } else {
                    view! {
                        <button
                            type="button"
                            class="secondary small"
                            aria-expanded=move || confirming.get().to_string()
                            on:click=move |_| confirming.set(true)
                        >
                            "Freeze…"
                        </button>
                    }
                        .into_any()
                }}
            </div>
            {(!frozen).then(move || {
                let confirm = Callback::new(move |()| toggle(()));
                view! { <FreezeConfirm name=name_for_confirm.clone() reason confirming busy confirm/> }
            })}
            <p class="form-message" role="alert">{move || failure.get()}</p>
            <ConnectorForm name=name.clone() version flash/>
            <DataTable
                columns=&["Key id", "Prefix", "Created", "Last used", "State", "Actions"]
                class="data keys"
                caption=format!("API keys of {name}")
                testid=format!("keys-{name}")
            >
                {keys
                    .into_iter()
                    .map(|k| view! { <KeyRow merchant=name.clone() key_row=k version flash/> })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

/// What a Freeze (with the typed reason) or Unfreeze asks the server for, and what the page
/// says after: a freeze without a reason is refused here before anything is sent.
fn freeze_toggle(
    name: String,
    frozen: bool,
    reason: RwSignal<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
    flash: RwSignal<Option<String>>,
    version: RwSignal<u32>,
) -> impl Fn(()) + Clone + Send + Sync + 'static {
    move |()| {
        let name = name.clone();
        let why = reason.get_untracked().trim().to_string();
        if !frozen && why.is_empty() {
            failure.set(Some(
                "Say why the merchant is frozen: it goes into the audit log.".into(),
            ));
            return;
        }
        busy.set(true);
        failure.set(None);
        spawn_local(async move {
            match api::set_merchant_frozen(name.clone(), !frozen, why).await {
                Ok(ConsoleChange::Requested(r)) => {
                    flash.set(Some(awaiting(&r)));
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Ok(ConsoleChange::Done(())) => {
                    flash.set(Some(if frozen {
                        format!("Merchant {name} unfrozen: it can create payments again, and postings waiting in SUSPENSE go through.")
                    } else {
                        format!("Merchant {name} frozen: new payments, refunds and endpoint changes are refused.")
                    }));
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => {
                    failure.set(Some(error_message(&e)));
                    busy.set(false);
                }
            }
        });
    }
}

/// The freeze's confirmation: what freezing does, the audited reason, Confirm and Keep.
#[component]
fn FreezeConfirm(
    name: String,
    reason: RwSignal<String>,
    confirming: RwSignal<bool>,
    busy: RwSignal<bool>,
    confirm: Callback<()>,
) -> impl IntoView {
    view! {
        <Show when=move || confirming.get()>
            <div class="stacked-form freeze-confirm" data-testid=format!("freeze-confirm-{name}")>
                <p>
                    "Freezing refuses this merchant's new payments, refunds and endpoint changes at once; payments in flight wait in SUSPENSE until it is unfrozen (which another admin must approve)."
                </p>
                <label>
                    "Reason (audited)"
                    <input type="text" maxlength="2000" required data-testid="freeze-reason" bind:value=reason/>
                </label>
                <div class="actions">
                    <button type="button" class="danger small" on:click=move |_| confirm.run(()) disabled=move || busy.get()>
                        "Confirm freeze"
                    </button>
                    <button type="button" class="secondary small" on:click=move |_| confirming.set(false)>
                        "Keep it active"
                    </button>
                </div>
            </div>
        </Show>
    }
}

/// One key with its revoke button (confirmed in a second step).
#[component]
fn KeyRow(
    merchant: String,
    key_row: MerchantKey,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
) -> impl IntoView {
    let confirming = RwSignal::new(false);
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let id = key_row.id.clone();
    let revoke = {
        let (merchant, id) = (merchant.clone(), id.clone());
        move |_| {
            let (merchant, id) = (merchant.clone(), id.clone());
            busy.set(true);
            failure.set(None);
            spawn_local(async move {
                match api::revoke_merchant_key(merchant.clone(), id.clone()).await {
                    Ok(()) => {
                        flash.set(Some(format!(
                            "Key {id} of {merchant} revoked: it is refused (401) from now on."
                        )));
                        version.update(|v| *v = v.wrapping_add(1));
                    }
                    Err(e) => {
                        failure.set(Some(error_message(&e)));
                        busy.set(false);
                    }
                }
            });
        }
    };
    let revoked = key_row.revoked_at;
    view! {
        <tr data-testid=format!("key-{id}")>
            <td><code>{id.clone()}</code></td>
            <td><code>{key_row.prefix.clone()}"…"</code></td>
            <td><Time ms=key_row.created_at/></td>
            <td>
                {match key_row.last_used_at {
                    Some(ms) => view! { <Time ms/> }.into_any(),
                    None => view! { <span class="muted">"never"</span> }.into_any(),
                }}
            </td>
            <td>
                {match revoked {
                    Some(ms) => view! { <span class="pill st-bad">"revoked"</span> " " <Time ms/> }.into_any(),
                    None => view! { <span class="pill st-ok">"live"</span> }.into_any(),
                }}
            </td>
            <td>
                {revoked.is_none().then(|| view! {
                    <div class="actions">
                        <Show
                            when=move || confirming.get()
                            fallback=move || view! {
                                <button type="button" class="secondary small" on:click=move |_| confirming.set(true)>
                                    "Revoke…"
                                </button>
                            }
                        >
                            <button type="button" class="danger small" on:click=revoke.clone() disabled=move || busy.get()>
                                "Confirm revoke"
                            </button>
                            <button type="button" class="secondary small" on:click=move |_| confirming.set(false)>
                                "Keep"
                            </button>
                        </Show>
                    </div>
                })}
                <span class="form-message" role="alert">{move || failure.get()}</span>
            </td>
        </tr>
    }
}

/// A merchant's creation, live keys, the link to its own page, where its payments go and
/// what it pays per capture (issue 35).
#[component]
fn Facts(
    created: i64,
    live: usize,
    name: String,
    connector: String,
    pricing: Option<converge_wire::merchants::MerchantPricing>,
) -> impl IntoView {
    let fees = pricing.map_or_else(|| "none".to_string(), |p| p.describe());
    view! {
        <p class="hint">
            "Created " <Time ms=created/> {format!(" · {live} live key(s) · ")}
            <A href=format!("/merchants/{}", crate::format::query_escape(&name))>"Its page: payments, endpoints, history →"</A>
        </p>
        <p class="hint" data-testid=format!("connector-{name}")>
            "Connector: " <span class="mono wrap">{connector}</span>
        </p>
        <p class="hint" data-testid=format!("fees-{name}")>"Fees: " {fees}</p>
    }
}

/// Where the merchant's new payments go (issue 38): back to the default connector at once,
/// or its own Stripe account as a request another admin approves. The secret key is typed
/// here once and never shown again (the page shows its last four characters).
#[component]
fn ConnectorForm(
    name: String,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
) -> impl IntoView {
    let open = RwSignal::new(false);
    let kind = RwSignal::new("stripe".to_string());
    let api_base = RwSignal::new("https://api.stripe.com".to_string());
    let secret_key = RwSignal::new(String::new());
    let webhook_secrets = RwSignal::new(String::new());
    let reason = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let merchant = name.clone();
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        busy.set(true);
        failure.set(None);
        let name = merchant.clone();
        spawn_local(async move {
            let answer = api::set_merchant_connector(
                name.clone(),
                kind.get_untracked(),
                api_base.get_untracked(),
                secret_key.get_untracked(),
                webhook_secrets.get_untracked(),
                reason.get_untracked(),
            )
            .await;
            busy.set(false);
            match answer {
                Ok(ConsoleChange::Done(())) => {
                    flash.set(Some(format!(
                        "{name}'s new payments go to the default connector."
                    )));
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Ok(ConsoleChange::Requested(r)) => {
                    secret_key.set(String::new());
                    flash.set(Some(awaiting(&r)));
                    open.set(false);
                }
                Err(e) => failure.set(Some(error_message(&e))),
            }
        });
    };
    view! {
        <button
            type="button"
            class="secondary small"
            aria-expanded=move || open.get().to_string()
            on:click=move |_| open.update(|o| *o = !*o)
        >
            "Connector…"
        </button>
        <form
            class="stacked-form"
            on:submit=on_submit
            hidden=move || !open.get()
            data-testid=format!("connector-form-{name}")
        >
            <label>
                "Connector"
                <select
                    prop:value=move || kind.get()
                    on:change=move |ev| kind.set(event_target_value(&ev))
                >
                    <option value="stripe">"Its own Stripe account (another admin approves)"</option>
                    <option value="sandbox">"The default connector"</option>
                </select>
            </label>
            <label>"Stripe API base" <input type="url" bind:value=api_base/></label>
            <label>
                "Secret key (sk_…)"
                <input type="password" autocomplete="off" bind:value=secret_key/>
            </label>
            <label>
                "Webhook signing secrets (whsec_…, one per line)"
                <textarea rows="2" autocomplete="off" bind:value=webhook_secrets></textarea>
            </label>
            <label>"Reason" <input type="text" bind:value=reason/></label>
            <button type="submit" disabled=move || busy.get()>"Save connector"</button>
            <p class="form-message" role="alert">{move || failure.get()}</p>
        </form>
    }
}

/// The add-merchant form.
#[component]
fn AddMerchant(version: RwSignal<u32>, flash: RwSignal<Option<String>>) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let n = name.get_untracked().trim().to_string();
        if n.is_empty() {
            failure.set(Some("Give a merchant name.".into()));
            return;
        }
        busy.set(true);
        failure.set(None);
        spawn_local(async move {
            match api::add_merchant(n.clone()).await {
                Ok(r) => {
                    // Its first key is made when another admin approves, and shown to them.
                    flash.set(Some(format!(
                        "Merchant {n} added; its first key: {}",
                        awaiting(&r)
                    )));
                    name.set(String::new());
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => {
                    failure.set(Some(error_message(&e)));
                    busy.set(false);
                }
            }
        });
    };
    view! {
        <Panel id="add-merchant" title="Add a merchant">
            <p class="hint">
                "The merchant is added at once; its first API key is a request another admin approves, and is shown to them once."
            </p>
            <form class="stacked-form" on:submit=on_submit data-testid="add-merchant">
                <label>
                    "Merchant name"
                    <input type="text" autocomplete="off" required maxlength="64" bind:value=name/>
                </label>
                <button type="submit" disabled=move || busy.get()>"Add merchant"</button>
                <p class="form-message" role="alert">{move || failure.get()}</p>
            </form>
        </Panel>
    }
}
