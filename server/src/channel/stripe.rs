//! [`StripeConnector`]: the [`Connector`] contract over Stripe's PaymentIntents API (issue 38;
//! Stripe API reference: PaymentIntents, Refunds, Idempotent requests, Errors, Webhook
//! signatures). Form-encoded requests with a secret key as the Basic user, one PaymentIntent
//! per channel key.
//!
//! # How the contract maps onto Stripe
//! - The channel key is the PaymentIntent's `metadata[converge_key]` and the `Idempotency-Key`
//!   of its create, so a create repeated after a timeout is the same request at Stripe.
//!   Captures, voids and refunds carry idempotency keys derived from their own keys.
//! - A PaymentIntent is found by its id when this process saw the create's answer, else by
//!   the channel key: Stripe's search (`metadata['converge_key']`), or, where the server has no
//!   search (both Stripe fakes the tests use), the list of PaymentIntents.
//! - The fence (`cancel` of a key with nothing under it, a `void` of an unused key) is a
//!   PaymentIntent created under the key's own `Idempotency-Key` and cancelled at once
//!   (`metadata[converge_fence]`). A late create with that key is then either the fence again
//!   (Stripe answers the first answer) or an `idempotency_error`; both read as `Cancelled`.
//! - Stripe captures a PaymentIntent once: every capture closes the hold (the rest is
//!   released), so `Captured.closed` is always `true`. The hold lapses when the core's TTL
//!   runs out (at most Stripe's 7 days): a capture or query after that cancels the
//!   PaymentIntent (marked `metadata[converge_expired]`) and answers `Expired`.
//! - The statement of a day is the account's balance transactions of that day that are
//!   charges (gross `amount`, Stripe's `created`), each under the channel key of its
//!   PaymentIntent, or `stripe:<charge id>` for a charge converge did not make (so
//!   reconciliation reports it instead of missing it).
//! - Which Stripe answers are declines, which are undecidable and which are the merchant's
//!   configuration is decided in one table, [`decide`].
//!
//! The merchant API carries no card, so every PaymentIntent is confirmed with the connector's
//! configured PaymentMethod (`pm_card_visa` in test mode).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use url::Url;

use super::signature::{self, SignatureError};
use super::{
    AuthorizeOutcome, CallbackFact, CallbackRejection, CancelOutcome, CaptureOutcome,
    ChargeOutcome, Connector, HoldQueryOutcome, HoldStatus, QueryOutcome, RefundOutcome,
    StatementError, Unsupported, VoidOutcome,
};

/// Name of the header Stripe signs its webhooks in (`t=<unix secs>,v1=<hex>[,v1=...]`).
pub const STRIPE_SIGNATURE_HEADER: &str = "Stripe-Signature";
/// Stripe's default webhook tolerance, seconds (the official libraries' `DEFAULT_TOLERANCE`).
pub const WEBHOOK_TOLERANCE_SECS: i64 = 300;
/// Longest a card authorization stays capturable at Stripe, seconds (7 days).
pub const MAX_HOLD_SECS: i64 = 7 * 86_400;
/// The PaymentMethod confirmed when none is configured: Stripe's test Visa card.
pub const DEFAULT_PAYMENT_METHOD: &str = "pm_card_visa";

const META_KEY: &str = "converge_key";
const META_FENCE: &str = "converge_fence";
const META_TTL: &str = "converge_hold_ttl_secs";
const META_CAPTURE: &str = "converge_capture_key";
const META_CAPTURED: &str = "converge_capture_amount";
const META_EXPIRED: &str = "converge_expired";
const META_REFUND: &str = "converge_refund_key";
/// A PaymentIntent list page, the largest Stripe allows.
const PAGE: &str = "100";
/// Known channel keys' PaymentIntent ids kept at most (then forgotten, found again by key).
const KNOWN_MAX: usize = 100_000;
const DETAIL_BODY_MAX: usize = 200;

/// Settings of one Stripe account.
#[derive(Clone)]
pub struct StripeSettings {
    /// API base, e.g. `https://api.stripe.com` (a fake's URL in tests).
    pub api_base: String,
    /// The secret key (`sk_...`), sent as the Basic user; never logged.
    pub secret_key: String,
    /// Webhook signing secrets (`whsec_...`): several while one is rolled; empty: inbound
    /// webhooks are refused as unsupported.
    pub webhook_secrets: Vec<String>,
    /// The PaymentMethod every PaymentIntent is confirmed with ([`DEFAULT_PAYMENT_METHOD`]).
    pub payment_method: String,
    /// Bound on each request (connect, send, whole body).
    pub timeout: Duration,
}

impl std::fmt::Debug for StripeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets stay out: connectors end up in logs.
        f.debug_struct("StripeSettings")
            .field("api_base", &crate::store::redact(&self.api_base))
            .field("payment_method", &self.payment_method)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A [`Connector`] for one Stripe account (see the module documentation for the mapping).
pub struct StripeConnector {
    settings: StripeSettings,
    base: Result<Url, String>,
    client: Result<reqwest::Client, String>,
    /// Channel key → PaymentIntent id, learnt from answers (retrieval by id is exact; search
    /// may lag behind a create at Stripe).
    known: Mutex<HashMap<String, String>>,
    /// Set once the server answered that it has no search: list instead from then on.
    no_search: AtomicBool,
}

impl std::fmt::Debug for StripeConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeConnector")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// A PaymentIntent, the fields the connector reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Intent {
    /// `pi_...`.
    pub id: String,
    /// Minor units.
    pub amount: i64,
    /// Captured (or charged) so far, minor units; localstripe leaves it out (see
    /// [`Intent::received`]).
    #[serde(default)]
    pub amount_received: Option<i64>,
    /// `automatic`, `automatic_async` or `manual` (a hold).
    #[serde(default)]
    pub capture_method: Option<String>,
    /// Lowercase ISO 4217, as Stripe writes it.
    pub currency: String,
    /// `requires_payment_method`, `requires_confirmation`, `requires_action`, `processing`,
    /// `requires_capture`, `canceled` or `succeeded`.
    pub status: String,
    /// Unix seconds, Stripe's clock.
    #[serde(default)]
    pub created: i64,
    #[serde(default)]
    metadata: HashMap<String, String>,
    #[serde(default)]
    cancellation_reason: Option<String>,
    #[serde(default)]
    last_payment_error: Option<ErrorDetail>,
    /// What the customer must do while `requires_action` (`{"type": "redirect_to_url", ...}`
    /// or `use_stripe_sdk`): only its `type` is read, for the payment's detail.
    #[serde(default)]
    next_action: Option<serde_json::Value>,
}

