//! The sandbox's own SQLite store (DESIGN.md "Sandbox channel": "its own store"). It is a
//! separate database from the core's so the core can never read the channel's truth except
//! over HTTP, like with a real PSP.
//!
//! The pool holds exactly one connection: every charge/cancel/refund runs in one transaction
//! on it, so concurrent requests for one key are serialized and can never charge twice. One
//! connection is also what keeps a `sqlite::memory:` database alive and shared.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};

use super::behaviour::Behaviour;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS sandbox_attempts (
        key TEXT PRIMARY KEY,
        attempts INTEGER NOT NULL,
        behaviour TEXT NOT NULL,
        first_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sandbox_charges (
        key TEXT PRIMARY KEY,
        amount INTEGER NOT NULL,
        currency TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('succeeded', 'declined')),
        reason TEXT,
        statement_amount INTEGER NOT NULL,
        in_statement INTEGER NOT NULL,
        charged_at TEXT NOT NULL,
        charged_day TEXT NOT NULL,
        charged_ms INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS sandbox_charges_day ON sandbox_charges (charged_day, charged_ms)",
    "CREATE TABLE IF NOT EXISTS sandbox_tombstones (
        key TEXT PRIMARY KEY,
        cancelled_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sandbox_refunds (
        refund_key TEXT PRIMARY KEY,
        charge_key TEXT NOT NULL,
        amount INTEGER NOT NULL,
        created_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS sandbox_refunds_charge ON sandbox_refunds (charge_key)",
    // Authorization holds share the key space of charges (one key, one payment) and the
    // tombstones (a fenced key can hold nothing). `closed` is set by a final or whole
    // capture; `voided_at` by a void; expiry is read against `expires_ms` on the clock.
    "CREATE TABLE IF NOT EXISTS sandbox_holds (
        key TEXT PRIMARY KEY,
        amount INTEGER NOT NULL,
        currency TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('authorized', 'declined')),
        reason TEXT,
        captured INTEGER NOT NULL DEFAULT 0,
        closed INTEGER NOT NULL DEFAULT 0,
        voided_at TEXT,
        authorized_at TEXT NOT NULL,
        expires_ms INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sandbox_captures (
        capture_key TEXT PRIMARY KEY,
        hold_key TEXT NOT NULL,
        amount INTEGER NOT NULL,
        final INTEGER NOT NULL,
        created_at TEXT NOT NULL)",
];

/// A charge row: a committed success or a stored decline. Amounts in minor units; times UTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCharge {
    pub key: String,
    pub amount: i64,
    pub currency: String,
    /// `"succeeded"` or `"declined"`.
    pub status: String,
    pub reason: Option<String>,
    /// RFC 3339, UTC, whole seconds.
    pub charged_at: String,
    /// Milliseconds since the epoch.
    pub charged_ms: i64,
}

impl StoredCharge {
    pub fn succeeded(&self) -> bool {
        self.status == "succeeded"
    }
}

/// What a charge attempt amounts to once the store has decided.
#[derive(Debug)]
pub enum ChargeStep {
    /// A charge or decline was already stored under the key: answer it again.
    Existing(StoredCharge),
    /// The key is tombstoned.
    Cancelled,
    /// The key holds an authorization: one key, one payment.
    HeldKey,
    /// Digits 53: nothing committed.
    Timeout,
    /// Digits 56, attempt 1 or 2: nothing committed.
    Error5xx { attempt: i64 },
    /// Newly stored now (success or decline).
    Committed {
        charge: StoredCharge,
        behaviour: Behaviour,
    },
}

pub enum CancelStep {
    Cancelled,
    AlreadyCharged(StoredCharge),
    /// The key holds funds (an open or captured authorization): a hold is released by a
    /// void, not a cancel.
    Held,
}

