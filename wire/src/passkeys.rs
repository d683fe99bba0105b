//! Passkeys for step-up (issue 36) as the console shows them: a user's own passkeys, with
//! nothing of the key, and whether approvals require one.

use serde::{Deserialize, Serialize};

/// One of the signed-in user's passkeys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PasskeyView {
    /// `pk_` + 24 hex.
    pub id: String,
    /// What its owner called it.
    pub name: String,
    /// The signature counter as last accepted (0 for an authenticator without one).
    pub sign_count: i64,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC of its last accepted use, if any.
    pub last_used_at: Option<i64>,
    /// False while it waits for another admin's confirmation (a first passkey registered with
    /// the password alone while approvals require passkeys): until then it proves nothing.
    pub confirmed: bool,
}

/// Whether approvals (of money actions, pauses and privilege requests) require a passkey
/// instead of the password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PasskeyPolicy {
    /// True: a password step-up of an approval is refused (403 `passkey_required`).
    pub required: bool,
    /// The admin who last changed it, if anyone did.
    pub updated_by: Option<String>,
    /// Epoch ms UTC of that change.
    pub updated_at: Option<i64>,
}

/// A ceremony begun: its id (sent back with the browser's answer) and the options for
/// `navigator.credentials.create` or `.get` (the `publicKey` member, base64url buffers, as
/// webauthn-rs writes them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PasskeyChallenge {
    /// The ceremony's id, single use, valid for two minutes.
    pub challenge_id: String,
    /// `{"publicKey": {...}}`: the WebAuthn options, as JSON text.
    pub options: String,
}
