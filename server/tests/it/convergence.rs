//! Convergence: the compensation queue drives every sandbox behaviour to its end state,
//! leases fence stale workers, failures back off with jitter, reconciliation is idempotent
//! (DESIGN.md "Compensation queue and error pool"). Both backends.

use converge_server::store::KindFilter;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use converge_server::service::Core;
use converge_server::store::{JobKind, NewJob, Store};
use converge_server::worker::{JobResult, Worker};
use serde_json::json;

/// Polls `GET /v1/payments/{id}` until its status is one of `want`, or panics after `secs`.
async fn wait_status(
    app: &crate::support::TestApp,
    id: &str,
    want: &[&str],
    secs: u64,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let p = app.get(&format!("/v1/payments/{id}")).await.json();
        if want.contains(&p["status"].as_str().unwrap_or_default()) {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "payment {id} stuck at {} (wanted {want:?})",
            p["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn fast(s: &mut converge_server::config::Settings) {
    s.worker.no_workers = false;
    s.jobs.submit_delay_ms = 200;
    s.jobs.query_delay_ms = 100;
    s.worker.poll_ms = 20;
    s.worker.backoff_base_ms = 20;
    s.worker.backoff_cap_ms = 200;
    s.jobs.resubmit_budget = 2;
    s.jobs.max_attempts = 30;
}

fn reconcile_job(day: &str) -> (NewJob, String) {
    (
        NewJob {
            kind: JobKind::Reconcile,
            payment_id: None,
            refund_id: None,
            run_at: 0,
            max_attempts: 50,
        },
        day.to_string(),
    )
}

on_both_backends!(
    every_sandbox_behaviour_converges_to_its_end_state,
    |s| {
        fast(s);
    },
    |app| {
        let cases = [
            (1051, "FAILED"),
            (1052, "SUCCESS"),
            (1053, "FAILED"),
            (1054, "SUCCESS"),
            (1055, "SUCCESS"),
            (1056, "SUCCESS"),
            (1057, "SUCCESS"),
            (1058, "SUCCESS"),
            (1000, "SUCCESS"),
        ];
        let mut ids = Vec::new();
        for (amount, _) in cases {
            let a = app
            .post("/v1/payments", Some(&format!("k-{amount}")), &json!({"amount": amount, "currency": "CNY", "merchant_order_id": format!("o-{amount}")}))
            .await;
            assert_eq!(a.status, 201, "{amount}: {:?}", a.json());
            ids.push(a.json()["id"].as_str().unwrap().to_string());
        }
        for ((amount, want), id) in cases.iter().zip(&ids) {
            let p = wait_status(&app, id, &[want], 20).await;
            assert_eq!(p["status"], *want, "amount {amount}");
            let charged = if *want == "SUCCESS" { 1 } else { 0 };
            assert_eq!(
                app.store.ledger_batch_count(id, "charge").await.unwrap(),
                charged,
                "amount {amount}"
            );
        }
        // 53: the key was fenced at the channel before FAILED, so a late charge cannot land.
        let p53 = app.store.payment(&ids[2]).await.unwrap().unwrap();
        let channel = converge_server::channel::http::HttpChannel::new(
            &app.running.sandbox.as_ref().unwrap().url,
            Duration::from_secs(5),
        );
        use converge_server::channel::{Channel, QueryOutcome};
        assert_eq!(
            channel.query(&p53.channel_key).await,
            QueryOutcome::Cancelled
        );
        for t in app.store.ledger_totals().await.unwrap() {
            assert_eq!(t.debits, t.credits, "{t:?}");
        }
    }
);

/// A payment of merchant `acme` in flight when the merchant is frozen; its id. `amount` must
/// end in 54: the channel charges and the answer breaks off (UNKNOWN), and the freeze comes
/// before the worker's query (held back by the test's `query_delay_ms`) finds the charge, so
/// the payment goes on to SUSPENSE.
async fn in_flight_when_frozen(
    app: &crate::support::TestApp,
    key: &str,
    order: &str,
    amount: i64,
) -> String {
    let a = app
        .post(
            "/v1/payments",
            Some(key),
            &json!({"amount": amount, "currency": "CNY", "merchant_order_id": order}),
        )
        .await;
    assert_eq!(a.json()["status"], "UNKNOWN", "{}", a.json());
    let id = a.json()["id"].as_str().unwrap().to_string();
    assert!(app.store.set_merchant_frozen("acme", true).await.unwrap());
    id
}

/// A payment in SUSPENSE (its merchant frozen while it was in flight) whose error-pool item
/// alice resolved with the note "handled with the merchant by phone"; its id.
async fn parked_and_resolved_by_alice(
    app: &crate::support::TestApp,
    key: &str,
    order: &str,
    amount: i64,
) -> String {
    let id = in_flight_when_frozen(app, key, order, amount).await;
    wait_status(app, &id, &["SUSPENSE"], 10).await;
    crate::support::eventually(Duration::from_secs(10), "the suspense item", || async {
        let items = app.store.payment_error_items(&id).await.unwrap();
        (!items.is_empty()).then_some(())
    })
    .await;
    let item = converge_server::service::resolve::suspense_key(&id);
    assert!(
        app.store
            .resolve_error_by_key(&item, "handled with the merchant by phone", "alice", 1)
            .await
            .unwrap()
    );
    id
}

on_both_backends!(
    a_payment_in_flight_when_its_merchant_is_frozen_waits_in_suspense_until_unfrozen,
    |s| {
        fast(s);
        // Room for the test to freeze the merchant before the first query.
        s.jobs.query_delay_ms = 1_500;
    },
    |app| {
        let id = in_flight_when_frozen(&app, "k-s", "o-s", 754).await;
        // The frozen merchant can still read; new payments and refunds are refused.
        app.post(
            "/v1/payments",
            Some("k-s2"),
            &json!({"amount": 700, "currency": "CNY", "merchant_order_id": "o-s2"}),
        )
        .await
        .assert_error(403, "merchant_frozen");
        wait_status(&app, &id, &["SUSPENSE"], 10).await;
        // The item is written just after the status commits (by whichever of the query and
        // the post_ledger job parked it).
        let items = eventually(Duration::from_secs(10), "the suspense item", || async {
            let items = app.store.payment_error_items(&id).await.unwrap();
            (!items.is_empty()).then_some(items)
        })
        .await;
        assert_eq!(items.len(), 1);
        assert_eq!(
            (items[0].kind.as_str(), items[0].status.as_str()),
            ("suspense", "open")
        );
        let live_postings = app
            .store
            .payment_jobs(&id)
            .await
            .unwrap()
            .into_iter()
            .filter(|j| {
                j.kind == "post_ledger"
                    && (j.status.as_str() == "due" || j.status.as_str() == "leased")
            })
            .count();
        assert_eq!(live_postings, 1, "one post_ledger job keeps retrying");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            app.get(&format!("/v1/payments/{id}")).await.json()["status"],
            "SUSPENSE",
            "still frozen"
        );
        assert!(app.store.set_merchant_frozen("acme", false).await.unwrap());
        // The post_ledger job waits at the backoff cap (200 ms here) between tries.
        wait_status(&app, &id, &["SUCCESS"], 10).await;
        assert_eq!(
            app.store.ledger_batch_count(&id, "charge").await.unwrap(),
            1
        );
        // The resolution commits just after the posting.
        let resolved_by = eventually(Duration::from_secs(10), "the item resolved", || async {
            let items = app.store.payment_error_items(&id).await.unwrap();
            (items[0].status.as_str() == "resolved").then(|| items[0].resolved_by.clone())
        })
        .await;
        assert_eq!(resolved_by.as_deref(), Some("system"));
    }
);

on_both_backends!(
    a_post_ledger_rerun_after_the_posting_resolves_the_suspense_item_left_open,
    |s| {
        fast(s);
        s.jobs.query_delay_ms = 1_500;
    },
    |app| {
        let id = in_flight_when_frozen(&app, "k-l", "o-l", 954).await;
        wait_status(&app, &id, &["SUSPENSE"], 10).await;
        let open = eventually(Duration::from_secs(10), "the suspense item", || async {
            let items = app.store.payment_error_items(&id).await.unwrap();
            (!items.is_empty()).then(|| items[0].clone())
        })
        .await;
        assert!(app.store.set_merchant_frozen("acme", false).await.unwrap());
        wait_status(&app, &id, &["SUCCESS"], 10).await;
        eventually(Duration::from_secs(10), "the item resolved", || async {
            let items = app.store.payment_error_items(&id).await.unwrap();
            (items[0].status.as_str() == "resolved").then_some(())
        })
        .await;
        // The state a process leaves when it dies between the posting's commit and the
        // resolution's: the payment SUCCESS, its item open, the post_ledger job to be rerun.
        let core: &Core = &app.running.state.core;
        app.store
            .report_error(&converge_server::store::NewErrorItem {
                kind: open.kind.clone(),
                dedupe_key: open.dedupe_key.clone(),
                payment_id: Some(id.clone()),
                summary: open.summary.clone(),
                evidence: open.evidence.clone(),
                reopen: true,
                now: core.clock.now_ms(),
            })
            .await
            .unwrap();
        assert_eq!(
            app.store.payment_error_items(&id).await.unwrap()[0]
                .status
                .as_str(),
            "open"
        );
        let p = app.store.payment(&id).await.unwrap().unwrap();
        core.retry_posting(p, "worker").await.unwrap();
        let items = app.store.payment_error_items(&id).await.unwrap();
        assert_eq!(
            (items[0].status.as_str(), items[0].resolved_by.as_deref()),
            ("resolved", Some("system"))
        );
        assert_eq!(
            app.store.ledger_batch_count(&id, "charge").await.unwrap(),
            1,
            "the rerun posts nothing twice"
        );
    }
);

on_both_backends!(
    a_late_loser_of_the_parking_race_does_not_reopen_a_resolved_suspense_item,
    |s| {
        fast(s);
        s.jobs.query_delay_ms = 1_500;
    },
    |app| {
        let id = parked_and_resolved_by_alice(&app, "k-z", "o-z", 954).await;
        // The query job and the post_ledger job both post a CHANNEL_SUCCESS payment; the one
        // that loses the race still holds that snapshot when it runs, however late.
        let parked = app.store.payment(&id).await.unwrap().unwrap();
        let mut stale = parked.clone();
        stale.status = converge_server::domain::state::PaymentStatus::ChannelSuccess;
        stale.version = parked.version - 1;
        let core: &Core = &app.running.state.core;
        core.retry_posting(stale, "worker").await.unwrap();
        let items = app.store.payment_error_items(&id).await.unwrap();
        assert_eq!(
            (items[0].status.as_str(), items[0].resolved_by.as_deref()),
            ("resolved", Some("alice")),
            "the loser's report is a restatement"
        );
        assert_eq!(
            app.store.payment(&id).await.unwrap().unwrap().version,
            parked.version,
            "the loser moved nothing"
        );
    }
);

on_both_backends!(
    a_suspense_item_a_person_resolved_stays_resolved_while_posting_retries,
    |s| {
        fast(s);
        s.jobs.query_delay_ms = 1_500;
    },
    |app| {
        let id = parked_and_resolved_by_alice(&app, "k-r", "o-r", 854).await;
        let seen = app.store.payment_error_items(&id).await.unwrap()[0].occurrences;
        // The post_ledger job retries at the backoff cap (200 ms here) and restates the item
        // each time: counted, but the person's resolution stands.
        let items = eventually(Duration::from_secs(10), "a post_ledger retry", || async {
            let items = app.store.payment_error_items(&id).await.unwrap();
            (items[0].occurrences > seen).then_some(items)
        })
        .await;
        assert_eq!(
            (
                items[0].status.as_str(),
                items[0].resolved_by.as_deref(),
                items[0].resolution_note.as_deref()
            ),
            (
                "resolved",
                Some("alice"),
                Some("handled with the merchant by phone")
            )
        );
        assert_eq!(
            app.get(&format!("/v1/payments/{id}")).await.json()["status"],
            "SUSPENSE"
        );
    }
);

store_conformance!(
    a_lapsed_lease_is_retaken_and_the_late_result_rejected,
    |store| {
        let (job, payload) = reconcile_job("2026-11-30");
        let id = store.enqueue_job(&job, &payload, 1_000).await.unwrap();
        let a = store
            .claim_jobs_of("A", 10, 100, 1_000, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(a.len(), 1);
        assert!(
            store
                .claim_jobs_of("B", 10, 100, 1_050, &KindFilter::all())
                .await
                .unwrap()
                .is_empty(),
            "leased to A until 1100"
        );
        let b = store
            .claim_jobs_of("B", 10, 100, 1_200, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(b.len(), 1);
        assert_ne!(a[0].lease_token, b[0].lease_token);
        assert!(
            store
                .complete_job(id, &b[0].lease_token, 1_250)
                .await
                .unwrap()
        );
        assert!(
            !store
                .complete_job(id, &a[0].lease_token, 1_260)
                .await
                .unwrap(),
            "A's late result: 0 rows"
        );
        assert!(
            !store
                .retry_job(id, &a[0].lease_token, 2_000, "late", false, 1_260)
                .await
                .unwrap()
        );
        let j = store.job(id).await.unwrap().unwrap();
        assert_eq!((j.status.as_str(), j.attempts), ("done", 2));
    }
);

store_conformance!(
    a_batch_completion_refuses_a_stale_token_and_completes_the_rest,
    |store| {
        let (job, payload) = reconcile_job("2026-11-30");
        let lost = store.enqueue_job(&job, &payload, 1_000).await.unwrap();
        let a = store
            .claim_jobs_of("A", 10, 100, 1_000, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(a.len(), 1);
        // A's lease lapses and B retakes the job: A's token is stale from here on.
        let b = store
            .claim_jobs_of("B", 1, 10_000, 1_200, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(b.len(), 1);
        let first = store.enqueue_job(&job, &payload, 1_200).await.unwrap();
        let second = store.enqueue_job(&job, &payload, 1_200).await.unwrap();
        let c = store
            .claim_jobs_of("C", 10, 10_000, 1_250, &KindFilter::all())
            .await
            .unwrap();
        let token = |id: i64| c.iter().find(|j| j.id == id).unwrap().lease_token.clone();
        let (t1, t2) = (token(first), token(second));

        let mut done = store
            .complete_jobs(
                &[(first, &t1), (lost, &a[0].lease_token), (second, &t2)],
                1_300,
            )
            .await
            .unwrap();
        done.sort_unstable();
        assert_eq!(
            done,
            vec![first, second],
            "the stale token's job is left out"
        );
        let held = store.job(lost).await.unwrap().unwrap();
        assert_eq!(held.status.as_str(), "leased", "still B's");
        for id in [first, second] {
            assert_eq!(
                store.job(id).await.unwrap().unwrap().status.as_str(),
                "done"
            );
        }
        assert!(
            store
                .complete_jobs(&[(first, &t1)], 1_310)
                .await
                .unwrap()
                .is_empty(),
            "a completed job is not completed twice"
        );
        assert!(
            store
                .complete_jobs(&[(lost, &t2)], 1_310)
                .await
                .unwrap()
                .is_empty(),
            "another job's token does not fit"
        );
        assert!(store.complete_jobs(&[], 1_310).await.unwrap().is_empty());
        assert_eq!(
            store
                .complete_jobs(&[(lost, &b[0].lease_token)], 1_320)
                .await
                .unwrap(),
            vec![lost],
            "the holder's result is written"
        );
    }
);

store_conformance!(
    a_batch_completion_larger_than_one_statement_completes_every_job,
    |store| {
        let n = converge_server::store::COMPLETE_JOBS_CHUNK + 7;
        let (job, payload) = reconcile_job("2026-11-30");
        for _ in 0..n {
            store.enqueue_job(&job, &payload, 0).await.unwrap();
        }
        let claimed = store
            .claim_jobs_of("A", n as i64, 600_000, 10, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(claimed.len(), n);
        let leases: Vec<(i64, &str)> = claimed
            .iter()
            .map(|j| (j.id, j.lease_token.as_str()))
            .collect();
        let mut done = store.complete_jobs(&leases, 20).await.unwrap();
        done.sort_unstable();
        let mut want: Vec<i64> = claimed.iter().map(|j| j.id).collect();
        want.sort_unstable();
        assert_eq!(done, want);
        let stats = store.queue_stats(0).await.unwrap();
        assert_eq!(
            stats
                .iter()
                .map(|s| (s.status.as_str(), s.count))
                .collect::<Vec<_>>(),
            vec![("done", n as i64)]
        );
    }
);

store_conformance!(
    concurrent_claimers_never_share_a_job_or_exceed_their_batch,
    |store| {
        const JOBS: usize = 10_000;
        for _ in 0..JOBS {
            let (job, payload) = reconcile_job("2026-11-30");
            store.enqueue_job(&job, &payload, 0).await.unwrap();
        }
        let mut tasks = Vec::new();
        for c in 0..4 {
            let store: Arc<dyn Store> = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                loop {
                    let got = store
                        .claim_jobs_of(&format!("c{c}"), 50, 600_000, 10, &KindFilter::all())
                        .await
                        .unwrap();
                    assert!(
                        got.len() <= 50,
                        "claim of {} rows for a batch of 50",
                        got.len()
                    );
                    if got.is_empty() {
                        return seen;
                    }
                    seen.extend(got.into_iter().map(|j| j.id));
                }
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let distinct: HashSet<_> = all.iter().collect();
        assert_eq!(all.len(), JOBS, "every job claimed once");
        assert_eq!(distinct.len(), JOBS, "no job leased twice");
    }
);

on_both_backends!(
    a_poison_job_does_not_block_the_good_one_in_its_batch,
    |app| {
        let store = &app.store;
        let mut bad = Vec::new();
        for _ in 0..3 {
            let (job, _) = reconcile_job("");
            bad.push(store.enqueue_job(&job, "not-a-day", 0).await.unwrap());
        }
        let (job, _) = reconcile_job("");
        let good = store.enqueue_job(&job, "2026-11-30", 0).await.unwrap();
        let mut settings = app.running.settings.worker.clone();
        settings.worker_batch = 10;
        let worker = Worker::new(app.running.state.core.clone(), settings.config());
        let results = worker.drain_once().await.unwrap();
        assert_eq!(results.len(), 4);
        for (id, r) in results {
            let want = if id == good {
                JobResult::Completed
            } else {
                JobResult::Retried
            };
            assert_eq!(r, want, "job {id}");
        }
        assert_eq!(
            store.job(good).await.unwrap().unwrap().status.as_str(),
            "done"
        );
    }
);

on_both_backends!(
    jobs_failing_together_get_spread_retry_times,
    |s| {
        s.worker.backoff_base_ms = 10_000;
        s.worker.backoff_cap_ms = 60_000;
    },
    |app| {
        let store = &app.store;
        let mut ids = Vec::new();
        for _ in 0..100 {
            let (job, _) = reconcile_job("");
            ids.push(store.enqueue_job(&job, "not-a-day", 0).await.unwrap());
        }
        let mut settings = app.running.settings.worker.clone();
        settings.worker_batch = 100;
        let worker = Worker::new(app.running.state.core.clone(), settings.config());
        let before = app.running.state.core.clock.now_ms();
        assert_eq!(worker.drain_once().await.unwrap().len(), 100);
        let mut times = HashSet::new();
        for id in ids {
            let j = store.job(id).await.unwrap().unwrap();
            assert_eq!(j.status.as_str(), "due");
            assert!(
                j.run_at >= before && j.run_at <= before + 10_000 + 5_000,
                "run_at {} outside the first ceiling",
                j.run_at
            );
            times.insert(j.run_at);
        }
        assert!(
            times.len() >= 80,
            "only {} distinct retry times for 100 jobs",
            times.len()
        );
    }
);

on_both_backends!(
    a_job_abandoned_mid_run_is_rerun_once_without_a_second_charge,
    |s| {
        s.worker.lease_ms = 300;
    },
    |app| {
        // The request stops after inserting the payment (as if the process died before the
        // channel call); its submit job is claimed by a worker that also dies (lease never
        // completed); after the lease lapses another worker re-runs it.
        let core: &Core = &app.running.state.core;
        let input = converge_server::service::payments::PaymentInput {
            amount: 1_000,
            currency: "CNY".into(),
            merchant_order_id: "o-crash".into(),
            description: String::new(),
            capture_mode: Default::default(),
        };
        let converge_server::service::payments::InsertOutcome::Created(p) = core
            .insert_payment(app.merchant_id, &input, None)
            .await
            .unwrap()
        else {
            panic!("created");
        };
        let jobs = app.store.payment_jobs(&p.id).await.unwrap();
        let submit = jobs
            .iter()
            .find(|j| j.kind == "submit")
            .expect("submit job written with the payment");
        let far = core.clock.now_ms() + 3_600_000;
        let dead_claim = app
            .store
            .claim_jobs_of("crashed", 10, 300, far, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(dead_claim.len(), 1);
        let rerun = app
            .store
            .claim_jobs_of("survivor", 10, 60_000, far + 1_000, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(
            rerun.iter().map(|j| j.id).collect::<Vec<_>>(),
            vec![submit.id]
        );
        let after = core.drive(p.clone(), "worker").await.unwrap();
        assert_eq!(after.status.as_str(), "SUCCESS");
        assert!(
            app.store
                .complete_job(submit.id, &rerun[0].lease_token, far + 2_000)
                .await
                .unwrap()
        );
        assert!(
            !app.store
                .complete_job(submit.id, &dead_claim[0].lease_token, far + 2_000)
                .await
                .unwrap()
        );
        // Driving again (a third run) charges nothing more.
        core.drive(after, "worker").await.unwrap();
        let attempts: serde_json::Value = app
            .client
            .get(format!(
                "{}/attempts/{}",
                app.running.sandbox.as_ref().unwrap().url,
                p.channel_key
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(attempts["attempts"], 1, "{attempts}");
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
    }
);

on_both_backends!(reconciling_a_day_twice_adds_no_duplicate_items, |app| {
    for amount in [1057, 1058, 1000] {
        let a = app.post("/v1/payments", Some(&format!("k-{amount}")), &json!({"amount": amount, "currency": "CNY", "merchant_order_id": format!("o-{amount}")})).await;
        assert_eq!(a.json()["status"], "SUCCESS");
    }
    let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let core = &app.running.state.core;
    let first = core.reconcile(&day, "channel", None).await.unwrap();
    assert_eq!(
        (first.rows, first.differences),
        (2, 2),
        "57 mismatches, 58 is missing"
    );
    let items = app.store.error_items(None, None, 100).await.unwrap();
    let kinds: HashSet<_> = items.iter().map(|i| i.kind.as_str()).collect();
    assert_eq!(
        kinds,
        HashSet::from(["reconcile_amount_mismatch", "reconcile_missing_statement"])
    );
    // What a person reads is in major units with the currency (never "1057 CNY" beside
    // "10.57 CNY": a 100x misread).
    let mismatch = items
        .iter()
        .find(|i| i.kind == "reconcile_amount_mismatch")
        .unwrap();
    assert_eq!(
        mismatch.summary, "statement says 10.58 CNY, payment is 10.57 CNY",
        "{mismatch:?}"
    );
    core.reconcile(&day, "channel", None).await.unwrap();
    let again = app.store.error_items(None, None, 100).await.unwrap();
    assert_eq!(again.len(), items.len());
    assert!(again.iter().all(|i| i.occurrences == 2));
});

on_both_backends!(
    a_garbled_statement_imports_nothing_and_names_the_line,
    |app| {
        let core = &app.running.state.core;
        let text = "channel_key,amount,currency,status,charged_at\nck_a,100,CNY,succeeded,2026-11-30T00:00:00Z\nck_b,1x0,CNY,succeeded,2026-11-30T00:00:00Z\n";
        let err = core
            .reconcile("2026-11-30", "statement-2026-11-30.csv", Some(text.into()))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("statement-2026-11-30.csv: line 3"),
            "{err}"
        );
        let items = app.store.error_items(None, None, 100).await.unwrap();
        assert_eq!(items.len(), 1, "only the bad-file item, no half import");
        assert_eq!(items[0].kind, "reconcile_bad_file");
        assert!(
            items[0].evidence.contains("\"line\":3"),
            "{}",
            items[0].evidence
        );
    }
);

on_both_backends!(
    a_statement_cut_off_or_not_utf8_imports_nothing_and_names_file_and_line,
    |app| {
        let core = &app.running.state.core;
        let head = "channel_key,amount,currency,status,charged_at\n";
        // cut off right after its header: no end line
        let err = core
            .reconcile("2026-11-29", "cut.csv", Some(head.into()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("cut.csv: line 2"), "{err}");
        // bytes that are not UTF-8, on line 2
        let mut bytes = head.as_bytes().to_vec();
        bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
        let err = core
            .reconcile("2026-11-29", "binary.csv", Some(bytes))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("binary.csv: line 2"), "{err}");
        let items = app.store.error_items(None, None, 100).await.unwrap();
        let mut files: Vec<_> = items
            .iter()
            .map(|i| {
                assert_eq!(i.kind, "reconcile_bad_file");
                let e: serde_json::Value = serde_json::from_str(&i.evidence).unwrap();
                (
                    e["file"].as_str().unwrap().to_string(),
                    e["line"].as_u64().unwrap(),
                )
            })
            .collect();
        files.sort();
        assert_eq!(
            files,
            vec![("binary.csv".to_string(), 2), ("cut.csv".to_string(), 2)]
        );
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM reconciliations", &[])
                .await,
            0,
            "no day recorded as reconciled"
        );
    }
);

on_both_backends!(
    the_daily_reconciliation_is_queued_once_per_day_across_processes,
    |app| {
        let core = &app.running.state.core;
        let hour = 3_600_000;
        let first = core.schedule_daily_reconcile(hour).await.unwrap();
        let (day, job_id) = first.expect("the first call queues the day");
        assert_eq!(
            day,
            converge_server::service::reconcile::statement_day(core.clock.now_ms(), hour)
        );
        // A second process (or a restart) finds the day taken.
        assert_eq!(core.schedule_daily_reconcile(hour).await.unwrap(), None);
        let job = app.store.job(job_id).await.unwrap().unwrap();
        assert_eq!(
            (job.kind.as_str(), job.status.as_str()),
            ("reconcile", "due")
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM jobs WHERE kind = 'reconcile' AND payload = $1",
                &[&day]
            )
            .await,
            1
        );
    }
);

on_both_backends!(
    a_charge_whose_answer_came_too_late_is_settled_by_the_workers_query,
    |s| {
        fast(s);
        // No callback arrives within the test: only the query can settle it. The submit job
        // (a backstop for a request that dies) waits longer than the request's own timeout.
        s.sandbox.sandbox_callback_delay_ms = 600_000;
        s.jobs.submit_delay_ms = 5_000;
    },
    |app| {
        // Digits 52: the channel commits the charge but answers after the core's timeout.
        let a = app
            .post(
                "/v1/payments",
                Some("k-52"),
                &json!({"amount": 1052, "currency": "CNY", "merchant_order_id": "o-52"}),
            )
            .await;
        assert_eq!(a.json()["status"], "UNKNOWN", "{}", a.json());
        let id = a.json()["id"].as_str().unwrap().to_string();
        wait_status(&app, &id, &["SUCCESS"], 20).await;
        let events = app.store.payment_events(&id).await.unwrap();
        assert!(
            events.iter().any(|e| e.applied
                && e.event.as_str() == "query_succeeded"
                && e.source == "worker"),
            "{events:?}"
        );
        assert_eq!(app.channel_charges().await, 1);
        assert_eq!(
            app.store.ledger_batch_count(&id, "charge").await.unwrap(),
            1
        );
    }
);

on_both_backends!(the_queue_gauges_report_zero_for_emptied_groups, |app| {
    let core = &app.running.state.core;
    converge_server::worker::monitor::refresh(core, &app.running.settings.stuck.thresholds())
        .await
        .unwrap();
    let text = app.get("/metrics").await.body;
    let text = String::from_utf8_lossy(&text);
    for kind in converge_server::domain::jobs::JobKind::ALL.map(|k| k.as_str()) {
        for status in ["due", "leased", "done", "dead"] {
            let series = format!("converge_jobs{{kind=\"{kind}\",status=\"{status}\"}}");
            assert!(text.contains(&series), "{series} missing");
        }
    }
});

on_both_backends!(
    a_statement_that_says_failed_or_lists_a_charge_twice_is_a_difference,
    |app| {
        let a = app
            .post(
                "/v1/payments",
                Some("k-st"),
                &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-st"}),
            )
            .await;
        assert_eq!(a.json()["status"], "SUCCESS");
        let id = a.json()["id"].as_str().unwrap().to_string();
        let p = app.store.payment(&id).await.unwrap().unwrap();
        let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
        let at = chrono::Utc::now().to_rfc3339();
        let text = format!(
            "channel_key,amount,currency,status,charged_at\n{k},1000,CNY,failed,{at}\n{k},1000,CNY,failed,{at}\n#end,2,,,\n",
            k = p.channel_key
        );
        let report = app
            .running
            .state
            .core
            .reconcile(&day, "st.csv", Some(text.into_bytes()))
            .await
            .unwrap();
        assert_eq!(report.differences, 2);
        let mut kinds: Vec<_> = app
            .store
            .error_items(None, None, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.kind)
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            vec!["reconcile_duplicate_statement", "reconcile_status_mismatch"]
        );
    }
);
