//! The long-running processes: `serve` (API, console, workers, sandbox), `worker`, `relay`
//! and `channel-sim`. Each runs until Ctrl-C or SIGTERM, then stops cleanly.

use std::net::SocketAddr;

use anyhow::{Context, Result, bail};
use app::app::{App, shell};
use axum::Router;
use clap::Args;
use converge_server::channel::sandbox::{self, SandboxConfig};
use converge_server::config::Settings;
use converge_server::startup;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};

/// `converge channel-sim` arguments.
#[derive(Debug, Args)]
pub(super) struct ChannelSimArgs {
    /// Address to listen on.
    #[arg(long, env = "CONVERGE_CHANNEL_BIND", default_value = "127.0.0.1:3100")]
    bind: SocketAddr,
    /// The simulator's own SQLite store.
    #[arg(long, env = "CONVERGE_CHANNEL_DB", default_value = "data/channel.db")]
    database_url: String,
    /// Where to POST signed callbacks (the core's /v1/channel/callbacks).
    #[arg(long, env = "CONVERGE_CALLBACK_URL", hide_env_values = true)]
    callback_url: Option<String>,
    /// HMAC secret for callback signatures (the core's --callback-secret).
    #[arg(long, env = "CONVERGE_CALLBACK_SECRET", hide_env_values = true)]
    callback_secret: Option<String>,
    /// Probability (0..=1) of a seeded random fault on ordinary amounts.
    #[arg(long, default_value_t = 0.0)]
    fault_rate: f64,
    /// Seed of the fault sequence.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Delay of digits-52 answers (ms).
    #[arg(long, default_value_t = 5_000)]
    slow_ms: u64,
    /// Hang of digits-53 requests (ms).
    #[arg(long, default_value_t = 5_000)]
    hang_ms: u64,
    /// A stalled forward path: hold every charge and authorization this long, then answer 504
    /// with nothing committed, whatever the amount (ms; 0: off). Refunds answer as usual.
    #[arg(long, env = "CONVERGE_HANG_SUBMIT_MS", default_value_t = 0)]
    hang_submit_ms: u64,
}

/// `converge serve`: the merchant API, the console (Leptos, compressed), the workers and,
/// without --channel-url, the in-process sandbox, on one address until a signal.
pub(super) async fn serve(settings: Settings) -> Result<()> {
    converge_server::telemetry::init_logs();
    let listener = tokio::net::TcpListener::bind(settings.http.bind)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {}: {e} (choose another address with --bind or CONVERGE_BIND)",
                settings.http.bind
            )
        })?;
    let addr = listener.local_addr()?;
    let conf = get_configuration(None).context("reading the Leptos configuration")?;
    let mut leptos_options = conf.leptos_options;
    leptos_options.site_addr = addr;
    if leptos_options.output_name.is_empty() {
        // Built without LEPTOS_OUTPUT_NAME (cargo-leptos and .cargo/config.toml set it): the
        // site's files are named after the workspace's output-name.
        leptos_options.output_name = "converge".into();
    }
    check_site(&leptos_options)?;
    let running = build(settings, addr).await?;

    let routes = generate_route_list(App);
    let state = running.state.clone();
    let console: Router = Router::new()
        .leptos_routes_with_context(
            &leptos_options,
            routes,
            move || provide_context(state.clone()),
            {
                let options = leptos_options.clone();
                move || shell(options.clone())
            },
        )
        .fallback(leptos_axum::file_and_error_handler(shell))
        .with_state(leptos_options)
        // The console's pages, wasm, js and css go out compressed (br or gzip, as the browser
        // accepts): its first load is measured compressed in BENCHMARKS.md. The merchant API
        // is left alone: its stored answers are replayed byte for byte.
        .layer(tower_http::compression::CompressionLayer::new());
    let app = running.router_with(console);

    tracing::info!(%addr, "converge listening");
    println!("converge listening on http://{addr}");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown({
        // Open live streams never finish by themselves: end them, or the graceful
        // shutdown would wait for every console to close its tab.
        let live = running.state.live.clone();
        async move {
            shutdown_signal().await;
            live.close();
        }
    })
    .await
    .context("serving HTTP")?;
    tracing::info!("in-flight requests finished; shutting down");
    running.shutdown().await;
    Ok(())
}

/// Refuses a console site built without `--split`. The console's pages are lazy routes
/// (app.rs); a `cargo leptos build` without `--split` leaves their loaders pointing at the
/// module `__wasm_split_placeholder__`, which no server has, so every page renders but never
/// hydrates: nothing on it would work (issue 15, first load). A site that is not there (a
/// server run for its API alone) is not checked.
fn check_site(options: &leptos::config::LeptosOptions) -> anyhow::Result<()> {
    let js = std::path::Path::new(options.site_root.as_ref())
        .join(options.site_pkg_dir.as_ref())
        .join(format!("{}.js", options.output_name));
    match std::fs::read_to_string(&js) {
        Ok(text) if text.contains("__wasm_split_placeholder__") => anyhow::bail!(
            "the console in {} was built without --split and would never hydrate: build it with `cargo leptos build --release --split`",
            js.display()
        ),
        _ => Ok(()),
    }
}

