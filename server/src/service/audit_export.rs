//! The audit log's export and checkpoints (DESIGN.md "Ops console": export as
//! CSV and NDJSON with bounded memory, safe to open in a spreadsheet; signed checkpoints of the
//! chain's head that an export carries and `converge audit verify --file` checks offline).
//! One use case for the console's `GET /ops/v1/audit/export`, the CLI's `converge audit
//! export`, and the worker's periodic checkpoint; no HTTP here.
//!
//! Memory stays flat because rows are read and written one page at a time. NDJSON is the
//! exact machine form (every field as stored, so a verifier can recompute the chain); CSV is
//! for people and spreadsheets, so cells a spreadsheet would run as a formula are prefixed
//! with `'` (OWASP "CSV Injection").

use super::Core;
use bytes::Bytes;
use serde_json::json;

use crate::domain::audit::{AuditRecord, Break, ChainVerifier};
use crate::domain::checkpoint::{self, Checkpoint, CheckpointMatcher};
use crate::domain::clock::rfc3339;
use crate::service::actor::Actor;
use crate::store::{AuditFilter, Store, StoreError};
use ed25519_dalek::{SigningKey, VerifyingKey};

/// Rows read per page.
const PAGE: i64 = 1000;

/// The CSV header.
pub const CSV_HEADER: [&str; 12] = [
    "seq",
    "at",
    "actor",
    "roles",
    "action",
    "target",
    "reason",
    "before",
    "after",
    "request_meta",
    "prev_hash",
    "hash",
];

/// A cell a spreadsheet would evaluate gets a leading `'` (OWASP "CSV Injection"): one that
/// starts with `=`, `+`, `-`, `@`, tab or CR, also after leading spaces, and also when the
/// first character is only a Unicode compatibility form of one (fullwidth `＝ ＋ － ＠`, small
/// `﹦ ﹢ ﹣ ﹫`, super- and subscript `⁺ ⁼ ₊ ₌`, ...), which spreadsheets normalise: the
/// start of the cell is NFKC-normalised before the check. Plain numbers (`-100`, `12.5`, and
/// their fullwidth forms) stay as they are.
pub fn neutralise(cell: &str) -> std::borrow::Cow<'_, str> {
    use unicode_normalization::UnicodeNormalization;
    let lead = cell.trim_start_matches([' ', '\u{3000}', '\u{a0}']);
    let Some(first) = lead.chars().next() else {
        return cell.into();
    };
    let trigger = |c: char| matches!(c, '=' | '+' | '-' | '@' | '\t' | '\r');
    // An ASCII character is its own NFKC form: most cells need no normalisation.
    let risky = if first.is_ascii() {
        trigger(first)
    } else {
        let first: String = std::iter::once(first).nfkc().collect();
        lead.starts_with(trigger) || first.starts_with(trigger)
    };
    let numeric = || {
        cell.nfkc()
            .collect::<String>()
            .trim()
            .parse::<f64>()
            .is_ok()
    };
    if risky && !numeric() {
        format!("'{cell}").into()
    } else {
        cell.into()
    }
}

/// Output format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated, spreadsheet-safe.
    Csv,
    /// One JSON object per line, exact.
    Ndjson,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "csv" => Ok(Format::Csv),
            "ndjson" => Ok(Format::Ndjson),
            other => Err(format!("format must be csv or ndjson, not {other:?}")),
        }
    }
}

/// One NDJSON line: the record exactly as stored (its fields are what the chain hashes; `at`
/// in epoch ms UTC), and `at_utc`, the same instant as RFC 3339 for people and tools that
/// read the CSV's `at` (issue 41: the two exports wrote times two ways). A reader that
/// checks hashes ignores `at_utc`.
#[derive(serde::Serialize)]
struct NdjsonLine<'a> {
    #[serde(flatten)]
    record: &'a AuditRecord,
    at_utc: String,
}

impl<'a> NdjsonLine<'a> {
    fn of(record: &'a AuditRecord) -> Self {
        NdjsonLine {
            record,
            at_utc: rfc3339(record.at),
        }
    }
}

