//! The channel's side of invariant 1: the charges it holds, read as one list so every
//! payment's charges can be reconciled against it (sandbox `GET /charges`, paged).

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::channel::Connector;
use crate::channel::http::HttpConnector;

/// A charge as the channel reports it (sandbox `GET /charges`). Amounts in minor units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelCharge {
    /// The channel key it was made under (the payment's `channel_key`).
    pub key: String,
    /// `succeeded` or `declined`; only `succeeded` holds money.
    pub status: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Charge requests the channel saw for the key.
    #[serde(default)]
    pub attempts: i64,
    /// Total refunded against the charge, minor units.
    #[serde(default)]
    pub refunded: i64,
}

impl ChannelCharge {
    /// The charge holds (or held) money.
    pub fn succeeded(&self) -> bool {
        self.status == "succeeded"
    }
}

/// Where the channel's charges come from.
#[async_trait]
pub trait ChargeSource: Send + Sync {
    /// Every charge the channel stores (all pages), or why it could not be read.
    async fn all_charges(&self) -> Result<Vec<ChannelCharge>, String>;
    /// Where the charges come from, for the report (e.g. the channel URL).
    fn describe(&self) -> String;
    /// The connector whose [`query_hold`](Connector::query_hold) answers for the holds of
    /// the payments taken by connector `connector` (invariant 7); `None` (the default):
    /// those holds are checked in the database only.
    fn holds(&self, connector: &str) -> Option<&dyn Connector> {
        let _ = connector;
        None
    }
}

/// Several channels verified as one (the default connector's, and each merchant's own PSP
/// account: issue 38): their charges listed together, each payment's hold asked of the
/// source for its connector (the default source for the default connector's; a hold of a
/// connector with no source is counted as not queried).
#[derive(Default)]
pub struct ChargeSources {
    default: Option<Box<dyn ChargeSource>>,
    named: Vec<(String, Box<dyn ChargeSource>)>,
}

impl ChargeSources {
    /// These sources with `source` as the default connector's (and any other's not named).
    pub fn with_default(mut self, source: Box<dyn ChargeSource>) -> Self {
        self.default = Some(source);
        self
    }

    /// These sources with `source` as connector `name`'s.
    pub fn with_named(mut self, name: &str, source: Box<dyn ChargeSource>) -> Self {
        self.named.push((name.to_owned(), source));
        self
    }

    /// Whether no source was given.
    pub fn is_empty(&self) -> bool {
        self.default.is_none() && self.named.is_empty()
    }

    fn all(&self) -> impl Iterator<Item = &dyn ChargeSource> {
        self.default
            .iter()
            .map(|s| s.as_ref())
            .chain(self.named.iter().map(|(_, s)| s.as_ref()))
    }
}

#[async_trait]
impl ChargeSource for ChargeSources {
    async fn all_charges(&self) -> Result<Vec<ChannelCharge>, String> {
        let mut all = Vec::new();
        for s in self.all() {
            all.extend(s.all_charges().await?);
        }
        Ok(all)
    }

    fn describe(&self) -> String {
        self.all()
            .map(|s| s.describe())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    fn holds(&self, connector: &str) -> Option<&dyn Connector> {
        match self.named.iter().find(|(n, _)| n == connector) {
            Some((_, s)) => s.holds(connector),
            // The default source answers for the default connector only: a hold taken by
            // another (a `--route` connector) is not the sandbox's to answer.
            None if connector == crate::service::connectors::DEFAULT_CONNECTOR => {
                self.default.as_ref()?.holds(connector)
            }
            None => None,
        }
    }
}

/// Reads the sandbox channel's `GET /charges?after=&limit=` pages over HTTP, and its holds
/// through the sandbox's connector ([`HttpConnector`]).
#[derive(Clone)]
pub struct HttpChargeSource {
    base: String,
    client: reqwest::Client,
    connector: HttpConnector,
}

impl std::fmt::Debug for HttpChargeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpChargeSource")
            .field("base", &crate::store::redact(&self.base))
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct ChargePage {
    charges: Vec<ChannelCharge>,
    next: Option<String>,
}

impl HttpChargeSource {
    /// A source for the channel at `base_url` (e.g. `http://127.0.0.1:3100`), each page
    /// bounded by `timeout`. Errors: a one-line reason when the URL is not an http(s) URL.
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, String> {
        match url::Url::parse(base_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && !u.cannot_be_a_base() => {}
            _ => {
                return Err(format!(
                    "--channel-url {:?} is not an http(s) URL such as http://127.0.0.1:3100",
                    crate::store::redact(base_url)
                ));
            }
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("building the HTTP client: {e}"))?;
        Ok(Self {
            base: base_url.trim_end_matches('/').to_string(),
            client,
            connector: HttpConnector::new(base_url, timeout),
        })
    }
}

#[async_trait]
impl ChargeSource for HttpChargeSource {
    async fn all_charges(&self) -> Result<Vec<ChannelCharge>, String> {
        let mut all = Vec::new();
        let mut after = String::new();
        loop {
            let url = format!("{}/charges", self.base);
            let resp = self
                .client
                .get(&url)
                .query(&[("after", after.as_str()), ("limit", "5000")])
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "cannot reach the channel at {}: {}",
                        crate::store::redact(&self.base),
                        e.without_url()
                    )
                })?;
            let status = resp.status();
            if !status.is_success() {
                return Err(format!(
                    "the channel at {} answered {status} to GET /charges (a channel without the bulk charge list cannot be verified)",
                    crate::store::redact(&self.base)
                ));
            }
            let page: ChargePage = resp.json().await.map_err(|e| {
                format!("the channel's GET /charges answer is not a charge page: {e}")
            })?;
            all.extend(page.charges);
            match page.next {
                Some(n) if n > after => after = n,
                _ => return Ok(all),
            }
        }
    }

    fn describe(&self) -> String {
        crate::store::redact(&self.base)
    }

    fn holds(&self, _connector: &str) -> Option<&dyn Connector> {
        Some(&self.connector)
    }
}

/// A merchant's own Stripe account as a channel (issue 38): its sale PaymentIntents under
/// converge's keys ([`StripeConnector::account_charges`]), and its holds asked through the
/// connector itself.
pub struct StripeChargeSource {
    name: String,
    connector: crate::channel::stripe::StripeConnector,
}

impl StripeChargeSource {
    /// The account of connector `name` (`stripe-7`).
    pub fn new(name: &str, connector: crate::channel::stripe::StripeConnector) -> Self {
        Self {
            name: name.to_owned(),
            connector,
        }
    }
}

#[async_trait]
impl ChargeSource for StripeChargeSource {
    async fn all_charges(&self) -> Result<Vec<ChannelCharge>, String> {
        let charges = self
            .connector
            .account_charges()
            .await
            .map_err(|e| format!("connector {}: {e}", self.name))?;
        Ok(charges
            .into_iter()
            .map(|c| ChannelCharge {
                key: c.key,
                status: c.status.to_owned(),
                amount: c.amount,
                currency: c.currency,
                attempts: 1,
                refunded: c.refunded,
            })
            .collect())
    }

    fn describe(&self) -> String {
        format!("connector {}", self.name)
    }

    fn holds(&self, _connector: &str) -> Option<&dyn Connector> {
        Some(&self.connector)
    }
}
