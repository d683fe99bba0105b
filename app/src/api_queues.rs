//! Server functions of the work queues (issue 17): the error pool by kind and paged, its
//! bulk resolve (preview, then confirm with one note), an item's own action (issue 41), and
//! the audit viewer's list. Thin
//! adapters over `converge_server::service::error_pool` and `Core::audit_list`, with the
//! same roles and refusals (status and stable code) as the `/ops/v1` endpoints.

use leptos::prelude::*;

use crate::dto::{
    AuditList, AuditListQuery, ErrorItem, ItemActionOutcome, PoolPage, ResolveOutcome,
};

#[cfg(feature = "ssr")]
fn action_error(e: converge_server::service::actions::ActionError) -> ServerFnError {
    crate::api::ssr::api_error(converge_server::error::ApiError::from(e))
}

/// Page `page` (from 0) of the error pool with `status` (`open`, `resolved`; both when
/// None) and `kind`, or only item `id`, grouped by kind, with the kinds and their counts
/// (viewer).
#[server(endpoint = "error_pool_page")]
pub async fn error_pool_page(
    status: Option<String>,
    kind: Option<String>,
    id: Option<i64>,
    page: Option<i64>,
) -> Result<PoolPage, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = crate::api::ssr::authorize(Permission::View).await?;
    let p = st
        .core
        .error_pool_page(status.as_deref(), kind.as_deref(), id, page.unwrap_or(0))
        .await
        .map_err(action_error)?;
    Ok(p)
}

/// Runs the action open error-pool item `id` offers (the one its kind calls for: redeliver,
/// replay, retry or query) with `reason` (operator), as `POST /ops/v1/error-pool/{id}/act`
/// does; what it did, as the server counted it.
#[server(endpoint = "act_on_error_item")]
pub async fn act_on_error_item(
    id: i64,
    reason: String,
) -> Result<ItemActionOutcome, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = crate::api::ssr::authorize(Permission::RequestActions).await?;
    st.core
        .act_on_error_item(&crate::api::ssr::actor(&p).await, id, &reason)
        .await
        .map_err(action_error)
}

/// The open items a bulk resolve would resolve now (operator): those of `kind` (all kinds
/// when None), or only the items `ids`.
#[server(endpoint = "bulk_resolve_preview")]
pub async fn bulk_resolve_preview(
    kind: Option<String>,
    ids: Option<Vec<i64>>,
) -> Result<Vec<ErrorItem>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::error_pool::ResolveSelection;
    let (st, _) = crate::api::ssr::authorize(Permission::ResolveErrors).await?;
    let items = st
        .core
        .bulk_resolve_preview(&ResolveSelection { kind, ids })
        .await
        .map_err(action_error)?;
    Ok(items)
}

/// Resolves the previewed `(id, occurrences)` items still open, in the selection and not
/// reported again, each with `note` and its own audit record (operator).
#[server(endpoint = "bulk_resolve")]
pub async fn bulk_resolve(
    kind: Option<String>,
    ids: Option<Vec<i64>>,
    items: Vec<(i64, i64)>,
    note: String,
) -> Result<ResolveOutcome, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::error_pool::{ConfirmedItem, ResolveSelection};
    let (st, p) = crate::api::ssr::authorize(Permission::ResolveErrors).await?;
    let items: Vec<ConfirmedItem> = items
        .into_iter()
        .map(|(id, occurrences)| ConfirmedItem { id, occurrences })
        .collect();
    let out = st
        .core
        .bulk_resolve(
            &crate::api::ssr::actor(&p).await,
            &ResolveSelection { kind, ids },
            &items,
            &note,
        )
        .await
        .map_err(action_error)?;
    Ok(out)
}

/// The actions the audit log holds, for the action filter's list (auditor; issue 41).
#[server(endpoint = "audit_actions")]
pub async fn audit_actions() -> Result<Vec<String>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = crate::api::ssr::authorize(Permission::Audit).await?;
    st.core
        .audit_actions()
        .await
        .map_err(|e| crate::api::ssr::api_error(e.into()))
}

/// One page of the audit log matching `query`, newest first, 50 a page (auditor).
#[server(endpoint = "audit_list")]
pub async fn load_audit_list(
    // Default when absent: a query without filters has no fields to encode.
    #[server(default)] query: AuditListQuery,
) -> Result<AuditList, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = crate::api::ssr::authorize(Permission::Audit).await?;
    let q = AuditListQuery {
        from: crate::format::as_rfc3339(query.from),
        to: crate::format::as_rfc3339(query.to),
        limit: Some(50),
        ..query
    };
    let page = st
        .core
        .audit_list(&q)
        .await
        .map_err(|e| crate::api::ssr::api_error(e.into()))?;
    Ok(page)
}
