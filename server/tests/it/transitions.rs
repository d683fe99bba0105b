//! The payment state machine through the store's `apply_transition`, on both backends
//! (DESIGN.md "Payment state machine": whitelisted (from, event) -> to, conditional update on
//! (id, status, version), unique (payment_id, event_id); "Ledger": one charge batch per payment).

use std::sync::Arc;

use converge_server::domain::clock::{Clock, SystemClock};
use converge_server::domain::ledger;
use converge_server::domain::state::{PaymentEvent, PaymentStatus, TRANSITIONS, transition};
use converge_server::service::ids::new_id;
use converge_server::store::{
    CreatePayment, HoldWrite, JobKind, NewJob, NewPayment, Payment, Store, StoreError, Transition,
    TransitionResult,
};
use converge_wire::payments::CaptureMode;

use PaymentEvent as E;
use PaymentStatus as S;

/// A new PENDING payment of a fresh merchant.
async fn pending(store: &Arc<dyn Store>) -> Payment {
    pending_as(store, CaptureMode::Automatic).await
}

/// A new PENDING payment of a fresh merchant, charged at once or authorized (`mode`).
async fn pending_as(store: &Arc<dyn Store>, mode: CaptureMode) -> Payment {
    let name = new_id("m");
    let m = store.create_merchant(&name, &name, 0).await.unwrap();
    let now = SystemClock.now_ms();
    let new = NewPayment {
        id: new_id("pay"),
        merchant_id: m.id,
        merchant_order_id: new_id("o"),
        amount: 1000,
        currency: "CNY".into(),
        description: String::new(),
        params_hash: "h".into(),
        channel_key: new_id("ck"),
        connector: "sandbox".into(),
        now,
        submit_due_at: now + 60_000,
        max_attempts: 5,
        recovery_key: None,
        capture_mode: mode,
    };
    match store.create_payment(&new).await.unwrap() {
        CreatePayment::Created(p) => p,
        other => panic!("{other:?}"),
    }
}

/// A transition of `p` by `event` to `to`, with an event id unique to the version, carrying
/// the ledger lines and hold values its row calls for (the store refuses a step without
/// them).
fn tr(p: &Payment, event: PaymentEvent, to: PaymentStatus) -> Transition {
    use converge_server::domain::state::{Batch, HoldEffect, check};
    let row = check(p.status, event, to).ok();
    let hold = row.and_then(|r| r.effects.hold).map(|effect| {
        let pending = p.hold.as_ref().and_then(|h| h.pending_capture.clone());
        match effect {
            HoldEffect::Authorize => HoldWrite::Authorize {
                expires_at: SystemClock.now_ms() + 3_600_000,
            },
            HoldEffect::BeginCapture => HoldWrite::BeginCapture {
                id: new_id("cap"),
                amount: 400,
                last: false,
            },
            HoldEffect::Capture => {
                let c = pending.expect("a pending capture");
                HoldWrite::Capture {
                    released: if to == S::Success {
                        p.held_amount() - c.amount
                    } else {
                        0
                    },
                    id: c.id,
                    amount: c.amount,
                }
            }
            HoldEffect::RefuseCapture => HoldWrite::RefuseCapture {
                id: pending.expect("a pending capture").id,
                reason: "declined".into(),
            },
            HoldEffect::Release => HoldWrite::Release {
                amount: p.held_amount(),
                reason: "test".into(),
            },
        }
    });
    let (m, cur) = (p.merchant_id, p.currency.as_str());
    let posting = row
        .and_then(|r| r.effects.ledger)
        .and_then(|batch| match (batch, &hold) {
            (Batch::Charge, _) => Some(ledger::charge(m, p.amount, cur).dated("2026-01-01".into())),
            (Batch::Reversal, _) => Some(
                ledger::reversal(m, p.amount - p.refunded_amount, cur).dated("2026-01-01".into()),
            ),
            (Batch::Hold, _) => Some(ledger::hold(m, p.amount, cur).dated("2026-01-01".into())),
            (
                Batch::Capture,
                Some(HoldWrite::Capture {
                    id,
                    amount,
                    released,
                }),
            ) => Some(ledger::capture(m, id, *amount, *released, cur).dated("2026-01-01".into())),
            (Batch::Release, Some(HoldWrite::Release { amount, .. })) => {
                Some(ledger::release(m, *amount, cur).dated("2026-01-01".into()))
            }
            _ => None,
        });
    crate::support::with_follow_up(Transition {
        payment_id: p.id.clone(),
        from: p.status,
        version: p.version,
        to,
        event,
        event_id: format!("{event}@v{}", p.version),
        source: "test".into(),
        detail: format!("{} -> {to}", p.status),
        now: SystemClock.now_ms(),
        last_error: None,
        posting,
        enqueue: vec![],
        hold,
    })
}

