//! Server functions of the Webhooks page and the payment story's events: thin adapters over
//! `converge_server::service::deliveries`, with the same permission checks and audit records as
//! the `/ops/v1/webhooks...` endpoints, returning the `converge_wire` values those build.

use leptos::prelude::*;

use crate::dto::{DeliveryDetail, DeliveryRow, PaymentWebhooks, WebhooksOverview};

/// Every endpoint with its 24 h health, and the delivery backlog (viewer).
#[server(endpoint = "webhooks_overview")]
pub async fn load_webhooks_overview() -> Result<WebhooksOverview, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    st.core
        .webhooks_overview()
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Deliveries a page of the Webhooks page shows (the list was one 6,300 px page; issue 41).
pub const DELIVERIES_PAGE: i64 = 50;

/// Deliveries filtered by status, endpoint, event type, payment and creation time (viewer);
/// empty strings mean "any". Newest first, [`DELIVERIES_PAGE`] + 1 of them with ids below
/// `before` when given: the page shows [`DELIVERIES_PAGE`] and offers "Older" when there is
/// one more.
#[server(endpoint = "webhook_deliveries")]
pub async fn webhook_deliveries(
    status: String,
    endpoint: String,
    event_type: String,
    payment: String,
    from: String,
    to: String,
    // Absent on the first page.
    #[server(default)] before: Option<i64>,
) -> Result<Vec<DeliveryRow>, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    use converge_server::service::queries::DeliverySearch;
    let (st, _) = ssr::authorize(Permission::View).await?;
    let some = |v: String| Some(v).filter(|v| !v.trim().is_empty());
    let q = DeliverySearch {
        status: some(status),
        endpoint: some(endpoint),
        event_type: some(event_type),
        from: some(from).map(|v| crate::format::as_rfc3339(Some(v)).unwrap_or_default()),
        to: some(to).map(|v| crate::format::as_rfc3339(Some(v)).unwrap_or_default()),
        payment: some(payment),
        // One more than a page shows, so the page knows whether an older one exists.
        limit: Some(DELIVERIES_PAGE + 1),
        before,
    };
    st.core
        .search_deliveries(&q)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// One delivery with its attempts and event (viewer).
#[server(endpoint = "webhook_delivery")]
pub async fn webhook_delivery(id: i64) -> Result<DeliveryDetail, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    st.core
        .delivery_detail(id)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Redelivers one delivery now, for a new round of attempts (operator; audited with the
/// reason).
#[server(endpoint = "redeliver_webhook")]
pub async fn redeliver_webhook(id: i64, reason: String) -> Result<String, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::RequestActions).await?;
    st.core
        .redeliver_one(&ssr::actor(&p).await, id, &reason)
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    Ok(format!(
        "Delivery #{id} redelivered: its attempts start again now."
    ))
}

/// The failed deliveries of an endpoint since `since` (viewer): the recovery preview.
#[server(endpoint = "webhook_recover_preview")]
pub async fn webhook_recover_preview(
    endpoint: String,
    since: String,
) -> Result<Vec<DeliveryRow>, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    let since = crate::format::as_rfc3339(Some(since)).unwrap_or_default();
    let (_, items) = st
        .core
        .recovery_preview(&endpoint, &since)
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    Ok(items)
}

/// Redelivers the previewed deliveries (comma-separated ids) that are still failed
/// deliveries of the endpoint since `since` (operator; rate-limited; audited).
#[server(endpoint = "webhook_recover")]
pub async fn webhook_recover(
    endpoint: String,
    since: String,
    delivery_ids: String,
    reason: String,
) -> Result<String, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::RequestActions).await?;
    let ids: Result<Vec<i64>, _> = delivery_ids
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse::<i64>())
        .collect();
    let ids = ids.map_err(|_| {
        ssr::api_error(converge_server::error::ApiError::bad_request(
            converge_wire::ErrorCode::InvalidRequest,
            "delivery ids must be numbers",
        ))
    })?;
    let since = crate::format::as_rfc3339(Some(since)).unwrap_or_default();
    let done = st
        .core
        .recover_endpoint(&ssr::actor(&p).await, &endpoint, &since, &ids, &reason)
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    let n = done.redelivered.len();
    let skipped = done.skipped.len();
    Ok(format!(
        "{n} deliveries redelivered{}.",
        if skipped > 0 {
            format!("; {skipped} no longer failed and were left alone")
        } else {
            String::new()
        }
    ))
}

/// Re-enables a disabled endpoint (operator; audited).
#[server(endpoint = "webhook_enable")]
pub async fn webhook_enable(endpoint: String, reason: String) -> Result<String, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::RequestActions).await?;
    st.core
        .enable_endpoint(&ssr::actor(&p).await, &endpoint, &reason)
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    Ok(format!("Endpoint {endpoint} enabled."))
}

/// A payment's events (and its refunds') with their deliveries (viewer).
#[server(endpoint = "payment_webhooks")]
pub async fn load_payment_webhooks(payment_id: String) -> Result<PaymentWebhooks, ServerFnError> {
    payment_webhooks_as(payment_id, crate::api::ssr::Activity::Person).await
}

/// [`load_payment_webhooks`], fetched again because the live stream (or its polling
/// fallback) said the payment changed: a background request.
#[server(endpoint = "payment_webhooks_refresh")]
pub async fn refresh_payment_webhooks(
    payment_id: String,
) -> Result<PaymentWebhooks, ServerFnError> {
    payment_webhooks_as(payment_id, crate::api::ssr::Activity::Background).await
}

#[cfg(feature = "ssr")]
async fn payment_webhooks_as(
    payment_id: String,
    activity: crate::api::ssr::Activity,
) -> Result<PaymentWebhooks, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize_as(Permission::View, activity).await?;
    st.core
        .payment_webhooks(&payment_id)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}