pub enum RefundStep {
    Succeeded,
    Rejected(&'static str),
}

pub enum QueryStep {
    Charge(StoredCharge),
    Cancelled,
    NotFound,
}

/// What can be refunded under `key`: a successful charge's amount, or what a hold's captures
/// took (issue 34: refunds apply to captured amounts only); None when neither exists.
async fn refundable_in(tx: &mut Transaction<'_, Sqlite>, key: &str) -> sqlx::Result<Option<i64>> {
    if let Some(c) = charge_in(tx, key).await? {
        return Ok(c.succeeded().then_some(c.amount));
    }
    Ok(hold_in(tx, key)
        .await?
        .filter(|h| h.captured > 0)
        .map(|h| h.captured))
}

/// One statement line; `amount` is what the statement claims (digits 57 lie by +1).
pub struct StatementLine {
    pub key: String,
    pub amount: i64,
    pub currency: String,
    pub charged_at: String,
}

/// One row of `GET /charges`: a stored charge (success or decline) with the attempts seen for
/// its key and the total refunded against it (minor units).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedCharge {
    pub key: String,
    pub amount: i64,
    pub currency: String,
    /// `"succeeded"` or `"declined"`.
    pub status: String,
    /// RFC 3339, UTC.
    pub charged_at: String,
    /// Charge requests seen for the key.
    pub attempts: i64,
    /// Sum of refunds against the charge, minor units.
    pub refunded: i64,
}

/// Totals for `GET /stats`.
pub struct StoreStats {
    pub charges: i64,
    pub declines: i64,
    pub attempts: i64,
}

#[derive(Clone)]
pub struct Store {
    pub(super) pool: SqlitePool,
}

pub(super) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

const CHARGE_COLS: &str = "key, amount, currency, status, reason, charged_at, charged_ms";

type ChargeRow = (String, i64, String, String, Option<String>, String, i64);

fn to_charge(r: ChargeRow) -> StoredCharge {
    StoredCharge {
        key: r.0,
        amount: r.1,
        currency: r.2,
        status: r.3,
        reason: r.4,
        charged_at: r.5,
        charged_ms: r.6,
    }
}

pub(super) async fn charge_in(
    tx: &mut Transaction<'_, Sqlite>,
    key: &str,
) -> sqlx::Result<Option<StoredCharge>> {
    let sql = format!("SELECT {CHARGE_COLS} FROM sandbox_charges WHERE key = ?");
    let row: Option<ChargeRow> = sqlx::query_as(&sql)
        .bind(key)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.map(to_charge))
}

pub(super) async fn tombstoned_in(
    tx: &mut Transaction<'_, Sqlite>,
    key: &str,
) -> sqlx::Result<bool> {
    let row: Option<(i64,)> = sqlx::query_as("SELECT 1 FROM sandbox_tombstones WHERE key = ?")
        .bind(key)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.is_some())
}

impl Store {
    /// Opens `database_url` (`sqlite::memory:`, `sqlite://path?mode=rwc`, or a plain file path,
    /// whose parent directory is created) and creates the tables if missing.
    pub async fn open(database_url: &str) -> anyhow::Result<Self> {
        let opts = if database_url.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(database_url)
                .with_context(|| format!("bad sandbox database url {database_url}"))?
        } else {
            let path = std::path::Path::new(database_url);
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            SqliteConnectOptions::new()
                .filename(path)
                .journal_mode(SqliteJournalMode::Wal)
        };
        // WAL with synchronous=NORMAL: a commit survives the process being killed (what the
        // chaos run does) but is not fsynced. The sandbox stands in for a PSP, whose disk is
        // not converge's; with the default FULL every charge waited for an fsync and the
        // simulator, not converge, set the pace of the create-payment benchmark.
        let opts = opts
            .synchronous(SqliteSynchronous::Normal)
            .create_if_missing(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await
            .with_context(|| format!("opening sandbox database {database_url}"))?;
        for stmt in SCHEMA {
            sqlx::query(stmt)
                .execute(&pool)
                .await
                .context("creating sandbox tables")?;
        }
        Ok(Self { pool })
    }

