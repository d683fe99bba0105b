//! Subcommands of `converge`. Flags have environment equivalents (`DATABASE_URL`,
//! `CONVERGE_BIND`, ...).

use std::net::SocketAddr;

use anyhow::{Context, Result, bail};
use app::app::{App, shell};
use axum::Router;
use clap::{Args, Parser, Subcommand};
use converge_server::channel::sandbox::{self, SandboxConfig};
use converge_server::config::Settings;
use converge_server::service::merchants;
use converge_server::startup;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};

/// converge: a payment core with an operations console.
#[derive(Debug, Parser)]
#[command(name = "converge", version, about, propagate_version = true)]
pub struct Cli {
    /// Without a subcommand, `converge` serves (as `converge serve` with flags from the
    /// environment), which is also how `cargo leptos end-to-end` starts it.
    #[command(subcommand)]
    command: Option<Command>,
}

impl Cli {
    /// Parses the command line. Without a subcommand the command is `serve` with its settings
    /// from the environment, checked here, so a bad value (`CONVERGE_BIND=nonsense`) is
    /// reported like `converge serve` reports it.
    ///
    /// Errors: clap's (usage errors, and `--help`/`--version`, which clap also returns as
    /// errors); [`one_line`] renders a usage error for the terminal.
    pub fn parse_command_line() -> Result<Cli, clap::Error> {
        let mut cli = Cli::try_parse()?;
        if cli.command.is_none() {
            cli.command = Some(Command::Serve(
                EnvOnly::try_parse_from(["converge"])?.settings,
            ));
        }
        Ok(cli)
    }
}

/// A clap usage error as one line, e.g. `error: invalid value 'nonsense' for '--bind <BIND>':
/// invalid socket address syntax (see --help)`: clap's own rendering adds a usage block and
/// blank lines, while every converge failure is one line on stderr. Continuation lines (the
/// missing arguments, a "tip:") are joined; the usage block is left to `--help`.
pub fn one_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut line = String::new();
    for part in rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
    {
        if !line.is_empty() {
            line.push_str(if part.starts_with("tip:") { "; " } else { " " });
        }
        line.push_str(part);
    }
    format!("{line} (see --help)")
}

/// `serve`'s settings read from the environment alone.
#[derive(Debug, Parser)]
struct EnvOnly {
    #[command(flatten)]
    settings: Settings,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the merchant API, the ops console, the workers and (unless --channel-url) the
    /// sandbox channel.
    Serve(Settings),
    /// Run only the compensation workers (scale-out against a shared PostgreSQL); needs
    /// --channel-url, the channel the serving processes use.
    Worker(Settings),
    /// Run only the event-stream relay (the outbox to NATS JetStream); needs --nats-url.
    /// Several may run: one publishes at a time, under a lease in the database.
    Relay(Settings),
    /// Reconcile one day against the channel's settlement statement (or a statement file);
    /// differences go to the error pool. Re-running a day adds nothing twice.
    Reconcile(ReconcileArgs),
    /// Apply database migrations and exit.
    Migrate(DbArgs),
    /// Manage merchants.
    Merchant {
        #[command(subcommand)]
        action: MerchantCommand,
    },
    /// Verify or export the audit log.
    Audit {
        #[command(subcommand)]
        action: AuditCommand,
    },
    /// Manage console users.
    User {
        #[command(subcommand)]
        action: UserCommand,
    },
    /// Check DESIGN.md's convergence invariants against the database and the channel; prints a
    /// report and exits non-zero on any breach, naming each offending payment.
    Verify(VerifyArgs),
    /// Run the sandbox channel alone (a PSP simulator over HTTP).
    ChannelSim(ChannelSimArgs),
    /// Manage a merchant's webhook endpoints.
    Webhook {
        #[command(subcommand)]
        action: crate::cli_webhooks::WebhookCommand,
    },
    /// Run a webhook receiver that records what it gets (tests, local development).
    WebhookSink(crate::cli_webhooks::SinkArgs),
}

/// `--database-url`, shared by the one-off commands.
#[derive(Debug, Args)]
pub(crate) struct DbArgs {
    /// Database: a SQLite path or postgres:// URL.
    // The value may hold a password: `--help` must not print it from the environment.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "data/converge.db",
        hide_env_values = true
    )]
    pub(crate) database_url: String,
}

