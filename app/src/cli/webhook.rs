//! `converge webhook ...` (a merchant's endpoints, as the merchant API manages them) and
//! `converge webhook-sink` (a receiver for tests and local development). DESIGN.md "Outbox,
//! merchant notifications, event stream".

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use clap::{Args, Subcommand};
use converge_server::channel::webhook_sink::{self, SinkConfig};
use converge_server::domain::clock::{Clock, SystemClock, rfc3339};
use converge_server::domain::freeze::{self, NewWork};
use converge_server::domain::secret_box::SecretBox;
use converge_server::domain::webhooks::Subscription;
use converge_server::service::Core;
use converge_server::service::webhooks::{WebhookSettings, new_endpoint_id};
use converge_server::store::{Merchant, Store};

use super::start::{self, cli_actor};

/// `converge webhook` subcommands.
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Register an endpoint for MERCHANT; prints `ENDPOINT_ID SECRET` (the secret once).
    Add {
        /// Merchant name.
        merchant: String,
        /// The endpoint URL (https or http; internal addresses refused unless
        /// --allow-private).
        url: String,
        /// Event types, comma-separated (payment.succeeded, payment.failed,
        /// payment.reversed, payment.refunded, refund.succeeded, refund.failed), or `*`.
        #[arg(long, default_value = "*")]
        events: String,
        /// Free text.
        #[arg(long, default_value = "")]
        description: String,
        /// Accept loopback and private addresses (local development, tests).
        #[arg(long, env = "CONVERGE_WEBHOOK_ALLOW_PRIVATE")]
        allow_private: bool,
        /// The most live endpoints one merchant may have, as the servers'
        /// `--max-endpoints-per-merchant`: one more is refused.
        #[arg(long, env = "CONVERGE_MAX_ENDPOINTS_PER_MERCHANT", default_value_t = converge_server::service::webhooks::DEFAULT_MAX_ENDPOINTS)]
        max_endpoints_per_merchant: usize,
        #[command(flatten)]
        db: super::DbArgs,
    },
    /// List MERCHANT's endpoints: one line each, the endpoint id first.
    List {
        /// Merchant name.
        merchant: String,
        #[command(flatten)]
        db: super::DbArgs,
    },
    /// Disable one of MERCHANT's endpoints (its undelivered events are abandoned).
    Disable {
        /// Merchant name.
        merchant: String,
        /// Endpoint id (`we_...`).
        endpoint: String,
        /// Why, for the audit log.
        #[arg(long, default_value = "disabled from the command line")]
        reason: String,
        #[command(flatten)]
        db: super::DbArgs,
    },
    /// Give one of MERCHANT's endpoints a new secret (printed once); the old one keeps
    /// signing beside it for --overlap-secs.
    Rotate {
        /// Merchant name.
        merchant: String,
        /// Endpoint id.
        endpoint: String,
        /// How long the old secret keeps signing (seconds).
        #[arg(long, default_value_t = 86_400)]
        overlap_secs: u64,
        #[command(flatten)]
        db: super::DbArgs,
    },
}

/// `converge webhook-sink` arguments.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3200")]
    bind: SocketAddr,
    /// Share (0..=1) of `/hooks/ok` deliveries answered with a seeded fault (500, 503, a
    /// 3 s hang, a slow 200).
    #[arg(long, default_value_t = 0.0)]
    fault_rate: f64,
    /// Seed of the faults.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// Runs the receiver until Ctrl-C.
pub async fn sink(args: SinkArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&args.fault_rate) {
        bail!("--fault-rate must be between 0 and 1");
    }
    let h = webhook_sink::spawn(
        SinkConfig {
            fault_rate: args.fault_rate,
            seed: args.seed,
        },
        args.bind,
    )
    .await
    .map_err(|e| anyhow!("cannot start the webhook sink on {}: {e}", args.bind))?;
    println!("webhook sink listening on {}", h.url);
    tokio::signal::ctrl_c().await.ok();
    Ok(())
}

async fn merchant_named(store: &dyn Store, name: &str) -> Result<Merchant> {
    store
        .merchants()
        .await?
        .into_iter()
        .find(|m| m.name == name)
        .ok_or_else(|| anyhow!("no merchant named {name:?}"))
}

/// A core for the endpoint use cases: no channel is called.
fn one_off_core(store: Arc<dyn Store>, settings: WebhookSettings, secrets: SecretBox) -> Core {
    start::one_off_core(
        store,
        None,
        std::time::Duration::from_secs(1),
        settings,
        secrets,
    )
}

/// Runs one `converge webhook` subcommand.
pub async fn run(action: WebhookCommand) -> Result<()> {
    let db = match &action {
        WebhookCommand::Add { db, .. }
        | WebhookCommand::List { db, .. }
        | WebhookCommand::Disable { db, .. }
        | WebhookCommand::Rotate { db, .. } => db.clone(),
    };
    let keys = db.clone();
    start::with_store(&db, |store| async move {
        let secrets = start::secrets(&keys, store.as_ref()).await?;
        run_on(store, action, secrets).await
    })
    .await
}

