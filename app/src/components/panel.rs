//! The two shapes most of the console's pages are made of: a titled panel, and a table of
//! rows under column headings, or a short note when there are none.

use leptos::prelude::*;

/// The title of the [`Panel`] a [`DataTable`] sits in, which names the table's scrolling
/// region when the table has no caption or label of its own.
#[derive(Clone)]
struct PanelTitle(String);

/// A titled region of a page: `<section class="panel">` named by its own `<h2>` (the heading
/// labels the region for screen readers: WCAG 2.2 technique ARIA11/ARIA16, checked by
/// axe-core in the browser tests). `id` makes the heading's id (`{id}-h`) and must be unique
/// on the page; `note` is a muted aside after the title (a count, say). Attributes given as
/// `attr:name=…` land on the `<section>`.
#[component]
pub fn Panel(
    /// Unique on the page; the heading's id is `{id}-h`.
    #[prop(into)]
    id: String,
    /// The heading.
    #[prop(into)]
    title: String,
    /// A muted aside after the title.
    #[prop(optional, into)]
    note: Option<String>,
    /// More of the heading after the title: a live count with its own test id, a status pill,
    /// a link. It is part of the heading, so it is read as part of the region's name.
    #[prop(optional, into)]
    heading_extra: Option<ViewFnOnce>,
    /// Controls beside the heading (a Close button), at the right of the panel's head.
    #[prop(optional, into)]
    actions: Option<ViewFnOnce>,
    /// Makes the heading focusable from code (`tabindex="-1"`), for a panel that takes the
    /// keyboard focus when it opens.
    #[prop(optional)]
    heading_ref: Option<NodeRef<leptos::html::H2>>,
    /// Classes besides `panel` (`facts`, `bulk`, …).
    #[prop(optional)]
    class: Option<&'static str>,
    /// `data-testid` of the section, for the browser tests.
    #[prop(optional, into)]
    testid: Option<String>,
    children: Children,
) -> impl IntoView {
    let heading = format!("{id}-h");
    let labelled_by = heading.clone();
    let class = match class {
        Some(more) => format!("panel {more}"),
        None => "panel".to_string(),
    };
    let title_for_tables = title.clone();
    let focusable = heading_ref.is_some().then_some("-1");
    let heading_ref = heading_ref.unwrap_or_default();
    let h2 = view! {
        <h2 id=heading tabindex=focusable node_ref=heading_ref>
            {title}
            {heading_extra.map(|extra| view! { " " {extra.run()} })}
            {note.map(|n| view! { " " <span class="muted small">{n}</span> })}
        </h2>
    };
    let head = match actions {
        Some(actions) => view! { <div class="panel-head">{h2}{actions.run()}</div> }.into_any(),
        None => h2.into_any(),
    };
    // The title reaches the tables in this panel only: a component has no reactive owner of
    // its own, so the context goes on a child owner that lives as long as the panel's view
    // (as leptos's `Provider` does); otherwise a table rendered later under the same parent
    // (in a `Transition`) would see the title of the panel after this one.
    let owner = Owner::current()
        .expect("a panel is rendered under a reactive owner")
        .child();
    let body = owner.with(|| {
        provide_context(PanelTitle(title_for_tables));
        children()
    });
    let body = leptos::tachys::reactive_graph::OwnedView::new_with_owner(body, owner);
    view! {
        <section class=class aria-labelledby=labelled_by data-testid=testid>
            {head}
            {body}
        </section>
    }
}

/// The column headings of a [`DataTable`], left to right: a literal list (`&["Kind", "Open"]`)
/// or one built at run time (a heading per age bucket).
#[derive(Clone, Debug, Default)]
pub struct Columns(Vec<&'static str>);

impl<const N: usize> From<&'static [&'static str; N]> for Columns {
    fn from(list: &'static [&'static str; N]) -> Self {
        Self(list.to_vec())
    }
}

impl From<&'static [&'static str]> for Columns {
    fn from(list: &'static [&'static str]) -> Self {
        Self(list.to_vec())
    }
}

impl From<Vec<&'static str>> for Columns {
    fn from(list: Vec<&'static str>) -> Self {
        Self(list)
    }
}

