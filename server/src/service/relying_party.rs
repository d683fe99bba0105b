//! The relying party of the console's passkeys (issue 36; W3C Web Authentication Level 3,
//! §5.1 "relying party"): the WebAuthn verifier for one origin (`--webauthn-origin`), which
//! registration ([`super::passkeys`]) and step-up ([`super::step_up`]) both use. A module of
//! its own so that neither of those imports the other for it.

use webauthn_rs::prelude::{Url, Webauthn, WebauthnBuilder};

/// How long a begun ceremony may be finished (ms): the browser's own timeout is the same.
pub const CHALLENGE_TTL_MS: i64 = 120_000;

/// The relying party: this console's WebAuthn verifier, for one origin (`--webauthn-origin`).
pub struct RelyingParty {
    pub(super) webauthn: Webauthn,
    origin: Url,
}

impl std::fmt::Debug for RelyingParty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelyingParty")
            .field("origin", &self.origin.as_str())
            .finish()
    }
}

impl RelyingParty {
    /// The relying party of `origin`: its host is the relying party id. Errors: a message
    /// when the origin names no host (an IP address cannot be a relying party id).
    pub fn new(origin: &Url) -> Result<Self, String> {
        let rp_id = origin
            .domain()
            .ok_or_else(|| format!("the WebAuthn origin {origin} names no host"))?;
        let webauthn = WebauthnBuilder::new(rp_id, origin)
            .and_then(|b| {
                b.rp_name("converge")
                    .timeout(std::time::Duration::from_millis(CHALLENGE_TTL_MS as u64))
                    .build()
            })
            .map_err(|e| format!("the WebAuthn origin {origin} is not usable: {e}"))?;
        Ok(RelyingParty {
            webauthn,
            origin: origin.clone(),
        })
    }

    /// The origin the browser's answers must come from.
    pub fn origin(&self) -> &Url {
        &self.origin
    }
}
