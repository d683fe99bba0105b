//! Fees per capture under a merchant's versioned pricing, on both backends (issue 35 "Money
//! rules"): each charge and each capture of a hold is priced in its posting's transaction by
//! the pricing current at that moment, posted as a fee batch to fee revenue naming its
//! version, and shown as `fee` and `net` on the payment and its events.

use crate::support::*;

use std::time::Duration;

use converge_server::domain::ledger;
use converge_server::service::merchants::MerchantError;
use serde_json::{Value, json};

/// Merchant `acme`'s new pricing, as `converge merchant pricing` sets it.
async fn price(app: &TestApp, percent: &str, fixed: i64) -> Result<i64, MerchantError> {
    app.core()
        .set_merchant_pricing(0, "acme", percent, (fixed, 0), &setup_actor())
        .await
        .map(|p| p.version)
}

/// A sale of `amount` CNY, once it is SUCCESS.
async fn sale(app: &TestApp, order: &str, amount: i64) -> Value {
    let p = app.pay(&format!("k-{order}"), order, amount).await;
    let id = p["id"].as_str().expect("id").to_string();
    app.wait_for_status(&id, "SUCCESS", Duration::from_secs(20))
        .await
}

fn id(p: &Value) -> &str {
    p["id"].as_str().expect("payment id")
}

/// What the payment's batches leave on `account`, credits positive.
async fn credited(app: &TestApp, p: &Value, account: &str) -> i64 {
    -app.account_net(id(p), account).await
}

/// The pricing versions of the payment's fee batches, oldest first.
async fn fee_versions(app: &TestApp, p: &Value) -> Vec<String> {
    app.sql_strings(
        "SELECT CAST(pricing_version AS TEXT) FROM ledger_batches WHERE payment_id = $1 AND kind = 'fee' ORDER BY id",
        &[id(p)],
    )
    .await
}

on_both_backends!(a_sale_pays_its_merchants_fee_to_fee_revenue, |app| {
    assert_eq!(price(&app, "2.9", 30).await.unwrap(), 1);
    let p = sale(&app, "o-1", 1999).await;
    // 2.9 % of 1999 is 57.971, rounded half-even to 58, plus 30.
    assert_eq!(
        (p["fee"].clone(), p["net"].clone()),
        (json!(88), json!(1911))
    );
    assert_eq!(fee_versions(&app, &p).await, ["1"]);
    assert_eq!(credited(&app, &p, ledger::FEE_REVENUE).await, 88);
    let payable = ledger::merchant_account(app.merchant_id);
    assert_eq!(
        credited(&app, &p, &payable).await,
        1911,
        "the merchant is owed the net"
    );
    // The merchant's notification tells the same figures.
    let told = app
        .sql_strings(
            "SELECT payload FROM events WHERE aggregateid = $1 AND type = 'payment.succeeded'",
            &[id(&p)],
        )
        .await;
    let told: Value = serde_json::from_str(&told[0]).unwrap();
    assert_eq!(
        (told["fee"].clone(), told["net"].clone()),
        (json!(88), json!(1911))
    );
    // A refund does not give the fee back: the merchant keeps paying it.
    let refund = app
        .post(
            &format!("/v1/payments/{}/refunds", id(&p)),
            Some("r-1"),
            &json!({"amount": 1999}),
        )
        .await;
    assert_eq!(refund.status, 201, "{:?}", refund.json());
    let after = app
        .wait_for_status(id(&p), "REFUNDED", Duration::from_secs(20))
        .await;
    assert_eq!(
        (after["fee"].clone(), after["net"].clone()),
        (json!(88), json!(1911))
    );
    assert_eq!(credited(&app, &p, &payable).await, -88);
});

on_both_backends!(a_payment_before_any_pricing_pays_no_fee, |app| {
    let pending = app.pay("k-0", "o-0", 500).await;
    assert!(
        pending.get("fee").is_none() || pending["status"] == "SUCCESS",
        "nothing captured, no fee shown: {pending}"
    );
    let p = sale(&app, "o-1", 1000).await;
    assert_eq!(
        (p["fee"].clone(), p["net"].clone()),
        (json!(0), json!(1000))
    );
    assert!(fee_versions(&app, &p).await.is_empty(), "no fee batch");
    assert_eq!(credited(&app, &p, ledger::FEE_REVENUE).await, 0);
});

