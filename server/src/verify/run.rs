//! The runner: gathers the facts (the store's [`Verify`](crate::store::Verify) queries, paged;
//! the channel's charges; the audit chain) and runs every check over them.

use std::collections::{BTreeMap, HashMap};

use crate::store::{Store, StoreError};

use super::breach::Breach;
use super::channel::{ChannelCharge, ChargeSource};
use super::checks::{
    Window, check_keys, check_ledger, check_outbox, check_payment, orphan_charges,
};
use super::report::{AuditChain, ChannelCheck, Report};

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

/// Gathers the facts and checks every invariant. `channel` None skips invariant 1.
pub async fn run(
    store: &dyn Store,
    channel: Option<&dyn ChargeSource>,
    window: Window,
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
    let mut breaches = Vec::new();
    let mut by_status = BTreeMap::new();
    let (mut unresolved, mut unresolved_in_pool) = (0, 0);
    let mut after = String::new();
    loop {
        let page = store.verify_payments_page(&after, PAGE_SIZE).await?;
        for p in &page {
            *by_status.entry(p.status.clone()).or_insert(0) += 1;
            // A status outside the table is reported by the payment's own checks; here it
            // counts as unresolved.
            let settled = p
                .status
                .parse::<crate::domain::state::PaymentStatus>()
                .is_ok_and(|s| s.is_settled());
            if !settled {
                unresolved += 1;
                if p.open_error_items > 0 {
                    unresolved_in_pool += 1;
                }
            }
            let charges = by_key
                .as_mut()
                .map(|m| m.remove(&p.channel_key).unwrap_or_default());
            breaches.extend(check_payment(p, charges.as_deref(), window));
        }
        match page.last() {
            Some(last) if page.len() as i64 == PAGE_SIZE => after = last.id.clone(),
            _ => break,
        }
    }
    if let Some(left) = &by_key {
        breaches.extend(orphan_charges(left.values().flatten()));
    }
    let ledger = store.ledger_totals().await?;
    breaches.extend(check_ledger(&ledger, &store.unbalanced_batches().await?));
    let keys = store.key_totals().await?;
    breaches.extend(check_keys(&keys));
    let audit = check_audit_chain(store).await?;
    if let AuditChain::Broken { first_bad } = &audit {
        breaches.push(Breach::AuditChainBroken {
            first_bad: first_bad.clone(),
        });
    }
    let outbox = store
        .verify_outbox(window.now_ms.saturating_sub(window.window_ms))
        .await?;
    breaches.extend(check_outbox(&outbox));
    Ok(Report {
        outbox,
        now_ms: window.now_ms,
        window_ms: window.window_ms,
        by_status,
        unresolved,
        unresolved_in_pool,
        ledger,
        keys,
        channel: channel_check,
        audit,
        breaches,
    })
}