/// `converge worker`: the compensation workers alone, against the channel the serving
/// processes use.
pub(super) async fn worker(mut settings: Settings) -> Result<()> {
    converge_server::telemetry::init_logs();
    if settings.channel.channel_url.is_none() {
        bail!(
            "`converge worker` needs --channel-url (CONVERGE_CHANNEL_URL): the channel the serving processes use"
        );
    }
    settings.worker.no_workers = false;
    // A worker process receives no callbacks (it serves no HTTP), so it needs no shared
    // callback secret; the in-memory one only satisfies start-up.
    if settings.channel.callback_secret.is_none() {
        settings.channel.callback_secret =
            Some(format!("unused-{}", converge_server::ids::new_token()));
    }
    let running = build(settings, "127.0.0.1:0".parse()?).await?;
    println!("converge worker running; Ctrl-C stops it after the current batch");
    shutdown_signal().await;
    running.shutdown().await;
    Ok(())
}

/// `converge relay`: the event-stream relay alone (no workers, no daily reconciliation).
pub(super) async fn relay(mut settings: Settings) -> Result<()> {
    converge_server::telemetry::init_logs();
    if settings.relay.nats_url.is_none() {
        bail!(
            "`converge relay` needs --nats-url (CONVERGE_NATS_URL): the NATS server to publish to"
        );
    }
    settings.worker.no_workers = true;
    settings.reconcile.no_daily_reconcile = true;
    // The relay calls no channel and receives no callbacks; these only satisfy start-up.
    if settings.channel.channel_url.is_none() {
        settings.channel.channel_url = Some("http://127.0.0.1:9".into());
    }
    if settings.channel.callback_secret.is_none() {
        settings.channel.callback_secret = Some(converge_server::ids::new_id("unused"));
    }
    let running = build(settings, "127.0.0.1:0".parse()?).await?;
    println!("converge relay running; Ctrl-C stops it");
    shutdown_signal().await;
    running.shutdown().await;
    Ok(())
}

/// [`startup::build`] with the audit checkpoint key defaulted (issue 36, "checkpoints by
/// default"): without --audit-signing-key the key in the data directory is used, generated
/// there on first start (its path said once, on stderr, after the other start-up checks
/// passed), so checkpoints are signed on an
/// out-of-the-box install. The database is opened first, so a bad database is reported as
/// such before any key file is made.
async fn build(mut settings: Settings, addr: SocketAddr) -> Result<startup::Running> {
    let store = startup::open_store_for(&settings).await?;
    let mut generated_key = None;
    if settings.audit.audit_signing_key.is_none()
        && let Some((path, generated)) = converge_server::config::default_signing_key(
            &settings.database_url,
            settings.data_dir.as_deref(),
        )
        .map_err(anyhow::Error::msg)?
    {
        if generated {
            generated_key = Some(path.clone());
        }
        settings.audit.audit_signing_key = Some(path);
        settings.audit.audit_key_generated = true;
    }
    let running = startup::build_with_store(settings, addr, store).await?;
    // Said once the start-up checks passed: a refused start stays one line on stderr.
    if let Some(path) = generated_key {
        eprintln!(
            "generated the audit checkpoint signing key {} (mode 0600); keep a copy apart from the database's backups. `converge audit public-key` prints its public half for auditors",
            path.display()
        );
    }
    Ok(running)
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// `converge channel-sim`: the sandbox channel alone until a signal.
pub(super) async fn channel_sim(args: ChannelSimArgs) -> Result<()> {
    converge_server::telemetry::init_logs();
    if !(0.0..=1.0).contains(&args.fault_rate) {
        bail!("--fault-rate must be between 0 and 1");
    }
    if args.callback_url.is_some() && args.callback_secret.is_none() {
        bail!("--callback-url needs --callback-secret (CONVERGE_CALLBACK_SECRET)");
    }
    if let Some(secret) = &args.callback_secret {
        converge_server::config::check_secret(
            "--callback-secret (CONVERGE_CALLBACK_SECRET)",
            secret,
        )
        .map_err(anyhow::Error::msg)?;
    }
    let cfg = SandboxConfig {
        database_url: args.database_url,
        callback_url: args.callback_url,
        callback_secret: args.callback_secret.unwrap_or_default().into_bytes(),
        slow_ms: args.slow_ms,
        hang_ms: args.hang_ms,
        hang_submit_ms: args.hang_submit_ms,
        fault_rate: args.fault_rate,
        seed: args.seed,
        ..SandboxConfig::default()
    };
    let handle = sandbox::spawn(cfg, args.bind).await?;
    println!("sandbox channel listening on {}", handle.url);
    shutdown_signal().await;
    handle.shutdown().await;
    Ok(())
}
