//! `converge verify`'s invariant 7 (holds, issue 34) on both backends: a core with a hold
//! captured in two parts, a voided one and an open one passes; each check then names the
//! payment of a database (or a channel) broken on purpose for it.

use std::time::Duration;

use converge_server::store::DbPool;
use converge_server::verify::{self, Breach, ChargeSource, HttpChargeSource, Report, Window};
use serde_json::json;

use crate::support::TestApp;

/// The three holds: `captured` (1000, captured 300 then 200 final: SUCCESS), `voided` (800,
/// voided) and `open` (600, AUTHORIZED).
struct Holds {
    captured: String,
    voided: String,
    open: String,
}

async fn manual(app: &TestApp, order: &str, amount: i64) -> String {
    let body = json!({"amount": amount, "currency": "EUR", "merchant_order_id": order, "capture": "manual"});
    let r = app
        .post("/v1/payments", Some(&format!("k-{order}")), &body)
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let id = r.json()["id"].as_str().unwrap().to_string();
    app.wait_for_status(&id, "AUTHORIZED", Duration::from_secs(20))
        .await;
    id
}

async fn holds(app: &TestApp) -> Holds {
    let captured = manual(app, "o-cap", 1000).await;
    for (n, (amount, last)) in [(300, false), (200, true)].into_iter().enumerate() {
        let r = app
            .post(
                &format!("/v1/payments/{captured}/captures"),
                Some(&format!("k-cap-{n}")),
                &json!({"amount": amount, "final": last}),
            )
            .await;
        assert!(r.status < 300, "{:?}", r.json());
        let settled = if last { "SUCCESS" } else { "AUTHORIZED" };
        app.wait_for_status(&captured, settled, Duration::from_secs(20))
            .await;
    }
    let voided = manual(app, "o-void", 800).await;
    let r = app
        .post(
            &format!("/v1/payments/{voided}/void"),
            Some("k-void"),
            &json!({}),
        )
        .await;
    assert!(r.status < 300, "{:?}", r.json());
    app.wait_for_status(&voided, "VOIDED", Duration::from_secs(20))
        .await;
    let open = manual(app, "o-open", 600).await;
    Holds {
        captured,
        voided,
        open,
    }
}

/// `converge verify` with the in-process sandbox as the channel.
async fn verify_now(app: &TestApp) -> Report {
    let sandbox = &app
        .running
        .sandbox
        .as_ref()
        .expect("in-process sandbox")
        .url;
    let source = HttpChargeSource::new(sandbox, Duration::from_secs(10)).unwrap();
    let now =
        converge_server::domain::clock::Clock::now_ms(&converge_server::domain::clock::SystemClock);
    let window = Window {
        now_ms: now,
        window_ms: 300_000,
        action_window_ms: 0,
    };
    verify::run(&*app.store, Some(&source as &dyn ChargeSource), window)
        .await
        .unwrap()
}

/// The holds pass; then `sql` (binding `args`) breaks the database behind the core's back.
async fn clean_then_break(app: &TestApp, why: &str, sql: &str, args: &[&str]) {
    let report = verify_now(app).await;
    assert!(report.ok(), "{}", report.render());
    assert_eq!((report.holds.manual, report.holds.queried), (3, 3));
    assert!(
        report
            .render()
            .contains("[PASS] 7. holds: 3 manual-capture payments, 3 holds queried"),
        "{}",
        report.render()
    );
    app.skip_invariant_check(why);
    exec(app, sql, args).await;
}

/// Runs `sql` on the core's database (a write the store never makes).
async fn exec(app: &TestApp, sql: &str, args: &[&str]) {
    macro_rules! run {
        ($pool:expr) => {{
            let mut q = sqlx::query(sql);
            for a in args {
                q = q.bind(*a);
            }
            q.execute(&$pool)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }};
    }
    match app.store.db_pool() {
        DbPool::Sqlite(pool) => run!(pool),
        DbPool::Postgres(pool) => run!(pool),
    }
}

/// The breaches `report` names for `payment`.
fn of<'a>(report: &'a Report, payment: &str) -> Vec<&'a Breach> {
    report
        .breaches
        .iter()
        .filter(|b| b.payment() == Some(payment))
        .collect()
}

on_both_backends!(
    verify_names_a_hold_captured_and_released_past_its_authorization,
    |app| {
        let h = holds(&app).await;
        clean_then_break(
            &app,
            "releases more than was authorized on purpose",
            "UPDATE payments SET released_amount = released_amount + 1 WHERE id = $1",
            &[&h.captured],
        )
        .await;
        let report = verify_now(&app).await;
        assert!(
            of(&report, &h.captured).iter().any(|b| matches!(
                b,
                Breach::CapturedOverAuthorized {
                    captured: 500,
                    released: 501,
                    ..
                }
            )),
            "{}",
            report.render()
        );
    }
);

on_both_backends!(
    verify_names_a_voided_hold_whose_release_was_never_posted,
    |app| {
        let h = holds(&app).await;
        for table in ["ledger_entries", "ledger_batches"] {
            let sql = if table == "ledger_entries" {
                "DELETE FROM ledger_entries WHERE batch_id IN \
             (SELECT id FROM ledger_batches WHERE payment_id = $1 AND kind = 'release')"
            } else {
                "DELETE FROM ledger_batches WHERE payment_id = $1 AND kind = 'release'"
            };
            if table == "ledger_entries" {
                clean_then_break(
                    &app,
                    "deletes a release batch on purpose",
                    sql,
                    &[&h.voided],
                )
                .await;
            } else {
                exec(&app, sql, &[&h.voided]).await;
            }
        }
        let report = verify_now(&app).await;
        let found = of(&report, &h.voided);
        assert!(
            matches!(&found[..], [Breach::HoldNotEnded { detail, .. }] if detail.contains("net to -800 pending, 800 at the channel")),
            "{}",
            report.render()
        );
    }
);

