//! The runner: gathers the facts (the store's [`Verify`](crate::store::Verify) queries, paged;
//! the channel's charges; the audit chain) and runs every check over them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::channel::{Connector, HoldQueryOutcome};
use crate::domain::state::PaymentStatus;
use crate::store::{KeyTotals, Store, StoreError, VerifyPaymentRow};

use super::breach::Breach;
use super::channel::{ChannelCharge, ChargeSource};
use super::checks::{
    Window, check_keys, check_ledger, check_outbox, check_payment, orphan_charges,
};
use super::holds::{check_hold_at_channel, check_tombstones, is_manual};
use super::report::{AuditChain, ChannelCheck, HoldCheck, Report};

/// Payments read per page (memory stays bounded on large databases).
pub const PAGE_SIZE: i64 = 1_000;

/// Invariant 5: re-computes the whole audit chain with the same verification as `converge audit
/// verify` ([`crate::service::audit_chain::AuditVerdict::read`]) and maps its answer. This is the
/// one place `converge verify` learns about the audit log; [`AuditChain::NotAvailable`] is kept for
/// a store that has no audit log (reported as "no audit log yet", neither pass nor fail).
pub async fn check_audit_chain(store: &dyn Store) -> Result<AuditChain, StoreError> {
    let v = crate::service::audit_chain::AuditVerdict::read(store, None).await?;
    let (records, broken) = (v.records, v.broken);
    Ok(match broken {
        Some(b) => AuditChain::Broken {
            first_bad: format!("{} ({})", b.seq, b.reason),
        },
        None => AuditChain::Verified {
            records: u64::try_from(records).unwrap_or(0),
        },
    })
}

/// Invariant 5 within `scope`: [`check_audit_chain`], unless the caller says the chain's
/// head is one it saw verified ([`Scope::Changed`]'s `audit_unchanged`).
async fn audit_chain_in(store: &dyn Store, scope: &Scope) -> Result<AuditChain, StoreError> {
    match scope {
        Scope::Changed {
            audit_unchanged: Some(records),
            ..
        } => Ok(AuditChain::Verified {
            records: u64::try_from(*records).unwrap_or(0),
        }),
        _ => check_audit_chain(store).await,
    }
}

/// Why verification could not run (not a breach: nothing was concluded).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The database failed.
    #[error("database: {0}")]
    Store(#[from] StoreError),
    /// The channel could not be read.
    #[error("{0}")]
    Channel(String),
}

/// Manual payments whose hold is queried at the channel per run (the rest are checked in the
/// database only, and counted in the report): verify's cost stays bounded on large databases.
pub const HOLD_QUERIES: usize = 2_000;

/// Hold queries in flight at once.
const HOLD_QUERY_CONCURRENCY: usize = 8;

/// What the payment pages gave: counts, breaches, and the manual payments whose holds the
/// channel is asked about.
#[derive(Default)]
struct Pages {
    by_status: BTreeMap<String, i64>,
    unresolved: i64,
    unresolved_in_pool: i64,
    breaches: Vec<Breach>,
    manual: i64,
    to_query: Vec<VerifyPaymentRow>,
}