on_both_backends!(
    each_capture_of_a_hold_is_priced_by_the_pricing_current_when_it_is_posted,
    |app| {
        let created = app
            .post(
                "/v1/payments",
                Some("k-h"),
                &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-h", "capture": "manual"}),
            )
            .await;
        assert_eq!(created.status, 201, "{:?}", created.json());
        let p = created.json();
        assert!(p.get("fee").is_none(), "nothing captured yet: {p}");
        assert_eq!(price(&app, "1", 0).await.unwrap(), 1);
        let capture = |key: &'static str, amount: i64, last: bool| {
            let path = format!("/v1/payments/{}/captures", id(&p));
            let app = &app;
            async move {
                app.post(&path, Some(key), &json!({"amount": amount, "final": last}))
                    .await
            }
        };
        // 1 % of 250 is 2.5: half-even gives 2.
        let first = capture("c-1", 250, false).await.json();
        assert_eq!(
            (first["fee"].clone(), first["net"].clone()),
            (json!(2), json!(248))
        );
        assert_eq!(price(&app, "2", 5).await.unwrap(), 2);
        // 2 % of 150 is 3, plus 5; the first capture keeps its fee.
        let last = capture("c-2", 150, true).await.json();
        assert_eq!(last["status"], "SUCCESS", "{last}");
        assert_eq!(
            (last["fee"].clone(), last["net"].clone()),
            (json!(10), json!(390))
        );
        assert_eq!(fee_versions(&app, &p).await, ["1", "2"]);
        assert_eq!(credited(&app, &p, ledger::FEE_REVENUE).await, 10);
        let history = app.core().merchant_pricing("acme").await.unwrap();
        assert_eq!(
            history.iter().map(|v| v.version).collect::<Vec<_>>(),
            [2, 1]
        );
        // The merchants page shows each merchant's latest version, and none for one without.
        app.add_merchant("unpriced").await;
        let accounts = app.core().merchant_accounts().await.unwrap();
        let shown: Vec<(String, Option<i64>)> = accounts
            .iter()
            .map(|a| {
                (
                    a.merchant.name.clone(),
                    a.pricing.as_ref().map(|p| p.version),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("acme".to_string(), Some(2)),
                ("unpriced".to_string(), None)
            ]
        );
    }
);

on_both_backends!(a_small_capture_pays_at_most_its_amount_in_fees, |app| {
    price(&app, "0", 500).await.unwrap();
    let p = sale(&app, "o-1", 300).await;
    assert_eq!((p["fee"].clone(), p["net"].clone()), (json!(300), json!(0)));
});

on_both_backends!(
    a_pricing_that_cannot_be_used_is_refused_and_changes_nothing,
    |app| {
        for (percent, fixed) in [("2.91234", 0), ("-1", 0), ("101", 0), ("abc", 0), ("1", -5)] {
            assert!(
                matches!(
                    price(&app, percent, fixed).await,
                    Err(MerchantError::InvalidPricing(_))
                ),
                "{percent} {fixed}"
            );
        }
        assert!(matches!(
            app.core()
                .set_merchant_pricing(0, "nobody", "1", (0, 0), &setup_actor())
                .await,
            Err(MerchantError::NoMerchant(_))
        ));
        assert!(
            app.core()
                .merchant_pricing("acme")
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'merchant_pricing_set'",
                &[]
            )
            .await,
            0
        );
        price(&app, "1.5", 10).await.unwrap();
        let audited = app
            .sql_strings(
                "SELECT after_state FROM audit_log WHERE action = 'merchant_pricing_set'",
                &[],
            )
            .await;
        let after: Value = serde_json::from_str(&audited[0]).unwrap();
        assert_eq!(
            after,
            json!({"percent": "1.5", "fixed_fee": 10, "refund_fee": 0})
        );
    }
);

on_both_backends!(
    every_batch_is_dated_by_the_accounting_calendar,
    |s| {
        s.accounting.accounting_timezone = "Asia/Shanghai".into();
        s.accounting.accounting_cutoff = "23:00".into();
    },
    |app| {
        use converge_server::domain::accounting::AccountingCalendar;
        price(&app, "1", 0).await.unwrap();
        let p = sale(&app, "o-1", 5000).await;
        let dated = app
            .sql_strings(
                "SELECT kind || ' ' || CAST(created_at AS TEXT) || ' ' || accounting_date \
                 FROM ledger_batches WHERE payment_id = $1 ORDER BY id",
                &[id(&p)],
            )
            .await;
        let calendar = AccountingCalendar::new("Asia/Shanghai", "23:00").unwrap();
        let kinds: Vec<&str> = dated.iter().map(|d| d.split(' ').next().unwrap()).collect();
        assert_eq!(kinds, ["charge", "fee"]);
        for line in &dated {
            let [_, created_at, date] = line.split(' ').collect::<Vec<_>>()[..] else {
                panic!("{line}");
            };
            assert_eq!(
                date,
                calendar.date_of(created_at.parse().unwrap()),
                "{line}"
            );
        }
    }
);

