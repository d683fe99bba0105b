//! `converge merchant ...`: merchants and their API keys, over the service's merchant use
//! cases (each audited as the CLI's actor).

use anyhow::{Result, bail};
use clap::Subcommand;

use converge_server::service::merchant_connectors::ConnectorChoice;

use super::DbArgs;
use super::start::{self, cli_actor, now_ms};

#[derive(Debug, Subcommand)]
pub(super) enum MerchantCommand {
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
        /// Why, for the audit record.
        #[arg(long, default_value = "frozen from the command line on the server")]
        reason: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Unfreeze a merchant.
    Unfreeze {
        /// Merchant name.
        name: String,
        /// Why, for the audit record.
        #[arg(long, default_value = "unfrozen from the command line on the server")]
        reason: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// A merchant's fees (issue 35): with --percent and --fixed, a new pricing version that
    /// prices every charge, capture and merchant refund posted from now on (fee = percent of
    /// the captured amount rounded half-even, plus the fixed fee in minor units, at most the
    /// amount; a refund pays --refund-fixed, at most itself); without, its versions, newest
    /// first. Audited.
    Pricing {
        /// Merchant name.
        name: String,
        /// The percentage of each captured amount, such as 2.9 (0 to 100, at most 4 decimals).
        #[arg(long, requires = "fixed")]
        percent: Option<String>,
        /// The fixed fee added to each capture, in minor units of its currency, such as 30.
        #[arg(long, requires = "percent")]
        fixed: Option<i64>,
        /// The fee of each merchant refund, in minor units of its currency (at most the
        /// refund; default none).
        #[arg(long, requires = "percent", default_value_t = 0)]
        refund_fixed: i64,
        #[command(flatten)]
        db: DbArgs,
    },
    /// A merchant's API keys: several at once, each revocable (rotation: add, switch, revoke).
    Key {
        #[command(subcommand)]
        action: KeyCommand,
    },
    /// Where the merchant's new payments go: `stripe` (its own Stripe account; the secret key
    /// is read from stdin's first line, webhook signing secrets from the lines after it) or
    /// `sandbox` (back to the default connector; the account is kept for its open payments).
    /// Without a kind, shows the current one. Audited; secrets are sealed and never shown.
    Connector {
        /// Merchant name.
        name: String,
        /// `stripe` or `sandbox`; none: show.
        kind: Option<ConnectorKind>,
        /// The PSP's API base URL.
        #[arg(long, default_value = "https://api.stripe.com")]
        api_base: String,
        /// Read the secret key (first line) and webhook signing secrets (further lines) from
        /// stdin; required for `stripe`.
        #[arg(long)]
        secret_key_stdin: bool,
        /// The PaymentMethod payments are confirmed with (default pm_card_visa, a test card).
        #[arg(long)]
        payment_method: Option<String>,
        /// Why, for the audit record.
        #[arg(
            long,
            default_value = "connector set from the command line on the server"
        )]
        reason: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// A connector kind a merchant can be put on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ConnectorKind {
    /// Its own Stripe account.
    Stripe,
    /// The default connector (the sandbox, or --channel-url).
    Sandbox,
}

