//! Bulk retry of a filtered selection: the preview lists exactly what would be retried, the
//! server re-checks each confirmed item, and the request is rate-limited per user (issue "Ops
//! console II"; DESIGN.md "Ops console", retry).

use serde_json::{Value, json};

use crate::support::{TestApp, add_ops_user, ops_session};

/// Adds `name` with `roles` and signs in.
async fn session(app: &TestApp, name: &str, roles: &str) -> reqwest::Client {
    add_ops_user(app, name, roles).await;
    ops_session(app, name).await
}

async fn preview(c: &reqwest::Client, app: &TestApp, query: &str) -> (u16, Value) {
    let r = c
        .get(format!(
            "{}/ops/v1/actions/bulk-retry/preview?{query}",
            app.base
        ))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn confirm(c: &reqwest::Client, app: &TestApp, body: Value) -> (u16, Value) {
    let r = c
        .post(format!("{}/ops/v1/actions/bulk-retry", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// An UNKNOWN payment (digits 53: the channel times out and never commits).
async fn unknown(app: &TestApp, order: &str) -> String {
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{order}")),
            &json!({"amount": 1053, "currency": "CNY", "merchant_order_id": order}),
        )
        .await;
    a.json()["id"].as_str().unwrap().to_string()
}

fn ids(items: &Value) -> Vec<String> {
    let mut v: Vec<String> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["payment_id"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

on_both_backends!(
    a_bulk_retry_retries_only_what_is_still_as_previewed,
    |s| {
        s.stuck.stuck_unknown_ms = 0;
        s.jobs.query_delay_ms = 600_000;
    },
    |app| {
        let mut stuck = vec![
            unknown(&app, "o-1").await,
            unknown(&app, "o-2").await,
            unknown(&app, "o-3").await,
        ];
        stuck.sort();
        let settled = app
            .post(
                "/v1/payments",
                Some("k-ok"),
                &json!({"amount": 100, "currency": "CNY", "merchant_order_id": "o-ok"}),
            )
            .await
            .json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let op = session(&app, "op", "operator").await;

        let (s, v) = preview(&op, &app, "source=stuck&status=UNKNOWN").await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(
            ids(&v["items"]),
            stuck,
            "the preview lists exactly the stuck payments"
        );
        let version = |id: &str| {
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["payment_id"] == id)
                .unwrap()["version"]
                .as_i64()
                .unwrap()
        };
        let (s, other) = preview(&op, &app, "source=stuck&status=SUSPENSE").await;
        assert_eq!((s, other["items"].as_array().unwrap().len()), (200, 0));

        // One item confirmed at an older version, one that was never in the selection.
        let items = json!([
            {"payment_id": stuck[0], "version": version(&stuck[0])},
            {"payment_id": stuck[1], "version": version(&stuck[1])},
            {"payment_id": stuck[2], "version": version(&stuck[2]) - 1},
            {"payment_id": settled, "version": 3},
            {"payment_id": stuck[0], "version": version(&stuck[0])},
        ]);
        let (s, out) = confirm(
            &op,
            &app,
            json!({"selection": {"source": "stuck", "status": "UNKNOWN"}, "items": items, "reason": "channel back up"}),
        )
        .await;
        assert_eq!(s, 200, "{out}");
        let retried: Vec<&str> = out["retried"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[0].as_str().unwrap())
            .collect();
        assert_eq!(retried, vec![stuck[0].as_str(), stuck[1].as_str()], "{out}");
        let skipped = out["skipped"].as_array().unwrap();
        assert_eq!(skipped.len(), 2, "{out}");
        assert!(
            skipped[0][1]
                .as_str()
                .unwrap()
                .contains("changed since the preview")
        );
        assert!(
            skipped[1][1]
                .as_str()
                .unwrap()
                .contains("no longer in the selection")
        );

        // Each retry is an ordinary executed action, and its query job is due now.
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM actions WHERE kind = 'retry' AND status = 'executed'",
                &[]
            )
            .await,
            2
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'bulk_retry' AND actor = 'op'",
                &[]
            )
            .await,
            1
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM jobs WHERE payment_id = $1 AND kind = 'query' AND run_at > updated_at",
                &[&stuck[2]]
            )
            .await,
            1,
            "the skipped payment's query stays where the backoff put it"
        );
    }
);