impl Intent {
    fn meta(&self, name: &str) -> Option<&str> {
        self.metadata.get(name).map(String::as_str)
    }
    fn is_fence(&self) -> bool {
        self.meta(META_FENCE).is_some()
    }
    fn is_hold(&self) -> bool {
        self.capture_method.as_deref() == Some("manual")
    }
    /// What was charged or captured, minor units: Stripe's `amount_received`; where a
    /// server leaves it out (localstripe), the whole amount of a charge, or the amount this
    /// connector recorded on the hold before capturing it.
    fn received(&self) -> i64 {
        if let Some(r) = self.amount_received {
            return r;
        }
        match (self.status.as_str(), self.is_hold()) {
            ("succeeded", false) => self.amount,
            ("succeeded", true) => self
                .meta(META_CAPTURED)
                .and_then(|a| a.parse().ok())
                .unwrap_or(self.amount),
            _ => 0,
        }
    }
    fn currency(&self) -> String {
        self.currency.to_ascii_uppercase()
    }
    /// The customer's pending step, as the payment's detail: the PaymentIntent and the
    /// `next_action` type (`pi_…: redirect_to_url`).
    fn action_detail(&self) -> String {
        let kind = self
            .next_action
            .as_ref()
            .and_then(|a| a.get("type"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("authentication");
        format!("{}: {kind}", self.id)
    }
    fn decline_reason(&self) -> String {
        self.last_payment_error
            .as_ref()
            .map(ErrorDetail::reason)
            .unwrap_or_else(|| "declined".to_owned())
    }
    /// When the hold lapses, epoch ms: its creation plus the TTL asked (at most 7 days). A
    /// PaymentIntent without its creation time is taken as made now, never as long expired.
    fn expires_at_ms(&self) -> i64 {
        let created = if self.created > 0 {
            self.created
        } else {
            now_ms() / 1000
        };
        let ttl = self
            .meta(META_TTL)
            .and_then(|t| t.parse::<i64>().ok())
            .unwrap_or(MAX_HOLD_SECS)
            .clamp(1, MAX_HOLD_SECS);
        created.saturating_add(ttl).saturating_mul(1000)
    }
    /// Rank for choosing among several PaymentIntents under one key (a server that ignores
    /// `Idempotency-Key`): money taken first, so a charge is never hidden behind a fence.
    fn rank(&self) -> u8 {
        match self.status.as_str() {
            "succeeded" => 0,
            "requires_capture" => 1,
            "canceled" if self.is_fence() => 3,
            "canceled" | "requires_payment_method" => 4,
            _ => 2,
        }
    }
}

/// Stripe's `error` object.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorDetail {
    /// `card_error`, `invalid_request_error`, `idempotency_error`, `api_error`, ...
    #[serde(rename = "type", default)]
    pub kind: String,
    /// E.g. `card_declined`, `resource_missing`, `amount_too_large`.
    #[serde(default)]
    pub code: Option<String>,
    /// For card declines, the issuer's reason (`insufficient_funds`, `generic_decline`).
    #[serde(default)]
    pub decline_code: Option<String>,
    /// Human-readable.
    #[serde(default)]
    pub message: Option<String>,
}

impl ErrorDetail {
    fn reason(&self) -> String {
        self.decline_code
            .clone()
            .or_else(|| self.code.clone())
            .unwrap_or_else(|| {
                if self.kind.is_empty() {
                    "declined".to_owned()
                } else {
                    self.kind.clone()
                }
            })
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

/// What a Stripe error answer means for the payment: the one table (issue 38, after
/// Hyperswitch's per-connector error mapping; Stripe API reference "Errors").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The card was declined (HTTP 402, `card_error`): definitive, nothing was charged.
    Declined(String),
    /// Stripe refused the request as invalid (HTTP 400 `invalid_request_error`, or 404
    /// `resource_missing`): definitive, nothing was done; the reason is Stripe's code.
    Refused(String),
    /// The idempotency key was used before with other parameters (`idempotency_error`):
    /// nothing new was done; what the key holds decides.
    KeyReused,
    /// The account's configuration is wrong (401, 403: bad or restricted key): nothing was
    /// done, but only the operator can fix it, so the payment waits undecided.
    Configuration(String),
    /// Rate limits (429), a concurrent request on the key (409), Stripe's own errors (5xx),
    /// or anything unrecognised: undecidable, ask again.
    Undecidable(String),
}

impl Decision {
    /// The decision as an undecidable answer's detail.
    fn detail(self) -> String {
        match self {
            Decision::Configuration(d) | Decision::Undecidable(d) => d,
            Decision::Declined(r) => format!("declined: {r}"),
            Decision::Refused(r) => format!("refused: {r}"),
            Decision::KeyReused => "the idempotency key was used with other parameters".into(),
        }
    }
}

/// The decision table: an HTTP status and Stripe's `error` object (if the body had one) to a
/// [`Decision`]. Only statuses Stripe documents as definitive are; everything else is
/// undecidable (seed 004: never mark FAILED on an answer that cannot be decided).
pub fn decide(status: u16, error: Option<&ErrorDetail>) -> Decision {
    let detail = |e: Option<&ErrorDetail>| {
        let e = e.cloned().unwrap_or_default();
        format!(
            "stripe {status} {} {}: {}",
            e.kind,
            e.code.as_deref().unwrap_or("-"),
            e.message.as_deref().unwrap_or("")
        )
    };
    match (status, error) {
        // 402 is "the parameters were valid but the request failed" (Stripe, "Errors"):
        // nothing was charged, whatever the error's type (localstripe says
        // `invalid_request_error` where Stripe says `card_error`).
        (402, Some(e)) => Decision::Declined(e.reason()),
        (400, Some(e)) if e.kind == "idempotency_error" => Decision::KeyReused,
        (400, Some(e)) if e.kind == "card_error" => Decision::Declined(e.reason()),
        (400 | 404, Some(e)) if e.kind == "invalid_request_error" => {
            Decision::Refused(e.code.clone().unwrap_or_else(|| "invalid_request".into()))
        }
        (401 | 403, e) => Decision::Configuration(detail(e)),
        (_, e) => Decision::Undecidable(detail(e)),
    }
}

/// An answer the connector cannot use: the reason is the detail of an `Error` outcome.
type Fail = String;

enum Found {
    Intent(Box<Intent>),
    /// Nothing under the key in the whole list: definitive.
    None,
    /// Nothing under the key in Stripe's search, which may lag behind a create by a minute
    /// or more: not evidence that nothing was made.
    Unseen,
}

impl StripeConnector {
    /// A connector for the account of `settings`. A bad URL does not panic: every call then
    /// answers `Error`.
    pub fn new(settings: StripeSettings) -> Self {
        let shown = crate::store::redact(&settings.api_base);
        let base = Url::parse(&settings.api_base)
            .map_err(|e| format!("bad stripe api base {shown:?}: {e}"))
            .and_then(|u| match u.scheme() {
                "http" | "https" if !u.cannot_be_a_base() => Ok(u),
                _ => Err(format!("stripe api base {shown:?} is not an http(s) url")),
            });
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .pool_idle_timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| format!("building http client: {e}"));
        Self {
            settings,
            base,
            client,
            known: Mutex::new(HashMap::new()),
            no_search: AtomicBool::new(false),
        }
    }

    fn url(&self, path: &[&str]) -> Result<Url, Fail> {
        let mut url = self.base.clone()?;
        url.path_segments_mut()
            .map_err(|_| "stripe api base cannot take a path".to_owned())?
            .pop_if_empty()
            .push("v1")
            .extend(path);
        Ok(url)
    }

