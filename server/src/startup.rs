//! Building a running core from [`Settings`]: database, channel (in-process sandbox or
//! external), services, background tasks, router. The `converge` binary adds the console and
//! serves it; tests serve [`Running::router`] alone on 127.0.0.1:0.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use rand::Rng;
use tokio::task::JoinHandle;

use crate::api::{self, ApiState};
use crate::channel::http::HttpConnector;
use crate::channel::sandbox::{self, SandboxHandle};
use crate::config::{ChannelTarget, Settings};
use crate::domain::clock::{Clock, SystemClock};
use crate::ops::OpsState;
use crate::ops::auth::Auth;
use crate::ops::session::SessionBackend;
use crate::service::connectors::{Connectors, DEFAULT_CONNECTOR};
use crate::service::console::ConsoleSettings;
use crate::service::{Core, Timings};
use crate::store::{self, Backend, Store, StoreError};
use crate::worker::{Worker, monitor};
use tower_sessions::session_store::ExpiredDeletion;

/// Why the core could not start; each message is one line saying what and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database URL is malformed or of an unknown scheme.
    #[error("invalid DATABASE_URL: {0}")]
    BadDatabaseUrl(String),
    /// The database cannot be opened or reached.
    #[error("{0}")]
    DatabaseUnavailable(String),
    /// Migrations failed.
    #[error("database migration failed: {0}")]
    Migration(String),
    /// A setting is missing or contradicts another.
    #[error("{0}")]
    Config(String),
    /// The in-process sandbox channel did not start.
    #[error("sandbox channel did not start: {0}")]
    Sandbox(String),
}

/// Opens the store for `url`, turning failures into one-line [`StartError`]s.
pub async fn open_store(url: &str) -> Result<Arc<dyn Store>, StartError> {
    open_store_sized(url, store::DEFAULT_PG_POOL).await
}

/// The store of a serving process: [`open_store`] with the PostgreSQL pool sized to its
/// lanes and API reserve ([`LaneSettings::pool_size`](crate::config::LaneSettings::pool_size)).
pub async fn open_store_for(settings: &Settings) -> Result<Arc<dyn Store>, StartError> {
    open_store_sized(&settings.database_url, settings.lanes.pool_size()).await
}

async fn open_store_sized(url: &str, pg_pool: u32) -> Result<Arc<dyn Store>, StartError> {
    let is_pg = matches!(store::classify(url), Ok(store::Target::Postgres(_)));
    store::connect_sized(url, pg_pool).await.map_err(|e| match e {
        StoreError::BadUrl(msg) => StartError::BadDatabaseUrl(msg),
        StoreError::Migrate(m) => StartError::Migration(m.to_string()),
        other if is_pg => StartError::DatabaseUnavailable(format!(
            "cannot reach PostgreSQL at {}: {} (is the server running and the URL right?)",
            store::redact(url),
            root_cause(&other)
        )),
        other => StartError::DatabaseUnavailable(format!(
            "cannot open SQLite database {url:?}: {} (is the directory writable? else set --database-url (DATABASE_URL) to another path)",
            root_cause(&other)
        )),
    })
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// The sandbox's failure with the setting that fixes it: its address when it cannot listen,
/// else its store (a directory that cannot be created, a file that cannot be opened).
fn sandbox_error(e: &anyhow::Error) -> StartError {
    let cannot_listen = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::AddrInUse | std::io::ErrorKind::AddrNotAvailable
            )
        })
    });
    // The cause already names the address or path; the hint names the setting.
    let hint = if cannot_listen {
        "set --channel-bind (CONVERGE_CHANNEL_BIND) to a free address"
    } else {
        "set --channel-db (CONVERGE_CHANNEL_DB) to a writable path"
    };
    StartError::Sandbox(format!(
        "{e:#} ({hint}, or --channel-url to use an external channel)"
    ))
}

