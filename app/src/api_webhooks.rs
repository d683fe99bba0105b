//! Server functions of the Webhooks page and the payment story's events: thin adapters over
//! `converge_server::ops::webhooks`, with the same permission checks and audit records as
//! the `/ops/v1/webhooks...` endpoints, returning the `converge_wire` values those build.

use leptos::prelude::*;

use crate::dto::{DeliveryDetail, DeliveryRow, PaymentWebhooks, WebhooksOverview};

/// Every endpoint with its 24 h health, and the delivery backlog (viewer).
#[server(endpoint = "webhooks_overview")]
pub async fn load_webhooks_overview() -> Result<WebhooksOverview, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    converge_server::ops::webhooks::overview(&st)
        .await
        .map_err(ssr::api_error)
}

/// Deliveries filtered by status, endpoint, event type, payment and creation time (viewer);
/// empty strings mean "any".
#[server(endpoint = "webhook_deliveries")]
pub async fn webhook_deliveries(
    status: String,
    endpoint: String,
    event_type: String,
    payment: String,
    from: String,
    to: String,
) -> Result<Vec<DeliveryRow>, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    use converge_server::service::queries::{DeliveryQuery, search_deliveries};
    let (st, _) = ssr::authorize(Permission::View).await?;
    let some = |v: String| Some(v).filter(|v| !v.trim().is_empty());
    let q = DeliveryQuery {
        status: some(status),
        endpoint: some(endpoint),
        event_type: some(event_type),
        from: some(from).map(|v| crate::format::as_rfc3339(Some(v)).unwrap_or_default()),
        to: some(to).map(|v| crate::format::as_rfc3339(Some(v)).unwrap_or_default()),
        payment: some(payment),
        limit: Some(200),
    };
    search_deliveries(st.core.store.as_ref(), &q)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// One delivery with its attempts and event (viewer).
#[server(endpoint = "webhook_delivery")]
pub async fn webhook_delivery(id: i64) -> Result<DeliveryDetail, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    converge_server::ops::webhooks::delivery_detail(&st, id)
        .await
        .map_err(ssr::api_error)
}

/// Redelivers one delivery now, for a new round of attempts (operator; audited with the
/// reason).
#[server(endpoint = "redeliver_webhook")]
pub async fn redeliver_webhook(id: i64, reason: String) -> Result<String, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::View).await?;
    let addr = ssr::client_addr().await;
    converge_server::ops::webhooks::run_redeliver(&st, &p, &addr, id, &reason)
        .await
        .map_err(ssr::api_error)?;
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
    let preview = converge_server::ops::webhooks::recovery_preview(&st, &endpoint, &since)
        .await
        .map_err(ssr::api_error)?;
    Ok(preview.items)
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
    use converge_server::ops::webhooks::{RecoverBody, run_recover};
    let (st, p) = ssr::authorize(Permission::View).await?;
    let addr = ssr::client_addr().await;
    let ids: Result<Vec<i64>, _> = delivery_ids
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse::<i64>())
        .collect();
    let ids = ids.map_err(|_| {
        ssr::api_error(converge_server::error::ApiError::bad_request(
            "invalid_request",
            "delivery ids must be numbers",
        ))
    })?;
    let body = RecoverBody {
        since: crate::format::as_rfc3339(Some(since)).unwrap_or_default(),
        delivery_ids: ids,
        reason,
    };
    let done = run_recover(&st, &p, &addr, &endpoint, &body)
        .await
        .map_err(ssr::api_error)?;
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
    let (st, p) = ssr::authorize(Permission::View).await?;
    let addr = ssr::client_addr().await;
    converge_server::ops::webhooks::run_enable(&st, &p, &addr, &endpoint, &reason)
        .await
        .map_err(ssr::api_error)?;
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
    converge_server::ops::webhooks::payment_webhooks(&st, &payment_id)
        .await
        .map_err(ssr::api_error)
}