/// Which payments a run reads and checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every payment and every channel charge: what `converge verify` does.
    #[default]
    All,
    /// Incremental, for a caller that checks after every change (the simulator, issue 39):
    /// the payments changed at or after `since_ms` (epoch ms UTC) or that the window may
    /// find late (see
    /// [`Verify::verify_payments_changed_page`](crate::store::Verify::verify_payments_changed_page)),
    /// and the payments under `channel_keys` (the keys whose charge
    /// changed at the channel since); an orphan charge is looked for among `channel_keys`
    /// only; the ledger's batches written since the mark (its totals are left out); outcomes
    /// without their event among the payments and refunds written since the mark. The
    /// other aggregate checks (keys, audit chain, the rest of the outbox, tombstones) run whole
    /// unless `database_unchanged` says they would pass again, and the report's counts are
    /// the scope's. Sound only when every write stamps the
    /// clock's time on the row it changes and the clock does not go back: a caller runs
    /// [`Scope::All`] now and then as well.
    Changed {
        /// The mark: the time of the previous check.
        since_ms: i64,
        /// Channel keys whose charge changed since the mark.
        channel_keys: BTreeSet<String>,
        /// `Some(records)`: the audit log's head
        /// ([`Governance::audit_head`](crate::store::Governance::audit_head), seq and hash)
        /// is the one a previous run verified the chain up to, over `records` records, so
        /// the chain is not read again (the report counts `records`). Only a caller that
        /// compared the head itself sets it; None reads the whole chain.
        audit_unchanged: Option<i64>,
        /// True: the caller knows nothing was written to the database since the previous
        /// run, which passed (the simulator counts SQLite's `total_changes()`). The reads
        /// whose answer depends on the database alone (tombstones, ledger batches,
        /// Idempotency-Keys, outcomes without their event, the outbox's pending drift) would
        /// pass again and are left out; the ones that move with the clock (payments the
        /// window may find late, deliveries and publications past it) and the channel's
        /// still run. The report's key totals are then zero.
        database_unchanged: bool,
    },
}

/// Gathers the facts and checks every invariant. `channel` None skips invariant 1 and the
/// channel half of invariant 7.
pub async fn run(
    store: &dyn Store,
    channel: Option<&dyn ChargeSource>,
    window: Window,
) -> Result<Report, VerifyError> {
    run_scoped(store, channel, window, &Scope::All).await
}

/// [`run`] over the payments of `scope` only (see [`Scope::Changed`]).
pub async fn run_scoped(
    store: &dyn Store,
    channel: Option<&dyn ChargeSource>,
    window: Window,
    scope: &Scope,
) -> Result<Report, VerifyError> {
    // The channel first: a payment created after this read may own a charge not listed yet,
    // which reads as "0 or 1" (in flight), never as a false orphan or double charge.
    let (mut by_key, channel_check) = match channel {
        Some(src) => {
            let charges = src.all_charges().await.map_err(VerifyError::Channel)?;
            let check = ChannelCheck::Checked {
                source: src.describe(),
                records: charges.len(),
                succeeded: charges.iter().filter(|c| c.succeeded()).count(),
            };
            let mut map: HashMap<String, Vec<ChannelCharge>> = HashMap::new();
            for c in charges {
                map.entry(c.key.clone()).or_default().push(c);
            }
            (Some(map), check)
        }
        None => (None, ChannelCheck::Skipped),
    };
    let mut pages = check_payments(store, by_key.as_mut(), window, scope).await?;
    let mut breaches = std::mem::take(&mut pages.breaches);
    if let Some(left) = &by_key {
        match scope {
            Scope::All => breaches.extend(orphan_charges(left.values().flatten())),
            Scope::Changed { channel_keys, .. } => breaches.extend(orphan_charges(
                channel_keys.iter().filter_map(|k| left.get(k)).flatten(),
            )),
        }
    }
    let mut holds = HoldCheck {
        manual: pages.manual,
        not_queried: pages.manual - pages.to_query.len() as i64,
        ..HoldCheck::default()
    };
    match channel {
        Some(src) => {
            // Each hold is asked of the connector that took its payment; one whose
            // connector the source cannot query is counted as not queried.
            let (asked, unasked): (Vec<_>, Vec<_>) = std::mem::take(&mut pages.to_query)
                .into_iter()
                .partition(|p| src.holds(&p.connector).is_some());
            holds.channel = !asked.is_empty()
                || src
                    .holds(crate::service::connectors::DEFAULT_CONNECTOR)
                    .is_some();
            holds.queried = asked.len();
            holds.not_queried += unasked.len() as i64;
            breaches.extend(holds_at_channel(store, src, asked).await?);
        }
        None => holds.not_queried = pages.manual,
    }
    // Every entry is in a batch: when every batch written since the mark balances and the
    // ledger did before, the totals still do, so the incremental check leaves them out. An
    // outcome without its event, too, is new only in a payment or refund written since, and
    // a tombstoned payment only in a payment or tombstone written since.
    let (ledger, since) = match scope {
        Scope::All => (store.ledger_totals().await?, 0),
        Scope::Changed { since_ms, .. } => (Vec::new(), *since_ms),
    };
    let clock_only = scope.database_unchanged();
    let keys = if clock_only {
        KeyTotals::default()
    } else {
        database_checks(store, since, &ledger, &mut breaches).await?
    };
    let audit = audit_chain_in(store, scope).await?;
    if let AuditChain::Broken { first_bad } = &audit {
        breaches.push(Breach::AuditChainBroken {
            first_bad: first_bad.clone(),
        });
    }
    let outbox = store
        .verify_outbox(
            window.now_ms.saturating_sub(window.window_ms),
            since,
            clock_only,
        )
        .await?;
    breaches.extend(check_outbox(&outbox));
    Ok(Report {
        outbox,
        now_ms: window.now_ms,
        window_ms: window.window_ms,
        by_status: pages.by_status,
        unresolved: pages.unresolved,
        unresolved_in_pool: pages.unresolved_in_pool,
        ledger,
        keys,
        channel: channel_check,
        audit,
        holds,
        breaches,
    })
}