/// Applies whitelisted `event` and returns the payment after it.
async fn step(store: &Arc<dyn Store>, p: &Payment, event: PaymentEvent) -> Payment {
    let to = transition(p.status, event).unwrap_or_else(|e| panic!("{e}"));
    match store.apply_transition(&tr(p, event, to)).await.unwrap() {
        TransitionResult::Applied(next) => next,
        other => panic!("{} --{event}--> {to}: {other:?}", p.status),
    }
}

/// A status only a manual-capture payment reaches (issue 34).
fn hold_only(status: PaymentStatus) -> bool {
    matches!(
        status,
        S::Authorizing | S::Authorized | S::Capturing | S::Voiding | S::Voided | S::Expired
    )
}

/// Whether row (from, event, to) is a hold's: its payment is a manual-capture one.
fn hold_row(from: PaymentStatus, event: PaymentEvent, to: PaymentStatus) -> bool {
    hold_only(from) || hold_only(to) || event == E::QueryHoldNotFound
}

/// The whitelisted events that lead a manual-capture payment from PENDING to `status`.
fn hold_path_to(status: PaymentStatus) -> &'static [PaymentEvent] {
    const AUTH: [PaymentEvent; 2] = [E::SubmitAuthorization, E::ChannelAuthorized];
    match status {
        S::Authorizing => &[E::SubmitAuthorization],
        S::Unknown => &[E::SubmitAuthorization, E::ChannelError],
        S::RequiresAction => &[E::SubmitAuthorization, E::ChannelRequiresAction],
        S::Authorized => &AUTH,
        S::Capturing => &[AUTH[0], AUTH[1], E::RequestCapture],
        S::Voiding => &[AUTH[0], AUTH[1], E::RequestVoid],
        S::Voided => &[AUTH[0], AUTH[1], E::RequestVoid, E::ChannelVoided],
        S::Expired => &[AUTH[0], AUTH[1], E::HoldLapsed],
        S::Success => &[AUTH[0], AUTH[1], E::RequestCapture, E::ChannelCapturedFinal],
        S::Failed => &[E::SubmitAuthorization, E::ChannelDeclined],
        other => path_to(other),
    }
}

/// The whitelisted events that lead from PENDING to `status`.
fn path_to(status: PaymentStatus) -> &'static [PaymentEvent] {
    match status {
        S::Canceled => &[E::Cancel],
        S::Authorizing | S::Authorized | S::Capturing | S::Voiding | S::Voided | S::Expired => {
            hold_path_to(status)
        }
        S::Pending => &[],
        S::Processing => &[E::Submit],
        S::Unknown => &[E::Submit, E::ChannelError],
        S::RequiresAction => &[E::Submit, E::ChannelRequiresAction],
        S::ChannelSuccess => &[E::Submit, E::ChannelSucceeded],
        S::Suspense => &[E::Submit, E::ChannelSucceeded, E::LedgerFailed],
        S::Success => &[E::Submit, E::ChannelSucceeded, E::LedgerPosted],
        S::Failed => &[E::Submit, E::ChannelDeclined],
        S::Reversed => &[E::Submit, E::ChannelSucceeded, E::LedgerPosted, E::Reversed],
        S::Refunded => &[
            E::Submit,
            E::ChannelSucceeded,
            E::LedgerPosted,
            E::RefundedInFull,
        ],
    }
}

/// A payment driven through the store to `status`.
async fn payment_in(store: &Arc<dyn Store>, status: PaymentStatus) -> Payment {
    payment_as(store, status, hold_only(status)).await
}

