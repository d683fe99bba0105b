//! The error pool as a work queue (issue 17): what the system could not settle by itself,
//! filtered by status and by kind (a list of the kinds there are, with their counts),
//! grouped by kind and paged (`?page=`, from 0), each item's evidence as labelled fields with
//! the raw JSON behind a toggle. Operators tick rows (or take everything the filter selects)
//! and resolve them with one note or retry them, both previewed first and re-checked by the
//! server; one item is resolved on its own with its note, or acted on with the one action its
//! kind calls for (issue 41: redeliver, replay, retry or query, as the server offers it,
//! disabled with the reason where it would do nothing), and the page says what the server
//! counted it did. The controls are hidden from other
//! roles, and the server refuses them anyway.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::{A, Form};
use leptos_router::hooks::use_query_map;

use crate::api;
use crate::api_queues;
use crate::components::bulk_retry::{BulkResolve, BulkRetry};
use crate::components::layout::signed_in_has;
use crate::components::panel::DataTable;
use crate::components::widgets::{
    ErrorNote, Loading, StatusPill, Time, focus_flash_when_set, without_nameless_field,
};
use crate::dto::{ErrorItem, ErrorItemStatus, ItemActionOffer, KindCount, PoolPage, Role};
use crate::format;

/// What the URL asks for: `?status=` (default `open`; `all` shows both), `?kind=`,
/// `?item=` (one item) and `?page=` (from 0).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PoolFilter {
    status: String,
    kind: String,
    item: Option<i64>,
    page: i64,
}

impl PoolFilter {
    /// The filter the URL's parameters say: open items of every kind, the first page, unless
    /// they say otherwise.
    fn of(m: &leptos_router::params::ParamsMap) -> Self {
        PoolFilter {
            status: m
                .get("status")
                .unwrap_or_else(|| ErrorItemStatus::Open.as_str().into()),
            kind: m.get("kind").unwrap_or_default(),
            item: m.get("item").and_then(|v| v.trim().parse().ok()),
            page: m
                .get("page")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
        }
    }

    fn href(&self, page: i64) -> String {
        let page = page.to_string();
        let item = self.item.map(|i| i.to_string());
        format!(
            "/error-pool{}",
            format::query_string(&[
                ("status", Some(self.status.as_str())),
                ("kind", Some(self.kind.as_str())),
                ("item", item.as_deref()),
                ("page", (page != "0").then_some(page.as_str())),
            ])
        )
    }
}

/// Columns of the item table.
const HEADINGS: [&str; 9] = [
    "Select",
    "#",
    "Summary and evidence",
    "Payment",
    "Seen",
    "First seen",
    "Last seen",
    "Status",
    "Action",
];