#[derive(Debug, Subcommand)]
pub(super) enum KeyCommand {
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

/// Runs one `converge merchant` subcommand.
pub(super) async fn run(action: MerchantCommand) -> Result<()> {
    match action {
        MerchantCommand::Add { name, db } => {
            let (m, key) = start::with_records_core(&db, |core| async move {
                Ok(core.add_merchant(now_ms(), &name, &cli_actor()).await?)
            })
            .await?;
            println!("{}", key.key);
            eprintln!(
                "merchant {:?} created; the API key above is shown once (its id, for `merchant key revoke`: {})",
                m.name, key.id
            );
            Ok(())
        }
        MerchantCommand::Key { action } => merchant_key(action).await,
        MerchantCommand::Pricing {
            name,
            percent,
            fixed,
            refund_fixed,
            db,
        } => pricing(&name, percent.zip(fixed.map(|f| (f, refund_fixed))), &db).await,
        MerchantCommand::Connector {
            name,
            kind,
            api_base,
            secret_key_stdin,
            payment_method,
            reason,
            db,
        } => {
            let choice = match kind {
                None => return show_connector(&name, &db).await,
                Some(ConnectorKind::Sandbox) => ConnectorChoice::Default,
                Some(ConnectorKind::Stripe) => {
                    if !secret_key_stdin {
                        bail!("stripe needs --secret-key-stdin (the key is never an argument)");
                    }
                    let (secret_key, webhook_secrets) = read_secrets()?;
                    ConnectorChoice::Stripe {
                        api_base,
                        secret_key,
                        webhook_secrets,
                        payment_method,
                    }
                }
            };
            set_connector(&name, &db, &choice, &reason).await
        }
        MerchantCommand::Freeze { name, reason, db } => set_frozen(&name, &db, true, &reason).await,
        MerchantCommand::Unfreeze { name, reason, db } => {
            set_frozen(&name, &db, false, &reason).await
        }
    }
}

async fn merchant_key(action: KeyCommand) -> Result<()> {
    use converge_server::domain::clock::rfc3339;
    let (KeyCommand::Add { db, .. } | KeyCommand::List { db, .. } | KeyCommand::Revoke { db, .. }) =
        &action;
    let db = db.clone();
    let now = now_ms();
    let out = start::with_records_core(&db, |core| async move {
        Ok(match &action {
            KeyCommand::Add { name, .. } => core
                .issue_merchant_key(now, name, &cli_actor())
                .await
                .map(|(_, k)| format!("{} {}\n", k.id, k.key))?,
            KeyCommand::List { name, .. } => core.list_merchant_keys(name).await.map(|keys| {
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
                    .collect::<String>()
            })?,
            KeyCommand::Revoke { name, key_id, .. } => core
                .revoke_merchant_key(now, name, key_id, &cli_actor())
                .await
                .map(|()| format!("key {key_id} of merchant {name:?} revoked\n"))?,
        })
    })
    .await?;
    print!("{out}");
    Ok(())
}

async fn set_frozen(name: &str, db: &DbArgs, frozen: bool, reason: &str) -> Result<()> {
    use converge_server::service::merchants::MerchantError;
    start::with_records_core(db, |core| async move {
        match core
            .set_merchant_frozen(now_ms(), name, frozen, reason, &cli_actor())
            .await
        {
            Ok(()) => Ok(()),
            Err(MerchantError::NoMerchant(_)) => bail!("no merchant named {name:?}"),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    println!(
        "merchant {name:?} {}",
        if frozen { "frozen" } else { "unfrozen" }
    );
    Ok(())
}

/// Sets merchant `name`'s pricing (`Some((percent, (fixed, refund fee)))`) and prints it, or prints its
/// versions, newest first: `vVERSION percent=P fixed=F refund=R since=RFC3339`.
async fn pricing(name: &str, set: Option<(String, (i64, i64))>, db: &DbArgs) -> Result<()> {
    use converge_server::domain::{clock::rfc3339, fees::display_percent};
    use converge_server::service::merchants::MerchantError;
    let versions = start::with_records_core(db, |core| async move {
        let answer = match &set {
            Some((percent, fees)) => core
                .set_merchant_pricing(now_ms(), name, percent, *fees, &cli_actor())
                .await
                .map(|p| vec![p]),
            None => core.merchant_pricing(name).await,
        };
        match answer {
            Ok(versions) => Ok(versions),
            Err(MerchantError::NoMerchant(_)) => bail!("no merchant named {name:?}"),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    if versions.is_empty() {
        println!("merchant {name:?} has no pricing: no fees are charged");
    }
    for p in versions {
        println!(
            "v{} percent={} fixed={} refund={} since={}",
            p.version,
            display_percent(p.percent_ppm),
            p.fixed_fee,
            p.refund_fee,
            rfc3339(p.created_at)
        );
    }
    Ok(())
}

/// The secret key (stdin's first line) and the webhook signing secrets (the non-empty lines
/// after it). Errors: no key.
fn read_secrets() -> Result<(String, Vec<String>)> {
    use std::io::BufRead;
    let mut lines = std::io::stdin()
        .lock()
        .lines()
        .map(|l| l.map(|l| l.trim().to_owned()))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    let key = lines.next().filter(|k| !k.is_empty());
    let Some(key) = key else {
        bail!("no secret key on stdin's first line");
    };
    Ok((key, lines.filter(|l| !l.is_empty()).collect()))
}

async fn set_connector(
    name: &str,
    db: &DbArgs,
    choice: &ConnectorChoice,
    reason: &str,
) -> Result<()> {
    use converge_server::service::merchants::MerchantError;
    let keys = db.clone();
    start::with_store(db, |store| async move {
        let secrets = start::secrets(&keys, store.as_ref()).await?;
        let core = start::one_off_core(
            store,
            None,
            std::time::Duration::from_secs(1),
            Default::default(),
            secrets,
        );
        match core
            .set_merchant_connector(now_ms(), name, choice, reason, &cli_actor())
            .await
        {
            Ok(()) => Ok(()),
            Err(MerchantError::NoMerchant(_)) => bail!("no merchant named {name:?}"),
            Err(e) => bail!("{e}"),
        }
    })
    .await?;
    show_connector(name, db).await
}

async fn show_connector(name: &str, db: &DbArgs) -> Result<()> {
    let (known, accounts) = start::with_records_core(db, |core| async move {
        let known = core.store.merchants().await?.iter().any(|m| m.name == name);
        Ok((known, core.merchant_accounts_view().await?))
    })
    .await?;
    if !known {
        bail!("no merchant named {name:?}");
    }
    match accounts.iter().find(|a| a.merchant == name && a.routed) {
        Some(a) => println!(
            "merchant {name:?}: connector {} ({} at {}, key {}); its webhooks: POST /v1/connectors/{}/callbacks",
            a.connector, a.kind, a.api_base, a.key_hint, a.connector
        ),
        None => println!("merchant {name:?}: connector sandbox (the default)"),
    }
    Ok(())
}
