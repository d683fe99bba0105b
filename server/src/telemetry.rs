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
    use super::log_safe;

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
