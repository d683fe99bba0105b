//! "Find anything, by any id" and the Idempotency-Key page (issue 17), on both backends: the
//! store's prefix search over every id kind (prefix, any case, several matches, `%`/`_` taken
//! literally, bounded), the outcomes recorded per key, the keys of a payment, and the
//! `/ops/v1/search` and `/ops/v1/idempotency-keys/...` routes with their refusals.

use std::time::Duration;

use converge_server::service::payments::{InsertOutcome, PaymentInput};
use converge_server::store::ErrorItemStatus;
use serde_json::json;

use crate::support::*;

/// Creates a payment through the merchant API with Idempotency-Key `key`; returns its JSON.
/// (kind, value) of every match of `q`.
async fn found(app: &TestApp, q: &str) -> Vec<(String, String)> {
    app.store
        .find_ids(q, 21)
        .await
        .expect("search")
        .into_iter()
        .map(|m| (m.kind, m.value))
        .collect()
}

async fn viewer(app: &TestApp) -> reqwest::Client {
    add_ops_user(app, "vera", "viewer").await;
    ops_session(app, "vera").await
}

async fn get_json(c: &reqwest::Client, app: &TestApp, path: &str) -> Answer {
    app.send(c.get(format!("{}{path}", app.base))).await
}

on_both_backends!(every_id_kind_is_found_by_a_prefix_in_any_case, |app| {
    let p = app.pay("Order-Key-Alpha", "ORD_A%1", 1000).await;
    let id = p["id"].as_str().unwrap().to_string();
    app.wait_for_status(&id, "SUCCESS", Duration::from_secs(10))
        .await;
    let payment = app.store.payment(&id).await.unwrap().unwrap();

    // Payment id: a prefix, shouted.
    let q = id[..10].to_uppercase();
    assert_eq!(found(&app, &q).await, vec![("payment".into(), id.clone())]);
    // Merchant order id.
    assert_eq!(
        found(&app, "ord_a").await,
        vec![("merchant_order".into(), "ORD_A%1".into())]
    );
    // Idempotency-Key, with the payment it made.
    let keys = app.store.find_ids("order-KEY-a", 21).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(
        (keys[0].kind.as_str(), keys[0].value.as_str()),
        ("idempotency_key", "Order-Key-Alpha")
    );
    assert_eq!(keys[0].payment_id.as_deref(), Some(id.as_str()));
    assert_eq!(keys[0].merchant_id, Some(app.merchant_id));
    // Channel key.
    let ck = payment.channel_key.clone();
    assert_eq!(
        found(&app, &ck[..8].to_uppercase()).await,
        vec![("channel_key".into(), ck.clone())]
    );
    // Refund id, pointing at its payment; its key points at the payment too.
    let r = app
        .post(
            &format!("/v1/payments/{id}/refunds"),
            Some("refund-key-1"),
            &json!({"amount": 100, "reason": "customer asked"}),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let rid = r.json()["id"].as_str().unwrap().to_string();
    let refunds = app.store.find_ids(&rid[..9], 21).await.unwrap();
    assert_eq!(
        (refunds[0].kind.as_str(), refunds[0].value.as_str()),
        ("refund", rid.as_str())
    );
    assert_eq!(refunds[0].payment_id.as_deref(), Some(id.as_str()));
    let rk = app.store.find_ids("REFUND-key", 21).await.unwrap();
    assert_eq!(rk[0].payment_id.as_deref(), Some(id.as_str()), "{rk:?}");
    // Action id.
    add_ops_user(&app, "olga", "operator").await;
    let op = ops_session(&app, "olga").await;
    let a = app
        .send(
            op.post(format!("{}/ops/v1/actions", app.base))
                .json(&json!({"kind": "reverse", "payment_id": id, "reason": "customer disputed"})),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    let act = a.json()["action"]["id"].as_str().unwrap().to_string();
    let acts = app
        .store
        .find_ids(&act[..8].to_uppercase(), 21)
        .await
        .unwrap();
    assert_eq!(
        (
            acts[0].kind.as_str(),
            acts[0].value.as_str(),
            acts[0].status.as_str()
        ),
        ("action", act.as_str(), "pending")
    );
    assert_eq!(acts[0].payment_id.as_deref(), Some(id.as_str()));
    // Error-pool item number, whole, with or without '#'.
    let suspended = app.suspended_payment("o-suspense", 2000).await;
    let item = app
        .store
        .error_items(Some(ErrorItemStatus::Open), None, 10)
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.payment_id.as_deref() == Some(suspended.as_str()))
        .expect("an open item");
    for q in [item.id.to_string(), format!("#{}", item.id)] {
        let m = app.store.find_ids(&q, 21).await.unwrap();
        let e: Vec<_> = m.iter().filter(|m| m.kind == "error_item").collect();
        assert_eq!(e.len(), 1, "{q}: {m:?}");
        assert_eq!(e[0].value, item.id.to_string());
        assert_eq!(e[0].payment_id.as_deref(), Some(suspended.as_str()));
    }
    // Nothing, for a prefix of nothing, or nothing at all.
    assert!(found(&app, "zz-no-such-id").await.is_empty());
    assert!(found(&app, "").await.is_empty());
});

on_both_backends!(
    percent_and_underscore_in_a_query_are_plain_characters,
    |app| {
        for (key, order) in [
            ("k-1", "ORD_A%1"),
            ("k-2", "ORDxA1"),
            ("k-3", "ord_ab"),
            ("k-4", "ord\\x"),
        ] {
            app.pay(key, order, 1000).await;
        }
        // `_` and `%` are not wildcards: ORDxA1 does not start with "ord_".
        assert_eq!(
            found(&app, "ord_a%").await,
            vec![("merchant_order".into(), "ORD_A%1".into())]
        );
        let mut both = found(&app, "ORD_A").await;
        both.sort();
        assert_eq!(
            both,
            vec![
                ("merchant_order".into(), "ORD_A%1".into()),
                ("merchant_order".into(), "ord_ab".into())
            ]
        );
        assert_eq!(
            found(&app, "ord\\").await,
            vec![("merchant_order".into(), "ord\\x".into())]
        );
        assert!(found(&app, "%").await.is_empty());
        assert!(found(&app, "_").await.is_empty());
        // Several kinds at once: "k-" starts all four keys.
        let keys = found(&app, "K-").await;
        assert_eq!(keys.len(), 4, "{keys:?}");
        assert!(keys.iter().all(|(k, _)| k == "idempotency_key"));
    }
);

on_both_backends!(a_search_is_bounded_and_says_when_there_is_more, |app| {
    let core = &app.running.state.core;
    for i in 0..25 {
        let input = PaymentInput {
            amount: 1000,
            currency: "CNY".into(),
            merchant_order_id: format!("bulk-{i:02}"),
            description: String::new(),
            capture_mode: Default::default(),
        };
        let InsertOutcome::Created(_) = core
            .insert_payment(app.merchant_id, &input, None)
            .await
            .unwrap()
        else {
            panic!("exists")
        };
    }
    let m = app.store.find_ids("BULK-", 1000).await.unwrap();
    assert_eq!(m.len(), 21, "the store never returns more than 21");
    let values: Vec<_> = m.iter().map(|m| m.value.clone()).collect();
    let mut sorted = values.clone();
    sorted.sort();
    assert_eq!(values, sorted, "by id within a kind");
    assert_eq!(values[0], "bulk-00");
    let c = viewer(&app).await;
    let a = get_json(&c, &app, "/ops/v1/search?q=bulk-").await;
    assert_eq!(a.status, 200);
    let v = a.json();
    assert_eq!(v["hits"].as_array().unwrap().len(), 20, "{v}");
    assert_eq!(v["truncated"], true);
    let a = get_json(&c, &app, "/ops/v1/search?q=bulk-2").await.json();
    assert_eq!(a["hits"].as_array().unwrap().len(), 5, "{a}");
    assert_eq!(a["truncated"], false);
    assert_eq!(a["hits"][0]["kind"], "merchant_order");
    assert_eq!(
        a["hits"][0]["link"],
        format!("/payments/{}", a["hits"][0]["payment_id"].as_str().unwrap())
    );
    assert!(
        a["hits"][0]["label"]
            .as_str()
            .unwrap()
            .contains("10.00 CNY"),
        "amounts in major units: {a}"
    );
});

on_both_backends!(
    a_key_page_shows_the_stored_response_and_what_retries_got,
    |app| {
        let key = "Pay/Key?1#x%";
        let body = json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-key"});
        let first = app.post("/v1/payments", Some(key), &body).await;
        assert_eq!(first.status, 201);
        let id = first.json()["id"].as_str().unwrap().to_string();
        // A replay, and the key reused with another body.
        let again = app.post("/v1/payments", Some(key), &body).await;
        assert_eq!(again.header("idempotent-replayed"), "true");
        let other = json!({"amount": 1001, "currency": "CNY", "merchant_order_id": "o-key"});
        app.post("/v1/payments", Some(key), &other)
            .await
            .assert_error(422, "idempotency_key_reused");
        app.post("/v1/payments", Some(key), &body).await;

        let c = viewer(&app).await;
        let path = format!(
            "/ops/v1/idempotency-keys/{}/{}",
            app.merchant_id,
            converge_server::service::lookup::path_segment(key)
        );
        let a = get_json(&c, &app, &path).await;
        assert_eq!(a.status, 200, "{:?}", String::from_utf8_lossy(&a.body));
        let k = a.json();
        assert_eq!(k["idem_key"], key);
        assert_eq!(k["merchant"], "acme");
        assert_eq!(k["route"], "POST /v1/payments");
        assert_eq!(k["scope"], "POST /v1/payments");
        assert_eq!(k["state"], "done");
        assert_eq!(k["payment_id"], id.as_str());
        assert_eq!(k["resource_id"], id.as_str());
        assert_eq!(k["fingerprint"].as_str().unwrap().len(), 64);
        assert!(k["lease_expires_at"].is_null(), "a done key holds no lease");
        // The stored response is what a retry gets, byte for byte.
        assert_eq!(k["response"]["status"], 201);
        assert_eq!(
            k["response"]["body"].as_str().unwrap().as_bytes(),
            again.body.as_slice()
        );
        let headers = k["response"]["headers"].as_array().unwrap();
        for h in headers {
            let name = h["name"].as_str().unwrap();
            assert_eq!(again.header(name), h["value"].as_str().unwrap(), "{name}");
        }
        assert!(headers.iter().any(|h| h["name"] == "idempotent-replayed"));
        assert!(headers.iter().any(|h| h["name"] == "content-type"));
        let outcomes: Vec<(String, i64)> = k["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["outcome"].as_str().unwrap().into(),
                    o["count"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(outcomes, vec![("replay".into(), 2), ("reused".into(), 1)]);

        // The payment page lists the key; the search lands on it.
        let d = get_json(&c, &app, &format!("/ops/v1/payments/{id}"))
            .await
            .json();
        assert_eq!(d["idempotency_keys"][0]["idem_key"], key, "{d}");
        let s = get_json(&c, &app, "/ops/v1/search?q=pay%2Fkey")
            .await
            .json();
        assert_eq!(s["hits"][0]["kind"], "idempotency_key", "{s}");
        assert_eq!(
            s["hits"][0]["link"],
            format!("/keys/{}/Pay%2FKey%3F1%23x%25", app.merchant_id)
        );

        // The purge takes the key's outcomes with it.
        assert_eq!(app.store.purge_keys(i64::MAX).await.unwrap(), 1);
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM idempotency_key_outcomes", &[])
                .await,
            0
        );
        get_json(&c, &app, &path)
            .await
            .assert_error(404, "not_found");
    }
);

on_both_backends!(search_and_key_routes_refuse_bad_input_with_a_4xx, |app| {
    let c = viewer(&app).await;
    for (q, code) in [
        ("", "invalid_query"),
        ("%20%20", "invalid_query"),
        ("a%01b", "invalid_query"),
        ("a%00", "invalid_query"),
    ] {
        get_json(&c, &app, &format!("/ops/v1/search?q={q}"))
            .await
            .assert_error(400, code);
    }
    let long = "a".repeat(256);
    get_json(&c, &app, &format!("/ops/v1/search?q={long}"))
        .await
        .assert_error(400, "query_too_long");
    let a = get_json(&c, &app, &format!("/ops/v1/search?q={}", &long[..255])).await;
    assert_eq!(a.status, 200);
    assert_eq!(get_json(&c, &app, "/ops/v1/search").await.status, 400);
    // Signed out.
    let anon = app
        .send(app.client.get(format!("{}/ops/v1/search?q=pay_", app.base)))
        .await;
    anon.assert_error(401, "not_authenticated");
    // Keys no request could have used; a merchant id that is not a number; no such key.
    for key in ["%20", "caf%C3%A9", &"k".repeat(256)] {
        get_json(&c, &app, &format!("/ops/v1/idempotency-keys/1/{key}"))
            .await
            .assert_error(400, "idempotency_key_invalid");
    }
    assert_eq!(
        get_json(&c, &app, "/ops/v1/idempotency-keys/x/k")
            .await
            .status,
        400
    );
    get_json(&c, &app, "/ops/v1/idempotency-keys/1/no-such-key")
        .await
        .assert_error(404, "not_found");
});

/// The plan of `sql` (with the prefix bounds of "ab" bound), one line per row; on PostgreSQL
/// with sequential scans switched off, so a scan in the plan means no index could serve.
async fn plan(app: &TestApp, sql: &str) -> Vec<String> {
    use sqlx::{Connection, Row};
    let (lo, hi) = ("ab".to_string(), "ab\u{10FFFF}".to_string());
    match app.db {
        Db::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}", app.db_url))
                .await
                .expect("connect");
            sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
                .bind(lo)
                .bind(hi)
                .bind(21i64)
                .fetch_all(&mut c)
                .await
                .expect("explain")
                .iter()
                .map(|r| r.get::<String, _>("detail"))
                .collect()
        }
        Db::Postgres => {
            let mut c = sqlx::PgConnection::connect(&app.db_url)
                .await
                .expect("connect");
            sqlx::query("SET enable_seqscan = off")
                .execute(&mut c)
                .await
                .expect("set");
            sqlx::query(&format!("EXPLAIN {sql}"))
                .bind(lo)
                .bind(hi)
                .bind(21i64)
                .fetch_all(&mut c)
                .await
                .expect("explain")
                .iter()
                .map(|r| r.get::<String, _>(0))
                .collect()
        }
    }
}

