//! Reconciliation against the channel's daily settlement statement (DESIGN.md "Compensation
//! queue and error pool"; seed article 004, reconciliation and the error pool). Matches by
//! channel key; every difference becomes an error-pool item carrying both sides, with a
//! dedupe key per (day, kind, channel key), so re-running a day adds nothing twice.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::NaiveDate;
use serde_json::json;

use super::{Core, ServiceError};
use crate::domain::money;
use crate::store::{ChargedPayment, NewErrorItem, Payment};
use converge_wire::payments::CaptureMode;

/// The statement's header, in order.
pub const HEADER: [&str; 5] = ["channel_key", "amount", "currency", "status", "charged_at"];

/// The columns a PSP's statement adds after [`HEADER`] (Stripe's balance transactions;
/// issue 38): the channel's fee and what it pays out, `net` = `amount` − `fee`, minor units.
pub const FEE_COLUMNS: [&str; 2] = ["fee", "net"];

/// One statement line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementRow {
    /// The payment's channel key.
    pub channel_key: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// The channel's status (`succeeded`).
    pub status: String,
    /// RFC 3339 UTC.
    pub charged_at: String,
    /// The channel's fee and net (`amount` − `fee`), minor units, when the statement carries
    /// [`FEE_COLUMNS`] (a PSP's balance transactions; the sandbox's statement does not).
    pub fee_net: Option<(i64, i64)>,
    /// 1-based line in the file, for evidence.
    pub line: u64,
}

/// Why a statement could not be read; names the file and the 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: line {line}: {message}")]
pub struct StatementError {
    /// File name or source.
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// What is wrong.
    pub message: String,
}

/// First field of the statement's last line, `#end,<line count>,,,`: a file cut off anywhere,
/// even right after its header, lacks it or counts other lines than it holds.
pub const END_MARK: &str = "#end";

/// A line's fee and net, minor units: integers, the fee not negative, the net the amount
/// less the fee. Errors: which of those the line breaks.
fn fee_net(fee: &str, net: &str, amount: i64) -> Result<(i64, i64), String> {
    let fee: i64 = fee
        .parse()
        .map_err(|_| format!("fee {fee:?} is not an integer"))?;
    let net: i64 = net
        .parse()
        .map_err(|_| format!("net {net:?} is not an integer"))?;
    if fee < 0 || amount.checked_sub(fee) != Some(net) {
        return Err(format!(
            "net {net} is not the amount {amount} less the fee {fee}"
        ));
    }
    Ok((fee, net))
}

/// Parses a whole statement or nothing: any garbled line, a missing or wrong `#end` line, a
/// missing final newline, or (with [`FEE_COLUMNS`]) a net that is not the amount less the fee
/// is an error naming the file and line.
pub fn parse_statement(file: &str, text: &str) -> Result<Vec<StatementRow>, StatementError> {
    let err = |line: u64, message: String| StatementError {
        file: file.into(),
        line,
        message,
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| err(1, format!("unreadable header: {e}")))?
        .clone();
    let with_fees = fees_in_header(&headers.iter().collect::<Vec<_>>()).map_err(|m| err(1, m))?;
    let mut rows = Vec::new();
    let mut end: Option<u64> = None;
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            err(line, format!("garbled line: {e}"))
        })?;
        let line = record.position().map_or(0, |p| p.line());
        if let Some(end_line) = end {
            return Err(err(
                line,
                format!("line after the {END_MARK} line ({end_line})"),
            ));
        }
        if &record[0] == END_MARK {
            let count: usize = record[1].parse().map_err(|_| {
                err(
                    line,
                    format!("{END_MARK} count {:?} is not a number", &record[1]),
                )
            })?;
            if count != rows.len() {
                return Err(err(
                    line,
                    format!(
                        "{END_MARK} line counts {count} lines, the file has {}",
                        rows.len()
                    ),
                ));
            }
            end = Some(line);
            continue;
        }
        rows.push(statement_row(&record, with_fees, line).map_err(|m| err(line, m))?);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(err(
            rows.len() as u64 + 1,
            "file is truncated (no final newline)".into(),
        ));
    }
    if end.is_none() {
        return Err(err(
            rows.len() as u64 + 2,
            format!("file is truncated (no {END_MARK} line)"),
        ));
    }
    Ok(rows)
}