/// A payment driven through the store to `status`, a manual-capture one when `manual`.
async fn payment_as(store: &Arc<dyn Store>, status: PaymentStatus, manual: bool) -> Payment {
    let (mode, path) = if manual {
        (CaptureMode::Manual, hold_path_to(status))
    } else {
        (CaptureMode::Automatic, path_to(status))
    };
    let mut p = pending_as(store, mode).await;
    for event in path {
        p = step(store, &p, *event).await;
    }
    assert_eq!(p.status, status);
    p
}

store_conformance!(
    every_row_of_the_transition_table_applies_and_is_recorded,
    |store| {
        for (from, event, to) in TRANSITIONS.iter().map(|r| (&r.from, &r.event, &r.to)) {
            let p = payment_as(&store, *from, hold_row(*from, *event, *to)).await;
            let before = store.payment_events(&p.id).await.unwrap().len();
            let t = tr(&p, *event, *to);
            let next = match store.apply_transition(&t).await.unwrap() {
                TransitionResult::Applied(next) => next,
                other => panic!("{from} --{event}--> {to}: {other:?}"),
            };
            assert_eq!(next.status, *to, "{from} --{event}-->");
            assert_eq!(
                next.version,
                p.version + 1,
                "{from} --{event}--> bumps the version"
            );
            assert_eq!(next.updated_at, t.now);
            let reread = store.payment(&p.id).await.unwrap().unwrap();
            assert_eq!(reread, next);
            let events = store.payment_events(&p.id).await.unwrap();
            assert_eq!(events.len(), before + 1);
            let ev = events.last().unwrap();
            assert_eq!(ev.event_id, t.event_id);
            assert_eq!(ev.event, event.as_str());
            assert_eq!(ev.from_status, from.as_str());
            assert_eq!(ev.to_status.as_deref(), Some(to.as_str()));
            assert!(ev.applied);
            assert_eq!(ev.source, "test");
        }
    }
);

store_conformance!(
    every_pair_outside_the_table_is_refused_and_writes_nothing,
    |store| {
        let mut refused = 0;
        for from in S::ALL {
            let p = payment_in(&store, from).await;
            for event in E::ALL {
                // Forced follows the ops force whitelist, not the table (tested below).
                if event == E::Forced || transition(from, event).is_ok() {
                    continue;
                }
                // The target a careless caller would pick: where the event leads elsewhere.
                let to = TRANSITIONS
                    .iter()
                    .find(|r| r.event == event)
                    .map_or(S::Success, |r| r.to);
                let events = store.payment_events(&p.id).await.unwrap();
                let result = store.apply_transition(&tr(&p, event, to)).await.unwrap();
                assert!(
                    matches!(result, TransitionResult::Refused(_)),
                    "{from} --{event}--> {to}: {result:?}"
                );
                assert_eq!(
                    store.payment(&p.id).await.unwrap().unwrap(),
                    p,
                    "{from} --{event}--> moved the payment"
                );
                assert_eq!(
                    store.payment_events(&p.id).await.unwrap(),
                    events,
                    "{from} --{event}--> wrote an event"
                );
                refused += 1;
            }
        }
        assert_eq!(
            refused,
            S::ALL.len() * (E::ALL.len() - 1) - TRANSITIONS.len()
        );
    }
);

store_conformance!(
    a_forced_transition_outside_the_force_whitelist_is_refused,
    |store| {
        // A forced move never leaves a terminal state nor skips the charge (DESIGN.md "Ops
        // console": only whitelisted admin transitions).
        for (from, to) in [
            (S::Failed, S::Success),
            (S::Success, S::Failed),
            (S::Pending, S::Success),
            (S::Refunded, S::Success),
        ] {
            let p = payment_in(&store, from).await;
            let result = store
                .apply_transition(&tr(&p, E::Forced, to))
                .await
                .unwrap();
            assert!(
                matches!(result, TransitionResult::Refused(_)),
                "{from} --force--> {to}: {result:?}"
            );
            assert_eq!(store.payment(&p.id).await.unwrap().unwrap(), p);
        }
    }
);