    /// One request: `form` as the body of a POST (or the query of a GET), `idempotency` as
    /// the `Idempotency-Key`. The answer's status and body, or why there was none.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &[&str],
        form: &[(&str, String)],
        idempotency: Option<&str>,
    ) -> Result<(u16, bytes::Bytes), Fail> {
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let url = self.url(path)?;
        let mut req = client
            .request(method.clone(), url)
            .basic_auth(&self.settings.secret_key, None::<&str>);
        req = if method == reqwest::Method::GET {
            req.query(form)
        } else {
            req.form(form)
        };
        if let Some(key) = idempotency {
            req = req.header("Idempotency-Key", key);
        }
        let resp = req.send().await.map_err(|e| self.describe(e))?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await.map_err(|e| self.describe(e))?;
        Ok((status, body))
    }

    fn describe(&self, e: reqwest::Error) -> String {
        super::http::describe_transport(e, "calling stripe", self.settings.timeout)
    }

    /// A request whose 2xx answer is a PaymentIntent, remembered under its key; a non-2xx
    /// answer is Stripe's [`Decision`].
    async fn intent_call(
        &self,
        method: reqwest::Method,
        path: &[&str],
        form: &[(&str, String)],
        idempotency: Option<&str>,
    ) -> Result<Result<Intent, Decision>, Fail> {
        let (status, body) = self.send(method, path, form, idempotency).await?;
        if (200..300).contains(&status) {
            let intent: Intent =
                serde_json::from_slice(&body).map_err(|_| unexpected(status, &body))?;
            self.remember(&intent);
            return Ok(Ok(intent));
        }
        Ok(Err(decision_of(status, &body)))
    }

    fn remember(&self, intent: &Intent) {
        let Some(key) = intent.meta(META_KEY) else {
            return;
        };
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() >= KNOWN_MAX {
            // Forgetting only costs a search; a bound keeps a long-lived process small.
            known.clear();
        }
        let better = known.get(key).is_none_or(|id| id != &intent.id);
        if better {
            known.insert(key.to_owned(), intent.id.clone());
        }
    }

    /// The PaymentIntent under `key`: by id if known, else by search or list.
    async fn find(&self, key: &str) -> Result<Found, Fail> {
        let id = self
            .known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned();
        if let Some(id) = id {
            return match self
                .intent_call(reqwest::Method::GET, &["payment_intents", &id], &[], None)
                .await?
            {
                Ok(i) if i.meta(META_KEY) == Some(key) => Ok(Found::Intent(Box::new(i))),
                Ok(_) => Err(format!("payment intent {id} is not under key {key}")),
                Err(d) => Err(format!("retrieving {id}: {d:?}")),
            };
        }
        let (all, searched) = match self.search(key).await? {
            Some(found) => (found, true),
            None => (self.list(key).await?, false),
        };
        let best = all.into_iter().min_by_key(Intent::rank);
        Ok(match best {
            Some(i) => {
                self.remember(&i);
                Found::Intent(Box::new(i))
            }
            None if searched => Found::Unseen,
            None => Found::None,
        })
    }

    /// Stripe's search by metadata; `None` when the server has no search.
    async fn search(&self, key: &str) -> Result<Option<Vec<Intent>>, Fail> {
        if self.no_search.load(Ordering::Relaxed) {
            return Ok(None);
        }
        // Search queries quote with single quotes; a key never holds one (check_key).
        let query = format!("metadata['{META_KEY}']:'{key}'");
        let (status, body) = self
            .send(
                reqwest::Method::GET,
                &["payment_intents", "search"],
                &[("query", query), ("limit", PAGE.into())],
                None,
            )
            .await?;
        match status {
            200 => Ok(Some(page_of(status, &body)?.data)),
            // No such route (the fakes): a resource_missing or a bare 404.
            404 => {
                self.no_search.store(true, Ordering::Relaxed);
                Ok(None)
            }
            _ => Err(unexpected(status, &body)),
        }
    }

    /// Every PaymentIntent under `key`, through the whole list.
    async fn list(&self, key: &str) -> Result<Vec<Intent>, Fail> {
        let all = self.list_all::<Intent>(&["payment_intents"], &[]).await?;
        Ok(all
            .into_iter()
            .filter(|i| i.meta(META_KEY) == Some(key))
            .collect())
    }

    /// Creates a PaymentIntent from `form` under `key`'s `Idempotency-Key`: the
    /// PaymentIntent under the key (the one made, or the one found when the key was used
    /// before), or Stripe's refusal. Errors: an answer about another key, or a key used
    /// before with nothing found under it yet (undecidable).
    async fn create_under_key(
        &self,
        key: &str,
        form: &[(&str, String)],
    ) -> Result<Result<Intent, Decision>, Fail> {
        let made = self
            .intent_call(reqwest::Method::POST, &["payment_intents"], form, Some(key))
            .await?;
        match made {
            Ok(i) if i.meta(META_KEY) == Some(key) => Ok(Ok(i)),
            Ok(i) => Err(format!("payment intent {} is not under the key sent", i.id)),
            Err(Decision::KeyReused) => match self.find(key).await? {
                Found::Intent(i) => Ok(Ok(*i)),
                Found::None | Found::Unseen => {
                    Err("key used before, nothing found under it yet".into())
                }
            },
            Err(d) => Ok(Err(d)),
        }
    }

    fn create_form(&self, key: &str, amount: i64, currency: &str) -> Vec<(&'static str, String)> {
        vec![
            ("amount", amount.to_string()),
            ("currency", currency.to_ascii_lowercase()),
            ("payment_method", self.settings.payment_method.clone()),
            ("payment_method_types[]", "card".into()),
            ("confirm", "true".into()),
            ("metadata[converge_key]", key.to_owned()),
        ]
    }

    /// Sets the fence under `key`: a PaymentIntent made under the key's own
    /// `Idempotency-Key`, then cancelled. What it answers is what the key now holds.
    async fn fence(&self, key: &str) -> Result<Found, Fail> {
        let form = vec![
            ("amount", "100".to_owned()),
            ("currency", "usd".into()),
            ("payment_method_types[]", "card".into()),
            ("metadata[converge_key]", key.to_owned()),
            ("metadata[converge_fence]", "1".into()),
        ];
        match self
            .intent_call(
                reqwest::Method::POST,
                &["payment_intents"],
                &form,
                Some(key),
            )
            .await?
        {
            Ok(i) if i.is_fence() && i.status != "canceled" => {
                let cancel = self
                    .intent_call(
                        reqwest::Method::POST,
                        &["payment_intents", &i.id, "cancel"],
                        &[],
                        None,
                    )
                    .await?;
                match cancel {
                    Ok(c) => Ok(Found::Intent(Box::new(c))),
                    Err(d) => Err(format!("cancelling the fence {}: {d:?}", i.id)),
                }
            }
            Ok(i) => Ok(Found::Intent(Box::new(i))),
            // Something else was created under the key first: find it.
            Err(Decision::KeyReused) => self.find(key).await,
            Err(d) => Err(format!("setting the fence: {d:?}")),
        }
    }

    /// The PaymentIntent under `key`, or, when there is none, the fence set under it (which
    /// answers what the key holds if something was made under it first).
    async fn found_or_fenced(&self, key: &str) -> Result<Intent, Fail> {
        let found = match self.find(key).await? {
            Found::None | Found::Unseen => self.fence(key).await?,
            found => found,
        };
        match found {
            Found::Intent(i) => Ok(*i),
            _ => Err("nothing under the key after the fence".to_owned()),
        }
    }

