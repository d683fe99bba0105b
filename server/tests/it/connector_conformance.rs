//! The connector contract's conformance suite (issue 33 "A connector home"; the contract is
//! written once, on `converge_server::channel::Connector`). [`run_conformance`] proves it of
//! any connector: charge then query, declines, the cancel fence, refunds idempotent on their
//! key, holds (authorize, partial and final capture, void, expiry dates, the void fence),
//! callbacks verified and parsed, statements that reconcile can read, undecidable answers
//! resolved by a query, and `Unsupported` for whatever the connector does not offer. Here it
//! runs against the real sandbox over HTTP; a PSP connector (issue 38) runs the same function
//! with its own [`Subject`].
//!
//! The routing tests prove that a payment goes to the connector its merchant is routed to,
//! and that its later operations go there too.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::{HeaderMap, HeaderValue};
use converge_server::channel::http::HttpConnector;
use converge_server::channel::sandbox::{self, SandboxConfig, SandboxHandle};
use converge_server::channel::signature::{SIGNATURE_HEADER, sign};
use converge_server::channel::{
    AuthorizeOutcome, CallbackRejection, CancelOutcome, CaptureOutcome, ChargeOutcome, Connector,
    HoldQueryOutcome, HoldStatus, Operation, QueryOutcome, RefundOutcome, StatementError,
    Unsupported, VoidOutcome,
};
use converge_server::service::reconcile::parse_statement;
use serde_json::{Value, json};

/// Signs a callback body at a time (unix seconds) as the connector would: the headers.
pub type Signer = Box<dyn Fn(&[u8], i64) -> HeaderMap + Send + Sync>;

/// Writes the body of a connector's callback in its own protocol: a successful charge of
/// (event id, channel key, amount in minor units, currency, unix seconds).
pub type EventMaker = Box<dyn Fn(&str, &str, i64, &str, i64) -> Vec<u8> + Send + Sync>;

/// How a connector's callbacks are made in tests: signed and written as it would.
pub struct Callbacks {
    /// The signature headers.
    pub sign: Signer,
    /// A charge's success event.
    pub event: EventMaker,
}

/// What the suite needs to know of a connector under test.
pub struct Subject<'a> {
    /// The connector, with a timeout that outlasts its normal answers.
    pub connector: &'a dyn Connector,
    /// Every key the suite uses starts with this (unique per run, so runs never collide).
    pub prefix: String,
    /// ISO 4217 code to charge in.
    pub currency: &'static str,
    /// An amount (minor units) the connector charges and authorizes without fault.
    pub ok_amount: i64,
    /// A connector (the same one, or the same account set up to decline) and an amount it
    /// declines explicitly, if a decline can be forced.
    pub decline: Option<(&'a dyn Connector, i64)>,
    /// Whether it offers holds (authorize, capture, void, query_hold).
    pub holds: bool,
    /// Whether a hold takes several captures; without, the first capture closes it.
    pub multicapture: bool,
    /// How its callbacks are signed and written, if it sends any the core can check.
    pub callbacks: Option<Callbacks>,
    /// Whether it has statements.
    pub statements: bool,
    /// Whether its statement lines carry the fee and net (a PSP's balance transactions).
    pub fees: bool,
    /// An undecidable answer that can be forced: the same connector with a short timeout,
    /// and an amount it commits but answers after that timeout.
    pub late: Option<(&'a dyn Connector, i64)>,
    /// The connector's "now", unix seconds UTC (callback signatures, hold expiry).
    pub now_secs: i64,
}

impl Subject<'_> {
    fn key(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }
}

/// Proves the whole contract of `s.connector`; panics naming the first broken rule.
pub async fn run_conformance(s: &Subject<'_>) {
    charge_then_query_says_succeeded(s).await;
    a_key_never_used_is_not_found(s).await;
    a_decline_is_definitive(s).await;
    cancel_fences_a_later_charge(s).await;
    cancel_after_a_charge_answers_already_charged(s).await;
    refunds_are_idempotent_on_their_key(s).await;
    if s.holds {
        holds_authorize_capture_in_parts_and_close(s).await;
        a_void_releases_an_uncaptured_hold_and_fences_an_unused_key(s).await;
    } else {
        hold_operations_answer_unsupported(s).await;
    }
    callbacks_are_verified_and_parsed(s).await;
    statements_parse_and_list_the_charges(s).await;
    undecidable_answers_are_errors_settled_by_a_query(s).await;
}

