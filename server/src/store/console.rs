//! Storage for the ops console: users and the read models of the payment pages
//! (DESIGN.md "Ops console"). Part of the storage abstraction; conformance-tested on both
//! backends.

use async_trait::async_trait;

use super::{AuditEntry, Merchant, Payment, Refund, StoreError};

/// A console user. `password_hash` is an argon2id PHC string; never sent to a browser.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct User {
    /// Id.
    pub id: i64,
    /// Unique login name.
    pub username: String,
    /// argon2id PHC string.
    pub password_hash: String,
    /// Comma-separated roles.
    pub roles: String,
    /// A disabled user cannot log in and its sessions end.
    pub disabled: bool,
    /// Sessions carry the epoch they were created in; a bump ends them all.
    pub session_epoch: i64,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC.
    pub updated_at: i64,
    /// The last successful sign-in, epoch ms UTC; `None`: never.
    pub last_sign_in_at: Option<i64>,
}

/// Filters of the payment search; all optional, combined with AND. Results are newest first,
/// paged by the `(created_at, id)` of the last row seen.
#[derive(Debug, Clone, Default)]
pub struct PaymentFilter {
    /// Status name.
    pub status: Option<String>,
    /// Merchant id.
    pub merchant_id: Option<i64>,
    /// Exact merchant_order_id.
    pub merchant_order_id: Option<String>,
    /// Created at or after, epoch ms UTC.
    pub from: Option<i64>,
    /// Created before, epoch ms UTC.
    pub to: Option<i64>,
    /// A failure reason key ([`FailureReason::key`](converge_wire::FailureReason::key)): the
    /// payment had a charge attempt with it, or (`fenced`) its key was fenced
    /// ([`reason_condition`](super::health::reason_condition)).
    pub reason: Option<String>,
    /// A manual-capture hold expiring before this, epoch ms UTC (issue 34).
    pub expires_before: Option<i64>,
    /// Last changed (`updated_at`: entered its current state) before this, epoch ms UTC: the
    /// filter by time in state (issue 41).
    pub updated_before: Option<i64>,
    /// Page after this `(created_at, id)`: the older rows below it.
    pub after: Option<(i64, String)>,
    /// Page before this `(created_at, id)`: the `limit` rows just above it (the newer page),
    /// still returned newest first. Used instead of `after` when both are given.
    pub before: Option<(i64, String)>,
    /// Page size.
    pub limit: i64,
}

/// A bind argument of a payment search built by [`search_sql`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchArg<'a> {
    /// A text argument.
    Text(&'a str),
    /// An integer argument.
    Int(i64),
}

/// The SQL (with `$n` placeholders, valid on both backends) and arguments of the payment
/// search `f`, newest first, at most `limit` (clamped to 1..=500) rows. Only the filters given
/// become conditions, so each search can use its index (`payments_status_created`,
/// `payments_merchant_created`, `payments_order`, `payments_created`); public so the query
/// benchmark can `EXPLAIN` exactly what the console runs.
pub fn search_sql(f: &PaymentFilter) -> (String, Vec<SearchArg<'_>>) {
    let mut conds: Vec<String> = Vec::new();
    let mut args: Vec<SearchArg> = Vec::new();
    if let Some(s) = &f.status {
        args.push(SearchArg::Text(s));
        conds.push(format!("status = ${}", args.len()));
    }
    if let Some(m) = f.merchant_id {
        args.push(SearchArg::Int(m));
        conds.push(format!("merchant_id = ${}", args.len()));
    }
    if let Some(o) = &f.merchant_order_id {
        args.push(SearchArg::Text(o));
        conds.push(format!("merchant_order_id = ${}", args.len()));
    }
    if let Some(before) = f.expires_before {
        args.push(SearchArg::Int(before));
        conds.push(format!("hold_expires_at < ${}", args.len()));
    }
    if let Some(before) = f.updated_before {
        args.push(SearchArg::Int(before));
        conds.push(format!("updated_at < ${}", args.len()));
    }
    if let Some(from) = f.from {
        args.push(SearchArg::Int(from));
        conds.push(format!("created_at >= ${}", args.len()));
    }
    if let Some(to) = f.to {
        args.push(SearchArg::Int(to));
        conds.push(format!("created_at < ${}", args.len()));
    }
    if let Some(r) = &f.reason {
        args.push(SearchArg::Text(r));
        conds.push(super::health::reason_condition(args.len()));
    }
    let newer = f.before.is_some();
    if let Some((at, id)) = f.before.as_ref().or(f.after.as_ref()) {
        args.push(SearchArg::Int(*at));
        let a = args.len();
        args.push(SearchArg::Text(id));
        // `created_at <= $a` first: the planner can range over the index with it, where
        // the OR alone made it filter every newer row (67 ms for a deep page at 1 M).
        let (le, lt) = if newer { (">=", ">") } else { ("<=", "<") };
        conds.push(format!(
            "created_at {le} ${a} AND (created_at {lt} ${a} OR id {lt} ${})",
            args.len()
        ));
    }
    args.push(SearchArg::Int(f.limit.clamp(1, 500)));
    let filtered = format!(
        "SELECT {} FROM payments {} ORDER BY created_at {dir}, id {dir} LIMIT ${}",
        super::payments_sql::PAYMENT_COLUMNS,
        if conds.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conds.join(" AND "))
        },
        args.len(),
        dir = if newer { "ASC" } else { "DESC" },
    );
    // The newer page is the rows nearest above the cursor (ascending, so the index range
    // starts at the cursor), turned newest first like every other page.
    let sql = if newer {
        format!("SELECT * FROM ({filtered}) page ORDER BY created_at DESC, id DESC")
    } else {
        filtered
    };
    (sql, args)
}

