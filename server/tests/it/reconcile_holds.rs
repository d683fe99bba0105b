//! Reconciliation of manual-capture payments (issue 34): the sandbox's statement lists each
//! capture on its day under the hold's key, and reconciliation sums a payment's lines against
//! what it captured that day.

use std::time::Duration;

use serde_json::json;

use crate::support::TestApp;

/// A manual payment of `amount` EUR captured in `parts` (the last one final); its id.
async fn captured_in_parts(app: &TestApp, order: &str, amount: i64, parts: &[i64]) -> String {
    let body = json!({"amount": amount, "currency": "EUR", "merchant_order_id": order, "capture": "manual"});
    let r = app
        .post("/v1/payments", Some(&format!("k-{order}")), &body)
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let id = r.json()["id"].as_str().unwrap().to_string();
    app.wait_for_status(&id, "AUTHORIZED", Duration::from_secs(20))
        .await;
    for (n, part) in parts.iter().enumerate() {
        let last = n + 1 == parts.len();
        let r = app
            .post(
                &format!("/v1/payments/{id}/captures"),
                Some(&format!("k-{order}-{n}")),
                &json!({"amount": part, "final": last}),
            )
            .await;
        assert!(r.status < 300, "{:?}", r.json());
        let settled = if last { "SUCCESS" } else { "AUTHORIZED" };
        app.wait_for_status(&id, settled, Duration::from_secs(20))
            .await;
    }
    id
}

on_both_backends!(
    a_hold_captured_in_two_parts_reconciles_and_a_lying_capture_line_is_a_difference,
    |app| {
        let core = &app.running.state.core;
        let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
        let charged = app.pay("k-auto", "o-auto", 1000).await;
        assert_eq!(charged["status"], "SUCCESS");
        captured_in_parts(&app, "o-parts", 1000, &[300, 200]).await;
        let statement = app.sandbox_get(&format!("/statements/{day}")).await;
        assert_eq!(statement.status, 200);
        let report = core.reconcile(&day, "channel", None).await.unwrap();
        assert_eq!(
            (report.rows, report.differences),
            (3, 0),
            "one charge and two capture lines, all matched"
        );
        assert!(
            app.store
                .error_items(None, None, 100)
                .await
                .unwrap()
                .is_empty()
        );

        // A capture of an amount ending in 57: the statement reports it one minor unit high.
        let lying = captured_in_parts(&app, "o-lie", 2000, &[357, 643]).await;
        let report = core.reconcile(&day, "channel", None).await.unwrap();
        assert_eq!((report.rows, report.differences), (5, 1));
        let items = app.store.error_items(None, None, 100).await.unwrap();
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(items[0].kind, "reconcile_amount_mismatch");
        assert_eq!(items[0].payment_id.as_deref(), Some(lying.as_str()));
        assert_eq!(
            items[0].summary,
            "statement lists captures of 10.01 EUR, payment captured 10.00 EUR that day"
        );
    }
);