/// Whether a statement's header (its column names) adds [`FEE_COLUMNS`] to [`HEADER`].
/// Errors: it is neither.
fn fees_in_header(named: &[&str]) -> Result<bool, String> {
    let with_fees = named.len() == HEADER.len() + FEE_COLUMNS.len();
    if named[..named.len().min(HEADER.len())] != HEADER
        || (named.len() != HEADER.len() && (!with_fees || named[HEADER.len()..] != FEE_COLUMNS))
    {
        return Err(format!(
            "header must be {}, optionally followed by {}",
            HEADER.join(","),
            FEE_COLUMNS.join(",")
        ));
    }
    Ok(with_fees)
}

/// One statement line (`record`, at 1-based `line`) read. Errors: what is wrong with it.
fn statement_row(
    record: &csv::StringRecord,
    with_fees: bool,
    line: u64,
) -> Result<StatementRow, String> {
    let amount: i64 = record[1]
        .parse()
        .map_err(|_| format!("amount {:?} is not an integer", &record[1]))?;
    let currency = record[2].to_string();
    if record[0].is_empty() || currency.len() != 3 || record[3].is_empty() {
        return Err("empty channel key, bad currency or empty status".into());
    }
    if !record[3]
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b == b'_')
    {
        return Err(format!("status {:?} is not a status word", &record[3]));
    }
    if chrono::DateTime::parse_from_rfc3339(&record[4]).is_err() {
        return Err(format!(
            "charged_at {:?} is not an RFC 3339 time",
            &record[4]
        ));
    }
    let fee_net = if with_fees {
        Some(fee_net(&record[5], &record[6], amount)?)
    } else {
        None
    };
    Ok(StatementRow {
        channel_key: record[0].into(),
        amount,
        currency,
        status: record[3].into(),
        charged_at: record[4].into(),
        fee_net,
        line,
    })
}

/// The statement's bytes as text; bytes that are not UTF-8 are an error naming the line
/// they are on.
pub fn statement_text(file: &str, bytes: Vec<u8>) -> Result<String, StatementError> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        StatementError {
            file: file.into(),
            line: valid.iter().filter(|b| **b == b'\n').count() as u64 + 1,
            message: "not UTF-8 text".into(),
        }
    })
}

/// Result of a reconciliation run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileReport {
    /// The day, `YYYY-MM-DD`.
    pub day: String,
    /// Statement lines read.
    pub rows: usize,
    /// Differences reported to the error pool.
    pub differences: usize,
}

/// Why a reconciliation could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The day is not `YYYY-MM-DD`.
    #[error("day must be YYYY-MM-DD, got {0:?}")]
    BadDay(String),
    /// The statement could not be fetched.
    #[error("statement unavailable: {0}")]
    Unavailable(String),
    /// The statement is garbled; nothing was imported (an error-pool item names the line).
    #[error("statement rejected, nothing imported: {0}")]
    BadFile(StatementError),
    /// Storage failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<crate::store::StoreError> for ReconcileError {
    fn from(e: crate::store::StoreError) -> Self {
        ReconcileError::Service(e.into())
    }
}

/// The UTC day (`YYYY-MM-DD`) whose statement is reconciled at `now_ms` (epoch ms UTC) when
/// statements are read `after_ms` past midnight UTC: the day before the one `after_ms` ago.
/// Until `after_ms` past midnight, that is still the day before yesterday, whose statement was
/// due the previous night, so a process started then schedules nothing new.
pub fn statement_day(now_ms: i64, after_ms: i64) -> String {
    const DAY_MS: i64 = 86_400_000;
    let day_index = (now_ms - after_ms).div_euclid(DAY_MS) - 1;
    chrono::DateTime::from_timestamp_millis(day_index * DAY_MS)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| "1970-01-01".into())
}