async fn charge_then_query_says_succeeded(s: &Subject<'_>) {
    let c = s.connector;
    let key = s.key("charge");
    let ok = ChargeOutcome::Succeeded {
        amount: s.ok_amount,
        currency: s.currency.into(),
    };
    assert_eq!(c.charge(&key, s.ok_amount, s.currency).await, ok, "charge");
    assert_eq!(
        c.charge(&key, s.ok_amount, s.currency).await,
        ok,
        "a repeated charge answers the first answer"
    );
    assert_eq!(
        c.query(&key).await,
        QueryOutcome::Succeeded {
            amount: s.ok_amount,
            currency: s.currency.into()
        },
        "query after a charge"
    );
}

async fn a_key_never_used_is_not_found(s: &Subject<'_>) {
    assert_eq!(
        s.connector.query(&s.key("never")).await,
        QueryOutcome::NotFound
    );
}

async fn a_decline_is_definitive(s: &Subject<'_>) {
    let Some((decliner, amount)) = s.decline else {
        return;
    };
    let key = s.key("decline");
    assert!(
        matches!(
            decliner.charge(&key, amount, s.currency).await,
            ChargeOutcome::Declined { .. }
        ),
        "a forced decline is a decline"
    );
    assert!(matches!(
        s.connector.query(&key).await,
        QueryOutcome::Declined { .. }
    ));
}

async fn cancel_fences_a_later_charge(s: &Subject<'_>) {
    let c = s.connector;
    let key = s.key("fenced");
    assert_eq!(c.cancel(&key).await, CancelOutcome::Cancelled);
    assert_eq!(
        c.cancel(&key).await,
        CancelOutcome::Cancelled,
        "cancel is idempotent"
    );
    assert!(
        matches!(
            c.charge(&key, s.ok_amount, s.currency).await,
            ChargeOutcome::Declined { .. }
        ),
        "a charge after the fence is refused, definitively"
    );
    assert_eq!(c.query(&key).await, QueryOutcome::Cancelled);
}

async fn cancel_after_a_charge_answers_already_charged(s: &Subject<'_>) {
    let c = s.connector;
    let key = s.key("late-cancel");
    c.charge(&key, s.ok_amount, s.currency).await;
    assert_eq!(
        c.cancel(&key).await,
        CancelOutcome::AlreadyCharged {
            amount: s.ok_amount,
            currency: s.currency.into()
        }
    );
}

async fn refunds_are_idempotent_on_their_key(s: &Subject<'_>) {
    let c = s.connector;
    let key = s.key("refunded");
    c.charge(&key, s.ok_amount, s.currency).await;
    let part = s.ok_amount / 4;
    let rk = s.key("rf-1");
    assert_eq!(c.refund(&key, &rk, part).await, RefundOutcome::Succeeded);
    assert_eq!(
        c.refund(&key, &rk, part).await,
        RefundOutcome::Succeeded,
        "the same refund key refunds once"
    );
    assert!(
        matches!(
            c.refund(&key, &rk, part + 1).await,
            RefundOutcome::Rejected { .. }
        ),
        "a refund key reused with another amount is refused"
    );
    assert!(
        matches!(
            c.refund(&key, &s.key("rf-2"), s.ok_amount).await,
            RefundOutcome::Rejected { .. }
        ),
        "refunds never exceed the charge"
    );
    assert_eq!(
        c.refund(&key, &s.key("rf-3"), s.ok_amount - part).await,
        RefundOutcome::Succeeded,
        "the rest can be refunded"
    );
    assert!(matches!(
        c.refund(&s.key("never-charged"), &s.key("rf-4"), 1).await,
        RefundOutcome::Rejected { .. }
    ));
}

