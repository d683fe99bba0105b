//! Work queues people act on (issue 17): the error pool's kinds with counts, its pages
//! grouped by kind, the bulk resolve (preview, then a confirm the server re-checks item by
//! item, each resolution audited), and the audit viewer's list filtered by actor, action,
//! payment, object and time. Store methods on both backends, then the `/ops/v1` routes.

use std::sync::Arc;

use converge_server::domain::audit::AuditEntry;
use converge_server::store::{
    AuditListFilter, ErrorFilter, ErrorItemStatus, NewAction, NewErrorItem, NewPayment, Store,
};
use serde_json::{Value, json};

use crate::support::{TestApp, add_ops_user, ops_session};

const NOW: i64 = 1_800_000_000_000;

fn item(kind: &str, key: &str, payment: Option<&str>, now: i64) -> NewErrorItem {
    NewErrorItem {
        kind: kind.into(),
        dedupe_key: key.into(),
        payment_id: payment.map(Into::into),
        summary: format!("{kind} {key}"),
        evidence: json!({"key": key}).to_string(),
        reopen: true,
        now,
    }
}

fn entry(at: i64, actor: &str, action: &str, target: &str) -> AuditEntry {
    AuditEntry {
        at,
        actor: actor.into(),
        roles: "operator".into(),
        action: action.into(),
        target: target.into(),
        reason: "r".into(),
        before: String::new(),
        after: "{}".into(),
        meta: "{}".into(),
    }
}

async fn payment(store: &Arc<dyn Store>, merchant_id: i64, order: &str) -> String {
    let p = NewPayment {
        id: format!("pay_{order}"),
        merchant_id,
        merchant_order_id: order.into(),
        amount: 100,
        currency: "CNY".into(),
        description: String::new(),
        params_hash: "h".into(),
        channel_key: format!("ck_{order}"),
        connector: "sandbox".into(),
        now: NOW,
        submit_due_at: NOW + 1_000,
        max_attempts: 5,
        recovery_key: None,
        capture_mode: Default::default(),
    };
    store.create_payment(&p).await.unwrap();
    p.id
}

store_conformance!(
    error_kinds_count_the_items_of_each_kind_per_status,
    |store| {
        for (i, kind) in [
            "suspense",
            "job_dead",
            "suspense",
            "suspense",
            "job_dead",
            "amount_mismatch",
        ]
        .iter()
        .enumerate()
        {
            store
                .report_error(&item(kind, &format!("k{i}"), None, NOW + i as i64))
                .await
                .unwrap();
        }
        let open = store
            .error_items(Some(ErrorItemStatus::Open), Some("amount_mismatch"), 10)
            .await
            .unwrap();
        assert!(
            store
                .resolve_error(open[0].id, "done", "op", NOW)
                .await
                .unwrap()
        );
        let counts = |v: Vec<converge_server::store::KindCount>| {
            v.into_iter().map(|k| (k.kind, k.count)).collect::<Vec<_>>()
        };
        assert_eq!(
            counts(
                store
                    .error_kinds(Some(ErrorItemStatus::Open))
                    .await
                    .unwrap()
            ),
            vec![("job_dead".to_string(), 2), ("suspense".to_string(), 3)],
            "open kinds by name; a kind with only resolved items is not listed"
        );
        assert_eq!(
            counts(
                store
                    .error_kinds(Some(ErrorItemStatus::Resolved))
                    .await
                    .unwrap()
            ),
            vec![("amount_mismatch".to_string(), 1)]
        );
        assert_eq!(store.error_kinds(None).await.unwrap().len(), 3);
    }
);