    pub async fn ping(&self) -> sqlx::Result<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
    }

    /// Records an attempt for `key` and decides it. `decide` runs only for a key never seen
    /// before, inside the transaction, so the fault RNG is drawn in store order.
    pub async fn charge(
        &self,
        key: &str,
        amount: i64,
        currency: &str,
        now: DateTime<Utc>,
        decide: impl FnOnce() -> Behaviour,
    ) -> sqlx::Result<ChargeStep> {
        let mut tx = self.pool.begin().await?;
        let (attempt, behaviour) = record_attempt(&mut tx, key, now, decide).await?;
        let step = if let Some(c) = charge_in(&mut tx, key).await? {
            ChargeStep::Existing(c)
        } else if hold_in(&mut tx, key).await?.is_some() {
            ChargeStep::HeldKey
        } else if tombstoned_in(&mut tx, key).await? {
            ChargeStep::Cancelled
        } else {
            match behaviour {
                Behaviour::Timeout => ChargeStep::Timeout,
                Behaviour::Error5xx if attempt <= 2 => ChargeStep::Error5xx { attempt },
                b => {
                    let charge = insert_charge(&mut tx, key, amount, currency, now, b).await?;
                    ChargeStep::Committed {
                        charge,
                        behaviour: b,
                    }
                }
            }
        };
        tx.commit().await?;
        Ok(step)
    }

    pub async fn query(&self, key: &str) -> sqlx::Result<QueryStep> {
        let mut tx = self.pool.begin().await?;
        let step = if let Some(c) = charge_in(&mut tx, key).await? {
            QueryStep::Charge(c)
        } else if tombstoned_in(&mut tx, key).await? {
            QueryStep::Cancelled
        } else {
            QueryStep::NotFound
        };
        tx.commit().await?;
        Ok(step)
    }

    /// Tombstones `key` unless a successful charge exists or funds are held under it. A stored
    /// decline is no charge, so it is tombstoned too (the key stays declined for queries).
    pub async fn cancel(&self, key: &str, now: DateTime<Utc>) -> sqlx::Result<CancelStep> {
        let mut tx = self.pool.begin().await?;
        let held = hold_in(&mut tx, key).await?;
        let step = match charge_in(&mut tx, key).await? {
            Some(c) if c.succeeded() => CancelStep::AlreadyCharged(c),
            // Funds held or captured under the key: only a void releases a hold. A voided,
            // declined or lapsed-and-uncaptured hold holds nothing, so the key is fenced.
            _ if held.as_ref().is_some_and(|h| {
                h.captured > 0
                    || matches!(h.state(now.timestamp_millis()), "authorized" | "captured")
            }) =>
            {
                CancelStep::Held
            }
            _ => {
                sqlx::query(
                    "INSERT OR IGNORE INTO sandbox_tombstones (key, cancelled_at) VALUES (?, ?)",
                )
                .bind(key)
                .bind(rfc3339(now))
                .execute(&mut *tx)
                .await?;
                CancelStep::Cancelled
            }
        };
        tx.commit().await?;
        Ok(step)
    }

    pub async fn refund(
        &self,
        refund_key: &str,
        charge_key: &str,
        amount: i64,
        now: DateTime<Utc>,
    ) -> sqlx::Result<RefundStep> {
        let mut tx = self.pool.begin().await?;
        let prior: Option<(String, i64)> =
            sqlx::query_as("SELECT charge_key, amount FROM sandbox_refunds WHERE refund_key = ?")
                .bind(refund_key)
                .fetch_optional(&mut *tx)
                .await?;
        let step = match prior {
            Some((k, a)) if k == charge_key && a == amount => RefundStep::Succeeded,
            Some(_) => RefundStep::Rejected("refund_key_reused"),
            None => match refundable_in(&mut tx, charge_key).await? {
                Some(refundable) => {
                    let (done,): (i64,) = sqlx::query_as(
                        "SELECT COALESCE(SUM(amount), 0) FROM sandbox_refunds WHERE charge_key = ?",
                    )
                    .bind(charge_key)
                    .fetch_one(&mut *tx)
                    .await?;
                    if done
                        .checked_add(amount)
                        .is_none_or(|total| total > refundable)
                    {
                        RefundStep::Rejected("exceeds_charge_amount")
                    } else {
                        sqlx::query(
                            "INSERT INTO sandbox_refunds (refund_key, charge_key, amount, created_at) VALUES (?, ?, ?, ?)",
                        )
                        .bind(refund_key)
                        .bind(charge_key)
                        .bind(amount)
                        .bind(rfc3339(now))
                        .execute(&mut *tx)
                        .await?;
                        RefundStep::Succeeded
                    }
                }
                None => RefundStep::Rejected("no_successful_charge"),
            },
        };
        tx.commit().await?;
        Ok(step)
    }

    /// Successful charges and captures of UTC day `day` (`YYYY-MM-DD`) as the statement
    /// reports them, oldest first: one line per charge, and one per capture of a hold (under
    /// the hold's key, at the capture's time; a key captured in parts has several lines). A
    /// capture's amount digits act on its line as a charge's do (57 reports `amount + 1`, 58
    /// leaves it out).
    pub async fn statement(&self, day: &str) -> sqlx::Result<Vec<StatementLine>> {
        let rows: Vec<(String, i64, String, String)> = sqlx::query_as(
            "SELECT key, statement_amount, currency, charged_at FROM sandbox_charges
             WHERE charged_day = ? AND status = 'succeeded' AND in_statement = 1
             ORDER BY charged_ms, key",
        )
        .bind(day)
        .fetch_all(&self.pool)
        .await?;
        // Capture times are whole-second RFC 3339 UTC text: the day is their first ten bytes.
        let captures: Vec<(String, i64, String, String)> = sqlx::query_as(
            "SELECT c.hold_key, c.amount, h.currency, c.created_at FROM sandbox_captures c
             JOIN sandbox_holds h ON h.key = c.hold_key
             WHERE substr(c.created_at, 1, 10) = ? ORDER BY c.created_at, c.capture_key",
        )
        .bind(day)
        .fetch_all(&self.pool)
        .await?;
        let captures = captures
            .into_iter()
            .filter_map(
                |(key, amount, currency, at)| match Behaviour::for_amount(amount) {
                    Behaviour::StatementMissing => None,
                    Behaviour::StatementAmount => {
                        Some((key, amount.saturating_add(1), currency, at))
                    }
                    _ => Some((key, amount, currency, at)),
                },
            );
        let mut lines: Vec<StatementLine> = rows
            .into_iter()
            .chain(captures)
            .map(|(key, amount, currency, charged_at)| StatementLine {
                key,
                amount,
                currency,
                charged_at,
            })
            .collect();
        // Stable: charges keep their millisecond order within a second, before its captures.
        lines.sort_by(|a, b| a.charged_at.cmp(&b.charged_at));
        Ok(lines)
    }

    pub async fn attempts(&self, key: &str) -> sqlx::Result<Option<(i64, String)>> {
        sqlx::query_as("SELECT attempts, behaviour FROM sandbox_attempts WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
    }

    /// Up to `limit` charges with key greater than `after`, in key order (`GET /charges`).
    pub async fn list_charges(&self, after: &str, limit: i64) -> sqlx::Result<Vec<ListedCharge>> {
        let rows: Vec<(String, i64, String, String, String, i64, i64)> = sqlx::query_as(
            "SELECT c.key, c.amount, c.currency, c.status, c.charged_at, COALESCE(a.attempts, 0),
                COALESCE((SELECT SUM(r.amount) FROM sandbox_refunds r WHERE r.charge_key = c.key), 0)
             FROM sandbox_charges c LEFT JOIN sandbox_attempts a ON a.key = c.key
             WHERE c.key > ? ORDER BY c.key LIMIT ?",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(key, amount, currency, status, charged_at, attempts, refunded)| ListedCharge {
                    key,
                    amount,
                    currency,
                    status,
                    charged_at,
                    attempts,
                    refunded,
                },
            )
            .collect())
    }

    pub async fn stats(&self) -> sqlx::Result<StoreStats> {
        let (charges, declines): (i64, i64) = sqlx::query_as(
            "SELECT COALESCE(SUM(status = 'succeeded'), 0), COALESCE(SUM(status = 'declined'), 0)
             FROM sandbox_charges",
        )
        .fetch_one(&self.pool)
        .await?;
        let (attempts,): (i64,) =
            sqlx::query_as("SELECT COALESCE(SUM(attempts), 0) FROM sandbox_attempts")
                .fetch_one(&self.pool)
                .await?;
        Ok(StoreStats {
            charges,
            declines,
            attempts,
        })
    }
}

