//! The audit viewer (`/audit`, auditors; issue 17): the chain status (re-computed on load and
//! on request, with the first broken record), the records filtered by actor, action, payment,
//! object and time (filters in the URL, so a view can be bookmarked and the payment page and
//! error-pool items link straight to theirs), newest first and paged, each linked to its
//! object; and the export as CSV or NDJSON. Exports are plain links to
//! `GET /ops/v1/audit/export` (same origin, the session cookie goes along), so the browser
//! streams the file to disk; the server audits every export.

use converge_wire::audit::Break;
use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::{use_navigate, use_query_map};

use crate::components::layout::signed_in_has;
use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{ErrorNote, Loading, Time, filter_zone, zone_label};
use crate::dto::{AuditListQuery, AuditRow, AuditVerify, Role};
use crate::{api_actions, api_queues, format};

/// The viewer's URL for `q` (blank filters left out), with `tz` (the zone its time filters
/// were written in, `+08:00`) when they were written in local time.
fn href(q: &AuditListQuery, tz: Option<&str>) -> String {
    let before = q.before.map(|b| b.to_string());
    let after = q.after.map(|a| a.to_string());
    let tz = tz.filter(|_| q.from.is_some() || q.to.is_some());
    format!(
        "/audit{}",
        format::query_string(&[
            ("actor", q.actor.as_deref()),
            ("action", q.action.as_deref()),
            ("payment", q.payment.as_deref()),
            ("target", q.target.as_deref()),
            ("from", q.from.as_deref()),
            ("to", q.to.as_deref()),
            ("tz", tz),
            ("before", before.as_deref()),
            ("after", after.as_deref()),
        ])
    )
}

/// `q` as the server reads it: its time filters as RFC 3339 in the zone they were written in.
fn zoned(mut q: AuditListQuery, tz: Option<&str>) -> AuditListQuery {
    q.from = format::as_rfc3339_in(q.from.take(), tz);
    q.to = format::as_rfc3339_in(q.to.take(), tz);
    q
}

/// What a record's target names, as words and (when the console has a page for it) a link.
fn object_link(target: &str, payment_id: Option<&str>) -> (String, Option<String>) {
    let (kind, id) = target.split_once(':').unwrap_or((target, ""));
    let q = format::query_escape;
    match kind {
        "payment" => (
            format!("payment {id}"),
            Some(format!("/payments/{}", q(id))),
        ),
        "action" => (
            format!("action {id}"),
            Some(match payment_id {
                Some(p) => format!("/payments/{}", q(p)),
                None => "/approvals".into(),
            }),
        ),
        "error" => (
            format!("error-pool item #{id}"),
            Some(format!("/error-pool?status=all&item={}", q(id))),
        ),
        "user" => (format!("user {id}"), Some("/admin/users".into())),
        "merchant" => (format!("merchant {id}"), Some("/admin/merchants".into())),
        "webhook_endpoint" => (format!("webhook endpoint {id}"), Some("/webhooks".into())),
        "webhook_delivery" => (format!("webhook delivery {id}"), Some("/webhooks".into())),
        _ => (target.to_string(), None),
    }
}

/// The audit page: the viewer for auditors; for anyone else one sentence, with no form and
/// no call the server would refuse (issue 41).
#[component]
pub fn AuditPage() -> impl IntoView {
    let auditor = signed_in_has(Role::Auditor);
    view! {
        <div class="page-head">
            <h1>"Audit log"</h1>
        </div>
        <Show
            when=move || auditor.get()
            fallback=|| view! {
                <p class="muted" data-testid="audit-auditors-only">
                    "Only auditors may read, verify or export the audit log. Ask an admin for the auditor role if you need it."
                </p>
            }
        >
            <AuditViewer/>
        </Show>
    }
}