    /// Cancels a PaymentIntent: a hold's void, or (`expired`) its lapse at the core's TTL,
    /// marked in its metadata first (localstripe takes no `cancellation_reason`).
    async fn cancel_intent(&self, id: &str, expired: bool) -> Result<Intent, Fail> {
        if expired {
            let mark = [("metadata[converge_expired]", "1".to_owned())];
            if let Err(d) = self
                .intent_call(reqwest::Method::POST, &["payment_intents", id], &mark, None)
                .await?
            {
                return Err(format!("marking {id} expired: {d:?}"));
            }
        }
        match self
            .intent_call(
                reqwest::Method::POST,
                &["payment_intents", id, "cancel"],
                &[],
                None,
            )
            .await?
        {
            Ok(i) => Ok(i),
            // Cancelled meanwhile (or captured): read where it stands.
            Err(Decision::Refused(_)) => match self
                .intent_call(reqwest::Method::GET, &["payment_intents", id], &[], None)
                .await?
            {
                Ok(i) => Ok(i),
                Err(d) => Err(format!("{d:?}")),
            },
            Err(d) => Err(format!("cancelling {id}: {d:?}")),
        }
    }

    /// A hold past the core's TTL is cancelled before anything reads it as held.
    async fn lapse_if_due(&self, intent: Intent) -> Result<Intent, Fail> {
        if intent.status == "requires_capture" && now_ms() >= intent.expires_at_ms() {
            return self.cancel_intent(&intent.id, true).await;
        }
        Ok(intent)
    }

    /// Every refund of PaymentIntent `intent` (all pages: a key's earlier refund is never
    /// missed on a charge refunded in many parts).
    async fn refunds_of(&self, intent: &str) -> Result<Vec<Refund>, Fail> {
        self.list_all::<Refund>(&["refunds"], &[("payment_intent", intent.to_owned())])
            .await
    }
}

#[derive(Deserialize)]
struct List<T> {
    data: Vec<T>,
    #[serde(default)]
    has_more: bool,
}

#[derive(Deserialize)]
struct BalanceTransaction {
    id: String,
    amount: i64,
    /// Stripe's fee, minor units.
    #[serde(default)]
    fee: i64,
    /// `amount` − `fee`, minor units.
    #[serde(default)]
    net: Option<i64>,
    currency: String,
    created: i64,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    source: Option<String>,
}

#[derive(Deserialize)]
struct ChargeRef {
    #[serde(default)]
    payment_intent: Option<String>,
}

/// A Stripe object with an id (list pages go on after the last one's).
trait HasId {
    fn id(&self) -> &str;
}

impl HasId for Intent {
    fn id(&self) -> &str {
        &self.id
    }
}

impl HasId for Refund {
    fn id(&self) -> &str {
        &self.id
    }
}

#[derive(Deserialize)]
struct Refund {
    id: String,
    #[serde(default)]
    payment_intent: Option<String>,
    amount: i64,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

fn page_of(status: u16, body: &[u8]) -> Result<List<Intent>, Fail> {
    if status != 200 {
        return Err(unexpected(status, body));
    }
    serde_json::from_slice(body).map_err(|_| unexpected(status, body))
}

/// [`decide`] over a raw answer: its status and body (Stripe's `{"error": {...}}`, if the
/// body is one).
pub fn decision_of(status: u16, body: &[u8]) -> Decision {
    let error = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|b| b.error);
    decide(status, error.as_ref())
}