/// The checks whose answer depends on the database alone, over what was written at or after
/// `since` (epoch ms UTC; 0 for all): tombstones, ledger batches (with the `ledger` totals),
/// Idempotency-Keys. Adds their breaches to `breaches`; returns the key totals.
async fn database_checks(
    store: &dyn Store,
    since: i64,
    ledger: &[crate::store::LedgerTotal],
    breaches: &mut Vec<Breach>,
) -> Result<KeyTotals, VerifyError> {
    breaches.extend(check_tombstones(&store.tombstoned_payments(since).await?));
    breaches.extend(check_ledger(
        ledger,
        &store.unbalanced_batches(since).await?,
    ));
    let keys = store.key_totals().await?;
    breaches.extend(check_keys(&keys));
    Ok(keys)
}

impl Scope {
    /// [`Scope::Changed`]'s `database_unchanged`; false for [`Scope::All`].
    fn database_unchanged(&self) -> bool {
        matches!(
            self,
            Scope::Changed {
                database_unchanged: true,
                ..
            }
        )
    }
}

/// Reads every payment, page by page, and runs its own checks (invariants 1, 2, 4 and the
/// database half of 7); `by_key` (the channel's charges) loses each payment's charges.
async fn check_payments(
    store: &dyn Store,
    mut by_key: Option<&mut HashMap<String, Vec<ChannelCharge>>>,
    window: Window,
    scope: &Scope,
) -> Result<Pages, VerifyError> {
    let mut pages = Pages::default();
    let mut after = String::new();
    // Touched keys whose payment the pages held.
    let mut checked = BTreeSet::new();
    loop {
        let page = match scope {
            Scope::All => store.verify_payments_page(&after, PAGE_SIZE).await?,
            Scope::Changed { since_ms, .. } => {
                let cutoff = window.now_ms.saturating_sub(window.window_ms);
                store
                    .verify_payments_changed_page(*since_ms, cutoff, &after, PAGE_SIZE)
                    .await?
            }
        };
        for p in &page {
            if let Scope::Changed { channel_keys, .. } = scope {
                checked.extend(channel_keys.get(&p.channel_key).cloned());
            }
            pages.add(p, by_key.as_deref_mut(), window);
        }
        match page.last() {
            Some(last) if page.len() as i64 == PAGE_SIZE => after = last.id.clone(),
            _ => break,
        }
    }
    // A key touched at the channel under a payment the changed pages left out (a late
    // request charging a payment settled long ago): that payment is checked too.
    if let Scope::Changed { channel_keys, .. } = scope {
        let mut by_key = by_key;
        for key in channel_keys.difference(&checked) {
            let Some(payment) = store.payment_by_channel_key(key).await? else {
                continue; // an orphan: the caller reports it
            };
            if let Some(p) = store.verify_payment(&payment.id).await? {
                pages.add(&p, by_key.as_deref_mut(), window);
            }
        }
    }
    Ok(pages)
}

