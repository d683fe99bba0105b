//! `converge verify`: checks DESIGN.md "Convergence invariants" against the database and the
//! channel, and says which payment breaks which invariant.
//!
//! The checks are plain Rust over facts ([`check_payment`], [`check_ledger`],
//! [`orphan_charges`]) and are unit-tested without a database; [`run`] gathers the facts (the
//! [`Verify`](crate::store::Verify) queries, paged, and the channel's charge list from
//! [`ChargeSource`]) and builds a [`Report`].
//!
//! What is checked, by invariant number:
//! 1. Channel: at most one successful channel charge per payment; exactly one for every
//!    charged payment (CHANNEL_SUCCESS, SUSPENSE, SUCCESS, REFUNDED, REVERSED); none for a
//!    FAILED one; amount and currency as the payment's; no charge whose key no payment owns;
//!    refunds at the channel equal the succeeded refunds (when none is pending).
//! 2. Ledger: debits equal credits per currency and per batch; exactly one charge batch (of
//!    the payment's amount) for SUCCESS, REFUNDED and REVERSED, none before SUCCESS; one batch
//!    per succeeded refund; refund totals consistent with the payment.
//! 3. Replays byte for byte: the chaos run checks the bytes; here, every completed
//!    Idempotency-Key must still hold a stored response.
//! 4. Convergence window: nothing non-terminal (not FAILED, REVERSED, REFUNDED or SUCCESS),
//!    and no refund still pending, older than the window (by `created_at`; pending refunds by
//!    the payment's `updated_at`) unless an open error-pool item names the payment.
//! 5. Audit chain: every record's hash links to the one before and matches its content
//!    ([`check_audit_chain`], the same check as `converge audit verify`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::state::PaymentStatus;
use crate::store::{
    KeyTotals, LedgerTotal, OutboxFacts, Store, StoreError, UnbalancedBatch, VerifyPaymentRow,
};

/// Payments read per page (memory stays bounded on large databases).
pub const PAGE_SIZE: i64 = 1_000;

/// A charge as the channel reports it (sandbox `GET /charges`). Amounts in minor units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelCharge {
    /// The channel key it was made under (the payment's `channel_key`).
    pub key: String,
    /// `succeeded` or `declined`; only `succeeded` holds money.
    pub status: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Charge requests the channel saw for the key.
    #[serde(default)]
    pub attempts: i64,
    /// Total refunded against the charge, minor units.
    #[serde(default)]
    pub refunded: i64,
}

impl ChannelCharge {
    /// The charge holds (or held) money.
    pub fn succeeded(&self) -> bool {
        self.status == "succeeded"
    }
}

/// Where the channel's charges come from.
#[async_trait]
pub trait ChargeSource: Send + Sync {
    /// Every charge the channel stores (all pages), or why it could not be read.
    async fn all_charges(&self) -> Result<Vec<ChannelCharge>, String>;
    /// Where the charges come from, for the report (e.g. the channel URL).
    fn describe(&self) -> String;
}

/// Reads the sandbox channel's `GET /charges?after=&limit=` pages over HTTP.
#[derive(Debug, Clone)]
pub struct HttpChargeSource {
    base: String,
    client: reqwest::Client,
}

#[derive(Deserialize)]
struct ChargePage {
    charges: Vec<ChannelCharge>,
    next: Option<String>,
}

impl HttpChargeSource {
    /// A source for the channel at `base_url` (e.g. `http://127.0.0.1:3100`), each page
    /// bounded by `timeout`. Errors: a one-line reason when the URL is not an http(s) URL.
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, String> {
        match url::Url::parse(base_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && !u.cannot_be_a_base() => {}
            _ => {
                return Err(format!(
                    "--channel-url {base_url:?} is not an http(s) URL such as http://127.0.0.1:3100"
                ));
            }
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("building the HTTP client: {e}"))?;
        Ok(Self {
            base: base_url.trim_end_matches('/').to_string(),
            client,
        })
    }
}

#[async_trait]
impl ChargeSource for HttpChargeSource {
    async fn all_charges(&self) -> Result<Vec<ChannelCharge>, String> {
        let mut all = Vec::new();
        let mut after = String::new();
        loop {
            let url = format!("{}/charges", self.base);
            let resp = self
                .client
                .get(&url)
                .query(&[("after", after.as_str()), ("limit", "5000")])
                .send()
                .await
                .map_err(|e| format!("cannot reach the channel at {}: {e}", self.base))?;
            let status = resp.status();
            if !status.is_success() {
                return Err(format!(
                    "the channel at {} answered {status} to GET /charges (a channel without the bulk charge list cannot be verified)",
                    self.base
                ));
            }
            let page: ChargePage = resp.json().await.map_err(|e| {
                format!("the channel's GET /charges answer is not a charge page: {e}")
            })?;
            all.extend(page.charges);
            match page.next {
                Some(n) if n > after => after = n,
                _ => return Ok(all),
            }
        }
    }

    fn describe(&self) -> String {
        self.base.clone()
    }
}

/// Which invariant a breach belongs to (DESIGN.md "Convergence invariants" numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Invariant {
    /// 1. One channel charge per charged payment, none for others.
    Channel,
    /// 2. Ledger balanced; one charge batch per charged payment.
    Ledger,
    /// 3. Replays byte for byte (stored responses present).
    Replay,
    /// 4. Nothing non-terminal past the window unless in the error pool.
    Window,
    /// 5. Audit chain.
    Audit,
    /// 6. One event per outcome, each delivered to its endpoints (or in the error pool).
    Events,
}