fn unexpected(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut end = text.len().min(DETAIL_BODY_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("unexpected stripe answer {status}: {}", &text[..end])
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A channel key Stripe's metadata and search can carry (at most 500 characters, no quote).
fn check_key(key: &str) -> Result<(), Fail> {
    if key.is_empty() || key.len() > 500 || key.contains(['\'', '\\']) {
        return Err(format!(
            "channel key {key:?} cannot be a stripe metadata value"
        ));
    }
    Ok(())
}

/// A charge's answer from the PaymentIntent under its key.
fn charge_of(i: &Intent) -> ChargeOutcome {
    match i.status.as_str() {
        "succeeded" => ChargeOutcome::Succeeded {
            amount: i.received(),
            currency: i.currency(),
        },
        "canceled" if i.is_fence() => ChargeOutcome::Declined {
            reason: "cancelled".into(),
        },
        "canceled" | "requires_payment_method" => ChargeOutcome::Declined {
            reason: i.decline_reason(),
        },
        "requires_action" => ChargeOutcome::RequiresAction {
            detail: i.action_detail(),
        },
        other => ChargeOutcome::Error {
            detail: format!("payment intent {} is {other}", i.id),
        },
    }
}

fn query_of(i: &Intent) -> QueryOutcome {
    match i.status.as_str() {
        "succeeded" => QueryOutcome::Succeeded {
            amount: i.received(),
            currency: i.currency(),
        },
        "canceled" if i.is_fence() => QueryOutcome::Cancelled,
        "canceled" | "requires_payment_method" => QueryOutcome::Declined {
            reason: i.decline_reason(),
        },
        "requires_action" => QueryOutcome::RequiresAction {
            detail: i.action_detail(),
        },
        other => QueryOutcome::Error {
            detail: format!("payment intent {} is {other}", i.id),
        },
    }
}

fn hold_of(i: &Intent) -> HoldQueryOutcome {
    let status = match i.status.as_str() {
        "requires_capture" => HoldStatus::Authorized,
        "succeeded" => HoldStatus::Captured,
        "canceled" if i.is_fence() => return HoldQueryOutcome::Cancelled,
        // Lapsed at the core's TTL (marked by this connector), or at Stripe's own limit.
        "canceled"
            if i.meta(META_EXPIRED).is_some()
                || i.cancellation_reason.as_deref() == Some("automatic") =>
        {
            HoldStatus::Expired
        }
        "canceled" => HoldStatus::Voided,
        "requires_payment_method" => HoldStatus::Declined,
        "requires_action" => HoldStatus::RequiresAction,
        other => {
            return HoldQueryOutcome::Error {
                detail: format!("payment intent {} is {other}", i.id),
            };
        }
    };
    HoldQueryOutcome::Found {
        status,
        amount: i.amount,
        captured: i.received(),
        currency: i.currency(),
        expires_at_ms: i.expires_at_ms(),
    }
}

#[async_trait]
impl Connector for StripeConnector {
    async fn charge(&self, channel_key: &str, amount: i64, currency: &str) -> ChargeOutcome {
        let run = async {
            check_key(channel_key)?;
            // What is under the key answers first: a fence older than Stripe's 24 h
            // idempotency window (or set on a server that ignores Idempotency-Key) still holds.
            if let Found::Intent(i) = self.find(channel_key).await? {
                return Ok(charge_of(&i));
            }
            let form = self.create_form(channel_key, amount, currency);
            Ok(match self.create_under_key(channel_key, &form).await? {
                Ok(i) => charge_of(&i),
                Err(Decision::Declined(reason)) => ChargeOutcome::Declined { reason },
                Err(Decision::Refused(code)) => ChargeOutcome::Declined {
                    reason: format!("refused: {code}"),
                },
                Err(d) => ChargeOutcome::Error { detail: d.detail() },
            })
        };
        run.await
            .unwrap_or_else(|detail: Fail| ChargeOutcome::Error { detail })
    }

    async fn query(&self, channel_key: &str) -> QueryOutcome {
        let run = async {
            check_key(channel_key)?;
            Ok(match self.find(channel_key).await? {
                Found::Intent(i) => query_of(&i),
                // Search may lag, but a NotFound only ever leads to a resubmission under the
                // same Idempotency-Key or to the fence, both safe with a PaymentIntent unseen.
                Found::None | Found::Unseen => QueryOutcome::NotFound,
            })
        };
        run.await
            .unwrap_or_else(|detail: Fail| QueryOutcome::Error { detail })
    }

    async fn cancel(&self, channel_key: &str) -> CancelOutcome {
        let run = async {
            check_key(channel_key)?;
            let i = self.found_or_fenced(channel_key).await?;
            let i = match i.status.as_str() {
                "succeeded" | "canceled" | "requires_capture" => i,
                // Declined or never confirmed: cancelled, so it can never be confirmed again;
                // what the cancel leaves (it may have been charged meanwhile) answers.
                _ => self.cancel_intent(&i.id, false).await?,
            };
            Ok(match i.status.as_str() {
                "succeeded" => CancelOutcome::AlreadyCharged {
                    amount: i.received(),
                    currency: i.currency(),
                },
                "canceled" => CancelOutcome::Cancelled,
                "requires_capture" => CancelOutcome::Error {
                    detail: "funds are held under the key: a hold is released by a void".into(),
                },
                other => CancelOutcome::Error {
                    detail: format!("payment intent {} is {other} after the cancel", i.id),
                },
            })
        };
        run.await
            .unwrap_or_else(|detail: Fail| CancelOutcome::Error { detail })
    }

    async fn refund(&self, channel_key: &str, refund_key: &str, amount: i64) -> RefundOutcome {
        let run = async {
            check_key(channel_key)?;
            let i = match self.find(channel_key).await? {
                Found::Intent(i) if i.status == "succeeded" => i,
                Found::Intent(i) if i.status == "processing" => {
                    return Err(format!("payment intent {} is still processing", i.id));
                }
                Found::Unseen => {
                    return Err("no charge under the key in Stripe's search yet".into());
                }
                _ => {
                    return Ok(RefundOutcome::Rejected {
                        reason: "not_found".into(),
                    });
                }
            };
            // The refund key's earlier refund, if any (a server that ignores Idempotency-Key
            // must not refund twice).
            let refunds = self.refunds_of(&i.id).await?;
            let earlier = refunds
                .iter()
                .find(|r| r.metadata.get(META_REFUND).map(String::as_str) == Some(refund_key));
            if let Some(r) = earlier {
                return Ok(
                    if r.amount == amount
                        && !matches!(r.status.as_deref(), Some("failed" | "canceled"))
                    {
                        RefundOutcome::Succeeded
                    } else {
                        RefundOutcome::Rejected {
                            reason: "refund_key_reused".into(),
                        }
                    },
                );
            }
            // Stripe refuses a refund beyond what is left; checked here too, since a server
            // that does not (localstripe) would otherwise refund more than was charged.
            let refunded: i64 = refunds
                .iter()
                .filter(|r| !matches!(r.status.as_deref(), Some("failed" | "canceled")))
                .map(|r| r.amount)
                .sum();
            if amount <= 0 || refunded + amount > i.received() {
                return Ok(RefundOutcome::Rejected {
                    reason: "exceeds_remaining".into(),
                });
            }
            let form = [
                ("payment_intent", i.id.clone()),
                ("amount", amount.to_string()),
                ("metadata[converge_refund_key]", refund_key.to_owned()),
            ];
            let idem = format!("refund:{refund_key}");
            let (status, body) = self
                .send(reqwest::Method::POST, &["refunds"], &form, Some(&idem))
                .await?;
            if (200..300).contains(&status) {
                let r: Refund =
                    serde_json::from_slice(&body).map_err(|_| unexpected(status, &body))?;
                return Ok(refund_answer(&r, amount));
            }
            Ok(match decision_of(status, &body) {
                Decision::KeyReused => RefundOutcome::Rejected {
                    reason: "refund_key_reused".into(),
                },
                Decision::Refused(reason) | Decision::Declined(reason) => {
                    RefundOutcome::Rejected { reason }
                }
                Decision::Configuration(d) | Decision::Undecidable(d) => {
                    RefundOutcome::Error { detail: d }
                }
            })
        };
        run.await
            .unwrap_or_else(|detail: Fail| RefundOutcome::Error { detail })
    }

    async fn authorize(
        &self,
        channel_key: &str,
        amount: i64,
        currency: &str,
        ttl_secs: i64,
    ) -> Result<AuthorizeOutcome, Unsupported> {
        let run = async {
            check_key(channel_key)?;
            if let Found::Intent(i) = self.find(channel_key).await? {
                return Ok(authorized_of(self.lapse_if_due(*i).await?));
            }
            let mut form = self.create_form(channel_key, amount, currency);
            form.push(("capture_method", "manual".into()));
            form.push((
                "metadata[converge_hold_ttl_secs]",
                ttl_secs.clamp(1, MAX_HOLD_SECS).to_string(),
            ));
            Ok(match self.create_under_key(channel_key, &form).await? {
                Ok(i) => authorized_of(i),
                Err(Decision::Declined(reason) | Decision::Refused(reason)) => {
                    AuthorizeOutcome::Declined { reason }
                }
                Err(d) => AuthorizeOutcome::Error { detail: d.detail() },
            })
        };
        Ok(run
            .await
            .unwrap_or_else(|detail: Fail| AuthorizeOutcome::Error { detail }))
    }

    async fn capture(
        &self,
        channel_key: &str,
        capture_key: &str,
        amount: i64,
        _last: bool,
    ) -> Result<CaptureOutcome, Unsupported> {
        Ok(self
            .capture_hold(channel_key, capture_key, amount)
            .await
            .unwrap_or_else(|detail: Fail| CaptureOutcome::Error { detail }))
    }

    async fn void(&self, channel_key: &str) -> Result<VoidOutcome, Unsupported> {
        let run = async {
            check_key(channel_key)?;
            let i = self.found_or_fenced(channel_key).await?;
            let i = match i.status.as_str() {
                "succeeded" | "canceled" => i,
                _ => self.cancel_intent(&i.id, false).await?,
            };
            Ok(match hold_of(&i) {
                HoldQueryOutcome::Found {
                    status: HoldStatus::Expired,
                    ..
                } => VoidOutcome::Expired,
                HoldQueryOutcome::Found {
                    status: HoldStatus::Captured,
                    ..
                } => VoidOutcome::Rejected {
                    reason: "already_captured".into(),
                },
                HoldQueryOutcome::Found {
                    status: HoldStatus::Voided | HoldStatus::Declined,
                    ..
                }
                | HoldQueryOutcome::Cancelled => VoidOutcome::Voided,
                other => VoidOutcome::Error {
                    detail: format!("after the void the hold is {}", other.name()),
                },
            })
        };
        Ok(run
            .await
            .unwrap_or_else(|detail: Fail| VoidOutcome::Error { detail }))
    }

    async fn query_hold(&self, channel_key: &str) -> Result<HoldQueryOutcome, Unsupported> {
        let run = async {
            check_key(channel_key)?;
            Ok(match self.find(channel_key).await? {
                Found::Intent(i) => hold_of(&self.lapse_if_due(*i).await?),
                Found::None | Found::Unseen => HoldQueryOutcome::NotFound,
            })
        };
        Ok(run
            .await
            .unwrap_or_else(|detail: Fail| HoldQueryOutcome::Error { detail }))
    }

    /// The converge key in the metadata of PaymentIntent `reference` (a dispute's), retrieved
    /// from Stripe: None for another id, one of Stripe's that is not converge's, or no answer.
    async fn channel_key_of(&self, reference: &str) -> Option<String> {
        if !reference.starts_with("pi_")
            || !reference
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return None;
        }
        match self
            .intent_call(
                reqwest::Method::GET,
                &["payment_intents", reference],
                &[],
                None,
            )
            .await
        {
            Ok(Ok(i)) if !i.is_fence() => i.meta(META_KEY).map(str::to_owned),
            _ => None,
        }
    }

    async fn statement(&self, day: &str) -> Result<String, StatementError> {
        let date = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .map_err(|_| StatementError::Failed(format!("day {day:?} is not YYYY-MM-DD")))?;
        let start = date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp();
        let end = start + 86_400;
        let txns = self
            .balance_transactions(start, end)
            .await
            .map_err(StatementError::Failed)?;
        let mut rows = Vec::new();
        for t in txns
            .iter()
            .filter(|t| matches!(t.kind.as_str(), "charge" | "payment"))
            .filter(|t| (start..end).contains(&t.created))
        {
            let key = self
                .key_of_charge(t.source.as_deref().unwrap_or(&t.id))
                .await
                .map_err(StatementError::Failed)?;
            let net = t.net.unwrap_or(t.amount - t.fee);
            rows.push(StatementLine {
                at: t.created,
                key,
                amount: t.amount,
                currency: t.currency.to_ascii_uppercase(),
                fee: t.fee,
                net,
            });
        }
        rows.sort();
        statement_csv(&rows).map_err(StatementError::Failed)
    }

    fn verify_callback(
        &self,
        headers: &axum::http::HeaderMap,
        body: &[u8],
        now_secs: i64,
    ) -> Result<CallbackFact, CallbackRejection> {
        if self.settings.webhook_secrets.is_empty() {
            return Err(Unsupported::of(super::Operation::Callback).into());
        }
        let header = headers
            .get(STRIPE_SIGNATURE_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or(CallbackRejection::BadSignature)?;
        let mut outcome = Err(CallbackRejection::BadSignature);
        for secret in &self.settings.webhook_secrets {
            match signature::verify(
                secret.as_bytes(),
                header,
                body,
                now_secs,
                WEBHOOK_TOLERANCE_SECS,
            ) {
                Ok(_) => {
                    outcome = Ok(());
                    break;
                }
                Err(SignatureError::TooOld | SignatureError::InFuture) => {
                    outcome = Err(CallbackRejection::TooOld);
                }
                Err(SignatureError::Malformed | SignatureError::BadSignature) => {}
            }
        }
        outcome?;
        event_fact(body).map_err(CallbackRejection::Invalid)
    }
}

/// A sale PaymentIntent of converge's as the account holds it (`converge verify`'s channel
/// side, invariant 1): one per PaymentIntent, so two under one key show as two. Minor units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountCharge {
    /// The channel key (`metadata[converge_key]`).
    pub key: String,
    /// `succeeded`; `declined` (declined or cancelled: no money); `pending` (not decided yet).
    pub status: &'static str,
    /// Charged.
    pub amount: i64,
    /// ISO 4217, upper case.
    pub currency: String,
    /// Refunded of it (refunds not failed or cancelled).
    pub refunded: i64,
}

impl StripeConnector {
    /// Every sale PaymentIntent of converge's on the account (fences and holds left out:
    /// holds are asked one by one with [`Connector::query_hold`]), with what was refunded of
    /// each. Errors: why the lists could not be read.
    pub async fn account_charges(&self) -> Result<Vec<AccountCharge>, String> {
        let intents = self.list_all::<Intent>(&["payment_intents"], &[]).await?;
        let refunds = self.list_all::<Refund>(&["refunds"], &[]).await?;
        let mut refunded: HashMap<String, i64> = HashMap::new();
        for r in refunds
            .iter()
            .filter(|r| !matches!(r.status.as_deref(), Some("failed" | "canceled")))
        {
            if let Some(pi) = &r.payment_intent {
                *refunded.entry(pi.clone()).or_default() += r.amount;
            }
        }
        Ok(intents
            .iter()
            .filter(|i| !i.is_fence() && !i.is_hold())
            .filter_map(|i| {
                Some(AccountCharge {
                    key: i.meta(META_KEY)?.to_owned(),
                    status: match i.status.as_str() {
                        "succeeded" => "succeeded",
                        "canceled" | "requires_payment_method" => "declined",
                        // Not decided yet (processing, an authentication waited for): no
                        // money held, and not a decline either.
                        _ => "pending",
                    },
                    amount: i.received(),
                    currency: i.currency(),
                    refunded: refunded.get(&i.id).copied().unwrap_or(0),
                })
            })
            .collect())
    }

    /// Every object of the list at `path` (narrowed by `filter`), page by page.
    async fn list_all<T: serde::de::DeserializeOwned + HasId>(
        &self,
        path: &[&str],
        filter: &[(&'static str, String)],
    ) -> Result<Vec<T>, Fail> {
        let mut found = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut q = filter.to_vec();
            q.push(("limit", PAGE.to_owned()));
            if let Some(a) = &after {
                q.push(("starting_after", a.clone()));
            }
            let (status, body) = self.send(reqwest::Method::GET, path, &q, None).await?;
            if status != 200 {
                return Err(unexpected(status, &body));
            }
            let page: List<T> =
                serde_json::from_slice(&body).map_err(|_| unexpected(status, &body))?;
            after = page.data.last().map(|t| t.id().to_owned());
            found.extend(page.data);
            if !page.has_more || after.is_none() {
                return Ok(found);
            }
        }
    }

    /// The account's balance transactions created in `[start, end)` (unix seconds): by
    /// Stripe's `created` filter, or, where the server has none (localstripe), by reading
    /// them all.
    async fn balance_transactions(
        &self,
        start: i64,
        end: i64,
    ) -> Result<Vec<BalanceTransaction>, Fail> {
        let mut filter = vec![
            ("created[gte]", start.to_string()),
            ("created[lt]", end.to_string()),
        ];
        let mut found = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut q = filter.clone();
            q.push(("limit", PAGE.to_owned()));
            if let Some(a) = &after {
                q.push(("starting_after", a.clone()));
            }
            let (status, body) = self
                .send(reqwest::Method::GET, &["balance_transactions"], &q, None)
                .await?;
            if status == 400 && !filter.is_empty() && after.is_none() {
                filter.clear();
                continue;
            }
            if status != 200 {
                return Err(unexpected(status, &body));
            }
            let page: List<BalanceTransaction> =
                serde_json::from_slice(&body).map_err(|_| unexpected(status, &body))?;
            after = page.data.last().map(|t| t.id.clone());
            found.extend(page.data);
            if !page.has_more || after.is_none() {
                return Ok(found);
            }
        }
    }

    /// The channel key of the PaymentIntent that made charge `charge`, or `stripe:<charge>`
    /// when it is not one of converge's.
    async fn key_of_charge(&self, charge: &str) -> Result<String, Fail> {
        let (status, body) = self
            .send(reqwest::Method::GET, &["charges", charge], &[], None)
            .await?;
        if status != 200 {
            return Err(unexpected(status, &body));
        }
        let c: ChargeRef = serde_json::from_slice(&body).map_err(|_| unexpected(status, &body))?;
        let Some(pi) = c.payment_intent else {
            return Ok(format!("stripe:{charge}"));
        };
        match self
            .intent_call(reqwest::Method::GET, &["payment_intents", &pi], &[], None)
            .await?
        {
            Ok(i) => Ok(i
                .meta(META_KEY)
                .map_or_else(|| format!("stripe:{charge}"), str::to_owned)),
            Err(d) => Err(format!("retrieving {pi}: {d:?}")),
        }
    }

    async fn capture_hold(
        &self,
        key: &str,
        capture_key: &str,
        amount: i64,
    ) -> Result<CaptureOutcome, Fail> {
        check_key(key)?;
        let rejected = |reason: &str| {
            Ok(CaptureOutcome::Rejected {
                reason: reason.to_owned(),
            })
        };
        if amount <= 0 {
            return rejected("amount_not_positive");
        }
        let i = match self.find(key).await? {
            Found::Intent(i) => self.lapse_if_due(*i).await?,
            Found::None => return rejected("not_found"),
            Found::Unseen => return Err("no hold under the key in Stripe's search yet".into()),
        };
        match i.status.as_str() {
            "requires_capture" => {}
            "succeeded" if i.meta(META_CAPTURE) == Some(capture_key) => {
                return Ok(captured_of(&i));
            }
            "succeeded" => return rejected("closed"),
            _ => {
                return match hold_of(&i) {
                    HoldQueryOutcome::Found { status, .. } => rejected(match status {
                        HoldStatus::Expired => "expired",
                        HoldStatus::Declined => "declined",
                        _ => "voided",
                    }),
                    HoldQueryOutcome::Cancelled => rejected("voided"),
                    other => Err(format!("the hold is {}", other.name())),
                };
            }
        }
        if amount > i.amount {
            return rejected("exceeds_authorized");
        }
        // The capture key goes on the PaymentIntent first, so a capture whose answer is lost
        // is recognised when it is repeated (Stripe captures once; its key says which).
        let tag = [
            ("metadata[converge_capture_key]", capture_key.to_owned()),
            ("metadata[converge_capture_amount]", amount.to_string()),
        ];
        if let Err(d) = self
            .intent_call(
                reqwest::Method::POST,
                &["payment_intents", &i.id],
                &tag,
                None,
            )
            .await?
        {
            return Err(format!("tagging {} with its capture key: {d:?}", i.id));
        }
        let form = [("amount_to_capture", amount.to_string())];
        let idem = format!("capture:{capture_key}");
        Ok(
            match self
                .intent_call(
                    reqwest::Method::POST,
                    &["payment_intents", &i.id, "capture"],
                    &form,
                    Some(&idem),
                )
                .await?
            {
                Ok(c) if c.status == "succeeded" => captured_of(&c),
                Ok(c) => CaptureOutcome::Error {
                    detail: format!("after the capture {} is {}", c.id, c.status),
                },
                Err(Decision::KeyReused) => CaptureOutcome::Rejected {
                    reason: "capture_key_reused".into(),
                },
                Err(Decision::Refused(r) | Decision::Declined(r)) => {
                    CaptureOutcome::Rejected { reason: r }
                }
                Err(Decision::Configuration(d) | Decision::Undecidable(d)) => {
                    CaptureOutcome::Error { detail: d }
                }
            },
        )
    }
}

/// One balance transaction of a charge, as a statement line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct StatementLine {
    /// Unix seconds.
    at: i64,
    key: String,
    /// Gross, minor units.
    amount: i64,
    currency: String,
    /// Stripe's fee, minor units.
    fee: i64,
    /// What Stripe pays out of it, minor units.
    net: i64,
}