async fn run_on(store: Arc<dyn Store>, action: WebhookCommand, secrets: SecretBox) -> Result<()> {
    match action {
        WebhookCommand::Add {
            merchant,
            url,
            events,
            description,
            allow_private,
            max_endpoints_per_merchant,
            ..
        } => {
            let endpoint = NewEndpoint {
                url,
                events,
                description,
                allow_private,
                max_endpoints_per_merchant,
            };
            add(store, secrets, &merchant, endpoint).await
        }
        WebhookCommand::List { merchant, .. } => list(store.as_ref(), &merchant).await,
        WebhookCommand::Disable {
            merchant,
            endpoint,
            reason,
            ..
        } => disable(store, secrets, &merchant, &endpoint, &reason).await,
        WebhookCommand::Rotate {
            merchant,
            endpoint,
            overlap_secs,
            ..
        } => rotate(store, secrets, &merchant, &endpoint, overlap_secs).await,
    }
}

/// `webhook add`'s endpoint, as given.
struct NewEndpoint {
    url: String,
    /// Comma-separated event types, or `*`.
    events: String,
    description: String,
    allow_private: bool,
    /// The cap of live endpoints per merchant.
    max_endpoints_per_merchant: usize,
}

/// `webhook add`: registers the endpoint (refused for a frozen merchant) and prints its id
/// and secret.
async fn add(
    store: Arc<dyn Store>,
    secrets: SecretBox,
    merchant: &str,
    endpoint: NewEndpoint,
) -> Result<()> {
    let m = merchant_named(store.as_ref(), merchant).await?;
    freeze::may_start(m.frozen, NewWork::Endpoints)
        .map_err(|refused| anyhow!("merchant {merchant:?}: {refused}"))?;
    let core = one_off_core(
        store,
        WebhookSettings {
            allow_private: endpoint.allow_private,
            max_endpoints_per_merchant: endpoint.max_endpoints_per_merchant,
            ..WebhookSettings::default()
        },
        secrets,
    );
    let events: Vec<String> = endpoint
        .events
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let created = core
        .create_endpoint(
            &new_endpoint_id(),
            m.id,
            &endpoint.url,
            &events,
            &endpoint.description,
            &cli_actor(),
        )
        .await
        .map_err(|e| anyhow!("{e}"))?;
    println!("{} {}", created.endpoint.id, created.secret);
    eprintln!("endpoint registered; the secret above is shown once");
    Ok(())
}

/// `webhook list`: one line per endpoint of the merchant, its id first.
async fn list(store: &dyn Store, merchant: &str) -> Result<()> {
    let m = merchant_named(store, merchant).await?;
    for e in store.endpoints(Some(m.id)).await? {
        println!(
            "{} {} {} {} created {}{}",
            e.id,
            e.status,
            e.url,
            Subscription::from_stored(&e.enabled_events)
                .names()
                .join(","),
            rfc3339(e.created_at),
            e.disabled_reason
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// `webhook disable`: disables one of the merchant's endpoints (another merchant's is an
/// error).
async fn disable(
    store: Arc<dyn Store>,
    secrets: SecretBox,
    merchant: &str,
    endpoint: &str,
    reason: &str,
) -> Result<()> {
    let m = merchant_named(store.as_ref(), merchant).await?;
    let core = one_off_core(store, WebhookSettings::default(), secrets);
    core.merchant_endpoint(m.id, endpoint)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let changed = core
        .set_endpoint_enabled(endpoint, false, reason, &cli_actor())
        .await
        .map_err(|e| anyhow!("{e}"))?;
    println!(
        "{endpoint} {}",
        if changed {
            "disabled"
        } else {
            "was already disabled"
        }
    );
    Ok(())
}

/// `webhook rotate`: a new secret for one of the merchant's endpoints, printed once; the old
/// one keeps signing for `overlap_secs`.
async fn rotate(
    store: Arc<dyn Store>,
    secrets: SecretBox,
    merchant: &str,
    endpoint: &str,
    overlap_secs: u64,
) -> Result<()> {
    let m = merchant_named(store.as_ref(), merchant).await?;
    let core = one_off_core(
        store,
        WebhookSettings {
            secret_overlap_ms: overlap_secs.saturating_mul(1000).min(i64::MAX as u64) as i64,
            ..WebhookSettings::default()
        },
        secrets,
    );
    core.merchant_endpoint(m.id, endpoint)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let rotated = core
        .rotate_endpoint_secret(endpoint, &cli_actor())
        .await
        .map_err(|e| anyhow!("{e}"))?;
    println!("{} {}", rotated.endpoint.id, rotated.secret);
    eprintln!(
        "the previous secret keeps signing until {}",
        rotated
            .endpoint
            .previous_expires_at
            .map(rfc3339)
            .unwrap_or_else(|| rfc3339(SystemClock.now_ms()))
    );
    Ok(())
}
