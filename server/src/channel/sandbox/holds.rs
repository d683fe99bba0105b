//! Authorization holds in the sandbox's store (issue 34's channel side; protocol on
//! [`super::router`]): authorize with an expiry, capture up to what is held (partial, several,
//! one final), void of an uncaptured hold, each idempotent on its key, every step in one
//! transaction on the store's single connection so concurrent requests serialize.

use chrono::{DateTime, Utc};
use sqlx::{Sqlite, Transaction};

use super::behaviour::Behaviour;
// A hold's row is read by the charge side too (one key, one payment), so the store owns it.
pub use super::store::StoredHold;
use super::store::{Store, charge_in, hold_in, record_attempt, rfc3339, tombstoned_in};

/// What an authorization attempt amounts to once the store has decided.
#[derive(Debug)]
pub enum AuthorizeStep {
    /// A hold or decline was already stored under the key: answer it again.
    Existing(StoredHold),
    /// The key is tombstoned (cancelled, or voided before any hold).
    Cancelled,
    /// The key carries a charge: one key, one payment.
    ChargedKey,
    /// Digits 53: nothing committed.
    Timeout,
    /// Digits 56, attempt 1 or 2: nothing committed.
    Error5xx { attempt: i64 },
    /// Newly stored now (hold or decline).
    Committed {
        hold: StoredHold,
        behaviour: Behaviour,
    },
}

/// What a capture amounts to.
pub enum CaptureStep {
    /// Made now (`fresh`) or before under the same capture key: this capture's amount and
    /// the hold.
    Captured {
        amount: i64,
        hold: StoredHold,
        fresh: bool,
    },
    /// Refused; nothing captured.
    Rejected(&'static str),
}

/// What a void amounts to.
pub enum VoidStep {
    /// Released, or nothing was held and the key is now fenced.
    Voided,
    /// Lapsed before the void.
    Expired,
    /// Refused; the hold stays as it was.
    Rejected(&'static str),
}

/// What a query finds.
pub enum HoldQueryStep {
    Hold(StoredHold),
    Cancelled,
    NotFound,
}

async fn tombstone(
    tx: &mut Transaction<'_, Sqlite>,
    key: &str,
    now: DateTime<Utc>,
) -> sqlx::Result<()> {
    sqlx::query("INSERT OR IGNORE INTO sandbox_tombstones (key, cancelled_at) VALUES (?, ?)")
        .bind(key)
        .bind(rfc3339(now))
        .execute(&mut **tx)
        .await
        .map(|_| ())
}

impl Store {
    /// Records an attempt for `key` and decides an authorization of `amount` held for
    /// `ttl_ms`. The amount's digits act as for charges (51 declines, 53 times out, 56 fails
    /// twice, 52 and 54 commit and answer late or broken).
    pub async fn authorize(
        &self,
        key: &str,
        amount: i64,
        currency: &str,
        ttl_ms: i64,
        now: DateTime<Utc>,
        decide: impl FnOnce() -> Behaviour,
    ) -> sqlx::Result<AuthorizeStep> {
        let mut tx = self.pool.begin().await?;
        let (attempt, behaviour) = record_attempt(&mut tx, key, now, decide).await?;
        let step = if let Some(h) = hold_in(&mut tx, key).await? {
            AuthorizeStep::Existing(h)
        } else if charge_in(&mut tx, key).await?.is_some() {
            AuthorizeStep::ChargedKey
        } else if tombstoned_in(&mut tx, key).await? {
            AuthorizeStep::Cancelled
        } else {
            match behaviour {
                Behaviour::Timeout => AuthorizeStep::Timeout,
                Behaviour::Error5xx if attempt <= 2 => AuthorizeStep::Error5xx { attempt },
                b => {
                    let (status, reason) = match b {
                        Behaviour::Decline => ("declined", Some("card_declined".to_owned())),
                        _ => ("authorized", None),
                    };
                    let hold = StoredHold {
                        key: key.to_owned(),
                        amount,
                        currency: currency.to_owned(),
                        status: status.to_owned(),
                        reason,
                        captured: 0,
                        closed: false,
                        voided: false,
                        expires_ms: now.timestamp_millis().saturating_add(ttl_ms),
                    };
                    sqlx::query(
                        "INSERT INTO sandbox_holds (key, amount, currency, status, reason, authorized_at, expires_ms)
                         VALUES (?, ?, ?, ?, ?, ?, ?)",
                    )
                    .bind(key)
                    .bind(amount)
                    .bind(currency)
                    .bind(status)
                    .bind(&hold.reason)
                    .bind(rfc3339(now))
                    .bind(hold.expires_ms)
                    .execute(&mut *tx)
                    .await?;
                    AuthorizeStep::Committed { hold, behaviour: b }
                }
            }
        };
        tx.commit().await?;
        Ok(step)
    }