impl Core {
    /// Queues the reconcile job of the latest statement day ([`statement_day`]) unless some
    /// process already did; the day and the job id when this call queued it. The job fetches
    /// the channel's statement and reconciles it like `converge reconcile --date D`.
    ///
    /// Errors: a store failure (the next tick tries again).
    pub async fn schedule_daily_reconcile(
        &self,
        after_ms: i64,
    ) -> Result<Option<(String, i64)>, ServiceError> {
        let now = self.clock.now_ms();
        let day = statement_day(now, after_ms);
        let job = crate::store::NewJob {
            kind: crate::store::JobKind::Reconcile,
            payment_id: None,
            refund_id: None,
            run_at: now,
            max_attempts: self.timings.max_attempts,
        };
        Ok(self
            .store
            .schedule_reconcile(&day, &job, now)
            .await?
            .map(|id| (day, id)))
    }

    /// Reconciles `day` against `file` (a statement file's bytes; `None` fetches the
    /// statement of every configured connector and reconciles them together, channel keys
    /// being unique across connectors). `source` names the file for error messages. A file that
    /// is not UTF-8 text, garbled or cut off imports nothing and becomes one error-pool item
    /// naming the file and line ([`ReconcileError::BadFile`]).
    pub async fn reconcile(
        &self,
        day: &str,
        source: &str,
        file: Option<Vec<u8>>,
    ) -> Result<ReconcileReport, ReconcileError> {
        let date = NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .map_err(|_| ReconcileError::BadDay(day.into()))?;
        let files = match file {
            Some(b) => vec![(source.to_owned(), b)],
            None => self.connector_statements(day, source).await?,
        };
        let now = self.clock.now_ms();
        let rows = self.read_statements(day, files, now).await?;
        let mut found = Differences {
            day,
            now,
            items: Vec::new(),
        };
        let (start, end) = day_range(date);
        let captured: HashMap<String, ChargedPayment> = self
            .store
            .captures_settled(start, end)
            .await?
            .into_iter()
            .map(|c| (c.id.clone(), c))
            .collect();
        let seen = self
            .statement_differences(&rows, &captured, &mut found)
            .await?;
        self.missing_from_statement(date, &seen, &captured, &mut found)
            .await?;
        let items = found.items;
        self.store
            .record_reconciliation(day, source, rows.len() as i64, &items, now)
            .await?;
        Ok(ReconcileReport {
            day: day.into(),
            rows: rows.len(),
            differences: items.len(),
        })
    }

    /// Every line of `files`, or, at the first file that is not UTF-8 text, garbled or cut
    /// off, that file's one error-pool item and [`ReconcileError::BadFile`].
    async fn read_statements(
        &self,
        day: &str,
        files: Vec<(String, Vec<u8>)>,
        now: i64,
    ) -> Result<Vec<StatementRow>, ReconcileError> {
        let mut rows = Vec::new();
        for (source, bytes) in files {
            match statement_text(&source, bytes).and_then(|t| parse_statement(&source, &t)) {
                Ok(r) => rows.extend(r),
                Err(e) => {
                    self.store
                        .report_error(&NewErrorItem {
                            kind: "reconcile_bad_file".into(),
                            dedupe_key: format!("recon:{day}:bad_file:{source}"),
                            payment_id: None,
                            summary: e.to_string(),
                            evidence: json!({"file": e.file, "line": e.line, "message": e.message, "day": day}).to_string(),
                            reopen: false,
                            now,
                        })
                        .await?;
                    return Err(ReconcileError::BadFile(e));
                }
            }
        }
        Ok(rows)
    }