/// A core ready to serve.
pub struct Running {
    /// Shared state (also what the console's server functions reach).
    pub state: OpsState,
    /// The settings the process started with, for the binary and tests: each component was
    /// given only its own group of them.
    pub settings: Arc<Settings>,
    /// `/v1/*`, `/ops/v1/*`, `/health`, `/metrics`, with sessions and the CSRF guard.
    pub router: Router,
    /// The same routes without the session and CSRF layers, for [`Running::router_with`].
    api: Router,
    session: tower_sessions::SessionManagerLayer<SessionBackend>,
    /// Host names the console answers to (`--allowed-hosts`).
    allowed_hosts: Arc<Vec<String>>,
    /// Proxies whose `X-Forwarded-For` is believed (`--trusted-proxy`).
    trusted_proxies: Arc<Vec<crate::domain::netaddr::Cidr>>,
    /// The in-process sandbox channel, when one was started.
    pub sandbox: Option<SandboxHandle>,
    tasks: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    stop_workers: tokio::sync::watch::Sender<bool>,
}

impl Running {
    /// The backend's routes merged with `console` (the Leptos routes), under one session
    /// layer and the CSRF guard, so the console's server functions see the same sessions.
    pub fn router_with(&self, console: Router) -> Router {
        with_layers(
            self.api.clone().merge(console),
            self.session.clone(),
            self.allowed_hosts.clone(),
            self.trusted_proxies.clone(),
        )
    }

    /// Stops the workers (each finishes its current batch), background tasks and the
    /// sandbox, and closes the database pools.
    pub async fn shutdown(mut self) {
        self.state.live.close();
        let _ = self.stop_workers.send(true);
        for w in self.workers.drain(..) {
            let _ = w.await;
        }
        for t in self.tasks.drain(..) {
            t.abort();
        }
        if let Err(e) = self.state.core.flush_outcomes().await {
            tracing::warn!(error = %e, "idempotency outcome counts lost at shutdown");
        }
        if let Some(s) = self.sandbox.take() {
            s.shutdown().await;
        }
        self.state.core.store.close().await;
    }
}

/// The core over its parts, with an empty pause cache and outcome buffer: the one place a
/// [`Core`] is assembled, for serving processes ([`build_with_store`]) and one-off commands
/// ([`one_off_core`]) alike.
fn new_core(
    store: Arc<dyn Store>,
    connectors: Connectors,
    clock: Arc<dyn Clock>,
    timings: Timings,
    webhooks: crate::service::webhooks::WebhookSettings,
    secrets: crate::domain::secret_box::SecretBox,
    console: ConsoleSettings,
    accounting: crate::domain::accounting::AccountingCalendar,
) -> Core {
    Core {
        store,
        connectors: Arc::new(connectors),
        clock,
        timings,
        accounting,
        secrets,
        notifier: crate::service::webhooks::Notifier::new(webhooks),
        pauses: Default::default(),
        outcomes: Default::default(),
        console,
    }
}

/// The console use cases' settings of `settings` (thresholds, approval and pause times, the
/// per-user allowances) with the audit checkpoint key `audit_key`.
fn console_settings(
    settings: &Settings,
    audit_key: Option<Arc<ed25519_dalek::SigningKey>>,
) -> ConsoleSettings {
    ConsoleSettings::new(
        settings.stuck.thresholds(),
        settings.actions.ttl_ms(),
        settings.actions.action_limit_per_minute,
        settings.actions.pause_min_ms(),
        audit_key,
    )
}

