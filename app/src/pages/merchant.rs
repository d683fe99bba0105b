//! One merchant's page (`/merchants/:name`, viewer; issue 41, as Kaui has an account page):
//! its state, its latest payments, its webhook endpoints with their 24 h health, and, for the
//! roles that may read them, its API keys (admins) and its history in the audit log
//! (auditors). Read-only: the changes stay on the Merchants page (admins), the payment pages
//! and the Webhooks page, each under its own rules; this page links to them.

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

use crate::components::layout::signed_in_has;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, Money, StatusPill, Time};
use crate::dto::{AuditListQuery, Merchant, PaymentSearch, Role};
use crate::{api, api_merchants, api_queues, api_webhooks, format};

/// Payments the page lists; the rest are one link away.
const LATEST: i64 = 20;

/// The merchant page.
#[component]
pub fn MerchantPage() -> impl IntoView {
    // The raw path, decoded once here: a name may hold any character but a control one, and
    // its link percent-encodes it as one segment (as the key page does with keys).
    let location = use_location();
    let name = Memo::new(move |_| {
        let path = location.pathname.get();
        crate::api_lookup::percent_decode(path.strip_prefix("/merchants/").unwrap_or(""), false)
    });
    let merchant = Resource::new(
        move || name.get(),
        |name| async move {
            let all = api::merchants().await?;
            Ok::<_, ServerFnError>(all.into_iter().find(|m| m.name == name))
        },
    );
    view! {
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match merchant.await {
                    Ok(Some(m)) => view! { <MerchantStory m/> }.into_any(),
                    Ok(None) => {
                        view! {
                            <h1>"Merchant"</h1>
                            <p class="error-note" role="alert" data-testid="no-merchant">
                                {format!("There is no merchant named {:?}.", name.get_untracked())}
                            </p>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <h1>"Merchant"</h1><ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The page of merchant `m`: each panel loads on its own.
#[component]
fn MerchantStory(m: Merchant) -> impl IntoView {
    let is_admin = signed_in_has(Role::Admin);
    let is_auditor = signed_in_has(Role::Auditor);
    let name = m.name.clone();
    let (for_keys, for_history) = (name.clone(), name.clone());
    view! {
        <div class="page-head">
            <h1 data-testid="merchant-name">{m.name.clone()}</h1>
            {if m.frozen {
                view! { <span class="pill st-bad" data-testid="merchant-state">"frozen"</span> }
            } else {
                view! { <span class="pill st-ok" data-testid="merchant-state">"active"</span> }
            }}
        </div>
        <p class="hint">
            "Merchant #" {m.id} ", created " <Time ms=m.created_at/>
            {m.frozen.then_some(". Frozen: its new payments, refunds and endpoint changes are refused (403 merchant_frozen).")}
        </p>
        <LatestPayments name=name.clone()/>
        <Endpoints name=name/>
        <Show when=move || is_admin.get()>
            <Keys name=for_keys.clone()/>
        </Show>
        <Show when=move || is_auditor.get()>
            <History name=for_history.clone()/>
        </Show>
    }
}

/// The merchant's latest payments, newest first, and a link to all of them.
#[component]
fn LatestPayments(name: String) -> impl IntoView {
    let query = PaymentSearch {
        merchant: Some(name.clone()),
        limit: Some(LATEST),
        ..Default::default()
    };
    let page = Resource::new(move || query.clone(), api::search_payments);
    let all = format!(
        "/payments{}",
        format::query_string(&[("merchant", Some(name.as_str()))])
    );
    view! {
        <Panel id="merchant-payments" title="Latest payments" testid="merchant-payments">
            <Transition fallback=Loading>
                {move || Suspend::new(async move {
                    match page.await {
                        Ok(p) => {
                            let rows = p.items.into_iter().take(LATEST as usize).collect::<Vec<_>>();
                            view! {
                                <DataTable
                                    columns=&["Created", "Payment", "Order id", "Amount", "Status"]
                                    numeric=&["Amount"]
                                    class="data"
                                    label="Latest payments"
                                    empty=rows.is_empty().then_some("No payments yet.")
                                >
                                    {rows
                                        .into_iter()
                                        .map(|p| {
                                            view! {
                                                <tr>
                                                    <td><Time ms=p.created_at/></td>
                                                    <td class="mono">
                                                        <A href=format!("/payments/{}", p.id)>{p.id.clone()}</A>
                                                    </td>
                                                    <td class="mono">{p.merchant_order_id}</td>
                                                    <td class="num"><Money amount=p.amount currency=p.currency/></td>
                                                    <td><StatusPill status=p.status/></td>
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
            <p><A href=all>"All its payments →"</A></p>
        </Panel>
    }
}

/// The merchant's webhook endpoints with their 24 h health.
#[component]
fn Endpoints(name: String) -> impl IntoView {
    let overview = Resource::new(|| (), |_| api_webhooks::load_webhooks_overview());
    view! {
        <Panel id="merchant-endpoints" title="Webhook endpoints" testid="merchant-endpoints">
            <Transition fallback=Loading>
                {
                    let name = name.clone();
                    move || {
                        let name = name.clone();
                        Suspend::new(async move {
                            match overview.await {
                                Ok(o) => {
                                    let mine = o
                                        .endpoints
                                        .into_iter()
                                        .filter(|e| e.merchant == name)
                                        .collect::<Vec<_>>();
                                    view! {
                                        <DataTable
                                            columns=&["Endpoint", "URL", "Status", "24 h", "Last failure"]
                                            class="data"
                                            label="Webhook endpoints"
                                            empty=mine.is_empty().then_some("No endpoint registered.")
                                        >
                                            {mine
                                                .into_iter()
                                                .map(|e| {
                                                    let health = if e.attempts_24h == 0 {
                                                        "no attempts".to_string()
                                                    } else {
                                                        format!(
                                                            "{} attempts, {} ok",
                                                            e.attempts_24h,
                                                            format::percent(e.succeeded_24h as f64 / e.attempts_24h as f64),
                                                        )
                                                    };
                                                    view! {
                                                        <tr>
                                                            <td class="mono">{e.id.clone()}</td>
                                                            <td class="mono wrap">{e.url.clone()}</td>
                                                            <td><StatusPill status=e.status/></td>
                                                            <td>{health}</td>
                                                            <td class="error-text">
                                                                {e.last_failure.as_deref().map(|f| format::clip(f, 80))}
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
                        })
                    }
                }
            </Transition>
            <p><A href="/webhooks">"Deliveries on the Webhooks page →"</A></p>
        </Panel>
    }
}

/// The merchant's API keys (admins), as the Merchants page lists them.
#[component]
fn Keys(name: String) -> impl IntoView {
    let accounts = Resource::new(|| (), |_| api_merchants::merchant_accounts());
    view! {
        <Panel id="merchant-keys" title="API keys" testid="merchant-keys">
            <Transition fallback=Loading>
                {
                    let name = name.clone();
                    move || {
                        let name = name.clone();
                        Suspend::new(async move {
                            match accounts.await {
                                Ok(list) => {
                                    let keys = list
                                        .into_iter()
                                        .find(|a| a.merchant.name == name)
                                        .map(|a| a.keys)
                                        .unwrap_or_default();
                                    view! {
                                        <DataTable
                                            columns=&["Key", "Prefix", "Created", "Last used", "State"]
                                            class="data keys"
                                            label="API keys"
                                            empty=keys.is_empty().then_some("No key yet: its first key waits for an admin's approval.")
                                        >
                                            {keys
                                                .into_iter()
                                                .map(|k| {
                                                    view! {
                                                        <tr>
                                                            <td class="mono">{k.id.clone()}</td>
                                                            <td class="mono">{k.prefix.clone()}</td>
                                                            <td><Time ms=k.created_at/></td>
                                                            <td>
                                                                {match k.last_used_at {
                                                                    Some(t) => view! { <Time ms=t/> }.into_any(),
                                                                    None => "never".into_any(),
                                                                }}
                                                            </td>
                                                            <td>
                                                                {match k.revoked_at {
                                                                    Some(t) => view! { "revoked " <Time ms=t/> }.into_any(),
                                                                    None => "live".into_any(),
                                                                }}
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
                        })
                    }
                }
            </Transition>
            <p><A href="/admin/merchants">"Issue, revoke, freeze on the Merchants page →"</A></p>
        </Panel>
    }
}

/// The audit records about the merchant (auditors), newest first.
#[component]
fn History(name: String) -> impl IntoView {
    let target = format!("merchant:{name}");
    let query = AuditListQuery {
        target: Some(target.clone()),
        ..Default::default()
    };
    let records = Resource::new(move || query.clone(), api_queues::load_audit_list);
    let all = format!(
        "/audit{}",
        format::query_string(&[("target", Some(target.as_str()))])
    );
    view! {
        <Panel id="merchant-history" title="History" testid="merchant-history">
            <Transition fallback=Loading>
                {move || Suspend::new(async move {
                    match records.await {
                        Ok(list) => {
                            view! {
                                <DataTable
                                    columns=&["#", "When", "Who", "Action", "Reason"]
                                    numeric=&["#"]
                                    class="data"
                                    label="History"
                                    empty=list.items.is_empty().then_some("No audit record names this merchant.")
                                >
                                    {list
                                        .items
                                        .into_iter()
                                        .map(|r| {
                                            let rec = r.record;
                                            view! {
                                                <tr>
                                                    <td class="num">{rec.seq}</td>
                                                    <td><Time ms=rec.at/></td>
                                                    <td>{rec.actor}</td>
                                                    <td class="mono">{rec.action}</td>
                                                    <td>{rec.reason}</td>
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
            <p><A href=all>"In the audit viewer →"</A></p>
        </Panel>
    }
}
