//! `/metrics` follows the Prometheus conventions `promtool check metrics` (in
//! `scripts/checkers.sh`) checks, and the ones it cannot: every metric has HELP text, label
//! values are lower-case, request latency is a histogram by method, route and status.

use serde_json::json;

on_both_backends!(
    every_metric_is_described_and_its_label_values_are_lower_case,
    |app| {
        let p = app
            .post(
                "/v1/payments",
                Some("k-metrics"),
                &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-metrics"}),
            )
            .await;
        assert_eq!(p.status, 201, "{}", p.json());
        let id = p.json()["id"].as_str().unwrap().to_string();
        assert_eq!(app.get(&format!("/v1/payments/{id}")).await.status, 200);
        converge_server::worker::monitor::refresh(
            &app.running.state.core,
            &app.running.settings.stuck.thresholds(),
        )
        .await
        .unwrap();
        let text = String::from_utf8(app.get("/metrics").await.body).unwrap();

        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split_whitespace().nth(2).unwrap();
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("# HELP {name} "))),
                "{name} has no HELP text in:\n{text}"
            );
        }
        // The recorder is process-wide, so these samples include other tests': all of them must
        // have lower-case label values. (`le="+Inf"` is the exposition format's own spelling
        // of a histogram's last bucket, not a converge label.)
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains('{'))
        {
            let labels = line[line.find('{').unwrap() + 1..line.rfind('}').unwrap()]
                .replace("le=\"+Inf\"", "le=\"+inf\"");
            assert_eq!(
                labels,
                labels.to_lowercase(),
                "upper-case label value: {line}"
            );
        }
        let histogram = |method: &str, route: &str, status: &str| {
            text.lines().any(|l| {
                l.starts_with("converge_http_request_duration_seconds_bucket{")
                    && l.contains(&format!("method=\"{method}\""))
                    && l.contains(&format!("route=\"{route}\""))
                    && l.contains(&format!("status=\"{status}\""))
            })
        };
        assert!(histogram("post", "/v1/payments", "201"), "{text}");
        assert!(histogram("get", "/v1/payments/{id}", "200"), "{text}");
        assert!(
            text.contains("# TYPE converge_http_request_duration_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains("converge_stuck_payments{state=\"pending\""),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l.starts_with("converge_database_up ")),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("converge_idempotency_requests_total{")
                    && l.contains("method=\"post\"")
                    && l.contains("route=\"/v1/payments\"")
                    && l.contains("outcome=\"first\"")),
            "{text}"
        );
    }
);
