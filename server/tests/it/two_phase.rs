//! A create in two atomic phases (issue 15; Brandur Leach, "Implementing Stripe-like
//! Idempotency Keys in Postgres"): the store's two batch writes on both backends, and a
//! request that dies between the phases resuming over HTTP.

use crate::support::*;

use std::sync::Arc;
use std::time::Duration;

use converge_server::domain::clock::{Clock, SystemClock};
use converge_server::domain::fingerprint::fingerprint;
use converge_server::domain::ledger;
use converge_server::domain::state::{PaymentEvent, PaymentStatus};
use converge_server::service::ids::{new_id, new_token};
use converge_server::service::payments::PaymentInput;
use converge_server::store::keys::{
    ClaimResult, KeyClaim, KeyCompletion, KeyOutcomeDelta, KeyRef, RouteOutcomeDelta,
    StoredResponse,
};
use converge_server::store::{
    NewPayment, OpenPayment, OpenedPayment, Payment, Store, Transition, TransitionResult,
};
use serde_json::{Value, json};

const NOW: i64 = 1_800_000_000_000;

async fn merchant(store: &Arc<dyn Store>) -> i64 {
    store
        .create_merchant("acme", "hash-acme", NOW)
        .await
        .unwrap()
        .id
}

fn claim(merchant_id: i64, key: &str, token: &str, now: i64) -> KeyClaim {
    KeyClaim {
        merchant_id,
        scope: "POST /v1/payments".into(),
        idem_key: key.into(),
        route: "POST /v1/payments".into(),
        fingerprint: "fp".into(),
        lease_token: token.into(),
        lease_expires_at: now + 1_000,
        now,
        expires_at: now + 86_400_000,
    }
}

fn key_ref(c: &KeyClaim) -> KeyRef {
    KeyRef {
        merchant_id: c.merchant_id,
        scope: c.scope.clone(),
        idem_key: c.idem_key.clone(),
        lease_token: c.lease_token.clone(),
    }
}

fn payment(merchant_id: i64, order: &str) -> NewPayment {
    NewPayment {
        id: format!("pay_{order}"),
        merchant_id,
        merchant_order_id: order.into(),
        amount: 1000,
        currency: "CNY".into(),
        description: String::new(),
        params_hash: "h".into(),
        channel_key: format!("ck_{order}"),
        connector: "sandbox".into(),
        now: NOW,
        submit_due_at: NOW + 60_000,
        max_attempts: 5,
        recovery_key: None,
        capture_mode: Default::default(),
    }
}

fn step(
    p: &str,
    from: PaymentStatus,
    version: i64,
    event: PaymentEvent,
    to: PaymentStatus,
) -> Transition {
    with_follow_up(Transition {
        payment_id: p.into(),
        from,
        version,
        to,
        event,
        event_id: format!("{event}@v{version}"),
        source: "test".into(),
        detail: String::new(),
        now: NOW,
        last_error: None,
        posting: None,
        enqueue: vec![],
        hold: None,
    })
}

fn open(m: i64, key: &str, token: &str, order: &str, now: i64) -> OpenPayment {
    let n = payment(m, order);
    OpenPayment {
        claim: claim(m, key, token, now),
        submit: Some(step(
            &n.id,
            PaymentStatus::Pending,
            1,
            PaymentEvent::Submit,
            PaymentStatus::Processing,
        )),
        payment: n,
    }
}

/// CHANNEL_SUCCESS then SUCCESS with the charge batch, from PROCESSING at `version`.
fn charge_chain(p: &Payment) -> Vec<Transition> {
    let mut posted = step(
        &p.id,
        PaymentStatus::ChannelSuccess,
        p.version + 1,
        PaymentEvent::LedgerPosted,
        PaymentStatus::Success,
    );
    posted.posting =
        Some(ledger::charge(p.merchant_id, p.amount, &p.currency).dated("2026-01-01".into()));
    let charged = step(
        &p.id,
        PaymentStatus::Processing,
        p.version,
        PaymentEvent::ChannelSucceeded,
        PaymentStatus::ChannelSuccess,
    );
    vec![charged, posted]
}

fn render(p: &Payment) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: format!(
            "{{\"id\":\"{}\",\"status\":\"{}\"}}",
            p.id,
            p.status.as_str()
        )
        .into_bytes(),
    }
}

