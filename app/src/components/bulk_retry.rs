//! Bulk retry of a filtered selection, in two steps (issue "Ops console II"): "Preview" asks
//! the server for the exact payments the selection holds now; "Retry N payments" sends those
//! payments with the versions the preview showed and a reason, and the server retries only
//! the ones still selected at that version, naming the rest. Operators only; the server checks
//! the role and rate-limits the confirm per user.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::A;

use crate::api;
use crate::api_actions;
use crate::components::layout::signed_in_has;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{Money, StatusPill, Time};
use crate::dto::{ActionKind, BulkItem, BulkOutcome, ItemAction, Role};
use crate::format;

/// The bulk-retry panel. `source` is `stuck` or `error_pool`; `filter` is the stuck state or
/// the error-pool kind (empty: all), read when the operator asks for a preview; `ids`, for
/// the error pool, narrows the selection to the items a person ticked (None: every open item
/// the filter selects).
#[component]
pub fn BulkRetry(
    source: &'static str,
    #[prop(into)] filter: Signal<String>,
    #[prop(optional, into)] ids: Option<Signal<Option<Vec<i64>>>>,
) -> impl IntoView {
    let selection = RetrySelection {
        source,
        filter,
        ids,
    };
    let can = signed_in_has(Role::Operator);
    let state = RetryState {
        preview: RwSignal::new(None),
        outcome: RwSignal::new(None),
        reason: RwSignal::new(String::new()),
        busy: RwSignal::new(false),
        failure: RwSignal::new(None),
    };
    let RetryState {
        preview,
        outcome,
        busy,
        failure,
        ..
    } = state;
    // Keyboard focus: to the reason when a preview with payments opens, back to "Preview"
    // when it is cancelled, and to the outcome once the retry is done.
    let preview_button = NodeRef::<leptos::html::Button>::new();
    let reason_ref = NodeRef::<leptos::html::Input>::new();
    let result_ref = NodeRef::<leptos::html::Div>::new();
    Effect::new(move |_| {
        if let Some(el) = reason_ref.get() {
            let _ = el.focus();
        }
    });
    Effect::new(move |_| {
        if let Some(el) = result_ref.get() {
            let _ = el.focus();
        }
    });
    let load_preview = move |_| {
        busy.set(true);
        failure.set(None);
        outcome.set(None);
        let (status, kind, ids) = selection.read();
        spawn_local(async move {
            match api_actions::bulk_retry_preview(source.to_string(), status, kind, ids).await {
                Ok(items) => preview.set(Some(items)),
                Err(e) => failure.set(Some(api::error_message(&e))),
            }
            busy.set(false);
        });
    };
    let what = if source == "stuck" {
        "stuck payments"
    } else {
        "payments of open error-pool items a retry can help (job_dead, suspense; other kinds have their own action on their row)"
    };
    view! {
        <Show when=move || can.get()>
            <Panel id=format!("bulk-{source}") title="Bulk retry" class="bulk" testid=format!("bulk-{source}")>
                <p class="muted small">
                    {format!("Preview the {what} this filter (or the ticked rows) selects now, then retry them in one step. ")}
                    "Only items still selected at the previewed version, with a job waiting or dead, are retried."
                </p>
                <div class="inline-form">
                    <button
                        type="button"
                        data-testid=format!("bulk-{source}-preview")
                        node_ref=preview_button
                        disabled=move || busy.get()
                        on:click=load_preview
                    >
                        "Preview"
                    </button>
                    <span class="form-message" role="alert">{move || failure.get()}</span>
                </div>
                {move || {
                    preview
                        .get()
                        .map(|items| {
                            if items.is_empty() {
                                let why = nothing_to_retry(source, &filter.get_untracked());
                                return view! { <p class="empty" data-testid="bulk-empty">{why}</p> }
                                    .into_any();
                            }
                            let n = items.len();
                            view! {
                                <RetryPreviewTable items/>
                                <RetryConfirmForm n state selection preview_button reason_ref/>
                            }
                                .into_any()
                        })
                }}
                <BulkRetryResult outcome result_ref/>
            </Panel>
        </Show>
    }
}

/// The bulk retry's state: the preview shown, the last outcome, the reason being written,
/// whether a request is in flight, and why the last one failed.
#[derive(Clone, Copy)]
struct RetryState {
    preview: RwSignal<Option<Vec<BulkItem>>>,
    outcome: RwSignal<Option<BulkOutcome>>,
    reason: RwSignal<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
}