store_conformance!(
    error_pages_group_by_kind_newest_first_and_page_by_offset,
    |store| {
        let mut ids = Vec::new();
        for (i, kind) in ["b_kind", "a_kind", "b_kind", "a_kind", "b_kind"]
            .iter()
            .enumerate()
        {
            ids.push(
                store
                    .report_error(&item(kind, &format!("k{i}"), None, NOW + i as i64))
                    .await
                    .unwrap(),
            );
        }
        let page = |offset: i64, limit: i64| {
            let store = store.clone();
            async move {
                store
                    .error_items_page(&ErrorFilter {
                        status: Some(ErrorItemStatus::Open),
                        offset,
                        limit,
                        ..ErrorFilter::default()
                    })
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|i| i.id)
                    .collect::<Vec<_>>()
            }
        };
        // a_kind (newest first), then b_kind (newest first).
        let all = vec![ids[3], ids[1], ids[4], ids[2], ids[0]];
        assert_eq!(page(0, 10).await, all);
        assert_eq!(page(0, 2).await, all[..2].to_vec());
        assert_eq!(page(2, 2).await, all[2..4].to_vec());
        assert_eq!(page(4, 2).await, all[4..].to_vec());
        assert!(page(6, 2).await.is_empty());
        let one_kind = store
            .error_items_page(&ErrorFilter {
                kind: Some("b_kind".into()),
                limit: 10,
                ..ErrorFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(one_kind.len(), 3);
        let one = store
            .error_items_page(&ErrorFilter {
                id: Some(ids[2]),
                limit: 10,
                ..ErrorFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(one.iter().map(|i| i.id).collect::<Vec<_>>(), vec![ids[2]]);
    }
);

store_conformance!(
    an_audited_resolve_applies_only_to_the_open_item_as_it_was_seen,
    |store| {
        let id = store
            .report_error(&item("suspense", "s1", None, NOW))
            .await
            .unwrap();
        let audit = entry(NOW, "op", "error_resolved", &format!("error:{id}"));
        // Reported again since it was seen (2 occurrences, not 1): nothing written.
        store
            .report_error(&item("suspense", "s1", None, NOW + 5))
            .await
            .unwrap();
        assert!(
            !store
                .resolve_error_audited(id, 1, "fixed", "op", NOW, &audit)
                .await
                .unwrap()
        );
        assert_eq!(
            store.audit_head().await.unwrap().0,
            0,
            "no audit record without a change"
        );
        assert_eq!(
            store.error_item(id).await.unwrap().unwrap().status.as_str(),
            "open"
        );
        assert!(
            store
                .resolve_error_audited(id, 2, "fixed", "op", NOW, &audit)
                .await
                .unwrap()
        );
        let it = store.error_item(id).await.unwrap().unwrap();
        assert_eq!(
            (
                it.status.as_str(),
                it.resolution_note.as_deref(),
                it.resolved_by.as_deref()
            ),
            ("resolved", Some("fixed"), Some("op"))
        );
        let records = store
            .audit_for_target(&format!("error:{id}"))
            .await
            .unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].action, "error_resolved");
        // Already resolved: nothing more.
        assert!(
            !store
                .resolve_error_audited(id, 2, "again", "op", NOW, &audit)
                .await
                .unwrap()
        );
        assert_eq!(store.audit_head().await.unwrap().0, 1);
    }
);

store_conformance!(
    the_audit_list_filters_by_actor_action_payment_object_and_time,
    |store| {
        let m = store
            .create_merchant("shop", "hash-shop", NOW)
            .await
            .unwrap()
            .id;
        let p1 = payment(&store, m, "o1").await;
        let p2 = payment(&store, m, "o2").await;
        let action = NewAction {
            id: "act_1".into(),
            kind: "retry".into(),
            payment_id: p1.clone(),
            requested_by: "op".into(),
            reason: "r".into(),
            evidence: String::new(),
            target_status: None,
            capture_amount: None,
            capture_final: None,
            payment_version: 1,
            status: "approved".into(),
            now: NOW,
            expires_at: NOW + 1,
        };
        // seq 1: the action's request, about action:act_1 (a record of payment 1).
        store
            .create_action(
                &action,
                &entry(NOW, "op", "action_requested", "action:act_1"),
            )
            .await
            .unwrap();
        let e1 = store
            .report_error(&item("suspense", "s1", Some(&p1), NOW))
            .await
            .unwrap();
        for (at, actor, act, target) in [
            (NOW + 10, "op", "error_resolved", format!("error:{e1}")), // 2
            (NOW + 20, "ap", "action_approved", format!("payment:{p1}")), // 3
            (NOW + 30, "op", "action_requested", format!("payment:{p2}")), // 4
            (NOW + 40, "admin", "user_added", "user:bob".to_string()), // 5
        ] {
            store
                .append_audit(&entry(at, actor, act, &target))
                .await
                .unwrap();
        }
        let list = |f: AuditListFilter| {
            let store = store.clone();
            async move {
                store
                    .audit_list(&AuditListFilter { limit: 50, ..f })
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|r| (r.record.seq, r.payment_id))
                    .collect::<Vec<_>>()
            }
        };
        let seqs = |v: Vec<(i64, Option<String>)>| v.into_iter().map(|r| r.0).collect::<Vec<_>>();
        assert_eq!(
            seqs(list(AuditListFilter::default()).await),
            vec![5, 4, 3, 2, 1],
            "newest first"
        );
        let of_p1 = list(AuditListFilter {
            payment_id: Some(p1.clone()),
            ..AuditListFilter::default()
        })
        .await;
        assert_eq!(
            of_p1,
            vec![
                (3, Some(p1.clone())),
                (2, Some(p1.clone())),
                (1, Some(p1.clone()))
            ],
            "the payment's own records, its action's and its error item's, each naming it"
        );
        assert_eq!(
            seqs(
                list(AuditListFilter {
                    actor: Some("op".into()),
                    ..AuditListFilter::default()
                })
                .await
            ),
            vec![4, 2, 1]
        );
        assert_eq!(
            seqs(
                list(AuditListFilter {
                    actor: Some("op".into()),
                    action: Some("action_requested".into()),
                    ..AuditListFilter::default()
                })
                .await
            ),
            vec![4, 1]
        );
        assert_eq!(
            seqs(
                list(AuditListFilter {
                    target: Some("user:bob".into()),
                    ..AuditListFilter::default()
                })
                .await
            ),
            vec![5]
        );
        assert_eq!(
            seqs(
                list(AuditListFilter {
                    from: Some(NOW + 10),
                    to: Some(NOW + 40),
                    ..AuditListFilter::default()
                })
                .await
            ),
            vec![4, 3, 2],
            "from inclusive, to exclusive"
        );
        assert_eq!(
            list(AuditListFilter {
                payment_id: Some("pay_none".into()),
                ..AuditListFilter::default()
            })
            .await,
            vec![]
        );
        // Pages: older below a seq, newer above one (still newest first).
        let page = |before: Option<i64>, after: Option<i64>| {
            let store = store.clone();
            async move {
                store
                    .audit_list(&AuditListFilter {
                        before_seq: before,
                        after_seq: after,
                        limit: 2,
                        ..AuditListFilter::default()
                    })
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|r| r.record.seq)
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(page(None, None).await, vec![5, 4]);
        assert_eq!(page(Some(4), None).await, vec![3, 2]);
        assert_eq!(page(Some(2), None).await, vec![1]);
        assert_eq!(
            page(None, Some(1)).await,
            vec![3, 2],
            "the newer page next to record 1"
        );
        assert_eq!(page(None, Some(3)).await, vec![5, 4]);
    }
);

// --- the /ops/v1 routes ----------------------------------------------------------------------

async fn session(app: &TestApp, name: &str, roles: &str) -> reqwest::Client {
    add_ops_user(app, name, roles).await;
    ops_session(app, name).await
}

async fn get(c: &reqwest::Client, app: &TestApp, path: &str) -> (u16, Value) {
    let r = c
        .get(format!("{}/ops/v1{path}", app.base))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn post(c: &reqwest::Client, app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let r = c
        .post(format!("{}/ops/v1{path}", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn report(app: &TestApp, kind: &str, key: &str, payment: Option<&str>) -> i64 {
    let now = wall_ms();
    app.store
        .report_error(&item(kind, key, payment, now))
        .await
        .unwrap()
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

on_both_backends!(
    the_pool_by_kind_lists_kinds_with_counts_and_pages_of_25,
    |app| {
        for i in 0..27 {
            report(&app, "job_dead", &format!("j{i}"), None).await;
        }
        for i in 0..3 {
            report(&app, "suspense", &format!("s{i}"), None).await;
        }
        let viewer = session(&app, "view", "viewer").await;
        let (s, p) = get(&viewer, &app, "/error-pool/by-kind?status=open").await;
        assert_eq!(s, 200, "{p}");
        assert_eq!(
            p["kinds"],
            json!([{"kind": "job_dead", "count": 27}, {"kind": "suspense", "count": 3}])
        );
        assert_eq!(
            (p["total"].as_i64(), p["page_size"].as_i64()),
            (Some(30), Some(25))
        );
        assert_eq!(p["items"].as_array().unwrap().len(), 25);
        assert!(
            p["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["kind"] == "job_dead")
        );
        let (_, p2) = get(&viewer, &app, "/error-pool/by-kind?status=open&page=1").await;
        let kinds: Vec<&str> = p2["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            vec!["job_dead", "job_dead", "suspense", "suspense", "suspense"]
        );
        let (_, k) = get(&viewer, &app, "/error-pool/by-kind?kind=suspense").await;
        assert_eq!(
            (k["total"].as_i64(), k["items"].as_array().unwrap().len()),
            (Some(3), 3)
        );
        for (q, code) in [
            ("status=nope", "invalid_status"),
            ("page=-1", "invalid_page"),
            ("page=x", "invalid_query"),
        ] {
            let (s, v) = get(&viewer, &app, &format!("/error-pool/by-kind?{q}")).await;
            assert_eq!(s, 400, "{q}: {v}");
            if code != "invalid_query" {
                assert_eq!(v["error"]["code"], code, "{q}: {v}");
            }
        }
    }
);

on_both_backends!(
    a_bulk_resolve_resolves_what_is_unchanged_and_audits_each_item,
    |app| {
        let a = report(&app, "suspense", "a", Some("pay_a")).await;
        let b = report(&app, "suspense", "b", None).await;
        let c = report(&app, "suspense", "c", None).await;
        let other = report(&app, "job_dead", "d", None).await;
        let op = session(&app, "op", "operator").await;

        // The ticked rows, narrowed to the kind: `other` is not a suspense item.
        let (s, v) = get(
            &op,
            &app,
            &format!("/error-pool/bulk-resolve/preview?kind=suspense&ids={a},{b},{c},{other}"),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        let previewed: Vec<i64> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_i64().unwrap())
            .collect();
        assert_eq!(previewed, vec![a, b, c]);
        // Every open suspense item, with no ids.
        let (_, all) = get(&op, &app, "/error-pool/bulk-resolve/preview?kind=suspense").await;
        assert_eq!(all["items"].as_array().unwrap().len(), 3);

        // Between preview and confirm: b is reported again, c is resolved by someone else.
        report(&app, "suspense", "b", None).await;
        let (s, _) = post(
            &op,
            &app,
            &format!("/error-pool/{c}/resolve"),
            json!({"note": "by hand"}),
        )
        .await;
        assert_eq!(s, 200);

        let items: Vec<Value> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| json!({"id": i["id"], "occurrences": i["occurrences"]}))
            .chain([json!({"id": other, "occurrences": 1})])
            .collect();
        let (s, out) = post(
        &op,
        &app,
        "/error-pool/bulk-resolve",
        json!({"selection": {"kind": "suspense", "ids": [a, b, c, other]}, "items": items, "note": "merchant unfrozen"}),
    )
    .await;
        assert_eq!(s, 200, "{out}");
        assert_eq!(out["resolved"], json!([a]), "{out}");
        let skipped: Vec<(i64, String)> = serde_json::from_value(out["skipped"].clone()).unwrap();
        assert_eq!(
            skipped.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![b, c, other]
        );
        assert!(skipped[0].1.contains("reported again"), "{skipped:?}");
        assert!(skipped[1].1.contains("already resolved"), "{skipped:?}");
        assert!(skipped[2].1.contains("not in the selection"), "{skipped:?}");

        // One error_resolved record per resolution, with the note and the item's payment.
        let auditor = session(&app, "aud", "auditor").await;
        let (s, l) = get(&auditor, &app, "/audit?action=error_resolved&actor=op").await;
        assert_eq!(s, 200, "{l}");
        let targets: Vec<&str> = l["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["target"].as_str().unwrap())
            .collect();
        assert_eq!(targets, vec![format!("error:{a}"), format!("error:{c}")]);
        assert_eq!(l["items"][0]["reason"], "merchant unfrozen");
        assert_eq!(l["items"][0]["payment_id"], "pay_a");
        assert_eq!(
            app.sql_strings(
                "SELECT status FROM error_pool WHERE CAST(id AS TEXT) = $1",
                &[&b.to_string()]
            )
            .await,
            vec!["open"]
        );
    }
);

on_both_backends!(bad_bulk_resolves_and_audit_filters_get_stable_4xx, |app| {
    let id = report(&app, "suspense", "a", None).await;
    let op = session(&app, "op", "operator").await;
    let viewer = session(&app, "view", "viewer").await;
    let auditor = session(&app, "aud", "auditor").await;
    let one = json!([{"id": id, "occurrences": 1}]);
    let many: Vec<Value> = (0..101)
        .map(|i| json!({"id": i, "occurrences": 1}))
        .collect();
    for (body, code) in [
        (
            json!({"selection": {}, "items": one, "note": "  "}),
            "invalid_note",
        ),
        (
            json!({"selection": {}, "items": one, "note": "x".repeat(2001)}),
            "invalid_note",
        ),
        (
            json!({"selection": {}, "items": [], "note": "n"}),
            "no_items",
        ),
        (
            json!({"selection": {}, "items": many, "note": "n"}),
            "too_many_items",
        ),
        (
            json!({"selection": {"ids": []}, "items": one, "note": "n"}),
            "invalid_selection",
        ),
        (json!({"selection": {}, "note": "n"}), "invalid_request"),
    ] {
        let (s, v) = post(&op, &app, "/error-pool/bulk-resolve", body.clone()).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (400, Some(code)),
            "{body}: {v}"
        );
    }
    let (s, v) = get(&op, &app, "/error-pool/bulk-resolve/preview?ids=1,x").await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("invalid_selection")),
        "{v}"
    );
    // Roles: viewers may not resolve; only auditors read the audit log.
    assert_eq!(
        get(&viewer, &app, "/error-pool/bulk-resolve/preview")
            .await
            .0,
        403
    );
    let (s, _) = post(
        &viewer,
        &app,
        "/error-pool/bulk-resolve",
        json!({"selection": {}, "items": one, "note": "n"}),
    )
    .await;
    assert_eq!(s, 403);
    assert_eq!(get(&op, &app, "/audit").await.0, 403);
    assert_eq!(
        app.sql_strings(
            "SELECT status FROM error_pool WHERE CAST(id AS TEXT) = $1",
            &[&id.to_string()]
        )
        .await,
        vec!["open"]
    );
    for (q, code) in [
        ("from=yesterday", "invalid_time"),
        ("to=2026-13-45", "invalid_time"),
        ("before=0", "invalid_cursor"),
        ("after=-1", "invalid_cursor"),
    ] {
        let (s, v) = get(&auditor, &app, &format!("/audit?{q}")).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (400, Some(code)),
            "{q}: {v}"
        );
    }
    let (s, v) = get(&auditor, &app, "/audit?before=x").await;
    assert_eq!(s, 400, "{v}");
    // What the schema allows is answered (schemathesis): an empty time range selects
    // nothing, and with both cursors `before` is used.
    let (s, v) = get(&auditor, &app, "/audit?from=2026-12-02&to=2026-12-01").await;
    assert_eq!(
        (s, v["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
    let (s, v) = get(&auditor, &app, "/audit?before=3&after=1").await;
    assert_eq!(s, 200, "{v}");
    assert!(
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["seq"].as_i64() < Some(3)),
        "{v}"
    );
    // A selection must be an object, and an explicit id list must name something.
    let (s, v) = post(
        &op,
        &app,
        "/error-pool/bulk-resolve",
        json!({"selection": [null, null], "items": one, "note": "n"}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("invalid_request")),
        "{v}"
    );
    let (s, v) = get(&op, &app, "/error-pool/bulk-resolve/preview?ids=").await;
    assert_eq!(s, 200, "blank ids means every open item: {v}");
    let (s, v) = get(&auditor, &app, "/audit?payment=pay_nothing&limit=5").await;
    assert_eq!(
        (s, v["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
});

on_both_backends!(
    a_bulk_retry_of_ticked_items_holds_only_their_payments,
    |app| {
        let pay = |order: &'static str| {
            let app = &app;
            async move {
                app.post(
                    "/v1/payments",
                    Some(&format!("k-{order}")),
                    &json!({"amount": 100, "currency": "CNY", "merchant_order_id": order}),
                )
                .await
                .json()["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            }
        };
        let (p1, p2) = (pay("o-1").await, pay("o-2").await);
        let i1 = report(&app, "job_dead", "j1", Some(&p1)).await;
        report(&app, "job_dead", "j2", Some(&p2)).await;
        let op = session(&app, "op", "operator").await;
        let (s, v) = get(
            &op,
            &app,
            &format!("/actions/bulk-retry/preview?source=error_pool&ids={i1}"),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        let previewed: Vec<&str> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["payment_id"].as_str().unwrap())
            .collect();
        assert_eq!(
            previewed,
            vec![p1.as_str()],
            "only the ticked item's payment"
        );
        let (s, out) = post(
            &op,
            &app,
            "/actions/bulk-retry",
            json!({
                "selection": {"source": "error_pool", "ids": [i1]},
                "items": [
                    {"payment_id": p1, "version": v["items"][0]["version"]},
                    {"payment_id": p2, "version": 1},
                ],
                "reason": "channel back",
            }),
        )
        .await;
        assert_eq!(s, 200, "{out}");
        let skipped: Vec<(String, String)> =
            serde_json::from_value(out["skipped"].clone()).unwrap();
        assert!(
            skipped
                .iter()
                .any(|(p, why)| *p == p2 && why == "no longer in the selection"),
            "{out}"
        );
        for q in ["ids=x", "ids="] {
            let (s, v) = get(
                &op,
                &app,
                &format!("/actions/bulk-retry/preview?source=error_pool&{q}"),
            )
            .await;
            if q == "ids=" {
                assert_eq!(s, 200, "blank ids mean no narrowing: {v}");
            } else {
                assert_eq!(
                    (s, v["error"]["code"].as_str()),
                    (400, Some("invalid_selection")),
                    "{v}"
                );
            }
        }
    }
);