/// The error-pool page.
#[component]
pub fn ErrorPoolPage() -> impl IntoView {
    let params = use_query_map();
    let filter = Memo::new(move |_| PoolFilter::of(&params.read()));
    let version = RwSignal::new(0u32);
    let flash = RwSignal::new(None::<String>);
    // Whether the flash says something was refused or failed: then it is not green (issue
    // 41: a refused action's message was shown in the success tone).
    let refused = RwSignal::new(false);
    // A resolved item leaves the list with the form that had the focus: the outcome takes it.
    let flash_ref = NodeRef::<leptos::html::P>::new();
    focus_flash_when_set(flash, flash_ref);
    let data = Resource::new(
        move || (filter.get(), version.get()),
        |(f, _)| {
            let status = (f.status != "all").then_some(f.status);
            api_queues::error_pool_page(status, Some(f.kind), f.item, Some(f.page))
        },
    );
    let can_resolve = signed_in_has(Role::Operator);
    let auditor = signed_in_has(Role::Auditor);
    // The ticked rows; `all` takes every open item the filter selects instead.
    let selected = RwSignal::new(Vec::<i64>::new());
    let all = RwSignal::new(false);
    Effect::new(move |_| {
        filter.track();
        version.track();
        selected.set(Vec::new());
        all.set(false);
    });
    let ids = Signal::derive(move || {
        let s = selected.get();
        (!all.get() && !s.is_empty()).then_some(s)
    });
    let kind = Signal::derive(move || filter.get().kind);
    let acting = move || can_resolve.get() && filter.get().status == ErrorItemStatus::Open.as_str();
    let rows = PoolRows {
        acting: Signal::derive(acting),
        can_resolve,
        auditor,
        version,
        flash,
        refused,
        selected,
        all,
    };

    view! {
        <div class="page-head">
            <h1>"Error pool"</h1>
        </div>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                let f = filter.get();
                data.await.ok().map(|p| view! { <KindFilter f kinds=p.kinds/> })
            })}
        </Transition>
        // Outside the list's Transition: a reload of the list after an action must not take
        // the outcome, its focus or an open preview with it.
        <p
            class=move || if refused.get() { "flash tone-bad" } else { "flash" }
            role="status"
            data-testid="flash"
            tabindex="-1"
            node_ref=flash_ref
        >
            {move || flash.get()}
        </p>
        <Show when=acting>
            <div class="bulk-pair">
                <BulkResolve kind ids done=version/>
                <BulkRetry source="error_pool" filter=kind ids/>
            </div>
        </Show>
        <Transition fallback=Loading>
            {move || Suspend::new(async move {
                let f = filter.get();
                match data.await {
                    Ok(p) => view! { <PoolList p f rows/> }.into_any(),
                    Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// What every row of the list shares: whether the person acts on the items shown (an
/// operator, on open items), may resolve, may read the audit log; the list's version and
/// flash; and the selection.
#[derive(Clone, Copy)]
struct PoolRows {
    acting: Signal<bool>,
    can_resolve: Signal<bool>,
    auditor: Signal<bool>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    /// The flash tells of a refusal or failure (shown in the error tone).
    refused: RwSignal<bool>,
    /// The ticked rows.
    selected: RwSignal<Vec<i64>>,
    /// Every open item the filter selects, instead of the ticked rows.
    all: RwSignal<bool>,
}

/// A page of items, grouped by kind, with the selection bar (while acting) and the pager.
#[component]
fn PoolList(p: PoolPage, f: PoolFilter, rows: PoolRows) -> impl IntoView {
    let pages = ((p.total + p.page_size - 1) / p.page_size).max(1);
    let counts = p.kinds.clone();
    let offers = p.offers.clone();
    let groups = group_by_kind(p.items);
    let empty = groups.is_empty();
    let (prev, next) = (f.href(p.page - 1), f.href(p.page + 1));
    let (has_prev, has_next) = (p.page > 0, p.page + 1 < pages);
    let total = p.total;
    view! {
        <Show when=move || rows.acting.get()>
            <SelectionBar total all=rows.all selected=rows.selected/>
        </Show>
        <DataTable
            columns=&HEADINGS
            numeric=&["#", "Seen"]
            hidden=&["Select"]
            grouped=true
            class="data"
            label="Items"
            framed=true
            testid="pool-table"
            empty=empty.then_some("No items match.")
            empty_testid="pool-empty"
        >
            {groups
                .into_iter()
                .map(|(kind, items)| {
                    let count = counts
                        .iter()
                        .find(|c| c.kind == kind)
                        .map_or(items.len() as i64, |c| c.count);
                    let items: Vec<(ErrorItem, Option<ItemActionOffer>)> = items
                        .into_iter()
                        .map(|item| {
                            let offer = offers.iter().find(|o| o.item_id == item.id).cloned();
                            (item, offer)
                        })
                        .collect();
                    view! { <KindGroup kind count items rows/> }
                })
                .collect_view()}
        </DataTable>
        <nav class="pager" aria-label="Pages">
            {has_prev.then(|| view! { <A href=prev attr:data-testid="page-prev">"← Previous"</A> })}
            <span data-testid="page-of">{format!("Page {} of {pages}", p.page + 1)}</span>
            {has_next.then(|| view! { <A href=next attr:data-testid="page-next">"Next →"</A> })}
        </nav>
    }
}

/// "Select all N items this filter selects" and what is selected now.
#[component]
fn SelectionBar(total: i64, all: RwSignal<bool>, selected: RwSignal<Vec<i64>>) -> impl IntoView {
    view! {
        <div class="selection-bar" data-testid="selection-bar">
            <label class="check">
                <input
                    type="checkbox"
                    data-testid="select-all"
                    prop:checked=move || all.get()
                    on:change=move |ev| {
                        all.set(event_target_checked(&ev));
                        selected.set(Vec::new());
                    }
                />
                {format!(" Select all {total} item{} this filter selects", if total == 1 { "" } else { "s" })}
            </label>
            <span class="muted small" data-testid="selection-summary">
                {move || {
                    let n = selected.get().len();
                    if all.get() {
                        format!("Selected: every open item this filter selects ({total}, at most 100 at a time).")
                    } else if n > 0 {
                        format!("Selected: {n} item{}.", if n == 1 { "" } else { "s" })
                    } else {
                        "Nothing ticked: the bulk actions take every open item this filter selects.".to_string()
                    }
                }}
            </span>
        </div>
    }
}

/// One kind's items under a heading with the kind's count, each with the action offered for it.
#[component]
fn KindGroup(
    kind: String,
    /// How many items of the kind the filter selects (all pages).
    count: i64,
    items: Vec<(ErrorItem, Option<ItemActionOffer>)>,
    rows: PoolRows,
) -> impl IntoView {
    view! {
        <tbody data-testid=format!("group-{kind}")>
            <tr class="group-head">
                <th scope="rowgroup" colspan=HEADINGS.len().to_string()>
                    <span class="mono">{kind.clone()}</span>
                    {format!(" · {count} item{}", if count == 1 { "" } else { "s" })}
                </th>
            </tr>
            {items
                .into_iter()
                .map(|(item, offer)| view! { <PoolRow item offer rows/> })
                .collect_view()}
        </tbody>
    }
}

/// Items grouped by kind, in the order the server listed them (by kind).
fn group_by_kind(items: Vec<ErrorItem>) -> Vec<(String, Vec<ErrorItem>)> {
    let mut groups: Vec<(String, Vec<ErrorItem>)> = Vec::new();
    for item in items {
        match groups.last_mut() {
            Some((k, v)) if *k == item.kind => v.push(item),
            _ => groups.push((item.kind.clone(), vec![item])),
        }
    }
    groups
}

/// The status and kind filter; the kinds are those with items of the status shown, with
/// their counts.
#[component]
fn KindFilter(f: PoolFilter, kinds: Vec<KindCount>) -> impl IntoView {
    let total: i64 = kinds.iter().map(|k| k.count).sum();
    let listed = kinds.iter().any(|k| k.kind == f.kind);
    let status = f.status.clone();
    let kind = f.kind.clone();
    view! {
        <Form method="GET" action="/error-pool" on_form_data=without_nameless_field() attr:class="filters" attr:role="search">
            <label>
                "Status"
                <select name="status">
                    {ErrorItemStatus::ALL
                        .map(ErrorItemStatus::as_str)
                        .into_iter()
                        .chain(["all"])
                        .map(|s| view! { <option value=s selected=status == s>{s}</option> })
                        .collect_view()}
                </select>
            </label>
            <label>
                "Kind"
                <select name="kind" data-testid="kind-filter">
                    <option value="" selected=kind.is_empty()>{format!("All kinds ({total})")}</option>
                    {kinds
                        .into_iter()
                        .map(|k| {
                            let sel = k.kind == kind;
                            view! { <option value=k.kind.clone() selected=sel>{format!("{} ({})", k.kind, k.count)}</option> }
                        })
                        .collect_view()}
                    {(!listed && !kind.is_empty())
                        .then(|| view! { <option value=kind.clone() selected=true>{format!("{kind} (0)")}</option> })}
                </select>
            </label>
            <div class="filter-actions">
                <button type="submit">"Filter"</button>
                <A href="/error-pool" attr:class="button-link secondary">"Clear"</A>
            </div>
        </Form>
    }
}

/// One item: its row, its evidence, and (for operators, while open) the resolve form.
#[component]
fn PoolRow(
    item: ErrorItem,
    /// The action the server offers for the item now (None for a resolved item).
    offer: Option<ItemActionOffer>,
    rows: PoolRows,
) -> impl IntoView {
    let PoolRows {
        can_resolve,
        version,
        flash,
        refused,
        ..
    } = rows;
    let id = item.id;
    let open = item.status == ErrorItemStatus::Open;
    let draft = ResolveDraft {
        editing: RwSignal::new(false),
        note: RwSignal::new(String::new()),
        busy: RwSignal::new(false),
        failure: RwSignal::new(None),
    };
    let editing = draft.editing;
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
    view! {
        <tr data-testid=format!("pool-item-{id}")>
            <td>
                <Show when=move || open && can_resolve.get()>
                    <SelectBox id selected=rows.selected all=rows.all/>
                </Show>
            </td>
            <td class="num">{id}</td>
            <SummaryCell item=item.clone() auditor=rows.auditor/>
            <td class="mono">
                {item
                    .payment_id
                    .clone()
                    .map(|p| view! { <A href=format!("/payments/{p}")>{p.clone()}</A> })}
            </td>
            <td class="num">{item.occurrences}</td>
            <td><Time ms=item.first_seen/></td>
            <td><Time ms=item.last_seen/></td>
            <td><StatusPill status=item.status/></td>
            <td class="nowrap">
                {offer
                    .filter(|_| open)
                    .map(|offer| view! { <ItemActionButton offer can=can_resolve version flash refused/> })}
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
                <td colspan=HEADINGS.len().to_string()>
                    <ResolveForm id draft trigger note_ref version flash refused/>
                </td>
            </tr>
        </Show>
    }
}

/// An open item's tick box (disabled while every item the filter selects is).
#[component]
fn SelectBox(id: i64, selected: RwSignal<Vec<i64>>, all: RwSignal<bool>) -> impl IntoView {
    view! {
        <input
            type="checkbox"
            aria-label=format!("Select item #{id}")
            data-testid=format!("select-{id}")
            prop:checked=move || all.get() || selected.get().contains(&id)
            prop:disabled=move || all.get()
            on:change=move |ev| {
                let on = event_target_checked(&ev);
                selected.update(|s| {
                    s.retain(|x| *x != id);
                    if on {
                        s.push(id);
                    }
                });
            }
        />
    }
}

/// The item's summary with its evidence (as fields, and as JSON behind a toggle), its
/// resolution when resolved, and (for auditors) a link to its audit records.
#[component]
fn SummaryCell(item: ErrorItem, auditor: Signal<bool>) -> impl IntoView {
    let id = item.id;
    let fields = format::json_fields(&item.evidence);
    let audit_href = match &item.payment_id {
        Some(p) => format!("/audit?payment={}", format::query_escape(p)),
        None => format!(
            "/audit?target={}",
            format::query_escape(&format!("error:{id}"))
        ),
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
        <td>
            {item.summary.clone()}
            {(!fields.is_empty())
                .then(|| {
                    view! {
                        <dl class="fields small" data-testid=format!("evidence-{id}")>
                            {fields
                                .into_iter()
                                .map(|(k, v)| view! { <div><dt>{k}</dt><dd>{v}</dd></div> })
                                .collect_view()}
                        </dl>
                    }
                })}
            <details data-testid=format!("evidence-json-{id}")>
                <summary>"Evidence as JSON"</summary>
                <pre class="evidence">{evidence}</pre>
            </details>
            {resolution.map(|r| view! { <div class="muted small">{r}</div> })}
            <Show when=move || auditor.get()>
                <div class="small">
                    <A href=audit_href.clone() attr:data-testid=format!("audit-link-{id}")>"Audit records"</A>
                </div>
            </Show>
        </td>
    }
}

/// A row's resolve form state, kept by the row (a note survives closing the form): whether
/// it is open, the note, whether the resolve is in flight, and why it failed.
#[derive(Clone, Copy)]
struct ResolveDraft {
    editing: RwSignal<bool>,
    note: RwSignal<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
}

/// An item's resolve form: the note and "Resolve"; "Cancel" closes it and gives the focus
/// back to "Resolve…" (`trigger`).
#[component]
fn ResolveForm(
    id: i64,
    draft: ResolveDraft,
    trigger: NodeRef<leptos::html::Button>,
    note_ref: NodeRef<leptos::html::Textarea>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    refused: RwSignal<bool>,
) -> impl IntoView {
    let ResolveDraft {
        editing,
        note,
        busy,
        failure,
    } = draft;
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
                    refused.set(false);
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
    view! {
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
    }
}

/// An open item's own action, as the server offers it (issue 41): its kind's action
/// (Redeliver, Replay, Retry, Query channel) for operators, disabled with the server's reason
/// beside it where it would do nothing, or the reason no action fits. On click the server
/// runs it and counts what it did; `flash` shows that sentence and the list reloads.
#[component]
fn ItemActionButton(
    offer: ItemActionOffer,
    can: Signal<bool>,
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    refused: RwSignal<bool>,
) -> impl IntoView {
    let busy = RwSignal::new(false);
    let out = ActionOut {
        version,
        flash,
        refused,
    };
    move || {
        can.get()
            .then(|| item_action_view(offer.clone(), busy, out))
    }
}

/// Where an item action's outcome goes: the list to reload, the flash and its tone.
#[derive(Clone, Copy)]
struct ActionOut {
    version: RwSignal<u32>,
    flash: RwSignal<Option<String>>,
    refused: RwSignal<bool>,
}

fn item_action_view(offer: ItemActionOffer, busy: RwSignal<bool>, out: ActionOut) -> impl IntoView {
    let ActionOut {
        version,
        flash,
        refused,
    } = out;
    let id = offer.item_id;
    let why_id = format!("item-action-why-{id}");
    let why = (!offer.why.is_empty()).then(|| {
        let text = match offer.action {
            Some(a) => format!("{} unavailable: {}.", a.label(), offer.why),
            None => format!("No action: {}.", offer.why),
        };
        view! { <div class="muted small action-why" id=why_id.clone() data-testid=why_id.clone()>{text}</div> }
    });
    let button = offer.action.map(|action| {
        let available = offer.available;
        let on_click = move |_| {
            busy.set(true);
            spawn_local(async move {
                let reason = format!("{} from error-pool item #{id}", action.label());
                let (msg, bad) = match api_queues::act_on_error_item(id, reason).await {
                    Ok(out) => (out.sentence(), false),
                    Err(e) => (
                        format!(
                            "{} for item #{id} refused: {}",
                            action.label(),
                            api::error_message(&e)
                        ),
                        true,
                    ),
                };
                refused.set(bad);
                flash.set(Some(msg));
                busy.set(false);
                version.update(|v| *v = v.wrapping_add(1));
            });
        };
        let described = (!available).then(|| why_id.clone());
        view! {
            <button
                type="button"
                class="small"
                data-testid=format!("item-action-{id}")
                data-action=action.as_str()
                aria-describedby=described
                disabled=move || busy.get() || !available
                on:click=on_click
            >
                {action.label()}
            </button>
        }
    });
    view! {
        {button}
        {why}
    }
}
