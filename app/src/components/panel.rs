//! The two shapes most of the console's pages are made of: a titled panel, and a table of
//! rows under column headings, or a short note when there are none.

use leptos::prelude::*;

/// A titled region of a page: `<section class="panel">` named by its own `<h2>` (the heading
/// labels the region for screen readers: WCAG 2.2 technique ARIA11/ARIA16, checked by
/// axe-core in the browser tests). `id` makes the heading's id (`{id}-h`) and must be unique
/// on the page; `note` is a muted aside after the title (a count, say).
#[component]
pub fn Panel(
    /// Unique on the page; the heading's id is `{id}-h`.
    id: &'static str,
    /// The heading.
    #[prop(into)]
    title: String,
    /// A muted aside after the title.
    #[prop(optional, into)]
    note: Option<String>,
    /// `data-testid` of the section, for the browser tests.
    #[prop(optional)]
    testid: Option<&'static str>,
    children: Children,
) -> impl IntoView {
    let heading = format!("{id}-h");
    let labelled_by = heading.clone();
    view! {
        <section class="panel" aria-labelledby=labelled_by data-testid=testid>
            <h2 id=heading>
                {title}
                {note.map(|n| view! { " " <span class="muted small">{n}</span> })}
            </h2>
            {children()}
        </section>
    }
}

/// A compact data table: one `<th scope="col">` per column (those listed in `numeric`
/// right-aligned, as amounts and counts are), the rows as children; or, when `empty` is set,
/// `<p class="empty">` with that text instead of the table.
#[component]
pub fn DataTable(
    /// Column headings, left to right.
    columns: &'static [&'static str],
    /// The headings of the right-aligned (numeric) columns.
    #[prop(optional)]
    numeric: &'static [&'static str],
    /// `data-testid` of the table, for the browser tests.
    #[prop(optional)]
    testid: Option<&'static str>,
    /// Shown instead of the table when set (there are no rows).
    #[prop(optional_no_strip)]
    empty: Option<&'static str>,
    children: Children,
) -> impl IntoView {
    if let Some(text) = empty {
        return view! { <p class="empty">{text}</p> }.into_any();
    }
    view! {
        <table class="data compact" data-testid=testid>
            <thead>
                <tr>
                    {columns
                        .iter()
                        .map(|c| {
                            if numeric.contains(c) {
                                view! { <th scope="col" class="num">{*c}</th> }.into_any()
                            } else {
                                view! { <th scope="col">{*c}</th> }.into_any()
                            }
                        })
                        .collect_view()}
                </tr>
            </thead>
            <tbody>{children()}</tbody>
        </table>
    }
    .into_any()
}
