//! The frame of every signed-in page: a top bar with the navigation, the signed-in user, its
//! roles and a sign-out button. Without a valid session the frame redirects to `/login`
//! before any page content renders (on the server the redirect is a real 302, because the
//! session check is a blocking resource that the response waits for).

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::{A, Outlet, Redirect};
use leptos_router::hooks::use_navigate;

use super::widgets::{ErrorNote, Loading};
use crate::api;
use crate::dto::Principal;

/// The signed-in user as loaded by the frame; pages read it to show or hide controls (the
/// server checks every call regardless).
#[derive(Debug, Clone, Copy)]
pub struct Me(pub Resource<Result<Option<Principal>, ServerFnError>>);

/// The sign-in page that comes back to the page being shown.
pub fn here_via_login() -> String {
    let location = leptos_router::hooks::use_location();
    // `search` comes without its `?`.
    let search = location.search.get_untracked();
    let here = if search.is_empty() {
        location.pathname.get_untracked()
    } else {
        format!("{}?{search}", location.pathname.get_untracked())
    };
    crate::format::login_returning_to(&here)
}

/// Layout route of the console: checks the session, then renders the top bar and the page.
#[component]
pub fn ConsoleLayout() -> impl IntoView {
    let me = Resource::new_blocking(|| (), |_| api::me());
    provide_context(Me(me));
    view! {
        <Suspense fallback=Loading>
            {move || Suspend::new(async move {
                match me.await {
                    Ok(Some(p)) => {
                        view! {
                            <TopBar principal=p/>
                            <PauseBanner/>
                            <main class="page" id="main" tabindex="-1">
                                <Outlet/>
                            </main>
                            <footer class="page-foot">
                                <crate::pages::status::StatusBadge/>
                            </footer>
                        }
                            .into_any()
                    }
                    // Signed out on a deep link: sign in, then back to it.
                    Ok(None) => view! { <Redirect path=here_via_login()/> }.into_any(),
                    Err(e) => view! { <main class="page"><ErrorNote error=e/></main> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// Whether the signed-in user holds `role`, for showing controls (false while unknown).
pub fn signed_in_has(role: &'static str) -> Signal<bool> {
    let me = use_context::<Me>();
    Signal::derive(move || {
        me.and_then(|m| m.0.get())
            .and_then(|r| r.ok().flatten())
            .is_some_and(|p| p.has(role))
    })
}

/// The signed-in user's name (None while unknown), e.g. to tell a requester from an approver.
pub fn signed_in_name() -> Signal<Option<String>> {
    let me = use_context::<Me>();
    Signal::derive(move || {
        me.and_then(|m| m.0.get())
            .and_then(|r| r.ok().flatten())
            .map(|p| p.username)
    })
}

/// Brand, navigation, user and sign-out.
#[component]
fn TopBar(principal: Principal) -> impl IntoView {
    let navigate = use_navigate();
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    let sign_out = move |ev: SubmitEvent| {
        ev.prevent_default();
        busy.set(true);
        let navigate = navigate.clone();
        spawn_local(async move {
            match api::logout().await {
                Ok(()) => navigate("/login", Default::default()),
                Err(e) => {
                    failure.set(Some(api::error_message(&e)));
                    busy.set(false);
                }
            }
        });
    };
    let is_admin = principal.has("admin");
    let sees_approvals = principal.has("approver") || principal.has("operator");
    // Requests waiting for an approver, counted again on every page change.
    let location = leptos_router::hooks::use_location();
    let pending = Resource::new(
        move || location.pathname.get(),
        |_| crate::api_actions::pending_approvals(),
    );
    let is_auditor = principal.has("auditor");
    let roles = principal.roles.join(", ");
    // Sign-out is a form posting to the server function, so it works even before the page is
    // hydrated (the server then redirects to /login); once hydrated it is a fetch.
    view! {
        <header class="topbar" data-hydrated=move || hydrated.get().to_string()>
            <a class="skip-link" href="#main">"Skip to content"</a>
            <A href="/" attr:class="brand-link">"converge"</A>
            <nav class="mainnav" aria-label="Main">
                <A href="/" exact=true>"Dashboard"</A>
                <A href="/payments">"Payments"</A>
                <A href="/error-pool">"Error pool"</A>
                <A href="/webhooks">"Webhooks"</A>
                {sees_approvals
                    .then(|| {
                        view! {
                            <A href="/approvals">
                                "Approvals"
                                <Suspense fallback=|| ()>
                                    {move || {
                                        pending
                                            .get()
                                            .and_then(Result::ok)
                                            .filter(|n| *n > 0)
                                            .map(|n| {
                                                view! {
                                                    <span class="nav-count" data-testid="approvals-count">
                                                        {n.to_string()}
                                                        <span class="visually-hidden">" waiting"</span>
                                                    </span>
                                                }
                                            })
                                    }}
                                </Suspense>
                            </A>
                        }
                    })}
                {sees_approvals.then(|| view! { <A href="/pauses">"Pauses"</A> })}
                {is_auditor.then(|| view! { <A href="/audit">"Audit"</A> })}
                {is_admin.then(|| view! { <A href="/admin/users">"Users"</A> })}
                {is_admin.then(|| view! { <A href="/admin/merchants">"Merchants"</A> })}
            </nav>
            <div class="who">
                <span class="user" data-testid="current-user">{principal.username.clone()}</span>
                <span class="roles" data-testid="current-roles">{roles}</span>
                <form method="post" action="/api/logout" on:submit=sign_out>
                    <button
                        type="submit"
                        class="secondary small"
                        data-testid="sign-out"
                        disabled=move || busy.get()
                    >
                        "Sign out"
                    </button>
                </form>
                <span class="form-message" role="alert">{move || failure.get()}</span>
            </div>
        </header>
    }
}

/// How often an open page looks again for pauses, seconds (besides every page change).
const PAUSE_POLL_SECS: u64 = 5;

/// The emergency switch's banner: while any pause is in force, every page names what is
/// paused, since when, by whose approval and why, with a link to the pauses page. Read on
/// every page change and every [`PAUSE_POLL_SECS`] while the tab is visible (background
/// requests, which do not keep the session alive).
#[component]
fn PauseBanner() -> impl IntoView {
    let location = leptos_router::hooks::use_location();
    let tick = RwSignal::new(0u64);
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(
            move || {
                if !document().hidden() {
                    tick.update(|t| *t = t.wrapping_add(1));
                }
            },
            std::time::Duration::from_secs(PAUSE_POLL_SECS),
        ) {
            on_cleanup(move || handle.clear());
        }
    });
    let active = Resource::new(
        move || (location.pathname.get(), tick.get()),
        |_| crate::api_pauses::active_pauses(),
    );
    view! {
        <Transition fallback=|| ()>
            {move || {
                active
                    .get()
                    .and_then(Result::ok)
                    .filter(|items| !items.is_empty())
                    .map(|items| {
                        view! {
                            <div class="pause-banner" role="status" data-testid="pause-banner">
                                <strong>"Emergency switch: paused"</strong>
                                <ul>
                                    {items
                                        .into_iter()
                                        .map(|p| {
                                            let since = p.approved_at.unwrap_or(p.requested_at);
                                            view! {
                                                <li data-target=p.target.clone()>
                                                    <span class="what">{p.what}</span>
                                                    " since "
                                                    <time>{crate::format::utc(since)}</time>
                                                    {format!(
                                                        " (requested by {}, approved by {}): {}",
                                                        p.requested_by,
                                                        p.approved_by.unwrap_or_default(),
                                                        p.reason,
                                                    )}
                                                </li>
                                            }
                                        })
                                        .collect_view()}
                                </ul>
                                <A href="/pauses">"Manage pauses"</A>
                            </div>
                        }
                    })
            }}
        </Transition>
    }
}
