//! `converge ledger day --date D`: what an accounting day's ledger batches moved, as finance
//! closes the day (the service's [`Core::ledger_day`]).
//!
//! [`Core::ledger_day`]: converge_server::service::Core::ledger_day

use anyhow::Result;
use clap::{Args, Subcommand};
use converge_server::domain::money;
use converge_server::service::accounting::LedgerDay;

use super::DbArgs;
use super::start;

#[derive(Debug, Subcommand)]
pub(super) enum LedgerCommand {
    /// One accounting day (dated by the server's --accounting-timezone and
    /// --accounting-cutoff): per currency and kind, the batches and what they moved on the
    /// merchants' accounts, then each currency's net to merchants and fee revenue.
    Day(DayArgs),
}

#[derive(Debug, Args)]
pub(super) struct DayArgs {
    /// The accounting day, YYYY-MM-DD.
    #[arg(long)]
    date: String,
    /// One JSON document, amounts in minor units.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// Runs one `converge ledger` subcommand.
pub(super) async fn run(action: LedgerCommand) -> Result<()> {
    let LedgerCommand::Day(DayArgs { date, json, db }) = action;
    let day =
        start::with_records_core(&db, |core| async move { Ok(core.ledger_day(&date).await?) })
            .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&day)?);
    } else {
        print!("{}", render(&day));
    }
    Ok(())
}

/// The day as lines a person reads, amounts in major units with their currency.
fn render(day: &LedgerDay) -> String {
    let mut out = format!("accounting day {}\n", day.date);
    if day.lines.is_empty() {
        out.push_str("no ledger batches are dated this day\n");
    }
    for l in &day.lines {
        out.push_str(&format!(
            "{} {:<8} batches={:<6} to_merchants={} from_merchants={}\n",
            l.currency,
            l.kind,
            l.batches,
            money::display(l.payable_credits, &l.currency),
            money::display(l.payable_debits, &l.currency),
        ));
    }
    for t in &day.totals {
        out.push_str(&format!(
            "{} total    net_to_merchants={} fee_revenue={}\n",
            t.currency,
            money::display(t.net_to_merchants, &t.currency),
            money::display(t.fee_revenue, &t.currency),
        ));
    }
    out
}