impl Invariant {
    /// Number and name, as printed.
    pub fn title(self) -> &'static str {
        match self {
            Invariant::Channel => "1. channel charges",
            Invariant::Ledger => "2. ledger",
            Invariant::Replay => "3. stored responses",
            Invariant::Window => "4. convergence window",
            Invariant::Audit => "5. audit chain",
            Invariant::Events => "6. events and deliveries",
        }
    }
}

/// One broken invariant. Payment-level breaches name the payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Breach {
    /// A charged payment without exactly one successful channel charge, or any payment with
    /// more than one (a double charge).
    ChargeCount {
        /// Payment.
        payment: String,
        /// Its status.
        status: String,
        /// Successful charges the channel holds for its key.
        charges: usize,
        /// What the status requires (`"1"`, `"0"`, `"0 or 1"`).
        expected: &'static str,
    },
    /// A channel charge whose amount or currency differs from the payment's.
    ChargeMismatch {
        /// Payment.
        payment: String,
        /// Payment's amount and currency.
        local: (i64, String),
        /// Channel's amount and currency.
        channel: (i64, String),
    },
    /// A successful channel charge whose key no payment owns: money taken with no record.
    OrphanCharge {
        /// Channel key.
        key: String,
        /// Minor units.
        amount: i64,
        /// ISO 4217.
        currency: String,
    },
    /// Refunded at the channel differs from the payment's succeeded refunds.
    RefundMismatch {
        /// Payment.
        payment: String,
        /// Succeeded refunds in the database, minor units.
        local: i64,
        /// Refunded at the channel, minor units.
        channel: i64,
    },
    /// Wrong number of charge batches for the payment's status.
    ChargeBatchCount {
        /// Payment.
        payment: String,
        /// Its status.
        status: String,
        /// Charge batches.
        batches: i64,
        /// Required count.
        expected: i64,
    },
    /// The charge batch does not post the payment's amount.
    ChargeBatchAmount {
        /// Payment.
        payment: String,
        /// Payment amount, minor units.
        amount: i64,
        /// Debits of its charge batch, minor units.
        posted: i64,
    },
    /// Succeeded refunds and refund batches differ in number.
    RefundBatchCount {
        /// Payment.
        payment: String,
        /// Succeeded refunds.
        refunds: i64,
        /// Their batches.
        batches: i64,
    },
    /// The payment's refund totals do not add up (reserved vs succeeded, REFUNDED vs amount).
    RefundTotals {
        /// Payment.
        payment: String,
        /// What is wrong.
        detail: String,
    },
    /// A ledger batch that does not balance.
    UnbalancedBatch {
        /// Payment.
        payment: String,
        /// Batch id.
        batch: i64,
        /// What is wrong.
        detail: String,
    },
    /// Debits and credits differ over a whole currency.
    UnbalancedCurrency {
        /// ISO 4217.
        currency: String,
        /// Minor units (summed in 128 bits: any history fits).
        debits: i128,
        /// Minor units (summed in 128 bits: any history fits).
        credits: i128,
    },
    /// Completed Idempotency-Keys without a stored response.
    KeysWithoutResponse {
        /// How many.
        count: i64,
    },
    /// Non-terminal (or with a refund pending) past the window and not in the error pool.
    NotConverged {
        /// Payment.
        payment: String,
        /// Its status.
        status: String,
        /// Age in seconds (since creation; since the last change for a pending refund).
        age_secs: i64,
        /// What is unfinished.
        detail: String,
    },
    /// A status converge never writes.
    CorruptStatus {
        /// Payment.
        payment: String,
        /// The stored text.
        status: String,
    },
    /// The audit chain is broken at a record.
    AuditChainBroken {
        /// The first bad record.
        first_bad: String,
    },
    /// An outcome (payment or refund status) without its outbox event.
    MissingEvent {
        /// Payment (the refund's payment for a refund).
        payment: String,
        /// `payment` or `refund:<id>`.
        aggregate: String,
        /// The status reached.
        status: String,
    },
    /// An event past the window that an endpoint has not received and that is not in the
    /// error pool, or that a subscribed endpoint never got a delivery for.
    Undelivered {
        /// The event's aggregate (payment or refund id).
        aggregate: String,
        /// Event id.
        event: String,
        /// What is wrong.
        detail: String,
    },
}

impl Breach {
    /// The invariant the breach belongs to.
    pub fn invariant(&self) -> Invariant {
        match self {
            Breach::ChargeCount { .. }
            | Breach::ChargeMismatch { .. }
            | Breach::OrphanCharge { .. }
            | Breach::RefundMismatch { .. } => Invariant::Channel,
            Breach::ChargeBatchCount { .. }
            | Breach::ChargeBatchAmount { .. }
            | Breach::RefundBatchCount { .. }
            | Breach::RefundTotals { .. }
            | Breach::UnbalancedBatch { .. }
            | Breach::UnbalancedCurrency { .. } => Invariant::Ledger,
            Breach::KeysWithoutResponse { .. } => Invariant::Replay,
            Breach::NotConverged { .. } | Breach::CorruptStatus { .. } => Invariant::Window,
            Breach::AuditChainBroken { .. } => Invariant::Audit,
            Breach::MissingEvent { .. } | Breach::Undelivered { .. } => Invariant::Events,
        }
    }