/// The statement's CSV (the shape `service::reconcile::parse_statement` reads, with the
/// fee and net columns): one line per charge, then the `#end` line.
fn statement_csv(rows: &[StatementLine]) -> Result<String, Fail> {
    let e = |e: csv::Error| e.to_string();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "channel_key",
        "amount",
        "currency",
        "status",
        "charged_at",
        "fee",
        "net",
    ])
    .map_err(e)?;
    for l in rows {
        let when = chrono::DateTime::from_timestamp(l.at, 0)
            .ok_or_else(|| format!("time {} out of range", l.at))?
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let (amount, fee, net) = (l.amount.to_string(), l.fee.to_string(), l.net.to_string());
        w.write_record([
            l.key.as_str(),
            &amount,
            &l.currency,
            "succeeded",
            &when,
            &fee,
            &net,
        ])
        .map_err(e)?;
    }
    w.write_record(["#end", &rows.len().to_string(), "", "", "", "", ""])
        .map_err(e)?;
    let bytes = w.into_inner().map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

fn authorized_of(i: Intent) -> AuthorizeOutcome {
    match hold_of(&i) {
        HoldQueryOutcome::Found {
            status: HoldStatus::Authorized,
            amount,
            currency,
            expires_at_ms,
            ..
        } => AuthorizeOutcome::Authorized {
            amount,
            currency,
            expires_at_ms,
        },
        HoldQueryOutcome::Found {
            status: HoldStatus::Declined,
            ..
        } => AuthorizeOutcome::Declined {
            reason: i.decline_reason(),
        },
        HoldQueryOutcome::Found {
            status: HoldStatus::RequiresAction,
            ..
        } => AuthorizeOutcome::RequiresAction {
            detail: i.action_detail(),
        },
        HoldQueryOutcome::Cancelled => AuthorizeOutcome::Declined {
            reason: "cancelled".into(),
        },
        other => AuthorizeOutcome::Error {
            detail: format!("payment intent {} is {}", i.id, other.name()),
        },
    }
}

