//! The document shell and the router of the console.

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{A, ParentRoute, Route, Router, Routes};
use leptos_router::{Lazy, LazyRoute, lazy_route, path};

use crate::components::layout::ConsoleLayout;
use crate::pages::approvals::ApprovalsPage;
use crate::pages::audit::AuditPage;
use crate::pages::dashboard::DashboardPage;
use crate::pages::error_pool::ErrorPoolPage;
use crate::pages::key::KeyPage;
use crate::pages::login::LoginPage;
use crate::pages::merchant::MerchantPage;
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
                    <Route path=path!("") view={Lazy::<DashboardRoute>::new()}/>
                    <Route path=path!("payments") view={Lazy::<PaymentsRoute>::new()}/>
                    <Route path=path!("payments/:id") view={Lazy::<PaymentRoute>::new()}/>
                    <Route path=path!("error-pool") view={Lazy::<ErrorPoolRoute>::new()}/>
                    // Not lazy (issue 41, the phone approver): its code is in the main
                    // WebAssembly, so Approve works once that has arrived instead of after
                    // a chain of chunk round trips (3.7 s at 4G; BENCHMARKS.md).
                    <Route path=path!("approvals") view=ApprovalsPage/>
                    <Route path=path!("pauses") view={Lazy::<PausesRoute>::new()}/>
                    <Route path=path!("audit") view={Lazy::<AuditRoute>::new()}/>
                    <Route path=path!("webhooks") view={Lazy::<WebhooksRoute>::new()}/>
                    <Route path=path!("admin/users") view={Lazy::<UsersRoute>::new()}/>
                    <Route path=path!("admin/merchants") view={Lazy::<MerchantsRoute>::new()}/>
                    <Route path=path!("merchants/:name") view={Lazy::<MerchantRoute>::new()}/>
                    <Route path=path!("search") view={Lazy::<SearchRoute>::new()}/>
                    <Route path=path!("keys/:merchant/:key") view={Lazy::<KeyRoute>::new()}/>
                </ParentRoute>
            </Routes>
        </Router>
    }
}

/// The pages inside the signed-in frame, each loaded from its own WebAssembly chunk
/// (`cargo leptos build --split`; issue 15, first load): the route's `view` is split out by
/// `#[lazy_route]`, and with it the code only that page reaches.
macro_rules! lazy_page {
    ($route:ident, $page:ident) => {
        struct $route;

        #[lazy_route]
        impl LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            fn view(_this: Self) -> AnyView {
                view! { <$page/> }.into_any()
            }
        }
    };
}

lazy_page!(DashboardRoute, DashboardPage);
lazy_page!(PaymentsRoute, PaymentsPage);
lazy_page!(PaymentRoute, PaymentPage);
lazy_page!(ErrorPoolRoute, ErrorPoolPage);
lazy_page!(PausesRoute, PausesPage);
lazy_page!(AuditRoute, AuditPage);
lazy_page!(WebhooksRoute, WebhooksPage);
lazy_page!(UsersRoute, UsersPage);
lazy_page!(MerchantsRoute, MerchantsPage);
lazy_page!(MerchantRoute, MerchantPage);
lazy_page!(SearchRoute, SearchPage);
lazy_page!(KeyRoute, KeyPage);

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