store_conformance!(
    a_whitelisted_event_with_another_target_is_refused,
    |store| {
        // channel_error is never FAILED (DESIGN.md: timeout, 5xx, garbled answer: never FAILED).
        let p = payment_in(&store, S::Processing).await;
        let result = store
            .apply_transition(&tr(&p, E::ChannelError, S::Failed))
            .await
            .unwrap();
        assert!(matches!(result, TransitionResult::Refused(_)), "{result:?}");
        assert_eq!(
            store.payment(&p.id).await.unwrap().unwrap().status,
            S::Processing
        );
    }
);

store_conformance!(terminal_states_never_move, |store| {
    for from in [
        S::Failed,
        S::Reversed,
        S::Refunded,
        S::Voided,
        S::Expired,
        S::Canceled,
    ] {
        let p = payment_in(&store, from).await;
        for event in E::ALL {
            let result = store
                .apply_transition(&tr(&p, event, S::Success))
                .await
                .unwrap();
            assert!(
                matches!(result, TransitionResult::Refused(_)),
                "{from} --{event}-->: {result:?}"
            );
        }
        assert_eq!(store.payment(&p.id).await.unwrap().unwrap(), p);
    }
});

store_conformance!(
    a_transition_from_an_old_version_or_status_is_stale_and_writes_nothing,
    |store| {
        let p = payment_in(&store, S::Processing).await;
        let moved = step(&store, &p, E::ChannelError).await;
        let events = store.payment_events(&p.id).await.unwrap();
        // The caller still believes PROCESSING at the old version.
        match store
            .apply_transition(&tr(&p, E::ChannelSucceeded, S::ChannelSuccess))
            .await
            .unwrap()
        {
            TransitionResult::Stale(current) => {
                assert_eq!(current, moved, "Stale carries the current payment")
            }
            other => panic!("{other:?}"),
        }
        // Right status, old version.
        let mut old = moved.clone();
        old.version -= 1;
        assert!(matches!(
            store
                .apply_transition(&tr(&old, E::QuerySucceeded, S::ChannelSuccess))
                .await
                .unwrap(),
            TransitionResult::Stale(_)
        ));
        assert_eq!(store.payment(&p.id).await.unwrap().unwrap(), moved);
        assert_eq!(store.payment_events(&p.id).await.unwrap(), events);
    }
);

store_conformance!(
    two_concurrent_transitions_from_one_version_apply_exactly_once,
    |store| {
        for round in 0..8 {
            let p = payment_in(&store, S::Processing).await;
            let barrier = Arc::new(tokio::sync::Barrier::new(2));
            let race = |event: PaymentEvent, to: PaymentStatus| {
                let (store, t, barrier) = (store.clone(), tr(&p, event, to), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    store.apply_transition(&t).await.unwrap()
                })
            };
            let a = race(E::ChannelSucceeded, S::ChannelSuccess);
            let b = race(E::ChannelError, S::Unknown);
            let (a, b) = (a.await.unwrap(), b.await.unwrap());
            let applied: Vec<_> = [&a, &b]
                .into_iter()
                .filter(|r| matches!(r, TransitionResult::Applied(_)))
                .collect();
            let stale = [&a, &b]
                .into_iter()
                .filter(|r| matches!(r, TransitionResult::Stale(_)))
                .count();
            assert_eq!(
                (applied.len(), stale),
                (1, 1),
                "round {round}: {a:?} / {b:?}"
            );
            let TransitionResult::Applied(winner) = applied[0] else {
                unreachable!()
            };
            let now = store.payment(&p.id).await.unwrap().unwrap();
            assert_eq!(
                &now, winner,
                "round {round}: the winner's write is the one kept"
            );
            assert_eq!(now.version, p.version + 1);
            let applied_events = store
                .payment_events(&p.id)
                .await
                .unwrap()
                .into_iter()
                .filter(|e| e.from_status == "PROCESSING")
                .count();
            assert_eq!(
                applied_events, 1,
                "round {round}: only the winner's event is recorded"
            );
        }
    }
);

