//! The storage conformance suite: every test runs against SQLite and PostgreSQL
//! (DESIGN.md "Storage": one abstraction, two implementations, one suite).

use converge_server::store::Backend;
use converge_server::store::KindFilter;

store_conformance!(migrations_apply_and_ping_answers, |store| {
    store.ping().await.expect("ping");
    store.health().await.expect("health");
    let role = store.role().await.expect("role");
    assert!(
        role.writable && !role.standby,
        "a test database is a writable primary: {role:?}"
    );
    assert!(matches!(
        store.backend(),
        Backend::Sqlite | Backend::Postgres
    ));
});

store_conformance!(merchant_round_trips_and_names_are_unique, |store| {
    let m = store
        .create_merchant("acme", "hash-1", 1_000)
        .await
        .expect("insert");
    assert_eq!(
        store.merchant_by_key_hash("hash-1").await.unwrap(),
        Some(m.clone())
    );
    assert_eq!(store.merchant(m.id).await.unwrap(), Some(m));
    let dup = store.create_merchant("acme", "hash-2", 1_000).await;
    assert!(
        matches!(dup, Err(converge_server::store::StoreError::Conflict(_))),
        "{dup:?}"
    );
    assert!(store.set_merchant_frozen("acme", true).await.unwrap());
    assert!(
        store
            .merchant_by_key_hash("hash-1")
            .await
            .unwrap()
            .unwrap()
            .frozen
    );
    assert!(!store.set_merchant_frozen("nobody", true).await.unwrap());
});

// --- idempotency keys ----------------------------------------------------------------------

use std::sync::Arc;

use converge_server::store::keys::{ClaimResult, KeyClaim, KeyRecord, KeyRef, StoredResponse};
use converge_server::store::{CreatePayment, CreateRefund, NewPayment, NewRefund, Payment, Store};

const NOW: i64 = 1_800_000_000_000;

async fn merchant(store: &Arc<dyn Store>, name: &str) -> i64 {
    store
        .create_merchant(name, &format!("hash-{name}"), NOW)
        .await
        .unwrap()
        .id
}

fn claim(merchant_id: i64, key: &str, fingerprint: &str, token: &str, now: i64) -> KeyClaim {
    KeyClaim {
        merchant_id,
        scope: "POST /v1/payments".into(),
        idem_key: key.into(),
        route: "POST /v1/payments".into(),
        fingerprint: fingerprint.into(),
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

fn response(body: &[u8]) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_vec(),
    }
}

fn existing(r: ClaimResult) -> KeyRecord {
    match r {
        ClaimResult::Existing(rec) => rec,
        other => panic!("expected an existing record, got {other:?}"),
    }
}

store_conformance!(
    a_new_key_is_claimed_and_a_second_claim_sees_the_running_record,
    |store| {
        let m = merchant(&store, "acme").await;
        let first = claim(m, "k", "fp", "t1", NOW);
        assert_eq!(
            store.claim_key(&first).await.unwrap(),
            ClaimResult::Claimed { resource_id: None }
        );
        let rec = existing(
            store
                .claim_key(&claim(m, "k", "fp", "t2", NOW + 10))
                .await
                .unwrap(),
        );
        assert_eq!(
            rec.state,
            converge_server::domain::idempotency::KeyState::Running
        );
        assert_eq!(
            rec.lease_token.as_deref(),
            Some("t1"),
            "a live lease is not taken over"
        );
        assert_eq!(rec.lease_expires_at, Some(NOW + 1_000));
    }
);

store_conformance!(a_completed_key_keeps_its_response_byte_for_byte, |store| {
    let m = merchant(&store, "acme").await;
    let c = claim(m, "k", "fp", "t1", NOW);
    store.claim_key(&c).await.unwrap();
    let body = b"{\"id\":\"pay_1\",\"amount\":1000}\n\xff".to_vec();
    assert!(
        store
            .complete_key(&key_ref(&c), &response(&body))
            .await
            .unwrap()
    );
    let rec = existing(
        store
            .claim_key(&claim(m, "k", "fp", "t2", NOW + 5_000))
            .await
            .unwrap(),
    );
    assert_eq!(
        rec.state,
        converge_server::domain::idempotency::KeyState::Done
    );
    assert_eq!(rec.response_status, Some(201));
    assert_eq!(rec.response_body.as_deref(), Some(&body[..]));
    assert_eq!(rec.lease_token, None);
    // Completing twice, or with another token, is refused.
    assert!(
        !store
            .complete_key(&key_ref(&c), &response(b"other"))
            .await
            .unwrap()
    );
});

store_conformance!(
    a_failed_writes_ended_lease_lets_the_retry_take_the_claim_over_at_once,
    |store| {
        let m = merchant(&store, "acme").await;
        let failed = claim(m, "k", "fp", "t1", NOW);
        store.claim_key(&failed).await.unwrap();
        assert!(
            store
                .set_key_resource(&key_ref(&failed), "pay_1")
                .await
                .unwrap()
        );
        // Before its lease (NOW + 1000) ends, a retry finds the key in use.
        let early = claim(m, "k", "fp", "t2", NOW + 10);
        assert_eq!(
            existing(store.claim_key(&early).await.unwrap())
                .lease_token
                .as_deref(),
            Some("t1")
        );
        // The failed request ends its lease: the retry takes the claim over at once, with
        // the recovery point, well before the lease would have lapsed.
        assert!(store.lapse_key(&key_ref(&failed), NOW + 20).await.unwrap());
        let retry = claim(m, "k", "fp", "t3", NOW + 30);
        assert_eq!(
            store.claim_key(&retry).await.unwrap(),
            ClaimResult::Claimed {
                resource_id: Some("pay_1".into())
            }
        );
        // The old token ends nothing more: the retry's lease holds.
        assert!(!store.lapse_key(&key_ref(&failed), NOW + 40).await.unwrap());
        let another = claim(m, "k", "fp", "t4", NOW + 50);
        assert_eq!(
            existing(store.claim_key(&another).await.unwrap())
                .lease_token
                .as_deref(),
            Some("t3")
        );
    }
);

store_conformance!(
    a_lapsed_claim_is_taken_over_with_its_recovery_point,
    |store| {
        let m = merchant(&store, "acme").await;
        let crashed = claim(m, "k", "fp", "t1", NOW);
        store.claim_key(&crashed).await.unwrap();
        assert!(
            store
                .set_key_resource(&key_ref(&crashed), "pay_1")
                .await
                .unwrap()
        );
        // Lease ends at NOW + 1000: another fingerprint never takes it over, nor changes it.
        let rec = existing(
            store
                .claim_key(&claim(m, "k", "other", "t2", NOW + 2_000))
                .await
                .unwrap(),
        );
        assert_eq!(
            (rec.fingerprint.as_str(), rec.lease_token.as_deref()),
            ("fp", Some("t1"))
        );
        // The same fingerprint does, and learns what the crashed request created.
        let retry = claim(m, "k", "fp", "t3", NOW + 2_000);
        assert_eq!(
            store.claim_key(&retry).await.unwrap(),
            ClaimResult::Claimed {
                resource_id: Some("pay_1".into())
            }
        );
        // The crashed request's token no longer holds the key.
        assert!(
            !store
                .set_key_resource(&key_ref(&crashed), "pay_2")
                .await
                .unwrap()
        );
        assert!(
            !store
                .complete_key(&key_ref(&crashed), &response(b"late"))
                .await
                .unwrap()
        );
        assert!(!store.release_key(&key_ref(&crashed)).await.unwrap());
        assert!(
            store
                .complete_key(&key_ref(&retry), &response(b"ok"))
                .await
                .unwrap()
        );
        let rec = existing(
            store
                .claim_key(&claim(m, "k", "fp", "t4", NOW + 3_000))
                .await
                .unwrap(),
        );
        assert_eq!(rec.response_body.as_deref(), Some(&b"ok"[..]));
        assert_eq!(rec.resource_id.as_deref(), Some("pay_1"));
    }
);

store_conformance!(a_released_key_is_free_again, |store| {
    let m = merchant(&store, "acme").await;
    let c = claim(m, "k", "fp", "t1", NOW);
    store.claim_key(&c).await.unwrap();
    assert!(store.release_key(&key_ref(&c)).await.unwrap());
    assert!(!store.release_key(&key_ref(&c)).await.unwrap());
    assert_eq!(
        store
            .claim_key(&claim(m, "k", "another body", "t2", NOW))
            .await
            .unwrap(),
        ClaimResult::Claimed { resource_id: None }
    );
});

store_conformance!(keys_are_per_merchant_and_purged_after_retention, |store| {
    let a = merchant(&store, "acme").await;
    let b = merchant(&store, "globex").await;
    assert_eq!(
        store
            .claim_key(&claim(a, "k", "fp-a", "t1", NOW))
            .await
            .unwrap(),
        ClaimResult::Claimed { resource_id: None }
    );
    assert_eq!(
        store
            .claim_key(&claim(b, "k", "fp-b", "t2", NOW))
            .await
            .unwrap(),
        ClaimResult::Claimed { resource_id: None }
    );
    let mut old = claim(a, "old", "fp", "t3", NOW);
    old.expires_at = NOW + 10;
    store.claim_key(&old).await.unwrap();
    assert_eq!(
        store.purge_keys(NOW + 10).await.unwrap(),
        0,
        "kept until its retention ends"
    );
    assert_eq!(store.purge_keys(NOW + 11).await.unwrap(), 1);
    assert_eq!(
        store
            .claim_key(&claim(a, "old", "new", "t4", NOW + 20))
            .await
            .unwrap(),
        ClaimResult::Claimed { resource_id: None }
    );
    assert!(matches!(
        store
            .claim_key(&claim(a, "k", "fp-a", "t5", NOW))
            .await
            .unwrap(),
        ClaimResult::Existing(_)
    ));
});

store_conformance!(concurrent_claims_of_one_key_grant_it_once, |store| {
    let m = merchant(&store, "acme").await;
    for round in 0..5 {
        let key = format!("k-{round}");
        let tasks: Vec<_> = (0..10)
            .map(|i| {
                let (store, c) = (store.clone(), claim(m, &key, "fp", &format!("t{i}"), NOW));
                tokio::spawn(async move { store.claim_key(&c).await.unwrap() })
            })
            .collect();
        let mut claimed = 0;
        for t in tasks {
            if matches!(t.await.unwrap(), ClaimResult::Claimed { .. }) {
                claimed += 1;
            }
        }
        assert_eq!(claimed, 1, "round {round}");
    }
});

store_conformance!(outcomes_are_counted_per_route_and_minute, |store| {
    for _ in 0..3 {
        store
            .count_outcome("POST /v1/payments", "replay", 100)
            .await
            .unwrap();
    }
    store
        .count_outcome("POST /v1/payments", "replay", 101)
        .await
        .unwrap();
    store
        .count_outcome("POST /v1/payments", "first", 99)
        .await
        .unwrap();
    let counts = store.outcome_counts(100).await.unwrap();
    assert_eq!(
        counts,
        vec![("POST /v1/payments".to_string(), "replay".to_string(), 4)]
    );
});

// --- payments, refunds, callbacks ----------------------------------------------------------

/// A receipt of callback event `id` (channel key `ck_1`) received at NOW, its body `body`.
fn receipt<'a>(id: &'a str, body: &'a [u8]) -> converge_server::store::CallbackReceipt<'a> {
    converge_server::store::CallbackReceipt {
        event_id: id,
        channel_key: "ck_1",
        kind: "charge.succeeded",
        body,
        signature: "t=1,v1=00",
        received_at: NOW,
    }
}

/// The event recording callback `id` on payment `p` as not applied, with `detail`.
fn ignored_callback(p: &Payment, id: &str, detail: &str) -> converge_server::store::IgnoredEvent {
    converge_server::store::IgnoredEvent {
        payment_id: p.id.clone(),
        event_id: format!("cb:{id}"),
        event: converge_server::domain::state::PaymentEvent::ChannelSucceeded,
        from: p.status,
        source: "callback".into(),
        detail: detail.into(),
        now: NOW,
    }
}

/// Merchant `acme` and its new payment `o-1` of 1000 (PENDING, version 1).
async fn acme_payment(store: &Arc<dyn Store>) -> (i64, Payment) {
    let m = merchant(store, "acme").await;
    match store
        .create_payment(&new_payment(m, "o-1", 1000))
        .await
        .unwrap()
    {
        CreatePayment::Created(p) => (m, p),
        other => panic!("a new order is created: {other:?}"),
    }
}

