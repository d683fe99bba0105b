//! One merchant's page (`/merchants/:name`, viewer; issue 41, as Kaui has an account page):
//! its state, its latest payments, its webhook endpoints with their 24 h health, and, for the
//! roles that may read them, its API keys (admins) and its history in the audit log
//! (auditors). Read-only: the changes stay on the Merchants page (admins), the payment pages
//! and the Webhooks page, each under its own rules; this page links to them.

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, Money, StatusPill, Time};
use crate::dto::{AuditRow, EndpointRow, MerchantKey, MerchantOverview, Payment};
use crate::{api_merchants, format};

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
    // One answer for every panel (the roles decide on the server which it holds): panels
    // loading on their own each made a resource inside the page's Suspend, which hydrated
    // out of step with the server's render.
    let overview = Resource::new(move || name.get(), api_merchants::load_merchant_overview);
    view! {
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match overview.await {
                    Ok(Some(o)) => view! { <MerchantStory o/> }.into_any(),
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

/// The page of one merchant: its keys when the answer holds them (admins), its history when
/// it holds that (auditors).
#[component]
fn MerchantStory(o: MerchantOverview) -> impl IntoView {
    let m = o.merchant;
    let name = m.name.clone();
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
        <p class="hint" data-testid="merchant-connector">
            "Its new payments go to " <span class="mono wrap">{o.connector.describe()}</span>
        </p>
        <LatestPayments name=name.clone() payments=o.payments/>
        <Endpoints endpoints=o.endpoints/>
        {o.keys.map(|keys| view! { <Keys keys/> })}
        {o.history.map(|items| view! { <History name=name.clone() items/> })}
    }
}

/// The merchant's latest payments, newest first, and a link to all of them.
#[component]
fn LatestPayments(name: String, payments: Vec<Payment>) -> impl IntoView {
    let all = format!(
        "/payments{}",
        format::query_string(&[("merchant", Some(name.as_str()))])
    );
    view! {
        <Panel id="merchant-payments" title="Latest payments" testid="merchant-payments">
            <DataTable
                columns=&["Created", "Payment", "Order id", "Amount", "Status"]
                numeric=&["Amount"]
                class="data"
                label="Latest payments"
                empty=payments.is_empty().then_some("No payments yet.")
            >
                {payments
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
            <p><A href=all>"All its payments →"</A></p>
        </Panel>
    }
}

/// The merchant's webhook endpoints with their 24 h health.
#[component]
fn Endpoints(endpoints: Vec<EndpointRow>) -> impl IntoView {
    view! {
        <Panel id="merchant-endpoints" title="Webhook endpoints" testid="merchant-endpoints">
            <DataTable
                columns=&["Endpoint", "URL", "Status", "24 h", "Last failure"]
                class="data"
                label="Webhook endpoints"
                empty=endpoints.is_empty().then_some("No endpoint registered.")
            >
                {endpoints
                    .into_iter()
                    .map(|e| {
                        let health = format::endpoint_health(e.attempts_24h, e.succeeded_24h);
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
            <p><A href="/webhooks">"Deliveries on the Webhooks page →"</A></p>
        </Panel>
    }
}

/// The merchant's API keys (admins), as the Merchants page lists them.
#[component]
fn Keys(keys: Vec<MerchantKey>) -> impl IntoView {
    view! {
        <Panel id="merchant-keys" title="API keys" testid="merchant-keys">
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
            <p><A href="/admin/merchants">"Issue, revoke, freeze on the Merchants page →"</A></p>
        </Panel>
    }
}

/// The audit records about the merchant (auditors), newest first.
#[component]
fn History(name: String, items: Vec<AuditRow>) -> impl IntoView {
    let target = format!("merchant:{name}");
    let all = format!(
        "/audit{}",
        format::query_string(&[("target", Some(target.as_str()))])
    );
    view! {
        <Panel id="merchant-history" title="History" testid="merchant-history">
            <DataTable
                columns=&["#", "When", "Who", "Action", "Reason"]
                numeric=&["#"]
                class="data"
                label="History"
                empty=items.is_empty().then_some("No audit record names this merchant.")
            >
                {items
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
            <p><A href=all>"In the audit viewer →"</A></p>
        </Panel>
    }
}