store_conformance!(
    the_same_event_from_two_writers_at_once_applies_once,
    |store| {
        for round in 0..8 {
            let p = payment_in(&store, S::Processing).await;
            let t = tr(&p, E::ChannelError, S::Unknown);
            let barrier = Arc::new(tokio::sync::Barrier::new(2));
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    let (store, t, barrier) = (store.clone(), t.clone(), barrier.clone());
                    tokio::spawn(async move {
                        barrier.wait().await;
                        store.apply_transition(&t).await.unwrap()
                    })
                })
                .collect();
            let mut results = vec![];
            for task in tasks {
                results.push(task.await.unwrap());
            }
            let applied = results
                .iter()
                .filter(|r| matches!(r, TransitionResult::Applied(_)))
                .count();
            assert_eq!(applied, 1, "round {round}: {results:?}");
            assert!(
                results.iter().all(|r| matches!(
                    r,
                    TransitionResult::Applied(_)
                        | TransitionResult::DuplicateEvent
                        | TransitionResult::Stale(_)
                )),
                "{results:?}"
            );
            assert_eq!(
                store.payment(&p.id).await.unwrap().unwrap().version,
                p.version + 1
            );
        }
    }
);

store_conformance!(
    a_duplicate_event_id_is_duplicate_event_and_moves_nothing,
    |store| {
        let p = pending(&store).await;
        let mut submit = tr(&p, E::Submit, S::Processing);
        submit.event_id = "evt-1".into();
        let TransitionResult::Applied(processing) = store.apply_transition(&submit).await.unwrap()
        else {
            panic!()
        };
        // The same event id again, even for a different, allowed event from the new state.
        let mut again = tr(&processing, E::ChannelSucceeded, S::ChannelSuccess);
        again.event_id = "evt-1".into();
        assert_eq!(
            store.apply_transition(&again).await.unwrap(),
            TransitionResult::DuplicateEvent
        );
        assert_eq!(store.payment(&p.id).await.unwrap().unwrap(), processing);
        let ids: Vec<_> = store
            .payment_events(&p.id)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event_id)
            .collect();
        assert_eq!(ids, vec!["created".to_string(), "evt-1".to_string()]);
        // The same id on another payment is another event.
        let other = pending(&store).await;
        let mut submit_other = tr(&other, E::Submit, S::Processing);
        submit_other.event_id = "evt-1".into();
        assert!(matches!(
            store.apply_transition(&submit_other).await.unwrap(),
            TransitionResult::Applied(_)
        ));
    }
);

store_conformance!(at_most_one_charge_batch_per_payment, |store| {
    let p = payment_in(&store, S::ChannelSuccess).await;
    let mut post = tr(&p, E::LedgerPosted, S::Success);
    post.posting =
        Some(ledger::charge(p.merchant_id, p.amount, &p.currency).dated("2026-01-01".into()));
    let TransitionResult::Applied(success) = store.apply_transition(&post).await.unwrap() else {
        panic!()
    };
    assert_eq!(store.ledger_batch_count(&p.id, "charge").await.unwrap(), 1);

    // A second charge posting, riding on an otherwise allowed transition, is refused and the
    // whole transaction with it: no move, no event, no entries.
    let events = store.payment_events(&p.id).await.unwrap();
    let mut second = tr(&success, E::Reversed, S::Reversed);
    second.posting =
        Some(ledger::charge(p.merchant_id, p.amount, &p.currency).dated("2026-01-01".into()));
    let err = store.apply_transition(&second).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert_eq!(store.payment(&p.id).await.unwrap().unwrap(), success);
    assert_eq!(store.payment_events(&p.id).await.unwrap(), events);
    assert_eq!(store.ledger_batch_count(&p.id, "charge").await.unwrap(), 1);
    for total in store.ledger_totals().await.unwrap() {
        assert_eq!(total.debits, total.credits, "{total:?}");
        assert_eq!(total.debits, 1000);
    }
});

store_conformance!(
    an_undated_batch_is_refused_and_nothing_is_written,
    |store| {
        let p = payment_in(&store, S::ChannelSuccess).await;
        let mut post = tr(&p, E::LedgerPosted, S::Success);
        post.posting = Some(ledger::charge(p.merchant_id, p.amount, &p.currency));
        let err = store.apply_transition(&post).await.unwrap_err();
        assert!(err.to_string().contains("no accounting date"), "{err:?}");
        assert_eq!(store.payment(&p.id).await.unwrap().unwrap(), p);
        assert_eq!(store.ledger_batch_count(&p.id, "charge").await.unwrap(), 0);
    }
);