fn new_payment(merchant_id: i64, order: &str, amount: i64) -> NewPayment {
    NewPayment {
        id: format!("pay_{order}"),
        merchant_id,
        merchant_order_id: order.into(),
        amount,
        currency: "CNY".into(),
        description: String::new(),
        params_hash: format!("h-{amount}"),
        channel_key: format!("ck_{order}"),
        connector: "sandbox".into(),
        now: NOW,
        submit_due_at: NOW + 1_000,
        max_attempts: 5,
        recovery_key: None,
        capture_mode: Default::default(),
    }
}

/// Moves a payment to SUCCESS with its charge batch.
async fn succeed(store: &Arc<dyn Store>, p: Payment) -> Payment {
    use converge_server::domain::state::{PaymentEvent, transition};
    use converge_server::store::{Transition, TransitionResult};
    let mut p = p;
    for event in [
        PaymentEvent::Submit,
        PaymentEvent::ChannelSucceeded,
        PaymentEvent::LedgerPosted,
    ] {
        let t = crate::support::with_follow_up(Transition {
            payment_id: p.id.clone(),
            from: p.status,
            version: p.version,
            to: transition(p.status, event).unwrap(),
            event,
            event_id: event.to_string(),
            source: "test".into(),
            detail: String::new(),
            now: NOW,
            last_error: None,
            posting: (event == PaymentEvent::LedgerPosted).then(|| {
                converge_server::domain::ledger::charge(p.merchant_id, p.amount, &p.currency)
                    .dated("2026-01-01".into())
            }),
            enqueue: vec![],
            hold: None,
        });
        let TransitionResult::Applied(next) = store.apply_transition(&t).await.unwrap() else {
            panic!("{event}")
        };
        p = next;
    }
    p
}

fn new_refund(payment_id: &str, id: &str, amount: i64) -> NewRefund {
    NewRefund {
        id: id.into(),
        payment_id: payment_id.into(),
        amount,
        reason: String::new(),
        now: NOW,
        job_due_at: NOW + 1_000,
        max_attempts: 5,
    }
}

store_conformance!(
    a_payment_is_created_once_per_merchant_order_id_with_its_submit_job,
    |store| {
        let (m, p) = acme_payment(&store).await;
        assert_eq!(
            (p.status.as_str(), p.version, p.refunded_amount),
            ("PENDING", 1, 0)
        );
        let mut dup = new_payment(m, "o-1", 2000);
        dup.id = "pay_other".into();
        dup.channel_key = "ck_other".into();
        assert_eq!(
            store.create_payment(&dup).await.unwrap(),
            CreatePayment::Existing(p.clone())
        );
        assert_eq!(store.payment("pay_other").await.unwrap(), None);
        assert_eq!(
            store.payment_by_channel_key("ck_o-1").await.unwrap(),
            Some(p.clone())
        );
        let jobs = store.payment_jobs(&p.id).await.unwrap();
        assert_eq!(jobs.len(), 1, "{jobs:?}");
        assert_eq!(
            (
                jobs[0].kind.as_str(),
                jobs[0].status.as_str(),
                jobs[0].run_at
            ),
            ("submit", "due", NOW + 1_000)
        );
        // Another merchant may use the same merchant_order_id.
        let other = merchant(&store, "globex").await;
        let mut theirs = new_payment(other, "o-1", 1000);
        theirs.id = "pay_theirs".into();
        theirs.channel_key = "ck_theirs".into();
        assert!(matches!(
            store.create_payment(&theirs).await.unwrap(),
            CreatePayment::Created(_)
        ));
    }
);

store_conformance!(
    a_refund_claims_its_key_with_its_id_and_a_refused_one_leaves_the_key_free,
    |store| {
        use converge_server::store::OpenedRefund;
        let (m, p) = acme_payment(&store).await;
        let c = claim(m, "rk", "fp", "t1", NOW);
        // PENDING is not refundable: nothing is written, the claim included.
        assert_eq!(
            store
                .open_refund(&c, &new_refund(&p.id, "re_a", 100))
                .await
                .unwrap(),
            OpenedRefund::Opened(CreateRefund::NotRefundable(
                converge_server::domain::state::PaymentStatus::Pending
            ))
        );
        assert_eq!(store.idempotency_key(m, "rk").await.unwrap(), None);
        let p = succeed(&store, p).await;
        let OpenedRefund::Opened(CreateRefund::Created(r)) = store
            .open_refund(&c, &new_refund(&p.id, "re_b", 100))
            .await
            .unwrap()
        else {
            panic!("a refund of a SUCCESS payment is created")
        };
        assert_eq!(r.id, "re_b");
        let rec = store.idempotency_key(m, "rk").await.unwrap().unwrap();
        assert_eq!(
            rec.resource_id.as_deref(),
            Some("re_b"),
            "the recovery point"
        );
        // The same key again: the running claim, and no second refund.
        let again = claim(m, "rk", "fp", "t2", NOW + 10);
        assert!(matches!(
            store
                .open_refund(&again, &new_refund(&p.id, "re_c", 100))
                .await
                .unwrap(),
            OpenedRefund::Key(ClaimResult::Existing(_))
        ));
        assert_eq!(store.refund("re_c").await.unwrap(), None);
        // After the lease lapses, a retry takes the claim over with its recovery point.
        let retry = claim(m, "rk", "fp", "t3", NOW + 5_000);
        assert_eq!(
            store
                .open_refund(&retry, &new_refund(&p.id, "re_d", 100))
                .await
                .unwrap(),
            OpenedRefund::Key(ClaimResult::Claimed {
                resource_id: Some("re_b".into())
            })
        );
        assert_eq!(store.refund("re_d").await.unwrap(), None);
    }
);

store_conformance!(
    a_claim_at_a_recovery_point_records_it_and_a_takeover_gets_it_back,
    |store| {
        use converge_server::store::keys::ClaimStep;
        let m = merchant(&store, "acme").await;
        let c = claim(m, "k", "fp", "t1", NOW);
        assert_eq!(
            store.claim_key_at(&c, "we_1").await.unwrap(),
            ClaimStep::Inserted
        );
        let rec = store.idempotency_key(m, "k").await.unwrap().unwrap();
        assert_eq!(rec.resource_id.as_deref(), Some("we_1"));
        assert!(matches!(
            store
                .claim_key_at(&claim(m, "k", "fp", "t2", NOW + 10), "we_2")
                .await
                .unwrap(),
            ClaimStep::Existing(_)
        ));
        assert_eq!(
            store
                .claim_key_at(&claim(m, "k", "fp", "t3", NOW + 5_000), "we_3")
                .await
                .unwrap(),
            ClaimStep::TakenOver(Some("we_1".into()))
        );
    }
);

store_conformance!(
    refunds_reserve_at_most_the_amount_of_a_success_payment,
    |store| {
        let (m, p) = acme_payment(&store).await;
        assert_eq!(
            store
                .create_refund(&new_refund(&p.id, "re_0", 100))
                .await
                .unwrap(),
            CreateRefund::NotRefundable(converge_server::domain::state::PaymentStatus::Pending)
        );
        assert_eq!(
            store
                .create_refund(&new_refund("pay_nope", "re_x", 100))
                .await
                .unwrap(),
            CreateRefund::NoPayment
        );
        let p = succeed(&store, p).await;
        assert!(matches!(
            store
                .create_refund(&new_refund(&p.id, "re_1", 600))
                .await
                .unwrap(),
            CreateRefund::Created(_)
        ));
        assert_eq!(
            store
                .create_refund(&new_refund(&p.id, "re_2", 401))
                .await
                .unwrap(),
            CreateRefund::ExceedsRemaining { remaining: 400 }
        );
        assert_eq!(
            store.refund("re_2").await.unwrap(),
            None,
            "a refused refund is not stored"
        );
        assert_eq!(
            store.payment(&p.id).await.unwrap().unwrap().refunded_amount,
            600
        );
        assert_eq!(store.pending_refund_count(&p.id).await.unwrap(), 1);
        // A failed refund gives its reservation back; a succeeded one posts one batch, once.
        assert!(store.refund_failed("re_1", "rejected", NOW).await.unwrap());
        assert!(!store.refund_failed("re_1", "rejected", NOW).await.unwrap());
        assert_eq!(
            store.payment(&p.id).await.unwrap().unwrap().refunded_amount,
            0
        );
        assert!(matches!(
            store
                .create_refund(&new_refund(&p.id, "re_3", 1000))
                .await
                .unwrap(),
            CreateRefund::Created(_)
        ));
        let posting = converge_server::domain::ledger::refund(m, "re_3", 1000, "CNY")
            .dated("2026-01-01".into());
        assert!(store.refund_succeeded("re_3", &posting, NOW).await.unwrap());
        assert!(!store.refund_succeeded("re_3", &posting, NOW).await.unwrap());
        assert_eq!(
            store.refund("re_3").await.unwrap().unwrap().status.as_str(),
            "succeeded"
        );
        assert_eq!(store.ledger_batch_count(&p.id, "refund").await.unwrap(), 1);
        assert_eq!(store.pending_refund_count(&p.id).await.unwrap(), 0);
        let totals = store.ledger_totals().await.unwrap();
        assert_eq!(totals.len(), 1);
        assert_eq!(
            (
                totals[0].currency.as_str(),
                totals[0].debits,
                totals[0].credits
            ),
            ("CNY", 2000, 2000)
        );
    }
);

store_conformance!(
    concurrent_refund_reservations_never_exceed_the_amount,
    |store| {
        let (_, p) = acme_payment(&store).await;
        let p = succeed(&store, p).await;
        let tasks: Vec<_> = (0..10)
            .map(|i| {
                let (store, r) = (store.clone(), new_refund(&p.id, &format!("re_{i}"), 300));
                tokio::spawn(async move { store.create_refund(&r).await.unwrap() })
            })
            .collect();
        let mut created = 0;
        for t in tasks {
            if matches!(t.await.unwrap(), CreateRefund::Created(_)) {
                created += 1;
            }
        }
        assert_eq!(created, 3);
        assert_eq!(
            store.payment(&p.id).await.unwrap().unwrap().refunded_amount,
            900
        );
    }
);

store_conformance!(
    a_callback_event_id_is_recorded_once_with_its_raw_body,
    |store| {
        use converge_server::store::CallbackDecision::UnknownPayment;
        use converge_server::store::CallbackRecorded::{Duplicate, Recorded};
        // Bytes a JSON re-encoding would change: the evidence is what arrived.
        let body = b"{ \"event_id\" : \"evt_1\",\t\"amount\":1e3 }\xff";
        let first = store
            .record_callback(&receipt("evt_1", body), UnknownPayment)
            .await
            .unwrap();
        assert_eq!(first, Recorded, "a new event id is recorded");
        let again = store
            .record_callback(&receipt("evt_1", b"another body"), UnknownPayment)
            .await
            .unwrap();
        assert_eq!(again, Duplicate, "a repeat writes nothing");
        let other = store
            .record_callback(&receipt("evt_2", b"{}"), UnknownPayment)
            .await
            .unwrap();
        assert_eq!(other, Recorded, "another event id is its own");
        assert_eq!(
            store.callback_body("evt_1").await.unwrap().as_deref(),
            Some(&body[..]),
            "the first body is kept byte for byte"
        );
        assert_eq!(store.callback_body("evt_9").await.unwrap(), None);
    }
);

store_conformance!(
    an_ignored_callback_is_recorded_with_its_event_in_one_transaction,
    |store| {
        use converge_server::domain::state::PaymentStatus;
        use converge_server::store::CallbackDecision::Ignore;
        use converge_server::store::CallbackRecorded::{Duplicate, Recorded};
        let (_, p) = acme_payment(&store).await;
        let ignored = ignored_callback(&p, "evt_1", "stale callback");
        let r = store
            .record_callback(&receipt("evt_1", b"{}"), Ignore(&ignored))
            .await
            .unwrap();
        assert_eq!(r, Recorded);
        let r = store
            .record_callback(&receipt("evt_1", b"{}"), Ignore(&ignored))
            .await
            .unwrap();
        assert_eq!(r, Duplicate, "a redelivery is a duplicate");
        let events = store.payment_events(&p.id).await.unwrap();
        let recorded: Vec<_> = events.iter().filter(|e| e.event_id == "cb:evt_1").collect();
        assert_eq!(recorded.len(), 1);
        assert!(!recorded[0].applied);
        assert_eq!(recorded[0].detail, "stale callback");
        assert_eq!(
            store.payment(&p.id).await.unwrap().unwrap().status,
            PaymentStatus::Pending,
            "an ignored event moves nothing"
        );
    }
);