    /// Captures `amount` of the hold under `key`, idempotent on `capture_key`; `last` closes
    /// the hold (as does capturing all of it).
    pub async fn capture(
        &self,
        key: &str,
        capture_key: &str,
        amount: i64,
        last: bool,
        now: DateTime<Utc>,
    ) -> sqlx::Result<CaptureStep> {
        let mut tx = self.pool.begin().await?;
        let prior: Option<(String, i64, bool)> = sqlx::query_as(
            "SELECT hold_key, amount, final FROM sandbox_captures WHERE capture_key = ?",
        )
        .bind(capture_key)
        .fetch_optional(&mut *tx)
        .await?;
        let hold = hold_in(&mut tx, key).await?;
        let step = match (prior, hold) {
            (Some((k, a, f)), Some(hold)) if k == key && a == amount && f == last => {
                CaptureStep::Captured {
                    amount,
                    hold,
                    fresh: false,
                }
            }
            (Some(_), _) => CaptureStep::Rejected("capture_key_reused"),
            (None, None) => CaptureStep::Rejected("not_found"),
            (None, Some(hold)) => match hold.state(now.timestamp_millis()) {
                "authorized"
                    if hold
                        .captured
                        .checked_add(amount)
                        .is_none_or(|t| t > hold.amount) =>
                {
                    CaptureStep::Rejected("exceeds_authorized")
                }
                "authorized" => {
                    let captured = hold.captured + amount;
                    let closed = last || captured == hold.amount;
                    sqlx::query(
                        "INSERT INTO sandbox_captures (capture_key, hold_key, amount, final, created_at) VALUES (?, ?, ?, ?, ?)",
                    )
                    .bind(capture_key)
                    .bind(key)
                    .bind(amount)
                    .bind(last)
                    .bind(rfc3339(now))
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query("UPDATE sandbox_holds SET captured = ?, closed = ? WHERE key = ?")
                        .bind(captured)
                        .bind(closed)
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                    CaptureStep::Captured {
                        amount,
                        hold: StoredHold {
                            captured,
                            closed,
                            ..hold
                        },
                        fresh: true,
                    }
                }
                "captured" => CaptureStep::Rejected("closed"),
                "voided" => CaptureStep::Rejected("voided"),
                "expired" => CaptureStep::Rejected("expired"),
                _ => CaptureStep::Rejected("declined"),
            },
        };
        tx.commit().await?;
        Ok(step)
    }

    /// Releases the uncaptured hold under `key`; with no hold (or a declined one) the key is
    /// tombstoned instead, so a late authorization cannot hold funds (TCC empty rollback).
    pub async fn void(&self, key: &str, now: DateTime<Utc>) -> sqlx::Result<VoidStep> {
        let mut tx = self.pool.begin().await?;
        let step = match hold_in(&mut tx, key).await? {
            None if charge_in(&mut tx, key)
                .await?
                .is_some_and(|c| c.succeeded()) =>
            {
                VoidStep::Rejected("already_captured")
            }
            None => {
                tombstone(&mut tx, key, now).await?;
                VoidStep::Voided
            }
            Some(h) => match h.state(now.timestamp_millis()) {
                "voided" => VoidStep::Voided,
                "declined" => {
                    tombstone(&mut tx, key, now).await?;
                    VoidStep::Voided
                }
                "expired" if h.captured == 0 => VoidStep::Expired,
                "authorized" if h.captured == 0 => {
                    sqlx::query("UPDATE sandbox_holds SET voided_at = ? WHERE key = ?")
                        .bind(rfc3339(now))
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                    VoidStep::Voided
                }
                _ => VoidStep::Rejected("already_captured"),
            },
        };
        tx.commit().await?;
        Ok(step)
    }

    /// Where the hold under `key` stands.
    pub async fn query_hold(&self, key: &str) -> sqlx::Result<HoldQueryStep> {
        let mut tx = self.pool.begin().await?;
        let step = if let Some(h) = hold_in(&mut tx, key).await? {
            HoldQueryStep::Hold(h)
        } else if tombstoned_in(&mut tx, key).await? {
            HoldQueryStep::Cancelled
        } else {
            HoldQueryStep::NotFound
        };
        tx.commit().await?;
        Ok(step)
    }
}