/// One ledger line with its batch, for the payment page.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LedgerEntryRow {
    /// Batch id.
    pub batch_id: i64,
    /// `charge`, `refund` or `reversal`.
    pub kind: String,
    /// Account.
    pub account: String,
    /// `debit` or `credit`.
    pub direction: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// The batch's accounting day, `YYYY-MM-DD`.
    pub accounting_date: String,
}

impl From<LedgerEntryRow> for converge_wire::LedgerEntry {
    fn from(r: LedgerEntryRow) -> Self {
        // Every field named on both sides: one added to either fails to compile here.
        let LedgerEntryRow {
            batch_id,
            kind,
            account,
            direction,
            amount,
            currency,
            created_at,
            accounting_date,
        } = r;
        converge_wire::LedgerEntry {
            batch_id,
            kind,
            account,
            direction,
            amount,
            currency,
            created_at,
            accounting_date,
        }
    }
}

/// Which database pool a store runs on (for the session store, which needs the pool itself).
#[derive(Debug, Clone)]
pub enum DbPool {
    /// SQLite (the writer pool: session writes are writes).
    Sqlite(sqlx::SqlitePool),
    /// PostgreSQL.
    Postgres(sqlx::PgPool),
}

/// The answer of [`Console::begin_auth_attempt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptAdmission {
    /// The attempt is recorded (as unfinished, which counts as a failure until
    /// [`Console::finish_auth_attempt`] says otherwise): verify the password.
    Admitted {
        /// The attempt's id.
        id: i64,
    },
    /// Refused by the throttling rules; nothing recorded.
    Refused {
        /// Milliseconds until an attempt may be made.
        retry_after_ms: i64,
    },
}

/// Users and console read models.
/// One kind of error-pool item ([`Console::error_counts`]).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ErrorKindCount {
    /// Kind name (`suspense`, `job_dead`, `amount_mismatch`, ...).
    pub kind: String,
    /// Open items of the kind (0 when all are resolved).
    pub open: i64,
    /// The oldest open item's `first_seen`, epoch ms UTC; None when none is open.
    pub oldest_open: Option<i64>,
}

/// The message of the `Conflict` a user update answers when it would leave no enabled admin
/// (issue 36): the last admin can be neither disabled nor demoted.
pub const LAST_ADMIN: &str = "last_admin";

/// The condition (SQL over the `users` row being updated) under which an update may take an
/// admin away: the row is not an enabled admin now, or another enabled admin exists. Read in
/// the same statement as the update, after the audit lock, so two concurrent demotions of
/// the last two admins cannot both pass.
pub const KEEPS_AN_ADMIN: &str = "(NOT (users.disabled = FALSE AND ',' || users.roles || ',' LIKE '%,admin,%') \
     OR EXISTS (SELECT 1 FROM users o WHERE o.username <> users.username AND o.disabled = FALSE \
     AND ',' || o.roles || ',' LIKE '%,admin,%'))";