    /// The statement's side of the match: each line against the payment with its channel
    /// key (a charge listed twice, a charge with no payment, another amount or status); a
    /// manual-capture payment's lines (one per capture) summed against what it captured that
    /// day (`captured`). Returns the channel keys the statement lists, for the other side.
    async fn statement_differences(
        &self,
        rows: &[StatementRow],
        captured: &HashMap<String, ChargedPayment>,
        found: &mut Differences<'_>,
    ) -> Result<HashSet<String>, ReconcileError> {
        let mut seen = HashSet::new();
        let mut first_line = HashMap::new();
        let mut holds: BTreeMap<String, (Payment, Vec<&StatementRow>)> = BTreeMap::new();
        for row in rows {
            seen.insert(row.channel_key.clone());
            if let Some((_, lines)) = holds.get_mut(&row.channel_key) {
                lines.push(row);
                continue;
            }
            let payment = self.store.payment_by_channel_key(&row.channel_key).await?;
            let payment = match payment {
                Some(p) if p.capture_mode == CaptureMode::Manual => {
                    holds.insert(row.channel_key.clone(), (p, vec![row]));
                    continue;
                }
                other => other,
            };
            // The same charge listed twice would be settled twice: money, not a typo.
            if let Some(first) = first_line.insert(row.channel_key.clone(), row.line) {
                found.push(
                    "duplicate_statement",
                    &format!("{}:{}", row.channel_key, row.line),
                    None,
                    format!(
                        "statement lists charge {} twice (lines {first} and {})",
                        row.channel_key, row.line
                    ),
                    json!({"statement": statement_json(row), "first_line": first}),
                );
                continue;
            }
            match payment {
                Some(p) => charge_differences(row, &p, found),
                None => found.push(
                    "missing_local",
                    &row.channel_key,
                    None,
                    format!("statement charge {} has no payment", row.channel_key),
                    json!({"statement": statement_json(row), "local": null}),
                ),
            }
        }
        for (p, lines) in holds.values() {
            capture_differences(p, lines, captured.get(&p.id), found);
        }
        Ok(seen)
    }

    /// The local side of the match: every payment created on `date` and charged, and every
    /// manual payment with captures settled that day (`captured`), whose channel key the
    /// statement (`seen`) does not list.
    async fn missing_from_statement(
        &self,
        date: NaiveDate,
        seen: &HashSet<String>,
        captured: &HashMap<String, ChargedPayment>,
        found: &mut Differences<'_>,
    ) -> Result<(), ReconcileError> {
        let (start, end) = day_range(date);
        let charged = self.store.charged_payments_created(start, end).await?;
        for p in charged.iter().chain(captured.values()) {
            if !seen.contains(&p.channel_key) {
                found.push(
                    "missing_statement",
                    &p.channel_key,
                    Some(p.id.clone()),
                    format!("payment {} ({}) is charged but missing from the statement", p.id, p.status),
                    json!({"statement": null, "local": {"payment_id": p.id, "amount": p.amount, "currency": p.currency, "status": p.status}}),
                );
            }
        }
        Ok(())
    }
}

/// The epoch-ms bounds `[start, end)` of UTC day `date`.
fn day_range(date: NaiveDate) -> (i64, i64) {
    let start = date
        .and_hms_opt(0, 0, 0)
        .map(|d| d.and_utc().timestamp_millis())
        .unwrap_or_default();
    (start, start + 86_400_000)
}

/// A statement line as evidence.
fn statement_json(row: &StatementRow) -> serde_json::Value {
    let mut v = json!({"amount": row.amount, "currency": row.currency, "status": row.status, "charged_at": row.charged_at, "line": row.line});
    if let Some((fee, net)) = row.fee_net {
        v["fee"] = json!(fee);
        v["net"] = json!(net);
    }
    v
}

/// One charge's line against its (automatic-capture) payment: amount, currency and status.
fn charge_differences(row: &StatementRow, p: &Payment, found: &mut Differences<'_>) {
    let statement = statement_json(row);
    let local = json!({"payment_id": p.id, "amount": p.amount, "currency": p.currency, "status": p.status.as_str()});
    if row.amount != p.amount || row.currency != p.currency {
        found.push(
            "amount_mismatch",
            &row.channel_key,
            Some(p.id.clone()),
            format!(
                "statement says {}, payment is {}",
                money::display(row.amount, &row.currency),
                money::display(p.amount, &p.currency)
            ),
            json!({"statement": statement, "local": local}),
        );
    }
    let statement_charged = row.status == "succeeded";
    if statement_charged != p.status.is_charged() {
        found.push(
            "status_mismatch",
            &row.channel_key,
            Some(p.id.clone()),
            format!("statement says {}, payment is {}", row.status, p.status),
            json!({"statement": statement, "local": local}),
        );
    }
}