/// The chain status, the records and the export (auditors).
#[component]
fn AuditViewer() -> impl IntoView {
    let params = use_query_map();
    let query = Memo::new(move |_| query_of(&params.read()));
    let tz = Memo::new(move |_| params.read().get("tz").filter(|t| format::is_offset(t)));
    let zone = filter_zone();
    let list = Resource::new(
        move || zoned(query.get(), tz.get().as_deref()),
        api_queues::load_audit_list,
    );
    let checked = RwSignal::new(0u32);
    let chain = Resource::new(move || checked.get(), |_| api_actions::verify_audit());
    // Suggestions only, so fetched in the browser after hydration (an Effect never runs on the
    // server): the field takes any text, as the URL may. A LocalResource read under the frame's
    // Suspense would hold the server's stream open for a value it never loads there.
    let known_actions = RwSignal::new(Vec::<String>::new());
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            if let Ok(names) = api_queues::audit_actions().await {
                known_actions.set(names);
            }
        });
    });

    // The form's fields follow the URL (a link, Back, Forward) and feed the export links.
    let fields = FilterFields::new();
    Effect::new(move |_| fields.show(query.get()));
    view! {
        <Panel id="verify" title="Chain status">
            <p class="muted small">
                "Re-computes every record's hash from the first one and reports the first record that does not match."
            </p>
            <div class="chain-status">
                <button type="button" data-testid="verify" on:click=move |_| checked.update(|v| *v = v.wrapping_add(1))>
                    "Verify chain"
                </button>
                <div data-testid="verify-result" role="status">
                    <Transition fallback=Loading>
                        {move || Suspend::new(async move {
                            match chain.await {
                                Ok(v) => view! { <ChainStatus v/> }.into_any(),
                                Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                            }
                        })}
                    </Transition>
                </div>
            </div>
        </Panel>
        <Panel id="records" title="Records">
            <FilterForm fields known_actions zone/>
            <Transition fallback=Loading>
                {move || Suspend::new(async move {
                    let q = query.get();
                    match list.await {
                        Ok(page) if page.items.is_empty() => {
                            view! { <p class="empty" data-testid="audit-empty">"No records match."</p> }.into_any()
                        }
                        Ok(page) => view! { <Records page q tz=tz.get_untracked()/> }.into_any(),
                        Err(e) => view! { <ErrorNote error=e/> }.into_any(),
                    }
                })}
            </Transition>
        </Panel>
        <ExportPanel fields zone/>
    }
}

