//! A merchant's own PSP account (issue 38): which connector its new payments go to, set by
//! `converge merchant connector` or an admin on the merchants page, audited in the same
//! transaction; the account's secret key and webhook signing secrets sealed at rest
//! ([`Purpose::ConnectorSecret`]) and never shown again but for the key's last four
//! characters. Every process installs the accounts from the store
//! ([`Core::refresh_connectors`]) at start, after a change it made, and every
//! [`REFRESH_EVERY`] (a change made by another process).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::Core;
use super::actor::Actor;
use super::connectors::{Account, account_name};
use super::merchants::MerchantError;
use crate::channel::Connector;
use crate::channel::stripe::{DEFAULT_PAYMENT_METHOD, StripeConnector, StripeSettings};
use crate::domain::secret_box::Purpose;
use crate::store::{MerchantConnector, NewMerchantConnector, StoreError};

/// How often a process installs the accounts again from the store.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// Bound on each request to a merchant's PSP (Stripe's own libraries wait up to 80 s; a
/// payment whose answer takes longer becomes UNKNOWN and is queried).
pub const ACCOUNT_TIMEOUT: Duration = Duration::from_secs(20);
/// Most webhook signing secrets an account keeps at once (the current and those being rolled).
pub const MAX_WEBHOOK_SECRETS: usize = 4;

/// Where a merchant's new payments go. Its `Debug` leaves the secrets out.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConnectorChoice {
    /// The default connector (the sandbox, or `--channel-url`); an account the merchant had
    /// is kept for the payments still open on it.
    Default,
    /// The merchant's own Stripe account.
    Stripe {
        /// API base URL (`https://api.stripe.com`, or a Stripe fake's in tests).
        api_base: String,
        /// Secret or restricted key (`sk_...`, `rk_...`).
        secret_key: String,
        /// Webhook signing secrets (`whsec_...`), at most [`MAX_WEBHOOK_SECRETS`].
        webhook_secrets: Vec<String>,
        /// PaymentMethod to confirm with; `None`: [`DEFAULT_PAYMENT_METHOD`].
        payment_method: Option<String>,
    },
}

impl std::fmt::Debug for ConnectorChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectorChoice::Default => f.write_str("Default"),
            ConnectorChoice::Stripe {
                api_base,
                secret_key,
                ..
            } => f
                .debug_struct("Stripe")
                .field("api_base", &crate::store::redact(api_base))
                .field("key", &hint(secret_key))
                .finish_non_exhaustive(),
        }
    }
}

/// A merchant's account as it may be shown: no secret, the key's last four characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountView {
    /// The merchant's name.
    pub merchant: String,
    /// The connector's name (`stripe-7`): payments show it, and its webhooks arrive at
    /// `/v1/connectors/<name>/callbacks`.
    pub connector: String,
    /// `stripe`.
    pub kind: String,
    /// Whether the merchant's new payments go to it.
    pub routed: bool,
    /// The PSP's API base URL.
    pub api_base: String,
    /// `…` and the secret key's last four characters.
    pub key_hint: String,
    /// Epoch ms UTC of the last change.
    pub updated_at: i64,
}

fn bad(why: impl Into<String>) -> MerchantError {
    MerchantError::InvalidConnector(why.into())
}

/// Checks `choice` (a Stripe account's settings; the reason names the field) and says what it
/// is without its secrets (`stripe at <api base>, key …wxyz`).
pub(super) fn check_choice(choice: &ConnectorChoice) -> Result<String, MerchantError> {
    match choice {
        ConnectorChoice::Default => Ok("the default connector".into()),
        ConnectorChoice::Stripe {
            api_base,
            secret_key,
            webhook_secrets,
            payment_method,
        } => {
            check_stripe(
                api_base,
                secret_key,
                webhook_secrets,
                payment_method.as_deref(),
            )?;
            Ok(format!(
                "its own Stripe account at {api_base}, key {}",
                hint(secret_key)
            ))
        }
    }
}

/// Checks a Stripe account's settings; the reason names the field.
fn check_stripe(
    api_base: &str,
    secret_key: &str,
    webhook_secrets: &[String],
    payment_method: Option<&str>,
) -> Result<(), MerchantError> {
    let url = url::Url::parse(api_base).map_err(|e| bad(format!("api base: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(bad("api base must be an http(s) URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("api base must not carry a user or password"));
    }
    let token = |s: &str| {
        (8..=255).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic() && b != b',')
    };
    if !(secret_key.starts_with("sk_") || secret_key.starts_with("rk_")) || !token(secret_key) {
        return Err(bad(
            "secret key must be a Stripe secret or restricted key (sk_... or rk_...)",
        ));
    }
    if webhook_secrets.len() > MAX_WEBHOOK_SECRETS {
        return Err(bad(format!(
            "at most {MAX_WEBHOOK_SECRETS} webhook signing secrets"
        )));
    }
    if webhook_secrets
        .iter()
        .any(|w| !w.starts_with("whsec_") || !token(w))
    {
        return Err(bad("webhook signing secrets must be whsec_..."));
    }
    if payment_method.is_some_and(|p| !p.starts_with("pm_") || !token(p)) {
        return Err(bad("payment method must be a PaymentMethod id (pm_...)"));
    }
    Ok(())
}