/// The bytes of one page of rows (and the header, first).
pub fn encode(format: Format, rows: &[AuditRecord], header: bool) -> Vec<u8> {
    match format {
        Format::Ndjson => {
            let mut out = Vec::with_capacity(rows.len() * 560);
            for r in rows {
                // Writing into a Vec fails only if serialising does, which these strings
                // and integers cannot.
                if serde_json::to_writer(&mut out, &NdjsonLine::of(r)).is_ok() {
                    out.push(b'\n');
                }
            }
            out
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::with_capacity(rows.len() * 400));
            if header {
                let _ = w.write_record(CSV_HEADER);
            }
            for r in rows {
                let seq = r.seq.to_string();
                let at = rfc3339(r.at);
                let cells = [
                    seq.as_str(),
                    at.as_str(),
                    &r.actor,
                    &r.roles,
                    &r.action,
                    &r.target,
                    &r.reason,
                    &r.before_state,
                    &r.after_state,
                    &r.request_meta,
                    &r.prev_hash,
                    &r.hash,
                ];
                // Field by field, then the record's end: no list of cells built per row.
                for c in cells {
                    let _ = w.write_field(neutralise(c).as_bytes());
                }
                let _ = w.write_record(None::<&[u8]>);
            }
            w.into_inner().unwrap_or_default()
        }
    }
}

/// Streams the matching records as chunks of at most one page each (the first with the CSV
/// header); a read that fails ends the stream with its error.
///
/// The next page is read while this one is encoded and written (a task ahead of the stream,
/// at most one page ahead), so reading and encoding use both CPUs; at most three pages are
/// held at once. Dropping the stream stops the reads.
pub fn stream(
    store: std::sync::Arc<dyn Store>,
    filter: AuditFilter,
    format: Format,
) -> impl futures_util::Stream<Item = Result<Bytes, StoreError>> + Send {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<AuditRecord>, StoreError>>(1);
    let reads = tokio::spawn(async move {
        let mut after = 0_i64;
        loop {
            let page = store.audit_page(after, PAGE, &filter).await;
            let finished = match &page {
                Ok(rows) => {
                    after = rows.last().map_or(after, |r| r.seq);
                    (rows.len() as i64) < PAGE
                }
                Err(_) => true,
            };
            if tx.send(page).await.is_err() || finished {
                break;
            }
        }
    });
    let reads = AbortOnDrop(reads);
    futures_util::stream::unfold(
        (rx, true, reads),
        move |(mut rx, first, reads)| async move {
            let chunk = match rx.recv().await? {
                Ok(rows) => Ok(Bytes::from(encode(format, &rows, first))),
                Err(e) => Err(e),
            };
            Some((chunk, (rx, false, reads)))
        },
    )
}

/// Aborts the export's read-ahead task when the stream is dropped (a client gone mid-export).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A new checkpoint signing key from the operating system's randomness.
pub fn generate_signing_key() -> SigningKey {
    use rand::Rng;
    checkpoint::signing_key_from_seed(rand::rng().random::<[u8; 32]>())
}

/// Why a checkpoint was not signed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain does not verify from the last checkpoint on: signing its head would vouch
    /// for a tampered log.
    #[error("not signing: audit chain broken at record {}: {}", .0.seq, .0.reason)]
    Broken(Break),
}

