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
use serde_json::json;

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
        statements: false,
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