/// Counts a charge or authorization attempt for `key` and returns its number with the key's
/// behaviour, decided by `decide` at the first attempt (inside the transaction, so the fault
/// RNG is drawn in store order) and fixed afterwards.
pub(super) async fn record_attempt(
    tx: &mut Transaction<'_, Sqlite>,
    key: &str,
    now: DateTime<Utc>,
    decide: impl FnOnce() -> Behaviour,
) -> sqlx::Result<(i64, Behaviour)> {
    let prior: Option<(i64, String)> =
        sqlx::query_as("SELECT attempts, behaviour FROM sandbox_attempts WHERE key = ?")
            .bind(key)
            .fetch_optional(&mut **tx)
            .await?;
    Ok(match prior {
        Some((n, b)) => {
            sqlx::query("UPDATE sandbox_attempts SET attempts = attempts + 1 WHERE key = ?")
                .bind(key)
                .execute(&mut **tx)
                .await?;
            (n + 1, Behaviour::parse(&b))
        }
        None => {
            let b = decide();
            sqlx::query(
                "INSERT INTO sandbox_attempts (key, attempts, behaviour, first_at) VALUES (?, 1, ?, ?)",
            )
            .bind(key)
            .bind(b.as_str())
            .bind(rfc3339(now))
            .execute(&mut **tx)
            .await?;
            (1, b)
        }
    })
}