store_conformance!(
    a_conflicting_callback_is_recorded_with_its_error_pool_item,
    |store| {
        use converge_server::store::CallbackDecision::Conflict;
        use converge_server::store::CallbackRecorded::{Duplicate, Recorded};
        let (_, p) = acme_payment(&store).await;
        let ignored = ignored_callback(&p, "evt_1", "callback says 9.00 CNY");
        let item = converge_server::store::NewErrorItem {
            kind: "conflicting_callback".into(),
            dedupe_key: "callback:evt_1".into(),
            payment_id: Some(p.id.clone()),
            summary: "channel callback evt_1 contradicts the payment".into(),
            evidence: "{}".into(),
            reopen: false,
            now: NOW,
        };
        let r = store
            .record_callback(&receipt("evt_1", b"{}"), Conflict(&ignored, &item))
            .await
            .unwrap();
        assert_eq!(r, Recorded);
        let r = store
            .record_callback(&receipt("evt_1", b"{}"), Conflict(&ignored, &item))
            .await
            .unwrap();
        assert_eq!(r, Duplicate);
        let items = store.payment_error_items(&p.id).await.unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(
            (items[0].kind.as_str(), items[0].occurrences),
            ("conflicting_callback", 1),
            "reported once, with the callback"
        );
        let events = store.payment_events(&p.id).await.unwrap();
        assert_eq!(
            events.iter().filter(|e| e.event_id == "cb:evt_1").count(),
            1
        );
    }
);

store_conformance!(
    an_applied_callback_moves_the_payment_and_a_lost_race_is_recorded_as_ignored,
    |store| {
        use converge_server::domain::state::{PaymentEvent, PaymentStatus, transition};
        use converge_server::store::CallbackDecision::Apply;
        use converge_server::store::CallbackRecorded::{Applied, Lost};
        use converge_server::store::Transition;
        let (_, p) = acme_payment(&store).await;
        let step = |p: &Payment| {
            crate::support::with_follow_up(Transition {
                payment_id: p.id.clone(),
                from: p.status,
                version: p.version,
                to: transition(p.status, PaymentEvent::Submit).unwrap(),
                event: PaymentEvent::Submit,
                event_id: format!("submit@v{}", p.version),
                source: "callback".into(),
                detail: String::new(),
                now: NOW,
                last_error: None,
                posting: None,
                enqueue: vec![],
                hold: None,
            })
        };
        let t = step(&p);
        let lost = |current: &Payment| {
            ignored_callback(current, "evt_2", &format!("lost at v{}", current.version))
        };
        let applied = store
            .record_callback(
                &receipt("evt_1", b"{}"),
                Apply {
                    transition: &t,
                    lost: &lost,
                },
            )
            .await
            .unwrap();
        let Applied(after) = applied else {
            panic!("applied: {applied:?}")
        };
        assert_eq!(
            (after.status, after.version),
            (PaymentStatus::Processing, 2)
        );
        // A second callback read the payment at version 1 too: it lost the race.
        let lost_to = store
            .record_callback(
                &receipt("evt_2", b"{}"),
                Apply {
                    transition: &t,
                    lost: &lost,
                },
            )
            .await
            .unwrap();
        assert_eq!(lost_to, Lost(after.clone()));
        let events = store.payment_events(&p.id).await.unwrap();
        let late: Vec<_> = events.iter().filter(|e| e.event_id == "cb:evt_2").collect();
        assert_eq!(late.len(), 1);
        assert!(!late[0].applied);
        assert_eq!(late[0].detail, "lost at v2");
        assert_eq!(
            events
                .iter()
                .filter(|e| e.applied && e.event_id.starts_with("submit"))
                .count(),
            1,
            "the loser left no applied event"
        );
        // A stale step whose own event id is new (another version's): its event row goes too.
        let mut stale = step(&p);
        stale.event_id = "submit@other".into();
        let r = store
            .record_callback(
                &receipt("evt_3", b"{}"),
                Apply {
                    transition: &stale,
                    lost: &lost,
                },
            )
            .await
            .unwrap();
        assert!(matches!(r, Lost(_)), "{r:?}");
        let events = store.payment_events(&p.id).await.unwrap();
        assert!(!events.iter().any(|e| e.event_id == "submit@other"));
        assert_eq!(store.payment(&p.id).await.unwrap().unwrap().version, 2);
    }
);

store_conformance!(
    a_payment_inserted_under_a_key_is_its_recovery_point_in_the_same_transaction,
    |store| {
        let m = merchant(&store, "acme").await;
        let crashed = claim(m, "k", "fp", "t1", NOW);
        store.claim_key(&crashed).await.unwrap();
        let mut p = new_payment(m, "o-1", 1000);
        p.recovery_key = Some(key_ref(&crashed));
        let CreatePayment::Created(created) = store.create_payment(&p).await.unwrap() else {
            panic!("a new order is created")
        };
        // The request dies here, before any other write: its retry learns the payment.
        let retry = claim(m, "k", "fp", "t2", NOW + 2_000);
        assert_eq!(
            store.claim_key(&retry).await.unwrap(),
            ClaimResult::Claimed {
                resource_id: Some(created.id.clone())
            }
        );
        // A claim taken over is not written by the old token's insert.
        let mut late = new_payment(m, "o-2", 1000);
        late.id = "pay_late".into();
        late.channel_key = "ck_late".into();
        late.recovery_key = Some(key_ref(&crashed));
        store.create_payment(&late).await.unwrap();
        let again = claim(m, "k", "fp", "t3", NOW + 4_000);
        assert_eq!(
            store.claim_key(&again).await.unwrap(),
            ClaimResult::Claimed {
                resource_id: Some(created.id)
            }
        );
    }
);

store_conformance!(
    a_resolved_item_reopens_when_its_failure_recurs_but_not_when_restated,
    |store| {
        let item = |key: &str, reopen: bool, now: i64| converge_server::store::NewErrorItem {
            kind: "job_dead".into(),
            dedupe_key: key.into(),
            payment_id: None,
            summary: "query job failed 5 times".into(),
            evidence: "{}".into(),
            reopen,
            now,
        };
        for (key, reopen, want) in [("job:1", true, "open"), ("recon:d:k", false, "resolved")] {
            let id = store.report_error(&item(key, reopen, NOW)).await.unwrap();
            assert!(
                store
                    .resolve_error(id, "fixed", "ops", NOW + 1)
                    .await
                    .unwrap()
            );
            let again = store
                .report_error(&item(key, reopen, NOW + 2))
                .await
                .unwrap();
            assert_eq!(again, id, "one item per dedupe key");
            let got = store.error_item(id).await.unwrap().unwrap();
            assert_eq!((got.status.as_str(), got.occurrences), (want, 2), "{key}");
            if reopen {
                assert_eq!(got.resolved_by, None);
            } else {
                assert_eq!(got.resolved_by.as_deref(), Some("ops"));
            }
        }
    }
);

store_conformance!(
    a_recurrence_dated_before_the_resolution_leaves_the_item_resolved,
    |store| {
        // A payment parked in SUSPENSE: the post_ledger retry's restatement reaches the store
        // first, a person resolves that item, then the parking's own report (a new fact, but
        // dated by the parking) arrives late.
        let item = |reopen: bool, now: i64| converge_server::store::NewErrorItem {
            kind: "suspense".into(),
            dedupe_key: "suspense:pay_late".into(),
            payment_id: None,
            summary: "CNY 7.54 charged but not posted: merchant account frozen".into(),
            evidence: "{}".into(),
            reopen,
            now,
        };
        let id = store.report_error(&item(false, NOW + 10)).await.unwrap();
        assert!(
            store
                .resolve_error(id, "handled by phone", "ops", NOW + 20)
                .await
                .unwrap()
        );
        store.report_error(&item(true, NOW)).await.unwrap();
        let got = store.error_item(id).await.unwrap().unwrap();
        assert_eq!(
            (
                got.status.as_str(),
                got.resolved_by.as_deref(),
                got.occurrences
            ),
            ("resolved", Some("ops"), 2),
            "a fact older than the resolution is no news"
        );
        assert_eq!(
            (got.first_seen, got.last_seen),
            (NOW, NOW + 10),
            "seen times keep their order"
        );
        // The same fact happening again after the resolution does reopen it.
        store.report_error(&item(true, NOW + 30)).await.unwrap();
        let got = store.error_item(id).await.unwrap().unwrap();
        assert_eq!((got.status.as_str(), got.resolved_by), ("open", None));
    }
);

