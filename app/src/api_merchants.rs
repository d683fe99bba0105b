//! Server functions of the Merchants page (admins): merchants with their API keys, issuing
//! and revoking keys, adding, freezing and unfreezing merchants. Thin adapters over
//! `converge_server::service::merchants`, the same use cases the CLI (`converge merchant ...`)
//! and the `/ops/v1/merchants/{name}/keys` endpoints call; each change is audited in its own
//! transaction by the signed-in admin (issue 13 "Merchant keys").

use leptos::prelude::*;

use crate::dto::{ConsoleChange, MerchantAccount, MerchantOverview, PrivilegeRequest};

#[cfg(feature = "ssr")]
fn merchant_error(e: converge_server::service::merchants::MerchantError) -> ServerFnError {
    crate::api::ssr::api_error(converge_server::error::ApiError::from(e))
}

/// Merchant `name`'s page in one answer (viewer): its keys for admins, its history for
/// auditors; None when there is no such merchant (issue 41).
#[server(endpoint = "merchant_overview")]
pub async fn load_merchant_overview(
    name: String,
) -> Result<Option<MerchantOverview>, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::View).await?;
    let with_keys = p.require(Permission::ManageUsers).is_ok();
    let with_history = p.require(Permission::Audit).is_ok();
    st.core
        .merchant_overview(&name, with_keys, with_history)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Every merchant with its keys, by name (admin).
#[server(endpoint = "merchant_accounts")]
pub async fn merchant_accounts() -> Result<Vec<MerchantAccount>, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::ManageUsers).await?;
    st.core.merchant_accounts().await.map_err(merchant_error)
}

/// Adds merchant `name` with no key yet, and files its first key as a request another admin
/// approves with step-up, who then sees the key once (admin; issue 36): no admin alone holds
/// a key that moves money. The answer is that request.
#[server(endpoint = "add_merchant")]
pub async fn add_merchant(name: String) -> Result<PrivilegeRequest, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    let (_, r) = st
        .core
        .console_add_merchant(&ssr::actor(&p).await, &name)
        .await
        .map_err(ssr::privilege_error)?;
    Ok(r)
}

/// Asks for another key to merchant `name`: a request another admin approves with step-up,
/// who then sees the key once; the merchant's other keys keep working (admin; issue 36).
#[server(endpoint = "issue_merchant_key")]
pub async fn issue_merchant_key(name: String) -> Result<PrivilegeRequest, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .console_issue_key(&ssr::actor(&p).await, &name)
        .await
        .map_err(ssr::privilege_error)
}

/// Revokes key `key_id` of merchant `name`: 401 for it at once on every server (admin).
#[server(endpoint = "revoke_merchant_key")]
pub async fn revoke_merchant_key(name: String, key_id: String) -> Result<(), ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .revoke_merchant_key(
            st.core.clock.now_ms(),
            &name,
            &key_id,
            &ssr::actor(&p).await,
        )
        .await
        .map_err(merchant_error)
}

/// Freezes (`frozen = true`, at once, with the admin's `reason`: 400 `invalid_reason` without
/// one) or asks to unfreeze merchant `name` (a request another admin approves; issue 36)
/// (admin).
#[server(endpoint = "set_merchant_frozen")]
pub async fn set_merchant_frozen(
    name: String,
    frozen: bool,
    #[server(default)] reason: String,
) -> Result<ConsoleChange<()>, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .console_set_frozen(&ssr::actor(&p).await, &name, frozen, &reason)
        .await
        .map_err(ssr::privilege_error)
}

/// Puts merchant `name`'s new payments on `kind` (admin; issue 38): `sandbox`, the default
/// connector, at once; `stripe`, its own Stripe account at `api_base` with `secret_key` and
/// the webhook signing secrets of `webhook_secrets` (one per line), as a request another
/// admin approves (issue 36: where the money goes is not one admin's choice). Errors: 400
/// `invalid_connector` naming the field, 404, 409 `privilege_pending`.
#[server(endpoint = "set_merchant_connector")]
pub async fn set_merchant_connector(
    name: String,
    kind: String,
    #[server(default)] api_base: String,
    #[server(default)] secret_key: String,
    #[server(default)] webhook_secrets: String,
    #[server(default)] reason: String,
) -> Result<ConsoleChange<()>, ServerFnError> {
    use crate::api::ssr;
    use converge_server::domain::roles::Permission;
    use converge_server::service::merchant_connectors::ConnectorChoice;
    use converge_server::service::merchants::MerchantError;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    let choice = match kind.as_str() {
        "sandbox" => ConnectorChoice::Default,
        "stripe" => ConnectorChoice::Stripe {
            api_base: api_base.trim().to_owned(),
            secret_key: secret_key.trim().to_owned(),
            webhook_secrets: webhook_secrets
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
            payment_method: None,
        },
        other => {
            return Err(merchant_error(MerchantError::InvalidConnector(format!(
                "kind must be sandbox or stripe, not {other:?}"
            ))));
        }
    };
    st.core
        .console_set_merchant_connector(&ssr::actor(&p).await, &name, &choice, &reason)
        .await
        .map_err(ssr::privilege_error)
}
