//! Small presentational pieces: status pills, amounts, times, error notes.

use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::api::{error_message, is_not_signed_in};
use crate::format;

/// A coloured pill with a status name (payments, jobs, refunds, error-pool items).
#[component]
pub fn StatusPill(
    /// The status as stored (`SUCCESS`, `due`, `open`, ...).
    #[prop(into)]
    status: String,
) -> impl IntoView {
    let class = format!("pill {}", format::status_class(&status));
    view! { <span class=class>{status}</span> }
}

/// An amount in major units with its currency, right-aligned in tables by its class.
#[component]
pub fn Money(
    /// Minor units.
    amount: i64,
    /// ISO 4217 code.
    #[prop(into)]
    currency: String,
) -> impl IntoView {
    view! { <span class="num">{format::money(amount, &currency)}</span> }
}

/// A UTC time; the full time stays in the tooltip-free text so it can be copied.
#[component]
pub fn Time(
    /// Epoch ms UTC.
    ms: i64,
) -> impl IntoView {
    view! { <time class="time">{format::utc(ms)}</time> }
}

/// A server-function error for people: its sentence in an alert box, or, when the session is
/// gone, a redirect to the sign-in page.
#[component]
pub fn ErrorNote(
    /// What failed.
    error: ServerFnError,
) -> impl IntoView {
    if is_not_signed_in(&error) {
        return view! { <Redirect path=super::layout::here_via_login()/> }.into_any();
    }
    view! { <p class="error-note" role="alert">{error_message(&error)}</p> }.into_any()
}

/// A placeholder while data loads.
#[component]
pub fn Loading() -> impl IntoView {
    view! { <p class="loading" aria-live="polite">"Loading…"</p> }
}
