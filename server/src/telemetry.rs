//! Logs and metrics set-up: `tracing` with an `RUST_LOG` filter, and one process-wide
//! Prometheus recorder (metrics-exporter-prometheus).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Installs the log subscriber (`RUST_LOG`, default `info,sqlx=warn`) writing to stdout, with
/// colours only when stdout is a terminal. Safe to call twice.
pub fn init_logs() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        // Colour codes only for a person at a terminal; a log file or collector gets plain text.
        .with_ansi(std::io::stdout().is_terminal())
        .try_init();
}

/// The W3C Trace Context trace id (<https://www.w3.org/TR/trace-context/>, `traceparent`
/// header): 32 lower-case hex digits, not all zero. One id follows a payment from the
/// merchant's request through the jobs that drive it to the console (seed article 004 §8.4
/// asks for a global trace id on every step): it is kept on the payment's events, on the jobs
/// written in its scope, and in the `request_meta` of the audit records written in its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceId(String);

impl TraceId {
    /// The trace id of a `traceparent` header value (`00-<trace id>-<parent id>-<flags>`),
    /// or None when the value is not a valid version-00 header (the spec says to start a new
    /// trace then). Later versions are read by their first four fields, as the spec asks.
    pub fn from_traceparent(value: &str) -> Option<TraceId> {
        let mut parts = value.trim().split('-');
        let (version, trace, parent, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let valid = hex(version, 2)
            && version != "ff"
            && (version != "00" || parts.next().is_none())
            && hex(trace, 32)
            && trace.bytes().any(|b| b != b'0')
            && hex(parent, 16)
            && parent.bytes().any(|b| b != b'0')
            && hex(flags, 2);
        valid.then(|| TraceId(trace.to_string()))
    }

    /// A new random trace id, for a request that brought none (or a job written before trace
    /// ids were kept).
    pub fn random() -> TraceId {
        use rand::Rng;
        let bytes: [u8; 16] = rand::rng().random();
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        // All-zero is invalid; 2^-128 of the time, flip one digit.
        if bytes == [0; 16] {
            return TraceId(format!("{}1", &id[..31]));
        }
        TraceId(id)
    }

    /// A stored trace id, trusted as written (it was validated when it came in).
    pub fn stored(id: String) -> TraceId {
        TraceId(id)
    }

    /// The 32 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

tokio::task_local! {
    static TRACE: TraceId;
}

/// Runs `fut` with `trace` as the current trace ([`current_trace`]): a request (the
/// `traceparent` middleware) or a job run.
pub async fn in_trace<F: std::future::Future>(trace: TraceId, fut: F) -> F::Output {
    TRACE.scope(trace, fut).await
}

/// The current trace id, if the code runs inside [`in_trace`]; None in start-up tasks and
/// one-off commands.
pub fn current_trace() -> Option<String> {
    TRACE.try_with(|t| t.0.clone()).ok()
}

/// Request-latency histogram: seconds from the request's arrival to its response head, by
/// `method` (lower-case), `route` (the matched route template, `unmatched` for none) and
/// `status` (the numeric code).
pub const HTTP_REQUEST_DURATION: &str = "converge_http_request_duration_seconds";

/// Bucket bounds of [`HTTP_REQUEST_DURATION`], in seconds: from a cached replay (a few ms) to a
/// request that waited out the channel timeout (2 s by default) and more.
pub const HTTP_REQUEST_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The process's Prometheus recorder handle, installed on first use. Tests that start several
/// servers in one process share it.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full(HTTP_REQUEST_DURATION.to_owned()),
                    &HTTP_REQUEST_BUCKETS,
                )
                .expect("the bucket list is not empty")
                .set_buckets_for_metric(
                    Matcher::Full("converge_webhook_attempt_duration_seconds".to_owned()),
                    &HTTP_REQUEST_BUCKETS,
                )
                .expect("the bucket list is not empty")
                .set_buckets_for_metric(
                    Matcher::Full("converge_channel_attempt_duration_seconds".to_owned()),
                    &HTTP_REQUEST_BUCKETS,
                )
                .expect("the bucket list is not empty")
                .build_recorder();
            // HELP text for every metric, given to this recorder directly so it holds them
            // even when another recorder is already global.
            metrics::with_local_recorder(&recorder, || {
                describe_metrics();
                describe_channel_metrics();
                describe_lane_metrics();
            });
            let handle = recorder.handle();
            // Fails only if another recorder is already global; the handle still renders
            // whatever this recorder sees.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Describes every metric converge records (the `# HELP` lines of `/metrics`). A metric
/// recorded anywhere in the code must be described here (or in a `describe_*` function the
/// recorder calls with it, as [`describe_channel_metrics`]): `promtool check metrics` in
/// `scripts/checkers.sh` fails on a metric without HELP text.
fn describe_metrics() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_bulkhead_metrics();
    describe_histogram!(
        HTTP_REQUEST_DURATION,
        Unit::Seconds,
        "HTTP request latency from arrival to response head, by method, route template and status code."
    );
    describe_counter!(
        "converge_database_unavailable_total",
        "Database statements of this process that found the database unavailable (a lost connection, a pool time-out, a read-only or restarting PostgreSQL during a failover)."
    );
    describe_counter!(
        "converge_database_reconnects_total",
        "Connections this process opened to the database after a statement had found it unavailable: one per recovery."
    );
    describe_counter!(
        "converge_idempotency_requests_total",
        "Merchant POST requests by Idempotency-Key outcome (first, replay, in_use, reused, missing, invalid), method and route template."
    );
    describe_counter!(
        "converge_channel_charges_total",
        "Charge requests sent to the channel, by outcome (succeeded, declined, error)."
    );
    describe_counter!(
        "converge_transitions_total",
        "Payment state transitions applied, by the state entered (lower-case)."
    );
    describe_counter!(
        "converge_events_ignored_total",
        "Payment events not applied because the payment had already moved (stale or not allowed), by event."
    );
    describe_counter!(
        "converge_callbacks_total",
        "Channel callbacks received, by outcome (applied, ignored, duplicate, conflicting, unknown_payment)."
    );
    describe_counter!(
        "converge_jobs_claimed_total",
        "Compensation-queue jobs claimed by this process's workers."
    );
    describe_counter!(
        "converge_jobs_processed_total",
        "Compensation-queue jobs run by this process's workers, by kind and result (completed, retried, dead, lease_lost)."
    );
    describe_gauge!(
        "converge_stuck_payments",
        "Non-terminal payments older than their state's stuck threshold, by state (lower-case) and age bucket."
    );
    describe_gauge!(
        "converge_jobs",
        "Compensation-queue jobs by kind and status (due, leased, dead; done in the current minute and the 59 before it)."
    );
    describe_gauge!(
        "converge_error_pool_open_items",
        "Open (unresolved) error-pool items by kind."
    );
    describe_gauge!(
        "converge_pause_active",
        "1 while the emergency switch pauses the target (submissions, job:<kind>, endpoint:<id>), else 0."
    );
    describe_gauge!(
        "converge_database_up",
        "1 when the database answered the last health check of the monitor, 0 when it did not."
    );
    describe_counter!(
        "converge_relay_events_total",
        "Outbox events handed to NATS JetStream by this process's relay, by outcome (published, duplicate, refused)."
    );
    describe_counter!(
        "converge_relay_connect_failures_total",
        "Failed attempts of this process's relay to reach NATS."
    );
    describe_gauge!(
        "converge_relay_backlog_events",
        "Outbox events not yet published to the event stream."
    );
    describe_gauge!(
        "converge_relay_lag_seconds",
        Unit::Seconds,
        "Age of the oldest outbox event not yet published to the event stream (0 when none)."
    );
    describe_gauge!(
        "converge_relay_connected",
        "1 when the relay holding the publishing lease is connected to NATS, else 0."
    );
    describe_gauge!(
        "converge_jobs_oldest_due_seconds",
        Unit::Seconds,
        "Age of the oldest due job of each kind: how long it has been waiting past its run time (0 when none is due)."
    );
}