async fn holds_authorize_capture_in_parts_and_close(s: &Subject<'_>) {
    let c = s.connector;
    let key = s.key("hold");
    let amount = s.ok_amount;
    let Ok(AuthorizeOutcome::Authorized {
        amount: held,
        currency,
        expires_at_ms,
    }) = c.authorize(&key, amount, s.currency, 3_600).await
    else {
        panic!("authorize");
    };
    assert_eq!((held, currency.as_str()), (amount, s.currency));
    let now_ms = s.now_secs * 1000;
    assert!(
        (now_ms..=now_ms + 3_700_000).contains(&expires_at_ms),
        "the hold lapses about an hour from now: {expires_at_ms}"
    );
    assert!(
        matches!(
            c.authorize(&key, amount, s.currency, 3_600).await,
            Ok(AuthorizeOutcome::Authorized { .. })
        ),
        "authorize is idempotent on its key"
    );
    assert!(
        matches!(c.cancel(&key).await, CancelOutcome::Error { .. }),
        "a hold is released by a void, not cancelled as a charge"
    );
    let first = amount / 4;
    let captured = |a, total, closed| {
        Ok(CaptureOutcome::Captured {
            amount: a,
            captured_total: total,
            currency: s.currency.into(),
            closed,
        })
    };
    assert!(
        matches!(
            c.capture(&key, &s.key("cap-big"), amount + 1, false).await,
            Ok(CaptureOutcome::Rejected { .. })
        ),
        "captures never exceed the hold"
    );
    let cap1 = s.key("cap-1");
    // Without multicapture (Stripe) the first capture closes the hold, the rest released.
    let closed_by_first = !s.multicapture;
    assert_eq!(
        c.capture(&key, &cap1, first, false).await,
        captured(first, first, closed_by_first)
    );
    assert_eq!(
        c.capture(&key, &cap1, first, false).await,
        captured(first, first, closed_by_first),
        "a capture is idempotent on its key"
    );
    assert!(
        matches!(c.void(&key).await, Ok(VoidOutcome::Rejected { .. })),
        "a hold with captures is not voided"
    );
    let mut total = first;
    if s.multicapture {
        assert!(
            matches!(
                c.capture(&key, &s.key("cap-over"), amount, false).await,
                Ok(CaptureOutcome::Rejected { .. })
            ),
            "captures never exceed what is still held"
        );
        let second = amount / 4;
        total += second;
        assert_eq!(
            c.capture(&key, &s.key("cap-2"), second, true).await,
            captured(second, total, true),
            "a final capture closes the hold"
        );
    }
    assert!(
        matches!(
            c.capture(&key, &s.key("cap-3"), 1, false).await,
            Ok(CaptureOutcome::Rejected { .. })
        ),
        "nothing is captured after the hold is closed"
    );
    assert_eq!(
        c.query_hold(&key).await,
        Ok(HoldQueryOutcome::Found {
            status: HoldStatus::Captured,
            amount,
            captured: total,
            currency: s.currency.into(),
            expires_at_ms,
        })
    );
    // A hold used up by captures closes without a final flag.
    let whole = s.key("hold-whole");
    c.authorize(&whole, amount, s.currency, 3_600)
        .await
        .unwrap();
    assert_eq!(
        c.capture(&whole, &s.key("cap-whole"), amount, false).await,
        captured(amount, amount, true)
    );
    if let Some((decliner, decline)) = s.decline {
        assert!(matches!(
            decliner
                .authorize(&s.key("hold-declined"), decline, s.currency, 3_600)
                .await,
            Ok(AuthorizeOutcome::Declined { .. })
        ));
    }
}

async fn a_void_releases_an_uncaptured_hold_and_fences_an_unused_key(s: &Subject<'_>) {
    let c = s.connector;
    let key = s.key("hold-void");
    c.authorize(&key, s.ok_amount, s.currency, 3_600)
        .await
        .unwrap();
    assert_eq!(c.void(&key).await, Ok(VoidOutcome::Voided));
    assert_eq!(
        c.void(&key).await,
        Ok(VoidOutcome::Voided),
        "void is idempotent"
    );
    assert!(
        matches!(
            c.capture(&key, &s.key("cap-after-void"), 1, false).await,
            Ok(CaptureOutcome::Rejected { .. })
        ),
        "no capture after a void"
    );
    assert!(matches!(
        c.query_hold(&key).await,
        Ok(HoldQueryOutcome::Found {
            status: HoldStatus::Voided,
            captured: 0,
            ..
        })
    ));
    // Cancel before Try (TCC empty rollback): the void fences the key, the late Try is refused.
    let unused = s.key("void-first");
    assert_eq!(c.void(&unused).await, Ok(VoidOutcome::Voided));
    assert!(matches!(
        c.authorize(&unused, s.ok_amount, s.currency, 3_600).await,
        Ok(AuthorizeOutcome::Declined { .. })
    ));
    assert_eq!(c.query_hold(&unused).await, Ok(HoldQueryOutcome::Cancelled));
    assert_eq!(
        c.query_hold(&s.key("hold-never")).await,
        Ok(HoldQueryOutcome::NotFound)
    );
}