/// The viewer's query as the URL's parameters say (blank ones left out).
fn query_of(m: &leptos_router::params::ParamsMap) -> AuditListQuery {
    let text = |k: &str| {
        m.get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    AuditListQuery {
        actor: text("actor"),
        action: text("action"),
        payment: text("payment"),
        target: text("target"),
        from: text("from"),
        to: text("to"),
        before: text("before").and_then(|v| v.parse().ok()),
        after: text("after").and_then(|v| v.parse().ok()),
        limit: None,
    }
}

/// The filter form's fields, as typed (the time filters `datetime-local` text).
#[derive(Clone, Copy)]
struct FilterFields {
    actor: RwSignal<String>,
    action: RwSignal<String>,
    payment: RwSignal<String>,
    target: RwSignal<String>,
    from: RwSignal<String>,
    to: RwSignal<String>,
}

impl FilterFields {
    /// Empty fields.
    fn new() -> Self {
        FilterFields {
            actor: RwSignal::new(String::new()),
            action: RwSignal::new(String::new()),
            payment: RwSignal::new(String::new()),
            target: RwSignal::new(String::new()),
            from: RwSignal::new(String::new()),
            to: RwSignal::new(String::new()),
        }
    }

    /// Shows `q`'s filters in the fields.
    fn show(self, q: AuditListQuery) {
        self.actor.set(q.actor.unwrap_or_default());
        self.action.set(q.action.unwrap_or_default());
        self.payment.set(q.payment.unwrap_or_default());
        self.target.set(q.target.unwrap_or_default());
        self.from.set(q.from.unwrap_or_default());
        self.to.set(q.to.unwrap_or_default());
    }

    /// The query the fields say (blank ones left out; the first page).
    fn query(self) -> AuditListQuery {
        let opt = |s: RwSignal<String>| Some(s.get_untracked()).filter(|v| !v.trim().is_empty());
        AuditListQuery {
            actor: opt(self.actor),
            action: opt(self.action),
            payment: opt(self.payment),
            target: opt(self.target),
            from: opt(self.from),
            to: opt(self.to),
            before: None,
            after: None,
            limit: None,
        }
    }

    /// The export's URL in `fmt` (csv, ndjson) for the actor, action and time filters, the
    /// times in `zone` (None: UTC). Tracked: the links follow the fields.
    fn export_link(self, fmt: &'static str, zone: Option<&str>) -> String {
        let from = format::as_rfc3339_in(Some(self.from.get()), zone);
        let to = format::as_rfc3339_in(Some(self.to.get()), zone);
        let (actor, action) = (self.actor.get(), self.action.get());
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
    }
}

/// The records' filter form; submitting it navigates to the viewer's URL for its filters.
#[component]
fn FilterForm(
    fields: FilterFields,
    /// Action names for the Action field's suggestions.
    known_actions: RwSignal<Vec<String>>,
    zone: Signal<Option<String>>,
) -> impl IntoView {
    let FilterFields {
        actor,
        action,
        payment,
        target,
        from,
        to,
    } = fields;
    let navigate = use_navigate();
    let on_filter = move |ev: SubmitEvent| {
        ev.prevent_default();
        navigate(
            &href(&fields.query(), zone.get_untracked().as_deref()),
            Default::default(),
        );
    };
    view! {
        <form class="filters" role="search" aria-label="Filter the records" on:submit=on_filter>
            <label>
                "Actor"
                <input type="text" name="actor" data-testid="filter-actor" bind:value=actor/>
            </label>
            <label>
                "Action"
                <input
                    type="text"
                    name="action"
                    list="audit-actions"
                    placeholder="e.g. action_approved"
                    data-testid="filter-action"
                    bind:value=action
                />
            </label>
            <datalist id="audit-actions" data-testid="audit-actions">
                {move || {
                    known_actions
                        .get()
                        .into_iter()
                        .map(|a| view! { <option value=a></option> })
                        .collect_view()
                }}
            </datalist>
            <label>
                "Payment"
                <input type="text" name="payment" placeholder="pay_…" data-testid="filter-payment" bind:value=payment/>
            </label>
            <label>
                "Object"
                <input type="text" name="target" placeholder="e.g. error:12, user:alice" data-testid="filter-target" bind:value=target/>
            </label>
            <label>
                {move || zone_label("From", zone.get().as_deref())}
                <input type="datetime-local" name="from" bind:value=from/>
            </label>
            <label>
                {move || zone_label("To", zone.get().as_deref())}
                <input type="datetime-local" name="to" bind:value=to/>
            </label>
            <div class="filter-actions">
                <button type="submit" data-testid="filter-submit">"Filter"</button>
                <A href="/audit" attr:class="button-link secondary">"Clear"</A>
            </div>
        </form>
    }
}

/// A page of records (not empty) and the pager to the newer and older ones, for query `q`
/// whose time filters were written in `tz`.
#[component]
fn Records(page: crate::dto::AuditList, q: AuditListQuery, tz: Option<String>) -> impl IntoView {
    let newer = page.newer.map(|n| {
        href(
            &AuditListQuery {
                after: Some(n),
                before: None,
                ..q.clone()
            },
            tz.as_deref(),
        )
    });
    let older = page.older.map(|o| {
        href(
            &AuditListQuery {
                before: Some(o),
                after: None,
                ..q.clone()
            },
            tz.as_deref(),
        )
    });
    view! {
        <DataTable
            columns=&["Seq", "At", "Actor", "Action", "Object", "Reason", "Details"]
            numeric=&["Seq"]
            class="data compact audit-records"
            framed=true
            testid="audit-records"
        >
            {page.items.into_iter().map(|r| view! { <RecordRow r/> }).collect_view()}
        </DataTable>
        <nav class="pager" aria-label="Pages">
            {newer.map(|h| view! { <A href=h attr:data-testid="audit-newer">"← Newer"</A> })}
            {older.map(|h| view! { <A href=h attr:data-testid="audit-older">"Older →"</A> })}
        </nav>
    }
}

/// The export panel: CSV and NDJSON links for the filters in the form.
#[component]
fn ExportPanel(fields: FilterFields, zone: Signal<Option<String>>) -> impl IntoView {
    let link = move |fmt: &'static str| fields.export_link(fmt, zone.get().as_deref());
    view! {
        <Panel id="export" title="Export">
            <p class="muted small">"Exports the records the actor, action and time filters above select (the payment and object filters are the viewer's only)."</p>
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
        </Panel>
    }
}

/// The chain's verdict: ok with the head, or broken at the first record that does not verify
/// (linked to it in the viewer).
#[component]
fn ChainStatus(v: AuditVerify) -> impl IntoView {
    match v.first_broken.clone() {
        None => view! {
            <p class="verify-ok" data-testid="chain-status">
                <span class="pill st-ok">"ok"</span>
                {format!(" {} records verified; head #{} {}", v.records, v.head.seq, v.head.hash)}
            </p>
            <Checkpoints v/>
        }
        .into_any(),
        Some(Break { seq, reason: why }) => view! {
            <p class="verify-broken" data-testid="chain-status">
                <span class="pill st-bad">"broken"</span>
                " first broken record: "
                <A href=format!("/audit?before={}", seq + 1)>{format!("#{seq}")}</A>
                {format!(": {why}")}
            </p>
        }
        .into_any(),
    }
}

/// The signed checkpoints behind a whole chain, as `converge audit verify` reports them:
/// without one, deleting the newest records would go unnoticed (issue 36), so their absence
/// is a warning, and so is a signature the server could not check.
#[component]
fn Checkpoints(v: AuditVerify) -> impl IntoView {
    let Some(c) = v.latest_checkpoint else {
        return view! {
            <p class="verify-warn" data-testid="chain-checkpoints">
                <span class="pill st-warn">"no checkpoint"</span>
                " No signed checkpoint yet: deleting the newest records would not show here. `converge serve` signs one with its key."
            </p>
        }
        .into_any();
    };
    let (pill, tone, said) = if v.signatures_checked {
        (
            "signed",
            "pill st-ok",
            "signatures verified with the server's key",
        )
    } else {
        (
            "unchecked",
            "pill st-warn",
            "signatures not checked: this server does not hold the signing key (check an export with `converge audit verify --file`)",
        )
    };
    view! {
        <p class="verify-ok" data-testid="chain-checkpoints">
            <span class=tone>{pill}</span>
            {format!(" {} signed checkpoint(s); the latest covers records up to #{}, signed ", v.checkpoints, c.seq)}
            <Time ms=c.at/>
            {format!(" by key {}; {said}.", c.key_id)}
        </p>
    }
    .into_any()
}

/// One record, linked to its object (and to its payment, for an action's or an item's).
#[component]
fn RecordRow(r: AuditRow) -> impl IntoView {
    let rec = r.record;
    let (label, to) = object_link(&rec.target, r.payment_id.as_deref());
    let payment = r
        .payment_id
        .filter(|_| !rec.target.starts_with("payment:"))
        .map(|p| {
            view! {
                <div class="small">
                    "payment "
                    <A href=format!("/payments/{}", format::query_escape(&p))>{p.clone()}</A>
                </div>
            }
        });
    let fields = format::json_fields(&rec.after_state);
    let raw = format::pretty_json(&rec.after_state);
    let has_raw = !rec.after_state.trim().is_empty();
    view! {
        <tr data-testid=format!("audit-{}", rec.seq)>
            <td class="num">{rec.seq}</td>
            <td><Time ms=rec.at/></td>
            <td>
                {rec.actor}
                <div class="muted small">{rec.roles}</div>
            </td>
            <td class="mono nowrap">{rec.action}</td>
            <td class="mono">
                {match to {
                    Some(h) => view! { <A href=h>{label}</A> }.into_any(),
                    None => view! { <span>{label}</span> }.into_any(),
                }}
                {payment}
            </td>
            <td class="wrap">{rec.reason}</td>
            <td>
                {(!fields.is_empty())
                    .then(|| {
                        view! {
                            <dl class="fields small">
                                {fields
                                    .into_iter()
                                    .map(|(k, v)| view! { <div><dt>{k}</dt><dd>{format::clip(&v, 120)}</dd></div> })
                                    .collect_view()}
                            </dl>
                        }
                    })}
                {has_raw
                    .then(|| {
                        view! {
                            <details>
                                <summary>"JSON"</summary>
                                <pre class="evidence">{raw}</pre>
                            </details>
                        }
                    })}
            </td>
        </tr>
    }
}