impl Pages {
    /// Counts payment `p` and runs its own checks with its charges, which leave `by_key`.
    fn add(
        &mut self,
        p: &VerifyPaymentRow,
        by_key: Option<&mut HashMap<String, Vec<ChannelCharge>>>,
        window: Window,
    ) {
        *self.by_status.entry(p.status.clone()).or_insert(0) += 1;
        // A status outside the table is reported by the payment's own checks; here it
        // counts as unresolved.
        let settled = p
            .status
            .parse::<crate::domain::state::PaymentStatus>()
            .is_ok_and(|s| s.is_settled());
        if !settled {
            self.unresolved += 1;
            if p.open_error_items > 0 {
                self.unresolved_in_pool += 1;
            }
        }
        let charges = by_key.map(|m| m.remove(&p.channel_key).unwrap_or_default());
        self.breaches
            .extend(check_payment(p, charges.as_deref(), window));
        if is_manual(p) {
            self.manual += 1;
            if self.to_query.len() < HOLD_QUERIES {
                self.to_query.push(p.clone());
            }
        }
    }
}

/// The channel half of invariant 7: each payment's hold queried and compared with its row.
/// A payment that disagrees is read again, with its hold, once: it may have moved while it
/// was checked (a capture or a void in flight); only a disagreement that stays is a breach.
async fn holds_at_channel(
    store: &dyn Store,
    source: &dyn ChargeSource,
    rows: Vec<VerifyPaymentRow>,
) -> Result<Vec<Breach>, VerifyError> {
    use futures_util::stream::{self, StreamExt, TryStreamExt};
    let check = |p: VerifyPaymentRow| async move {
        let Ok(status) = p.status.parse::<PaymentStatus>() else {
            return Ok(vec![]); // reported by the payment's own checks
        };
        let Some(connector) = source.holds(&p.connector) else {
            return Ok(vec![]); // left out by the caller
        };
        let answer = query_hold(connector, &p.channel_key).await?;
        let found = check_hold_at_channel(&p, status, &answer);
        if found.is_empty() {
            return Ok(found);
        }
        let Some(again) = store.verify_payment(&p.id).await? else {
            return Ok(found);
        };
        let status = again.status.parse::<PaymentStatus>().unwrap_or(status);
        let answer = query_hold(connector, &again.channel_key).await?;
        Ok::<_, VerifyError>(check_hold_at_channel(&again, status, &answer))
    };
    let mut found: Vec<Breach> = stream::iter(rows)
        .map(check)
        .buffer_unordered(HOLD_QUERY_CONCURRENCY)
        .try_concat()
        .await?;
    found.sort_by(|a, b| a.payment().cmp(&b.payment()));
    Ok(found)
}

/// The channel's answer about the hold under `key`; a failed query is asked again twice
/// before verify gives up (nothing is concluded from a channel that does not answer).
async fn query_hold(connector: &dyn Connector, key: &str) -> Result<HoldQueryOutcome, VerifyError> {
    let mut last = String::new();
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        match connector.query_hold(key).await {
            Ok(HoldQueryOutcome::Error { detail }) => last = detail,
            Ok(answer) => return Ok(answer),
            Err(unsupported) => return Err(VerifyError::Channel(unsupported.to_string())),
        }
    }
    Err(VerifyError::Channel(format!(
        "the channel's query of the hold under {key} failed three times: {last}"
    )))
}