    /// The offending payment, when the breach is about one.
    pub fn payment(&self) -> Option<&str> {
        match self {
            Breach::ChargeCount { payment, .. }
            | Breach::ChargeMismatch { payment, .. }
            | Breach::RefundMismatch { payment, .. }
            | Breach::ChargeBatchCount { payment, .. }
            | Breach::ChargeBatchAmount { payment, .. }
            | Breach::RefundBatchCount { payment, .. }
            | Breach::RefundTotals { payment, .. }
            | Breach::UnbalancedBatch { payment, .. }
            | Breach::NotConverged { payment, .. }
            | Breach::MissingEvent { payment, .. }
            | Breach::CorruptStatus { payment, .. } => Some(payment),
            _ => None,
        }
    }

    /// A double charge: more than one charge for a payment, or a charge no payment owns.
    pub fn is_double_charge(&self) -> bool {
        matches!(self, Breach::ChargeCount { charges, .. } if *charges > 1)
            || matches!(self, Breach::OrphanCharge { .. })
    }

    /// Money taken while the payment says it was not (FAILED, or never charged per the core).
    pub fn is_lost_charge(&self) -> bool {
        matches!(self, Breach::ChargeCount { status, charges, .. } if status == "FAILED" && *charges >= 1)
    }
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breach::ChargeCount {
                payment,
                status,
                charges,
                expected,
            } => {
                write!(
                    f,
                    "{payment}: {status} payment has {charges} successful channel charges (expected {expected})"
                )
            }
            Breach::ChargeMismatch {
                payment,
                local,
                channel,
            } => write!(
                f,
                "{payment}: channel charged {} {}, payment is {} {}",
                channel.0, channel.1, local.0, local.1
            ),
            Breach::OrphanCharge {
                key,
                amount,
                currency,
            } => {
                write!(
                    f,
                    "channel key {key}: charged {amount} {currency} but no payment has this key"
                )
            }
            Breach::RefundMismatch {
                payment,
                local,
                channel,
            } => {
                write!(
                    f,
                    "{payment}: refunded {channel} at the channel, {local} in succeeded refunds"
                )
            }
            Breach::ChargeBatchCount {
                payment,
                status,
                batches,
                expected,
            } => {
                write!(
                    f,
                    "{payment}: {status} payment has {batches} charge ledger batches (expected {expected})"
                )
            }
            Breach::ChargeBatchAmount {
                payment,
                amount,
                posted,
            } => {
                write!(
                    f,
                    "{payment}: charge batch posts {posted}, payment amount is {amount}"
                )
            }
            Breach::RefundBatchCount {
                payment,
                refunds,
                batches,
            } => {
                write!(
                    f,
                    "{payment}: {refunds} succeeded refunds but {batches} refund ledger batches"
                )
            }
            Breach::RefundTotals { payment, detail } => write!(f, "{payment}: {detail}"),
            Breach::UnbalancedBatch {
                payment,
                batch,
                detail,
            } => write!(f, "{payment}: ledger batch {batch} {detail}"),
            Breach::UnbalancedCurrency {
                currency,
                debits,
                credits,
            } => {
                write!(f, "ledger {currency}: debits {debits} != credits {credits}")
            }
            Breach::MissingEvent {
                payment,
                aggregate,
                status,
            } => write!(
                f,
                "{payment}: {aggregate} reached {status} but the outbox has no event for it"
            ),
            Breach::Undelivered {
                aggregate,
                event,
                detail,
            } => write!(f, "{aggregate}: event {event} {detail}"),
            Breach::KeysWithoutResponse { count } => {
                write!(
                    f,
                    "{count} completed Idempotency-Keys have no stored response to replay"
                )
            }
            Breach::NotConverged {
                payment,
                status,
                age_secs,
                detail,
            } => {
                write!(
                    f,
                    "{payment}: {status} for {age_secs} s ({detail}) and not in the error pool"
                )
            }
            Breach::CorruptStatus { payment, status } => {
                write!(f, "{payment}: unknown status {status:?}")
            }
            Breach::AuditChainBroken { first_bad } => {
                write!(f, "audit chain broken at record {first_bad}")
            }
        }
    }
}

/// The invariant-4 settings. Times in epoch milliseconds UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// When the check runs.
    pub now_ms: i64,
    /// How long a payment may stay unfinished, ms.
    pub window_ms: i64,
}