fn hint(secret_key: &str) -> String {
    let tail: String = secret_key
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("…{tail}")
}

impl Core {
    /// Sets where merchant `name`'s new payments go (audited `merchant_connector_set` with
    /// `reason`, the account shown without its secrets), then installs the accounts in this
    /// process. Payments already made stay on the connector they were made on. Errors:
    /// [`MerchantError::NoMerchant`], [`MerchantError::InvalidConnector`] (which field), the
    /// store's.
    pub async fn set_merchant_connector(
        &self,
        now: i64,
        name: &str,
        choice: &ConnectorChoice,
        reason: &str,
        actor: &Actor,
    ) -> Result<(), MerchantError> {
        let before = self
            .merchant_accounts_view()
            .await?
            .into_iter()
            .find(|a| a.merchant == name)
            .filter(|a| a.routed)
            .map_or(json!({"connector": "default"}), |a| shown(&a));
        check_choice(choice)?;
        self.check_replacement(name, choice).await?;
        let account = match choice {
            ConnectorChoice::Default => None,
            ConnectorChoice::Stripe {
                api_base,
                secret_key,
                webhook_secrets,
                payment_method,
            } => Some(NewMerchantConnector {
                kind: "stripe".into(),
                api_base: api_base.clone(),
                secret_key: self.secrets.seal_text(Purpose::ConnectorSecret, secret_key),
                webhook_secrets: self
                    .secrets
                    .seal_text(Purpose::ConnectorSecret, &webhook_secrets.join("\n")),
                key_hint: hint(secret_key),
                payment_method: payment_method
                    .clone()
                    .unwrap_or_else(|| DEFAULT_PAYMENT_METHOD.into()),
            }),
        };
        let after = account
            .as_ref()
            .map_or(json!({"connector": "default"}), |a| {
                json!({"connector": a.kind, "api_base": a.api_base, "key": a.key_hint,
                "webhook_secrets": match choice {
                    ConnectorChoice::Stripe { webhook_secrets, .. } => webhook_secrets.len(),
                    ConnectorChoice::Default => 0,
                }})
            });
        let audit = actor.entry(
            now,
            "merchant_connector_set",
            &format!("merchant:{name}"),
            reason.trim(),
            before.to_string(),
            after.to_string(),
        );
        if !self
            .store
            .set_merchant_connector_audited(name, account.as_ref(), now, &audit)
            .await?
        {
            return Err(MerchantError::NoMerchant(name.to_owned()));
        }
        self.refresh_connectors().await?;
        Ok(())
    }

    /// Where each merchant routed to its own account sends its new payments, by merchant id
    /// (merchants absent are on the default connector).
    pub async fn merchant_connector_views(
        &self,
    ) -> Result<
        std::collections::HashMap<i64, converge_wire::merchants::MerchantConnectorView>,
        StoreError,
    > {
        Ok(self
            .store
            .merchant_connectors()
            .await?
            .into_iter()
            .filter(|c| c.routed)
            .map(|c| {
                let view = converge_wire::merchants::MerchantConnectorView {
                    connector: account_name(&c.kind, c.merchant_id),
                    kind: c.kind,
                    api_base: Some(c.api_base),
                    key_hint: Some(c.key_hint),
                };
                (c.merchant_id, view)
            })
            .collect())
    }

    /// Refuses a Stripe account that would replace the one merchant `name` has (another API
    /// base or secret key): the payments made on it go on being queried, captured and
    /// refunded under its connector's name, so a new account under that name would answer
    /// for them wrongly (a charge not found, resubmitted or fenced on the wrong account).
    /// The same account with other webhook signing secrets, or routed again, is fine.
    /// Errors: [`MerchantError::InvalidConnector`], the store's.
    pub(super) async fn check_replacement(
        &self,
        name: &str,
        choice: &ConnectorChoice,
    ) -> Result<(), MerchantError> {
        let ConnectorChoice::Stripe {
            api_base,
            secret_key,
            ..
        } = choice
        else {
            return Ok(());
        };
        let rows = self.store.merchant_connectors().await?;
        let Some(row) = rows.iter().find(|r| r.merchant_name == name) else {
            return Ok(());
        };
        let same_key = self
            .secrets
            .open_text(Purpose::ConnectorSecret, &row.secret_key)
            .is_ok_and(|k| k.as_ref() == secret_key.as_str());
        if row.api_base == *api_base && same_key {
            return Ok(());
        }
        Err(bad(format!(
            "merchant {name:?} already has a Stripe account at {} (key {}): payments made there are still answered by it, so it cannot be replaced by another account or key (only its webhook signing secrets, and whether new payments go to it, change)",
            crate::store::redact(&row.api_base),
            row.key_hint
        )))
    }

