//! Everything `converge verify` found ([`Report`]) and how it is shown: [`Report::render`]
//! is the text `converge verify` prints; the JSON form (`--json`) is the `Serialize` of the
//! same value.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::store::{KeyTotals, LedgerTotal, OutboxFacts};

use super::breach::{Breach, Invariant};

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

/// What the holds check (invariant 7) covered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HoldCheck {
    /// Manual-capture payments checked in the database.
    pub manual: i64,
    /// Of those, how many holds were queried at the channel (0 without a channel).
    pub queried: usize,
    /// Manual payments past the run's query bound, checked in the database only.
    pub not_queried: i64,
    /// A channel was given whose connector answers hold queries.
    pub channel: bool,
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
    /// The holds check.
    pub holds: HoldCheck,
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

    /// One line for a failed run, naming up to ten offending payments: `verify found 3
    /// invariant breaches in 2 payments: pay_a pay_b` (`converge verify`'s error line).
    pub fn summary(&self) -> String {
        let named = self.offending_payments();
        let more = if named.len() > 10 {
            format!(" and {} more (see BREACH lines)", named.len() - 10)
        } else {
            String::new()
        };
        format!(
            "verify found {} invariant breaches in {} payments: {}{more}",
            self.breaches.len(),
            named.len(),
            named.iter().take(10).copied().collect::<Vec<_>>().join(" ")
        )
    }

    /// The report as printed by `converge verify`: a header, one line per invariant
    /// (`[PASS]`, `[FAIL]` or `[SKIP]`), the audit line, then every breach.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        self.render_header(&mut s);
        self.render_invariants(&mut s);
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

    /// The header's two lines: when and with which window the check ran, and the payments
    /// per status.
    fn render_header(&self, s: &mut String) {
        use std::fmt::Write;
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
    }

    /// One line per invariant, in their order, with what was checked; the audit chain's
    /// line says so when there is no audit log yet.
    fn render_invariants(&self, s: &mut String) {
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
        self.invariant_line(s, Invariant::Channel, channel.1, channel.0);
        let ledger: Vec<String> = self
            .ledger
            .iter()
            .map(|t| format!("{} debits {} credits {}", t.currency, t.debits, t.credits))
            .collect();
        self.invariant_line(
            s,
            Invariant::Ledger,
            false,
            if ledger.is_empty() {
                "no entries".into()
            } else {
                ledger.join("; ")
            },
        );
        self.invariant_line(
            s,
            Invariant::Replay,
            false,
            format!(
                "{} completed Idempotency-Keys, {} without a stored response",
                self.keys.done, self.keys.without_response
            ),
        );
        self.invariant_line(
            s,
            Invariant::Window,
            false,
            format!(
                "{} unresolved payments, {} of them in the error pool",
                self.unresolved, self.unresolved_in_pool
            ),
        );
        match &self.audit {
            AuditChain::NotAvailable => s.push_str("audit chain: no audit log yet\n"),
            AuditChain::Verified { records } => self.invariant_line(
                s,
                Invariant::Audit,
                false,
                format!("{records} records chained"),
            ),
            AuditChain::Broken { .. } => {
                self.invariant_line(s, Invariant::Audit, false, "broken".into())
            }
        }
        self.invariant_line(s, Invariant::Events, false, self.events_detail());
        let h = &self.holds;
        let at_channel = if h.channel {
            format!(
                "{} holds queried at the channel{}",
                h.queried,
                if h.not_queried > 0 {
                    format!(" ({} past the bound not queried)", h.not_queried)
                } else {
                    String::new()
                }
            )
        } else {
            "holds not queried (no --channel-url)".into()
        };
        self.invariant_line(
            s,
            Invariant::Holds,
            false,
            format!("{} manual-capture payments, {at_channel}", h.manual),
        );
    }

    /// What the events line says was checked: events, deliveries and, with a stream, what
    /// was published to it.
    fn events_detail(&self) -> String {
        format!(
            "{} events, {} deliveries ({} succeeded, {} pending){}",
            self.outbox.events,
            self.outbox.deliveries.0,
            self.outbox.deliveries.1,
            self.outbox.pending_deliveries,
            if self.outbox.stream_configured {
                format!(
                    ", {} published to the stream ({} re-publishes dropped by the broker)",
                    self.outbox.published.0, self.outbox.published.1
                )
            } else {
                String::new()
            }
        )
    }

    /// The line of `inv`: `[FAIL]` with its breach count when it has any, else `[SKIP]` when
    /// `skipped`, else `[PASS]`; then its title and `detail`.
    fn invariant_line(&self, s: &mut String, inv: Invariant, skipped: bool, detail: String) {
        use std::fmt::Write;
        let n = self
            .breaches
            .iter()
            .filter(|b| b.invariant() == inv)
            .count();
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

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
            holds: HoldCheck::default(),
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
            holds: HoldCheck::default(),
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