/// The key that seals secrets at rest (`--secrets-key-file`, else made in the data directory
/// and its path printed once), checked against a secret the database already holds sealed, so
/// a process started with another key is refused in one line instead of failing every
/// delivery. Errors: `Config` naming the file, or the key that sealed the database's secrets.
pub async fn open_secrets(
    settings: &crate::config::SecretsSettings,
    database_url: &str,
    data_dir: Option<&std::path::Path>,
    store: &dyn Store,
) -> Result<crate::domain::secret_box::SecretBox, StartError> {
    let (secrets, made) = settings
        .secret_box(database_url, data_dir)
        .map_err(StartError::Config)?;
    if let Some(path) = made {
        // Logged, not printed to stderr: start-up refusals stay one line there.
        tracing::warn!(
            path = %path.display(),
            "made the secrets key (mode 0600): it seals webhook secrets in the database; back it up apart from the database, and give every process of this database the same file (--secrets-key-file)"
        );
    }
    let sample = store.sealed_secret_sample().await.map_err(|e| {
        StartError::DatabaseUnavailable(format!("cannot read a sealed secret: {e}"))
    })?;
    if let Some(sealed) = sample {
        secrets
            .open_text(crate::domain::secret_box::Purpose::WebhookSecret, &sealed)
            .map_err(|e| StartError::Config(format!("secrets key {}: {e}", secrets.key_id())))?;
    }
    // Secrets written before they were sealed (an upgraded install) are sealed now, so a dump
    // taken after this start holds none.
    match store.seal_plaintext_secrets(&secrets).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(sealed = n, "sealed the secrets stored as plain text"),
        Err(e) => {
            tracing::warn!(error = %e, "could not seal the secrets stored as plain text; the next start tries again")
        }
    }
    Ok(secrets)
}

/// The named connectors and the route table of `settings` over the default connector
/// (`sandbox`: the in-process sandbox or `--channel-url`). Errors (one line): a connector
/// named twice, a route to a connector not configured.
fn connectors(
    settings: &crate::config::ChannelSettings,
    default: HttpConnector,
) -> Result<Connectors, String> {
    let mut all = Connectors::single(DEFAULT_CONNECTOR, Arc::new(default));
    for spec in &settings.connectors {
        if all.has(&spec.name) {
            return Err(format!("--connector {} is given twice", spec.name));
        }
        let c = HttpConnector::new(&spec.url, settings.timeout());
        all = all.with_connector(&spec.name, Arc::new(c));
    }
    for r in &settings.routes {
        all = all
            .with_route(r.merchant_id, r.method.as_deref(), &r.connector)
            .map_err(|e| format!("--route: {e}"))?;
    }
    Ok(all)
}

/// A core for a one-off command (`converge reconcile`, `converge webhook ...`): no workers run,
/// so no payment is driven (timings of a single attempt, no delays); the channel at
/// `channel_url` (requests bounded by `channel_timeout`) is called only by what the command
/// itself does, and without a URL points at a closed local port, so a call fails at once.
/// `secrets` seals and opens what the command writes or reads of the secrets at rest.
pub fn one_off_core(
    store: Arc<dyn Store>,
    channel_url: Option<&str>,
    channel_timeout: Duration,
    webhooks: crate::service::webhooks::WebhookSettings,
    secrets: crate::domain::secret_box::SecretBox,
) -> Core {
    new_core(
        store,
        Connectors::single(
            DEFAULT_CONNECTOR,
            Arc::new(HttpConnector::new(
                channel_url.unwrap_or("http://127.0.0.1:1"),
                channel_timeout,
            )),
        ),
        Arc::new(SystemClock),
        Timings {
            submit_delay_ms: 0,
            query_delay_ms: 0,
            max_attempts: 1,
            resubmit_budget: 0,
            approval_conflict_window_ms: 0,
            authorization_ttl_ms: crate::service::DEFAULT_AUTHORIZATION_TTL_SECS as i64 * 1000,
            action_window_ms: crate::service::customer_action::DEFAULT_ACTION_WINDOW_SECS as i64
                * 1000,
        },
        webhooks,
        secrets,
        ConsoleSettings::one_off(),
        // A one-off command drives no payment, so it posts no batch to date.
        Default::default(),
    )
}

/// A core for a one-off command that only reads and writes records (users, merchants and
/// their keys, the audit log): [`one_off_core`] with no channel, and a secrets key made for
/// this process alone and never stored, because such a command seals and opens nothing (so
/// it neither needs nor makes the database's key file).
pub fn records_core(store: Arc<dyn Store>) -> Core {
    one_off_core(
        store,
        None,
        Duration::from_secs(1),
        crate::service::webhooks::WebhookSettings::default(),
        crate::domain::secret_box::SecretBox::random(),
    )
}