on_both_backends!(
    each_prefix_kind_is_a_range_over_an_index_never_a_table_scan,
    |app| {
        use converge_server::store::lookup::find_sql;
        use converge_server::store::{Backend, IdKind};
        let backend = match app.db {
            Db::Sqlite => Backend::Sqlite,
            Db::Postgres => Backend::Postgres,
        };
        let mut planned = 0;
        for kind in IdKind::ALL {
            let Some(sql) = find_sql(backend, kind) else {
                continue;
            };
            let lines = plan(&app, &sql).await;
            let text = lines.join("\n");
            match app.db {
                Db::Sqlite => assert!(
                    lines.iter().all(|l| !l.starts_with("SCAN ")),
                    "{kind:?} scans a table:\n{text}"
                ),
                Db::Postgres => assert!(
                    !text.contains("Seq Scan"),
                    "{kind:?} scans a table:\n{text}"
                ),
            }
            assert!(
                text.to_lowercase().contains("index"),
                "{kind:?} uses no index:\n{text}"
            );
            planned += 1;
        }
        assert_eq!(planned, 6);
    }
);

on_both_backends!(
    a_key_whose_lease_lapsed_is_shown_as_lapsed_not_running,
    |app| {
        use converge_server::domain::clock::{Clock, SystemClock};
        use converge_server::store::keys::{ClaimResult, KeyClaim};
        // As a request that died holding its key leaves it: running, its lease `lease_ms`
        // from now (negative: already lapsed).
        let claim = |key: &str, lease_ms: i64| {
            let now = SystemClock.now_ms();
            KeyClaim {
                merchant_id: app.merchant_id,
                scope: "POST /v1/payments".into(),
                idem_key: key.into(),
                route: "POST /v1/payments".into(),
                fingerprint: "0".repeat(64),
                lease_token: converge_server::service::ids::new_token(),
                lease_expires_at: now + lease_ms,
                now,
                expires_at: now + 86_400_000,
            }
        };
        let c = viewer(&app).await;
        let path = |key: &str| {
            format!(
                "/ops/v1/idempotency-keys/{}/{}",
                app.merchant_id,
                converge_server::service::lookup::path_segment(key)
            )
        };
        for (key, lease_ms, lapsed) in [("lapsed-key", -1_000, true), ("held-key", 600_000, false)]
        {
            let c_ = claim(key, lease_ms);
            assert_eq!(
                app.store.claim_key(&c_).await.unwrap(),
                ClaimResult::Claimed { resource_id: None }
            );
            let k = get_json(&c, &app, &path(key)).await.json();
            assert_eq!(k["state"], "running", "{k}");
            assert_eq!(k["lease_lapsed"], lapsed, "{key}: {k}");
            assert_eq!(k["lease_expires_at"], c_.lease_expires_at, "{k}");
        }
    }
);

