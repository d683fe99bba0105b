//! `converge verify`: the [`Verify`](converge_server::store::Verify) queries on both backends,
//! and the whole check against a served core and its sandbox channel (DESIGN.md
//! "Convergence invariants").

use std::sync::Arc;
use std::time::Duration;

use converge_server::domain::ledger::{self, LedgerLine, LedgerPosting};
use converge_server::domain::state::{PaymentEvent, transition};
use converge_server::store::keys::{ClaimResult, KeyClaim, KeyRef, StoredResponse};
use converge_server::store::{
    CreatePayment, CreateRefund, NewErrorItem, NewPayment, NewRefund, Payment, Store, Transition,
    TransitionResult,
};
use converge_server::verify::{self, Breach, ChargeSource, HttpChargeSource, Window};

const NOW: i64 = 1_800_000_000_000;

async fn merchant(store: &Arc<dyn Store>) -> i64 {
    store
        .create_merchant("acme", "hash-acme", NOW)
        .await
        .unwrap()
        .id
}

async fn create(store: &Arc<dyn Store>, m: i64, order: &str, amount: i64) -> Payment {
    let n = NewPayment {
        id: format!("pay_{order}"),
        merchant_id: m,
        merchant_order_id: order.into(),
        amount,
        currency: "CNY".into(),
        description: String::new(),
        params_hash: format!("h-{order}"),
        channel_key: format!("ck_{order}"),
        connector: "sandbox".into(),
        now: NOW,
        submit_due_at: NOW + 1_000,
        max_attempts: 5,
        recovery_key: None,
        capture_mode: Default::default(),
    };
    let CreatePayment::Created(p) = store.create_payment(&n).await.unwrap() else {
        panic!("{order} exists")
    };
    p
}