    /// Every merchant's own account, without secrets.
    pub async fn merchant_accounts_view(&self) -> Result<Vec<AccountView>, StoreError> {
        Ok(self
            .store
            .merchant_connectors()
            .await?
            .into_iter()
            .map(|c| AccountView {
                connector: account_name(&c.kind, c.merchant_id),
                merchant: c.merchant_name,
                kind: c.kind,
                routed: c.routed,
                api_base: c.api_base,
                key_hint: c.key_hint,
                updated_at: c.updated_at,
            })
            .collect())
    }

    /// Installs the merchants' accounts from the store into this process's connectors (an
    /// unchanged account keeps its connector). An account whose secrets do not open under
    /// this process's key is left out and logged: its payments wait undecided, never failed.
    /// Returns how many are installed. Errors: the store's.
    pub async fn refresh_connectors(&self) -> Result<usize, StoreError> {
        let rows = self.store.merchant_connectors().await?;
        let accounts = rows
            .iter()
            .map(|c| Account {
                name: account_name(&c.kind, c.merchant_id),
                merchant_id: c.merchant_id,
                routed: c.routed,
                stamp: c.updated_at,
            })
            .collect::<Vec<_>>();
        let count = accounts.len();
        self.connectors.install_accounts(accounts, |a| {
            let row = rows.iter().find(|r| r.merchant_id == a.merchant_id)?;
            match self.account_connector(row) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::error!(connector = %a.name, error = %e, "a merchant's PSP account cannot be used");
                    None
                }
            }
        });
        Ok(count)
    }

    /// Every merchant's own Stripe account as a connector of its own (for `converge verify`,
    /// which reads each account's charges), with its connector name. Errors: the store's, or
    /// an account whose secrets do not open under this process's key (one line naming it).
    pub async fn stripe_accounts(&self) -> Result<Vec<(String, StripeConnector)>, String> {
        let rows = self
            .store
            .merchant_connectors()
            .await
            .map_err(|e| e.to_string())?;
        rows.iter()
            .filter(|r| r.kind == "stripe")
            .map(|r| {
                let name = account_name(&r.kind, r.merchant_id);
                let c = self
                    .stripe_connector(r)
                    .map_err(|e| format!("connector {name}: {e}"))?;
                Ok((name, c))
            })
            .collect()
    }

    fn account_connector(&self, row: &MerchantConnector) -> Result<Arc<dyn Connector>, String> {
        match row.kind.as_str() {
            "stripe" => Ok(Arc::new(self.stripe_connector(row)?)),
            other => Err(format!("unknown connector kind {other:?}")),
        }
    }

    fn stripe_connector(&self, row: &MerchantConnector) -> Result<StripeConnector, String> {
        let open = |sealed: &str| {
            self.secrets
                .open_text(Purpose::ConnectorSecret, sealed)
                .map(|s| s.into_owned())
                .map_err(|e| e.to_string())
        };
        Ok(StripeConnector::new(StripeSettings {
            api_base: row.api_base.clone(),
            secret_key: open(&row.secret_key)?,
            webhook_secrets: open(&row.webhook_secrets)?
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
            payment_method: row.payment_method.clone(),
            timeout: ACCOUNT_TIMEOUT,
        }))
    }
}

/// Installs the accounts again every `every` (a change another process made), until the task
/// is dropped; a failed read is logged and tried again at the next tick.
pub async fn refresh_every(core: Core, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = core.refresh_connectors().await {
            tracing::warn!(error = %e, "could not read the merchants' connectors; trying again");
        }
    }
}

fn shown(a: &AccountView) -> serde_json::Value {
    json!({"connector": a.kind, "api_base": a.api_base, "key": a.key_hint})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stripe_account_is_checked_field_by_field() {
        let ok = |b: &str, k: &str, w: &[&str], pm: Option<&str>| {
            let w: Vec<String> = w.iter().map(|s| s.to_string()).collect();
            check_stripe(b, k, &w, pm)
        };
        assert!(
            ok(
                "https://api.stripe.com",
                "sk_test_abcdef12",
                &["whsec_abcdefgh"],
                None
            )
            .is_ok()
        );
        for (b, k, w, pm, field) in [
            ("ftp://x", "sk_test_abcdef12", &[][..], None, "api base"),
            (
                "https://api.stripe.com",
                "pk_test_abcdef12",
                &[],
                None,
                "secret key",
            ),
            (
                "https://api.stripe.com",
                "sk_test abc",
                &[],
                None,
                "secret key",
            ),
            (
                "https://api.stripe.com",
                "sk_test_abcdef12",
                &["secret12"],
                None,
                "webhook",
            ),
            (
                "https://api.stripe.com",
                "sk_test_abcdef12",
                &[],
                Some("card_1"),
                "payment method",
            ),
        ] {
            let e = ok(b, k, w, pm).unwrap_err().to_string();
            assert!(e.contains(field), "{e} should name {field}");
        }
    }

    #[test]
    fn only_the_last_four_characters_of_a_key_are_shown() {
        assert_eq!(hint("sk_test_0123456789wxyz"), "…wxyz");
    }
}