/// A payment of `amount` minor units of `currency` with order id `order`, made directly
/// (no channel answer needed); returns its id.
async fn payment_of(app: &TestApp, order: &str, amount: i64, currency: &str) -> String {
    let input = PaymentInput {
        amount,
        currency: currency.into(),
        merchant_order_id: order.into(),
        description: String::new(),
        capture_mode: Default::default(),
    };
    match app
        .running
        .state
        .core
        .insert_payment(app.merchant_id, &input, None)
        .await
        .unwrap()
    {
        InsertOutcome::Created(p) => p.id,
        _ => panic!("{order} exists"),
    }
}

on_both_backends!(
    an_order_ids_middle_finds_it_with_percent_and_underscore_taken_literally,
    |app| {
        for (order, amount) in [
            ("INV-2026-Acme-0042", 1001),
            ("xx-a%b-1", 1002),
            ("xx-aXb-2", 1003),
            ("xx-a_b-3", 1004),
            ("xx-aYb-4", 1005),
            ("xx-a\\b-5", 1006),
        ] {
            payment_of(&app, order, amount, "CNY").await;
        }
        // The middle, in any case.
        assert_eq!(
            found(&app, "2026-acme").await,
            vec![("merchant_order".into(), "INV-2026-Acme-0042".into())]
        );
        // `%`, `_` and `\` match only themselves.
        assert_eq!(
            found(&app, "A%B").await,
            vec![("merchant_order".into(), "xx-a%b-1".into())]
        );
        assert_eq!(
            found(&app, "a_b").await,
            vec![("merchant_order".into(), "xx-a_b-3".into())]
        );
        assert_eq!(
            found(&app, "a\\b").await,
            vec![("merchant_order".into(), "xx-a\\b-5".into())]
        );
        // A prefix match is listed once, not again as a middle one.
        assert_eq!(
            found(&app, "inv-2026").await,
            vec![("merchant_order".into(), "INV-2026-Acme-0042".into())]
        );
        // Two characters are too few to look inside ids: they are inside nearly all.
        let inside = found(&app, "-a").await;
        assert!(inside.is_empty(), "{inside:?}");
        let inside = found(&app, "b-").await;
        assert!(inside.is_empty(), "{inside:?}");
        // Three are enough: every `xx-a?b-n` holds "-a".
        let held: Vec<String> = found(&app, "-a?b").await.into_iter().map(|m| m.1).collect();
        assert!(held.is_empty(), "`?` is no wildcard either: {held:?}");
        assert_eq!(found(&app, "x-a").await.len(), 5);
    }
);