async fn hold_operations_answer_unsupported(s: &Subject<'_>) {
    let c = s.connector;
    let key = s.key("no-holds");
    let un = |op| Unsupported::of(op);
    assert_eq!(
        c.authorize(&key, s.ok_amount, s.currency, 60).await,
        Err(un(Operation::Authorize))
    );
    assert_eq!(
        c.capture(&key, &key, 1, true).await,
        Err(un(Operation::Capture))
    );
    assert_eq!(c.void(&key).await, Err(un(Operation::Void)));
    assert_eq!(c.query_hold(&key).await, Err(un(Operation::QueryHold)));
}

async fn callbacks_are_verified_and_parsed(s: &Subject<'_>) {
    let c = s.connector;
    let Some(Callbacks {
        sign: signer,
        event,
    }) = &s.callbacks
    else {
        let body = b"{}";
        assert_eq!(
            c.verify_callback(&HeaderMap::new(), body, s.now_secs),
            Err(CallbackRejection::Unsupported(Unsupported::of(
                Operation::Callback
            )))
        );
        return;
    };
    let body = event(
        &s.key("evt"),
        &s.key("charge"),
        s.ok_amount,
        s.currency,
        s.now_secs,
    );
    let body = String::from_utf8(body).expect("a JSON event");
    let fact = c
        .verify_callback(
            &signer(body.as_bytes(), s.now_secs),
            body.as_bytes(),
            s.now_secs,
        )
        .expect("a signed callback verifies");
    assert_eq!(
        (
            fact.kind.as_str(),
            fact.channel_key,
            fact.amount,
            fact.currency.as_str()
        ),
        ("charge.succeeded", s.key("charge"), s.ok_amount, s.currency)
    );
    let tampered = body.replace(&s.ok_amount.to_string(), "1");
    assert_eq!(
        c.verify_callback(
            &signer(body.as_bytes(), s.now_secs),
            tampered.as_bytes(),
            s.now_secs
        ),
        Err(CallbackRejection::BadSignature)
    );
    assert_eq!(
        c.verify_callback(&HeaderMap::new(), body.as_bytes(), s.now_secs),
        Err(CallbackRejection::BadSignature),
        "an unsigned callback is refused"
    );
    let old = s.now_secs - 3_600;
    assert_eq!(
        c.verify_callback(&signer(body.as_bytes(), old), body.as_bytes(), s.now_secs),
        Err(CallbackRejection::TooOld)
    );
    let garbage = b"{\"not\":\"an event\"}";
    assert!(matches!(
        c.verify_callback(&signer(garbage, s.now_secs), garbage, s.now_secs),
        Err(CallbackRejection::Invalid(_))
    ));
}

async fn statements_parse_and_list_the_charges(s: &Subject<'_>) {
    let day = chrono::DateTime::from_timestamp(s.now_secs, 0)
        .expect("a time")
        .format("%Y-%m-%d")
        .to_string();
    let answer = s.connector.statement(&day).await;
    if !s.statements {
        assert_eq!(
            answer,
            Err(StatementError::Unsupported(Unsupported::of(
                Operation::Statement
            )))
        );
        return;
    }
    let text = answer.expect("the statement of today");
    let rows = parse_statement("conformance.csv", &text).expect("the statement parses");
    let charged = rows
        .iter()
        .find(|r| r.channel_key == s.key("charge"))
        .expect("today's charge is on today's statement");
    assert_eq!(
        (charged.amount, charged.currency.as_str()),
        (s.ok_amount, s.currency)
    );
    assert_eq!(
        charged.fee_net.is_some(),
        s.fees,
        "the fee and net are on the line exactly when the channel states them"
    );
    assert!(
        matches!(
            s.connector.statement("2026-13-45").await,
            Err(StatementError::Failed(_))
        ),
        "a bad day is a failure, never an empty statement"
    );
}