/// Builds the core. `public_addr` is where this process's HTTP server listens (already
/// bound), so the in-process sandbox can send its callbacks there.
pub async fn build(settings: Settings, public_addr: SocketAddr) -> Result<Running, StartError> {
    let store = open_store_for(&settings).await?;
    build_with_store(settings, public_addr, store).await
}

/// [`build`] over an already opened store. Each group's checks run first (the channel and its
/// callback secret, the audit signing key, the relay's names and windows), so a bad setting
/// is one line and nothing half-runs; then each component is given its own group.
pub async fn build_with_store(
    settings: Settings,
    public_addr: SocketAddr,
    store: Arc<dyn Store>,
) -> Result<Running, StartError> {
    let target = settings.channel.target().map_err(StartError::Config)?;
    let audit_key = audit_signing_key(&settings, store.as_ref()).await?;
    let relay = settings
        .relay
        .config(settings.worker.poll())
        .map_err(StartError::Config)?;
    let secrets = open_secrets(
        &settings.secrets,
        &settings.database_url,
        settings.data_dir.as_deref(),
        store.as_ref(),
    )
    .await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (channel, secret, sandbox) = start_channel(&settings, target, public_addr).await?;
    let connectors = connectors(&settings.channel, channel.with_callback_secret(&secret))
        .map_err(StartError::Config)?;
    let console = console_settings(&settings, audit_key.clone());
    let accounting = settings
        .accounting
        .calendar()
        .map_err(|e| StartError::Config(e.to_string()))?;
    let core = serving_core(
        &settings,
        &store,
        connectors,
        clock.clone(),
        secrets,
        console,
        accounting,
    );
    // The merchants' own PSP accounts, before any worker drives a payment made on one.
    core.refresh_connectors().await.map_err(|e| {
        StartError::DatabaseUnavailable(format!("cannot read the merchants' connectors: {e}"))
    })?;
    let (stop_workers, stop) = tokio::sync::watch::channel(false);
    let workers = spawn_workers(&core, &settings, relay.as_ref(), &stop).await?;
    let monitor = tokio::spawn(monitor::run(
        core.clone(),
        settings.stuck.thresholds(),
        settings.stuck.monitor_every(),
    ));
    let sessions = SessionBackend::new(store.db_pool()).await.map_err(|e| {
        StartError::DatabaseUnavailable(format!("cannot prepare the session table: {e}"))
    })?;
    let session = sessions.layer(
        time::Duration::seconds(settings.session.idle_timeout_secs.min(i64::MAX as u64) as i64),
        settings.session.secure_cookies,
    );
    let relying_party = crate::service::passkeys::RelyingParty::new(&settings.webauthn_origin())
        .map_err(StartError::Config)?;
    let state = ops_state(&settings, &store, &sessions, &core, relying_party);
    let api_state = ApiState {
        core,
        body_limit: settings.http.body_limit,
        keys: settings.idempotency.clone(),
        metrics: crate::telemetry::metrics_handle(),
        callback_secret: Arc::new(secret),
        limiter: Arc::new(crate::api::ratelimit::MerchantLimiter::new(
            settings.http.merchant_bucket(),
        )),
    };
    let background = Background {
        clock,
        monitor,
        sessions,
        audit_key,
    };
    let tasks = spawn_tasks(&settings, &store, &state, background);
    if store.backend() == Backend::Sqlite {
        tracing::info!("storage: SQLite");
    }
    let api = crate::http::router(api_state, state.clone());
    let allowed_hosts = Arc::new(settings.http.allowed_host_names());
    let trusted_proxies = Arc::new(settings.http.trusted_proxies.clone());
    Ok(Running {
        router: with_layers(
            api.clone(),
            session.clone(),
            allowed_hosts.clone(),
            trusted_proxies.clone(),
        ),
        allowed_hosts,
        trusted_proxies,
        api,
        session,
        state,
        settings: Arc::new(settings),
        sandbox,
        tasks,
        workers,
        stop_workers,
    })
}

