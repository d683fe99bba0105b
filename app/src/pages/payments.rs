//! Payment search: by id, merchant, merchant_order_id, status, failure reason (the dashboard's
//! failures link here with it), creation time (UTC) and time in state (issue 41), newest
//! first, 50 a page, paged both ways with the server's cursors (`after=` the older page,
//! `before=` the newer one, issue 41). The filters live in the URL (a GET
//! form), so a search can be bookmarked, shared and stepped back through. "Export CSV"
//! downloads every payment the filters select (`GET /ops/v1/payments/export`).

use leptos::prelude::*;
use leptos_router::components::{A, Form};
use leptos_router::hooks::use_query_map;

use crate::api;
use crate::components::panel::DataTable;
use crate::components::widgets::{
    ErrorNote, Loading, Money, StatusPill, Time, filter_zone, without_nameless_field, zone_label,
};
use crate::dto::{Merchant, PaymentSearch, PaymentStatus};
use crate::format;

/// `q`'s filters as URL parameters, in the order both URLs write them.
fn filter_params(q: &PaymentSearch) -> [(&'static str, Option<&str>); 9] {
    [
        ("id", q.id.as_deref()),
        ("merchant", q.merchant.as_deref()),
        ("order", q.order.as_deref()),
        ("status", q.status.as_deref()),
        ("reason", q.reason.as_deref()),
        ("from", q.from.as_deref()),
        ("to", q.to.as_deref()),
        ("in_state_for", q.in_state_for.as_deref()),
        // The dashboard's "Holds expiring within 24 h" link (issue 34); no form field.
        ("expires_before", q.expires_before.as_deref()),
    ]
}

/// A page's place in the list: below a row (`after`, the older page) or above one
/// (`before`, the newer page), by the server's cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cursor<'a> {
    After(&'a str),
    Before(&'a str),
}

impl<'a> Cursor<'a> {
    /// The cursor `q` carries (`before` when it carries both, as the server reads it).
    fn of(q: &'a PaymentSearch) -> Option<Self> {
        match (q.before.as_deref(), q.after.as_deref()) {
            (Some(b), _) => Some(Cursor::Before(b)),
            (None, Some(a)) => Some(Cursor::After(a)),
            (None, None) => None,
        }
    }
}

/// The page's URL for `q`, with `tz` (the zone its time filters were written in, `+08:00`)
/// when they were written in local time, at `cursor` (none: the newest page).
fn query_url(q: &PaymentSearch, tz: Option<&str>, cursor: Option<Cursor>) -> String {
    let timed = q.from.is_some() || q.to.is_some();
    let mut params = filter_params(q).to_vec();
    let (after, before) = match cursor {
        Some(Cursor::After(a)) => (Some(a), None),
        Some(Cursor::Before(b)) => (None, Some(b)),
        None => (None, None),
    };
    params.extend([
        ("tz", tz.filter(|_| timed)),
        ("after", after),
        ("before", before),
    ]);
    format!("/payments{}", format::query_string(&params))
}

/// `q` as the server reads it: its time filters as RFC 3339 in the zone they were written in.
fn zoned(mut q: PaymentSearch, tz: Option<&str>) -> PaymentSearch {
    q.from = format::as_rfc3339_in(q.from.take(), tz);
    q.to = format::as_rfc3339_in(q.to.take(), tz);
    q
}

/// The search the URL's parameters say (blank ones left out).
fn search_of(m: &leptos_router::params::ParamsMap) -> PaymentSearch {
    let get = |k: &str| m.get(k).filter(|v| !v.trim().is_empty());
    PaymentSearch {
        id: get("id"),
        merchant: get("merchant"),
        order: get("order"),
        status: get("status"),
        reason: get("reason"),
        from: get("from"),
        to: get("to"),
        expires_before: get("expires_before"),
        in_state_for: get("in_state_for"),
        after: get("after"),
        before: get("before"),
        limit: None,
    }
}

/// The CSV export's URL for `q` (its times already RFC 3339): every page of what the filters
/// select.
fn export_url(q: &PaymentSearch) -> String {
    format!(
        "/ops/v1/payments/export{}",
        format::query_string(&filter_params(q))
    )
}

/// The search page.
#[component]
pub fn PaymentsPage() -> impl IntoView {
    let params = use_query_map();
    let query = Memo::new(move |_| search_of(&params.read()));
    let tz = Memo::new(move |_| params.read().get("tz").filter(|t| format::is_offset(t)));
    // A GET form sends every field, blank or not (`?id=&merchant=&...`): such a URL is
    // replaced by the one with only the filters given, so what is bookmarked or shared says
    // exactly what was searched.
    let navigate = leptos_router::hooks::use_navigate();
    Effect::new(move |_| {
        let blanks = params.with(|m| m.into_iter().any(|(_, v)| v.trim().is_empty()));
        if blanks {
            let q = query.get_untracked();
            let clean = query_url(&q, tz.get_untracked().as_deref(), Cursor::of(&q));
            navigate(
                &clean,
                leptos_router::NavigateOptions {
                    replace: true,
                    ..Default::default()
                },
            );
        }
    });
    let results = Resource::new(
        move || zoned(query.get(), tz.get().as_deref()),
        api::search_payments,
    );
    let merchants = Resource::new(|| (), |_| api::merchants());

    // Exactly what the filters select, every page of it (the server streams it and audits the
    // export). A plain link: the browser streams the file to disk with the session cookie.
    let export_url = move || export_url(&zoned(query.get(), tz.get().as_deref()));
    view! {
        <div class="page-head">
            <h1>"Payments"</h1>
            <div class="page-tools">
                <a class="button-link secondary small" href=export_url download data-testid="export-csv">
                    "Export CSV"
                </a>
            </div>
        </div>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                let list = merchants.await.unwrap_or_default();
                // Tracked: "Clear" and Back change the URL, and the form must follow it.
                view! { <SearchForm q=query.get() merchants=list/> }
            })}
        </Transition>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                let list = merchants.await.unwrap_or_default();
                let q = query.get_untracked();
                match results.await {
                    Ok(page) => {
                        // "← Newest" wherever a newer page is, or the cursor led past the end.
                        let first = page.prev.is_some() || (q.after.is_some() && page.items.is_empty());
                        let tz = tz.get_untracked();
                        let next = page.next.clone().map(|n| query_url(&q, tz.as_deref(), Some(Cursor::After(&n))));
                        let prev = page.prev.clone().map(|p| query_url(&q, tz.as_deref(), Some(Cursor::Before(&p))));
                        let top = query_url(&q, tz.as_deref(), None);
                        let count = page.items.len();
                        view! {
                            <p class="muted" data-testid="result-count">
                                {match count {
                                    0 => "No payments match.".to_string(),
                                    1 => "1 payment".to_string(),
                                    n => format!("{n} payments{}", if next.is_some() { " on this page" } else { "" }),
                                }}
                            </p>
                            {(count > 0).then(|| view! { <PaymentTable items=page.items merchants=list/> })}
                            <nav class="pager" aria-label="Pages">
                                {first.then(|| view! { <A href=top>"← Newest"</A> })}
                                {prev.map(|p| view! { <A href=p attr:data-testid="prev-page">"← Newer"</A> })}
                                {next.map(|n| view! { <A href=n attr:data-testid="next-page">"Older →"</A> })}
                            </nav>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The filter form (GET /payments).
#[component]
fn SearchForm(q: PaymentSearch, merchants: Vec<Merchant>) -> impl IntoView {
    let zone = filter_zone();
    let status = q.status.clone().unwrap_or_default();
    let merchant = q.merchant.clone().unwrap_or_default();
    view! {
        <Form method="GET" action="/payments" on_form_data=without_nameless_field() attr:class="filters" attr:role="search">
            <label>
                "Payment id"
                <input type="search" name="id" placeholder="pay_…" value=q.id.unwrap_or_default() size="28"/>
            </label>
            <label>
                "Merchant"
                <select name="merchant">
                    <option value="" selected=merchant.is_empty()>"any"</option>
                    {merchants
                        .into_iter()
                        .map(|m| {
                            let selected = m.name == merchant;
                            let label = if m.frozen { format!("{} (frozen)", m.name) } else { m.name.clone() };
                            view! { <option value=m.name selected=selected>{label}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <label>
                "Merchant order id"
                <input type="search" name="order" value=q.order.unwrap_or_default()/>
            </label>
            <label>
                "Status"
                <select name="status">
                    <option value="" selected=status.is_empty()>"any"</option>
                    {PaymentStatus::ALL
                        .map(PaymentStatus::as_str)
                        .into_iter()
                        .map(|s| view! { <option value=s selected=status == s>{s}</option> })
                        .collect_view()}
                </select>
            </label>
            // Free text with the fixed reasons offered: a decline's reason is the connector's
            // (`decline:insufficient_funds`), so it cannot be a closed list.
            <label>
                "Failure reason"
                <input
                    type="search"
                    name="reason"
                    list="failure-reasons"
                    placeholder="timeout, 5xx, decline:…"
                    value=q.reason.unwrap_or_default()
                    data-testid="reason-filter"
                />
                <datalist id="failure-reasons">
                    {["timeout", "5xx", "dropped", "garbled", "fenced"]
                        .into_iter()
                        .map(|k| view! { <option value=k>{crate::dto::FailureReason::label_of(k)}</option> })
                        .collect_view()}
                </datalist>
            </label>
            <label>
                <span data-testid="from-label">{move || zone_label("Created from", zone.get().as_deref())}</span>
                <input type="datetime-local" name="from" value=q.from.unwrap_or_default()/>
            </label>
            <label>
                {move || zone_label("Created before", zone.get().as_deref())}
                <input type="datetime-local" name="to" value=q.to.unwrap_or_default()/>
            </label>
            // Time in state (issue 41): how long since the payment last changed, which is what
            // makes a payment stuck; the server reads it against its own clock.
            <label>
                "In its state for over (minutes)"
                <input
                    type="number"
                    name="in_state_for"
                    min="1"
                    max="525600"
                    step="1"
                    inputmode="numeric"
                    placeholder="any"
                    value=q.in_state_for.unwrap_or_default()
                    data-testid="in-state-filter"
                />
            </label>
            // The zone the times were written in goes with them (none: UTC).
            {move || zone.get().map(|z| view! { <input type="hidden" name="tz" value=z/> })}
            <div class="filter-actions">
                <button type="submit" data-testid="search">"Search"</button>
                <A href="/payments" attr:class="button-link secondary">"Clear"</A>
            </div>
        </Form>
    }
}

/// Results, newest first.
#[component]
fn PaymentTable(items: Vec<crate::dto::Payment>, merchants: Vec<Merchant>) -> impl IntoView {
    let name = move |id: i64| {
        merchants
            .iter()
            .find(|m| m.id == id)
            .map_or_else(|| format!("#{id}"), |m| m.name.clone())
    };
    view! {
        <DataTable
            columns=&["Created", "Payment", "Merchant", "Order id", "Amount", "Status", "Submits", "Last error"]
            numeric=&["Amount", "Submits"]
            class="data"
            label="Payments"
            framed=true
            testid="payments-table"
        >
            {items
                .into_iter()
                .map(|p| {
                    view! {
                        <tr>
                            <td><Time ms=p.created_at/></td>
                            <td class="mono">
                                <A href=format!("/payments/{}", p.id)>{p.id.clone()}</A>
                            </td>
                            <td>{name(p.merchant_id)}</td>
                            <td class="mono">{p.merchant_order_id}</td>
                            <td class="num"><Money amount=p.amount currency=p.currency/></td>
                            <td><StatusPill status=p.status/></td>
                            <td class="num">{p.submit_attempts}</td>
                            <td class="error-text">
                                {format::clip(p.last_error.as_deref().unwrap_or(""), 60)}
                            </td>
                        </tr>
                    }
                })
                .collect_view()}
        </DataTable>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_export_urls_carry_the_same_filters_and_only_the_page_its_zone_and_cursor() {
        let q = PaymentSearch {
            merchant: Some("acme".into()),
            status: Some("UNKNOWN".into()),
            from: Some("2026-12-04T09:00".into()),
            in_state_for: Some("30".into()),
            ..PaymentSearch::default()
        };
        let page = query_url(&q, Some("+08:00"), Some(Cursor::After("pay_9")));
        let export = export_url(&q);
        assert!(
            page.contains("&in_state_for=30&") && export.ends_with("&in_state_for=30"),
            "{page} {export}"
        );
        assert!(
            page.starts_with("/payments?merchant=acme&status=UNKNOWN&from="),
            "{page}"
        );
        assert!(
            page.contains("&tz=") && page.ends_with("&after=pay_9"),
            "{page}"
        );
        assert_eq!(
            export.strip_prefix("/ops/v1/payments/export"),
            page.strip_prefix("/payments")
                .and_then(|p| p.split("&tz=").next()),
            "the export selects what the page shows"
        );
        // No time filter: the zone is left out.
        let untimed = PaymentSearch { from: None, ..q };
        assert!(!query_url(&untimed, Some("+08:00"), None).contains("tz="));
    }

    #[test]
    fn a_page_links_older_with_after_and_newer_with_before_never_both() {
        let q = PaymentSearch {
            status: Some("SUCCESS".into()),
            after: Some("1_pay_a".into()),
            before: Some("2_pay_b".into()),
            ..PaymentSearch::default()
        };
        assert_eq!(Cursor::of(&q), Some(Cursor::Before("2_pay_b")));
        assert_eq!(
            query_url(&q, None, Some(Cursor::Before("2_pay_b"))),
            "/payments?status=SUCCESS&before=2_pay_b"
        );
        assert_eq!(
            query_url(&q, None, Some(Cursor::After("1_pay_a"))),
            "/payments?status=SUCCESS&after=1_pay_a"
        );
    }
}