/// Checks invariants 1, 2 and 4 for one payment. `charges` are the channel's records under the
/// payment's key (`None` when the channel is not checked).
pub fn check_payment(
    p: &VerifyPaymentRow,
    charges: Option<&[ChannelCharge]>,
    window: Window,
) -> Vec<Breach> {
    let mut out = Vec::new();
    let Ok(status) = p.status.parse::<PaymentStatus>() else {
        out.push(Breach::CorruptStatus {
            payment: p.id.clone(),
            status: p.status.clone(),
        });
        return out;
    };
    let posted = matches!(
        status,
        PaymentStatus::Success | PaymentStatus::Refunded | PaymentStatus::Reversed
    );

    // 1. Channel.
    if let Some(charges) = charges {
        let succeeded: Vec<&ChannelCharge> = charges.iter().filter(|c| c.succeeded()).collect();
        let expected = if status.is_charged() {
            "1"
        } else if status == PaymentStatus::Failed {
            "0"
        } else {
            "0 or 1"
        };
        let ok = match expected {
            "1" => succeeded.len() == 1,
            "0" => succeeded.is_empty(),
            _ => succeeded.len() <= 1,
        };
        if !ok {
            out.push(Breach::ChargeCount {
                payment: p.id.clone(),
                status: p.status.clone(),
                charges: succeeded.len(),
                expected,
            });
        }
        for c in &succeeded {
            if c.amount != p.amount || c.currency != p.currency {
                out.push(Breach::ChargeMismatch {
                    payment: p.id.clone(),
                    local: (p.amount, p.currency.clone()),
                    channel: (c.amount, c.currency.clone()),
                });
            }
        }
        let refunded_at_channel: i64 = succeeded.iter().map(|c| c.refunded).sum();
        // A reversal refunds at the channel without a refund row; pending refunds are in flight.
        if status != PaymentStatus::Reversed
            && p.refunds_pending == 0
            && refunded_at_channel != p.refunds_succeeded_amount
        {
            out.push(Breach::RefundMismatch {
                payment: p.id.clone(),
                local: p.refunds_succeeded_amount,
                channel: refunded_at_channel,
            });
        }
    }

    // 2. Ledger.
    let expected_batches = i64::from(posted);
    if p.charge_batches != expected_batches {
        out.push(Breach::ChargeBatchCount {
            payment: p.id.clone(),
            status: p.status.clone(),
            batches: p.charge_batches,
            expected: expected_batches,
        });
    } else if posted && p.charge_batch_debits != p.amount {
        out.push(Breach::ChargeBatchAmount {
            payment: p.id.clone(),
            amount: p.amount,
            posted: p.charge_batch_debits,
        });
    }
    if p.refund_batches != p.refunds_succeeded {
        out.push(Breach::RefundBatchCount {
            payment: p.id.clone(),
            refunds: p.refunds_succeeded,
            batches: p.refund_batches,
        });
    }
    if p.refunds_succeeded_amount > p.refunded_amount {
        out.push(Breach::RefundTotals {
            payment: p.id.clone(),
            detail: format!(
                "succeeded refunds total {} but only {} is reserved on the payment",
                p.refunds_succeeded_amount, p.refunded_amount
            ),
        });
    } else if p.refunds_pending == 0 && p.refunds_succeeded_amount != p.refunded_amount {
        out.push(Breach::RefundTotals {
            payment: p.id.clone(),
            detail: format!(
                "{} reserved for refunds with none pending, but succeeded refunds total {}",
                p.refunded_amount, p.refunds_succeeded_amount
            ),
        });
    }
    if status == PaymentStatus::Refunded && p.refunds_succeeded_amount != p.amount {
        out.push(Breach::RefundTotals {
            payment: p.id.clone(),
            detail: format!(
                "REFUNDED but succeeded refunds total {} of {}",
                p.refunds_succeeded_amount, p.amount
            ),
        });
    }

    // 4. Window.
    if p.open_error_items == 0 {
        let settled = matches!(
            status,
            PaymentStatus::Failed
                | PaymentStatus::Reversed
                | PaymentStatus::Refunded
                | PaymentStatus::Success
        );
        let cutoff = window.now_ms - window.window_ms;
        if !settled && p.created_at <= cutoff {
            out.push(Breach::NotConverged {
                payment: p.id.clone(),
                status: p.status.clone(),
                age_secs: (window.now_ms - p.created_at) / 1000,
                detail: "non-terminal".into(),
            });
        } else if p.refunds_pending > 0 && p.updated_at <= cutoff {
            out.push(Breach::NotConverged {
                payment: p.id.clone(),
                status: p.status.clone(),
                age_secs: (window.now_ms - p.updated_at) / 1000,
                detail: format!("{} refunds still pending", p.refunds_pending),
            });
        }
    }
    out
}

/// Checks invariant 2 over the whole ledger: per-currency totals and unbalanced batches.
pub fn check_ledger(totals: &[LedgerTotal], unbalanced: &[UnbalancedBatch]) -> Vec<Breach> {
    let mut out: Vec<Breach> = totals
        .iter()
        .filter(|t| t.debits != t.credits)
        .map(|t| Breach::UnbalancedCurrency {
            currency: t.currency.clone(),
            debits: t.debits,
            credits: t.credits,
        })
        .collect();
    for b in unbalanced {
        let detail = if b.lines == 0 {
            format!("({}) has no lines", b.kind)
        } else if b.foreign_lines > 0 {
            format!(
                "({} {}) has {} lines in another currency",
                b.kind, b.currency, b.foreign_lines
            )
        } else {
            format!(
                "({} {}) debits {} != credits {}",
                b.kind, b.currency, b.debits, b.credits
            )
        };
        out.push(Breach::UnbalancedBatch {
            payment: b.payment_id.clone(),
            batch: b.id,
            detail,
        });
    }
    out
}

/// The successful charges left over once every payment took its own: money no payment owns.
pub fn orphan_charges<'a>(left: impl IntoIterator<Item = &'a ChannelCharge>) -> Vec<Breach> {
    let mut out: Vec<Breach> = left
        .into_iter()
        .filter(|c| c.succeeded())
        .map(|c| Breach::OrphanCharge {
            key: c.key.clone(),
            amount: c.amount,
            currency: c.currency.clone(),
        })
        .collect();
    out.sort_by_key(|b| b.to_string());
    out
}

/// Invariant 3 as far as the database goes: completed keys all hold a response.
pub fn check_keys(keys: &KeyTotals) -> Vec<Breach> {
    if keys.without_response > 0 {
        vec![Breach::KeysWithoutResponse {
            count: keys.without_response,
        }]
    } else {
        vec![]
    }
}

/// What the audit-chain check found (DESIGN.md invariant 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AuditChain {
    /// There is no audit log yet: nothing to check (neither a pass nor a failure).
    NotAvailable,
    /// Every record's hash links to the one before.
    Verified {
        /// Records checked.
        records: u64,
    },
    /// The chain breaks at `first_bad`.
    Broken {
        /// The first record whose hash does not match.
        first_bad: String,
    },
}

