//! Logs and metrics set-up: `tracing` with an `RUST_LOG` filter, and one process-wide
//! Prometheus recorder (metrics-exporter-prometheus).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

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

/// The process's Prometheus recorder handle, installed on first use. Tests that start several
/// servers in one process share it.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder is already global; the handle still renders
            // whatever this recorder sees.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}