store_conformance!(
    phase_one_claims_the_key_inserts_the_submitted_payment_and_its_recovery_point_at_once,
    |store| {
        let m = merchant(&store).await;
        let OpenedPayment::Created(p) = store
            .open_payment(&open(m, "k", "t1", "o-1", NOW))
            .await
            .unwrap()
        else {
            panic!("a new key and order make a payment")
        };
        assert_eq!(
            (p.status, p.version, p.submit_attempts),
            (PaymentStatus::Processing, 2, 1)
        );
        let jobs = store.payment_jobs(&p.id).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(
            (jobs[0].kind.as_str(), jobs[0].status.as_str()),
            ("submit", "due")
        );
        let events: Vec<String> = store
            .payment_events(&p.id)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect();
        assert_eq!(events, ["created", "submit"]);
        // The request dies here: its retry, after the lease, resumes this payment.
        assert_eq!(
            store
                .claim_key(&claim(m, "k", "t2", NOW + 2_000))
                .await
                .unwrap(),
            ClaimResult::Claimed {
                resource_id: Some(p.id.clone())
            }
        );
    }
);

store_conformance!(
    phase_one_with_a_held_or_done_key_writes_nothing_but_the_claim_takeover,
    |store| {
        let m = merchant(&store).await;
        let OpenedPayment::Created(p) = store
            .open_payment(&open(m, "k", "t1", "o-1", NOW))
            .await
            .unwrap()
        else {
            panic!("created")
        };
        // Within the lease: another request's record; no second payment.
        let held = store
            .open_payment(&open(m, "k", "t2", "o-2", NOW + 10))
            .await
            .unwrap();
        assert!(
            matches!(held, OpenedPayment::Key(ClaimResult::Existing(ref r)) if r.state == converge_server::domain::idempotency::KeyState::Running),
            "{held:?}"
        );
        assert!(store.payment("pay_o-2").await.unwrap().is_none());
        // After it: the lapsed claim is taken over with its recovery point.
        let taken = store
            .open_payment(&open(m, "k", "t3", "o-3", NOW + 5_000))
            .await
            .unwrap();
        assert_eq!(
            taken,
            OpenedPayment::Key(ClaimResult::Claimed {
                resource_id: Some(p.id.clone())
            })
        );
        assert!(store.payment("pay_o-3").await.unwrap().is_none());
    }
);

store_conformance!(
    phase_one_with_a_taken_merchant_order_id_keeps_the_claim_without_a_recovery_point,
    |store| {
        let m = merchant(&store).await;
        let OpenedPayment::Created(first) = store
            .open_payment(&open(m, "k1", "t1", "o-1", NOW))
            .await
            .unwrap()
        else {
            panic!("created")
        };
        let mut again = open(m, "k2", "t2", "o-1", NOW);
        again.payment.id = "pay_other".into();
        again.payment.channel_key = "ck_other".into();
        again.submit.as_mut().unwrap().payment_id = "pay_other".into();
        assert_eq!(
            store.open_payment(&again).await.unwrap(),
            OpenedPayment::Existing(first)
        );
        assert!(store.payment("pay_other").await.unwrap().is_none());
        let rec = store.idempotency_key(m, "k2").await.unwrap().unwrap();
        assert_eq!((rec.state.as_str(), rec.resource_id), ("running", None));
    }
);

store_conformance!(
    phase_two_applies_the_chain_posts_the_batch_and_stores_the_answer_in_one_transaction,
    |store| {
        let m = merchant(&store).await;
        let o = open(m, "k", "t1", "o-1", NOW);
        let OpenedPayment::Created(p) = store.open_payment(&o).await.unwrap() else {
            panic!("created")
        };
        let key = key_ref(&o.claim);
        let done = store
            .apply_transitions(
                &charge_chain(&p),
                Some(&KeyCompletion {
                    key: &key,
                    render: &render,
                }),
            )
            .await
            .unwrap();
        let TransitionResult::Applied(after) = done.result else {
            panic!("{done:?}")
        };
        assert_eq!((after.status, after.version), (PaymentStatus::Success, 4));
        assert_eq!(done.stored, Some(render(&after)));
        let rec = store.idempotency_key(m, "k").await.unwrap().unwrap();
        assert_eq!(
            rec.state,
            converge_server::domain::idempotency::KeyState::Done
        );
        assert_eq!(rec.response_body, Some(render(&after).body));
        assert_eq!(store.ledger_batch_count(&p.id, "charge").await.unwrap(), 1);
        let totals = store.ledger_totals().await.unwrap();
        assert!(totals.iter().all(|t| t.debits == t.credits), "{totals:?}");
        let jobs = store.payment_jobs(&p.id).await.unwrap();
        assert!(jobs.iter().all(|j| j.status.as_str() == "done"), "{jobs:?}");
    }
);