/// The job lanes' metrics (issue 37, `worker::lanes`): per lane, what the database holds
/// (due, running, oldest due) and this process's slots, rate limit and claims.
fn describe_lane_metrics() {
    use metrics::{Unit, describe_counter, describe_gauge};
    describe_gauge!(
        "converge_lane_due_jobs",
        "Due jobs of each lane (their run time come, or their lease lapsed), from the database."
    );
    describe_gauge!(
        "converge_lane_running_jobs",
        "Jobs of each lane leased to a worker, their lease still holding, from the database."
    );
    describe_gauge!(
        "converge_lane_oldest_due_seconds",
        Unit::Seconds,
        "Age of the oldest due job of each lane past its run time (0 when none is due)."
    );
    describe_gauge!(
        "converge_lane_slots",
        "Worker slots of each lane in this process (--lane-<lane>-slots)."
    );
    describe_gauge!(
        "converge_lane_slots_in_use",
        "Worker slots of each lane held by running jobs in this process."
    );
    describe_gauge!(
        "converge_lane_rate_limit_per_second",
        "Jobs each lane's claim may take per second in this process (0: no limit)."
    );
    describe_counter!(
        "converge_lane_jobs_claimed_total",
        "Jobs claimed by each lane's claim loop in this process."
    );
}