/// A data table: one `<th scope="col">` per column (those listed in `numeric`
/// right-aligned, as amounts and counts are), the rows as children; or, when `empty` is set,
/// `<p class="empty">` with that text instead of the table.
///
/// The table sits in a `<div class="table-scroll">` that scrolls sideways when the table is
/// wider than its panel (a phone), so headings and cells keep their words whole. A scrolling
/// box with nothing focusable in it would be out of the keyboard's reach (axe:
/// scrollable-region-focusable), so the box is a focusable region (the pattern of A. Roselli,
/// "Under-Engineered Responsive Tables") named by `label`, else the caption, else "{title}
/// table" after the enclosing [`Panel`]'s title. Two tables in one panel need a `label` or
/// `caption` each, or their regions share a name.
#[component]
pub fn DataTable(
    /// Column headings, left to right.
    #[prop(into)]
    columns: Columns,
    /// The headings of the right-aligned (numeric) columns.
    #[prop(optional, into)]
    numeric: Columns,
    /// A tooltip (`title`) for a heading: `(heading, tooltip)`, for a short or abbreviated
    /// heading whose meaning is not obvious.
    #[prop(optional)]
    titles: &'static [(&'static str, &'static str)],
    /// Headings that only screen readers read (a column of checkboxes is "Select" to them,
    /// and a blank to the eye).
    #[prop(optional)]
    hidden: &'static [&'static str],
    /// The children are `<tbody>` groups of their own (each with its group's heading row)
    /// rather than rows of one body.
    #[prop(optional)]
    grouped: bool,
    /// Classes of the `<table>`; `data compact` unless given (`data inbox`: a card per row on
    /// a phone).
    #[prop(optional)]
    class: Option<&'static str>,
    /// A visually hidden `<caption>` naming the table for screen readers (and its region).
    #[prop(optional, into)]
    caption: Option<String>,
    /// The name of the scrolling region when there is no caption (defaults to the panel's
    /// title).
    #[prop(optional, into)]
    label: Option<String>,
    /// Draws the box as a card of its own (`table-wrap`), for a table that is not in a panel.
    #[prop(optional)]
    framed: bool,
    /// `data-testid` of the table, for the browser tests.
    #[prop(optional, into)]
    testid: Option<String>,
    /// Shown instead of the table when set (there are no rows).
    #[prop(optional_no_strip)]
    empty: Option<&'static str>,
    /// `data-testid` of the note shown instead of an empty table.
    #[prop(optional)]
    empty_testid: Option<&'static str>,
    children: Children,
) -> impl IntoView {
    if let Some(text) = empty {
        return view! { <p class="empty" data-testid=empty_testid>{text}</p> }.into_any();
    }
    let region = label
        .or_else(|| caption.clone())
        .or_else(|| use_context::<PanelTitle>().map(|t| format!("{} table", t.0)))
        .unwrap_or_else(|| "Table".to_string());
    let wrapper = if framed {
        "table-scroll table-wrap"
    } else {
        "table-scroll"
    };
    let Columns(numeric) = numeric;
    let headings = columns
        .0
        .into_iter()
        .map(|c| {
            let class = numeric.contains(&c).then_some("num");
            let title = titles.iter().find(|(h, _)| *h == c).map(|(_, t)| *t);
            if hidden.contains(&c) {
                view! { <th scope="col" class=class title=title><span class="visually-hidden">{c}</span></th> }
                    .into_any()
            } else {
                view! { <th scope="col" class=class title=title>{c}</th> }.into_any()
            }
        })
        .collect_view();
    view! {
        <div class=wrapper role="region" tabindex="0" aria-label=region>
            <table class=class.unwrap_or("data compact") data-testid=testid>
                {caption.map(|c| view! { <caption class="visually-hidden">{c}</caption> })}
                <thead>
                    <tr>{headings}</tr>
                </thead>
                {if grouped {
                    children().into_any()
                } else {
                    view! { <tbody>{children()}</tbody> }.into_any()
                }}
            </table>
        </div>
    }
    .into_any()
}