on_both_backends!(
    bulk_retries_are_rate_limited_per_user,
    |s| {
        s.stuck.stuck_unknown_ms = 0;
    },
    |app| {
        let id = unknown(&app, "o-1").await;
        let op = session(&app, "op", "operator").await;
        let (_, v) = preview(&op, &app, "source=stuck").await;
        let body = json!({
            "selection": {"source": "stuck"},
            "items": [{"payment_id": id, "version": v["items"][0]["version"]}],
            "reason": "again",
        });
        for _ in 0..converge_server::ops::actions::BULK_RETRIES_PER_MINUTE {
            assert_eq!(confirm(&op, &app, body.clone()).await.0, 200);
        }
        let r = op
            .post(format!("{}/ops/v1/actions/bulk-retry", app.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 429);
        assert!(r.headers().contains_key("retry-after"));
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "rate_limited", "{v}");
        // Another operator has an allowance of their own.
        let op2 = session(&app, "op2", "operator").await;
        assert_eq!(confirm(&op2, &app, body).await.0, 200);
    }
);

on_both_backends!(
    bad_bulk_requests_get_stable_codes_and_change_nothing,
    |app| {
        let op = session(&app, "op", "operator").await;
        let viewer = session(&app, "view", "viewer").await;
        let approver = session(&app, "ap", "approver").await;
        for c in [&viewer, &approver] {
            assert_eq!(preview(c, &app, "source=stuck").await.0, 403);
            let (s, _) = confirm(
                c,
                &app,
                json!({"selection": {"source": "stuck"}, "items": [{"payment_id": "pay_x", "version": 1}], "reason": "x"}),
            )
            .await;
            assert_eq!(s, 403);
        }
        for (query, code) in [
            ("source=bogus", "invalid_selection"),
            ("", "invalid_selection"),
            ("source=stuck&status=SUCCESS", "invalid_selection"),
            ("source=stuck&status=NOPE", "invalid_selection"),
        ] {
            let (s, v) = preview(&op, &app, query).await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (400, Some(code)),
                "{query}: {v}"
            );
        }
        let item = json!({"payment_id": "pay_x", "version": 1});
        let many: Vec<Value> = (0..101)
            .map(|i| json!({"payment_id": format!("pay_{i}"), "version": 1}))
            .collect();
        for (body, code) in [
            (
                json!({"selection": {"source": "stuck"}, "items": [item], "reason": "  "}),
                "invalid_reason",
            ),
            (
                json!({"selection": {"source": "stuck"}, "items": [item], "reason": "x".repeat(2001)}),
                "invalid_reason",
            ),
            (
                json!({"selection": {"source": "stuck"}, "items": [], "reason": "go"}),
                "no_items",
            ),
            (
                json!({"selection": {"source": "stuck"}, "items": many, "reason": "go"}),
                "too_many_items",
            ),
            (
                json!({"selection": {"source": "elsewhere"}, "items": [item], "reason": "go"}),
                "invalid_selection",
            ),
            (
                // An empty id list is not "no list", whatever the source (schemathesis).
                json!({"selection": {"source": "stuck", "ids": []}, "items": [item], "reason": "go"}),
                "invalid_selection",
            ),
            (
                json!({"selection": {"source": "stuck"}, "reason": "go"}),
                "invalid_request",
            ),
        ] {
            let (s, v) = confirm(&op, &app, body.clone()).await;
            assert_eq!(s, 400, "{body}: {v}");
            assert_eq!(v["error"]["code"].as_str(), Some(code), "{body}: {v}");
        }
        // None of that spent the operator's allowance or recorded an action.
        assert_eq!(app.sql_i64("SELECT COUNT(*) FROM actions", &[]).await, 0);
        let (s, v) = confirm(
            &op,
            &app,
            json!({"selection": {"source": "stuck"}, "items": [item], "reason": "go"}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["skipped"][0][1], "no longer in the selection");
    }
);

on_both_backends!(
    the_error_pool_selection_holds_the_payments_of_open_items,
    |s| {
        s.stuck.stuck_suspense_ms = 0;
    },
    |app| {
        let id = app.suspended_payment("o-f", 100).await;
        let op = session(&app, "op", "operator").await;
        let v = crate::support::eventually(
            std::time::Duration::from_secs(10),
            "an open error-pool item for the payment",
            || async {
                let (_, v) = preview(&op, &app, "source=error_pool").await;
                (ids(&v["items"]) == vec![id.clone()]).then_some(v)
            },
        )
        .await;
        assert_eq!(v["items"][0]["status"], "SUSPENSE");
        let (_, none) = preview(&op, &app, "source=error_pool&kind=no_such_kind").await;
        assert_eq!(none["items"].as_array().unwrap().len(), 0);
    }
);