/// A manual-capture payment's lines of the day (one per capture) against the captures it
/// settled that day (`captured`; none when `None`): their sum and currency, and every line
/// `succeeded`.
fn capture_differences(
    p: &Payment,
    lines: &[&StatementRow],
    captured: Option<&ChargedPayment>,
    found: &mut Differences<'_>,
) {
    let listed: i64 = lines.iter().map(|l| l.amount).fold(0, i64::saturating_add);
    let local_amount = captured.map_or(0, |c| c.amount);
    let statement: Vec<_> = lines.iter().map(|l| statement_json(l)).collect();
    let local = json!({"payment_id": p.id, "captured": local_amount, "currency": p.currency, "status": p.status.as_str()});
    let key = &lines[0].channel_key;
    if listed != local_amount || lines.iter().any(|l| l.currency != p.currency) {
        found.push(
            "amount_mismatch",
            key,
            Some(p.id.clone()),
            format!(
                "statement lists captures of {}, payment captured {} that day",
                money::display(listed, &lines[0].currency),
                money::display(local_amount, &p.currency)
            ),
            json!({"statement": statement, "local": local}),
        );
    }
    if let Some(l) = lines.iter().find(|l| l.status != "succeeded") {
        found.push(
            "status_mismatch",
            key,
            Some(p.id.clone()),
            format!(
                "statement says capture {}, payment is {}",
                l.status, p.status
            ),
            json!({"statement": statement, "local": local}),
        );
    }
}

/// The differences one reconciliation of `day` finds, as error-pool items whose dedupe key
/// is (day, kind, key), so re-running the day adds nothing twice.
struct Differences<'a> {
    /// The statement day, `YYYY-MM-DD`.
    day: &'a str,
    /// When the reconciliation ran, epoch ms.
    now: i64,
    /// The items so far, in the order found.
    items: Vec<NewErrorItem>,
}

impl Differences<'_> {
    /// Adds the item of a difference of `kind` (`reconcile_<kind>`) about `key` (a channel
    /// key, or a key and its line), with both sides in `evidence`.
    fn push(
        &mut self,
        kind: &str,
        key: &str,
        payment_id: Option<String>,
        summary: String,
        evidence: serde_json::Value,
    ) {
        let day = self.day;
        self.items.push(NewErrorItem {
            kind: format!("reconcile_{kind}"),
            dedupe_key: format!("recon:{day}:{kind}:{key}"),
            payment_id,
            summary,
            evidence: evidence.to_string(),
            reopen: false,
            now: self.now,
        });
    }
}

impl Core {
    /// The statement of `day` from each configured connector, named `source` (with the
    /// connector's name in brackets when there are several). Errors: a connector whose
    /// statement cannot be had (failed or unsupported) makes the day unavailable: a day
    /// reconciled without one connector's charges would report them all as missing.
    async fn connector_statements(
        &self,
        day: &str,
        source: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, ReconcileError> {
        let several = self.connectors.names().len() > 1;
        let mut files = Vec::new();
        for (name, connector) in self.connectors.iter() {
            let text = connector.statement(day).await.map_err(|e| {
                ReconcileError::Unavailable(if several {
                    format!("connector {name}: {e}")
                } else {
                    e.to_string()
                })
            })?;
            let named = if several {
                format!("{source} ({name})")
            } else {
                source.to_owned()
            };
            files.push((named, text.into_bytes()));
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "channel_key,amount,currency,status,charged_at\n";
    const LINE: &str = "ck_1,100,CNY,succeeded,2026-11-30T01:00:00Z\n";
    const GOOD: &str = "channel_key,amount,currency,status,charged_at\nck_1,100,CNY,succeeded,2026-11-30T01:00:00Z\n#end,1,,,\n";

    #[test]
    fn a_well_formed_statement_parses() {
        let rows = parse_statement("s.csv", GOOD).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].amount, 100);
    }

    #[test]
    fn a_psp_statement_carries_fee_and_net_which_must_add_up() {
        let head = "channel_key,amount,currency,status,charged_at,fee,net\n";
        let line = "ck_1,10000,USD,succeeded,2026-11-30T01:00:00Z,320,9680\n";
        let rows = parse_statement("s.csv", &format!("{head}{line}#end,1,,,,,\n")).unwrap();
        assert_eq!(
            (rows[0].amount, rows[0].fee_net),
            (10000, Some((320, 9680)))
        );
        assert_eq!(parse_statement("s.csv", GOOD).unwrap()[0].fee_net, None);
        let off = "ck_1,10000,USD,succeeded,2026-11-30T01:00:00Z,320,9700\n";
        let e = parse_statement("s.csv", &format!("{head}{off}#end,1,,,,,\n")).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("less the fee"), "{e}");
        let negative = "ck_1,10000,USD,succeeded,2026-11-30T01:00:00Z,-5,10005\n";
        assert!(parse_statement("s.csv", &format!("{head}{negative}#end,1,,,,,\n")).is_err());
        for header in [
            "channel_key,amount,currency,status,charged_at,fee\n",
            "channel_key,amount,currency,status,charged_at,net,fee\n",
            "channel_key,amount,currency\n",
        ] {
            let e = parse_statement("s.csv", header).unwrap_err();
            assert_eq!(e.line, 1, "{header}");
        }
    }

