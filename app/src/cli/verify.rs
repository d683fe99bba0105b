//! `converge verify` (DESIGN.md "Convergence invariants"): runs
//! [`converge_server::verify::run`] over the database (and the channel's charge list when
//! given), prints its report, and exits non-zero on any breach.

use anyhow::{Result, bail};
use clap::Args;

use super::DbArgs;
use super::start::{self, now_ms};

#[derive(Debug, Args)]
pub(super) struct VerifyArgs {
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
    /// How long the servers wait for a customer's 3-D Secure step (their
    /// `--action-window-secs`, the same variable): a payment in REQUIRES_ACTION must converge
    /// within this plus the convergence window of when it began waiting.
    #[arg(long, env = "CONVERGE_ACTION_WINDOW_SECS", default_value_t = converge_server::service::customer_action::DEFAULT_ACTION_WINDOW_SECS)]
    action_window_secs: u64,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `converge verify`: the report on stdout (text or `--json`); any breach is an error
/// naming the offending payments.
pub(super) async fn run(args: VerifyArgs) -> Result<()> {
    use converge_server::verify::{
        self, ChargeSource, ChargeSources, HttpChargeSource, StripeChargeSource, Window,
    };
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
    let mut sources = ChargeSources::default();
    if let Some(u) = &args.channel_url {
        let sandbox = HttpChargeSource::new(u, std::time::Duration::from_secs(30))
            .map_err(anyhow::Error::msg)?;
        sources = sources.with_default(Box::new(sandbox));
    }
    let window_ms = i64::try_from(args.window_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let window = Window {
        now_ms: now_ms(),
        window_ms,
        action_window_ms: i64::try_from(args.action_window_secs.saturating_mul(1000))
            .unwrap_or(i64::MAX),
    };
    let keys = args.db.clone();
    let report = start::with_store(&args.db, |store| async move {
        // Each merchant's own PSP account is a channel too: its charges are checked with the
        // default connector's (issue 38), so a payment made there is never an orphan.
        let checked = args.channel_url.is_some();
        let accounts = if !checked || store.merchant_connectors().await?.is_empty() {
            Vec::new()
        } else {
            let secrets = start::secrets(&keys, store.as_ref()).await?;
            let core = start::one_off_core(
                store.clone(),
                None,
                std::time::Duration::from_secs(1),
                Default::default(),
                secrets,
            );
            core.stripe_accounts().await.map_err(anyhow::Error::msg)?
        };
        for (name, c) in accounts {
            sources = sources.with_named(&name, Box::new(StripeChargeSource::new(&name, c)));
        }
        let source = (!sources.is_empty()).then_some(&sources as &dyn ChargeSource);
        Ok(verify::run(&*store, source, window).await?)
    })
    .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    if !report.ok() {
        bail!("{}", report.summary());
    }
    Ok(())
}