impl Core {
    /// Signs a checkpoint of the chain's head with `key` and stores it. The records since the
    /// latest checkpoint this key signed are verified first (from genesis when there is none), so
    /// a checkpoint never vouches for a chain that was cut or rebuilt under the previous one. With
    /// `only_if_moved`, nothing is signed when the latest checkpoint already covers the head (the
    /// periodic checkpoint of an idle log).
    pub async fn take_checkpoint(
        &self,
        key: &SigningKey,
        now: i64,
        only_if_moved: bool,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let store = self.store.as_ref();
        let public = key.verifying_key();
        let latest = store
            .latest_checkpoint()
            .await?
            .filter(|c| checkpoint::verify_signature(&public, c).is_ok());
        let mut v = ChainVerifier::default();
        if let Some(c) = &latest {
            if c.seq > 0 {
                let at = store
                    .audit_page(c.seq - 1, 1, &AuditFilter::default())
                    .await?;
                let broken = match at.first() {
                    Some(r) if r.seq == c.seq && r.hash == c.head_hash => None,
                    Some(r) if r.seq == c.seq => Some(Break {
                        seq: c.seq,
                        reason: "differs from the last signed checkpoint (rebuilt)".into(),
                    }),
                    Some(_) => Some(Break {
                        seq: c.seq,
                        reason: "is missing under the last signed checkpoint".into(),
                    }),
                    None => Some(Break {
                        seq: store.audit_head().await?.0 + 1,
                        reason: format!(
                            "is missing: the last signed checkpoint covers {} records (truncated)",
                            c.seq
                        ),
                    }),
                };
                if let Some(b) = broken {
                    return Err(CheckpointError::Broken(b));
                }
            }
            v.seq = c.seq;
            v.hash = c.head_hash.clone();
        }
        let mut after = v.seq;
        loop {
            let rows = store
                .audit_page(after, PAGE, &AuditFilter::default())
                .await?;
            for r in &rows {
                v.push(r).map_err(CheckpointError::Broken)?;
            }
            match rows.last() {
                Some(r) if rows.len() as i64 == PAGE => after = r.seq,
                _ => break,
            }
        }
        if only_if_moved && latest.as_ref().is_some_and(|c| c.seq == v.seq) {
            return Ok(None);
        }
        let c = checkpoint::sign(key, v.seq, &v.hash, now);
        store.add_checkpoint(&c).await?;
        tracing::info!(
            seq = c.seq,
            head = %c.head_hash,
            at = c.at,
            key_id = %c.key_id,
            signature = %c.signature,
            "audit checkpoint signed"
        );
        Ok(Some(c))
    }
}