store_conformance!(
    phase_two_that_lost_its_race_writes_nothing_not_even_the_key,
    |store| {
        let m = merchant(&store).await;
        let o = open(m, "k", "t1", "o-1", NOW);
        let OpenedPayment::Created(p) = store.open_payment(&o).await.unwrap() else {
            panic!("created")
        };
        // A callback moved the payment first (PROCESSING -> UNKNOWN at version 2).
        let other = step(
            &p.id,
            PaymentStatus::Processing,
            2,
            PaymentEvent::ChannelError,
            PaymentStatus::Unknown,
        );
        assert!(matches!(
            store.apply_transition(&other).await.unwrap(),
            TransitionResult::Applied(_)
        ));
        let key = key_ref(&o.claim);
        let done = store
            .apply_transitions(
                &charge_chain(&p),
                Some(&KeyCompletion {
                    key: &key,
                    render: &render,
                }),
            )
            .await
            .unwrap();
        assert!(
            matches!(done.result, TransitionResult::Stale(ref c) if c.status == PaymentStatus::Unknown),
            "{done:?}"
        );
        assert_eq!(done.stored, None);
        assert_eq!(
            store.idempotency_key(m, "k").await.unwrap().unwrap().state,
            converge_server::domain::idempotency::KeyState::Running
        );
        assert_eq!(store.ledger_batch_count(&p.id, "charge").await.unwrap(), 0);
        let events = store.payment_events(&p.id).await.unwrap();
        assert!(
            !events.iter().any(|e| e.event == "channel_succeeded"),
            "{events:?}"
        );
    }
);

store_conformance!(
    phase_two_whose_key_lease_was_lost_still_commits_the_payment_and_leaves_the_key,
    |store| {
        let m = merchant(&store).await;
        let o = open(m, "k", "t1", "o-1", NOW);
        let OpenedPayment::Created(p) = store.open_payment(&o).await.unwrap() else {
            panic!("created")
        };
        // The lease lapsed and a retry took the claim over.
        store
            .claim_key(&claim(m, "k", "t2", NOW + 5_000))
            .await
            .unwrap();
        let key = key_ref(&o.claim);
        let done = store
            .apply_transitions(
                &charge_chain(&p),
                Some(&KeyCompletion {
                    key: &key,
                    render: &render,
                }),
            )
            .await
            .unwrap();
        assert!(
            matches!(done.result, TransitionResult::Applied(ref a) if a.status == PaymentStatus::Success)
        );
        assert_eq!(done.stored, None, "the old holder stores no answer");
        let rec = store.idempotency_key(m, "k").await.unwrap().unwrap();
        assert_eq!(
            (rec.state.as_str(), rec.lease_token.as_deref()),
            ("running", Some("t2"))
        );
    }
);

store_conformance!(
    a_batch_whose_steps_do_not_follow_each_other_is_refused_before_any_write,
    |store| {
        let m = merchant(&store).await;
        let o = open(m, "k", "t1", "o-1", NOW);
        let OpenedPayment::Created(p) = store.open_payment(&o).await.unwrap() else {
            panic!("created")
        };
        let mut chain = charge_chain(&p);
        chain[1].version += 1;
        assert!(store.apply_transitions(&chain, None).await.is_err());
        assert_eq!(
            store.payment(&p.id).await.unwrap().unwrap().version,
            p.version
        );
        assert!(store.apply_transitions(&[], None).await.is_err());
    }
);

store_conformance!(
    outcome_counts_added_in_a_batch_sum_per_route_minute_and_per_key,
    |store| {
        let m = merchant(&store).await;
        let route = |outcome: &str, minute, count| RouteOutcomeDelta {
            route: "POST /v1/payments".into(),
            outcome: outcome.into(),
            minute,
            count,
        };
        let key = |count, first_at, last_at| KeyOutcomeDelta {
            merchant_id: m,
            idem_key: "k".into(),
            outcome: "replay".into(),
            count,
            first_at,
            last_at,
        };
        store
            .add_outcome_counts(
                &[route("first", 100, 3), route("replay", 100, 2)],
                &[key(2, 10, 20)],
            )
            .await
            .unwrap();
        store
            .add_outcome_counts(&[route("first", 100, 4)], &[key(5, 5, 15)])
            .await
            .unwrap();
        let counts = store.outcome_counts(100).await.unwrap();
        assert_eq!(
            counts,
            [
                ("POST /v1/payments".to_string(), "first".to_string(), 7),
                ("POST /v1/payments".to_string(), "replay".to_string(), 2)
            ]
        );
        let per_key = store.key_outcomes(m, "k").await.unwrap();
        assert_eq!(per_key.len(), 1);
        assert_eq!(
            (per_key[0].count, per_key[0].first_at, per_key[0].last_at),
            (7, 5, 20)
        );
    }
);