/// Invariant 5: re-computes the whole audit chain with the same verification as
/// `converge audit verify` ([`crate::ops::audit::verify`]) and maps its answer. This is the
/// one place `converge verify` learns about the audit log; [`AuditChain::NotAvailable`] is kept
/// for a store that has no audit log (reported as "no audit log yet", neither pass nor fail).
pub async fn check_audit_chain(store: &dyn Store) -> Result<AuditChain, StoreError> {
    let (records, _head, broken) = crate::ops::audit::verify(store).await?;
    Ok(match broken {
        Some(b) => AuditChain::Broken {
            first_bad: format!("{} ({})", b.seq, b.reason),
        },
        None => AuditChain::Verified {
            records: u64::try_from(records).unwrap_or(0),
        },
    })
}

/// Where the channel check stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ChannelCheck {
    /// No channel to ask (no `--channel-url`): invariant 1 is not checked.
    Skipped,
    /// Checked against this many channel records from `source`.
    Checked {
        /// Channel URL.
        source: String,
        /// Records (successes and declines) the channel holds.
        records: usize,
        /// Successful charges among them.
        succeeded: usize,
    },
}

/// Everything `converge verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// When the check ran, epoch ms UTC.
    pub now_ms: i64,
    /// The window, ms.
    pub window_ms: i64,
    /// Payments per status.
    pub by_status: BTreeMap<String, i64>,
    /// Non-terminal payments (not FAILED/REVERSED/REFUNDED/SUCCESS), whatever their age.
    pub unresolved: i64,
    /// Of those, how many an open error-pool item names.
    pub unresolved_in_pool: i64,
    /// Ledger totals per currency.
    pub ledger: Vec<LedgerTotal>,
    /// Completed Idempotency-Keys.
    pub keys: KeyTotals,
    /// The channel check.
    pub channel: ChannelCheck,
    /// The audit chain.
    pub audit: AuditChain,
    /// The outbox and its deliveries.
    pub outbox: OutboxFacts,
    /// Every breach found, payment breaches in payment id order.
    pub breaches: Vec<Breach>,
}

impl Report {
    /// Total payments.
    pub fn payments(&self) -> i64 {
        self.by_status.values().sum()
    }

    /// No breach.
    pub fn ok(&self) -> bool {
        self.breaches.is_empty()
    }

    /// The offending payments, each once, in order.
    pub fn offending_payments(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.breaches.iter().filter_map(Breach::payment).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The report as printed by `converge verify`: a header, one line per invariant
    /// (`[PASS]`, `[FAIL]` or `[SKIP]`), the audit line, then every breach.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let statuses: Vec<String> = self
            .by_status
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            s,
            "converge verify at {} (window {} s)",
            crate::domain::clock::rfc3339(self.now_ms),
            self.window_ms / 1000
        );
        let _ = writeln!(
            s,
            "payments: {} ({})",
            self.payments(),
            if statuses.is_empty() {
                "none".into()
            } else {
                statuses.join(", ")
            }
        );
        let count = |inv: Invariant| {
            self.breaches
                .iter()
                .filter(|b| b.invariant() == inv)
                .count()
        };
        let line = |s: &mut String, inv: Invariant, skipped: bool, detail: String| {
            let n = count(inv);
            let tag = if n > 0 {
                "FAIL"
            } else if skipped {
                "SKIP"
            } else {
                "PASS"
            };
            let _ = writeln!(
                s,
                "[{tag}] {}: {detail}{}",
                inv.title(),
                if n > 0 {
                    format!(" - {n} breaches")
                } else {
                    String::new()
                }
            );
        };
        let channel = match &self.channel {
            ChannelCheck::Skipped => ("not checked (no --channel-url)".to_string(), true),
            ChannelCheck::Checked {
                source,
                records,
                succeeded,
            } => (
                format!("{succeeded} successful charges of {records} records at {source}"),
                false,
            ),
        };
        line(&mut s, Invariant::Channel, channel.1, channel.0);
        let ledger: Vec<String> = self
            .ledger
            .iter()
            .map(|t| format!("{} debits {} credits {}", t.currency, t.debits, t.credits))
            .collect();
        line(
            &mut s,
            Invariant::Ledger,
            false,
            if ledger.is_empty() {
                "no entries".into()
            } else {
                ledger.join("; ")
            },
        );
        line(
            &mut s,
            Invariant::Replay,
            false,
            format!(
                "{} completed Idempotency-Keys, {} without a stored response",
                self.keys.done, self.keys.without_response
            ),
        );
        line(
            &mut s,
            Invariant::Window,
            false,
            format!(
                "{} unresolved payments, {} of them in the error pool",
                self.unresolved, self.unresolved_in_pool
            ),
        );
        match &self.audit {
            AuditChain::NotAvailable => s.push_str("audit chain: no audit log yet\n"),
            AuditChain::Verified { records } => line(
                &mut s,
                Invariant::Audit,
                false,
                format!("{records} records chained"),
            ),
            AuditChain::Broken { .. } => line(&mut s, Invariant::Audit, false, "broken".into()),
        }
        line(
            &mut s,
            Invariant::Events,
            false,
            format!(
                "{} events, {} deliveries ({} succeeded){}",
                self.outbox.events,
                self.outbox.deliveries.0,
                self.outbox.deliveries.1,
                if self.outbox.stream_configured {
                    format!(
                        ", {} published to the stream ({} re-publishes dropped by the broker)",
                        self.outbox.published.0, self.outbox.published.1
                    )
                } else {
                    String::new()
                }
            ),
        );
        for b in &self.breaches {
            let _ = writeln!(s, "BREACH {}", b);
        }
        if self.ok() {
            s.push_str("verify: all checked invariants hold\n");
        } else {
            let _ = writeln!(
                s,
                "verify: FAILED, {} breaches, {} offending payments",
                self.breaches.len(),
                self.offending_payments().len()
            );
        }
        s
    }
}