store_conformance!(
    suspense_posts_the_one_charge_batch_when_it_recovers,
    |store| {
        let p = payment_in(&store, S::Suspense).await;
        assert_eq!(store.ledger_batch_count(&p.id, "charge").await.unwrap(), 0);
        let mut post = tr(&p, E::LedgerPosted, S::Success);
        post.posting =
            Some(ledger::charge(p.merchant_id, p.amount, &p.currency).dated("2026-01-01".into()));
        assert!(matches!(
            store.apply_transition(&post).await.unwrap(),
            TransitionResult::Applied(_)
        ));
        assert_eq!(store.ledger_batch_count(&p.id, "charge").await.unwrap(), 1);
    }
);

store_conformance!(
    the_parking_step_opens_the_suspense_item_and_the_posting_step_resolves_it,
    |store| {
        // payment_in walks CHANNEL_SUCCESS --LEDGER_FAILED--> SUSPENSE through the store alone:
        // the item is the step's effect, in its transaction, with no service to report it.
        let p = payment_in(&store, S::Suspense).await;
        let items = store.payment_error_items(&p.id).await.unwrap();
        assert_eq!(items.len(), 1, "one item per parking");
        assert_eq!(
            (
                items[0].kind.as_str(),
                items[0].status.as_str(),
                items[0].dedupe_key.clone()
            ),
            (
                "suspense",
                "open",
                converge_server::domain::state::suspense_key(&p.id)
            )
        );
        assert_eq!(items[0].first_seen, p.updated_at, "dated by the parking");
        let post = tr(&p, E::LedgerPosted, S::Success);
        assert!(matches!(
            store.apply_transition(&post).await.unwrap(),
            TransitionResult::Applied(_)
        ));
        let items = store.payment_error_items(&p.id).await.unwrap();
        assert_eq!(
            (items[0].status.as_str(), items[0].resolved_by.as_deref()),
            ("resolved", Some("system"))
        );
        assert_eq!(
            items[0].resolution_note.as_deref(),
            Some("ledger posted after the merchant was unfrozen")
        );
        // A step that does not touch SUSPENSE leaves the pool alone.
        let other = payment_in(&store, S::Success).await;
        assert!(
            store
                .payment_error_items(&other.id)
                .await
                .unwrap()
                .is_empty()
        );
    }
);

store_conformance!(
    a_transition_writes_its_jobs_and_closes_finished_ones_atomically,
    |store| {
        let p = payment_in(&store, S::Processing).await;
        let jobs = store.payment_jobs(&p.id).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(
            (jobs[0].kind.as_str(), jobs[0].status.as_str()),
            ("submit", "due")
        );
        let mut to_unknown = tr(&p, E::ChannelError, S::Unknown);
        to_unknown.last_error = Some("timeout".into());
        to_unknown.enqueue = vec![NewJob {
            kind: JobKind::Query,
            payment_id: Some(p.id.clone()),
            refund_id: None,
            run_at: to_unknown.now + 1_000,
            max_attempts: 5,
        }];
        let TransitionResult::Applied(unknown) = store.apply_transition(&to_unknown).await.unwrap()
        else {
            panic!()
        };
        assert_eq!(unknown.last_error.as_deref(), Some("timeout"));
        let jobs: Vec<_> = store
            .payment_jobs(&p.id)
            .await
            .unwrap()
            .into_iter()
            .map(|j| (j.kind, j.status.as_str().to_string(), j.run_at))
            .collect();
        assert_eq!(
            jobs,
            vec![
                ("submit".to_string(), "done".to_string(), jobs[0].2),
                (
                    "query".to_string(),
                    "due".to_string(),
                    to_unknown.now + 1_000
                )
            ]
        );
        // A stale transition writes none of its jobs.
        let mut stale = tr(&p, E::ChannelError, S::Unknown);
        stale.event_id = "late".into();
        stale.enqueue = to_unknown.enqueue.clone();
        assert!(matches!(
            store.apply_transition(&stale).await.unwrap(),
            TransitionResult::Stale(_)
        ));
        assert_eq!(store.payment_jobs(&p.id).await.unwrap().len(), 2);
    }
);

