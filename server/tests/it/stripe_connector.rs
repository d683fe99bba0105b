//! The Stripe connector (issue 38) against Stripe implementations not written here: the
//! connector contract's whole conformance suite against localstripe (PyPI, run as a separate
//! process by scripts/stripe_fakes.sh, `CONVERGE_LOCALSTRIPE_URL`), with webhooks signed by
//! the official `stripe` library's own test helper (`CONVERGE_STRIPE_SIGNER`,
//! scripts/stripe_sign.mjs). Without them the tests are skipped, unless
//! `CONVERGE_REQUIRE_STRIPE=1` (scripts/test.sh sets it when it started them).
//!
//! Where localstripe differs from Stripe the connector follows Stripe's documentation, and
//! the test says which: it ignores `Idempotency-Key` (the fence holds here only within the
//! process that set it; on Stripe the key itself holds it), omits `amount_received`, answers
//! a decline with `invalid_request_error` and refunds beyond the charge.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue};
use converge_server::channel::stripe::{
    DEFAULT_PAYMENT_METHOD, STRIPE_SIGNATURE_HEADER, StripeConnector, StripeSettings,
};
use converge_server::channel::{CallbackRejection, ChargeOutcome, Connector, QueryOutcome};
use converge_server::service::merchant_connectors::ConnectorChoice;
use serde_json::{Value, json};

use crate::support::{Answer, Db, TestApp, drop_database, eventually, setup_actor};

use crate::connector_conformance::{Callbacks, Subject, run_conformance};

/// The webhook signing secret the tests' connector trusts.
const WEBHOOK_SECRET: &str = "whsec_converge_test_0123456789abcdef";
/// localstripe's PaymentMethod whose charge is declined (its alias of Stripe's test card
/// 4000000000000341, "attaches, then every charge fails").
const DECLINING_PM: &str = "pm_card_chargeCustomerFail";

fn required() -> bool {
    std::env::var("CONVERGE_REQUIRE_STRIPE").as_deref() == Ok("1")
}

/// The URL in `var`, or `None` (a skip) when it is unset and not required.
fn fake(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if required() => panic!("CONVERGE_REQUIRE_STRIPE=1 but {var} is unset"),
        _ => {
            eprintln!("skipped: {var} is unset (scripts/stripe_fakes.sh starts the fakes)");
            None
        }
    }
}

fn connector(url: &str, payment_method: &str) -> StripeConnector {
    StripeConnector::new(StripeSettings {
        api_base: url.to_owned(),
        secret_key: "sk_test_converge".into(),
        webhook_secrets: vec!["whsec_old_rolled_out".into(), WEBHOOK_SECRET.into()],
        payment_method: payment_method.to_owned(),
        timeout: Duration::from_secs(10),
    })
}