on_both_backends!(
    an_amount_finds_payments_in_their_currencys_minor_units_bounded,
    |app| {
        let fen = payment_of(&app, "amt-cny-1250", 1250, "CNY").await;
        let yen = payment_of(&app, "amt-jpy-1250", 1250, "JPY").await;
        let fils = payment_of(&app, "amt-kwd-12500", 12_500, "KWD").await;
        let yuan = payment_of(&app, "amt-cny-125000", 125_000, "CNY").await;
        payment_of(&app, "amt-cny-999", 999, "CNY").await;
        let amounts = |q: &'static str| {
            let app = &app;
            async move {
                let mut ids: Vec<String> = app
                    .store
                    .find_ids(q, 21)
                    .await
                    .unwrap()
                    .into_iter()
                    .filter(|m| m.kind == "amount")
                    .map(|m| m.value)
                    .collect();
                ids.sort();
                ids
            }
        };
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        // 12.50: 1250 fen and 12.500 dinars (12500 fils); never 1250 yen.
        assert_eq!(amounts("12.50").await, sorted(vec![fen.clone(), fils]));
        // 1250: 1250 minor units of any currency, or 1250.00 yuan.
        assert_eq!(amounts("1250").await, sorted(vec![fen.clone(), yen, yuan]));
        assert!(amounts("12.5001").await.is_empty());
        assert!(amounts("12,50").await.is_empty());
        // Through the search route, labelled with the amount as people read it.
        let c = viewer(&app).await;
        let v = get_json(&c, &app, "/ops/v1/search?q=12.50").await.json();
        let hit = v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["id"] == fen.as_str())
            .unwrap_or_else(|| panic!("{v}"))
            .clone();
        assert_eq!(hit["kind"], "amount");
        assert!(
            hit["label"].as_str().unwrap().contains("12.50 CNY"),
            "{hit}"
        );
        assert_eq!(hit["link"], format!("/payments/{fen}"));
        // Bounded: one more than shown, and the route says there are more.
        for i in 0..22 {
            payment_of(&app, &format!("many-{i:02}"), 4242, "CNY").await;
        }
        assert_eq!(app.store.find_ids("42.42", 21).await.unwrap().len(), 21);
        let v = get_json(&c, &app, "/ops/v1/search?q=42.42").await.json();
        assert_eq!(v["hits"].as_array().unwrap().len(), 20, "{v}");
        assert_eq!(v["truncated"], true);
    }
);
