//! One stored Idempotency-Key (`/keys/:merchant_id/:key`, the key percent-encoded as one path
//! segment; keys are per merchant): its merchant, route, scope, fingerprint, state, lease,
//! times, the stored response exactly as a retry receives it, the payment it made, and what
//! later requests with it got (issue 17).

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

use crate::api_lookup::{KeyDetail, KeyOutcome, StoredResponse, load_key, percent_decode};
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, StatusPill, Time};
use crate::format;

/// (merchant id, key) of a `/keys/{merchant_id}/{key}` path, the key decoded once (the raw
/// path is read: a key may hold `/`, `?`, `#` or `%`, which its link encodes).
pub fn key_of_path(path: &str) -> Option<(i64, String)> {
    let rest = path.strip_prefix("/keys/")?;
    let (merchant, key) = rest.split_once('/')?;
    let merchant = merchant.parse().ok()?;
    (!key.is_empty()).then(|| (merchant, percent_decode(key, false)))
}

/// The key page.
#[component]
pub fn KeyPage() -> impl IntoView {
    let location = use_location();
    let which = Memo::new(move |_| key_of_path(&location.pathname.get()));
    let detail = Resource::new(
        move || which.get(),
        |which| async move {
            match which {
                Some((m, k)) => load_key(m, k).await.map(Some),
                None => Ok(None),
            }
        },
    );
    view! {
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match detail.await {
                    Ok(Some(d)) => view! { <KeyStory d/> }.into_any(),
                    Ok(None) => {
                        view! {
                            <h1>"Idempotency-Key"</h1>
                            <p class="error-note" role="alert">"This address names no key: /keys/<merchant id>/<key>."</p>
                        }
                            .into_any()
                    }
                    Err(e) => {
                        view! {
                            <h1>"Idempotency-Key"</h1>
                            <ErrorNote error=e/>
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}

#[component]
fn KeyStory(d: KeyDetail) -> impl IntoView {
    let payment = d.payment_id.clone();
    view! {
        {payment
            .clone()
            .map(|p| {
                view! {
                    <p class="crumbs">
                        <A href=format!("/payments/{p}")>"← Payment"</A>
                    </p>
                }
            })}
        <div class="page-head">
            <h1>
                "Idempotency-Key "
                <span class="mono" data-testid="key-id">{d.idem_key.clone()}</span>
            </h1>
            <div class="page-tools">
                <span data-testid="key-state">
                    {if d.lease_lapsed {
                        view! { <StatusPill status=format::Pill { name: "lapsed".into(), tone: format::Tone::Warn }/> }.into_any()
                    } else {
                        view! { <StatusPill status=d.state/> }.into_any()
                    }}
                </span>
            </div>
        </div>
        <section class="panel facts" aria-label="Key">
            <dl>
                <dt>"Merchant"</dt>
                <dd data-testid="key-merchant">{format!("{} (id {})", d.merchant, d.merchant_id)}</dd>
                <dt>"Route"</dt>
                <dd class="mono">{d.route.clone()}</dd>
                <dt>"Scope"</dt>
                <dd class="mono">{d.scope.clone()}</dd>
                <dt>"Fingerprint"</dt>
                <dd class="mono wrap" data-testid="key-fingerprint">{d.fingerprint.clone()}</dd>
                <dt>"State"</dt>
                <dd>
                    {if d.state == converge_wire::lifecycle::KeyState::Done {
                        "done: a retry with the same body gets the stored response"
                    } else if d.lease_lapsed {
                        "lapsed: the request that held it stopped without finishing; the next retry with the same body takes it over and resumes"
                    } else {
                        "running: its request has not finished; a retry gets 409 until the lease lapses"
                    }}
                </dd>
                <dt>"Lease"</dt>
                <dd>
                    {match d.lease_expires_at {
                        Some(ms) if d.lease_lapsed => view! { "lapsed at " <Time ms/> }.into_any(),
                        Some(ms) => view! { "held until " <Time ms/> }.into_any(),
                        None => view! { "none" }.into_any(),
                    }}
                </dd>
                <dt>"Created"</dt>
                <dd><Time ms=d.created_at/></dd>
                <dt>"Expires"</dt>
                <dd><Time ms=d.expires_at/>" (then purged; the key may be used again)"</dd>
                <dt>"Made"</dt>
                <dd data-testid="key-payment">
                    {match (d.payment_id.clone(), d.resource_id.clone()) {
                        (Some(p), r) => {
                            let via_refund = r.filter(|r| *r != p).map(|r| format!(" (refund {r})"));
                            view! {
                                "payment "
                                <A href=format!("/payments/{p}") attr:class="mono">{p.clone()}</A>
                                {via_refund}
                            }
                                .into_any()
                        }
                        (None, Some(r)) => view! { <span class="mono">{r}</span> }.into_any(),
                        (None, None) => view! { "nothing yet" }.into_any(),
                    }}
                </dd>
            </dl>
        </section>
        <Response response=d.response.clone()/>
        <Outcomes outcomes=d.outcomes.clone()/>
    }
}

#[component]
fn Response(response: Option<StoredResponse>) -> impl IntoView {
    view! {
        <Panel id="response" title="Stored response" class="key-response">
            {match response {
                None => {
                    view! {
                        <p class="empty" data-testid="key-no-response">
                            "None yet: the first request is still running (or failed with a 5xx, and a retry resumes it)."
                        </p>
                    }
                        .into_any()
                }
                Some(r) => {
                    let head = std::iter::once(format!("HTTP {}", r.status))
                        .chain(r.headers.iter().map(|h| format!("{}: {}", h.name, h.value)))
                        .collect::<Vec<_>>()
                        .join("\n");
                    let body = match (r.body, r.body_base64) {
                        (Some(text), _) => text,
                        (None, Some(b64)) => format!("(not UTF-8; base64) {b64}"),
                        (None, None) => String::new(),
                    };
                    view! {
                        <p class="muted small">
                            {format!(
                                "What every retry with the same body receives, byte for byte ({} bytes of body); the last header is added to each replay.",
                                r.body_bytes,
                            )}
                        </p>
                        <h3>"Status and headers"</h3>
                        <pre class="evidence" data-testid="key-response-head">{head}</pre>
                        <h3>"Body"</h3>
                        <pre class="evidence" data-testid="key-response-body">{body}</pre>
                    }
                        .into_any()
                }
            }}
        </Panel>
    }
}

/// What an outcome meant for the request that got it.
fn outcome_meaning(outcome: &str) -> &'static str {
    match outcome {
        "replay" => "Replayed: the stored response was sent again",
        "in_use" => "In use: 409, the first request was still running",
        "reused" => "Reused with a different body or route: 422, nothing done",
        _ => "Other",
    }
}

#[component]
fn Outcomes(outcomes: Vec<KeyOutcome>) -> impl IntoView {
    view! {
        <Panel id="outcomes" title="Later requests with this key">
            <DataTable
                columns=&["Outcome", "Requests", "First", "Latest"]
                numeric=&["Requests"]
                class="data"
                testid="key-outcomes"
                empty=outcomes.is_empty().then_some("None: no retry has used this key.")
                empty_testid="key-no-outcomes"
            >
                {outcomes
                    .into_iter()
                    .map(|o| {
                        view! {
                            <tr data-testid=format!("key-outcome-{}", o.outcome)>
                                <td>{outcome_meaning(&o.outcome)}</td>
                                <td class="num">{o.count}</td>
                                <td><Time ms=o.first_at/></td>
                                <td><Time ms=o.last_at/></td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_path_names_its_merchant_and_the_decoded_key() {
        assert_eq!(
            key_of_path("/keys/3/Pay%2FKey%3F1%23x%25"),
            Some((3, "Pay/Key?1#x%".to_string()))
        );
        assert_eq!(key_of_path("/keys/x/k"), None);
        assert_eq!(key_of_path("/keys/3/"), None);
        assert_eq!(key_of_path("/payments/3/k"), None);
    }
}