/// The core a server runs with `settings`' timings and webhook delivery, and the store's
/// outbox told the retry schedule new deliveries are planned with.
fn serving_core(
    settings: &Settings,
    store: &Arc<dyn Store>,
    connectors: Connectors,
    clock: Arc<dyn Clock>,
    secrets: crate::domain::secret_box::SecretBox,
    console: ConsoleSettings,
    accounting: crate::domain::accounting::AccountingCalendar,
) -> Core {
    let core = new_core(
        store.clone(),
        connectors,
        clock,
        Timings {
            approval_conflict_window_ms: settings.actions.conflict_window_ms(),
            ..settings.jobs.timings()
        },
        crate::service::webhooks::WebhookSettings {
            jitter_seed: settings.worker.seed,
            ..settings.webhooks.delivery()
        },
        secrets,
        console,
        accounting,
    );
    let schedule = &settings.webhooks.webhook_retry_schedule;
    store.webhook_plan().set(
        schedule.attempts() as i64,
        schedule.delay_ms(1, 0.5).unwrap_or(0) as i64,
    );
    core
}

/// The audit signing key of `settings`, checked against the store when it was generated
/// into the data directory (a second generated key is refused); None, with a warning, when
/// there is none. Errors: an unreadable key, a second generated key.
async fn audit_signing_key(
    settings: &Settings,
    store: &dyn Store,
) -> Result<Option<Arc<ed25519_dalek::SigningKey>>, StartError> {
    match settings.audit.signing_key().map_err(StartError::Config)? {
        Some(key) => {
            if settings.audit.audit_key_generated {
                refuse_a_second_generated_key(store, &key).await?;
            }
            Ok(Some(Arc::new(key)))
        }
        None => {
            tracing::warn!(
                "no --audit-signing-key and no data directory (PostgreSQL without --data-dir): audit checkpoints are not signed, so truncating the audit log would go unnoticed"
            );
            Ok(None)
        }
    }
}

/// The channel `target` names, with the secret its callbacks are signed with: an external
/// one, or the sandbox started in-process (sending its callbacks to `public_addr`) and its
/// handle. Errors: the sandbox did not start.
async fn start_channel(
    settings: &Settings,
    target: ChannelTarget,
    public_addr: SocketAddr,
) -> Result<(HttpConnector, Vec<u8>, Option<SandboxHandle>), StartError> {
    Ok(match target {
        ChannelTarget::External {
            url,
            callback_secret,
        } => (
            HttpConnector::new(&url, settings.channel.timeout()),
            callback_secret,
            None,
        ),
        ChannelTarget::Sandbox { callback_secret } => {
            let secret =
                callback_secret.unwrap_or_else(|| rand::rng().random::<[u8; 32]>().to_vec());
            let cfg = settings.sandbox.config(
                format!("http://{public_addr}/v1/channel/callbacks"),
                secret.clone(),
            );
            let handle = sandbox::spawn(cfg, settings.sandbox.channel_bind)
                .await
                .map_err(|e| sandbox_error(&e))?;
            tracing::info!(url = %handle.url, "sandbox channel started in-process");
            (
                HttpConnector::new(&handle.url, settings.channel.timeout()),
                secret,
                Some(handle),
            )
        }
    })
}