on_both_backends!(
    verify_names_a_captured_capture_without_its_ledger_batch,
    |app| {
        let h = holds(&app).await;
        clean_then_break(
            &app,
            "detaches a capture batch from its capture on purpose",
            "UPDATE ledger_batches SET capture_id = NULL WHERE id = \
         (SELECT MIN(b.id) FROM ledger_batches b JOIN payment_captures c ON c.id = b.capture_id \
          WHERE c.payment_id = $1)",
            &[&h.captured],
        )
        .await;
        let report = verify_now(&app).await;
        assert!(
        of(&report, &h.captured).iter().any(|b| matches!(b, Breach::CaptureLedger { detail, .. } if detail.contains("credit 200 to the merchant, the payment captured 500"))),
        "{}",
        report.render()
    );
    }
);

on_both_backends!(
    verify_names_a_channel_capture_the_core_never_recorded,
    |app| {
        let h = holds(&app).await;
        let report = verify_now(&app).await;
        assert!(report.ok(), "{}", report.render());
        app.skip_invariant_check("captures at the channel behind the core's back on purpose");
        // The channel captures 100 of the open hold without the core.
        let key = app
            .sql_strings("SELECT channel_key FROM payments WHERE id = $1", &[&h.open])
            .await
            .remove(0);
        let sandbox = &app.running.sandbox.as_ref().unwrap().url;
        let r = app
            .send(
                app.client
                    .post(format!("{sandbox}/authorizations/{key}/captures"))
                    .json(&json!({"capture_key": "cap_behind", "amount": 100})),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.json());
        let report = verify_now(&app).await;
        assert!(
            matches!(&of(&report, &h.open)[..], [Breach::HoldChannelMismatch { detail, .. }] if detail.contains("captured 100 at the channel, 0 in the ledger")),
            "{}",
            report.render()
        );
        // And were the core to say the hold was voided, that capture came after the void.
        exec(
            &app,
            "UPDATE payments SET status = 'VOIDED', released_amount = amount WHERE id = $1",
            &[&h.open],
        )
        .await;
        let report = verify_now(&app).await;
        assert!(
            of(&report, &h.open)
                .iter()
                .any(|b| matches!(b, Breach::CaptureAfterVoid { captured: 100, .. })),
            "{}",
            report.render()
        );
        assert!(
            report
                .render()
                .contains("VOIDED but the channel captured 100")
        );
    }
);

on_both_backends!(verify_names_a_payment_for_a_tombstoned_order, |app| {
    let h = holds(&app).await;
    // The rows verify reads: a hold captured in two parts and released, one voided.
    let row = app
        .store
        .verify_payment(&h.captured)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            row.capture_mode.as_str(),
            row.captured_amount,
            row.released_amount
        ),
        ("manual", 500, 500)
    );
    assert_eq!(
        (row.hold_batches, row.capture_batches, row.release_batches),
        (1, 2, 0),
        "the final capture releases the rest in its own batch"
    );
    assert_eq!(
        (
            row.hold_pending_net,
            row.channel_holds_net,
            row.capture_payable
        ),
        (0, 0, 500)
    );
    assert_eq!(
        (
            row.captures_captured,
            row.captures_captured_amount,
            row.captures_captured_batched
        ),
        (2, 500, 2)
    );
    let row = app.store.verify_payment(&h.voided).await.unwrap().unwrap();
    assert_eq!(
        (
            row.released_amount,
            row.hold_batches,
            row.release_batches,
            row.hold_pending_net
        ),
        (800, 1, 1, 0)
    );
    let row = app.store.verify_payment(&h.open).await.unwrap().unwrap();
    assert_eq!((row.hold_pending_net, row.channel_holds_net), (-600, 600));
    assert!(
        app.store
            .verify_payment("pay_none")
            .await
            .unwrap()
            .is_none()
    );
    let merchant = app.merchant_id.to_string();
    clean_then_break(
        &app,
        "tombstones an order that has a payment on purpose",
        "INSERT INTO order_tombstones (merchant_id, merchant_order_id, created_at) \
         VALUES (CAST($1 AS BIGINT), 'o-open', 0)",
        &[&merchant],
    )
    .await;
    let report = verify_now(&app).await;
    assert!(
        matches!(&of(&report, &h.open)[..], [Breach::TombstonedOrder { merchant_order_id, .. }] if merchant_order_id == "o-open"),
        "{}",
        report.render()
    );
    // The incremental check's read: the pair is found from the payment's write (the
    // tombstone is older) and from the tombstone's, never once both are older than the mark.
    let found = |rows: Vec<converge_server::store::TombstonedPayment>| {
        rows.into_iter().map(|t| t.id).collect::<Vec<_>>()
    };
    let open = app.store.verify_payment(&h.open).await.unwrap().unwrap();
    let store = &app.store;
    assert_eq!(
        found(store.tombstoned_payments(0).await.unwrap()),
        [h.open.clone()]
    );
    assert_eq!(
        found(store.tombstoned_payments(open.updated_at).await.unwrap()),
        [h.open.clone()]
    );
    assert!(
        found(
            store
                .tombstoned_payments(open.updated_at + 1)
                .await
                .unwrap()
        )
        .is_empty()
    );
    exec(
        &app,
        "UPDATE order_tombstones SET created_at = CAST($1 AS BIGINT) \
         WHERE merchant_order_id = 'o-open'",
        &[&(open.updated_at + 5).to_string()],
    )
    .await;
    assert_eq!(
        found(
            store
                .tombstoned_payments(open.updated_at + 5)
                .await
                .unwrap()
        ),
        [h.open.clone()]
    );
});
