//! Subcommands of `converge`. Flags have environment equivalents (`DATABASE_URL`,
//! `CONVERGE_BIND`, ...).
//!
//! One file per command group, each a thin adapter from flags to the service layer and from
//! its answer to one line of output (or one line on stderr and a non-zero exit):
//! - [`serve`]: the long-running processes (`serve`, `worker`, `relay`, `channel-sim`);
//! - [`merchant`]: `merchant add|freeze|unfreeze|key ...`;
//! - [`user`]: `user add|disable`;
//! - [`reconcile`]: `reconcile` (a day against the channel's statement);
//! - [`ledger`]: `ledger day` (an accounting day's batches and totals);
//! - [`audit`]: `audit verify|keygen|checkpoint|export`;
//! - [`verify`]: `verify` (the convergence invariants);
//! - [`simulate`]: `simulate` (the deterministic simulator, issue 39);
//! - [`webhook`]: `webhook add|list|disable|rotate` and `webhook-sink`;
//! - [`start`]: what every one-off command starts from (the store, the core, the actor).

mod audit;
mod ledger;
mod merchant;
mod reconcile;
mod serve;
mod simulate;
mod start;
mod user;
mod verify;
mod webhook;

use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand};
use converge_server::config::Settings;

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
    Reconcile(reconcile::ReconcileArgs),
    /// Apply database migrations and exit.
    Migrate(DbArgs),
    /// Read the ledger by accounting day.
    Ledger {
        #[command(subcommand)]
        action: ledger::LedgerCommand,
    },
    /// Manage merchants.
    Merchant {
        #[command(subcommand)]
        action: merchant::MerchantCommand,
    },
    /// Verify or export the audit log.
    Audit {
        #[command(subcommand)]
        action: audit::AuditCommand,
    },
    /// Manage console users.
    User {
        #[command(subcommand)]
        action: user::UserCommand,
    },
    /// Check DESIGN.md's convergence invariants against the database and the channel; prints a
    /// report and exits non-zero on any breach, naming each offending payment.
    Verify(verify::VerifyArgs),
    /// Run the deterministic simulator: converge's services, jobs and SQLite store under
    /// seeded merchants, faults and simulated time, checking the invariants at every step.
    /// Prints the trace's hash; exits non-zero on a violation with the command replaying it.
    Simulate(simulate::SimulateArgs),
    /// Run the sandbox channel alone (a PSP simulator over HTTP).
    ChannelSim(serve::ChannelSimArgs),
    /// Manage a merchant's webhook endpoints.
    Webhook {
        #[command(subcommand)]
        action: webhook::WebhookCommand,
    },
    /// Run a webhook receiver that records what it gets (tests, local development).
    WebhookSink(webhook::SinkArgs),
}

/// `--database-url`, shared by the one-off commands.
#[derive(Debug, Clone, Args)]
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

    /// The key that seals secrets at rest (`serve --help`, "Secrets at rest").
    #[command(flatten)]
    pub(crate) secrets: converge_server::config::SecretsSettings,
}

/// Runs one subcommand.
pub async fn run(cli: Cli) -> Result<()> {
    let Some(command) = cli.command else {
        bail!("no command: the command line was not read with Cli::parse_command_line");
    };
    match command {
        Command::Serve(settings) => serve::serve(settings).await,
        Command::Worker(settings) => serve::worker(settings).await,
        Command::Relay(settings) => serve::relay(settings).await,
        Command::Reconcile(args) => reconcile::reconcile(args).await,
        Command::Migrate(db) => start::migrate(&db).await,
        Command::Ledger { action } => ledger::run(action).await,
        Command::Merchant { action } => merchant::run(action).await,
        Command::User { action } => user::run(action).await,
        Command::Audit { action } => audit::run(action).await,
        Command::ChannelSim(args) => serve::channel_sim(args).await,
        Command::Verify(args) => verify::run(args).await,
        Command::Simulate(args) => simulate::run(args).await,
        Command::Webhook { action } => webhook::run(action).await,
        Command::WebhookSink(args) => webhook::sink(args).await,
    }
}