/// What a bulk retry selects: [`BulkRetry`]'s `source`, `filter` and ticked `ids`.
#[derive(Clone, Copy)]
struct RetrySelection {
    source: &'static str,
    filter: Signal<String>,
    ids: Option<Signal<Option<Vec<i64>>>>,
}

impl RetrySelection {
    /// (stuck state, error-pool kind, ticked ids) as the server reads them, read now
    /// (untracked): the filter goes to the state for `stuck`, to the kind otherwise.
    fn read(self) -> (Option<String>, Option<String>, Option<Vec<i64>>) {
        let f = self.filter.get_untracked();
        let f = (!f.trim().is_empty()).then(|| f.trim().to_string());
        let ids = self.ids.and_then(|s| s.get_untracked());
        if self.source == "stuck" {
            (f, None, ids)
        } else {
            (None, f, ids)
        }
    }
}

/// The payments a bulk retry's preview holds, one row each.
#[component]
fn RetryPreviewTable(items: Vec<BulkItem>) -> impl IntoView {
    view! {
        <DataTable
            columns=&["Payment", "State", "Version", "Amount", "Last change", "Why"]
            numeric=&["Version", "Amount"]
            label="Payments to retry"
            framed=true
            testid="bulk-preview"
        >
            {items
                .into_iter()
                .map(|i| {
                    view! {
                        <tr>
                            <td class="mono">
                                <A href=format!("/payments/{}", i.payment_id)>{i.payment_id.clone()}</A>
                            </td>
                            <td><StatusPill status=format::Pill::payment(&i.status)/></td>
                            <td class="num">{i.version}</td>
                            <td class="num"><Money amount=i.amount currency=i.currency/></td>
                            <td><Time ms=i.updated_at/></td>
                            <td class="error-text">{format::clip(&i.why, 80)}</td>
                        </tr>
                    }
                })
                .collect_view()}
        </DataTable>
    }
}

/// The bulk retry's confirm form: the audited reason and "Retry N payments", which sends the
/// previewed payments at their versions; "Cancel" closes the preview and gives the focus
/// back to "Preview".
#[component]
fn RetryConfirmForm(
    /// How many payments the preview holds.
    n: usize,
    state: RetryState,
    selection: RetrySelection,
    preview_button: NodeRef<leptos::html::Button>,
    reason_ref: NodeRef<leptos::html::Input>,
) -> impl IntoView {
    let RetryState {
        preview,
        outcome,
        reason,
        busy,
        failure,
    } = state;
    let confirm = move |ev: SubmitEvent| {
        ev.prevent_default();
        let Some(items) = preview.get_untracked() else {
            return;
        };
        let text = reason.get_untracked();
        if text.trim().is_empty() {
            failure.set(Some("Give a reason: it goes to the audit log.".into()));
            return;
        }
        busy.set(true);
        failure.set(None);
        let (status, kind, ids) = selection.read();
        let source = selection.source.to_string();
        let pairs: Vec<(String, i64)> = items
            .into_iter()
            .map(|i| (i.payment_id, i.version))
            .collect();
        spawn_local(async move {
            match api_actions::bulk_retry(source, status, kind, ids, pairs, text).await {
                Ok(out) => {
                    outcome.set(Some(out));
                    preview.set(None);
                    reason.set(String::new());
                }
                Err(e) => failure.set(Some(api::error_message(&e))),
            }
            busy.set(false);
        });
    };
    view! {
        <form class="inline-form" on:submit=confirm>
            <label class="grow">
                "Reason (audited)"
                <input
                    type="text"
                    maxlength="2000"
                    required
                    data-testid="bulk-reason"
                    node_ref=reason_ref
                    bind:value=reason
                />
            </label>
            <button type="submit" data-testid="bulk-confirm" disabled=move || busy.get()>
                {format!("Retry {n} payment{}", if n == 1 { "" } else { "s" })}
            </button>
            <CancelPreview preview preview_button/>
        </form>
    }
}

/// A preview's "Cancel": closes it and gives the focus back to the button that opened it.
#[component]
fn CancelPreview<T: Send + Sync + 'static>(
    preview: RwSignal<Option<T>>,
    preview_button: NodeRef<leptos::html::Button>,
) -> impl IntoView {
    view! {
        <button
            type="button"
            class="secondary"
            on:click=move |_| {
                preview.set(None);
                if let Some(b) = preview_button.get_untracked() {
                    let _ = b.focus();
                }
            }
        >
            "Cancel"
        </button>
    }
}