fn captured_of(i: &Intent) -> CaptureOutcome {
    CaptureOutcome::Captured {
        amount: i.received(),
        captured_total: i.received(),
        currency: i.currency(),
        closed: true,
    }
}

fn refund_answer(r: &Refund, amount: i64) -> RefundOutcome {
    match r.status.as_deref() {
        Some("failed" | "canceled") => RefundOutcome::Rejected {
            reason: format!("refund {}", r.status.as_deref().unwrap_or("failed")),
        },
        // `pending` is accepted by Stripe and settles without the core's help.
        _ if r.amount == amount => RefundOutcome::Succeeded,
        _ => RefundOutcome::Error {
            detail: format!("refund of {} answered for {amount}", r.amount),
        },
    }
}

#[derive(Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    created: i64,
    data: EventData,
}

#[derive(Deserialize)]
struct EventData {
    object: serde_json::Value,
}

/// A Stripe Dispute, the fields the connector reads.
#[derive(Deserialize)]
struct Dispute {
    id: String,
    amount: i64,
    currency: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    status: String,
    /// The disputed PaymentIntent (absent for a charge made without one: not converge's).
    #[serde(default)]
    payment_intent: Option<String>,
}

/// A `charge.dispute.*` event as the core's fact (issue 38): `charge.dispute.created` is
/// `dispute.opened`, `charge.dispute.closed` `dispute.won` or `dispute.lost` by the
/// dispute's status; any other (`funds_withdrawn`, `updated`, a closed warning) is kept as
/// `stripe.<type>`. A dispute names its PaymentIntent, not converge's key: the fact carries
/// the PaymentIntent as its reference ([`Connector::channel_key_of`] finds the key), and under
/// it as the key until then, so an unreadable one is an unknown payment's.
fn dispute_fact(e: Event) -> CallbackFact {
    let d = serde_json::from_value::<Dispute>(e.data.object.clone()).ok();
    let kind = match (e.kind.as_str(), d.as_ref().map(|d| d.status.as_str())) {
        ("charge.dispute.created", _) => "dispute.opened".to_owned(),
        ("charge.dispute.closed", Some("won")) => "dispute.won".to_owned(),
        ("charge.dispute.closed", Some("lost")) => "dispute.lost".to_owned(),
        (other, _) => format!("stripe.{other}"),
    };
    let Some(d) = d else {
        return CallbackFact {
            channel_key: e.id.clone(),
            event_id: e.id,
            kind,
            capture_key: None,
            amount: 0,
            currency: "XXX".into(),
            created_at: e.created,
            dispute_id: None,
            reason: None,
            reference: None,
        };
    };
    CallbackFact {
        event_id: e.id,
        kind,
        channel_key: d.payment_intent.clone().unwrap_or_else(|| d.id.clone()),
        capture_key: None,
        amount: d.amount,
        currency: d.currency.to_ascii_uppercase(),
        created_at: e.created,
        dispute_id: Some(d.id),
        reason: d.reason,
        reference: d.payment_intent,
    }
}