async fn insert_charge(
    tx: &mut Transaction<'_, Sqlite>,
    key: &str,
    amount: i64,
    currency: &str,
    now: DateTime<Utc>,
    behaviour: Behaviour,
) -> sqlx::Result<StoredCharge> {
    let (status, reason) = match behaviour {
        Behaviour::Decline => ("declined", Some("card_declined".to_owned())),
        _ => ("succeeded", None),
    };
    let statement_amount = match behaviour {
        Behaviour::StatementAmount => amount.saturating_add(1),
        _ => amount,
    };
    let charge = StoredCharge {
        key: key.to_owned(),
        amount,
        currency: currency.to_owned(),
        status: status.to_owned(),
        reason,
        charged_at: rfc3339(now),
        charged_ms: now.timestamp_millis(),
    };
    sqlx::query(
        "INSERT INTO sandbox_charges (key, amount, currency, status, reason, statement_amount,
            in_statement, charged_at, charged_day, charged_ms)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&charge.key)
    .bind(amount)
    .bind(currency)
    .bind(status)
    .bind(&charge.reason)
    .bind(statement_amount)
    .bind(behaviour != Behaviour::StatementMissing)
    .bind(&charge.charged_at)
    .bind(now.format("%Y-%m-%d").to_string())
    .bind(charge.charged_ms)
    .execute(&mut **tx)
    .await?;
    Ok(charge)
}

/// A hold row: an authorization (possibly captured, closed or voided) or a stored decline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredHold {
    pub key: String,
    /// Authorized amount, minor units.
    pub amount: i64,
    pub currency: String,
    /// `"authorized"` or `"declined"` as stored; [`StoredHold::state`] is what is reported.
    pub status: String,
    pub reason: Option<String>,
    /// Captured so far, minor units.
    pub captured: i64,
    /// A final or whole capture closed it.
    pub closed: bool,
    /// A void released it.
    pub voided: bool,
    /// Epoch ms UTC.
    pub expires_ms: i64,
}

impl StoredHold {
    /// Where the hold stands at `now_ms`: `declined`, `voided`, `captured` (closed),
    /// `expired` (lapsed while open) or `authorized`.
    pub fn state(&self, now_ms: i64) -> &'static str {
        if self.status == "declined" {
            "declined"
        } else if self.voided {
            "voided"
        } else if self.closed {
            "captured"
        } else if now_ms >= self.expires_ms {
            "expired"
        } else {
            "authorized"
        }
    }
}

const HOLD_COLS: &str =
    "key, amount, currency, status, reason, captured, closed, voided_at IS NOT NULL, expires_ms";

type HoldRow = (
    String,
    i64,
    String,
    String,
    Option<String>,
    i64,
    bool,
    bool,
    i64,
);

/// The hold stored under `key`, if any.
pub(super) async fn hold_in(
    tx: &mut Transaction<'_, Sqlite>,
    key: &str,
) -> sqlx::Result<Option<StoredHold>> {
    let sql = format!("SELECT {HOLD_COLS} FROM sandbox_holds WHERE key = ?");
    let row: Option<HoldRow> = sqlx::query_as(&sql)
        .bind(key)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.map(|r| StoredHold {
        key: r.0,
        amount: r.1,
        currency: r.2,
        status: r.3,
        reason: r.4,
        captured: r.5,
        closed: r.6,
        voided: r.7,
        expires_ms: r.8,
    }))
}
