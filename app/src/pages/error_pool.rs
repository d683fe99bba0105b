//! The error pool: what the system could not settle by itself, filtered by status and kind,
//! each item with its evidence; operators resolve an item with a note. The resolve control
//! is hidden from other roles, and the server refuses them anyway.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::{A, Form};
use leptos_router::hooks::use_query_map;

use crate::api;
use crate::components::bulk_retry::{BulkRetry, RetryButton};
use crate::components::layout::signed_in_has;
use crate::components::widgets::{ErrorNote, Loading, StatusPill, Time};
use crate::dto::ErrorItem;
use crate::format;

/// The error-pool page. `?status=` defaults to `open`; `all` shows both.
#[component]
pub fn ErrorPoolPage() -> impl IntoView {
    let params = use_query_map();
    let filter = Memo::new(move |_| {
        let m = params.read();
        let status = m.get("status").unwrap_or_else(|| "open".into());
        let kind = m.get("kind").unwrap_or_default();
        (status, kind)
    });
    let version = RwSignal::new(0u32);
    let flash = RwSignal::new(None::<String>);
    // A resolved item leaves the list with the form that had the focus: the outcome takes it.
    let flash_ref = NodeRef::<leptos::html::P>::new();
    Effect::new(move |_| {
        if flash.get().is_some()
            && let Some(el) = flash_ref.get_untracked()
        {
            // After the frame that writes the text: an empty flash is not displayed, and
            // what is not displayed cannot take the focus.
            request_animation_frame(move || {
                let _ = el.focus();
            });
        }
    });
    let items = Resource::new(
        move || (filter.get(), version.get()),
        |((status, kind), _)| {
            let status = (status != "all").then_some(status);
            api::error_pool(status, Some(kind))
        },
    );
    let can_resolve = signed_in_has("operator");

    view! {
        <div class="page-head">
            <h1>"Error pool"</h1>
        </div>
        {move || {
            let (status, kind) = filter.get();
            view! {
                <Form method="GET" action="/error-pool" attr:class="filters" attr:role="search">
                    <label>
                        "Status"
                        <select name="status">
                            {["open", "resolved", "all"]
                                .into_iter()
                                .map(|s| view! { <option value=s selected=status == s>{s}</option> })
                                .collect_view()}
                        </select>
                    </label>
                    <label>
                        "Kind"
                        <input type="search" name="kind" value=kind placeholder="suspense, job_dead, …"/>
                    </label>
                    <div class="filter-actions">
                        <button type="submit">"Filter"</button>
                        <A href="/error-pool" attr:class="button-link secondary">"Clear"</A>
                    </div>
                </Form>
            }
        }}
        <p class="flash" role="status" data-testid="flash" tabindex="-1" node_ref=flash_ref>
            {move || flash.get()}
        </p>
        <BulkRetry source="error_pool" filter=Signal::derive(move || filter.get().1)/>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                match items.await {
                    Ok(list) if list.is_empty() => {
                        view! { <p class="empty" data-testid="pool-empty">"No items match."</p> }.into_any()
                    }
                    Ok(list) => {
                        view! {
                            <div class="table-wrap">
                                <table class="data" data-testid="pool-table">
                                    <thead>
                                        <tr>
                                            <th scope="col" class="num">"#"</th>
                                            <th scope="col">"Kind"</th>
                                            <th scope="col">"Summary"</th>
                                            <th scope="col">"Payment"</th>
                                            <th scope="col" class="num">"Seen"</th>
                                            <th scope="col">"First seen"</th>
                                            <th scope="col">"Last seen"</th>
                                            <th scope="col">"Status"</th>
                                            <th scope="col">"Action"</th>
                                        </tr>
                                    </thead>
                                    <tbody>
                                        {list
                                            .into_iter()
                                            .map(|item| view! { <PoolRow item can_resolve version flash/> })
                                            .collect_view()}
                                    </tbody>
                                </table>
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

/// One item: its row, its evidence, and (for operators, while open) the resolve form.
#[component]
fn PoolRow(
    item: ErrorItem,
    can_resolve: Signal<bool>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
) -> impl IntoView {
    let id = item.id;
    let open = item.status == "open";
    let editing = RwSignal::new(false);
    let note = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    // Keyboard focus follows the resolve form: into its note when it opens, back to
    // "Resolve…" when it is cancelled.
    let trigger = NodeRef::<leptos::html::Button>::new();
    let note_ref = NodeRef::<leptos::html::Textarea>::new();
    Effect::new(move |_| {
        if editing.get()
            && let Some(el) = note_ref.get()
        {
            let _ = el.focus();
        }
    });
    let cancel = move |_| {
        editing.set(false);
        failure.set(None);
        if let Some(b) = trigger.get_untracked() {
            let _ = b.focus();
        }
    };
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let text = note.get_untracked();
        if text.trim().is_empty() {
            failure.set(Some("Write what was done or decided.".into()));
            return;
        }
        busy.set(true);
        failure.set(None);
        spawn_local(async move {
            match api::resolve_error(id, text).await {
                Ok(_) => {
                    flash.set(Some(format!("Item #{id} resolved.")));
                    version.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => {
                    failure.set(Some(api::error_message(&e)));
                    busy.set(false);
                }
            }
        });
    };
    let evidence = format::pretty_json(&item.evidence);
    let resolution = item.resolution_note.clone().map(|n| {
        format!(
            "Resolved by {} at {}: {n}",
            item.resolved_by.clone().unwrap_or_default(),
            item.resolved_at.map(format::utc).unwrap_or_default()
        )
    });
    view! {
        <tr data-testid=format!("pool-item-{id}")>
            <td class="num">{id}</td>
            <td class="mono">{item.kind.clone()}</td>
            <td>
                {item.summary.clone()}
                <details>
                    <summary>"Evidence"</summary>
                    <pre class="evidence">{evidence}</pre>
                </details>
                {resolution.map(|r| view! { <div class="muted small">{r}</div> })}
            </td>
            <td class="mono">
                {item
                    .payment_id
                    .clone()
                    .map(|p| view! { <A href=format!("/payments/{p}")>{p.clone()}</A> })}
            </td>
            <td class="num">{item.occurrences}</td>
            <td><Time ms=item.first_seen/></td>
            <td><Time ms=item.last_seen/></td>
            <td><StatusPill status=item.status.clone()/></td>
            <td class="nowrap">
                {item
                    .payment_id
                    .clone()
                    .filter(|_| open)
                    .map(|p| {
                        view! {
                            <RetryButton payment_id=p reason=format!("retry from error-pool item #{id}") flash/>
                        }
                    })}
                <Show when=move || open && can_resolve.get()>
                    <button
                        type="button"
                        class="small"
                        data-testid=format!("resolve-{id}")
                        node_ref=trigger
                        aria-expanded=move || editing.get().to_string()
                        aria-controls=move || editing.get().then(|| format!("resolve-form-{id}"))
                        on:click=move |_| editing.set(true)
                    >
                        "Resolve…"
                    </button>
                </Show>
            </td>
        </tr>
        <Show when=move || editing.get()>
            <tr class="resolve-row">
                <td colspan="9">
                    <form
                        class="inline-form"
                        id=format!("resolve-form-{id}")
                        aria-label=format!("Resolve item #{id}")
                        on:submit=on_submit
                    >
                        <label class="grow">
                            {format!("Resolution note for #{id}")}
                            <textarea
                                name="note"
                                rows="2"
                                maxlength="2000"
                                required
                                data-testid="resolve-note"
                                node_ref=note_ref
                                bind:value=note
                            ></textarea>
                        </label>
                        <button type="submit" data-testid="resolve-submit" disabled=move || busy.get()>
                            "Resolve"
                        </button>
                        <button type="button" class="secondary" on:click=cancel>
                            "Cancel"
                        </button>
                        <span class="form-message" role="alert">{move || failure.get()}</span>
                    </form>
                </td>
            </tr>
        </Show>
    }
}