/// Starts the tasks `stop` ends on shutdown: the job worker (unless `--no-workers`) and the
/// event-stream relay when one is configured. Errors: a stream that cannot deduplicate.
async fn spawn_workers(
    core: &Core,
    settings: &Settings,
    relay: Option<&crate::worker::relay::RelayConfig>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Result<Vec<JoinHandle<()>>, StartError> {
    let mut workers = Vec::new();
    if !settings.worker.no_workers {
        // One claim loop per lane, each with its own slots (issue 37): the lanes share the
        // worker's lease owner, lease, retry policy and jitter.
        let worker = Worker::new(core.clone(), settings.worker.config());
        workers.extend(crate::worker::lanes::spawn_lanes(
            &worker,
            &settings.lanes.configs(),
            stop,
        ));
    }
    if let Some(cfg) = relay {
        // Checked once before serving: a stream that cannot deduplicate is a configuration
        // error, refused in one line. A broker that is down is not: the relay waits for it
        // while payments go on.
        match crate::worker::relay::connect(cfg).await {
            Err(e @ crate::worker::relay::RelayError::WindowTooShort { .. }) => {
                return Err(StartError::Config(e.to_string()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "the event stream is not reachable yet; the relay keeps trying")
            }
            Ok(_) => {
                let url = store::redact(&cfg.url);
                tracing::info!(%url, stream = %cfg.stream, "event stream ready")
            }
        }
        workers.push(tokio::spawn(crate::worker::relay::run(
            core.clone(),
            cfg.clone(),
            stop.clone(),
        )));
    }
    Ok(workers)
}

/// The console's state: its live hub and sign-in over `core` (what its use cases need is
/// `core.console`).
fn ops_state(
    settings: &Settings,
    store: &Arc<dyn Store>,
    sessions: &SessionBackend,
    core: &Core,
    relying_party: crate::service::passkeys::RelyingParty,
) -> OpsState {
    OpsState {
        live: crate::ops::live::LiveHub::new(store.clone(), sessions.clone()),
        core: core.clone(),
        auth: Arc::new(Auth::new(&settings.session, relying_party)),
    }
}

/// What the background tasks of [`spawn_tasks`] are built from.
struct Background {
    /// The process's clock.
    clock: Arc<dyn Clock>,
    /// The stuck-state monitor, already running.
    monitor: JoinHandle<()>,
    /// The session store, whose expired sessions a task deletes.
    sessions: SessionBackend,
    /// Signs the periodic audit checkpoints, when there is a key.
    audit_key: Option<Arc<ed25519_dalek::SigningKey>>,
}

/// Starts the background tasks aborted on shutdown: the expired-session cleanup, the
/// purges (idempotency keys, sign-in attempts, channel attempts), the outcome-count flush,
/// the daily reconciliation and the audit checkpoints (each when configured); with the
/// monitor among them.
fn spawn_tasks(
    settings: &Settings,
    store: &Arc<dyn Store>,
    state: &OpsState,
    background: Background,
) -> Vec<JoinHandle<()>> {
    let Background {
        clock,
        monitor,
        sessions,
        audit_key,
    } = background;
    let purge_every = settings.idempotency.purge_every();
    let expired_sessions = tokio::spawn(async move {
        if let Err(e) = sessions
            .continuously_delete_expired(Duration::from_secs(300))
            .await
        {
            tracing::warn!(error = %e, "expired-session cleanup stopped");
        }
    });
    let mut tasks = vec![
        tokio::spawn(crate::worker::purge_keys::run(
            store.clone(),
            clock.clone(),
            purge_every,
            settings
                .idempotency
                .tombstone_retention_ms(settings.jobs.timings().authorization_ttl_ms),
        )),
        tokio::spawn(purge_auth_attempts(store.clone(), clock, purge_every)),
        tokio::spawn(crate::worker::monitor::purge_channel_attempts(
            state.core.clone(),
            purge_every,
        )),
        tokio::spawn(crate::service::outcomes::flush_every(
            state.core.outcomes.clone(),
            store.clone(),
            Duration::from_secs(1),
        )),
        tokio::spawn(crate::service::merchant_connectors::refresh_every(
            state.core.clone(),
            crate::service::merchant_connectors::REFRESH_EVERY,
        )),
        monitor,
        expired_sessions,
    ];
    if !settings.reconcile.no_daily_reconcile {
        tasks.push(tokio::spawn(daily_reconcile(
            state.core.clone(),
            settings.reconcile.after_ms(),
        )));
    }
    if let Some(key) = audit_key {
        tasks.push(tokio::spawn(periodic_checkpoints(
            state.core.clone(),
            key,
            settings.audit.checkpoint_every(),
        )));
    }
    tasks
}

/// The layers every route shares, the console's included: the client address
/// ([`crate::ops::handlers::ClientAddr`], from `--trusted-proxy` peers' `X-Forwarded-For`),
/// sessions, the CSRF guard, and (outermost, so a refused or failed request is logged too)
/// the one request span and log line per request ([`api::with_trace`]).
fn with_layers(
    router: Router,
    session: tower_sessions::SessionManagerLayer<SessionBackend>,
    allowed_hosts: Arc<Vec<String>>,
    trusted_proxies: Arc<Vec<crate::domain::netaddr::Cidr>>,
) -> Router {
    api::with_trace(
        router
            .layer(axum::middleware::from_fn_with_state(
                trusted_proxies,
                crate::ops::handlers::resolve_client_addr,
            ))
            .layer(session)
            .layer(axum::middleware::from_fn(crate::ops::csrf::guard))
            .layer(axum::middleware::from_fn_with_state(
                allowed_hosts,
                crate::ops::csrf::host_guard,
            )),
    )
}

/// Queues each day's reconciliation of the channel statement (DESIGN.md "Compensation queue
/// and error pool"), checking once a minute; the store makes sure one process queues it.
pub async fn daily_reconcile(core: Core, after_ms: i64) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    let mut scheduled: Option<String> = None;
    loop {
        tick.tick().await;
        let day = crate::service::reconcile::statement_day(core.clock.now_ms(), after_ms);
        if scheduled.as_deref() == Some(day.as_str()) {
            continue;
        }
        match core.schedule_daily_reconcile(after_ms).await {
            Ok(Some((day, job))) => {
                tracing::info!(%day, job, "daily reconciliation queued");
                scheduled = Some(day);
            }
            Ok(None) => scheduled = Some(day),
            Err(e) => {
                tracing::warn!(error = %e, "daily reconciliation not queued; next tick retries")
            }
        }
    }
}

/// Refuses a generated audit key (issue 36) when the log's latest checkpoint was signed by
/// another key: a server with a data directory of its own beside others on one PostgreSQL,
/// or a data directory whose key was lost. Signing on would leave checkpoints no one public
/// key verifies, so the operator is told to give every server the same key.
async fn refuse_a_second_generated_key(
    store: &dyn Store,
    key: &ed25519_dalek::SigningKey,
) -> Result<(), StartError> {
    let ours = crate::domain::checkpoint::key_id(&key.verifying_key());
    let latest = store
        .latest_checkpoint()
        .await
        .map_err(|e| StartError::DatabaseUnavailable(e.to_string()))?;
    match latest {
        Some(c) if c.key_id != ours => Err(StartError::Config(format!(
            "the audit log's checkpoints are signed by key {} but this server's generated key is {ours}: give every server sharing the database the same key (--audit-signing-key, or copy the key file into --data-dir)",
            c.key_id
        ))),
        _ => Ok(()),
    }
}

/// Signs an audit checkpoint every `every` when the log has grown since the last one (issue
/// 13; RFC 6962's signed tree heads are issued on a schedule the same way).
async fn periodic_checkpoints(core: Core, key: Arc<ed25519_dalek::SigningKey>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if let Err(e) = core.take_checkpoint(&key, core.clock.now_ms(), true).await {
            tracing::error!(error = %e, "audit checkpoint not signed");
        }
    }
}

/// Deletes sign-in attempts older than any limit looks back, periodically (the
/// Idempotency-Key purge is [`crate::worker::purge_keys`]).
async fn purge_auth_attempts(store: Arc<dyn Store>, clock: Arc<dyn Clock>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let before = clock.now_ms() - 2 * crate::domain::throttle::PAIR_LOOKBACK_MS;
        if let Err(e) = store.purge_auth_attempts(before).await {
            tracing::warn!(error = %e, "sign-in attempt purge failed; next tick retries");
        }
    }
}
