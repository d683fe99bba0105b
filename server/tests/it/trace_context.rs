//! One trace id follows a payment (issue 14; seed article 004 §8.4; W3C Trace Context): the
//! merchant's `traceparent`, or a new id, is kept on every event the request writes, on the
//! jobs it queues, on the events those jobs write in the worker, and in the audit metadata of
//! the console requests that act on it.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn traceparent() -> String {
    format!("00-{TRACE}-00f067aa0ba902b7-01")
}

on_both_backends!(
    every_event_of_a_create_carries_the_merchants_trace_id,
    |app| {
        let r = app
            .client
            .post(format!("{}/v1/payments", app.base))
            .bearer_auth(&app.api_key)
            .header("Idempotency-Key", "k-trace-1")
            .header("traceparent", traceparent())
            .json(&json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-trace-1"}));
        let a = app.send(r).await;
        assert_eq!(a.json()["status"], "SUCCESS", "{}", a.json());
        let id = a.json()["id"].as_str().unwrap().to_string();
        let events = app.store.payment_events(&id).await.unwrap();
        assert!(events.len() >= 4, "{events:?}");
        for e in &events {
            // A late sandbox callback arrives in a request of its own, with its own trace.
            if e.source == "callback" {
                continue;
            }
            assert_eq!(e.trace_id.as_deref(), Some(TRACE), "{e:?}");
        }
        let jobs = app
            .sql_strings(
                "SELECT COALESCE(trace_id, '-') FROM jobs WHERE payment_id = $1",
                &[&id],
            )
            .await;
        assert!(!jobs.is_empty());
        assert!(jobs.iter().all(|t| t == TRACE), "{jobs:?}");
    }
);

on_both_backends!(
    a_request_without_a_valid_traceparent_gets_one_new_trace_for_all_it_writes,
    |app| {
        let r = app
            .client
            .post(format!("{}/v1/payments", app.base))
            .bearer_auth(&app.api_key)
            .header("Idempotency-Key", "k-trace-2")
            .header(
                "traceparent",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            )
            .json(&json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-trace-2"}));
        let a = app.send(r).await;
        let id = a.json()["id"].as_str().unwrap().to_string();
        let traces: Vec<String> = app
            .store
            .payment_events(&id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.source != "callback")
            .map(|e| e.trace_id.expect("a trace id"))
            .collect();
        assert!(traces.len() >= 4);
        assert!(traces.iter().all(|t| t == &traces[0]), "{traces:?}");
        assert_eq!(traces[0].len(), 32);
        assert_ne!(traces[0], "0".repeat(32));
    }
);

on_both_backends!(
    the_workers_query_of_an_unknown_payment_writes_in_the_requests_trace,
    |s| {
        s.worker.no_workers = false;
        s.jobs.query_delay_ms = 100;
        s.worker.poll_ms = 20;
        s.worker.backoff_base_ms = 20;
        s.worker.backoff_cap_ms = 200;
        // No callback within the test: only the worker's query settles it.
        s.sandbox.sandbox_callback_delay_ms = 600_000;
        s.jobs.submit_delay_ms = 5_000;
    },
    |app| {
        // Digits 52: the channel charges but answers after the core's timeout.
        let r = app
            .client
            .post(format!("{}/v1/payments", app.base))
            .bearer_auth(&app.api_key)
            .header("Idempotency-Key", "k-trace-3")
            .header("traceparent", traceparent())
            .json(&json!({"amount": 1052, "currency": "CNY", "merchant_order_id": "o-trace-3"}));
        let a = app.send(r).await;
        assert_eq!(a.json()["status"], "UNKNOWN", "{}", a.json());
        let id = a.json()["id"].as_str().unwrap().to_string();
        app.wait_for_status(&id, "SUCCESS", Duration::from_secs(20))
            .await;
        let events = app.store.payment_events(&id).await.unwrap();
        let by_worker: Vec<_> = events.iter().filter(|e| e.source == "worker").collect();
        assert!(
            by_worker.iter().any(|e| e.event == "query_succeeded"),
            "{events:?}"
        );
        for e in by_worker {
            assert_eq!(e.trace_id.as_deref(), Some(TRACE), "{e:?}");
        }
    }
);

on_both_backends!(
    a_console_request_keeps_its_trace_id_in_the_hashed_audit_metadata,
    |app| {
        add_ops_user(&app, "tracer", "viewer,operator").await;
        let c = ops_session(&app, "tracer").await;
        let a = app
            .post(
                "/v1/payments",
                Some("k-trace-4"),
                &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-trace-4"}),
            )
            .await;
        let id = a.json()["id"].as_str().unwrap().to_string();
        let r = c
            .post(format!("{}/ops/v1/actions", app.base))
            .header("traceparent", traceparent())
            .json(&json!({"kind": "query", "payment_id": id, "reason": "customer asked"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        let metas = app
            .sql_strings(
                "SELECT request_meta FROM audit_log WHERE actor = 'tracer' ORDER BY seq",
                &[],
            )
            .await;
        let traced: Vec<serde_json::Value> = metas
            .iter()
            .map(|m| serde_json::from_str(m).unwrap())
            .filter(|m: &serde_json::Value| m["trace_id"] == TRACE)
            .collect();
        assert!(!traced.is_empty(), "{metas:?}");
    }
);

on_both_backends!(
    a_sign_in_and_a_sign_out_record_the_trace_id_like_every_other_console_record,
    |app| {
        add_ops_user(&app, "tracer2", "viewer").await;
        let c = reqwest::Client::builder()
            .cookie_store(true)
            .build()
            .unwrap();
        let r = c
            .post(format!("{}/ops/v1/login", app.base))
            .header("traceparent", traceparent())
            .json(&json!({"username": "tracer2", "password": OPS_PASSWORD}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let r = c
            .post(format!("{}/ops/v1/logout", app.base))
            .header("traceparent", traceparent())
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
        let rows = app
            .sql_strings(
                "SELECT action || ' ' || request_meta FROM audit_log WHERE actor = 'tracer2' ORDER BY seq",
                &[],
            )
            .await;
        let actions: Vec<&str> = rows.iter().map(|r| r.split(' ').next().unwrap()).collect();
        assert_eq!(actions, ["login", "logout"], "{rows:?}");
        for row in &rows {
            let meta: serde_json::Value =
                serde_json::from_str(row.split_once(' ').unwrap().1).unwrap();
            assert_eq!(meta["trace_id"], TRACE, "{row}");
            assert_eq!(meta["addr"], "127.0.0.1", "{row}");
        }
    }
);