/// What the bulk retry did (focused when shown): the counted sentence and each skipped
/// payment with why.
#[component]
fn BulkRetryResult(
    outcome: RwSignal<Option<BulkOutcome>>,
    result_ref: NodeRef<leptos::html::Div>,
) -> impl IntoView {
    move || {
        outcome.get().map(|out| {
            view! {
                <div
                    class="bulk-result"
                    role="status"
                    tabindex="-1"
                    data-testid="bulk-result"
                    node_ref=result_ref
                >
                    <p>{bulk_sentence(&out)}</p>
                    <ul class="small">
                        {out
                            .skipped
                            .into_iter()
                            .map(|(id, why)| {
                                view! {
                                    <li>
                                        <span class="mono">{id}</span>
                                        ": "
                                        {why}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                </div>
            }
        })
    }
}

/// Why a preview holds nothing: an error-pool kind a retry cannot help names the action that
/// fits it instead ([`ItemAction::for_kind`], the server's rule).
fn nothing_to_retry(source: &str, kind: &str) -> String {
    let kind = kind.trim();
    if source == "error_pool" && !kind.is_empty() {
        match ItemAction::for_kind(kind, true) {
            Ok(ItemAction::Retry) => {}
            Ok(other) => {
                return format!(
                    "Nothing to retry: {kind} items are not retried; use {} on each row.",
                    other.label()
                );
            }
            Err(why) => return format!("Nothing to retry: for {kind} items, {why}."),
        }
    }
    "Nothing to retry in this selection.".into()
}

/// What a bulk retry did, in the server's counts: payments retried and the jobs that woke,
/// and how many were skipped.
fn bulk_sentence(out: &BulkOutcome) -> String {
    let n = out.retried.len();
    let woken: u64 = out.retried.iter().map(|(_, _, w)| w).sum();
    format!(
        "Retried {n} payment{}, waking {woken} job{}; skipped {}.",
        if n == 1 { "" } else { "s" },
        if woken == 1 { "" } else { "s" },
        out.skipped.len(),
    )
}

/// The `jobs_woken` a retry action's result records (0 when it records none).
fn jobs_woken(result: Option<&str>) -> u64 {
    result
        .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .and_then(|v| v["jobs_woken"].as_u64())
        .unwrap_or(0)
}

/// A one-click retry of one payment's due or dead jobs (operator), for rows of the stuck
/// list; `reason` is what the audit log records. Reports into `flash` how many jobs the
/// server woke, setting `refused` when it was refused or woke nothing (the message is then not
/// shown as a success). `why` (the server's, empty when a retry would wake something) disables
/// it and is shown beside it (issue 41: Retry was offered where no job would wake).
#[component]
pub fn RetryButton(
    payment_id: String,
    reason: String,
    flash: RwSignal<Option<String>>,
    #[prop(optional)] why: String,
    #[prop(optional)] refused: Option<RwSignal<bool>>,
) -> impl IntoView {
    let can = signed_in_has(Role::Operator);
    let busy = RwSignal::new(false);
    let testid = format!("retry-{payment_id}");
    let why_id = format!("retry-why-{payment_id}");
    let available = why.is_empty();
    let described = (!available).then(|| why_id.clone());
    let why_text = (!available).then(|| format!("Retry unavailable: {why}."));
    let on_click = move |_| {
        busy.set(true);
        let (id, why) = (payment_id.clone(), reason.clone());
        spawn_local(async move {
            let retry = ActionKind::Retry.as_str().to_string();
            let (msg, bad) =
                match api_actions::request_action(retry, id.clone(), why, None, None, None, None)
                    .await
                {
                    // What the server counted, never a promise (issue 41: "its jobs run now"
                    // while none woke).
                    Ok(a) => match jobs_woken(a.result.as_deref()) {
                        0 => (
                            format!("Retry of {id}: no job was waiting or dead, so nothing woke."),
                            true,
                        ),
                        1 => (format!("Retry of {id}: 1 job woken."), false),
                        n => (format!("Retry of {id}: {n} jobs woken."), false),
                    },
                    Err(e) => (
                        format!("Retry of {id} refused: {}", api::error_message(&e)),
                        true,
                    ),
                };
            if let Some(r) = refused {
                r.set(bad);
            }
            flash.set(Some(msg));
            busy.set(false);
        });
    };
    view! {
        <Show when=move || can.get()>
            <button
                type="button"
                class="small"
                data-testid=testid.clone()
                aria-describedby=described.clone()
                disabled=move || busy.get() || !available
                on:click=on_click.clone()
            >
                "Retry"
            </button>
            {why_text
                .clone()
                .map(|t| {
                    view! { <div class="muted small action-why" id=why_id.clone() data-testid=why_id.clone()>{t}</div> }
                })}
        </Show>
    }
}

/// Bulk resolve of error-pool items with one note, in two steps like the bulk retry:
/// "Preview resolve" asks the server for the open items the selection holds now (the ticked
/// rows in `ids`, or every open item of `kind` when None); "Resolve N items" sends them with
/// how often each had been reported, and the server resolves only those still open and not
/// reported again, each with its own audit record, naming the rest. `done` is bumped after a
/// resolve so the list reloads. Operators only; the server checks the role.
#[component]
pub fn BulkResolve(
    #[prop(into)] kind: Signal<String>,
    #[prop(into)] ids: Signal<Option<Vec<i64>>>,
    done: RwSignal<u32>,
) -> impl IntoView {
    let can = signed_in_has(Role::Operator);
    let state = ResolveState {
        preview: RwSignal::new(None),
        outcome: RwSignal::new(None),
        note: RwSignal::new(String::new()),
        busy: RwSignal::new(false),
        failure: RwSignal::new(None),
    };
    let ResolveState {
        preview,
        outcome,
        busy,
        failure,
        ..
    } = state;
    let selection = ResolveSelection { kind, ids };
    let preview_button = NodeRef::<leptos::html::Button>::new();
    let note_ref = NodeRef::<leptos::html::Textarea>::new();
    let result_ref = NodeRef::<leptos::html::Div>::new();
    Effect::new(move |_| {
        if let Some(el) = note_ref.get() {
            let _ = el.focus();
        }
    });
    Effect::new(move |_| {
        if let Some(el) = result_ref.get() {
            let _ = el.focus();
        }
    });
    let load_preview = move |_| {
        busy.set(true);
        failure.set(None);
        outcome.set(None);
        let (k, i) = selection.read();
        spawn_local(async move {
            match crate::api_queues::bulk_resolve_preview(k, i).await {
                Ok(items) => preview.set(Some(items)),
                Err(e) => failure.set(Some(api::error_message(&e))),
            }
            busy.set(false);
        });
    };
    view! {
        <Show when=move || can.get()>
            <Panel id="bulk-resolve" title="Bulk resolve" class="bulk" testid="bulk-resolve">
                <p class="muted small">
                    "Preview the open items the ticked rows (or, with none ticked, this filter) select now, then resolve them with one note. "
                    "Items resolved or reported again in between are skipped; each resolution is audited."
                </p>
                <div class="inline-form">
                    <button
                        type="button"
                        data-testid="bulk-resolve-preview"
                        node_ref=preview_button
                        disabled=move || busy.get()
                        on:click=load_preview
                    >
                        "Preview resolve"
                    </button>
                    <span class="form-message" role="alert">{move || failure.get()}</span>
                </div>
                {move || {
                    preview
                        .get()
                        .map(|items| {
                            if items.is_empty() {
                                return view! { <p class="empty">"Nothing open to resolve in this selection."</p> }
                                    .into_any();
                            }
                            let n = items.len();
                            view! {
                                <ResolvePreviewTable items/>
                                <ResolveConfirmForm n state selection done preview_button note_ref/>
                            }
                                .into_any()
                        })
                }}
                <BulkResolveResult outcome result_ref/>
            </Panel>
        </Show>
    }
}

/// The bulk resolve's state, like [`RetryState`] with the note for the reason.
#[derive(Clone, Copy)]
struct ResolveState {
    preview: RwSignal<Option<Vec<crate::dto::ErrorItem>>>,
    outcome: RwSignal<Option<crate::dto::ResolveOutcome>>,
    note: RwSignal<String>,
    busy: RwSignal<bool>,
    failure: RwSignal<Option<String>>,
}

/// What a bulk resolve selects: [`BulkResolve`]'s `kind` and ticked `ids`.
#[derive(Clone, Copy)]
struct ResolveSelection {
    kind: Signal<String>,
    ids: Signal<Option<Vec<i64>>>,
}

impl ResolveSelection {
    /// (kind, ticked ids) as the server reads them, read now (untracked).
    fn read(self) -> (Option<String>, Option<Vec<i64>>) {
        let k = self.kind.get_untracked();
        let k = (!k.trim().is_empty()).then(|| k.trim().to_string());
        (k, self.ids.get_untracked())
    }
}

/// The open items a bulk resolve's preview holds, one row each.
#[component]
fn ResolvePreviewTable(items: Vec<crate::dto::ErrorItem>) -> impl IntoView {
    view! {
        <DataTable
            columns=&["#", "Kind", "Summary", "Seen", "Last seen"]
            numeric=&["#", "Seen"]
            label="Items to resolve"
            framed=true
            testid="resolve-preview"
        >
            {items
                .into_iter()
                .map(|i| {
                    view! {
                        <tr>
                            <td class="num">{i.id}</td>
                            <td class="mono">{i.kind}</td>
                            <td>{format::clip(&i.summary, 100)}</td>
                            <td class="num">{i.occurrences}</td>
                            <td><Time ms=i.last_seen/></td>
                        </tr>
                    }
                })
                .collect_view()}
        </DataTable>
    }
}

/// The bulk resolve's confirm form: the note every item gets and "Resolve N items", which
/// sends the previewed items with how often each had been reported, then bumps `done`.
#[component]
fn ResolveConfirmForm(
    /// How many items the preview holds.
    n: usize,
    state: ResolveState,
    selection: ResolveSelection,
    done: RwSignal<u32>,
    preview_button: NodeRef<leptos::html::Button>,
    note_ref: NodeRef<leptos::html::Textarea>,
) -> impl IntoView {
    let ResolveState {
        preview,
        outcome,
        note,
        busy,
        failure,
    } = state;
    let confirm = move |ev: SubmitEvent| {
        ev.prevent_default();
        let Some(items) = preview.get_untracked() else {
            return;
        };
        let text = note.get_untracked();
        if text.trim().is_empty() {
            failure.set(Some(
                "Write what was done or decided: every item gets this note.".into(),
            ));
            return;
        }
        busy.set(true);
        failure.set(None);
        let (k, i) = selection.read();
        let pairs: Vec<(i64, i64)> = items.into_iter().map(|i| (i.id, i.occurrences)).collect();
        spawn_local(async move {
            match crate::api_queues::bulk_resolve(k, i, pairs, text).await {
                Ok(out) => {
                    outcome.set(Some(out));
                    preview.set(None);
                    note.set(String::new());
                    done.update(|v| *v = v.wrapping_add(1));
                }
                Err(e) => failure.set(Some(api::error_message(&e))),
            }
            busy.set(false);
        });
    };
    view! {
        <form class="inline-form" aria-label="Resolve the previewed items" on:submit=confirm>
            <label class="grow">
                "Resolution note (audited, given to every item)"
                <textarea
                    name="note"
                    rows="2"
                    maxlength="2000"
                    required
                    data-testid="bulk-note"
                    node_ref=note_ref
                    bind:value=note
                ></textarea>
            </label>
            <button type="submit" data-testid="bulk-resolve-confirm" disabled=move || busy.get()>
                {format!("Resolve {n} item{}", if n == 1 { "" } else { "s" })}
            </button>
            <CancelPreview preview preview_button/>
        </form>
    }
}

/// What the bulk resolve did (focused when shown): the counts and each skipped item with why.
#[component]
fn BulkResolveResult(
    outcome: RwSignal<Option<crate::dto::ResolveOutcome>>,
    result_ref: NodeRef<leptos::html::Div>,
) -> impl IntoView {
    move || {
        outcome.get().map(|out| {
            view! {
                <div
                    class="bulk-result"
                    role="status"
                    tabindex="-1"
                    data-testid="resolve-result"
                    node_ref=result_ref
                >
                    <p>
                        {format!(
                            "Resolved {} item{}; skipped {}.",
                            out.resolved.len(),
                            if out.resolved.len() == 1 { "" } else { "s" },
                            out.skipped.len(),
                        )}
                    </p>
                    <ul class="small">
                        {out
                            .skipped
                            .into_iter()
                            .map(|(id, why)| view! { <li>{format!("#{id}: {why}")}</li> })
                            .collect_view()}
                    </ul>
                </div>
            }
        })
    }
}