/// Applies `events` in order; `posting` rides along with LedgerPosted.
async fn advance(
    store: &Arc<dyn Store>,
    mut p: Payment,
    events: &[PaymentEvent],
    posting: Option<LedgerPosting>,
) -> Payment {
    for &event in events {
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
            posting: (event == PaymentEvent::LedgerPosted)
                .then(|| posting.clone())
                .flatten(),
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

const TO_SUCCESS: [PaymentEvent; 3] = [
    PaymentEvent::Submit,
    PaymentEvent::ChannelSucceeded,
    PaymentEvent::LedgerPosted,
];

store_conformance!(
    verify_rows_carry_ledger_refund_and_error_pool_counts,
    |store| {
        let m = merchant(&store).await;
        let p = create(&store, m, "a", 1000).await;
        let posting = ledger::charge(m, 1000, "CNY").dated("2026-01-01".into());
        let p = advance(&store, p, &TO_SUCCESS, Some(posting)).await;
        assert_eq!(p.status.as_str(), "SUCCESS");
        let refund = |id: &str, amount| NewRefund {
            id: id.into(),
            payment_id: p.id.clone(),
            amount,
            reason: String::new(),
            now: NOW,
            job_due_at: NOW,
            max_attempts: 5,
        };
        assert!(matches!(
            store.create_refund(&refund("re_1", 300)).await.unwrap(),
            CreateRefund::Created(_)
        ));
        assert!(
            store
                .refund_succeeded(
                    "re_1",
                    &ledger::refund(m, "re_1", 300, "CNY").dated("2026-01-01".into()),
                    NOW
                )
                .await
                .unwrap()
        );
        assert!(matches!(
            store.create_refund(&refund("re_2", 200)).await.unwrap(),
            CreateRefund::Created(_)
        ));

        let b = create(&store, m, "b", 2000).await;
        store
            .report_error(&NewErrorItem {
                kind: "job_dead".into(),
                dedupe_key: "job:1".into(),
                payment_id: Some(b.id.clone()),
                summary: "s".into(),
                evidence: "{}".into(),
                reopen: true,
                now: NOW,
            })
            .await
            .unwrap();

        let rows = store.verify_payments_page("", 10).await.unwrap();
        assert_eq!(
            rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            vec!["pay_a", "pay_b"]
        );
        let a = &rows[0];
        assert_eq!(
            (
                a.status.as_str(),
                a.amount,
                a.currency.as_str(),
                a.channel_key.as_str()
            ),
            ("SUCCESS", 1000, "CNY", "ck_a")
        );
        assert_eq!((a.charge_batches, a.charge_batch_debits), (1, 1000));
        assert_eq!(
            (
                a.refunds_succeeded,
                a.refunds_succeeded_amount,
                a.refunds_pending,
                a.refund_batches
            ),
            (1, 300, 1, 1)
        );
        assert_eq!((a.refunded_amount, a.open_error_items), (500, 0));
        let b = &rows[1];
        assert_eq!(
            (
                b.status.as_str(),
                b.charge_batches,
                b.charge_batch_debits,
                b.open_error_items
            ),
            ("PENDING", 0, 0, 1)
        );
        assert_eq!((b.created_at, b.merchant_order_id.as_str()), (NOW, "b"));

        // A resolved item no longer counts.
        assert!(
            store
                .resolve_error_by_key("job:1", "done", "test", NOW)
                .await
                .unwrap()
        );
        assert_eq!(
            store.verify_payments_page("pay_a", 10).await.unwrap()[0].open_error_items,
            0
        );
    }
);

store_conformance!(
    the_changed_page_holds_what_changed_since_the_mark_and_what_the_window_may_find_late,
    |store| {
        let m = merchant(&store).await;
        let ids = |rows: Vec<converge_server::store::VerifyPaymentRow>| {
            rows.into_iter().map(|r| r.id).collect::<Vec<_>>()
        };
        let mark = NOW + 5_000;
        // Settled at NOW, untouched since: out.
        let quiet = create(&store, m, "quiet", 1000).await;
        let quiet = advance(
            &store,
            quiet,
            &TO_SUCCESS,
            Some(ledger::charge(m, 1000, "CNY").dated("2026-01-01".into())),
        )
        .await;
        // Unsettled since NOW: in only once the window's cutoff reaches its creation.
        create(&store, m, "waiting", 1000).await;
        // Settled at NOW, its refund finished after the mark (a ledger batch then, too).
        let refunded = create(&store, m, "refunded", 1000).await;
        let refunded = advance(
            &store,
            refunded,
            &TO_SUCCESS,
            Some(ledger::charge(m, 1000, "CNY").dated("2026-01-01".into())),
        )
        .await;
        let refund = NewRefund {
            id: "re_late".into(),
            payment_id: refunded.id.clone(),
            amount: 300,
            reason: String::new(),
            now: NOW,
            job_due_at: NOW,
            max_attempts: 5,
        };
        assert!(matches!(
            store.create_refund(&refund).await.unwrap(),
            CreateRefund::Created(_)
        ));
        let posting = ledger::refund(m, "re_late", 300, "CNY").dated("2026-01-01".into());
        assert!(
            store
                .refund_succeeded("re_late", &posting, mark + 1)
                .await
                .unwrap()
        );
        // Settled at NOW, an error-pool item about it seen after the mark.
        let pooled = create(&store, m, "pooled", 1000).await;
        advance(
            &store,
            pooled,
            &TO_SUCCESS,
            Some(ledger::charge(m, 1000, "CNY").dated("2026-01-01".into())),
        )
        .await;
        store
            .report_error(&NewErrorItem {
                kind: "job_dead".into(),
                dedupe_key: "job:pooled".into(),
                payment_id: Some("pay_pooled".into()),
                summary: "s".into(),
                evidence: "{}".into(),
                reopen: true,
                now: mark + 2,
            })
            .await
            .unwrap();

        let before_cutoff = NOW - 1;
        let page = store
            .verify_payments_changed_page(mark, before_cutoff, "", 10)
            .await
            .unwrap();
        assert_eq!(ids(page), vec!["pay_pooled", "pay_refunded"]);
        let page = store
            .verify_payments_changed_page(mark, NOW, "", 10)
            .await
            .unwrap();
        assert_eq!(ids(page), vec!["pay_pooled", "pay_refunded", "pay_waiting"]);
        // Paged like the whole read; a mark at the start holds everything.
        let page = store
            .verify_payments_changed_page(NOW, before_cutoff, "pay_quiet", 10)
            .await
            .unwrap();
        assert_eq!(ids(page), vec!["pay_refunded", "pay_waiting"]);
        let all = store
            .verify_payments_changed_page(NOW, before_cutoff, "", 10)
            .await
            .unwrap();
        assert_eq!(all.len(), 4);
        let row = all.iter().find(|r| r.id == quiet.id).unwrap();
        assert_eq!((row.charge_batches, row.charge_batch_debits), (1, 1000));
    }
);

store_conformance!(
    an_outcome_without_its_event_is_looked_for_among_the_payments_updated_since_the_mark,
    |store| {
        let m = merchant(&store).await;
        let p = create(&store, m, "lost", 1000).await;
        advance(
            &store,
            p,
            &TO_SUCCESS,
            Some(ledger::charge(m, 1000, "CNY").dated("2026-01-01".into())),
        )
        .await;
        // The outcome's event lost (what a transition writing it outside its transaction
        // leaves after a crash): the backlog row first, for the foreign key.
        crate::conformance::exec_sql(
            &store,
            "DELETE FROM outbox_pending WHERE event_id IN \
             (SELECT id FROM events WHERE aggregateid = 'pay_lost')",
        )
        .await;
        crate::conformance::exec_sql(&store, "DELETE FROM events WHERE aggregateid = 'pay_lost'")
            .await;
        let lost = |since: i64| {
            let store = store.clone();
            async move {
                let facts = store.verify_outbox(0, since, false).await.unwrap();
                facts
                    .payments_without_event
                    .into_iter()
                    .map(|(id, _)| id)
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(lost(0).await, vec!["pay_lost"]);
        assert_eq!(lost(NOW).await, vec!["pay_lost"], "updated at the mark");
        assert_eq!(
            lost(NOW + 1).await,
            Vec::<String>::new(),
            "updated before it"
        );
    }
);

/// A channel whose charges are a fixed list (the scope test needs no sandbox).
struct Listed(Vec<verify::ChannelCharge>);

#[async_trait::async_trait]
impl ChargeSource for Listed {
    async fn all_charges(&self) -> Result<Vec<verify::ChannelCharge>, String> {
        Ok(self.0.clone())
    }
    fn describe(&self) -> String {
        "listed".into()
    }
}

fn charge(key: &str, amount: i64) -> verify::ChannelCharge {
    verify::ChannelCharge {
        key: key.into(),
        status: "succeeded".into(),
        amount,
        currency: "CNY".into(),
        attempts: 1,
        refunded: 0,
    }
}

store_conformance!(
    the_incremental_check_reads_the_changed_payments_and_the_touched_channel_keys,
    |store| {
        let m = merchant(&store).await;
        // Charged in the ledger at NOW, but the channel holds no charge for it; and a
        // charge nobody owns.
        let p = create(&store, m, "a", 1000).await;
        advance(
            &store,
            p,
            &TO_SUCCESS,
            Some(ledger::charge(m, 1000, "CNY").dated("2026-01-01".into())),
        )
        .await;
        let channel = Listed(vec![charge("ck_orphan", 500)]);
        let window = Window {
            now_ms: NOW + 10_000,
            window_ms: 60_000,
            action_window_ms: 0,
        };
        let run = |scope: verify::Scope| {
            let (store, channel) = (store.clone(), &channel);
            async move {
                verify::run_scoped(&*store, Some(channel), window, &scope)
                    .await
                    .unwrap()
                    .breaches
            }
        };
        let whole = run(verify::Scope::All).await;
        assert_eq!(whole.len(), 2, "{whole:?}");
        // Nothing changed since the mark, no key touched: nothing to read, nothing found.
        let quiet = verify::Scope::Changed {
            since_ms: NOW + 1,
            channel_keys: Default::default(),
            audit_unchanged: None,
            database_unchanged: false,
        };
        assert_eq!(run(quiet).await, vec![]);
        // The payment's key touched at the channel: it is read though its rows are old.
        let touched = verify::Scope::Changed {
            since_ms: NOW + 1,
            channel_keys: ["ck_a".to_string(), "ck_orphan".to_string()].into(),
            audit_unchanged: None,
            database_unchanged: false,
        };
        let mut found = run(touched.clone()).await;
        found.sort_by_key(|b| b.to_string());
        let mut whole = whole;
        whole.sort_by_key(|b| b.to_string());
        assert_eq!(found, whole);
        // Nothing written since the mark, only the clock and the channel moved: the
        // payments and the channel are still read, and find the same.
        let verify::Scope::Changed {
            since_ms,
            channel_keys,
            audit_unchanged,
            ..
        } = touched
        else {
            unreachable!()
        };
        let clock_only = verify::Scope::Changed {
            since_ms,
            channel_keys,
            audit_unchanged,
            database_unchanged: true,
        };
        let mut found = run(clock_only).await;
        found.sort_by_key(|b| b.to_string());
        assert_eq!(found, whole);
        // Changed since the mark: read without a touched key; the orphan is not looked for.
        let changed = verify::Scope::Changed {
            since_ms: NOW,
            channel_keys: Default::default(),
            audit_unchanged: None,
            database_unchanged: false,
        };
        let found = run(changed).await;
        assert!(
            matches!(found.as_slice(), [Breach::ChargeCount { payment, .. }] if payment == "pay_a"),
            "{found:?}"
        );
    }
);

store_conformance!(verify_pages_follow_the_id_order_and_never_repeat, |store| {
    let m = merchant(&store).await;
    for order in ["c", "a", "e", "b", "d"] {
        create(&store, m, order, 1000).await;
    }
    let mut seen = Vec::new();
    let mut after = String::new();
    loop {
        let page = store.verify_payments_page(&after, 2).await.unwrap();
        assert!(page.len() <= 2);
        seen.extend(page.iter().map(|r| r.id.clone()));
        match page.last() {
            Some(last) if page.len() == 2 => after = last.id.clone(),
            _ => break,
        }
    }
    assert_eq!(seen, vec!["pay_a", "pay_b", "pay_c", "pay_d", "pay_e"]);
    assert!(
        store
            .verify_payments_page("pay_e", 2)
            .await
            .unwrap()
            .is_empty()
    );
});

store_conformance!(
    unbalanced_batches_are_listed_and_balanced_ones_are_not,
    |store| {
        let m = merchant(&store).await;
        let ok = create(&store, m, "ok", 1000).await;
        advance(
            &store,
            ok,
            &TO_SUCCESS,
            Some(ledger::charge(m, 1000, "CNY").dated("2026-01-01".into())),
        )
        .await;
        assert_eq!(store.unbalanced_batches(0).await.unwrap(), vec![]);

        let bad = create(&store, m, "bad", 700).await;
        let one_sided = LedgerPosting {
            kind: "charge",
            refund_id: None,
            currency: "CNY".into(),
            lines: vec![LedgerLine {
                account: ledger::CLEARING.into(),
                debit: true,
                amount: 700,
            }],
            capture_id: None,
            pricing_version: None,
            accounting_date: "2026-01-01".into(),
        };
        advance(&store, bad, &TO_SUCCESS, Some(one_sided)).await;
        let listed = store.unbalanced_batches(0).await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(
            (listed[0].payment_id.as_str(), listed[0].kind.as_str()),
            ("pay_bad", "charge")
        );
        assert_eq!(
            (
                listed[0].debits,
                listed[0].credits,
                listed[0].lines,
                listed[0].foreign_lines
            ),
            (700, 0, 1, 0)
        );

        // The incremental read takes the batches written since its mark only.
        assert_eq!(store.unbalanced_batches(NOW + 1).await.unwrap(), vec![]);
        assert_eq!(store.unbalanced_batches(NOW).await.unwrap().len(), 1);

        // The whole check names the payment twice over: its batch, and the currency total.
        let report = verify::run(
            &*store,
            None,
            Window {
                now_ms: NOW,
                window_ms: 60_000,
                action_window_ms: 0,
            },
        )
        .await
        .unwrap();
        assert!(!report.ok());
        assert_eq!(report.offending_payments(), vec!["pay_bad"]);
        assert!(report.breaches.iter().any(|b| matches!(b, Breach::UnbalancedCurrency { currency, debits: 1700, credits: 1000 } if currency == "CNY")), "{:?}", report.breaches);
    }
);

store_conformance!(
    key_totals_count_completed_keys_and_missing_responses,
    |store| {
        let m = merchant(&store).await;
        assert_eq!(store.key_totals().await.unwrap().done, 0);
        for (key, complete) in [("k1", true), ("k2", true), ("k3", false)] {
            let claim = KeyClaim {
                merchant_id: m,
                scope: "POST /v1/payments".into(),
                idem_key: key.into(),
                route: "POST /v1/payments".into(),
                fingerprint: "fp".into(),
                lease_token: format!("t-{key}"),
                lease_expires_at: NOW + 1_000,
                now: NOW,
                expires_at: NOW + 86_400_000,
            };
            assert_eq!(
                store.claim_key(&claim).await.unwrap(),
                ClaimResult::Claimed { resource_id: None }
            );
            if complete {
                let k = KeyRef {
                    merchant_id: m,
                    scope: claim.scope.clone(),
                    idem_key: key.into(),
                    lease_token: claim.lease_token.clone(),
                };
                let resp = StoredResponse {
                    status: 201,
                    headers: vec![],
                    body: b"{}".to_vec(),
                };
                assert!(store.complete_key(&k, &resp).await.unwrap());
            }
        }
        let totals = store.key_totals().await.unwrap();
        assert_eq!((totals.done, totals.without_response), (2, 0));
    }
);

store_conformance!(
    an_old_unfinished_payment_is_named_unless_the_error_pool_has_it,
    |store| {
        let m = merchant(&store).await;
        create(&store, m, "stuck", 1000).await;
        let late = Window {
            now_ms: NOW + 120_000,
            window_ms: 60_000,
            action_window_ms: 0,
        };
        let report = verify::run(&*store, None, late).await.unwrap();
        assert_eq!(report.offending_payments(), vec!["pay_stuck"]);
        assert_eq!((report.unresolved, report.unresolved_in_pool), (1, 0));
        assert!(
            report
                .render()
                .contains("BREACH pay_stuck: PENDING for 120 s"),
            "{}",
            report.render()
        );

        // Within the window it is still converging.
        let early = Window {
            now_ms: NOW + 30_000,
            window_ms: 60_000,
            action_window_ms: 0,
        };
        assert!(verify::run(&*store, None, early).await.unwrap().ok());

        store
            .report_error(&NewErrorItem {
                kind: "job_dead".into(),
                dedupe_key: "job:stuck".into(),
                payment_id: Some("pay_stuck".into()),
                summary: "submit job failed 5 times".into(),
                evidence: "{}".into(),
                reopen: true,
                now: NOW,
            })
            .await
            .unwrap();
        let report = verify::run(&*store, None, late).await.unwrap();
        assert!(report.ok(), "{}", report.render());
        assert_eq!((report.unresolved, report.unresolved_in_pool), (1, 1));
    }
);

on_both_backends!(
    verify_passes_on_a_converged_core_and_names_orphan_charges_and_stuck_payments,
    |app| {
        app.skip_invariant_check(
            "leaves an orphan channel charge and a stuck payment on purpose: the breaches it proves verify names",
        );
        let sandbox = app
            .running
            .sandbox
            .as_ref()
            .expect("in-process sandbox")
            .url
            .clone();
        let source = HttpChargeSource::new(&sandbox, Duration::from_secs(10)).expect("sandbox url");
        // A success, a decline and a partial refund, all finished within their requests.
        let ok = app.post("/v1/payments", Some("k-ok"), &serde_json::json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-ok"})).await;
        assert_eq!(ok.status, 201);
        let ok_id = ok.json()["id"].as_str().unwrap().to_string();
        let declined = app.post("/v1/payments", Some("k-no"), &serde_json::json!({"amount": 1051, "currency": "CNY", "merchant_order_id": "o-no"})).await;
        assert_eq!(declined.json()["status"], "FAILED");
        let refund = app
            .post(
                &format!("/v1/payments/{ok_id}/refunds"),
                Some("k-re"),
                &serde_json::json!({"amount": 400}),
            )
            .await;
        assert_eq!(refund.json()["status"], "succeeded", "{:?}", refund.json());

        let now = converge_server::domain::clock::Clock::now_ms(
            &converge_server::domain::clock::SystemClock,
        );
        let window = Window {
            now_ms: now,
            window_ms: 0,
            action_window_ms: 0,
        };
        let report = verify::run(&*app.store, Some(&source as &dyn ChargeSource), window)
            .await
            .unwrap();
        assert!(report.ok(), "{}", report.render());
        assert_eq!(report.payments(), 2);
        assert!(
            matches!(
                report.channel,
                verify::ChannelCheck::Checked {
                    succeeded: 1,
                    records: 2,
                    ..
                }
            ),
            "{:?}",
            report.channel
        );

        // Money taken under a key no payment owns: an orphan, i.e. a double charge.
        let orphan = app
            .send(
                app.client.post(format!("{sandbox}/charges")).json(
                    &serde_json::json!({"key": "ck_nobody", "amount": 500, "currency": "CNY"}),
                ),
            )
            .await;
        assert_eq!(orphan.status, 200);
        let report = verify::run(&*app.store, Some(&source as &dyn ChargeSource), window)
            .await
            .unwrap();
        assert_eq!(report.breaches.len(), 1, "{}", report.render());
        assert!(report.breaches[0].is_double_charge());
        assert!(
            report
                .render()
                .contains("channel key ck_nobody: charged 500 CNY but no payment has this key")
        );

        // A payment that never reached the channel and is older than the window.
        let stuck = app
            .store
            .create_payment(&NewPayment {
                id: "pay_stuck0000000000000000".into(),
                merchant_id: app.merchant_id,
                merchant_order_id: "o-stuck".into(),
                amount: 100,
                currency: "CNY".into(),
                description: String::new(),
                params_hash: "h".into(),
                channel_key: "ck_stuck".into(),
                connector: "sandbox".into(),
                now: now - 10_000,
                submit_due_at: now + 3_600_000,
                max_attempts: 5,
                recovery_key: None,
                capture_mode: Default::default(),
            })
            .await
            .unwrap();
        assert!(matches!(stuck, CreatePayment::Created(_)));
        let report = verify::run(&*app.store, Some(&source as &dyn ChargeSource), window)
            .await
            .unwrap();
        assert_eq!(
            report.offending_payments(),
            vec!["pay_stuck0000000000000000"]
        );
        assert_eq!(report.breaches.len(), 2, "{}", report.render());
    }
);

on_both_backends!(verify_refuses_a_channel_without_the_charge_list, |app| {
    // The merchant API's base URL is no channel: GET /charges there is a 404.
    let wrong = HttpChargeSource::new(&app.base, Duration::from_secs(5)).unwrap();
    let now =
        converge_server::domain::clock::Clock::now_ms(&converge_server::domain::clock::SystemClock);
    let err = verify::run(
        &*app.store,
        Some(&wrong as &dyn ChargeSource),
        Window {
            now_ms: now,
            window_ms: 0,
            action_window_ms: 0,
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("GET /charges"), "{err}");
    assert!(HttpChargeSource::new("not a url", Duration::from_secs(1)).is_err());
    assert!(HttpChargeSource::new("ftp://x", Duration::from_secs(1)).is_err());
});

#[tokio::test]
async fn the_sandbox_lists_charges_in_pages_with_attempts_and_refunds() {
    use converge_server::channel::sandbox::{self, SandboxConfig};
    let sb = sandbox::spawn(SandboxConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("sandbox");
    let client = reqwest::Client::new();
    for (key, amount) in [
        ("ck_b", 1000),
        ("ck_a", 2000),
        ("ck_c", 1051),
        ("ck_a", 2000),
    ] {
        client
            .post(format!("{}/charges", sb.url))
            .json(&serde_json::json!({"key": key, "amount": amount, "currency": "CNY"}))
            .send()
            .await
            .unwrap();
    }
    let r = client
        .post(format!("{}/refunds", sb.url))
        .json(&serde_json::json!({"refund_key": "re_1", "charge_key": "ck_a", "amount": 500}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let page = |q: &'static str| {
        let (client, url) = (client.clone(), sb.url.clone());
        async move {
            let r = client
                .get(format!("{url}/charges{q}"))
                .send()
                .await
                .unwrap();
            (
                r.status().as_u16(),
                r.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };
    let (status, first) = page("?limit=2").await;
    assert_eq!(status, 200);
    let keys: Vec<&str> = first["charges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, vec!["ck_a", "ck_b"]);
    assert_eq!(first["charges"][0]["attempts"], 2);
    assert_eq!(first["charges"][0]["refunded"], 500);
    assert_eq!(first["next"], "ck_b");
    let (_, second) = page("?limit=2&after=ck_b").await;
    assert_eq!(second["charges"][0]["key"], "ck_c");
    assert_eq!(second["charges"][0]["status"], "declined");
    assert_eq!(second["next"], serde_json::Value::Null);
    for bad in ["?limit=0", "?limit=5001", "?limit=x"] {
        let (status, body) = page(bad).await;
        assert_eq!(
            (status, body["status"].as_str()),
            (400, Some("invalid")),
            "{bad}"
        );
    }
    let all = HttpChargeSource::new(&sb.url, Duration::from_secs(5))
        .unwrap()
        .all_charges()
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    sb.shutdown().await;
}

store_conformance!(
    verify_checks_the_audit_chain_and_names_an_edited_record,
    |store| {
        use converge_server::domain::audit::AuditEntry;
        use converge_server::verify::AuditChain;
        let window = Window {
            now_ms: NOW,
            window_ms: 60_000,
            action_window_ms: 0,
        };
        let empty = verify::run(&*store, None, window).await.unwrap();
        assert_eq!(empty.audit, AuditChain::Verified { records: 0 });
        for n in 1..=3 {
            let e = AuditEntry {
                at: NOW + n,
                actor: "alice".into(),
                roles: "operator".into(),
                action: "login".into(),
                target: "user:alice".into(),
                reason: format!("r{n}"),
                before: String::new(),
                after: String::new(),
                meta: "{}".into(),
            };
            store.append_audit(&e).await.unwrap();
        }
        let report = verify::run(&*store, None, window).await.unwrap();
        assert_eq!(report.audit, AuditChain::Verified { records: 3 });
        assert!(report.ok(), "{}", report.render());

        // Someone edits record 2 in the database: the chain breaks there.
        edit_audit_reason(&store, 2).await;
        let report = verify::run(&*store, None, window).await.unwrap();
        assert!(
            matches!(&report.audit, AuditChain::Broken { first_bad } if first_bad.starts_with("2 ")),
            "{:?}",
            report.audit
        );
        assert!(
            matches!(&report.breaches[..], [Breach::AuditChainBroken { .. }]),
            "{:?}",
            report.breaches
        );
    }
);

/// Rewrites one audit record's reason behind the store's back (a tampering test).
async fn edit_audit_reason(store: &Arc<dyn Store>, seq: i64) {
    match store.db_pool() {
        converge_server::store::DbPool::Sqlite(pool) => {
            // The append-only trigger is what an attacker with file access would drop first.
            sqlx::query("DROP TRIGGER audit_log_no_update")
                .execute(&pool)
                .await
                .unwrap();
            sqlx::query("UPDATE audit_log SET reason = 'edited' WHERE seq = $1")
                .bind(seq)
                .execute(&pool)
                .await
                .unwrap();
        }
        converge_server::store::DbPool::Postgres(pool) => {
            sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_or_delete")
                .execute(&pool)
                .await
                .unwrap();
            sqlx::query("UPDATE audit_log SET reason = 'edited' WHERE seq = $1")
                .bind(seq)
                .execute(&pool)
                .await
                .unwrap();
        }
    }
}

store_conformance!(
    ledger_totals_past_i64_max_are_summed_not_an_error,
    |store| {
        // Three charges of 4e18 minor units: 1.2e19 in debits and in credits, more than a
        // 64-bit sum holds. Verify must check them (balanced), not fail to add them up.
        let m = merchant(&store).await;
        let big: i64 = 4_000_000_000_000_000_000;
        for order in ["x", "y", "z"] {
            let p = create(&store, m, order, big).await;
            advance(
                &store,
                p,
                &TO_SUCCESS,
                Some(ledger::charge(m, big, "CNY").dated("2026-01-01".into())),
            )
            .await;
        }
        let totals = store
            .ledger_totals()
            .await
            .expect("summed without overflow");
        assert_eq!(totals.len(), 1, "{totals:?}");
        assert_eq!(totals[0].debits, 3 * i128::from(big));
        assert_eq!(totals[0].credits, 3 * i128::from(big));
        let unbalanced = store.unbalanced_batches(0).await.unwrap();
        assert_eq!(verify::check_ledger(&totals, &unbalanced), vec![]);
    }
);