store_conformance!(
    an_ignored_event_is_recorded_once_and_moves_nothing,
    |store| {
        use converge_server::store::IgnoredEvent;
        let p = payment_in(&store, S::Success).await;
        let e = IgnoredEvent {
            payment_id: p.id.clone(),
            event_id: "cb:evt_stale".into(),
            event: E::ChannelDeclined,
            from: S::Success,
            source: "callback".into(),
            detail: "stale".into(),
            now: SystemClock.now_ms(),
        };
        assert!(store.record_ignored_event(&e).await.unwrap());
        assert!(!store.record_ignored_event(&e).await.unwrap());
        let ignored: Vec<_> = store
            .payment_events(&p.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| !e.applied)
            .collect();
        assert_eq!(ignored.len(), 1);
        assert_eq!(ignored[0].to_status, None);
        assert_eq!(ignored[0].from_status, "SUCCESS");
        assert_eq!(store.payment(&p.id).await.unwrap().unwrap(), p);
    }
);

store_conformance!(
    a_payment_that_reaches_success_no_longer_shows_a_last_error,
    |store| {
        let p = step(&store, &pending(&store).await, E::Submit).await;
        let mut to_unknown = tr(&p, E::ChannelError, S::Unknown);
        to_unknown.last_error = Some("timeout after 300 ms".into());
        let TransitionResult::Applied(unknown) = store.apply_transition(&to_unknown).await.unwrap()
        else {
            panic!()
        };
        assert_eq!(unknown.last_error.as_deref(), Some("timeout after 300 ms"));
        let charged = step(&store, &unknown, E::QuerySucceeded).await;
        assert_eq!(
            charged.last_error.as_deref(),
            Some("timeout after 300 ms"),
            "still unsettled: the error explains why"
        );
        let settled = step(&store, &charged, E::LedgerPosted).await;
        assert_eq!(settled.status, S::Success);
        assert_eq!(settled.last_error, None, "the events keep the history");
    }
);

store_conformance!(
    a_forced_unknown_keeps_the_query_job_its_row_queues_while_closing_the_old_ones,
    |store| {
        // The row closes every job that drives a charge and queues a fresh query: the close
        // runs first, so the new job survives its own step (it once did not, and a forced
        // UNKNOWN was left without the query that resolves it).
        let p = payment_in(&store, S::Processing).await;
        let TransitionResult::Applied(unknown) = store
            .apply_transition(&tr(&p, E::Forced, S::Unknown))
            .await
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(unknown.status, S::Unknown);
        let mut jobs: Vec<_> = store
            .payment_jobs(&p.id)
            .await
            .unwrap()
            .into_iter()
            .map(|j| (j.kind.as_str().to_string(), j.status.as_str().to_string()))
            .collect();
        jobs.sort();
        assert_eq!(
            jobs,
            vec![
                ("query".to_string(), "due".to_string()),
                ("submit".to_string(), "done".to_string())
            ]
        );
    }
);

store_conformance!(
    a_step_without_its_rows_ledger_lines_or_follow_up_is_refused_before_any_write,
    |store| {
        let p = payment_in(&store, S::ChannelSuccess).await;
        let events = store.payment_events(&p.id).await.unwrap();
        let mut bare = tr(&p, E::LedgerPosted, S::Success);
        bare.posting = None;
        let err = store.apply_transition(&bare).await.unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");

        let q = payment_in(&store, S::Processing).await;
        let mut no_follow_up = tr(&q, E::ChannelError, S::Unknown);
        no_follow_up.enqueue.clear();
        let err = store.apply_transition(&no_follow_up).await.unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");

        assert_eq!(store.payment(&p.id).await.unwrap().unwrap(), p);
        assert_eq!(store.payment(&q.id).await.unwrap().unwrap(), q);
        assert_eq!(store.payment_events(&p.id).await.unwrap(), events);
    }
);