/// A create body.
fn pay(order: &str, amount: i64) -> Value {
    json!({"amount": amount, "currency": "CNY", "merchant_order_id": order, "description": "test"})
}

on_both_backends!(
    a_request_that_died_after_phase_one_resumes_its_payment_with_one_charge,
    |app| {
        // What phase 1 of a dead request leaves: a running claim lapsing in 300 ms whose
        // recovery point is a submitted (PROCESSING) payment; the charge was never sent.
        let body = pay("o-phase", 1000);
        let now = SystemClock.now_ms();
        let input = PaymentInput {
            amount: 1000,
            currency: "CNY".into(),
            merchant_order_id: "o-phase".into(),
            description: "test".into(),
            capture_mode: Default::default(),
        };
        let id = new_id("pay");
        let opened = app
            .store
            .open_payment(&OpenPayment {
                claim: KeyClaim {
                    merchant_id: app.merchant_id,
                    scope: "POST /v1/payments".into(),
                    idem_key: "k-phase".into(),
                    route: "POST /v1/payments".into(),
                    fingerprint: fingerprint(&body),
                    lease_token: new_token(),
                    lease_expires_at: now + 300,
                    now,
                    expires_at: now + 86_400_000,
                },
                payment: NewPayment {
                    id: id.clone(),
                    merchant_id: app.merchant_id,
                    merchant_order_id: input.merchant_order_id.clone(),
                    amount: input.amount,
                    currency: input.currency.clone(),
                    description: input.description.clone(),
                    params_hash: input.params_hash(),
                    channel_key: new_id("ck"),
                    connector: "sandbox".into(),
                    now,
                    submit_due_at: now + 60_000,
                    max_attempts: 5,
                    recovery_key: None,
                    capture_mode: Default::default(),
                },
                submit: Some(Transition {
                    payment_id: id.clone(),
                    from: PaymentStatus::Pending,
                    version: 1,
                    to: PaymentStatus::Processing,
                    event: PaymentEvent::Submit,
                    event_id: "submit@v1".into(),
                    source: "api".into(),
                    detail: String::new(),
                    now,
                    last_error: None,
                    posting: None,
                    enqueue: vec![],
                    hold: None,
                }),
            })
            .await
            .unwrap();
        let OpenedPayment::Created(p) = opened else {
            panic!("{opened:?}")
        };
        let resumed = eventually(Duration::from_secs(5), "the lease to lapse", || async {
            let a = app.post("/v1/payments", Some("k-phase"), &body).await;
            (a.status != 409).then_some(a)
        })
        .await;
        assert_eq!(resumed.status, 201, "{:?}", resumed.json());
        assert_eq!(
            resumed.json()["id"],
            p.id.as_str(),
            "the dead request's payment"
        );
        assert_eq!(resumed.json()["status"], "SUCCESS");
        assert_eq!(app.payment_count().await, 1);
        assert_eq!(app.channel_charges().await, 1);
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
        let replay = app.post("/v1/payments", Some("k-phase"), &body).await;
        assert_eq!(replay.header("idempotent-replayed"), "true");
        assert_eq!(replay.body, resumed.body);
    }
);

on_both_backends!(
    a_create_stores_its_answer_with_the_payment_and_a_replay_sends_the_same_bytes,
    |app| {
        let body = pay("o-1", 1000);
        let first = app.post("/v1/payments", Some("k-1"), &body).await;
        assert_eq!(first.status, 201);
        assert_eq!(first.header("content-type"), "application/json");
        let id = first.json()["id"].as_str().unwrap().to_string();
        let rec = app
            .store
            .idempotency_key(app.merchant_id, "k-1")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            rec.state,
            converge_server::domain::idempotency::KeyState::Done
        );
        assert_eq!(rec.resource_id.as_deref(), Some(id.as_str()));
        assert_eq!(rec.response_body.as_deref(), Some(first.body.as_slice()));
        let replay = app.post("/v1/payments", Some("k-1"), &body).await;
        assert_eq!(replay.status, 201);
        assert_eq!(replay.header("content-type"), "application/json");
        assert_eq!(replay.body, first.body);
    }
);