/// Invariant 6: every outcome has its event; every event past the window reached each
/// subscribed enabled endpoint, or its delivery is in the error pool.
pub fn check_outbox(f: &OutboxFacts) -> Vec<Breach> {
    let mut out = Vec::new();
    for (payment, status) in &f.payments_without_event {
        out.push(Breach::MissingEvent {
            payment: payment.clone(),
            aggregate: "payment".into(),
            status: status.clone(),
        });
    }
    for (refund, payment, status) in &f.refunds_without_event {
        out.push(Breach::MissingEvent {
            payment: payment.clone(),
            aggregate: format!("refund:{refund}"),
            status: status.clone(),
        });
    }
    for (delivery, event, aggregate, status) in &f.undelivered {
        out.push(Breach::Undelivered {
            aggregate: aggregate.clone(),
            event: event.clone(),
            detail: format!(
                "delivery {delivery} is {status} past the window and not in the error pool"
            ),
        });
    }
    for (event, aggregate) in &f.unpublished {
        out.push(Breach::Undelivered {
            aggregate: aggregate.clone(),
            event: event.clone(),
            detail: "is not published to the event stream past the window".into(),
        });
    }
    for (event, endpoint, aggregate) in &f.missing_deliveries {
        out.push(Breach::Undelivered {
            aggregate: aggregate.clone(),
            event: event.clone(),
            detail: format!("has no delivery to subscribed endpoint {endpoint}"),
        });
    }
    out
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
            let settled = matches!(
                p.status.as_str(),
                "FAILED" | "REVERSED" | "REFUNDED" | "SUCCESS"
            );
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const W: Window = Window {
        now_ms: NOW,
        window_ms: 60_000,
    };

    fn payment(status: &str) -> VerifyPaymentRow {
        let posted = matches!(status, "SUCCESS" | "REFUNDED" | "REVERSED");
        VerifyPaymentRow {
            id: "pay_1".into(),
            merchant_id: 1,
            merchant_order_id: "o-1".into(),
            status: status.into(),
            amount: 1000,
            currency: "CNY".into(),
            channel_key: "ck_1".into(),
            refunded_amount: 0,
            created_at: NOW - 1_000,
            updated_at: NOW - 1_000,
            charge_batches: i64::from(posted),
            charge_batch_debits: if posted { 1000 } else { 0 },
            refunds_succeeded: 0,
            refunds_succeeded_amount: 0,
            refunds_pending: 0,
            refund_batches: 0,
            open_error_items: 0,
        }
    }

    fn charge(status: &str, amount: i64) -> ChannelCharge {
        ChannelCharge {
            key: "ck_1".into(),
            status: status.into(),
            amount,
            currency: "CNY".into(),
            attempts: 1,
            refunded: 0,
        }
    }

    #[test]
    fn a_success_with_one_charge_and_one_batch_passes() {
        assert_eq!(
            check_payment(&payment("SUCCESS"), Some(&[charge("succeeded", 1000)]), W),
            vec![]
        );
    }

    #[test]
    fn a_charged_payment_without_a_channel_charge_is_named() {
        for status in [
            "SUCCESS",
            "REFUNDED",
            "REVERSED",
            "CHANNEL_SUCCESS",
            "SUSPENSE",
        ] {
            let b = check_payment(&payment(status), Some(&[]), W);
            assert!(
                b.iter().any(|b| matches!(b, Breach::ChargeCount { charges: 0, expected: "1", payment, .. } if payment == "pay_1")),
                "{status}: {b:?}"
            );
        }
    }

    #[test]
    fn a_declined_record_is_not_a_charge() {
        let b = check_payment(&payment("FAILED"), Some(&[charge("declined", 1000)]), W);
        assert_eq!(b, vec![]);
        let b = check_payment(&payment("SUCCESS"), Some(&[charge("declined", 1000)]), W);
        assert!(
            matches!(b[0], Breach::ChargeCount { charges: 0, .. }),
            "{b:?}"
        );
    }

    #[test]
    fn two_charges_for_one_payment_are_a_double_charge() {
        let b = check_payment(
            &payment("SUCCESS"),
            Some(&[charge("succeeded", 1000), charge("succeeded", 1000)]),
            W,
        );
        assert!(b.iter().any(Breach::is_double_charge), "{b:?}");
        // Even an in-flight payment may hold at most one.
        let b = check_payment(
            &payment("UNKNOWN"),
            Some(&[charge("succeeded", 1000), charge("succeeded", 1000)]),
            W,
        );
        assert!(b.iter().any(Breach::is_double_charge), "{b:?}");
    }

    #[test]
    fn a_failed_payment_with_a_charge_is_a_lost_charge() {
        let b = check_payment(&payment("FAILED"), Some(&[charge("succeeded", 1000)]), W);
        assert!(b.iter().any(Breach::is_lost_charge), "{b:?}");
    }

    #[test]
    fn in_flight_payments_may_or_may_not_hold_a_charge() {
        for status in ["PENDING", "PROCESSING", "UNKNOWN"] {
            assert_eq!(
                check_payment(&payment(status), Some(&[]), W),
                vec![],
                "{status}"
            );
            assert_eq!(
                check_payment(&payment(status), Some(&[charge("succeeded", 1000)]), W),
                vec![],
                "{status}"
            );
        }
    }

    #[test]
    fn a_charge_of_another_amount_is_a_mismatch() {
        let b = check_payment(&payment("SUCCESS"), Some(&[charge("succeeded", 1001)]), W);
        assert!(matches!(&b[..], [Breach::ChargeMismatch { .. }]), "{b:?}");
    }

    #[test]
    fn without_a_channel_only_the_database_is_checked() {
        assert_eq!(check_payment(&payment("SUCCESS"), None, W), vec![]);
    }

    #[test]
    fn charge_batches_follow_the_status() {
        let mut p = payment("SUCCESS");
        p.charge_batches = 0;
        let b = check_payment(&p, None, W);
        assert!(
            matches!(
                &b[..],
                [Breach::ChargeBatchCount {
                    batches: 0,
                    expected: 1,
                    ..
                }]
            ),
            "{b:?}"
        );
        p.charge_batches = 2;
        assert!(matches!(
            &check_payment(&p, None, W)[..],
            [Breach::ChargeBatchCount { batches: 2, .. }]
        ));
        let mut p = payment("SUSPENSE");
        p.charge_batches = 1;
        p.open_error_items = 1;
        assert!(matches!(
            &check_payment(&p, None, W)[..],
            [Breach::ChargeBatchCount { expected: 0, .. }]
        ));
        let mut p = payment("SUCCESS");
        p.charge_batch_debits = 999;
        assert!(matches!(
            &check_payment(&p, None, W)[..],
            [Breach::ChargeBatchAmount { posted: 999, .. }]
        ));
    }

    #[test]
    fn refunds_must_agree_with_batches_the_channel_and_the_payment() {
        let mut p = payment("SUCCESS");
        p.refunded_amount = 300;
        p.refunds_succeeded = 1;
        p.refunds_succeeded_amount = 300;
        p.refund_batches = 1;
        let mut c = charge("succeeded", 1000);
        c.refunded = 300;
        assert_eq!(check_payment(&p, Some(std::slice::from_ref(&c)), W), vec![]);

        c.refunded = 600;
        let b = check_payment(&p, Some(std::slice::from_ref(&c)), W);
        assert!(
            matches!(
                &b[..],
                [Breach::RefundMismatch {
                    local: 300,
                    channel: 600,
                    ..
                }]
            ),
            "{b:?}"
        );

        p.refund_batches = 0;
        let b = check_payment(&p, None, W);
        assert!(
            matches!(
                &b[..],
                [Breach::RefundBatchCount {
                    refunds: 1,
                    batches: 0,
                    ..
                }]
            ),
            "{b:?}"
        );

        let mut p = payment("REFUNDED");
        p.refunded_amount = 1000;
        p.refunds_succeeded = 1;
        p.refunds_succeeded_amount = 400;
        p.refund_batches = 1;
        let b = check_payment(&p, None, W);
        assert_eq!(b.len(), 2, "{b:?}");
        assert!(b.iter().all(|b| matches!(b, Breach::RefundTotals { .. })));
    }

    #[test]
    fn a_pending_refund_is_in_flight_not_a_mismatch() {
        let mut p = payment("SUCCESS");
        p.refunded_amount = 500;
        p.refunds_pending = 1;
        let mut c = charge("succeeded", 1000);
        c.refunded = 500;
        assert_eq!(check_payment(&p, Some(&[c]), W), vec![]);
    }

    #[test]
    fn old_non_terminal_payments_must_be_in_the_error_pool() {
        let mut p = payment("UNKNOWN");
        p.created_at = NOW - 61_000;
        let b = check_payment(&p, None, W);
        assert!(
            matches!(&b[..], [Breach::NotConverged { age_secs: 61, .. }]),
            "{b:?}"
        );
        assert_eq!(b[0].payment(), Some("pay_1"));
        assert_eq!(b[0].invariant(), Invariant::Window);
        p.open_error_items = 1;
        assert_eq!(check_payment(&p, None, W), vec![]);
        // Young enough: still converging.
        let mut p = payment("PROCESSING");
        p.created_at = NOW - 59_000;
        assert_eq!(check_payment(&p, None, W), vec![]);
        // Settled states are fine at any age.
        for status in ["SUCCESS", "FAILED", "REFUNDED", "REVERSED"] {
            let mut p = payment(status);
            p.created_at = 0;
            if status == "REFUNDED" {
                p.refunded_amount = 1000;
                p.refunds_succeeded = 1;
                p.refunds_succeeded_amount = 1000;
                p.refund_batches = 1;
            }
            assert_eq!(check_payment(&p, None, W), vec![], "{status}");
        }
    }

    #[test]
    fn an_old_pending_refund_must_be_in_the_error_pool() {
        let mut p = payment("SUCCESS");
        p.refunded_amount = 100;
        p.refunds_pending = 1;
        p.updated_at = NOW - 120_000;
        let b = check_payment(&p, None, W);
        assert!(
            matches!(&b[..], [Breach::NotConverged { age_secs: 120, .. }]),
            "{b:?}"
        );
    }

    #[test]
    fn an_unknown_status_is_reported_not_panicked_on() {
        let b = check_payment(&payment("LIMBO"), Some(&[]), W);
        assert!(matches!(&b[..], [Breach::CorruptStatus { .. }]), "{b:?}");
    }

    #[test]
    fn ledger_totals_and_batches_must_balance() {
        let ok = LedgerTotal {
            currency: "CNY".into(),
            debits: 10,
            credits: 10,
        };
        let bad = LedgerTotal {
            currency: "USD".into(),
            debits: 10,
            credits: 9,
        };
        assert_eq!(check_ledger(std::slice::from_ref(&ok), &[]), vec![]);
        let b = check_ledger(&[ok, bad], &[]);
        assert!(
            matches!(&b[..], [Breach::UnbalancedCurrency { currency, .. }] if currency == "USD"),
            "{b:?}"
        );
        let batch = UnbalancedBatch {
            id: 9,
            payment_id: "pay_9".into(),
            kind: "charge".into(),
            currency: "CNY".into(),
            debits: 5,
            credits: 0,
            lines: 1,
            foreign_lines: 0,
        };
        let b = check_ledger(&[], &[batch]);
        assert_eq!(b[0].payment(), Some("pay_9"));
        assert!(
            b[0].to_string().contains("debits 5 != credits 0"),
            "{}",
            b[0]
        );
    }

    #[test]
    fn charges_no_payment_took_are_orphans() {
        let mut c = charge("succeeded", 1000);
        c.key = "ck_lost".into();
        let declined = charge("declined", 1000);
        let b = orphan_charges([&c, &declined]);
        assert_eq!(b.len(), 1);
        assert!(b[0].is_double_charge());
        assert!(b[0].to_string().contains("ck_lost"));
    }

    #[test]
    fn keys_without_a_stored_response_break_replays() {
        assert_eq!(
            check_keys(&KeyTotals {
                done: 3,
                without_response: 0
            }),
            vec![]
        );
        assert_eq!(
            check_keys(&KeyTotals {
                done: 3,
                without_response: 2
            }),
            vec![Breach::KeysWithoutResponse { count: 2 }]
        );
    }

    #[test]
    fn the_report_names_each_offending_payment_once_and_says_there_is_no_audit_log() {
        let report = Report {
            now_ms: NOW,
            window_ms: 60_000,
            by_status: BTreeMap::from([("SUCCESS".to_string(), 2)]),
            unresolved: 0,
            unresolved_in_pool: 0,
            ledger: vec![],
            keys: KeyTotals {
                done: 0,
                without_response: 0,
            },
            channel: ChannelCheck::Skipped,
            audit: AuditChain::NotAvailable,
            outbox: OutboxFacts::default(),
            breaches: vec![
                Breach::ChargeBatchCount {
                    payment: "pay_b".into(),
                    status: "SUCCESS".into(),
                    batches: 0,
                    expected: 1,
                },
                Breach::RefundBatchCount {
                    payment: "pay_b".into(),
                    refunds: 1,
                    batches: 0,
                },
                Breach::ChargeBatchCount {
                    payment: "pay_a".into(),
                    status: "SUCCESS".into(),
                    batches: 2,
                    expected: 1,
                },
            ],
        };
        assert!(!report.ok());
        assert_eq!(report.offending_payments(), vec!["pay_a", "pay_b"]);
        let text = report.render();
        assert!(text.contains("audit chain: no audit log yet"), "{text}");
        assert!(text.contains("[SKIP] 1. channel charges"), "{text}");
        assert!(text.contains("[FAIL] 2. ledger"), "{text}");
        assert!(
            text.contains("BREACH pay_a: SUCCESS payment has 2 charge ledger batches"),
            "{text}"
        );
        assert!(
            text.contains("verify: FAILED, 3 breaches, 2 offending payments"),
            "{text}"
        );
    }

    #[test]
    fn outcomes_without_events_and_undelivered_events_are_named() {
        let facts = OutboxFacts {
            payments_without_event: vec![("pay_1".into(), "SUCCESS".into())],
            refunds_without_event: vec![("re_1".into(), "pay_2".into(), "failed".into())],
            undelivered: vec![(7, "ev1".into(), "pay_3".into(), "pending".into())],
            missing_deliveries: vec![("ev2".into(), "we_1".into(), "pay_4".into())],
            ..OutboxFacts::default()
        };
        let b = check_outbox(&facts);
        assert_eq!(b.len(), 4);
        assert!(b.iter().all(|b| b.invariant() == Invariant::Events));
        assert_eq!(b[0].payment(), Some("pay_1"));
        assert_eq!(b[1].payment(), Some("pay_2"));
        assert!(
            b[2].to_string().contains("delivery 7 is pending"),
            "{}",
            b[2]
        );
        assert!(b[3].to_string().contains("we_1"), "{}", b[3]);
        assert!(check_outbox(&OutboxFacts::default()).is_empty());
    }

    #[test]
    fn the_audit_line_passes_or_names_the_first_broken_record() {
        let mut report = Report {
            now_ms: NOW,
            window_ms: 0,
            by_status: BTreeMap::new(),
            unresolved: 0,
            unresolved_in_pool: 0,
            ledger: vec![],
            keys: KeyTotals {
                done: 0,
                without_response: 0,
            },
            channel: ChannelCheck::Skipped,
            audit: AuditChain::Verified { records: 7 },
            outbox: OutboxFacts::default(),
            breaches: vec![],
        };
        assert!(
            report.render().contains("[PASS] 5. audit chain: 7 records"),
            "{}",
            report.render()
        );
        report.audit = AuditChain::Broken {
            first_bad: "3 (edited)".into(),
        };
        report.breaches.push(Breach::AuditChainBroken {
            first_bad: "3 (edited)".into(),
        });
        let text = report.render();
        assert!(text.contains("[FAIL] 5. audit chain"), "{text}");
        assert!(
            text.contains("BREACH audit chain broken at record 3 (edited)"),
            "{text}"
        );
        assert_eq!(report.breaches[0].invariant(), Invariant::Audit);
    }
}
