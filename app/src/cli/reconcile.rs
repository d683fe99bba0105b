//! `converge reconcile`: one day against the channel's settlement statement (fetched, or a
//! file); differences go to the error pool (the service's [`Core::reconcile`]).
//!
//! [`Core::reconcile`]: converge_server::service::Core::reconcile

use anyhow::{Context, Result, bail};
use clap::Args;

use super::DbArgs;
use super::start;

#[derive(Debug, Args)]
pub(super) struct ReconcileArgs {
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

/// `converge reconcile`: reads the statement (the file, else the channel's), reconciles the
/// day and prints its count of lines and differences.
pub(super) async fn reconcile(args: ReconcileArgs) -> Result<()> {
    let ReconcileArgs {
        date,
        file,
        channel_url,
        db,
    } = args;
    let (text, source) = match &file {
        Some(path) => {
            // Bytes, not text: a file that is not UTF-8 is judged (and reported to the error
            // pool with its line) by the reconciliation itself.
            let text = std::fs::read(path)
                .with_context(|| format!("cannot read statement file {}", path.display()))?;
            (Some(text), path.display().to_string())
        }
        None if channel_url.is_some() => (None, "channel".to_string()),
        None => bail!(
            "give --file STATEMENT.csv, or --channel-url URL to fetch the statement (with the in-process sandbox: the url `serve` logs as `sandbox channel started`, or the one fixed by `serve --channel-bind`)"
        ),
    };
    let keys = db.clone();
    let report = start::with_store(&db, |store| async move {
        let secrets = start::secrets(&keys, store.as_ref()).await?;
        let core = start::one_off_core(
            store,
            channel_url.as_deref(),
            std::time::Duration::from_secs(10),
            Default::default(),
            secrets,
        );
        Ok(core.reconcile(&date, &source, text).await?)
    })
    .await?;
    println!(
        "reconciled {}: {} statement lines, {} differences sent to the error pool",
        report.day, report.rows, report.differences
    );
    Ok(())
}