store_conformance!(
    a_late_report_of_an_older_fact_is_counted_but_keeps_the_latest_evidence,
    |store| {
        // Two workers report the same dying job; the one with the older failure commits last.
        let item = |summary: &str, evidence: &str, now: i64| converge_server::store::NewErrorItem {
            kind: "job_dead".into(),
            dedupe_key: "job:late".into(),
            payment_id: None,
            summary: summary.into(),
            evidence: evidence.into(),
            reopen: true,
            now,
        };
        let id = store
            .report_error(&item("attempt 5: 503", r#"{"attempt":5}"#, NOW + 20))
            .await
            .unwrap();
        store
            .report_error(&item("attempt 4: timeout", r#"{"attempt":4}"#, NOW + 10))
            .await
            .unwrap();
        let got = store.error_item(id).await.unwrap().unwrap();
        assert_eq!(
            (got.summary.as_str(), got.evidence.as_str(), got.occurrences),
            ("attempt 5: 503", r#"{"attempt":5}"#, 2),
            "the late, older report is counted; the newest fact stays shown"
        );
        assert_eq!((got.first_seen, got.last_seen), (NOW + 10, NOW + 20));
        // A newer fact (or one at the same instant) does replace them.
        store
            .report_error(&item("attempt 6: 500", r#"{"attempt":6}"#, NOW + 20))
            .await
            .unwrap();
        let got = store.error_item(id).await.unwrap().unwrap();
        assert_eq!(
            (got.summary.as_str(), got.evidence.as_str(), got.occurrences),
            ("attempt 6: 500", r#"{"attempt":6}"#, 3)
        );
    }
);

// --- reversal reservations -----------------------------------------------------------------

fn reservation(p: &Payment, action: &str, version: i64) -> converge_server::store::ReserveReversal {
    converge_server::store::ReserveReversal {
        payment_id: p.id.clone(),
        action_id: action.into(),
        pinned_version: version,
        now: NOW,
        job: converge_server::store::NewJob {
            kind: converge_server::store::JobKind::Reverse,
            payment_id: Some(p.id.clone()),
            refund_id: None,
            run_at: NOW + 30_000,
            max_attempts: 5,
        },
    }
}

store_conformance!(
    a_reversal_reservation_holds_only_at_the_pinned_version_and_blocks_refunds,
    |store| {
        use converge_server::store::ReversalReservation;
        let (_, p) = acme_payment(&store).await;
        // Not SUCCESS yet: refused.
        assert!(matches!(
            store
                .reserve_reversal(&reservation(&p, "act_1", p.version))
                .await
                .unwrap(),
            ReversalReservation::Refused { .. }
        ));
        let p = succeed(&store, p).await;
        // A pending merchant refund: refused even at the current version.
        assert!(matches!(
            store
                .create_refund(&new_refund(&p.id, "re_1", 100))
                .await
                .unwrap(),
            CreateRefund::Created(_)
        ));
        let v = store.payment(&p.id).await.unwrap().unwrap().version;
        assert_eq!(
            store
                .reserve_reversal(&reservation(&p, "act_1", v))
                .await
                .unwrap(),
            ReversalReservation::Refused {
                payment: store.payment(&p.id).await.unwrap().unwrap(),
                pending_refunds: 1
            }
        );
        assert!(store.refund_failed("re_1", "rejected", NOW).await.unwrap());
        let v = store.payment(&p.id).await.unwrap().unwrap().version;
        // A stale pin: refused.
        assert!(matches!(
            store
                .reserve_reversal(&reservation(&p, "act_1", v - 1))
                .await
                .unwrap(),
            ReversalReservation::Refused { .. }
        ));
        let ReversalReservation::Reserved(held) = store
            .reserve_reversal(&reservation(&p, "act_1", v))
            .await
            .unwrap()
        else {
            panic!("reserved at the pinned version")
        };
        assert_eq!(
            (held.reversal_id.as_deref(), held.version),
            (Some("act_1"), v + 1)
        );
        // The same action again: held; another action: refused; a merchant refund: refused.
        assert_eq!(
            store
                .reserve_reversal(&reservation(&p, "act_1", v))
                .await
                .unwrap(),
            ReversalReservation::AlreadyHeld(held.clone())
        );
        assert!(matches!(
            store
                .reserve_reversal(&reservation(&p, "act_2", v + 1))
                .await
                .unwrap(),
            ReversalReservation::Refused { .. }
        ));
        assert_eq!(
            store
                .create_refund(&new_refund(&p.id, "re_2", 100))
                .await
                .unwrap(),
            CreateRefund::Reversing
        );
        let jobs = store.payment_jobs(&p.id).await.unwrap();
        assert_eq!(
            jobs.iter()
                .filter(|j| j.kind == "reverse" && j.status.as_str() == "due")
                .count(),
            1,
            "{jobs:?}"
        );
        // Released (the channel refused): refunds are possible again, the job is closed.
        assert!(!store.release_reversal(&p.id, "act_2", NOW).await.unwrap());
        assert!(store.release_reversal(&p.id, "act_1", NOW).await.unwrap());
        assert!(matches!(
            store
                .create_refund(&new_refund(&p.id, "re_3", 100))
                .await
                .unwrap(),
            CreateRefund::Created(_)
        ));
        let jobs = store.payment_jobs(&p.id).await.unwrap();
        assert!(
            jobs.iter()
                .filter(|j| j.kind == "reverse")
                .all(|j| j.status.as_str() == "done"),
            "{jobs:?}"
        );
    }
);

fn auth_policy() -> converge_server::domain::throttle::ThrottlePolicy {
    converge_server::domain::throttle::ThrottlePolicy {
        per_addr: 4,
        window_ms: 60_000,
        free: 2,
        base_delay_ms: 1_000,
        max_delay_ms: 60_000,
        pair_lookback_ms: converge_server::domain::throttle::PAIR_LOOKBACK_MS,
    }
}

store_conformance!(
    auth_attempts_count_failures_and_a_success_clears_the_pair,
    |store| {
        use converge_server::domain::throttle::AttemptKind::{Login, StepUp};
        use converge_server::store::AttemptAdmission;
        let p = auth_policy();
        let admitted = |a: AttemptAdmission| match a {
            AttemptAdmission::Admitted { id } => id,
            other => panic!("refused: {other:?}"),
        };
        // Two failures of alice from one address (a sign-in and a step-up count alike).
        let a = admitted(
            store
                .begin_auth_attempt("alice", "10.0.0.1", Login, &p, 1_000)
                .await
                .unwrap(),
        );
        store.finish_auth_attempt(a, false, 1_100).await.unwrap();
        let b = admitted(
            store
                .begin_auth_attempt("alice", "10.0.0.1", StepUp, &p, 1_200)
                .await
                .unwrap(),
        );
        store.finish_auth_attempt(b, false, 1_300).await.unwrap();
        // The pair now waits 1 s from its last failure's end; other pairs do not.
        assert_eq!(
            store
                .begin_auth_attempt("alice", "10.0.0.1", Login, &p, 1_400)
                .await
                .unwrap(),
            AttemptAdmission::Refused {
                retry_after_ms: 900
            }
        );
        let c = admitted(
            store
                .begin_auth_attempt("alice", "10.0.0.2", Login, &p, 1_400)
                .await
                .unwrap(),
        );
        store.finish_auth_attempt(c, true, 1_450).await.unwrap();
        // After the delay a success clears the pair.
        let d = admitted(
            store
                .begin_auth_attempt("alice", "10.0.0.1", Login, &p, 2_300)
                .await
                .unwrap(),
        );
        store.finish_auth_attempt(d, true, 2_350).await.unwrap();
        let e = admitted(
            store
                .begin_auth_attempt("alice", "10.0.0.1", Login, &p, 2_400)
                .await
                .unwrap(),
        );
        // An unfinished attempt counts as a failure: with it the address has 3, one more fills it.
        let f = admitted(
            store
                .begin_auth_attempt("bob", "10.0.0.1", Login, &p, 2_500)
                .await
                .unwrap(),
        );
        store.finish_auth_attempt(f, false, 2_600).await.unwrap();
        assert_eq!(
            store
                .begin_auth_attempt("carol", "10.0.0.1", Login, &p, 3_000)
                .await
                .unwrap(),
            AttemptAdmission::Refused {
                retry_after_ms: 58_100
            },
            "the address's oldest failure (1.1 s) leaves the window at 61.1 s"
        );
        store.finish_auth_attempt(e, true, 3_100).await.unwrap();
        // Purging forgets old attempts.
        assert_eq!(store.purge_auth_attempts(2_000).await.unwrap(), 3);
        assert!(matches!(
            store
                .begin_auth_attempt("carol", "10.0.0.1", Login, &p, 3_200)
                .await
                .unwrap(),
            AttemptAdmission::Admitted { .. }
        ));
    }
);

store_conformance!(
    a_flooded_address_admits_known_accounts_and_step_ups_not_strangers,
    |store| {
        use converge_server::domain::throttle::AttemptKind::{Login, StepUp};
        use converge_server::store::AttemptAdmission;
        let p = auth_policy();
        let admitted = |a: AttemptAdmission| match a {
            AttemptAdmission::Admitted { id } => id,
            other => panic!("refused: {other:?}"),
        };
        // Alice signed in from the office before the flood.
        let a = admitted(
            store
                .begin_auth_attempt("alice", "10.0.0.1", Login, &p, 1_000)
                .await
                .unwrap(),
        );
        store.finish_auth_attempt(a, true, 1_050).await.unwrap();
        // Four failed sign-ins as alice and strangers fill the address.
        for (i, name) in ["x1", "x2", "x3", "alice"].iter().enumerate() {
            let id = admitted(
                store
                    .begin_auth_attempt(name, "10.0.0.1", Login, &p, 1_100 + i as i64)
                    .await
                    .unwrap(),
            );
            store
                .finish_auth_attempt(id, false, 1_100 + i as i64)
                .await
                .unwrap();
        }
        assert!(matches!(
            store
                .begin_auth_attempt("bob", "10.0.0.1", Login, &p, 1_200)
                .await
                .unwrap(),
            AttemptAdmission::Refused { .. }
        ));
        // Alice (known here, one failure of her two free ones) is still admitted.
        admitted(
            store
                .begin_auth_attempt("alice", "10.0.0.1", Login, &p, 1_200)
                .await
                .unwrap(),
        );
        // That unfinished attempt makes two: now her own budget is spent, and the address's
        // limit holds her too.
        assert!(matches!(
            store
                .begin_auth_attempt("alice", "10.0.0.1", Login, &p, 5_000)
                .await
                .unwrap(),
            AttemptAdmission::Refused { .. }
        ));
        // A step-up of bob's (his session) neither meets the address's limit nor the failed
        // sign-ins typed as his name: two of those make a sign-in of his wait there.
        for t in [1_300, 1_301] {
            let id = admitted(
                store
                    .begin_auth_attempt("bob", "10.0.0.2", Login, &p, t)
                    .await
                    .unwrap(),
            );
            store.finish_auth_attempt(id, false, t).await.unwrap();
        }
        assert!(matches!(
            store
                .begin_auth_attempt("bob", "10.0.0.2", Login, &p, 1_400)
                .await
                .unwrap(),
            AttemptAdmission::Refused { .. }
        ));
        admitted(
            store
                .begin_auth_attempt("bob", "10.0.0.1", StepUp, &p, 1_400)
                .await
                .unwrap(),
        );
        admitted(
            store
                .begin_auth_attempt("bob", "10.0.0.2", StepUp, &p, 1_400)
                .await
                .unwrap(),
        );
    }
);

store_conformance!(
    concurrent_attempts_from_one_address_cannot_pass_the_limit,
    |store| {
        use converge_server::store::AttemptAdmission;
        let p = auth_policy();
        let tries = (0..12).map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .begin_auth_attempt(
                        &format!("user{i}"),
                        "10.9.9.9",
                        converge_server::domain::throttle::AttemptKind::Login,
                        &p,
                        5_000,
                    )
                    .await
                    .unwrap()
            })
        });
        let mut admitted = 0;
        for t in tries {
            if matches!(t.await.unwrap(), AttemptAdmission::Admitted { .. }) {
                admitted += 1;
            }
        }
        assert_eq!(
            admitted, 4,
            "exactly the address limit, however the attempts interleave"
        );
    }
);

// --- the dashboard's queue and stuck counts (issue 15, "Under load") ------------------------

/// Runs `sql` (no parameters) on the store's database.
pub(crate) async fn exec_sql(store: &Arc<dyn Store>, sql: &str) {
    match store.db_pool() {
        converge_server::store::DbPool::Sqlite(p) => {
            sqlx::query(sql).execute(&p).await.unwrap();
        }
        converge_server::store::DbPool::Postgres(p) => {
            sqlx::query(sql).execute(&p).await.unwrap();
        }
    }
}

/// Done jobs since `since` (epoch ms) per kind, counted straight from `jobs`: the definition
/// that `queue_stats` and `jobs_done_since` answer from per-minute counts.
async fn done_by_kind(store: &Arc<dyn Store>, since: i64) -> Vec<(String, i64)> {
    let sql = "SELECT kind, COUNT(*) FROM jobs WHERE status = 'done' AND updated_at >= $1 \
               GROUP BY kind ORDER BY kind";
    match store.db_pool() {
        converge_server::store::DbPool::Sqlite(p) => {
            sqlx::query_as(sql).bind(since).fetch_all(&p).await.unwrap()
        }
        converge_server::store::DbPool::Postgres(p) => {
            sqlx::query_as(sql).bind(since).fetch_all(&p).await.unwrap()
        }
    }
}

/// Asserts that the store's done counts equal the direct count for windows starting at each
/// minute around the completion times (whole minutes: a window starts at a minute's start).
async fn assert_done_counts_exact(store: &Arc<dyn Store>, base: i64) {
    let base_minute = base / 60_000;
    let mut starts = vec![0, -60, base_minute - 60];
    for m in [0, 1, 2, 3, 61, 62] {
        starts.extend([base_minute + m - 1, base_minute + m]);
    }
    for since_minute in starts {
        let want = done_by_kind(store, since_minute * 60_000).await;
        let stats = store.queue_stats(since_minute).await.unwrap();
        let got: Vec<(String, i64)> = stats
            .iter()
            .filter(|s| s.status.as_str() == "done")
            .map(|s| (s.kind.clone(), s.count))
            .collect();
        assert_eq!(got, want, "queue_stats({since_minute}) done rows");
        assert_eq!(
            store.jobs_done_since(since_minute).await.unwrap(),
            want.iter().map(|w| w.1).sum::<i64>(),
            "jobs_done_since({since_minute})"
        );
    }
}

store_conformance!(
    done_jobs_are_counted_exactly_over_any_window_whatever_wrote_them,
    |store| {
        use converge_server::store::{JobKind, NewJob};
        // A whole minute (epoch ms divisible by 60 000).
        let base: i64 = 1_800_000_000_000;
        let job = |kind| NewJob {
            kind,
            payment_id: None,
            refund_id: None,
            run_at: 0,
            max_attempts: 5,
        };
        for _ in 0..7 {
            store
                .enqueue_job(&job(JobKind::Reconcile), "d", 0)
                .await
                .unwrap();
        }
        for _ in 0..5 {
            store
                .enqueue_job(&job(JobKind::Webhook), "", 0)
                .await
                .unwrap();
        }
        let claimed = store
            .claim_jobs_of("A", 100, 600_000, 10, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(claimed.len(), 12);
        let leases: Vec<(i64, &str)> = claimed
            .iter()
            .map(|j| (j.id, j.lease_token.as_str()))
            .collect();
        // A batch in the middle of a minute, single completions two minutes on, a batch an
        // hour later; one job stays leased.
        assert_eq!(
            store
                .complete_jobs(&leases[0..6], base + 30_000)
                .await
                .unwrap()
                .len(),
            6
        );
        for (id, token) in &leases[6..8] {
            assert!(
                store
                    .complete_job(*id, token, base + 125_000)
                    .await
                    .unwrap()
            );
        }
        assert_eq!(
            store
                .complete_jobs(&leases[8..11], base + 3_700_000)
                .await
                .unwrap()
                .len(),
            3
        );
        assert_done_counts_exact(&store, base).await;
        let stats = store.queue_stats(0).await.unwrap();
        let leased: i64 = stats
            .iter()
            .filter(|s| s.status.as_str() == "leased")
            .map(|s| s.count)
            .sum();
        assert_eq!(leased, 1, "{stats:?}");
        assert!(
            stats
                .iter()
                .filter(|s| s.status.as_str() == "done")
                .all(|s| s.oldest_run_at.is_none() && s.retrying == 0),
            "done rows carry their count only: {stats:?}"
        );

        // Whatever else writes done jobs: one inserted done, one moved to another minute, one
        // put back to due, one deleted, one completed through SQL by a multi-row statement.
        let (a, b, c) = (leases[0].0, leases[1].0, leases[6].0);
        for sql in [
            format!(
                "INSERT INTO jobs (kind, payment_id, refund_id, payload, status, attempts, max_attempts, \
                 run_at, created_at, updated_at) VALUES ('reconcile', NULL, NULL, 'x', 'done', 1, 5, 0, 0, {})",
                base + 61_000
            ),
            format!(
                "UPDATE jobs SET updated_at = {} WHERE id = {a}",
                base + 180_000
            ),
            format!("UPDATE jobs SET status = 'due' WHERE id = {b}"),
            format!("DELETE FROM jobs WHERE id = {c}"),
            format!(
                "UPDATE jobs SET status = 'done', updated_at = {} WHERE status IN ('due', 'leased')",
                base + 59_999
            ),
        ] {
            exec_sql(&store, &sql).await;
            assert_done_counts_exact(&store, base).await;
        }
        assert!(
            store
                .queue_stats(0)
                .await
                .unwrap()
                .iter()
                .all(|s| s.status.as_str() == "done"),
            "every job is done now"
        );
    }
);

store_conformance!(
    stuck_counts_and_oldest_follow_each_states_threshold,
    |store| {
        use converge_server::domain::stuck::StuckThresholds;
        let m = merchant(&store, "stuck").await;
        let now: i64 = NOW;
        // (status, age ms): stuck when the age reaches the state's threshold (PENDING 60 s,
        // PROCESSING 120 s, UNKNOWN 300 s, CHANNEL_SUCCESS 60 s, SUSPENSE at once).
        let rows: [(&str, i64); 12] = [
            ("PENDING", 59_999),
            ("PENDING", 60_000),
            ("PENDING", 7_200_000),
            ("PROCESSING", 119_999),
            ("PROCESSING", 400_000),
            ("UNKNOWN", 299_999),
            ("UNKNOWN", 90_000_000),
            ("CHANNEL_SUCCESS", 60_000),
            ("SUSPENSE", 0),
            ("SUCCESS", 90_000_000),
            ("FAILED", 90_000_000),
            ("REFUNDED", 90_000_000),
        ];
        for (i, (status, age)) in rows.iter().enumerate() {
            exec_sql(
            &store,
            &format!(
                "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, \
                 params_hash, status, version, channel_key, created_at, updated_at) \
                 VALUES ('pay_s{i}', {m}, 'o-s{i}', 100, 'CNY', '', 'h', '{status}', 3, 'ck_s{i}', {t}, {t})",
                t = now - age
            ),
        )
        .await;
        }
        let cutoffs = StuckThresholds::default().cutoffs(now);
        let mut counts = store.stuck_counts(&cutoffs, now).await.unwrap();
        // The database's collation orders the bucket names; compare as sets.
        counts.sort();
        let mut want: Vec<(String, String, i64)> = [
            ("CHANNEL_SUCCESS", "<5m", 1),
            ("PENDING", "1h-24h", 1),
            ("PENDING", "<5m", 1),
            ("PROCESSING", "5m-1h", 1),
            ("SUSPENSE", "<5m", 1),
            ("UNKNOWN", ">24h", 1),
        ]
        .iter()
        .map(|(s, b, n)| (s.to_string(), b.to_string(), *n))
        .collect();
        want.sort();
        assert_eq!(counts, want);
        let oldest: Vec<String> = store
            .stuck_payments(&cutoffs, 3)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(oldest, ["pay_s6", "pay_s2", "pay_s4"]);
    }
);

/// The events without a publication, counted straight from the tables: the definition that
/// the relay's batch and the relay status answer from `outbox_pending`.
async fn unpublished_by_anti_join(store: &Arc<dyn Store>) -> Vec<String> {
    let sql = "SELECT e.id FROM events e \
               WHERE NOT EXISTS (SELECT 1 FROM event_publications p WHERE p.event_id = e.id) \
               ORDER BY e.seq";
    match store.db_pool() {
        converge_server::store::DbPool::Sqlite(p) => {
            sqlx::query_scalar(sql).fetch_all(&p).await.unwrap()
        }
        converge_server::store::DbPool::Postgres(p) => {
            sqlx::query_scalar(sql).fetch_all(&p).await.unwrap()
        }
    }
}

/// Asserts that the relay's batch, the relay status and `converge verify`'s drift check all
/// agree with the anti-join.
async fn assert_backlog_exact(store: &Arc<dyn Store>, when: &str) {
    let want = unpublished_by_anti_join(store).await;
    let batch: Vec<String> = store
        .unpublished_events(1_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(batch, want, "relay batch {when}");
    let status = store.relay_status("events", 0).await.unwrap();
    assert_eq!(status.backlog, want.len() as i64, "backlog {when}");
    let facts = store.verify_outbox(0, 0, false).await.unwrap();
    assert!(
        facts.pending_drift.is_empty(),
        "{when}: {:?}",
        facts.pending_drift
    );
}

store_conformance!(
    the_outbox_backlog_equals_the_unpublished_events_whatever_wrote_them,
    |store| {
        use converge_server::store::Publication;
        let event = |i: i64| {
            format!(
                "INSERT INTO events (id, merchant_id, aggregatetype, aggregateid, type, payload, created_at) \
                 VALUES ('ev-{i}', 1, 'payment', 'pay_{i}', 'payment.succeeded', '{{}}', {})",
                1_000 + i
            )
        };
        for i in 1..=5 {
            exec_sql(&store, &event(i)).await;
        }
        assert_backlog_exact(&store, "after five events").await;
        let status = store.relay_status("events", 0).await.unwrap();
        assert_eq!(status.oldest_unpublished_at, Some(1_001));

        assert!(
            store
                .acquire_relay_lease("events", "relay", "tok", 0, i64::MAX)
                .await
                .unwrap()
        );
        let publish = |id: &str, refused: Option<&str>| Publication {
            event_id: id.into(),
            stream_seq: refused.is_none().then_some(1),
            duplicate: false,
            refused: refused.map(Into::into),
        };
        assert!(
            store
                .record_publications(
                    "events",
                    "tok",
                    &[publish("ev-1", None), publish("ev-3", Some("too big"))],
                    2_000,
                )
                .await
                .unwrap()
        );
        assert_backlog_exact(&store, "after one published and one refused").await;
        let status = store.relay_status("events", 0).await.unwrap();
        assert_eq!((status.backlog, status.refused), (3, 1));
        assert_eq!(status.oldest_unpublished_at, Some(1_002));

        // A relay whose lease was taken over marks nothing.
        assert!(
            !store
                .record_publications("events", "stale", &[publish("ev-2", None)], 2_000)
                .await
                .unwrap()
        );
        assert_backlog_exact(&store, "after a stale relay").await;

        // Whatever else writes: a publication deleted by hand puts its event back in the
        // backlog; an unpublished event deleted by hand leaves it.
        exec_sql(
            &store,
            "DELETE FROM event_publications WHERE event_id = 'ev-1'",
        )
        .await;
        assert_backlog_exact(&store, "after a publication was deleted").await;
        exec_sql(&store, "DELETE FROM events WHERE id = 'ev-5'").await;
        assert_backlog_exact(&store, "after an unpublished event was deleted").await;

        // The purge removes published events and their publications together.
        assert!(
            store
                .record_publications(
                    "events",
                    "tok",
                    &[publish("ev-1", None), publish("ev-2", None)],
                    3_000,
                )
                .await
                .unwrap()
        );
        assert_eq!(store.purge_published_events(1_003).await.unwrap(), 2);
        assert_backlog_exact(&store, "after the purge").await;
        assert_eq!(
            unpublished_by_anti_join(&store).await,
            vec!["ev-4".to_string()]
        );

        // A marker lost (a trigger dropped, say) is a breach `converge verify` names.
        exec_sql(&store, "DELETE FROM outbox_pending").await;
        let facts = store.verify_outbox(0, 0, false).await.unwrap();
        assert_eq!(facts.pending_drift.len(), 1, "{:?}", facts.pending_drift);
        assert_eq!(facts.pending_drift[0].0, "ev-4");
        assert_eq!(facts.pending_drift[0].1, "pay_4");
    }
);

/// An audit entry by `actor` for the passkey conformance tests.
fn passkey_audit(action: &str) -> converge_server::store::AuditEntry {
    converge_server::store::AuditEntry {
        at: 1_000,
        actor: "ann".into(),
        roles: "approver".into(),
        action: action.into(),
        target: "user:ann".into(),
        reason: String::new(),
        before: String::new(),
        after: String::new(),
        meta: "{}".into(),
    }
}

fn passkey_record(id: &str, user: &str, cred: &str) -> converge_server::store::PasskeyRecord {
    converge_server::store::PasskeyRecord {
        id: id.into(),
        username: user.into(),
        credential_id: cred.into(),
        name: format!("key {id}"),
        passkey: "{}".into(),
        sign_count: 0,
        created_at: 1_000,
        last_used_at: None,
        confirmed_at: Some(1_000),
    }
}

store_conformance!(
    confirming_passkeys_confirms_only_those_registered_by_the_request,
    |store| {
        let waiting = |id: &str, cred: &str, at: i64| converge_server::store::PasskeyRecord {
            created_at: at,
            confirmed_at: None,
            ..passkey_record(id, "ann", cred)
        };
        for (id, cred, at) in [("pk_1", "c1", 1_000), ("pk_2", "c2", 5_000)] {
            let p = waiting(id, cred, at);
            assert!(
                store
                    .add_passkey(&p, &passkey_audit("passkey_registered"))
                    .await
                    .unwrap()
            );
        }
        let n = store
            .confirm_passkeys("ann", 2_000, 9_000, &passkey_audit("passkey_confirmed"))
            .await
            .unwrap();
        assert_eq!(
            n, 1,
            "the one registered after the request stays unconfirmed"
        );
        let states: Vec<_> = store
            .passkeys_of("ann")
            .await
            .unwrap()
            .into_iter()
            .map(|p| (p.id, p.confirmed_at))
            .collect();
        assert_eq!(
            states,
            [
                ("pk_1".to_string(), Some(9_000)),
                ("pk_2".to_string(), None)
            ]
        );
    }
);

store_conformance!(
    passkeys_are_per_user_with_unique_credentials_and_a_counter_that_only_rises,
    |store| {
        use converge_server::store::PasskeyUse;
        let a = passkey_record("pk_a", "ann", "cred-a");
        assert!(
            store
                .add_passkey(&a, &passkey_audit("passkey_registered"))
                .await
                .unwrap()
        );
        // The same credential again, for anyone: refused, nothing written (nor audited).
        assert!(
            !store
                .add_passkey(
                    &passkey_record("pk_b", "bob", "cred-a"),
                    &passkey_audit("x")
                )
                .await
                .unwrap()
        );
        assert!(
            store
                .add_passkey(
                    &passkey_record("pk_c", "bob", "cred-c"),
                    &passkey_audit("passkey_registered")
                )
                .await
                .unwrap()
        );
        assert_eq!(store.passkeys_of("ann").await.unwrap(), vec![a.clone()]);
        assert_eq!(store.passkeys_of("bob").await.unwrap().len(), 1);
        assert_eq!(
            store.audit_for_target("user:ann").await.unwrap().len(),
            2,
            "the refused duplicate left no record"
        );
        // The counter: up is recorded, the same or lower is not.
        assert_eq!(
            store
                .record_passkey_use("pk_a", "{\"n\":3}", 3, 2_000)
                .await
                .unwrap(),
            PasskeyUse::Recorded
        );
        for n in [3, 2] {
            assert_eq!(
                store
                    .record_passkey_use("pk_a", "{\"n\":0}", n, 3_000)
                    .await
                    .unwrap(),
                PasskeyUse::CounterNotRaised
            );
        }
        let now = store.passkeys_of("ann").await.unwrap().remove(0);
        assert_eq!(
            (now.sign_count, now.passkey.as_str(), now.last_used_at),
            (3, "{\"n\":3}", Some(2_000))
        );
        // An authenticator without a counter (0, 0) is recorded each time.
        for _ in 0..2 {
            assert_eq!(
                store
                    .record_passkey_use("pk_c", "{}", 0, 4_000)
                    .await
                    .unwrap(),
                PasskeyUse::Recorded
            );
        }
        // Only its owner removes it.
        assert!(
            !store
                .remove_passkey("bob", "pk_a", &passkey_audit("passkey_removed"))
                .await
                .unwrap()
        );
        assert!(
            store
                .remove_passkey("ann", "pk_a", &passkey_audit("passkey_removed"))
                .await
                .unwrap()
        );
        assert!(store.passkeys_of("ann").await.unwrap().is_empty());
        assert_eq!(
            store
                .record_passkey_use("pk_a", "{}", 9, 5_000)
                .await
                .unwrap(),
            PasskeyUse::CounterNotRaised,
            "a removed passkey is never used"
        );
    }
);

store_conformance!(
    a_ceremony_is_taken_once_by_its_user_and_purpose_before_it_expires,
    |store| {
        store
            .put_challenge("wac_1", "ann", "step_up", "state-1", 10_000, 1_000)
            .await
            .unwrap();
        store
            .put_challenge("wac_2", "ann", "register", "state-2", 10_000, 1_000)
            .await
            .unwrap();
        store
            .put_challenge("wac_3", "ann", "step_up", "state-3", 10_000, 1_000)
            .await
            .unwrap();
        // Another user's, or for another purpose: nothing (and it is gone, single use).
        assert_eq!(
            store
                .take_challenge("wac_1", "bob", "step_up", 2_000)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            store
                .take_challenge("wac_2", "ann", "step_up", 2_000)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            store
                .take_challenge("wac_1", "ann", "step_up", 2_000)
                .await
                .unwrap()
                .as_deref(),
            Some("state-1")
        );
        assert_eq!(
            store
                .take_challenge("wac_1", "ann", "step_up", 2_000)
                .await
                .unwrap(),
            None,
            "single use"
        );
        // Expired: taken, but not given.
        assert_eq!(
            store
                .take_challenge("wac_3", "ann", "step_up", 10_000)
                .await
                .unwrap(),
            None
        );
        // A later begin drops the expired ones.
        store
            .put_challenge("wac_4", "ann", "register", "state-4", 30_000, 20_000)
            .await
            .unwrap();
        assert_eq!(
            store
                .take_challenge("wac_2", "ann", "register", 5_000)
                .await
                .unwrap(),
            None
        );
    }
);

store_conformance!(a_console_setting_is_set_with_its_audit_record, |store| {
    use converge_server::store::ConsoleSetting;
    assert_eq!(
        store.console_setting("passkeys_required").await.unwrap(),
        None
    );
    for (value, at) in [("true", 1_000), ("false", 2_000)] {
        let s = ConsoleSetting {
            name: "passkeys_required".into(),
            value: value.into(),
            updated_by: "ann".into(),
            updated_at: at,
        };
        store
            .set_console_setting(&s, &passkey_audit("passkeys_required_changed"))
            .await
            .unwrap();
        assert_eq!(
            store.console_setting("passkeys_required").await.unwrap(),
            Some(s)
        );
    }
    assert_eq!(store.audit_for_target("user:ann").await.unwrap().len(), 2);
});

store_conformance!(
    wakeable_jobs_counts_what_a_retry_would_wake_and_nothing_else,
    |store| {
        use converge_server::store::{JobKind, NewJob};
        let (_, p) = acme_payment(&store).await;
        let (m, other) = (merchant(&store, "other").await, "o-2");
        let CreatePayment::Created(q) = store
            .create_payment(&new_payment(m, other, 500))
            .await
            .unwrap()
        else {
            panic!("a new order is created");
        };
        // Whatever creating the payments queued is done first, so only this test's jobs count.
        let far = NOW + 86_400_000;
        for j in store
            .claim_jobs_of("setup", 100, 60_000, far, &KindFilter::all())
            .await
            .unwrap()
        {
            assert!(store.complete_job(j.id, &j.lease_token, far).await.unwrap());
        }
        assert_eq!(store.wakeable_jobs(&p.id).await.unwrap(), 0);
        let job = |pid: &str| NewJob {
            kind: JobKind::Query,
            payment_id: Some(pid.to_string()),
            refund_id: None,
            run_at: far + 600_000,
            max_attempts: 5,
        };
        store.enqueue_job(&job(&p.id), "", far).await.unwrap();
        store.enqueue_job(&job(&p.id), "", far).await.unwrap();
        store.enqueue_job(&job(&q.id), "", far).await.unwrap();
        // Due later still counts: a retry makes it due now.
        assert_eq!(store.wakeable_jobs(&p.id).await.unwrap(), 2);
        assert_eq!(store.wakeable_jobs(&q.id).await.unwrap(), 1);
        // Leased (running) and done do not; what it counts is what wake_jobs wakes.
        let later = far + 700_000;
        let claimed = store
            .claim_jobs_of("w", 100, 60_000, later, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(claimed.len(), 3);
        assert_eq!(store.wakeable_jobs(&p.id).await.unwrap(), 0);
        let mine: Vec<_> = claimed
            .iter()
            .filter(|j| j.payment_id.as_deref() == Some(p.id.as_str()))
            .collect();
        assert!(
            store
                .complete_job(mine[0].id, &mine[0].lease_token, later)
                .await
                .unwrap()
        );
        assert!(
            store
                .retry_job(
                    mine[1].id,
                    &mine[1].lease_token,
                    later + 60_000,
                    "again",
                    false,
                    later
                )
                .await
                .unwrap()
        );
        assert_eq!(store.wakeable_jobs(&p.id).await.unwrap(), 1);
        assert_eq!(store.wake_jobs(&p.id, later).await.unwrap(), 1);
        assert_eq!(store.wakeable_jobs("pay_none").await.unwrap(), 0);
    }
);

store_conformance!(
    hasten_jobs_makes_only_the_named_kinds_due_now_and_spends_no_attempt,
    |store| {
        use converge_server::store::{JobKind, NewJob};
        let (_, p) = acme_payment(&store).await;
        let far = NOW + 86_400_000;
        for j in store
            .claim_jobs_of("setup", 100, 60_000, far, &KindFilter::all())
            .await
            .unwrap()
        {
            assert!(store.complete_job(j.id, &j.lease_token, far).await.unwrap());
        }
        let job = |kind| NewJob {
            kind,
            payment_id: Some(p.id.clone()),
            refund_id: None,
            run_at: far + 600_000,
            max_attempts: 5,
        };
        let query = store
            .enqueue_job(&job(JobKind::Query), "", far)
            .await
            .unwrap();
        let expiry = store
            .enqueue_job(&job(JobKind::ExpireHold), "", far)
            .await
            .unwrap();
        let now = far + 1_000;
        let kinds = [JobKind::Submit, JobKind::Query];
        assert_eq!(store.hasten_jobs(&p.id, &kinds, now).await.unwrap(), 1);
        let q = store.job(query).await.unwrap().unwrap();
        assert_eq!((q.run_at, q.attempts), (now, 0));
        assert_eq!(
            store.job(expiry).await.unwrap().unwrap().run_at,
            far + 600_000,
            "another kind stays at its time"
        );
        // Already due: nothing to hasten; a leased job is not touched.
        assert_eq!(store.hasten_jobs(&p.id, &kinds, now).await.unwrap(), 0);
        let claimed = store
            .claim_jobs_of("w", 100, 60_000, now, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(store.hasten_jobs(&p.id, &kinds, NOW).await.unwrap(), 0);
        assert_eq!(store.hasten_jobs("pay_none", &kinds, now).await.unwrap(), 0);
    }
);

store_conformance!(
    replaying_a_refused_event_puts_it_back_in_the_backlog_once,
    |store| {
        use converge_server::store::Publication;
        for i in 1..=2 {
            exec_sql(
                &store,
                &format!(
                    "INSERT INTO events (id, merchant_id, aggregatetype, aggregateid, type, payload, created_at) \
                     VALUES ('ev-{i}', 1, 'payment', 'pay_{i}', 'payment.succeeded', '{{}}', {})",
                    1_000 + i
                ),
            )
            .await;
        }
        assert!(
            store
                .acquire_relay_lease("events", "relay", "tok", 0, i64::MAX)
                .await
                .unwrap()
        );
        let publish = |id: &str, refused: Option<&str>| Publication {
            event_id: id.into(),
            stream_seq: refused.is_none().then_some(1),
            duplicate: false,
            refused: refused.map(Into::into),
        };
        assert!(
            store
                .record_publications(
                    "events",
                    "tok",
                    &[publish("ev-1", Some("too big")), publish("ev-2", None)],
                    2_000,
                )
                .await
                .unwrap()
        );
        assert_backlog_exact(&store, "after one refused and one published").await;
        let audit = passkey_audit("event_replayed");
        // A published event is not replayed, and nothing is audited for it.
        assert!(!store.replay_refused_event("ev-2", &audit).await.unwrap());
        assert!(store.replay_refused_event("ev-1", &audit).await.unwrap());
        assert_eq!(
            unpublished_by_anti_join(&store).await,
            vec!["ev-1".to_string()]
        );
        assert_backlog_exact(&store, "after the replay").await;
        assert_eq!(store.relay_status("events", 0).await.unwrap().refused, 0);
        // Once: the publication it forgot is gone.
        assert!(!store.replay_refused_event("ev-1", &audit).await.unwrap());
        // The replay's audit record was written with it, and only for the one replay.
        assert_eq!(store.audit_for_target("user:ann").await.unwrap().len(), 1);
    }
);

// --- TCC by business key: order tombstones (issue 34) ---------------------------------------

store_conformance!(
    an_order_cancelled_before_its_payment_is_tombstoned_and_refuses_its_create,
    |store| {
        use converge_server::store::{OpenPayment, OpenedPayment, OrderCancel};
        let m = merchant(&store, "acme").await;
        assert_eq!(
            store.cancel_order(m, "o-1", NOW).await.unwrap(),
            OrderCancel::Tombstoned { since: NOW }
        );
        // A second cancel keeps the first tombstone and its time.
        assert_eq!(
            store.cancel_order(m, "o-1", NOW + 5).await.unwrap(),
            OrderCancel::Tombstoned { since: NOW }
        );
        // The create is refused and writes nothing: no payment, no job.
        assert_eq!(
            store
                .create_payment(&new_payment(m, "o-1", 1000))
                .await
                .unwrap(),
            CreatePayment::Tombstoned
        );
        assert_eq!(store.payment("pay_o-1").await.unwrap(), None);
        assert!(store.payment_jobs("pay_o-1").await.unwrap().is_empty());
        // Phase 1 of a keyed create rolls back, its claim with it: the key is new again.
        let c = claim(m, "k-1", "fp", "tok-1", NOW);
        let opened = store
            .open_payment(&OpenPayment {
                claim: c.clone(),
                payment: new_payment(m, "o-1", 1000),
                submit: None,
            })
            .await
            .unwrap();
        assert!(matches!(opened, OpenedPayment::Tombstoned), "{opened:?}");
        assert_eq!(store.payment("pay_o-1").await.unwrap(), None);
        assert_eq!(
            store
                .claim_key(&claim(m, "k-1", "fp", "tok-2", NOW))
                .await
                .unwrap(),
            ClaimResult::Claimed { resource_id: None }
        );
        // Another merchant's order of the same id is not tombstoned.
        let other = merchant(&store, "globex").await;
        let mut theirs = new_payment(other, "o-1", 1000);
        theirs.id = "pay_theirs".into();
        theirs.channel_key = "ck_theirs".into();
        assert!(matches!(
            store.create_payment(&theirs).await.unwrap(),
            CreatePayment::Created(_)
        ));
        // The cancel of an order that has a payment finds it and writes no tombstone.
        let CreatePayment::Created(p) = store
            .create_payment(&new_payment(m, "o-2", 1000))
            .await
            .unwrap()
        else {
            panic!("o-2 is new")
        };
        assert_eq!(
            store.cancel_order(m, "o-2", NOW).await.unwrap(),
            OrderCancel::Payment(Box::new(p))
        );
        // Purged after its retention (written before the cut), and the order is free again.
        assert_eq!(store.purge_order_tombstones(NOW).await.unwrap(), 0);
        assert_eq!(store.purge_order_tombstones(NOW + 1).await.unwrap(), 1);
        assert!(matches!(
            store
                .create_payment(&new_payment(m, "o-1", 1000))
                .await
                .unwrap(),
            CreatePayment::Created(_)
        ));
    }
);

store_conformance!(
    a_create_and_a_cancel_of_one_order_racing_never_both_win,
    |store| {
        use converge_server::store::OrderCancel;
        let m = merchant(&store, "acme").await;
        let (mut created, mut tombstoned) = (0, 0);
        for round in 0..20 {
            let order = format!("race-{round}");
            let n = new_payment(m, &order, 1000);
            let (made, undone) =
                tokio::join!(store.create_payment(&n), store.cancel_order(m, &order, NOW));
            match (made.unwrap(), undone.unwrap()) {
                (CreatePayment::Created(p), OrderCancel::Payment(found)) => {
                    assert_eq!(found.id, p.id, "round {round}");
                    created += 1;
                }
                (CreatePayment::Tombstoned, OrderCancel::Tombstoned { .. }) => {
                    assert_eq!(store.payment(&n.id).await.unwrap(), None, "round {round}");
                    tombstoned += 1;
                }
                other => panic!("round {round}: both or neither won: {other:?}"),
            }
        }
        assert_eq!(created + tombstoned, 20);
    }
);

store_conformance!(
    holds_expiring_counts_authorized_holds_before_the_cut_off_per_currency,
    |store| {
        let m = merchant(&store, "holds").await;
        let now: i64 = NOW;
        let day = 86_400_000;
        // (status, amount, currency, captured, released, expires at): only AUTHORIZED holds
        // expiring before now + 24 h count, already lapsed ones (not yet released) included;
        // what each still holds is its amount less what was captured and released.
        type Row = (&'static str, i64, &'static str, i64, i64, Option<i64>);
        let rows: [Row; 7] = [
            ("AUTHORIZED", 10_000, "CNY", 4_000, 0, Some(now + 3_600_000)),
            ("AUTHORIZED", 2_500, "CNY", 0, 0, Some(now - 60_000)),
            ("AUTHORIZED", 700, "JPY", 0, 0, Some(now + day - 1)),
            ("AUTHORIZED", 900, "JPY", 0, 0, Some(now + day)),
            ("AUTHORIZING", 800, "CNY", 0, 0, None),
            ("CAPTURING", 800, "CNY", 0, 0, Some(now + 60_000)),
            ("VOIDED", 800, "CNY", 0, 800, Some(now + 60_000)),
        ];
        for (i, (status, amount, currency, captured, released, expires)) in rows.iter().enumerate()
        {
            exec_sql(
                &store,
                &format!(
                    "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, \
                     params_hash, status, version, channel_key, created_at, updated_at, capture_mode, \
                     captured_amount, released_amount, hold_expires_at) \
                     VALUES ('pay_h{i}', {m}, 'o-h{i}', {amount}, '{currency}', '', 'h', '{status}', 3, 'ck_h{i}', \
                     {now}, {now}, 'manual', {captured}, {released}, {expires})",
                    expires = expires.map_or("NULL".to_string(), |t| t.to_string())
                ),
            )
            .await;
        }
        let got = store.holds_expiring(now + day).await.unwrap();
        assert_eq!(
            got,
            vec![
                ("CNY".to_string(), 2, 8_500, now - 60_000),
                ("JPY".to_string(), 1, 700, now + day - 1),
            ]
        );
        let panel = converge_wire::dashboard::HoldsExpiring::of(now + day, got);
        assert_eq!(panel.count, 3);
        assert_eq!(panel.oldest_expiry, Some(now - 60_000));
        assert_eq!(
            panel.held,
            vec![("CNY".to_string(), 8_500), ("JPY".to_string(), 700)]
        );
        assert!(store.holds_expiring(now - day).await.unwrap().is_empty());
    }
);

/// Payments `pay_<name>` of merchant `m` created (and last updated) at the given times.
async fn payments_at(store: &Arc<dyn Store>, m: i64, rows: &[(&str, &str, i64, i64)]) {
    for (name, status, created, updated) in rows {
        exec_sql(
            store,
            &format!(
                "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, \
                 params_hash, status, version, channel_key, created_at, updated_at) \
                 VALUES ('pay_{name}', {m}, 'o-{name}', 1000, 'CNY', '', 'h', '{status}', 1, 'ck_{name}', \
                 {created}, {updated})"
            ),
        )
        .await;
    }
}

store_conformance!(
    a_payment_search_pages_older_after_a_cursor_and_newer_before_one,
    |store| {
        use converge_server::store::PaymentFilter;
        let m = merchant(&store, "pages").await;
        // Newest first: e, d, c, b, a (d and c, b and a created in the same millisecond:
        // the id breaks the tie).
        payments_at(
            &store,
            m,
            &[
                ("a", "SUCCESS", NOW, NOW),
                ("b", "SUCCESS", NOW, NOW),
                ("c", "FAILED", NOW + 1, NOW + 1),
                ("d", "SUCCESS", NOW + 1, NOW + 1),
                ("e", "SUCCESS", NOW + 2, NOW + 2),
            ],
        )
        .await;
        let page = |after: Option<&str>, before: Option<&str>, status: Option<&str>| {
            let cursor = |id: &str| {
                let at = match id {
                    "a" | "b" => NOW,
                    "c" | "d" => NOW + 1,
                    _ => NOW + 2,
                };
                (at, format!("pay_{id}"))
            };
            PaymentFilter {
                after: after.map(cursor),
                before: before.map(cursor),
                status: status.map(str::to_string),
                limit: 2,
                ..PaymentFilter::default()
            }
        };
        let ids = |rows: Vec<Payment>| -> Vec<String> {
            rows.into_iter()
                .map(|p| p.id.trim_start_matches("pay_").to_string())
                .collect()
        };
        let run = |f: PaymentFilter| {
            let store = store.clone();
            async move { ids(store.search_payments(&f).await.unwrap()) }
        };
        assert_eq!(run(page(None, None, None)).await, ["e", "d"]);
        assert_eq!(run(page(Some("d"), None, None)).await, ["c", "b"]);
        // The rows just above the cursor, still newest first.
        assert_eq!(run(page(None, Some("c"), None)).await, ["e", "d"]);
        assert_eq!(run(page(None, Some("b"), None)).await, ["d", "c"]);
        assert_eq!(run(page(None, Some("a"), None)).await, ["c", "b"]);
        assert!(run(page(None, Some("e"), None)).await.is_empty());
        // With both, `before` is used; the other filters hold on the way up too.
        assert_eq!(run(page(Some("e"), Some("a"), None)).await, ["c", "b"]);
        assert_eq!(
            run(page(None, Some("a"), Some("SUCCESS"))).await,
            ["d", "b"]
        );
    }
);

store_conformance!(
    a_payment_search_filters_by_time_in_state_with_the_other_filters,
    |store| {
        use converge_server::store::PaymentFilter;
        let m = merchant(&store, "ages").await;
        let minute = 60_000;
        // (created, last changed): `old` and `stale` entered their state over 10 minutes
        // before NOW, `fresh` 1 ms within it, `edge` exactly at the cut (not over it).
        payments_at(
            &store,
            m,
            &[
                ("old", "UNKNOWN", NOW - 60 * minute, NOW - 30 * minute),
                ("stale", "SUCCESS", NOW - 20 * minute, NOW - 11 * minute),
                ("edge", "UNKNOWN", NOW - 20 * minute, NOW - 10 * minute),
                ("fresh", "UNKNOWN", NOW - 90 * minute, NOW - 10 * minute + 1),
            ],
        )
        .await;
        let ids = |status: Option<&str>| {
            let f = PaymentFilter {
                updated_before: Some(NOW - 10 * minute),
                status: status.map(str::to_string),
                limit: 10,
                ..PaymentFilter::default()
            };
            let store = store.clone();
            async move {
                store
                    .search_payments(&f)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|p| p.id)
                    .collect::<Vec<_>>()
            }
        };
        // Newest created first, as every search.
        assert_eq!(ids(None).await, ["pay_stale", "pay_old"]);
        assert_eq!(ids(Some("UNKNOWN")).await, ["pay_old"]);
    }
);

// --- lanes and fairness (issue 37) ---------------------------------------------------------

/// Completes every job due by `at` (what creating payments queued), so a test counts only
/// its own jobs.
async fn finish_jobs_due_by(store: &Arc<dyn Store>, at: i64) {
    for j in store
        .claim_jobs_of("setup", 1_000, 60_000, at, &KindFilter::all())
        .await
        .unwrap()
    {
        assert!(store.complete_job(j.id, &j.lease_token, at).await.unwrap());
    }
}

/// A job of `kind` for payment `pid` (None: no payment) due at `run_at`.
fn lane_job(
    kind: converge_server::store::JobKind,
    pid: Option<&str>,
    run_at: i64,
) -> converge_server::store::NewJob {
    converge_server::store::NewJob {
        kind,
        payment_id: pid.map(str::to_string),
        refund_id: None,
        run_at,
        max_attempts: 5,
    }
}

store_conformance!(
    a_lanes_claim_takes_one_due_job_per_merchant_before_any_merchants_second,
    |store| {
        use converge_server::domain::lanes::Lane;
        use converge_server::store::JobKind;
        let (_, a) = acme_payment(&store).await;
        let mb = merchant(&store, "bravo").await;
        let CreatePayment::Created(b) = store
            .create_payment(&new_payment(mb, "b-1", 700))
            .await
            .unwrap()
        else {
            panic!("a new order is created");
        };
        finish_jobs_due_by(&store, NOW + 1_000).await;
        // Merchant A's backlog of 200 due queries, all older than B's one.
        for i in 0..200 {
            store
                .enqueue_job(
                    &lane_job(JobKind::Query, Some(&a.id), NOW + 2_000 + i),
                    "",
                    NOW,
                )
                .await
                .unwrap();
        }
        let b_job = store
            .enqueue_job(&lane_job(JobKind::Query, Some(&b.id), NOW + 5_000), "", NOW)
            .await
            .unwrap();
        let filter = KindFilter::for_lane(Lane::Forward, &[]).unwrap();
        let first = store
            .claim_jobs_of("w", 2, 60_000, NOW + 10_000, &filter)
            .await
            .unwrap();
        assert_eq!(first.len(), 2);
        assert!(
            first.iter().any(|j| j.id == b_job),
            "B's one due job is in the first claim of 2: {first:?}"
        );
        assert!(
            first
                .iter()
                .any(|j| j.payment_id.as_deref() == Some(a.id.as_str())),
            "and A's oldest beside it"
        );
        // The rest of A's backlog still drains, oldest first, no job twice.
        let rest = store
            .claim_jobs_of("w", 500, 60_000, NOW + 10_000, &filter)
            .await
            .unwrap();
        assert_eq!(rest.len(), 199);
        assert!(rest.iter().all(|j| !first.iter().any(|f| f.id == j.id)));
    }
);

store_conformance!(
    a_channel_claim_takes_its_channels_jobs_and_the_rest_take_jobs_of_no_payment_or_another_channel,
    |store| {
        use converge_server::domain::lanes::Lane;
        use converge_server::store::{Channels, JobKind};
        let m = merchant(&store, "acme").await;
        let on = |order: &str, connector: &str| {
            let mut p = new_payment(m, order, 1000);
            p.connector = connector.into();
            p
        };
        let (a, b) = (on("o-a", "sandbox"), on("o-b", "stripe-2"));
        for p in [&a, &b] {
            assert!(matches!(
                store.create_payment(p).await.unwrap(),
                CreatePayment::Created(_)
            ));
        }
        finish_jobs_due_by(&store, NOW + 1_000).await;
        let refund = |pid: Option<&str>, i: i64| lane_job(JobKind::Refund, pid, NOW + 2_000 + i);
        let mut ids = std::collections::BTreeMap::new();
        for (i, pid) in [Some(a.id.as_str()), Some(b.id.as_str()), None]
            .into_iter()
            .enumerate()
        {
            let id = store
                .enqueue_job(&refund(pid, i as i64), "", NOW)
                .await
                .unwrap();
            ids.insert(pid.map(str::to_owned), id);
        }
        let lane = KindFilter::for_lane(Lane::Compensation, &[]).unwrap();
        let claim = |channels: Channels| {
            let store = store.clone();
            let filter = lane.clone().on(channels);
            async move {
                let jobs = store
                    .claim_jobs_of("w", 10, 60_000, NOW + 10_000, &filter)
                    .await
                    .unwrap();
                jobs.iter().map(|j| j.id).collect::<Vec<_>>()
            }
        };
        assert_eq!(
            claim(Channels::Only("stripe-2".into())).await,
            vec![ids[&Some(b.id.clone())]]
        );
        assert_eq!(
            claim(Channels::Except(vec!["stripe-2".into()])).await,
            vec![ids[&Some(a.id.clone())], ids[&None]],
            "the other claim takes the sandbox's job and the job of no payment, oldest first"
        );
        assert!(
            claim(Channels::Any).await.is_empty(),
            "each job leased once"
        );
        // A kind this build does not know (a newer build's) is the background lane's, with
        // its merchant's turn like any other.
        exec_sql(
            &store,
            &format!(
                "INSERT INTO jobs (kind, payment_id, status, attempts, max_attempts, run_at, \
                 created_at, updated_at) VALUES ('from_the_future', '{}', 'due', 0, 5, {}, {}, {})",
                a.id,
                NOW + 3_000,
                NOW,
                NOW
            ),
        )
        .await;
        let background = KindFilter::for_lane(Lane::Background, &[]).unwrap();
        let jobs = store
            .claim_jobs_of("w", 10, 60_000, NOW + 10_000, &background)
            .await
            .unwrap();
        assert_eq!(
            jobs.iter().map(|j| j.kind.as_str()).collect::<Vec<_>>(),
            vec!["from_the_future"]
        );
        // A lapsed lease is claimable again; one still held is not.
        let again = store
            .claim_jobs_of("w2", 10, 60_000, NOW + 80_000, &background)
            .await
            .unwrap();
        assert_eq!(again.len(), 1, "the lease of 60 s lapsed at NOW + 70 s");
        assert!(
            store
                .claim_jobs_of("w3", 10, 60_000, NOW + 90_000, &background)
                .await
                .unwrap()
                .is_empty()
        );
    }
);

store_conformance!(a_lanes_claim_never_returns_another_lanes_kinds, |store| {
    use converge_server::domain::lanes::Lane;
    use converge_server::store::JobKind;
    let (_, p) = acme_payment(&store).await;
    finish_jobs_due_by(&store, NOW + 1_000).await;
    for kind in JobKind::ALL {
        for i in 0..3 {
            let pid = (kind != JobKind::Reconcile).then_some(p.id.as_str());
            store
                .enqueue_job(&lane_job(kind, pid, NOW + 2_000 + i), "2026-11-30", NOW)
                .await
                .unwrap();
        }
    }
    let at = NOW + 10_000;
    let mut claimed = 0;
    for lane in Lane::ALL {
        let filter = KindFilter::for_lane(lane, &[]).unwrap();
        let jobs = store
            .claim_jobs_of("w", 100, 60_000, at, &filter)
            .await
            .unwrap();
        let want: Vec<&str> = lane.kinds().iter().map(|k| k.as_str()).collect();
        assert_eq!(jobs.len(), 3 * want.len(), "{lane:?}: {jobs:?}");
        for j in &jobs {
            assert!(
                want.contains(&j.kind.as_str()),
                "{lane:?} claimed a {} job",
                j.kind
            );
        }
        claimed += jobs.len();
    }
    assert_eq!(
        claimed,
        3 * JobKind::ALL.len(),
        "every job in exactly one lane"
    );
    // A paused kind is left out of its lane's claim; a lane whose kinds are all paused
    // claims nothing.
    assert_eq!(
        KindFilter::for_lane(Lane::Delivery, &["webhook".to_string()]),
        None
    );
    let only = KindFilter::for_lane(Lane::Compensation, &["refund".to_string()]).unwrap();
    assert!(!only.kinds().contains(&"refund".to_string()));
});

store_conformance!(
    lane_loads_count_due_and_running_jobs_per_lane_with_the_top_merchants,
    |store| {
        use converge_server::domain::lanes::Lane;
        use converge_server::store::{JobKind, MerchantDue};
        let (ma, a) = acme_payment(&store).await;
        let mb = merchant(&store, "bravo").await;
        let CreatePayment::Created(b) = store
            .create_payment(&new_payment(mb, "b-1", 700))
            .await
            .unwrap()
        else {
            panic!("a new order is created");
        };
        finish_jobs_due_by(&store, NOW + 1_000).await;
        let at = NOW + 10_000;
        for i in 0..3 {
            store
                .enqueue_job(
                    &lane_job(JobKind::Refund, Some(&a.id), NOW + 2_000 + i),
                    "",
                    NOW,
                )
                .await
                .unwrap();
        }
        store
            .enqueue_job(
                &lane_job(JobKind::Refund, Some(&b.id), NOW + 3_000),
                "",
                NOW,
            )
            .await
            .unwrap();
        // Due later: not counted.
        store
            .enqueue_job(
                &lane_job(JobKind::Refund, Some(&b.id), at + 60_000),
                "",
                NOW,
            )
            .await
            .unwrap();
        store
            .enqueue_job(
                &lane_job(JobKind::Reconcile, None, NOW + 4_000),
                "2026-11-30",
                NOW,
            )
            .await
            .unwrap();
        store
            .enqueue_job(
                &lane_job(JobKind::Webhook, Some(&b.id), NOW + 2_500),
                "1",
                NOW,
            )
            .await
            .unwrap();
        // One webhook running (its lease holds at `at`).
        let running = store
            .claim_jobs_of(
                "w",
                1,
                60_000,
                NOW + 5_000,
                &KindFilter::for_lane(Lane::Delivery, &[]).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(running.len(), 1);
        let loads = store.lane_loads(at, 5).await.unwrap();
        assert_eq!(
            loads.iter().map(|l| l.lane).collect::<Vec<_>>(),
            Lane::ALL.to_vec()
        );
        let lane = |l: Lane| loads.iter().find(|x| x.lane == l).unwrap().clone();
        let comp = lane(Lane::Compensation);
        assert_eq!(
            (comp.due, comp.running, comp.oldest_due_at),
            (4, 0, Some(NOW + 2_000))
        );
        assert_eq!(
            comp.top_merchants,
            vec![
                MerchantDue {
                    merchant_id: Some(ma),
                    due: 3
                },
                MerchantDue {
                    merchant_id: Some(mb),
                    due: 1
                }
            ]
        );
        let delivery = lane(Lane::Delivery);
        assert_eq!(
            (delivery.due, delivery.running, delivery.oldest_due_at),
            (0, 1, None)
        );
        let background = lane(Lane::Background);
        assert_eq!(
            (background.due, background.oldest_due_at),
            (1, Some(NOW + 4_000))
        );
        assert_eq!(
            background.top_merchants,
            vec![MerchantDue {
                merchant_id: None,
                due: 1
            }]
        );
        let forward = lane(Lane::Forward);
        assert_eq!(
            (forward.due, forward.running, forward.top_merchants.len()),
            (0, 0, 0)
        );
        // At most `top` merchants.
        let one = store.lane_loads(at, 1).await.unwrap();
        assert_eq!(one[1].top_merchants.len(), 1);
    }
);

// --- webhook circuit breaker (issue 37) ----------------------------------------------------

/// Registers endpoint `id` for merchant `m` (straight into the store).
async fn bare_endpoint(store: &Arc<dyn Store>, m: i64, id: &str) {
    store
        .create_endpoint(
            &converge_server::store::NewEndpoint {
                id: id.to_string(),
                merchant_id: m,
                url: format!("https://example.com/{id}"),
                description: String::new(),
                enabled_events: "*".to_string(),
                secret: "whsec_test".to_string(),
                now: NOW,
                max_live: None,
            },
            None,
        )
        .await
        .unwrap()
        .expect("no cap");
}

store_conformance!(
    the_stored_breaker_keeps_a_flaky_endpoint_closed_and_opens_a_dead_one,
    |store| {
        use converge_server::domain::breaker::{BreakerPolicy, BreakerState};
        let m = merchant(&store, "acme").await;
        bare_endpoint(&store, m, "we_flaky").await;
        bare_endpoint(&store, m, "we_dead").await;
        let policy = BreakerPolicy::default();
        // 40% failures, four in a row among them, over 100 attempts: the stored window
        // follows the domain's, and the breaker stays closed.
        let flaky = [
            false, false, true, true, true, true, false, false, false, false,
        ];
        let mut expected = BreakerState::default();
        for (i, failed) in flaky.iter().cycle().take(100).enumerate() {
            let at = NOW + i as i64;
            expected = policy.after(&expected, !failed, at);
            let stored = store
                .record_breaker("we_flaky", !failed, at, &policy)
                .await
                .unwrap();
            assert_eq!(stored, expected, "attempt {i}");
        }
        let kept = store.endpoint_breaker("we_flaky").await.unwrap();
        assert_eq!(
            (kept.attempts, kept.failures, kept.open_until),
            (20, 8, None)
        );
        // Dead: the fifth failure opens it, stored with its cool-down.
        for i in 0..5 {
            store
                .record_breaker("we_dead", false, NOW + i, &policy)
                .await
                .unwrap();
        }
        let dead = store.endpoint_breaker("we_dead").await.unwrap();
        assert_eq!((dead.attempts, dead.failures, dead.opens), (5, 5, 1));
        assert_eq!(dead.open_until, Some(NOW + 4 + 30_000));
        assert_eq!(dead.opened_at, Some(NOW + 4));
        let open: Vec<String> = store
            .open_breakers()
            .await
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(open, ["we_dead"]);
        // The probe's success closes it with an empty window.
        assert!(
            store
                .claim_breaker_probe("we_dead", NOW + 40_000, NOW + 60_000)
                .await
                .unwrap()
        );
        let closed = store
            .record_breaker("we_dead", true, NOW + 41_000, &policy)
            .await
            .unwrap();
        assert_eq!(closed, BreakerState::default());
        assert_eq!(store.endpoint_breaker("we_dead").await.unwrap(), closed);
    }
);

// --- a late attempt after a delivery ended (issue 39) ---------------------------------------

store_conformance!(
    a_late_failed_attempt_is_recorded_without_turning_a_delivered_webhook_back_to_pending,
    |store| {
        use converge_server::store::{AttemptResult, DeliveryFilter, DeliveryStatus};
        let (m, p) = acme_payment(&store).await;
        store
            .create_endpoint(
                &converge_server::store::NewEndpoint {
                    id: "we_all".into(),
                    merchant_id: m,
                    url: "https://example.com/all".into(),
                    description: String::new(),
                    enabled_events: ",*,".into(),
                    secret: "whsec_test".into(),
                    now: NOW - 1,
                    max_live: None,
                },
                None,
            )
            .await
            .unwrap()
            .expect("no cap");
        succeed(&store, p).await;
        let d = store
            .deliveries(&DeliveryFilter::default(), 10)
            .await
            .unwrap();
        assert_eq!(d.len(), 1, "payment.succeeded to the one endpoint: {d:?}");
        let attempt = |status: DeliveryStatus, code: i64, at: i64| AttemptResult {
            delivery_id: d[0].id,
            attempted_at: at,
            duration_ms: 5,
            status_code: Some(code),
            response: String::new(),
            error: (code >= 300).then(|| format!("HTTP {code}")),
            new_status: status,
            next_attempt_at: (status == DeliveryStatus::Pending).then_some(at + 30_000),
        };
        // The worker whose lease lapsed posted first (500) and records last, after another
        // worker's attempt was delivered.
        store
            .record_attempt(&attempt(DeliveryStatus::Succeeded, 200, NOW + 20_000))
            .await
            .unwrap();
        store
            .record_attempt(&attempt(DeliveryStatus::Pending, 500, NOW + 10_000))
            .await
            .unwrap();
        let after = store
            .delivery(d[0].id)
            .await
            .unwrap()
            .expect("the delivery");
        assert_eq!(after.status, DeliveryStatus::Succeeded);
        assert_eq!((after.attempts, after.last_status), (1, Some(200)));
        assert_eq!(after.delivered_at, Some(NOW + 20_000));
        let history = store.delivery_attempts(d[0].id).await.unwrap();
        assert_eq!(history.len(), 2, "both attempts are history");
        let failing = store.endpoint("we_all").await.unwrap().expect("endpoint");
        assert_eq!(
            failing.failing_since, None,
            "the late failure starts no failure run"
        );
    }
);

// --- endpoints per merchant (issue 37) -----------------------------------------------------

store_conformance!(
    creates_racing_for_a_merchants_last_endpoint_places_end_at_exactly_the_cap,
    |store| {
        let m = merchant(&store, "acme").await;
        let other = merchant(&store, "bravo").await;
        bare_endpoint(&store, m, "we_first").await;
        bare_endpoint(&store, other, "we_other").await;
        // Twelve creates at once for the merchant's four places, one of them taken.
        let creates: Vec<_> = (0..12)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .create_endpoint(
                            &converge_server::store::NewEndpoint {
                                id: format!("we_race_{i}"),
                                merchant_id: m,
                                url: format!("https://example.com/race/{i}"),
                                description: String::new(),
                                enabled_events: "*".to_string(),
                                secret: "whsec_test".to_string(),
                                now: NOW + i,
                                max_live: Some(4),
                            },
                            None,
                        )
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut created = 0;
        for c in creates {
            created += usize::from(c.await.unwrap().is_some());
        }
        assert_eq!(created, 3, "three places were left");
        let live = |id: i64| {
            let store = store.clone();
            async move {
                store
                    .endpoints(Some(id))
                    .await
                    .unwrap()
                    .iter()
                    .filter(|e| e.status != converge_server::store::EndpointStatus::Deleted)
                    .count()
            }
        };
        assert_eq!(live(m).await, 4);
        assert_eq!(live(other).await, 1, "another merchant's count is its own");
        // A deleted endpoint frees its place.
        assert!(
            store
                .set_endpoint_status(
                    "we_first",
                    converge_server::store::EndpointStatus::Deleted,
                    None,
                    NOW + 100,
                    None
                )
                .await
                .unwrap()
        );
        bare_endpoint(&store, m, "we_after_delete").await;
        assert_eq!(live(m).await, 4);
    }
);