#[derive(Debug, Args)]
struct ReconcileArgs {
    /// The UTC day, YYYY-MM-DD.
    #[arg(long)]
    date: String,
    /// A statement CSV file to import instead of fetching it from the channel.
    #[arg(long)]
    file: Option<std::path::PathBuf>,
    /// The channel to fetch the statement from (a `converge channel-sim`).
    #[arg(long, env = "CONVERGE_CHANNEL_URL", hide_env_values = true)]
    channel_url: Option<String>,
    #[command(flatten)]
    db: DbArgs,
}

#[derive(Debug, Subcommand)]
enum MerchantCommand {
    /// Create a merchant and print its API key (shown once; only its hash is stored).
    Add {
        /// Unique merchant name.
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Freeze a merchant: its API refuses new payments, refunds and webhook endpoint changes
    /// (403 merchant_frozen; reads still work), and the ledger postings of what was in flight
    /// fail, so those payments wait in SUSPENSE until it is unfrozen.
    Freeze {
        /// Merchant name.
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Unfreeze a merchant.
    Unfreeze {
        /// Merchant name.
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// A merchant's API keys: several at once, each revocable (rotation: add, switch, revoke).
    Key {
        #[command(subcommand)]
        action: KeyCommand,
    },
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Issue another key; prints `KEY_ID KEY` (the key is shown once).
    Add {
        /// Merchant name.
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// One key per line: `KEY_ID PREFIX created=.. last_used=.. revoked=..`.
    List {
        /// Merchant name.
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Revoke a key: every server answers 401 to it from now on.
    Revoke {
        /// Merchant name.
        name: String,
        /// The key's id (from `converge merchant key list`).
        key_id: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// Where the audit checkpoint signing key is.
#[derive(Debug, Args)]
struct SigningKeyArg {
    /// Ed25519 private key, PKCS#8 PEM (`converge audit keygen`), kept outside the database.
    #[arg(long, env = "CONVERGE_AUDIT_SIGNING_KEY")]
    audit_signing_key: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Re-compute the hash chain and check it against the signed checkpoints (the first
    /// missing or differing record is named); with --file, verify an NDJSON export offline.
    Verify {
        /// An NDJSON export to verify offline (needs --public-key or --audit-signing-key).
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// The checkpoint key's public half, PEM (printed by `converge audit keygen`).
        #[arg(long)]
        public_key: Option<std::path::PathBuf>,
        #[command(flatten)]
        key: SigningKeyArg,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Make an Ed25519 checkpoint signing key: writes the private key (PKCS#8 PEM, mode 0600)
    /// to --out and prints the public key (PEM) for auditors.
    Keygen {
        /// Where to write the private key; an existing file is never overwritten.
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Sign a checkpoint of the audit chain's head now (after verifying the records since the
    /// last one) and print it.
    Checkpoint {
        #[command(flatten)]
        key: SigningKeyArg,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Write the audit log to standard output (the export is itself audited).
    Export {
        /// csv (spreadsheet-safe) or ndjson (exact, for re-verification).
        #[arg(long, default_value = "csv")]
        format: String,
        /// Only records at or after this UTC time (RFC 3339 or YYYY-MM-DD).
        #[arg(long)]
        from: Option<String>,
        /// Only records before this UTC time.
        #[arg(long)]
        to: Option<String>,
        /// Only this actor.
        #[arg(long)]
        actor: Option<String>,
        /// Only this action (e.g. action_approved).
        #[arg(long)]
        action: Option<String>,
        /// Sign a checkpoint covering the export (else the latest stored one is carried).
        #[command(flatten)]
        key: SigningKeyArg,
        #[command(flatten)]
        db: DbArgs,
    },
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Add a console user; the password is read from standard input (one line).
    Add {
        /// Login name (a-z A-Z 0-9 . _ - @).
        name: String,
        /// Roles: viewer, operator, approver, auditor, admin (comma-separated).
        #[arg(long = "role", required = true)]
        roles: String,
        /// Read the password from standard input (required: passwords never go in arguments).
        #[arg(long, required = true)]
        password_stdin: bool,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Disable a user (ends its sessions).
    Disable {
        /// Login name.
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

#[derive(Debug, Args)]
struct ChannelSimArgs {
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
}

/// Runs one subcommand.
pub async fn run(cli: Cli) -> Result<()> {
    let Some(command) = cli.command else {
        bail!("no command: the command line was not read with Cli::parse_command_line");
    };
    match command {
        Command::Serve(settings) => serve(settings).await,
        Command::Worker(settings) => worker(settings).await,
        Command::Relay(settings) => relay(settings).await,
        Command::Reconcile(args) => reconcile(args).await,
        Command::Migrate(db) => {
            let store = startup::open_store(&db.database_url).await?;
            store.close().await;
            println!(
                "migrations applied to {}",
                converge_server::store::redact(&db.database_url)
            );
            Ok(())
        }
        Command::Merchant { action } => merchant(action).await,
        Command::User { action } => user(action).await,
        Command::Audit { action } => audit(action).await,
        Command::ChannelSim(args) => channel_sim(args).await,
        Command::Verify(args) => verify(args).await,
        Command::Webhook { action } => crate::cli_webhooks::run(action).await,
        Command::WebhookSink(args) => crate::cli_webhooks::sink(args).await,
    }
}

async fn serve(settings: Settings) -> Result<()> {
    converge_server::telemetry::init_logs();
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {}: {e} (choose another address with --bind or CONVERGE_BIND)",
                settings.bind
            )
        })?;
    let addr = listener.local_addr()?;
    let running = startup::build(settings, addr).await?;

    let conf = get_configuration(None).context("reading the Leptos configuration")?;
    let mut leptos_options = conf.leptos_options;
    leptos_options.site_addr = addr;
    if leptos_options.output_name.is_empty() {
        // Built without LEPTOS_OUTPUT_NAME (cargo-leptos and .cargo/config.toml set it): the
        // site's files are named after the workspace's output-name.
        leptos_options.output_name = "converge".into();
    }
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

async fn worker(mut settings: Settings) -> Result<()> {
    converge_server::telemetry::init_logs();
    if settings.channel_url.is_none() {
        bail!(
            "`converge worker` needs --channel-url (CONVERGE_CHANNEL_URL): the channel the serving processes use"
        );
    }
    settings.no_workers = false;
    // A worker process receives no callbacks (it serves no HTTP), so it needs no shared
    // callback secret; the in-memory one only satisfies start-up.
    if settings.callback_secret.is_none() {
        settings.callback_secret = Some(format!(
            "unused-{}",
            converge_server::service::ids::new_token()
        ));
    }
    let running = startup::build(settings, "127.0.0.1:0".parse()?).await?;
    println!("converge worker running; Ctrl-C stops it after the current batch");
    shutdown_signal().await;
    running.shutdown().await;
    Ok(())
}

async fn relay(mut settings: Settings) -> Result<()> {
    converge_server::telemetry::init_logs();
    if settings.nats_url.is_none() {
        bail!(
            "`converge relay` needs --nats-url (CONVERGE_NATS_URL): the NATS server to publish to"
        );
    }
    settings.no_workers = true;
    settings.no_daily_reconcile = true;
    // The relay calls no channel and receives no callbacks; these only satisfy start-up.
    if settings.channel_url.is_none() {
        settings.channel_url = Some("http://127.0.0.1:9".into());
    }
    if settings.callback_secret.is_none() {
        settings.callback_secret = Some(converge_server::service::ids::new_id("unused"));
    }
    let running = startup::build(settings, "127.0.0.1:0".parse()?).await?;
    println!("converge relay running; Ctrl-C stops it");
    shutdown_signal().await;
    running.shutdown().await;
    Ok(())
}

async fn reconcile(args: ReconcileArgs) -> Result<()> {
    use converge_server::channel::http::HttpChannel;
    use converge_server::domain::clock::SystemClock;
    use converge_server::service::{Core, Timings};
    use std::sync::Arc;

    let (text, source) = match &args.file {
        Some(path) => {
            // Bytes, not text: a file that is not UTF-8 is judged (and reported to the error
            // pool with its line) by the reconciliation itself.
            let text = std::fs::read(path)
                .with_context(|| format!("cannot read statement file {}", path.display()))?;
            (Some(text), path.display().to_string())
        }
        None if args.channel_url.is_some() => (None, "channel".to_string()),
        None => bail!(
            "give --file STATEMENT.csv, or --channel-url URL to fetch the statement (with the in-process sandbox: the url `serve` logs as `sandbox channel started`, or the one fixed by `serve --channel-bind`)"
        ),
    };
    let store = startup::open_store(&args.db.database_url).await?;
    let channel = HttpChannel::new(
        args.channel_url.as_deref().unwrap_or("http://127.0.0.1:1"),
        std::time::Duration::from_secs(10),
    );
    let core = Core {
        store: store.clone(),
        channel: Arc::new(channel),
        clock: Arc::new(SystemClock),
        timings: Timings {
            submit_delay_ms: 0,
            query_delay_ms: 0,
            max_attempts: 1,
            resubmit_budget: 0,
        },
        notifier: Default::default(),
        pauses: Default::default(),
        outcomes: Default::default(),
    };
    let result = core.reconcile(&args.date, &source, text).await;
    store.close().await;
    let report = result?;
    println!(
        "reconciled {}: {} statement lines, {} differences sent to the error pool",
        report.day, report.rows, report.differences
    );
    Ok(())
}

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

async fn merchant(action: MerchantCommand) -> Result<()> {
    match action {
        MerchantCommand::Add { name, db } => {
            let store = startup::open_store(&db.database_url).await?;
            let result =
                merchants::add_merchant(store.as_ref(), chrono_now_ms(), &name, &cli_actor()).await;
            store.close().await;
            let (m, key) = result?;
            println!("{}", key.key);
            eprintln!(
                "merchant {:?} created with key {}; the API key above is shown once",
                m.name, key.id
            );
            Ok(())
        }
        MerchantCommand::Key { action } => merchant_key(action).await,
        MerchantCommand::Freeze { name, db } => set_frozen(&name, &db, true).await,
        MerchantCommand::Unfreeze { name, db } => set_frozen(&name, &db, false).await,
    }
}

async fn user(action: UserCommand) -> Result<()> {
    use converge_server::ops::password::PasswordHasherPool;
    use converge_server::ops::users;
    match action {
        UserCommand::Add {
            name,
            roles,
            password_stdin: _,
            db,
        } => {
            let mut password = String::new();
            std::io::stdin()
                .read_line(&mut password)
                .context("reading the password from standard input")?;
            let password = password.trim_end_matches(['\r', '\n']);
            let store = startup::open_store(&db.database_url).await?;
            let result = users::add_user(
                store.as_ref(),
                &PasswordHasherPool::new(1),
                &name,
                &roles,
                password,
                chrono_now_ms(),
                &cli_actor(),
            )
            .await;
            store.close().await;
            let u = result?;
            println!(
                "user {:?} added with roles {}",
                u.username,
                u.roles.join(",")
            );
            Ok(())
        }
        UserCommand::Disable { name, db } => {
            let store = startup::open_store(&db.database_url).await?;
            let result =
                users::set_disabled(store.as_ref(), &name, true, chrono_now_ms(), &cli_actor())
                    .await;
            store.close().await;
            result?;
            println!("user {name:?} disabled; its sessions have ended");
            Ok(())
        }
    }
}

fn cli_time(field: &str, v: &Option<String>) -> Result<Option<i64>> {
    v.as_deref()
        .map(|v| {
            converge_server::domain::clock::parse_utc(v)
                .map_err(|e| anyhow::anyhow!("--{field}: {e}"))
        })
        .transpose()
}

async fn audit(action: AuditCommand) -> Result<()> {
    use converge_server::domain::checkpoint;
    use converge_server::ops::audit::{self as audit_log, Format};
    use converge_server::store::{AuditEntry, AuditFilter};
    use futures_util::StreamExt;
    use std::io::Write;
    match action {
        AuditCommand::Verify {
            file,
            public_key,
            key,
            db,
        } => {
            let public = match (&public_key, &key.audit_signing_key) {
                (Some(p), _) => Some(
                    checkpoint::verifying_key_from_pem(
                        &std::fs::read_to_string(p)
                            .with_context(|| format!("reading {}", p.display()))?,
                    )
                    .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?,
                ),
                (None, Some(k)) => Some(
                    startup::load_signing_key(k)
                        .map_err(anyhow::Error::msg)?
                        .verifying_key(),
                ),
                (None, None) => None,
            };
            if let Some(file) = file {
                let Some(public) = public else {
                    bail!("--file needs --public-key (the checkpoint key's public half)");
                };
                let f = std::fs::File::open(&file)
                    .with_context(|| format!("opening {}", file.display()))?;
                let (records, c) = audit_log::verify_export(std::io::BufReader::new(f), &public)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
                println!(
                    "export intact: {records} records; signed checkpoint seq {} head {} at {} (key {})",
                    c.seq,
                    c.head_hash,
                    converge_server::domain::clock::rfc3339(c.at),
                    c.key_id
                );
                return Ok(());
            }
            let store = startup::open_store(&db.database_url).await?;
            let result = audit_log::verify_signed(store.as_ref(), public.as_ref()).await;
            store.close().await;
            let v = result?;
            if let Some(b) = v.broken {
                bail!("audit chain broken at record {}: {}", b.seq, b.reason);
            }
            let cp = match &v.latest {
                Some(c) => format!(
                    "latest signed checkpoint seq {} at {} (key {}), {} checkpoints, signatures {}",
                    c.seq,
                    converge_server::domain::clock::rfc3339(c.at),
                    c.key_id,
                    v.checkpoints,
                    if v.signatures_checked {
                        "verified"
                    } else {
                        "not checked (give --public-key)"
                    }
                ),
                None => "no signed checkpoint yet (serve with --audit-signing-key)".into(),
            };
            println!(
                "audit chain intact: {} records, head {} {}; {cp}",
                v.records, v.head.seq, v.head.hash
            );
            Ok(())
        }
        AuditCommand::Keygen { out } => {
            let key = audit_log::generate_signing_key();
            let pem = checkpoint::signing_key_to_pem(&key).map_err(anyhow::Error::msg)?;
            write_new_private_file(&out, pem.as_bytes())?;
            print!(
                "{}",
                checkpoint::verifying_key_to_pem(&key.verifying_key())
                    .map_err(anyhow::Error::msg)?
            );
            eprintln!(
                "private key written to {} (key id {}); the public key above verifies its checkpoints",
                out.display(),
                checkpoint::key_id(&key.verifying_key())
            );
            Ok(())
        }
        AuditCommand::Checkpoint { key, db } => {
            let Some(path) = key.audit_signing_key else {
                bail!("audit checkpoint needs --audit-signing-key (CONVERGE_AUDIT_SIGNING_KEY)");
            };
            let key = startup::load_signing_key(&path).map_err(anyhow::Error::msg)?;
            let store = startup::open_store(&db.database_url).await?;
            let result =
                audit_log::take_checkpoint(store.as_ref(), &key, chrono_now_ms(), false).await;
            store.close().await;
            let c = result?.context("no checkpoint signed")?;
            println!(
                "checkpoint seq {} head {} at {} key {} signature {}",
                c.seq, c.head_hash, c.at, c.key_id, c.signature
            );
            Ok(())
        }
        AuditCommand::Export {
            format,
            from,
            to,
            actor,
            action,
            key,
            db,
        } => {
            let key = key
                .audit_signing_key
                .map(|p| startup::load_signing_key(&p))
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let format: Format = format.parse().map_err(|m: String| anyhow::anyhow!(m))?;
            let filter = AuditFilter {
                from: cli_time("from", &from)?,
                to: cli_time("to", &to)?,
                actor,
                action,
            };
            let store = startup::open_store(&db.database_url).await?;
            let who = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
            let entry = AuditEntry {
                at: chrono_now_ms(),
                actor: format!("cli:{who}"),
                roles: String::new(),
                action: "audit_export".into(),
                target: "audit".into(),
                reason: String::new(),
                before: String::new(),
                after: serde_json::json!({"format": format!("{format:?}"), "from": from, "to": to, "actor": filter.actor, "action": filter.action}).to_string(),
                meta: serde_json::json!({"via": "cli"}).to_string(),
            };
            let head = store.append_audit(&entry).await?;
            eprintln!("audit chain head at export: {} {}", head.seq, head.hash);
            let cp = audit_log::export_checkpoint(store.as_ref(), key.as_ref(), entry.at).await?;
            match &cp {
                Some(c) => eprintln!(
                    "signed checkpoint: seq {} head {} at {} key {}",
                    c.seq, c.head_hash, c.at, c.key_id
                ),
                None => eprintln!("no signed checkpoint: the export cannot prove it is whole"),
            }
            let mut rows = Box::pin(audit_log::stream_with_checkpoint(
                store.clone(),
                filter,
                format,
                cp,
            ));
            let mut out = std::io::stdout().lock();
            while let Some(chunk) = rows.next().await {
                out.write_all(&chunk?).context("writing the export")?;
            }
            out.flush()?;
            drop(out);
            store.close().await;
            Ok(())
        }
    }
}

/// Writes `bytes` to a new file readable by its owner only; an existing file is an error.
fn write_new_private_file(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).with_context(|| {
        format!(
            "cannot create {} (an existing key is never overwritten)",
            path.display()
        )
    })?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The actor of a CLI change in the audit log: `cli:` and the OS user.
fn cli_actor() -> converge_server::service::actions::Actor {
    let who = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    converge_server::service::actions::Actor {
        username: format!("cli:{who}"),
        roles: String::new(),
        meta: serde_json::json!({"via": "cli"}).to_string(),
    }
}

async fn merchant_key(action: KeyCommand) -> Result<()> {
    use converge_server::domain::clock::rfc3339;
    let (KeyCommand::Add { db, .. } | KeyCommand::List { db, .. } | KeyCommand::Revoke { db, .. }) =
        &action;
    let store = startup::open_store(&db.database_url).await?;
    let now = chrono_now_ms();
    let result = match &action {
        KeyCommand::Add { name, .. } => {
            merchants::issue_merchant_key(store.as_ref(), now, name, &cli_actor())
                .await
                .map(|(_, k)| format!("{} {}\n", k.id, k.key))
        }
        KeyCommand::List { name, .. } => merchants::list_merchant_keys(store.as_ref(), name)
            .await
            .map(|keys| {
                keys.iter()
                    .map(|k| {
                        format!(
                            "{} {} created={} last_used={} revoked={}\n",
                            k.id,
                            if k.prefix.is_empty() { "-" } else { &k.prefix },
                            rfc3339(k.created_at),
                            k.last_used_at.map_or("never".into(), rfc3339),
                            k.revoked_at.map_or("no".into(), rfc3339),
                        )
                    })
                    .collect()
            }),
        KeyCommand::Revoke { name, key_id, .. } => {
            merchants::revoke_merchant_key(store.as_ref(), now, name, key_id, &cli_actor())
                .await
                .map(|()| format!("key {key_id} of merchant {name:?} revoked\n"))
        }
    };
    store.close().await;
    print!("{}", result?);
    Ok(())
}

async fn set_frozen(name: &str, db: &DbArgs, frozen: bool) -> Result<()> {
    use converge_server::service::merchants::{MerchantError, set_merchant_frozen};
    let store = startup::open_store(&db.database_url).await?;
    let result =
        set_merchant_frozen(store.as_ref(), chrono_now_ms(), name, frozen, &cli_actor()).await;
    store.close().await;
    match result {
        Ok(()) => {}
        Err(MerchantError::NoMerchant(_)) => bail!("no merchant named {name:?}"),
        Err(e) => return Err(e.into()),
    }
    println!(
        "merchant {name:?} {}",
        if frozen { "frozen" } else { "unfrozen" }
    );
    Ok(())
}

fn chrono_now_ms() -> i64 {
    use converge_server::domain::clock::{Clock, SystemClock};
    SystemClock.now_ms()
}

async fn channel_sim(args: ChannelSimArgs) -> Result<()> {
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

// --- verify (DESIGN.md "Convergence invariants") ---------------------------------------------

#[derive(Debug, Args)]
struct VerifyArgs {
    #[command(flatten)]
    db: DbArgs,
    /// The channel whose charges are checked (its `GET /charges` list); without it invariant 1
    /// is reported as not checked.
    #[arg(long, env = "CONVERGE_CHANNEL_URL", hide_env_values = true)]
    channel_url: Option<String>,
    /// Convergence window in seconds: a payment older than this must be terminal, SUCCESS, or
    /// named by an open error-pool item.
    #[arg(long, env = "CONVERGE_VERIFY_WINDOW_SECS", default_value_t = 300)]
    window_secs: u64,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

async fn verify(args: VerifyArgs) -> Result<()> {
    use converge_server::verify::{self, ChargeSource, HttpChargeSource, Window};
    let url = &args.db.database_url;
    if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        let path = path.split('?').next().unwrap_or(path);
        if path != ":memory:" && !url.contains("://") && !std::path::Path::new(path).exists() {
            bail!(
                "no database at {path:?}: give the --database-url (DATABASE_URL) of the database to verify"
            );
        }
    }
    let source = match &args.channel_url {
        Some(u) => Some(
            HttpChargeSource::new(u, std::time::Duration::from_secs(30))
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let window_ms = i64::try_from(args.window_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let store = startup::open_store(url).await?;
    let window = Window {
        now_ms: chrono_now_ms(),
        window_ms,
    };
    let result = verify::run(
        &*store,
        source.as_ref().map(|s| s as &dyn ChargeSource),
        window,
    )
    .await;
    store.close().await;
    let report = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    if !report.ok() {
        let named = report.offending_payments();
        let more = if named.len() > 10 {
            format!(" and {} more (see BREACH lines)", named.len() - 10)
        } else {
            String::new()
        };
        bail!(
            "verify found {} invariant breaches in {} payments: {}{more}",
            report.breaches.len(),
            named.len(),
            named.iter().take(10).copied().collect::<Vec<_>>().join(" ")
        );
    }
    Ok(())
}