/// Channel health's metrics (issue 41): attempts per connector by outcome, their durations,
/// and the thresholds the dashboard's tile and ConvergeChannelUndecidable use.
/// The webhook deliveries' metrics and the bulkheads' (issue 37): the merchant API's rate
/// limit, the endpoints' circuit breakers and in-flight caps.
fn describe_bulkhead_metrics() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "converge_webhook_attempts_total",
        "Webhook delivery attempts by outcome (delivered, failed, gone, dead)."
    );
    describe_histogram!(
        "converge_webhook_attempt_duration_seconds",
        Unit::Seconds,
        "Duration of one webhook delivery attempt, from sending to the answer's last byte read (or the failure)."
    );
    describe_gauge!(
        "converge_webhook_deliveries",
        "Webhook deliveries waiting for an attempt (pending) and given up (dead)."
    );
    describe_gauge!(
        "converge_webhook_oldest_pending_seconds",
        Unit::Seconds,
        "Age of the oldest undelivered (pending) webhook delivery (0 when none)."
    );
    describe_counter!(
        "converge_rate_limited_total",
        "Requests refused with 429 by a rate limit, by scope (merchant: the merchant API's per-key bucket, counted in this process)."
    );
    describe_gauge!(
        "converge_webhook_breaker_open",
        "Webhook endpoints whose circuit breaker is not closed (open, or half-open awaiting its probe)."
    );
    describe_gauge!(
        "converge_webhook_breaker_open_longest_seconds",
        Unit::Seconds,
        "How long the webhook endpoint whose circuit breaker has been not closed the longest has been so, since its first opening (failed probes keep it open; 0 when every breaker is closed)."
    );
    describe_counter!(
        "converge_webhook_deferred_total",
        "Webhook deliveries put back without an attempt, by reason (breaker_open: the endpoint's circuit breaker; in_flight: its in-flight cap in this process; merchant_in_flight: its merchant's)."
    );
}

fn describe_channel_metrics() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "converge_channel_authorizations_total",
        "Authorizations (holds of manual-capture payments) sent to the channel, by outcome (authorized, declined, error)."
    );
    describe_counter!(
        "converge_channel_attempts_total",
        "Charge attempts at each connector, by connector and outcome (success, decline, or the undecidable reason: timeout, 5xx, dropped, garbled)."
    );
    describe_histogram!(
        "converge_channel_attempt_duration_seconds",
        Unit::Seconds,
        "Duration of one charge attempt at a connector, from sending the request to having its answer, by connector."
    );
    describe_gauge!(
        "converge_channel_amber_threshold_ratio",
        "The undecidable share of a connector's charge attempts at which its dashboard tile turns amber (--channel-amber-pct / 100)."
    );
    describe_gauge!(
        "converge_channel_red_threshold_ratio",
        "The undecidable share of a connector's charge attempts at which its dashboard tile turns red and ConvergeChannelUndecidable fires (--channel-red-pct / 100)."
    );
}

/// A user-controlled value made safe for one log line: control characters, quotes and
/// backslashes escaped (`\n`, `\u{1b}`, ...), so the value can never split or forge a line,
/// and cut to `max` characters (then `…`), so a failed login logs at most a bounded form of
/// whatever was typed as the username.
pub fn log_safe(value: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in value.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() || matches!(c, '"' | '\\' | '\u{2028}' | '\u{2029}') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{TraceId, log_safe};

    #[test]
    fn a_traceparent_gives_its_trace_id_and_a_malformed_one_none() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            TraceId::from_traceparent(ok).unwrap().as_str(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceId::from_traceparent(bad), None, "{bad:?}");
        }
        // A later version may carry more fields after the four it shares with 00.
        assert!(
            TraceId::from_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
        let r = TraceId::random();
        assert!(
            TraceId::from_traceparent(&format!("00-{}-00f067aa0ba902b7-01", r.as_str())).is_some()
        );
    }

    #[test]
    fn log_values_never_split_a_line_and_are_bounded() {
        let forged = "alice\n2026-12-01T00:00:00Z INFO console login user=admin\r\u{1b}[2J";
        let safe = log_safe(forged, 200);
        assert!(!safe.contains('\n') && !safe.contains('\r') && !safe.contains('\u{1b}'));
        assert!(safe.starts_with("alice\\n2026"), "{safe}");
        assert_eq!(log_safe(&"x".repeat(1000), 64).chars().count(), 65);
        assert_eq!(log_safe("bob.smith@example", 64), "bob.smith@example");
        assert_eq!(log_safe("a\"b\\c", 64), "a\\\"b\\\\c");
    }
}
