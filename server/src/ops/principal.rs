//! The signed-in user as an axum extractor, and the role check every endpoint makes. A
//! request with [`super::session::BACKGROUND_HEADER`] does not count as the person's activity.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use converge_wire::ErrorCode;
use tower_sessions::Session;

use super::OpsState;
pub use super::auth::Principal;
use crate::domain::roles::{Permission, allows};
use crate::error::ApiError;

impl FromRequestParts<OpsState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &OpsState) -> Result<Self, Self::Rejection> {
        let session = Session::from_request_parts(parts, st)
            .await
            .map_err(|_| ApiError::internal("session layer missing"))?;
        let now = st.core.clock.now_ms();
        let activity = super::session::Activity::of(&parts.headers);
        st.auth
            .current(st.core.store.as_ref(), &session, now, activity)
            .await?
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    ErrorCode::NotAuthenticated,
                    "sign in first",
                )
            })
    }
}

impl Principal {
    /// Ok when the user holds `permission`, else 403 `forbidden`.
    pub fn require(&self, permission: Permission) -> Result<(), ApiError> {
        if allows(&self.roles, permission) {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "your roles do not allow this",
            ))
        }
    }
}