/// The `Stripe-Signature` value the official library makes for `body` at `at` (unix secs).
fn stripe_signature(secret: &str, body: &[u8], at: i64) -> String {
    let signer = std::env::var("CONVERGE_STRIPE_SIGNER")
        .unwrap_or_else(|_| format!("{}/../scripts/stripe_sign.mjs", env!("CARGO_MANIFEST_DIR")));
    let mut child = Command::new("node")
        .arg(&signer)
        .args(["--secret", secret, "--timestamp", &at.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs the stripe signer");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body)
        .expect("payload written");
    let out = child.wait_with_output().expect("signer ends");
    assert!(out.status.success(), "stripe_sign.mjs failed");
    String::from_utf8(out.stdout)
        .expect("ascii")
        .trim()
        .to_owned()
}

fn stripe_callbacks() -> Callbacks {
    Callbacks {
        sign: Box::new(|body: &[u8], at: i64| {
            let mut h = HeaderMap::new();
            let v = stripe_signature(WEBHOOK_SECRET, body, at);
            h.insert(STRIPE_SIGNATURE_HEADER, HeaderValue::from_str(&v).unwrap());
            h
        }),
        event: Box::new(|id, key, amount, currency, at| {
            payment_intent_event(id, "payment_intent.succeeded", key, amount, currency, at)
                .into_bytes()
        }),
    }
}

/// A Stripe event about a PaymentIntent of converge's (automatic capture, succeeded).
pub fn payment_intent_event(
    id: &str,
    kind: &str,
    key: &str,
    amount: i64,
    currency: &str,
    at: i64,
) -> String {
    json!({"id": id, "object": "event", "type": kind, "created": at, "livemode": false,
        "data": {"object": {"id": format!("pi_{id}"), "object": "payment_intent",
            "amount": amount, "amount_received": amount, "currency": currency.to_lowercase(),
            "status": "succeeded", "capture_method": "automatic", "created": at,
            "metadata": {"converge_key": key}}}})
    .to_string()
}

/// A Stripe `charge.dispute.*` event: dispute `dispute` of PaymentIntent `intent` (Stripe's
/// Dispute object: it names the PaymentIntent, not converge's key), in `status`.
fn dispute_event(
    id: &str,
    kind: &str,
    dispute: &str,
    intent: &str,
    status: &str,
    at: i64,
) -> String {
    json!({"id": id, "object": "event", "type": kind, "created": at, "livemode": false,
        "data": {"object": {"id": dispute, "object": "dispute", "amount": 5_000,
            "currency": "usd", "reason": "fraudulent", "status": status,
            "payment_intent": intent, "charge": format!("ch_{dispute}")}}})
    .to_string()
}

/// Stripe's dispute webhooks for the payment charged at PaymentIntent `intent`, at
/// `connector`'s route: the opened dispute puts the payment in the error pool (found by the
/// PaymentIntent's key, retrieved from the fake), the lost one opens its own item, the payment
/// stays SUCCESS; a dispute of a PaymentIntent not converge's is an unknown payment's.
async fn stripe_disputes(app: &TestApp, connector: &str, payment_id: &str, intent: &str) {
    let at = chrono::Utc::now().timestamp();
    let dp = converge_server::ids::new_id("dp");
    for (kind, status) in [
        ("charge.dispute.created", "needs_response"),
        ("charge.dispute.closed", "lost"),
    ] {
        let body = dispute_event(
            &converge_server::ids::new_id("evt"),
            kind,
            &dp,
            intent,
            status,
            at,
        );
        let sig = stripe_signature(WEBHOOK_SECRET, body.as_bytes(), at);
        let a = post_stripe_webhook(app, connector, &body, &sig).await;
        assert_eq!(
            (a.status, a.json()["outcome"].as_str()),
            (200, Some("ignored")),
            "{:?}",
            a.json()
        );
    }
    let items = app
        .sql_strings(
            "SELECT dedupe_key || ' ' || status FROM error_pool WHERE kind = 'dispute' AND payment_id = $1 ORDER BY id",
            &[payment_id],
        )
        .await;
    assert_eq!(
        items,
        [
            format!("dispute:{dp} resolved"),
            format!("dispute:{dp}:lost open")
        ]
    );
    let p = app.store.payment(payment_id).await.unwrap().unwrap();
    assert_eq!(p.status.as_str(), "SUCCESS", "a dispute moves no payment");
    let foreign = dispute_event(
        "evt_dp_foreign",
        "charge.dispute.created",
        "dp_foreign",
        "pi_notconverges",
        "needs_response",
        at,
    );
    let sig = stripe_signature(WEBHOOK_SECRET, foreign.as_bytes(), at);
    let f = post_stripe_webhook(app, connector, &foreign, &sig).await;
    assert_eq!(
        (f.status, f.json()["outcome"].as_str()),
        (200, Some("unknown_payment"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stripe_connector_meets_the_contract_against_localstripe() {
    let Some(url) = fake("CONVERGE_LOCALSTRIPE_URL") else {
        return;
    };
    let stripe = connector(&url, DEFAULT_PAYMENT_METHOD);
    let declining = connector(&url, DECLINING_PM);
    run_conformance(&Subject {
        connector: &stripe,
        prefix: converge_server::ids::new_id("cf"),
        currency: "USD",
        ok_amount: 10_000,
        decline: Some((&declining, 10_000)),
        holds: true,
        multicapture: false,
        callbacks: Some(stripe_callbacks()),
        statements: true,
        fees: true,
        late: None,
        now_secs: chrono::Utc::now().timestamp(),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_whose_answer_was_lost_is_found_by_its_key_in_a_new_process() {
    let Some(url) = fake("CONVERGE_LOCALSTRIPE_URL") else {
        return;
    };
    let key = converge_server::ids::new_id("lost");
    let first = connector(&url, DEFAULT_PAYMENT_METHOD);
    assert!(matches!(
        first.charge(&key, 4_200, "USD").await,
        ChargeOutcome::Succeeded { amount: 4_200, .. }
    ));
    // A restarted process knows no PaymentIntent id: it finds the charge by its key.
    let restarted = connector(&url, DEFAULT_PAYMENT_METHOD);
    assert_eq!(
        restarted.query(&key).await,
        QueryOutcome::Succeeded {
            amount: 4_200,
            currency: "USD".into()
        }
    );
}

#[test]
fn webhooks_signed_by_the_official_library_verify_during_a_secret_roll_and_never_after_tampering() {
    if fake("CONVERGE_LOCALSTRIPE_URL").is_none() {
        return;
    }
    let c = connector("http://127.0.0.1:1", DEFAULT_PAYMENT_METHOD);
    let now = chrono::Utc::now().timestamp();
    let body = payment_intent_event(
        "evt_roll",
        "payment_intent.succeeded",
        "k-1",
        700,
        "EUR",
        now,
    );
    let headers = |secret: &str, at: i64| {
        let mut h = HeaderMap::new();
        let v = stripe_signature(secret, body.as_bytes(), at);
        h.insert(STRIPE_SIGNATURE_HEADER, HeaderValue::from_str(&v).unwrap());
        h
    };
    for secret in ["whsec_old_rolled_out", WEBHOOK_SECRET] {
        let fact = c
            .verify_callback(&headers(secret, now), body.as_bytes(), now)
            .expect("signed with a secret the connector trusts");
        assert_eq!(
            (fact.kind.as_str(), fact.channel_key.as_str(), fact.amount),
            ("charge.succeeded", "k-1", 700)
        );
        assert_eq!(fact.currency, "EUR");
    }
    assert_eq!(
        c.verify_callback(&headers("whsec_someone_else", now), body.as_bytes(), now),
        Err(CallbackRejection::BadSignature)
    );
    assert_eq!(
        c.verify_callback(&headers(WEBHOOK_SECRET, now - 301), body.as_bytes(), now),
        Err(CallbackRejection::TooOld),
        "outside Stripe's 300 s tolerance"
    );
    let tampered = body.replace("700", "7000");
    assert_eq!(
        c.verify_callback(&headers(WEBHOOK_SECRET, now), tampered.as_bytes(), now),
        Err(CallbackRejection::BadSignature)
    );
}

/// The PaymentIntent under converge's `key` at the Stripe fake at `url`, read straight from
/// its list (all pages), not through the connector under test.
async fn intent_at(url: &str, key: &str) -> Option<Value> {
    let client = reqwest::Client::new();
    let mut after: Option<String> = None;
    loop {
        let mut q = vec![("limit", "100".to_owned())];
        if let Some(a) = &after {
            q.push(("starting_after", a.clone()));
        }
        let page: Value = client
            .get(format!("{url}/v1/payment_intents"))
            .basic_auth("sk_test_converge", None::<&str>)
            .query(&q)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let data = page["data"].as_array()?;
        if let Some(i) = data.iter().find(|i| i["metadata"]["converge_key"] == key) {
            return Some(i.clone());
        }
        after = data.last()?["id"].as_str().map(str::to_owned);
        if page["has_more"] != true {
            return None;
        }
    }
}

/// What the Stripe fake has refunded of the PaymentIntent `intent`, minor units.
async fn refunded_at(url: &str, intent: &str) -> i64 {
    let list: Value = reqwest::Client::new()
        .get(format!("{url}/v1/refunds"))
        .basic_auth("sk_test_converge", None::<&str>)
        .query(&[("payment_intent", intent), ("limit", "100")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["amount"].as_i64().unwrap())
        .sum()
}

async fn post_stripe_webhook(app: &TestApp, connector: &str, body: &str, sig: &str) -> Answer {
    let req = app
        .client
        .post(format!("{}/v1/connectors/{connector}/callbacks", app.base))
        .header("content-type", "application/json")
        .header(STRIPE_SIGNATURE_HEADER, sig)
        .body(body.to_owned());
    app.send(req).await
}

/// A merchant put on its own Stripe account (the admin's use case, as the CLI and the
/// merchants page call it): its payments are charged and refunded at Stripe (localstripe),
/// its Stripe webhooks are verified at the connector's route and applied once, and after it
/// is switched back to the sandbox its new payments go there while the Stripe payment is
/// still refunded at Stripe.
async fn a_merchant_on_its_own_stripe_account(db: Db) {
    let Some(url) = fake("CONVERGE_LOCALSTRIPE_URL") else {
        return;
    };
    let Some(app) = TestApp::spawn(db).await else {
        eprintln!("SKIPPED on PostgreSQL: set CONVERGE_TEST_PG_URL");
        return;
    };
    let (db_url, teardown) = (app.db_url.clone(), app.teardown());
    let stripe = ConnectorChoice::Stripe {
        api_base: url.clone(),
        secret_key: "sk_test_converge_e2e_0001".into(),
        webhook_secrets: vec![WEBHOOK_SECRET.into()],
        payment_method: None,
    };
    let now = chrono::Utc::now().timestamp_millis();
    app.core()
        .set_merchant_connector(now, "acme", &stripe, "own account", &setup_actor())
        .await
        .expect("the account is set");
    let connector = format!("stripe-{}", app.merchant_id);
    let a = app
        .post(
            "/v1/payments",
            Some("stripe-e2e-1"),
            &json!({"amount": 5_000, "currency": "USD", "merchant_order_id": "stripe-1"}),
        )
        .await;
    assert_eq!(a.json()["status"], "SUCCESS", "{:?}", a.json());
    let id = a.json()["id"].as_str().unwrap().to_owned();
    let p = app.store.payment(&id).await.unwrap().unwrap();
    assert_eq!(
        p.connector, connector,
        "routed to the merchant's own account"
    );
    let intent = intent_at(&url, &p.channel_key)
        .await
        .expect("the PaymentIntent is at Stripe under the payment's channel key");
    assert_eq!(
        (intent["amount"].as_i64(), intent["status"].as_str()),
        (Some(5_000), Some("succeeded"))
    );
    assert_eq!(
        app.channel_attempts(&p.channel_key).await,
        0,
        "the sandbox never saw it"
    );

    // Stripe's webhook for it: verified at the connector's route, applied once.
    let at = chrono::Utc::now().timestamp();
    let evt = converge_server::ids::new_id("evt");
    let body = payment_intent_event(
        &evt,
        "payment_intent.succeeded",
        &p.channel_key,
        5_000,
        "USD",
        at,
    );
    let sig = stripe_signature(WEBHOOK_SECRET, body.as_bytes(), at);
    let first = post_stripe_webhook(&app, &connector, &body, &sig).await;
    assert_eq!(first.status, 200, "{:?}", first.json());
    assert_ne!(first.json()["outcome"], "unknown_payment");
    let again = post_stripe_webhook(&app, &connector, &body, &sig).await;
    assert_eq!(again.json()["outcome"], "duplicate");
    post_stripe_webhook(&app, &connector, &body.replace("5000", "50"), &sig)
        .await
        .assert_error(401, "invalid_signature");
    post_stripe_webhook(&app, "stripe-999", &body, &sig)
        .await
        .assert_error(404, "not_found");
    let foreign = payment_intent_event(
        "evt_foreign",
        "payment_intent.succeeded",
        "not-ours",
        1,
        "USD",
        at,
    )
    .replace("\"converge_key\":\"not-ours\"", "\"order\":\"x\"");
    let fsig = stripe_signature(WEBHOOK_SECRET, foreign.as_bytes(), at);
    let f = post_stripe_webhook(&app, &connector, &foreign, &fsig).await;
    assert_eq!(
        (f.status, f.json()["outcome"].as_str()),
        (200, Some("unknown_payment")),
        "another PaymentIntent of the account is acknowledged, never refused"
    );
    stripe_disputes(&app, &connector, &id, intent["id"].as_str().unwrap()).await;

    // Back to the sandbox: new payments go there; the Stripe payment is refunded at Stripe.
    app.core()
        .set_merchant_connector(
            now + 1,
            "acme",
            &ConnectorChoice::Default,
            "back",
            &setup_actor(),
        )
        .await
        .unwrap();
    let b = app.pay("stripe-e2e-2", "sandbox-1", 3_000).await;
    let q = app
        .store
        .payment(b["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.connector, "sandbox");
    // The account's route speaks for its own payments only: an event it signs about the
    // sandbox payment's key moves nothing.
    let cross = payment_intent_event(
        &converge_server::ids::new_id("evt"),
        "payment_intent.succeeded",
        &q.channel_key,
        3_000,
        "CNY",
        at,
    );
    let csig = stripe_signature(WEBHOOK_SECRET, cross.as_bytes(), at);
    let c = post_stripe_webhook(&app, &connector, &cross, &csig).await;
    assert_eq!(
        (c.status, c.json()["outcome"].as_str()),
        (200, Some("unknown_payment"))
    );
    let r = app
        .post(
            &format!("/v1/payments/{id}/refunds"),
            Some("stripe-e2e-r"),
            &json!({"amount": 2_000, "reason": "returned"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let pi = intent["id"].as_str().unwrap().to_owned();
    let refunded = eventually(Duration::from_secs(15), "the refund at Stripe", || async {
        let n = refunded_at(&url, &pi).await;
        (n == 2_000).then_some(n)
    })
    .await;
    assert_eq!(refunded, 2_000);
    let audit = app
        .sql_strings("SELECT after_state FROM audit_log WHERE action = 'merchant_connector_set' ORDER BY seq", &[])
        .await;
    assert_eq!(audit.len(), 2, "both changes audited: {audit:?}");
    assert!(
        audit[0].contains("…0001") && !audit[0].contains("sk_test"),
        "the key is never in the audit log: {}",
        audit[0]
    );
    verify_reads_the_account(
        &app,
        &url,
        &connector,
        &[p.channel_key.clone(), q.channel_key.clone()],
    )
    .await;
    app.skip_invariant_check(
        "the Stripe payment's charge is at localstripe; the teardown reconciles against the sandbox's charge list only",
    );
    teardown.check().await;
    drop(app);
    drop_database(&db_url).await;
}

mod a_merchant_on_its_own_stripe_account_is_charged_notified_and_refunded_there {
    use super::a_merchant_on_its_own_stripe_account as run;
    use crate::support::Db;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        run(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        run(Db::Postgres).await;
    }
}

/// `converge verify`'s check over the sandbox and the merchant's Stripe account together:
/// scoped to `keys` (localstripe is shared by other tests) and to a charge made at Stripe
/// under a key no payment has, which must be the one breach: an orphan charge.
async fn verify_reads_the_account(app: &TestApp, url: &str, name: &str, keys: &[String]) {
    use converge_server::verify::{
        self, Breach, ChargeSources, HttpChargeSource, Scope, StripeChargeSource, Window,
    };
    let stray = converge_server::ids::new_id("stray");
    let at_stripe = connector(url, DEFAULT_PAYMENT_METHOD);
    assert!(matches!(
        at_stripe.charge(&stray, 900, "USD").await,
        ChargeOutcome::Succeeded { .. }
    ));
    let (account, stripe) = app.core().stripe_accounts().await.unwrap().pop().unwrap();
    assert_eq!(account, name);
    let sandbox = &app
        .running
        .sandbox
        .as_ref()
        .expect("in-process sandbox")
        .url;
    let sources = ChargeSources::default()
        .with_default(Box::new(
            HttpChargeSource::new(sandbox, Duration::from_secs(10)).unwrap(),
        ))
        .with_named(name, Box::new(StripeChargeSource::new(name, stripe)));
    let mut scope_keys: std::collections::BTreeSet<String> = keys.iter().cloned().collect();
    scope_keys.insert(stray.clone());
    let scope = Scope::Changed {
        since_ms: 0,
        channel_keys: scope_keys,
        audit_unchanged: None,
        database_unchanged: false,
    };
    let window = Window {
        now_ms: chrono::Utc::now().timestamp_millis(),
        window_ms: 300_000,
        action_window_ms: 0,
    };
    let report = verify::run_scoped(&*app.store, Some(&sources), window, &scope)
        .await
        .expect("verify runs");
    assert_eq!(report.breaches.len(), 1, "{:?}", report.breaches);
    assert!(
        matches!(&report.breaches[0], Breach::OrphanCharge { key, .. } if *key == stray),
        "{:?}",
        report.breaches
    );
}

/// One form request to a Stripe fake, as the connector sends them; the status and body.
async fn stripe_call(
    url: &str,
    method: reqwest::Method,
    path: &str,
    form: &[(&str, &str)],
    idempotency: Option<&str>,
    auth: bool,
) -> (u16, Vec<u8>) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{url}{path}"))
        .form(form);
    if auth {
        req = req.basic_auth("sk_test_converge", None::<&str>);
    }
    if let Some(k) = idempotency {
        req = req.header("Idempotency-Key", k);
    }
    let resp = req.send().await.expect("the fake answers");
    let status = resp.status().as_u16();
    (status, resp.bytes().await.unwrap().to_vec())
}

/// A dispute as a second Stripe implementation makes it (stripe-stateful-mock's
/// `tok_createDisputeProductNotReceived` charge), in a `charge.dispute.created` event signed
/// by the official library, reads as the core's `dispute.opened` fact with its amount,
/// currency, id and reason (localstripe has no disputes). A Charges API charge has no
/// PaymentIntent, so the fact names no reference: an unknown payment's, as it should be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_stripe_implementations_dispute_reads_as_a_dispute_fact() {
    use reqwest::Method;
    let Some(mock) = fake("CONVERGE_STRIPE_MOCK_URL") else {
        return;
    };
    let form = [
        ("amount", "5000"),
        ("currency", "usd"),
        ("source", "tok_createDisputeProductNotReceived"),
    ];
    let (status, body) = stripe_call(&mock, Method::POST, "/v1/charges", &form, None, true).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let charge: Value = serde_json::from_slice(&body).unwrap();
    // The fake disputes the charge just after answering, as Stripe does.
    let path = format!("/v1/charges/{}", charge["id"].as_str().unwrap());
    let id = eventually(Duration::from_secs(10), "the charge disputed", || async {
        let (_, body) = stripe_call(&mock, Method::GET, &path, &[], None, true).await;
        let charge: Value = serde_json::from_slice(&body).ok()?;
        charge["dispute"].as_str().map(str::to_owned)
    })
    .await;
    let id = id.as_str();
    let (status, body) = stripe_call(
        &mock,
        Method::GET,
        &format!("/v1/disputes/{id}"),
        &[],
        None,
        true,
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let dispute: Value = serde_json::from_slice(&body).unwrap();
    let at = chrono::Utc::now().timestamp();
    let event =
        json!({"id": "evt_dispute_mock", "object": "event", "type": "charge.dispute.created",
        "created": at, "data": {"object": dispute}})
        .to_string();
    let mut headers = HeaderMap::new();
    let sig = stripe_signature(WEBHOOK_SECRET, event.as_bytes(), at);
    headers.insert(
        STRIPE_SIGNATURE_HEADER,
        HeaderValue::from_str(&sig).unwrap(),
    );
    let fact = connector(&mock, DEFAULT_PAYMENT_METHOD)
        .verify_callback(&headers, event.as_bytes(), at)
        .expect("verified");
    assert_eq!(
        (fact.kind.as_str(), fact.amount, fact.currency.as_str()),
        ("dispute.opened", 5000, "USD")
    );
    assert_eq!(fact.dispute_id.as_deref(), Some(id));
    assert_eq!(fact.reason.as_deref(), Some("product_not_received"));
    assert_eq!(fact.reference, None);
}

/// stripe-stateful-mock (npm) implements only Stripe's Charges API, so it cannot run the
/// PaymentIntents connector's suite; what it can check is the decision table against a
/// second implementation's errors, and the Idempotency-Key behaviour the fence relies on
/// (localstripe ignores the header). Each answer is read by the connector's own
/// [`decision_of`]; localstripe's decline, which it types `invalid_request_error` where
/// Stripe says `card_error`, must read as a decline too (Stripe: 402 is "request failed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_table_reads_a_second_stripe_implementations_answers() {
    use converge_server::channel::stripe::{Decision, decision_of};
    use reqwest::Method;
    let (Some(mock), Some(ls)) = (
        fake("CONVERGE_STRIPE_MOCK_URL"),
        fake("CONVERGE_LOCALSTRIPE_URL"),
    ) else {
        return;
    };
    let charge = |source: &'static str, amount: &'static str| {
        let mock = mock.clone();
        async move {
            let form = [("amount", amount), ("currency", "usd"), ("source", source)];
            stripe_call(&mock, Method::POST, "/v1/charges", &form, None, true).await
        }
    };
    let decided = |(status, body): (u16, Vec<u8>)| decision_of(status, &body);
    assert_eq!(
        decided(charge("tok_chargeDeclined", "1000").await),
        Decision::Declined("generic_decline".into())
    );
    assert_eq!(
        decided(charge("tok_chargeDeclinedInsufficientFunds", "1000").await),
        Decision::Declined("insufficient_funds".into())
    );
    for undecidable in ["tok_429", "tok_500"] {
        assert!(
            matches!(
                decided(charge(undecidable, "1000").await),
                Decision::Undecidable(_)
            ),
            "{undecidable} is a rate limit or Stripe's own error: undecidable"
        );
    }
    let unauthenticated = stripe_call(&mock, Method::GET, "/v1/charges", &[], None, false).await;
    assert!(matches!(
        decided(unauthenticated),
        Decision::Configuration(_)
    ));
    let missing = stripe_call(&mock, Method::GET, "/v1/charges/ch_none", &[], None, true).await;
    assert!(matches!(decided(missing), Decision::Refused(_)));

    // The same Idempotency-Key with other parameters is refused, never a second charge;
    // with the same ones, the first answer again.
    let key = converge_server::ids::new_id("idem");
    let form = |amount| {
        [
            ("amount", amount),
            ("currency", "usd"),
            ("source", "tok_visa"),
        ]
    };
    let first = stripe_call(
        &mock,
        Method::POST,
        "/v1/charges",
        &form("1000"),
        Some(&key),
        true,
    )
    .await;
    assert_eq!(first.0, 200);
    let replay = stripe_call(
        &mock,
        Method::POST,
        "/v1/charges",
        &form("1000"),
        Some(&key),
        true,
    )
    .await;
    let id = |b: &[u8]| serde_json::from_slice::<Value>(b).unwrap()["id"].clone();
    assert_eq!((replay.0, id(&replay.1)), (200, id(&first.1)));
    let late = stripe_call(
        &mock,
        Method::POST,
        "/v1/charges",
        &form("2000"),
        Some(&key),
        true,
    )
    .await;
    assert_eq!(decided(late), Decision::KeyReused);

    // localstripe's decline (PaymentMethod 4000000000000341's alias).
    let form = [
        ("amount", "1000"),
        ("currency", "usd"),
        ("payment_method", DECLINING_PM),
        ("confirm", "true"),
    ];
    let ls_decline = stripe_call(&ls, Method::POST, "/v1/payment_intents", &form, None, true).await;
    assert_eq!(
        decided(ls_decline),
        Decision::Declined("card_declined".into())
    );
}

fn admin(name: &str) -> converge_server::service::actor::Actor {
    converge_server::service::actor::Actor {
        username: name.into(),
        roles: "viewer,admin".into(),
        meta: "{}".into(),
    }
}

/// From the console, a merchant's own Stripe account is a request a second admin approves
/// (issue 36: where the money goes is not one admin's choice): until then its payments stay on
/// the sandbox, the requester cannot approve it, and the approval routes them to the account;
/// going back to the default connector is one step. The secret key is in no audit record.
async fn a_stripe_account_chosen_on_the_console_waits_for_a_second_admin(db: Db) {
    use converge_server::service::privilege::Change;
    let Some(app) = TestApp::spawn(db).await else {
        eprintln!("SKIPPED on PostgreSQL: set CONVERGE_TEST_PG_URL");
        return;
    };
    let (db_url, teardown) = (app.db_url.clone(), app.teardown());
    let core = app.core();
    let stripe = ConnectorChoice::Stripe {
        api_base: "http://127.0.0.1:1".into(),
        secret_key: "sk_test_console_secret_9876".into(),
        webhook_secrets: vec![],
        payment_method: None,
    };
    let bad = ConnectorChoice::Stripe {
        api_base: "http://127.0.0.1:1".into(),
        secret_key: "pk_test_publishable_1".into(),
        webhook_secrets: vec![],
        payment_method: None,
    };
    let maker = admin("admin-maker");
    assert!(
        core.console_set_merchant_connector(&maker, "acme", &bad, "x")
            .await
            .unwrap_err()
            .to_string()
            .contains("secret key")
    );
    let Change::Requested(r) = core
        .console_set_merchant_connector(&maker, "acme", &stripe, "own account")
        .await
        .unwrap()
    else {
        panic!("a Stripe account is a request");
    };
    assert_eq!(r.kind, "set_connector");
    assert!(r.reason.contains("key …9876"), "{}", r.reason);
    assert_eq!(
        core.connectors.route(app.merchant_id, None),
        "sandbox",
        "nothing moves yet"
    );
    assert!(
        core.approve_privilege(&maker, &r.id, "mine").await.is_err(),
        "not by its requester"
    );
    core.approve_privilege(&admin("admin-checker"), &r.id, "checked the account")
        .await
        .expect("a second admin approves");
    assert_eq!(
        core.connectors.route(app.merchant_id, None),
        format!("stripe-{}", app.merchant_id)
    );
    let other_key = ConnectorChoice::Stripe {
        api_base: "http://127.0.0.1:1".into(),
        secret_key: "sk_test_another_account_1".into(),
        webhook_secrets: vec![],
        payment_method: None,
    };
    let refused = core
        .console_set_merchant_connector(&maker, "acme", &other_key, "another account")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("cannot be replaced"),
        "its payments are answered by the account it has: {refused}"
    );
    let Change::Done(()) = core
        .console_set_merchant_connector(&maker, "acme", &ConnectorChoice::Default, "back")
        .await
        .unwrap()
    else {
        panic!("back to the default connector is one step");
    };
    assert_eq!(core.connectors.route(app.merchant_id, None), "sandbox");
    let leaked = app
        .sql_i64(
            "SELECT COUNT(*) FROM audit_log WHERE after_state LIKE '%sk_test_console%' \
             OR before_state LIKE '%sk_test_console%' OR reason LIKE '%sk_test_console%'",
            &[],
        )
        .await;
    assert_eq!(leaked, 0, "the secret key is in no audit record");
    teardown.check().await;
    drop(app);
    drop_database(&db_url).await;
}

mod a_stripe_account_chosen_on_the_console_waits_for_a_second_admin {
    use super::a_stripe_account_chosen_on_the_console_waits_for_a_second_admin as run;
    use crate::support::Db;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        run(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        run(Db::Postgres).await;
    }
}

/// A PaymentMethod of Stripe's test card 4000 0000 0000 3220 ("3-D Secure 2 authentication
/// must be completed for the payment to be successful"), made at the Stripe fake at `url`.
async fn three_d_secure_pm(url: &str) -> String {
    let pm: Value = reqwest::Client::new()
        .post(format!("{url}/v1/payment_methods"))
        .basic_auth("sk_test_converge", None::<&str>)
        .form(&[
            ("type", "card"),
            ("card[number]", "4000000000003220"),
            ("card[exp_month]", "12"),
            ("card[exp_year]", "2030"),
            ("card[cvc]", "123"),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    pm["id"].as_str().expect("a PaymentMethod id").to_owned()
}

/// The customer's 3-D Secure step at localstripe (its `_authenticate` endpoint, the stand-in
/// for the issuer's challenge page that Stripe.js opens), passed or failed.
async fn customer_authenticates(url: &str, intent: &Value, success: bool) {
    let answer = reqwest::Client::new()
        .post(format!(
            "{url}/v1/payment_intents/{}/_authenticate",
            intent["id"].as_str().unwrap()
        ))
        .basic_auth("sk_test_converge", None::<&str>)
        .form(&[
            ("client_secret", intent["client_secret"].as_str().unwrap()),
            ("success", if success { "true" } else { "false" }),
        ])
        .send()
        .await
        .unwrap();
    assert!(
        answer.status().is_success(),
        "{}",
        answer.text().await.unwrap()
    );
}

/// A payment of 42.00 EUR (`capture`: automatic or manual) the merchant's Stripe account
/// answers with a customer's step: REQUIRES_ACTION here, `requires_action` at Stripe.
async fn waiting(
    app: &TestApp,
    url: &str,
    order: &str,
    capture: &str,
) -> (converge_server::store::Payment, Value) {
    let body =
        json!({"amount": 4_200, "currency": "EUR", "merchant_order_id": order, "capture": capture});
    let a = app.post("/v1/payments", Some(order), &body).await;
    assert_eq!(a.json()["status"], "REQUIRES_ACTION", "{:?}", a.json());
    let p = app
        .store
        .payment(a.json()["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    let intent = intent_at(url, &p.channel_key).await.expect("at Stripe");
    assert_eq!(intent["status"], "requires_action");
    (p, intent)
}

/// The outbox event types of payment `id`, in order.
async fn types(app: &TestApp, id: &str) -> Vec<String> {
    app.sql_strings(
        "SELECT type FROM events WHERE aggregateid = $1 ORDER BY seq",
        &[id],
    )
    .await
}

/// A merchant whose Stripe account asks for 3-D Secure (issue 38: `requires_action` is a
/// waiting state with its own threshold and event): a sale and a hold wait in
/// REQUIRES_ACTION and tell the merchant; the customer's step, found by the query, charges or
/// holds; a failed step fails the payment; nobody acting within the action window cancels the
/// key at Stripe before the payment fails.
async fn a_customer_who_must_authenticate(db: Db) {
    use converge_server::service::resolve::Step;
    let Some(url) = fake("CONVERGE_LOCALSTRIPE_URL") else {
        return;
    };
    let Some(app) = TestApp::spawn_with(db, |s| s.jobs.action_window_secs = 2).await else {
        eprintln!("SKIPPED on PostgreSQL: set CONVERGE_TEST_PG_URL");
        return;
    };
    let (db_url, teardown) = (app.db_url.clone(), app.teardown());
    let stripe = ConnectorChoice::Stripe {
        api_base: url.clone(),
        secret_key: "sk_test_converge_3ds_0001".into(),
        webhook_secrets: vec![WEBHOOK_SECRET.into()],
        payment_method: Some(three_d_secure_pm(&url).await),
    };
    let now = chrono::Utc::now().timestamp_millis();
    app.core()
        .set_merchant_connector(now, "acme", &stripe, "3-D Secure cards", &setup_actor())
        .await
        .expect("the account is set");
    // A sale: the merchant hears it waits; the query before the customer acts waits on.
    let (sale, intent) = waiting(&app, &url, "3ds-sale", "automatic").await;
    assert_eq!(types(&app, &sale.id).await, ["payment.requires_action"]);
    let step = app
        .core()
        .resolve_action(sale.clone(), "test")
        .await
        .unwrap();
    assert!(matches!(step, Step::WaitUntil { .. }), "{step:?}");
    customer_authenticates(&url, &intent, true).await;
    let step = app
        .core()
        .resolve_action(sale.clone(), "test")
        .await
        .unwrap();
    assert_eq!(step, Step::Done);
    let sale = app.store.payment(&sale.id).await.unwrap().unwrap();
    assert_eq!(sale.status.as_str(), "SUCCESS");
    assert_eq!(
        types(&app, &sale.id).await,
        ["payment.requires_action", "payment.succeeded"]
    );

    // A hold: the customer's step makes the hold; a void releases it.
    let (hold, intent) = waiting(&app, &url, "3ds-hold", "manual").await;
    customer_authenticates(&url, &intent, true).await;
    app.core()
        .resolve_action(hold.clone(), "test")
        .await
        .unwrap();
    let hold = app.store.payment(&hold.id).await.unwrap().unwrap();
    assert_eq!(hold.status.as_str(), "AUTHORIZED");
    let voided = app
        .post(
            &format!("/v1/payments/{}/void", hold.id),
            Some("3ds-void"),
            &json!({}),
        )
        .await;
    assert_eq!(voided.json()["status"], "VOIDED", "{:?}", voided.json());

    // A failed step fails the payment, as the query finds it.
    let (failed, intent) = waiting(&app, &url, "3ds-failed", "automatic").await;
    customer_authenticates(&url, &intent, false).await;
    app.core()
        .resolve_action(failed.clone(), "test")
        .await
        .unwrap();
    let failed = app.store.payment(&failed.id).await.unwrap().unwrap();
    assert_eq!(failed.status.as_str(), "FAILED");

    // Nobody acts: within the window it waits, after it the key is cancelled at Stripe first.
    let (abandoned, _) = waiting(&app, &url, "3ds-abandoned", "automatic").await;
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let step = app
        .core()
        .resolve_action(abandoned.clone(), "test")
        .await
        .unwrap();
    assert_eq!(step, Step::Done);
    let abandoned = app.store.payment(&abandoned.id).await.unwrap().unwrap();
    assert_eq!(abandoned.status.as_str(), "FAILED");
    let at_stripe = intent_at(&url, &abandoned.channel_key).await.unwrap();
    assert_eq!(at_stripe["status"], "canceled", "cancelled before FAILED");
    let events = app.store.payment_events(&abandoned.id).await.unwrap();
    assert_eq!(events.last().unwrap().event, "action_abandoned");

    app.skip_invariant_check(
        "the Stripe payments are at localstripe; the teardown reconciles against the sandbox's charge list only",
    );
    teardown.check().await;
    drop(app);
    drop_database(&db_url).await;
}

mod a_customer_who_must_authenticate_waits_in_requires_action_until_they_do_or_the_window_ends {
    use super::a_customer_who_must_authenticate as run;
    use crate::support::Db;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        run(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        run(Db::Postgres).await;
    }
}