#[async_trait]
pub trait Console: Send + Sync + 'static {
    /// The pool, for tower-sessions' store.
    fn db_pool(&self) -> DbPool;
    /// Inserts a user with `audit` in the same transaction. Errors: `Conflict` when the name
    /// is taken.
    async fn create_user(
        &self,
        username: &str,
        password_hash: &str,
        roles: &str,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<User, StoreError>;
    /// The user with this name.
    async fn user_by_name(&self, username: &str) -> Result<Option<User>, StoreError>;
    /// Every user, by name.
    async fn users(&self) -> Result<Vec<User>, StoreError>;
    /// Disables or enables a user, ending its sessions, with `audit` in the same transaction;
    /// false (nothing written) when there is no such user. Errors: `Conflict(LAST_ADMIN)`
    /// (nothing written) when it would disable the last enabled admin ([`KEEPS_AN_ADMIN`]).
    async fn set_user_disabled(
        &self,
        username: &str,
        disabled: bool,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// Replaces a user's password hash, ending its sessions, with `audit` in the same
    /// transaction; false (nothing written) when there is no such user.
    async fn set_user_password(
        &self,
        username: &str,
        password_hash: &str,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// Replaces a user's roles with `audit` in the same transaction; false (nothing written)
    /// when there is no such user. Errors: `Conflict(LAST_ADMIN)` (nothing written) when it
    /// would take admin from the last enabled admin ([`KEEPS_AN_ADMIN`]).
    async fn set_user_roles(
        &self,
        username: &str,
        roles: &str,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// Records a successful sign-in of `username` at `at` (epoch ms UTC); nothing when there
    /// is no such user.
    async fn record_sign_in(&self, username: &str, at: i64) -> Result<(), StoreError>;
    /// Every merchant, by name.
    async fn merchants(&self) -> Result<Vec<Merchant>, StoreError>;
    /// Payments matching `filter`, newest first.
    async fn search_payments(&self, filter: &PaymentFilter) -> Result<Vec<Payment>, StoreError>;
    /// Refunds of a payment, oldest first.
    async fn payment_refunds(&self, payment_id: &str) -> Result<Vec<Refund>, StoreError>;
    /// Ledger lines of a payment, oldest first.
    async fn payment_ledger(&self, payment_id: &str) -> Result<Vec<LedgerEntryRow>, StoreError>;
    /// Idempotency outcomes per (minute, outcome) since `since_minute` (epoch minutes).
    async fn outcome_series(
        &self,
        since_minute: i64,
    ) -> Result<Vec<(i64, String, i64)>, StoreError>;
    /// Jobs finished (done) since the start of minute `since_minute` (epoch minutes UTC; the
    /// current minute included), the same count as `status = done AND updated_at >=
    /// since_minute * 60000` ([`jobs_done_since_sql`](super::jobs_done_since_sql)).
    async fn jobs_done_since(&self, since_minute: i64) -> Result<i64, StoreError>;
    /// Every kind that ever had an error-pool item (items are never deleted), by kind name,
    /// with its open items: how many and the oldest one's `first_seen`.
    async fn error_counts(&self) -> Result<Vec<ErrorKindCount>, StoreError>;
    /// Decides, with `policy` over the stored history of `addr` and of (`account`, `addr`),
    /// whether a password check may run at `now`, and records it as unfinished when it may.
    /// Attempts from one address are serialised across connections and processes, so
    /// servers sharing the database cannot together allow more than the policy does.
    async fn begin_auth_attempt(
        &self,
        account: &str,
        addr: &str,
        kind: crate::domain::throttle::AttemptKind,
        policy: &crate::domain::throttle::ThrottlePolicy,
        now: i64,
    ) -> Result<AttemptAdmission, StoreError>;
    /// Records how attempt `id` ended (`ok`: the password matched and the step succeeded)
    /// at `now`; a pair's delay counts from its last failure's end.
    async fn finish_auth_attempt(&self, id: i64, ok: bool, now: i64) -> Result<(), StoreError>;
    /// Deletes attempts older than `before` (epoch ms); returns how many.
    async fn purge_auth_attempts(&self, before: i64) -> Result<u64, StoreError>;
}
