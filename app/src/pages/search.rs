//! Search results (`/search?q=`): everything whose id starts with the query, any case, each
//! with its kind and a link to the page that shows it (issue 17); merchant order ids holding
//! it further in and payments of that amount too (issue 41). The top bar's box comes
//! here when several things match; a bookmark or a plain form post (before hydration) too.

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

use crate::api_lookup::{IdKind, SearchHit, find_ids, query_value};
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading};

/// What a kind of id is called on the page.
pub fn kind_name(kind: IdKind) -> &'static str {
    match kind {
        IdKind::Payment => "Payment",
        IdKind::MerchantOrder => "Merchant order id",
        IdKind::IdempotencyKey => "Idempotency-Key",
        IdKind::ChannelKey => "Channel key",
        IdKind::Refund => "Refund",
        IdKind::ErrorItem => "Error-pool item",
        IdKind::Action => "Action",
        IdKind::Amount => "Payment of this amount",
    }
}

/// The results page.
#[component]
pub fn SearchPage() -> impl IntoView {
    let location = use_location();
    // The raw query string, decoded once here: the router's own map decodes twice.
    let q = Memo::new(move |_| query_value(&location.search.get(), "q").unwrap_or_default());
    let found = Resource::new(
        move || q.get(),
        |q| async move {
            if q.trim().is_empty() {
                Ok(None)
            } else {
                find_ids(q).await.map(Some)
            }
        },
    );
    view! {
        <div class="page-head">
            <h1>"Search"</h1>
        </div>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match found.await {
                    Ok(None) => {
                        view! {
                            <p class="empty" data-testid="search-empty">
                                "Type an id, or the start of one, in the search box above (press / to get there)."
                            </p>
                        }
                            .into_any()
                    }
                    Ok(Some(r)) if r.hits.is_empty() => {
                        view! {
                            <p class="empty" data-testid="search-nothing">
                                {format!("Nothing matches “{}”.", r.query)}
                            </p>
                        }
                            .into_any()
                    }
                    Ok(Some(r)) => {
                        let n = r.hits.len();
                        view! {
                            <Panel
                                id="results"
                                title=format!("{n} {} for “{}”", if n == 1 { "match" } else { "matches" }, r.query)
                            >
                                {r
                                    .truncated
                                    .then(|| {
                                        view! {
                                            <p class="muted" data-testid="search-truncated">
                                                "Only the first 20 are shown: type more of the id."
                                            </p>
                                        }
                                    })}
                                <DataTable columns=&["Kind", "Id", "What"] class="data" testid="search-results">
                                    {r.hits.into_iter().map(|h| view! { <HitRow h/> }).collect_view()}
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

#[component]
fn HitRow(h: SearchHit) -> impl IntoView {
    view! {
        <tr data-testid="search-hit" data-kind=h.kind.as_str()>
            <td>{kind_name(h.kind)}</td>
            <td class="mono">
                <A href=h.link.clone()>{h.id.clone()}</A>
            </td>
            <td>{h.label.clone()}</td>
        </tr>
    }
}