on_both_backends!(
    an_accounting_day_totals_its_captures_fees_and_refunds_per_currency,
    |app| {
        price(&app, "1", 0).await.unwrap();
        sale(&app, "o-1", 5000).await;
        let second = sale(&app, "o-2", 1000).await;
        let refund = app
            .post(
                &format!("/v1/payments/{}/refunds", id(&second)),
                Some("r-2"),
                &json!({"amount": 1000}),
            )
            .await;
        assert_eq!(refund.status, 201, "{:?}", refund.json());
        app.wait_for_status(id(&second), "REFUNDED", Duration::from_secs(20))
            .await;
        // The test may cross midnight: add up every day its batches are dated.
        let dates = app
            .sql_strings(
                "SELECT DISTINCT accounting_date FROM ledger_batches ORDER BY accounting_date",
                &[],
            )
            .await;
        let mut by_kind = std::collections::BTreeMap::<String, (i64, i64, i64)>::new();
        let (mut net, mut fees) = (0, 0);
        for date in &dates {
            let day = app.core().ledger_day(date).await.unwrap();
            assert_eq!(&day.date, date);
            for l in day.lines {
                assert_eq!(l.currency, "CNY");
                let e = by_kind.entry(l.kind).or_default();
                (e.0, e.1, e.2) = (
                    e.0 + l.batches,
                    e.1 + l.payable_credits,
                    e.2 + l.payable_debits,
                );
            }
            for t in day.totals {
                (net, fees) = (net + t.net_to_merchants, fees + t.fee_revenue);
            }
        }
        assert_eq!(by_kind["charge"], (2, 6000, 0));
        assert_eq!(by_kind["fee"], (2, 0, 60));
        assert_eq!(by_kind["refund"], (1, 0, 1000));
        assert_eq!((net, fees), (6000 - 60 - 1000, 60));
        let empty = app.core().ledger_day("2001-01-01").await.unwrap();
        assert!(empty.lines.is_empty() && empty.totals.is_empty());
        for bad in ["2026-02-30", "2026-1-05", "yesterday", ""] {
            assert!(
                matches!(
                    app.core().ledger_day(bad).await,
                    Err(converge_server::service::accounting::LedgerDayError::InvalidDate)
                ),
                "{bad:?}"
            );
        }
    }
);

on_both_backends!(
    a_merchant_refund_pays_the_refund_fee_linked_to_the_refund,
    |app| {
        app.core()
            .set_merchant_pricing(0, "acme", "0", (0, 40), &setup_actor())
            .await
            .unwrap();
        let p = sale(&app, "o-1", 1000).await;
        assert_eq!(
            (p["fee"].clone(), p["net"].clone()),
            (json!(0), json!(1000))
        );
        let refund = |key: &'static str, amount: i64| {
            let path = format!("/v1/payments/{}/refunds", id(&p));
            let app = &app;
            async move { app.post(&path, Some(key), &json!({"amount": amount})).await }
        };
        let first = refund("r-1", 300).await;
        assert_eq!(first.status, 201, "{:?}", first.json());
        // A refund smaller than the fee pays at most itself.
        assert_eq!(refund("r-2", 25).await.status, 201);
        let charged = eventually(Duration::from_secs(20), "both refunds' fees", || async {
            let p = app.get(&format!("/v1/payments/{}", id(&p))).await.json();
            (p["fee"] == 65).then_some(p)
        })
        .await;
        assert_eq!(charged["net"], 935);
        let linked = app
            .sql_i64(
                "SELECT COUNT(*) FROM ledger_batches b JOIN refunds r ON r.id = b.refund_id \
                 WHERE b.payment_id = $1 AND b.kind = 'fee'",
                &[id(&p)],
            )
            .await;
        assert_eq!(linked, 2, "each refund's fee names its refund");
        assert_eq!(credited(&app, &p, ledger::FEE_REVENUE).await, 65);
        let payable = ledger::merchant_account(app.merchant_id);
        assert_eq!(credited(&app, &p, &payable).await, 1000 - 325 - 65);
    }
);