    #[test]
    fn a_garbled_line_names_the_file_and_line() {
        let text = format!("{HEAD}{LINE}ck_2,abc,CNY,succeeded,2026-11-30T01:00:00Z\n#end,2,,,\n");
        let e = parse_statement("s.csv", &text).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("s.csv", 3));
    }

    #[test]
    fn a_truncated_file_is_refused_whole() {
        let e = parse_statement(
            "s.csv",
            "channel_key,amount,currency,status,charged_at\nck_1,100,CN",
        )
        .unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn a_file_cut_off_after_whole_lines_is_refused_by_its_end_line() {
        // right after the header: no lines, no end line
        assert_eq!(parse_statement("s.csv", HEAD).unwrap_err().line, 2);
        // after a whole line
        assert_eq!(
            parse_statement("s.csv", &format!("{HEAD}{LINE}"))
                .unwrap_err()
                .line,
            3
        );
        // an end line that counts other lines than the file holds
        let e = parse_statement("s.csv", &format!("{HEAD}{LINE}#end,2,,,\n")).unwrap_err();
        assert_eq!(e.line, 3);
        // lines after the end line
        let e = parse_statement("s.csv", &format!("{HEAD}#end,0,,,\n{LINE}")).unwrap_err();
        assert_eq!(e.line, 3);
        // an empty day is a header and an end line
        assert!(
            parse_statement("s.csv", &format!("{HEAD}#end,0,,,\n"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_line_with_a_bad_status_or_time_is_refused() {
        for bad in [
            "ck_2,100,CNY,Succeeded!,2026-11-30T01:00:00Z\n",
            "ck_2,100,CNY,succeeded,not-a-date\n",
        ] {
            let e = parse_statement("s.csv", &format!("{HEAD}{LINE}{bad}#end,2,,,\n")).unwrap_err();
            assert_eq!(e.line, 3, "{bad}");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_name_their_line() {
        let mut bytes = format!("{HEAD}{LINE}").into_bytes();
        bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
        let e = statement_text("s.csv", bytes).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("s.csv", 3));
    }

    #[test]
    fn the_statement_day_is_yesterday_once_the_hour_after_midnight_has_passed() {
        let at = |t: &str| {
            chrono::DateTime::parse_from_rfc3339(t)
                .unwrap()
                .timestamp_millis()
        };
        let hour = 3_600_000;
        assert_eq!(
            statement_day(at("2026-11-30T01:00:00Z"), hour),
            "2026-11-29"
        );
        assert_eq!(
            statement_day(at("2026-11-30T23:59:59Z"), hour),
            "2026-11-29"
        );
        assert_eq!(
            statement_day(at("2026-11-30T00:59:59Z"), hour),
            "2026-11-28"
        );
        assert_eq!(
            statement_day(at("2027-01-01T02:00:00Z"), hour),
            "2026-12-31"
        );
    }

    #[test]
    fn a_wrong_header_is_refused() {
        assert_eq!(
            parse_statement("s.csv", "key,amount\n").unwrap_err().line,
            1
        );
    }
}
