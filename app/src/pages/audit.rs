//! The audit page (`/audit`, auditors): re-compute the hash chain and show the first broken
//! record, and export the log as CSV or NDJSON, filtered by time, actor and action. Exports
//! are plain links to `GET /ops/v1/audit/export` (same origin, the session cookie goes
//! along), so the browser streams the file to disk; the server audits every export.

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::components::layout::signed_in_has;
use crate::dto::AuditVerify;
use crate::{api, api_actions, format};

/// The audit page.
#[component]
pub fn AuditPage() -> impl IntoView {
    let auditor = signed_in_has("auditor");
    let result = RwSignal::new(None::<AuditVerify>);
    let failure = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let verify = move |_| {
        busy.set(true);
        failure.set(None);
        result.set(None);
        spawn_local(async move {
            match api_actions::verify_audit().await {
                Ok(v) => result.set(Some(v)),
                Err(e) => failure.set(Some(api::error_message(&e))),
            }
            busy.set(false);
        });
    };
    let from = RwSignal::new(String::new());
    let to = RwSignal::new(String::new());
    let actor = RwSignal::new(String::new());
    let action = RwSignal::new(String::new());
    let link = move |fmt: &'static str| {
        let from = format::as_rfc3339(Some(from.get()));
        let to = format::as_rfc3339(Some(to.get()));
        let (actor, action) = (actor.get(), action.get());
        format!(
            "/ops/v1/audit/export{}",
            format::query_string(&[
                ("format", Some(fmt)),
                ("from", from.as_deref()),
                ("to", to.as_deref()),
                ("actor", Some(actor.as_str())),
                ("action", Some(action.as_str())),
            ])
        )
    };
    view! {
        <div class="page-head">
            <h1>"Audit log"</h1>
        </div>
        <Show when=move || !auditor.get()>
            <p class="muted">"Only auditors may verify or export the audit log; the server refuses others."</p>
        </Show>
        <section class="panel" aria-labelledby="verify-h">
            <h2 id="verify-h">"Verify the chain"</h2>
            <p class="muted small">
                "Re-computes every record's hash from the first one and reports the first record that does not match."
            </p>
            <button type="button" data-testid="verify" disabled=move || busy.get() on:click=verify>
                "Verify chain"
            </button>
            <div data-testid="verify-result" role="status">
                {move || {
                    result
                        .get()
                        .map(|v| match v.first_broken {
                            None => {
                                view! {
                                    <p class="verify-ok">
                                        <span class="pill st-ok">"ok"</span>
                                        {format!(
                                            " {} records verified; head #{} {}",
                                            v.records,
                                            v.head_seq,
                                            v.head_hash,
                                        )}
                                    </p>
                                }
                                    .into_any()
                            }
                            Some((seq, why)) => {
                                view! {
                                    <p class="verify-broken">
                                        <span class="pill st-bad">"broken"</span>
                                        {format!(" first broken record: #{seq}: {why}")}
                                    </p>
                                }
                                    .into_any()
                            }
                        })
                }}
            </div>
            <p class="form-message" role="alert">{move || failure.get()}</p>
        </section>
        <section class="panel" aria-labelledby="export-h">
            <h2 id="export-h">"Export"</h2>
            <div class="filters inline-form">
                <label>
                    "From (UTC)"
                    <input type="datetime-local" name="from" bind:value=from/>
                </label>
                <label>
                    "To (UTC)"
                    <input type="datetime-local" name="to" bind:value=to/>
                </label>
                <label>
                    "Actor"
                    <input type="text" name="actor" bind:value=actor/>
                </label>
                <label>
                    "Action"
                    <input type="text" name="action" placeholder="e.g. action_approved" bind:value=action/>
                </label>
            </div>
            <p class="page-tools">
                <a class="button-link" rel="external" download="" data-testid="export-csv" href=move || link("csv")>
                    "Download CSV"
                </a>
                <a
                    class="button-link secondary"
                    rel="external"
                    download=""
                    data-testid="export-ndjson"
                    href=move || link("ndjson")
                >
                    "Download NDJSON"
                </a>
            </p>
            <p class="muted small">
                "The response names the chain head (Converge-Audit-Head) so a later verify can prove the export was complete. Every export is itself audited."
            </p>
        </section>
    }
}