async fn undecidable_answers_are_errors_settled_by_a_query(s: &Subject<'_>) {
    let Some((short, amount)) = s.late else {
        return;
    };
    let key = s.key("late");
    assert!(
        matches!(
            short.charge(&key, amount, s.currency).await,
            ChargeOutcome::Error { .. }
        ),
        "an answer that comes too late is undecidable, never a decline"
    );
    let settled = converge_eventually(|| s.connector.query(&key)).await;
    assert_eq!(
        settled,
        QueryOutcome::Succeeded {
            amount,
            currency: s.currency.into()
        },
        "the query by the same key finds the committed charge"
    );
}

/// Queries until the answer is no longer `NotFound` (a commit racing the client's timeout).
async fn converge_eventually<F, Fut>(mut query: F) -> QueryOutcome
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = QueryOutcome>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let q = query().await;
        if q != QueryOutcome::NotFound || std::time::Instant::now() > deadline {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const SECRET: &[u8] = b"conformance-callback-secret-0123456789";

async fn start_sandbox() -> SandboxHandle {
    let cfg = SandboxConfig {
        database_url: "sqlite::memory:".into(),
        callback_secret: SECRET.to_vec(),
        slow_ms: 800,
        hang_ms: 800,
        ..SandboxConfig::default()
    };
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    sandbox::spawn(cfg, local).await.expect("sandbox starts")
}

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

fn sandbox_callbacks() -> Callbacks {
    Callbacks {
        sign: Box::new(|body: &[u8], at: i64| {
            let mut h = HeaderMap::new();
            h.insert(
                SIGNATURE_HEADER,
                HeaderValue::from_str(&sign(SECRET, at, body)).expect("ascii"),
            );
            h
        }),
        event: Box::new(|id, key, amount, currency, at| {
            json!({"event_id": id, "type": "charge.succeeded", "channel_key": key,
                "amount": amount, "currency": currency, "created_at": at})
            .to_string()
            .into_bytes()
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_connector_meets_the_contract() {
    let sandbox = start_sandbox().await;
    let connector =
        HttpConnector::new(&sandbox.url, Duration::from_secs(10)).with_callback_secret(SECRET);
    let short = HttpConnector::new(&sandbox.url, Duration::from_millis(200));
    run_conformance(&Subject {
        connector: &connector,
        prefix: converge_server::ids::new_id("cf"),
        currency: "CNY",
        ok_amount: 10_000,
        decline: Some((&connector, 10_051)),
        holds: true,
        multicapture: true,
        callbacks: Some(sandbox_callbacks()),
        statements: true,
        fees: false,
        late: Some((&short, 10_052)),
        now_secs: now_secs(),
    })
    .await;
    // The repeated charge and authorization above charged and held once.
    let stats: Value = reqwest::get(format!("{}/stats", sandbox.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["faults"]["timeout"], 0);
    sandbox.shutdown().await;
}

/// A connector offering only the required operations (the sandbox's charge, query, cancel
/// and refund): the contract's defaults answer everything else.
struct ChargeOnly(HttpConnector);

#[async_trait]
impl Connector for ChargeOnly {
    async fn charge(&self, key: &str, amount: i64, currency: &str) -> ChargeOutcome {
        self.0.charge(key, amount, currency).await
    }
    async fn query(&self, key: &str) -> QueryOutcome {
        self.0.query(key).await
    }
    async fn cancel(&self, key: &str) -> CancelOutcome {
        self.0.cancel(key).await
    }
    async fn refund(&self, key: &str, refund_key: &str, amount: i64) -> RefundOutcome {
        self.0.refund(key, refund_key, amount).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connector_without_holds_callbacks_or_statements_answers_unsupported() {
    let sandbox = start_sandbox().await;
    let connector = ChargeOnly(HttpConnector::new(&sandbox.url, Duration::from_secs(10)));
    run_conformance(&Subject {
        connector: &connector,
        prefix: converge_server::ids::new_id("cf"),
        currency: "CNY",
        ok_amount: 10_000,
        decline: None,
        holds: false,
        multicapture: false,
        callbacks: None,
        statements: false,
        fees: false,
        late: None,
        now_secs: now_secs(),
    })
    .await;
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_lapses_at_its_expiry_and_cannot_be_captured_after_it() {
    let sandbox = start_sandbox().await;
    let c = HttpConnector::new(&sandbox.url, Duration::from_secs(10));
    let key = converge_server::ids::new_id("cf");
    assert!(matches!(
        c.authorize(&key, 5_000, "CNY", 1).await,
        Ok(AuthorizeOutcome::Authorized { .. })
    ));
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert!(matches!(
        c.query_hold(&key).await,
        Ok(HoldQueryOutcome::Found {
            status: HoldStatus::Expired,
            ..
        })
    ));
    assert_eq!(
        c.capture(&key, &format!("{key}-cap"), 1, false).await,
        Ok(CaptureOutcome::Rejected {
            reason: "expired".into()
        })
    );
    assert_eq!(c.void(&key).await, Ok(VoidOutcome::Expired));
    assert!(
        matches!(
            c.authorize(&key, 5_000, "CNY", 1).await,
            Ok(AuthorizeOutcome::Error { .. })
        ),
        "a repeat after the lapse is not a fresh hold: the query says where it stands"
    );
    assert_eq!(
        c.cancel(&key).await,
        CancelOutcome::Cancelled,
        "a lapsed hold with nothing captured holds nothing: the key is fenced"
    );
    sandbox.shutdown().await;
}

/// The routing rule end to end on `db`: merchant 1 (the test app's) is routed to a second
/// sandbox; its payment is charged and refunded there, another merchant's at the default.
async fn a_routed_payment_is_charged_and_refunded_at_its_connector(db: crate::support::Db) {
    let second = start_sandbox().await;
    let url = second.url.clone();
    let Some(app) = crate::support::TestApp::spawn_with(db, |s| {
        s.channel.connectors = vec![converge_server::config::ConnectorSpec {
            name: "second".into(),
            url,
        }];
        s.channel.routes = vec![converge_server::config::RouteSpec {
            merchant_id: 1,
            method: None,
            connector: "second".into(),
        }];
    })
    .await
    else {
        eprintln!("SKIPPED on PostgreSQL: set CONVERGE_TEST_PG_URL");
        return;
    };
    let (db_url, teardown) = (app.db_url.clone(), app.teardown());
    assert_eq!(app.merchant_id, 1, "the test app's merchant is the first");
    let a = app
        .post(
            "/v1/payments",
            Some("route-1"),
            &json!({"amount": 8_000, "currency": "CNY", "merchant_order_id": "routed-1"}),
        )
        .await;
    assert_eq!(a.json()["status"], "SUCCESS", "{:?}", a.json());
    let id = a.json()["id"].as_str().unwrap().to_string();
    let p = app.store.payment(&id).await.unwrap().unwrap();
    assert_eq!(p.connector, "second", "the route is stored on the payment");
    let seen: Value = reqwest::get(format!("{}/attempts/{}", second.url, p.channel_key))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen["attempts"], 1, "the second connector took the charge");
    assert_eq!(
        app.channel_attempts(&p.channel_key).await,
        0,
        "the default connector never saw it"
    );

    let r = app
        .post(
            &format!("/v1/payments/{id}/refunds"),
            Some("route-refund"),
            &json!({"amount": 3_000, "reason": "routed"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let refunded = crate::support::eventually(
        Duration::from_secs(10),
        "the refund at the second connector",
        || async {
            let list: Value = reqwest::get(format!("{}/charges", second.url))
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let r = list["charges"][0]["refunded"].as_i64()?;
            (r == 3_000).then_some(r)
        },
    )
    .await;
    assert_eq!(
        refunded, 3_000,
        "the refund went to the connector that took the payment"
    );

    // Another merchant's payment takes the default rule.
    let other_key = app.add_merchant("other-shop").await;
    let b = app
        .post_raw(
            &other_key,
            "/v1/payments",
            Some("route-2"),
            &json!({"amount": 7_000, "currency": "CNY", "merchant_order_id": "default-1"})
                .to_string(),
        )
        .await;
    assert_eq!(b.json()["status"], "SUCCESS", "{:?}", b.json());
    let q = app
        .store
        .payment(b.json()["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.connector, "sandbox");
    assert_eq!(app.channel_attempts(&q.channel_key).await, 1);
    app.skip_invariant_check(
        "the routed payment's charge is at the second sandbox; the teardown reconciles against the default sandbox's charge list only",
    );
    teardown.check().await;
    drop(app);
    crate::support::drop_database(&db_url).await;
    second.shutdown().await;
}

mod a_routed_payment_is_charged_and_refunded_at_its_connector {
    use super::a_routed_payment_is_charged_and_refunded_at_its_connector as run;
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
