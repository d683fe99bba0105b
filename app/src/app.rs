//! The document shell and the router of the console.

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{A, ParentRoute, Route, Router, Routes};
use leptos_router::path;

use crate::components::layout::ConsoleLayout;
use crate::pages::approvals::ApprovalsPage;
use crate::pages::audit::AuditPage;
use crate::pages::dashboard::DashboardPage;
use crate::pages::error_pool::ErrorPoolPage;
use crate::pages::key::KeyPage;
use crate::pages::login::LoginPage;
use crate::pages::merchants::MerchantsPage;
use crate::pages::pauses::PausesPage;
use crate::pages::payment::PaymentPage;
use crate::pages::payments::PaymentsPage;
use crate::pages::search::SearchPage;
use crate::pages::users::UsersPage;
use crate::pages::webhooks::WebhooksPage;

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    // No favicon file: the empty data URL stops browsers asking for one (a 404 each time).
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="data:,"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The console: `/login` on its own, every other page inside the signed-in frame.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="leptos" href="/pkg/converge.css"/>
        <Title text="converge — ops console"/>
        <Router>
            <Routes fallback=NotFound>
                <Route path=path!("login") view=LoginPage/>
                <ParentRoute path=path!("") view=ConsoleLayout>
                    <Route path=path!("") view=DashboardPage/>
                    <Route path=path!("payments") view=PaymentsPage/>
                    <Route path=path!("payments/:id") view=PaymentPage/>
                    <Route path=path!("error-pool") view=ErrorPoolPage/>
                    <Route path=path!("approvals") view=ApprovalsPage/>
                    <Route path=path!("pauses") view=PausesPage/>
                    <Route path=path!("audit") view=AuditPage/>
                    <Route path=path!("webhooks") view=WebhooksPage/>
                    <Route path=path!("admin/users") view=UsersPage/>
                    <Route path=path!("admin/merchants") view=MerchantsPage/>
                    <Route path=path!("search") view=SearchPage/>
                    <Route path=path!("keys/:merchant/:key") view=KeyPage/>
                </ParentRoute>
            </Routes>
        </Router>
    }
}

/// Any other path.
#[component]
fn NotFound() -> impl IntoView {
    view! {
        <main class="not-found">
            <h1>"Page not found"</h1>
            <p>
                <A href="/">"Back to the dashboard"</A>
            </p>
        </main>
    }
}