/// The NDJSON line that carries a checkpoint at the end of an export:
/// `{"checkpoint":{"seq":..,"head_hash":"..","at":..,"key_id":"..","signature":".."}}`.
pub fn checkpoint_line(c: &Checkpoint) -> Vec<u8> {
    let mut out = serde_json::to_vec(&json!({ "checkpoint": c })).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Verifies an NDJSON export offline: every record line chains from seq 1, every
/// `{"checkpoint":..}` line's signature verifies with `key`, and the chain reaches each
/// checkpoint with its signed hash. Returns (records, the latest checkpoint). An export with
/// no checkpoint, a filtered export (not contiguous) or a cut one fails, naming the record.
pub fn verify_export(
    text: impl std::io::BufRead,
    key: &VerifyingKey,
) -> Result<(i64, Checkpoint), String> {
    let mut records = Vec::new();
    let mut cps: Vec<Checkpoint> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.map_err(|e| format!("reading the export: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("line {}: not JSON: {e}", i + 1))?;
        if let Some(c) = v.get("checkpoint") {
            let c: Checkpoint = serde_json::from_value(c.clone())
                .map_err(|e| format!("line {}: not a checkpoint: {e}", i + 1))?;
            checkpoint::verify_signature(key, &c)?;
            cps.push(c);
        } else {
            let r: AuditRecord = serde_json::from_value(v)
                .map_err(|e| format!("line {}: not an audit record: {e}", i + 1))?;
            records.push(r);
        }
    }
    let latest = cps
        .iter()
        .max_by_key(|c| (c.seq, c.at))
        .cloned()
        .ok_or("the export carries no signed checkpoint: nothing proves it is whole")?;
    let mut chain = ChainVerifier::default();
    let mut m = CheckpointMatcher::new(cps);
    for r in &records {
        chain
            .push(r)
            .and_then(|()| m.push(r))
            .map_err(|b| format!("audit chain broken at record {}: {}", b.seq, b.reason))?;
    }
    m.finish()
        .map_err(|b| format!("audit chain broken at record {}: {}", b.seq, b.reason))?;
    Ok((records.len() as i64, latest))
}

impl Core {
    /// The checkpoint an export carries: a new one signed now when a key is configured (after the
    /// export's own audit record, so it covers it), else the latest stored one. A chain that no
    /// longer verifies is not signed: the export then carries the latest stored checkpoint, and
    /// its offline verification names the break.
    pub async fn export_checkpoint(
        &self,
        key: Option<&SigningKey>,
        now: i64,
    ) -> Result<Option<Checkpoint>, StoreError> {
        let store = self.store.as_ref();
        if let Some(key) = key {
            match self.take_checkpoint(key, now, false).await {
                Ok(c) => return Ok(c),
                Err(CheckpointError::Store(e)) => return Err(e),
                Err(e @ CheckpointError::Broken(_)) => {
                    tracing::error!(error = %e, "export without a new checkpoint");
                }
            }
        }
        store.latest_checkpoint().await
    }

    /// Starts an export, the same way from the console and from `converge audit export`: the
    /// export's own audit record first (`audit_export` on target `audit` by `actor`, `what` the
    /// filter as JSON), then the checkpoint it carries ([`Core::export_checkpoint`], after the
    /// record so it covers it), signed now with the server's key when it holds one
    /// ([`super::console::ConsoleSettings::audit_key`]). Returns the record (the chain head at
    /// export time) and the checkpoint.
    pub async fn begin_export(
        &self,
        actor: &Actor,
        what: &serde_json::Value,
    ) -> Result<(AuditRecord, Option<Checkpoint>), StoreError> {
        let store = self.store.as_ref();
        let now = self.clock.now_ms();
        let key = self.console.audit_key.as_deref();
        let record = actor.entry(
            now,
            "audit_export",
            "audit",
            "",
            String::new(),
            what.to_string(),
        );
        let head = store.append_audit(&record).await?;
        let checkpoint = self.export_checkpoint(key, now).await?;
        Ok((head, checkpoint))
    }
}

/// [`stream`], then (NDJSON only) the [`checkpoint_line`] of `checkpoint`.
pub fn stream_with_checkpoint(
    store: std::sync::Arc<dyn Store>,
    filter: AuditFilter,
    format: Format,
    checkpoint: Option<Checkpoint>,
) -> impl futures_util::Stream<Item = Result<Bytes, StoreError>> + Send {
    use futures_util::StreamExt;
    let tail = checkpoint
        .filter(|_| format == Format::Ndjson)
        .map(|c| Ok(Bytes::from(checkpoint_line(&c))));
    stream(store, filter, format).chain(futures_util::stream::iter(tail))
}

#[cfg(test)]
mod tests {
    use super::neutralise;

    #[test]
    fn ascii_formula_triggers_are_neutralised_and_numbers_are_not() {
        for cell in ["=1+1", "+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx", "  =1+1"] {
            assert!(neutralise(cell).starts_with('\''), "{cell:?}");
        }
        for cell in ["-100", "12.5", "+7", "plain", "", "a=b"] {
            assert_eq!(neutralise(cell), cell, "{cell:?}");
        }
    }

    #[test]
    fn unicode_compatibility_forms_of_the_triggers_are_neutralised() {
        // Fullwidth, small and super/subscript forms normalise (NFKC) to = + - @.
        for cell in [
            "\u{FF1D}HYPERLINK(\"http://evil\")",
            "\u{FF0B}1+1",
            "\u{FF0D}1+cmd",
            "\u{FF20}SUM(A1)",
            "\u{FE66}1+1",
            "\u{FE62}1+1",
            "\u{FE63}x",
            "\u{FE6B}x",
            "\u{207C}1+1",
            "\u{208A}x",
            "\u{3000}\u{FF1D}1+1",
        ] {
            let out = neutralise(cell);
            assert_eq!(out, format!("'{cell}"), "{cell:?}");
        }
        // A fullwidth number is still a number.
        assert_eq!(
            neutralise("\u{FF0D}\u{FF11}\u{FF10}"),
            "\u{FF0D}\u{FF11}\u{FF10}"
        );
    }
}