/// A verified Stripe event as the core's callback fact. PaymentIntent events of converge's
/// keys map to `charge.*`, `authorization.*` and `capture.*`; any other event is kept as
/// `stripe.<type>` (recorded and ignored by the core): when it is not about one of converge's
/// PaymentIntents, under the Stripe object's id and currency `XXX` (ISO 4217's "no
/// currency"), so it is acknowledged as a callback for an unknown payment, never refused
/// (Stripe would deliver a refused event again for days).
fn event_fact(body: &[u8]) -> Result<CallbackFact, String> {
    let e: Event = serde_json::from_slice(body).map_err(|e| format!("not a stripe event: {e}"))?;
    if e.data.object.get("object").and_then(|o| o.as_str()) == Some("dispute") {
        return Ok(dispute_fact(e));
    }
    let intent = (e.data.object.get("object").and_then(|o| o.as_str()) == Some("payment_intent"))
        .then(|| serde_json::from_value::<Intent>(e.data.object.clone()).ok())
        .flatten();
    let manual = e.data.object.get("capture_method").and_then(|c| c.as_str()) == Some("manual");
    let Some(i) = intent.filter(|i| i.meta(META_KEY).is_some() && !i.is_fence()) else {
        let object_id = e.data.object.get("id").and_then(|i| i.as_str());
        return Ok(CallbackFact {
            channel_key: object_id.unwrap_or(&e.id).to_owned(),
            event_id: e.id,
            kind: format!("stripe.{}", e.kind),
            capture_key: None,
            amount: 0,
            currency: "XXX".into(),
            created_at: e.created,
            dispute_id: None,
            reason: None,
            reference: None,
        });
    };
    let capturable = e
        .data
        .object
        .get("amount_capturable")
        .and_then(|a| a.as_i64());
    let (kind, amount) = match (e.kind.as_str(), manual) {
        ("payment_intent.succeeded", false) => ("charge.succeeded", i.received()),
        ("payment_intent.succeeded", true) => ("capture.succeeded", i.received()),
        ("payment_intent.payment_failed", false) => ("charge.failed", i.amount),
        ("payment_intent.payment_failed", true) => ("authorization.failed", i.amount),
        ("payment_intent.amount_capturable_updated", true) => {
            ("authorization.succeeded", capturable.unwrap_or(i.amount))
        }
        (other, _) => {
            return Ok(CallbackFact {
                event_id: e.id,
                kind: format!("stripe.{other}"),
                channel_key: i.meta(META_KEY).unwrap_or_default().to_owned(),
                capture_key: None,
                amount: i.amount,
                currency: i.currency(),
                created_at: e.created,
                dispute_id: None,
                reason: None,
                reference: None,
            });
        }
    };
    Ok(CallbackFact {
        event_id: e.id,
        kind: kind.to_owned(),
        channel_key: i.meta(META_KEY).unwrap_or_default().to_owned(),
        capture_key: i.meta(META_CAPTURE).map(str::to_owned),
        amount,
        currency: i.currency(),
        created_at: e.created,
        dispute_id: None,
        reason: None,
        reference: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: &str, code: Option<&str>, decline: Option<&str>) -> ErrorDetail {
        ErrorDetail {
            kind: kind.into(),
            code: code.map(Into::into),
            decline_code: decline.map(Into::into),
            message: None,
        }
    }

    #[test]
    fn the_decision_table_declines_only_what_stripe_calls_a_decline() {
        let card = err(
            "card_error",
            Some("card_declined"),
            Some("insufficient_funds"),
        );
        assert_eq!(
            decide(402, Some(&card)),
            Decision::Declined("insufficient_funds".into())
        );
        assert_eq!(
            decide(400, Some(&err("idempotency_error", None, None))),
            Decision::KeyReused
        );
        assert_eq!(
            decide(
                400,
                Some(&err(
                    "invalid_request_error",
                    Some("amount_too_small"),
                    None
                ))
            ),
            Decision::Refused("amount_too_small".into())
        );
        assert!(matches!(decide(401, None), Decision::Configuration(_)));
        assert!(matches!(
            decide(403, Some(&err("invalid_request_error", None, None))),
            Decision::Configuration(_)
        ));
        for status in [409, 429, 500, 502, 503] {
            assert!(
                matches!(
                    decide(status, Some(&err("api_error", None, None))),
                    Decision::Undecidable(_)
                ),
                "{status}"
            );
        }
        // A 402 without Stripe's error body (a proxy's page) is not a decline.
        assert!(matches!(decide(402, None), Decision::Undecidable(_)));
    }

    #[test]
    fn a_key_stripe_search_cannot_quote_is_refused_before_sending() {
        assert!(check_key("ord-1:try").is_ok());
        assert!(check_key("a'b").is_err());
        assert!(check_key("").is_err());
        assert!(check_key(&"k".repeat(501)).is_err());
    }

    #[test]
    fn events_of_other_payment_intents_are_kept_under_their_own_id() {
        let body = serde_json::json!({
            "id": "evt_1", "type": "payment_intent.succeeded", "created": 1,
            "data": {"object": {"object": "payment_intent", "id": "pi_1", "amount": 5,
                "amount_received": 5, "currency": "usd", "status": "succeeded", "metadata": {}}}
        });
        let f = event_fact(body.to_string().as_bytes()).unwrap();
        assert_eq!(f.kind, "stripe.payment_intent.succeeded");
        assert_eq!(
            (f.channel_key.as_str(), f.currency.as_str()),
            ("pi_1", "XXX")
        );
    }
}
