//! Storage of ops actions (maker-checker) and the hash-chained audit log (DESIGN.md "Ops
//! console"). Appends are serialised (SQLite's one writer; a PostgreSQL advisory lock), so
//! the chain holds under concurrency; every action step is written in the same transaction
//! as its audit record.

use async_trait::async_trait;

use super::StoreError;
pub use crate::domain::audit::{AuditEntry, AuditRecord};
pub use crate::domain::checkpoint::Checkpoint;

pub use converge_wire::ActionRecord;

/// A request that needs an approver, with the payment it concerns as it stands now: what the
/// approvals inbox shows (issue 17). Read in one query, so a page of requests costs one read,
/// not one per payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRow {
    /// The request.
    pub action: ActionRecord,
    /// The payment's merchant name; `None` when the payment is gone.
    pub merchant: Option<String>,
    /// The payment's amount, integer minor units.
    pub amount: Option<i64>,
    /// ISO 4217 code.
    pub currency: Option<String>,
    /// What the merchant's refunds took of the amount, integer minor units.
    pub refunded_amount: Option<i64>,
    /// The payment's status now.
    pub payment_status: Option<String>,
    /// The payment's version now; differs from `action.payment_version` when the payment moved
    /// since the request (a stale request).
    pub payment_version_now: Option<i64>,
}

impl ApprovalRow {
    /// Whether approving would only close the request as stale: its payment moved (or is gone)
    /// since the request pinned its version. The same rule `Core::approve_action` applies.
    pub fn stale(&self) -> bool {
        self.payment_version_now != Some(self.action.payment_version)
    }
}

impl From<ApprovalRow> for converge_wire::governance::ApprovalItem {
    fn from(r: ApprovalRow) -> Self {
        // What approving a reversal refunds now: the amount the merchant's refunds left
        // (`Payment::unrefunded`'s rule, here from the joined columns).
        let reversal_refunds = (r.action.kind
            == crate::domain::actions::ActionKind::Reverse.as_str())
        .then(|| {
            r.amount
                .zip(r.refunded_amount)
                .map(|(a, refunded)| a - refunded)
        })
        .flatten();
        Self {
            stale: r.stale(),
            reversal_refunds,
            action: r.action,
            merchant: r.merchant,
            amount: r.amount,
            currency: r.currency,
            payment_status: r.payment_status,
        }
    }
}

/// A new action row.
#[derive(Debug, Clone)]
pub struct NewAction {
    /// Id.
    pub id: String,
    /// Kind name.
    pub kind: String,
    /// Payment.
    pub payment_id: String,
    /// Requester.
    pub requested_by: String,
    /// Reason.
    pub reason: String,
    /// Evidence.
    pub evidence: String,
    /// Target status.
    pub target_status: Option<String>,
    /// A capture: the amount, integer minor units (None for the other kinds).
    pub capture_amount: Option<i64>,
    /// A capture: whether it is the final one (None for the other kinds).
    pub capture_final: Option<bool>,
    /// Pinned version.
    pub payment_version: i64,
    /// Initial status (`pending`, or `approved` for actions that run at once).
    pub status: String,
    /// Epoch ms UTC.
    pub now: i64,
    /// Epoch ms UTC.
    pub expires_at: i64,
}

/// Result of [`Governance::create_action`].
#[derive(Debug, Clone, PartialEq, Eq)]
// Matched once where it is returned: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum CreateAction {
    /// Inserted.
    Created(ActionRecord),
    /// The payment already has a pending request.
    PendingExists,
}

/// A conditional move of an action between statuses.
#[derive(Debug, Clone)]
pub struct ActionMove {
    /// Action id.
    pub id: String,
    /// Statuses it may move from.
    pub from: Vec<crate::domain::actions::ActionStatus>,
    /// Status it moves to.
    pub to: crate::domain::actions::ActionStatus,
    /// Set decided_by/decision_reason/decided_at.
    pub decision: Option<(String, String)>,
    /// Refuse when the decider is the requester (maker-checker).
    pub not_by_requester: Option<String>,
    /// Refuse when expired at this time (epoch ms).
    pub unexpired_at: Option<i64>,
    /// Execution result, JSON text (sets executed_at when Some).
    pub result: Option<String>,
    /// Epoch ms UTC.
    pub now: i64,
}

impl ActionMove {
    /// The move `kind` of action `id` at `now` (epoch ms UTC), its statuses from the domain's
    /// table ([`ActionMoveKind::rule`](crate::domain::actions::ActionMoveKind::rule)); no
    /// decision, result or guard until the caller sets them.
    pub fn of(kind: crate::domain::actions::ActionMoveKind, id: &str, now: i64) -> Self {
        let (from, to, _) = kind.rule();
        ActionMove {
            id: id.to_string(),
            from: from.to_vec(),
            to,
            decision: None,
            not_by_requester: None,
            unexpired_at: None,
            result: None,
            now,
        }
    }
}

/// Filters of an audit read; all optional.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// At or after, epoch ms UTC.
    pub from: Option<i64>,
    /// Before, epoch ms UTC.
    pub to: Option<i64>,
    /// Actor.
    pub actor: Option<String>,
    /// Action name.
    pub action: Option<String>,
}

/// The columns of an audit record (`audit_log`), in the order of [`AuditRecord`]'s fields: the
/// export's own readers (`sqlite_export.rs`, `pg_export.rs`) find them by these names once per
/// page and read each row by position.
pub const AUDIT_COLUMNS: [&str; 12] = [
    "seq",
    "at",
    "actor",
    "roles",
    "action",
    "target",
    "reason",
    "before_state",
    "after_state",
    "request_meta",
    "prev_hash",
    "hash",
];

/// One page of the audit export as SQL: the one text both backends run, and the values of its
/// placeholders. Each placeholder is numbered where its value is pushed, so `$n` is always
/// `args[n - 1]` on both backends (SQLite binds by position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPageQuery {
    /// The statement.
    pub sql: String,
    /// The values of `$1`, `$2`, ... in that order: the sequence number to read after, the
    /// filter's time bounds (epoch ms UTC), actor and action where set, then the limit.
    pub args: Vec<AuditArg>,
    /// At most this many records (also the last of `args`).
    pub limit: i64,
}

/// One placeholder's value in an [`AuditPageQuery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditArg {
    /// A sequence number, a time (epoch ms UTC) or the limit.
    Int(i64),
    /// An actor or an action name.
    Text(String),
}

impl AuditPageQuery {
    /// The query of up to `limit` records with seq > `after_seq` matching `f`, in seq order.
    pub fn new(after_seq: i64, limit: i64, f: &AuditFilter) -> Self {
        let mut q = Self {
            sql: String::from("SELECT * FROM audit_log WHERE"),
            args: Vec::new(),
            limit,
        };
        q.push(" seq > ", AuditArg::Int(after_seq));
        if let Some(from) = f.from {
            q.push(" AND at >= ", AuditArg::Int(from));
        }
        if let Some(to) = f.to {
            q.push(" AND at < ", AuditArg::Int(to));
        }
        if let Some(a) = &f.actor {
            q.push(" AND actor = ", AuditArg::Text(a.clone()));
        }
        if let Some(a) = &f.action {
            q.push(" AND action = ", AuditArg::Text(a.clone()));
        }
        q.push(" ORDER BY seq LIMIT ", AuditArg::Int(limit));
        q
    }

    /// Appends `sql` and the next placeholder, bound to `value`.
    fn push(&mut self, sql: &str, value: AuditArg) {
        self.args.push(value);
        self.sql.push_str(sql);
        self.sql.push_str(&format!("${}", self.args.len()));
    }

    /// Rows to reserve room for: the limit, bounded so that a huge one allocates nothing
    /// ahead of the rows.
    pub fn capacity(&self) -> usize {
        usize::try_from(self.limit.clamp(0, 10_000)).unwrap_or(0)
    }
}

/// Filters of the audit viewer's list; all optional, combined with AND. Records come newest
/// first, paged by sequence number.
#[derive(Debug, Clone, Default)]
pub struct AuditListFilter {
    /// Exact actor.
    pub actor: Option<String>,
    /// Exact action name.
    pub action: Option<String>,
    /// Records about this payment: its own (`payment:<id>`), its actions' (`action:<id>`)
    /// and its error-pool items' (`error:<id>`).
    pub payment_id: Option<String>,
    /// Exact target (`error:12`, `user:alice`, ...).
    pub target: Option<String>,
    /// At or after, epoch ms UTC.
    pub from: Option<i64>,
    /// Before, epoch ms UTC.
    pub to: Option<i64>,
    /// Only records with seq below this (the next, older page).
    pub before_seq: Option<i64>,
    /// Only records with seq above this (the previous, newer page); the page is still
    /// returned newest first.
    pub after_seq: Option<i64>,
    /// Page size (clamped to 1..=500).
    pub limit: i64,
}

pub use converge_wire::AuditRow;

/// The SQL (with `$n` placeholders, valid on both backends) and text arguments of the audit
/// list `f`: integer arguments are `$1` (seq bound; `i64::MAX` when absent), `$2`
/// (from; `i64::MIN` when absent), `$3` (to; `i64::MAX` when absent) and `$4` (limit), then the text arguments in the order returned.
/// Newest first unless `after_seq` is given (oldest first, for the caller to reverse).
pub fn audit_list_sql(f: &AuditListFilter) -> (String, Vec<&str>) {
    let mut conds: Vec<String> = vec![if f.after_seq.is_some() {
        "l.seq > $1".into()
    } else {
        "l.seq < $1".into()
    }];
    // Always referenced, so every bound argument has a place on both backends.
    conds.push("l.at >= $2 AND l.at < $3".into());
    let mut texts: Vec<&str> = Vec::new();
    if let Some(a) = &f.actor {
        texts.push(a);
        conds.push(format!("l.actor = ${}", 4 + texts.len()));
    }
    if let Some(a) = &f.action {
        texts.push(a);
        conds.push(format!("l.action = ${}", 4 + texts.len()));
    }
    if let Some(t) = &f.target {
        texts.push(t);
        conds.push(format!("l.target = ${}", 4 + texts.len()));
    }
    if let Some(p) = &f.payment_id {
        texts.push(p);
        let n = 4 + texts.len();
        conds.push(format!(
            "(l.target = 'payment:' || ${n} \
             OR l.target IN (SELECT 'action:' || a.id FROM actions a WHERE a.payment_id = ${n}) \
             OR l.target IN (SELECT 'error:' || CAST(e.id AS TEXT) FROM error_pool e WHERE e.payment_id = ${n}))"
        ));
    }
    let order = if f.after_seq.is_some() { "ASC" } else { "DESC" };
    let sql = format!(
        "SELECT l.*, CASE \
         WHEN l.target LIKE 'payment:%' THEN SUBSTR(l.target, 9) \
         WHEN l.target LIKE 'action:%' THEN (SELECT a.payment_id FROM actions a WHERE a.id = SUBSTR(l.target, 8)) \
         WHEN l.target LIKE 'error:%' THEN (SELECT e.payment_id FROM error_pool e WHERE 'error:' || CAST(e.id AS TEXT) = l.target) \
         END AS payment_id \
         FROM audit_log l WHERE {} ORDER BY l.seq {order} LIMIT $4",
        conds.join(" AND ")
    );
    (sql, texts)
}

/// Actions and the audit log.
#[async_trait]
pub trait Governance: Send + Sync + 'static {
    /// Appends one record to the chain.
    async fn append_audit(&self, e: &AuditEntry) -> Result<AuditRecord, StoreError>;
    /// The last record's (seq, hash); (0, GENESIS) when empty.
    async fn audit_head(&self) -> Result<(i64, String), StoreError>;
    /// Up to `limit` records with seq > `after_seq` matching `filter`, in seq order.
    async fn audit_page(
        &self,
        after_seq: i64,
        limit: i64,
        filter: &AuditFilter,
    ) -> Result<Vec<AuditRecord>, StoreError>;
    /// One page of the audit viewer's list ([`AuditListFilter`]), newest first.
    async fn audit_list(&self, filter: &AuditListFilter) -> Result<Vec<AuditRow>, StoreError>;
    /// The distinct actions the log holds (`merchant_added`, `action_approved`, ...), in
    /// byte order: one index seek per action (`audit_log_action`), so it stays cheap on a
    /// long log.
    async fn audit_actions(&self) -> Result<Vec<String>, StoreError>;
    /// Records about one target (e.g. `payment:pay_x`), in seq order.
    async fn audit_for_target(&self, target: &str) -> Result<Vec<AuditRecord>, StoreError>;
    /// Stores a signed checkpoint (append-only table `audit_checkpoints`).
    async fn add_checkpoint(&self, c: &Checkpoint) -> Result<(), StoreError>;
    /// The checkpoint covering the most records (the latest signed when several cover as
    /// many); None when none was taken.
    async fn latest_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError>;
    /// Every stored checkpoint, by seq then signing time.
    async fn checkpoints(&self) -> Result<Vec<Checkpoint>, StoreError>;
    /// Inserts an action with its audit record, in one transaction.
    async fn create_action(
        &self,
        a: &NewAction,
        audit: &AuditEntry,
    ) -> Result<CreateAction, StoreError>;
    /// The action with this id.
    async fn action(&self, id: &str) -> Result<Option<ActionRecord>, StoreError>;
    /// Actions, newest first, filtered by status and payment.
    async fn actions(
        &self,
        status: Option<&str>,
        payment_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ActionRecord>, StoreError>;
    /// Requests of the `kinds` given (those that need an approver), newest first, each with
    /// its payment as it stands now; `pending` picks the pending ones, else the decided ones
    /// (any other status). At most `limit`.
    async fn approval_requests(
        &self,
        kinds: &[&str],
        pending: bool,
        limit: i64,
    ) -> Result<Vec<ApprovalRow>, StoreError>;
    /// How many requests of the `kinds` given wait for an approver.
    async fn pending_approval_count(&self, kinds: &[&str]) -> Result<i64, StoreError>;
    /// Applies `m` if the action is in one of `m.from` (and the maker-checker and expiry
    /// conditions hold), appending `audit` in the same transaction; false when it did not
    /// apply (nothing written).
    async fn move_action(&self, m: &ActionMove, audit: &AuditEntry) -> Result<bool, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_page_placeholders_are_numbered_in_the_order_of_their_values() {
        let f = AuditFilter {
            from: Some(10),
            to: Some(20),
            actor: Some("alice".into()),
            action: Some("payment.retry".into()),
        };
        let q = AuditPageQuery::new(7, 1000, &f);
        assert_eq!(
            q.sql,
            "SELECT * FROM audit_log WHERE seq > $1 AND at >= $2 AND at < $3 AND actor = $4 \
             AND action = $5 ORDER BY seq LIMIT $6"
        );
        assert_eq!(
            q.args,
            vec![
                AuditArg::Int(7),
                AuditArg::Int(10),
                AuditArg::Int(20),
                AuditArg::Text("alice".into()),
                AuditArg::Text("payment.retry".into()),
                AuditArg::Int(1000),
            ]
        );
    }

    #[test]
    fn audit_page_without_filters_binds_only_the_cursor_and_the_limit() {
        let q = AuditPageQuery::new(0, 50, &AuditFilter::default());
        assert_eq!(
            q.sql,
            "SELECT * FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2"
        );
        assert_eq!(q.args, vec![AuditArg::Int(0), AuditArg::Int(50)]);
        assert_eq!(q.capacity(), 50);
        assert_eq!(
            AuditPageQuery::new(0, i64::MAX, &AuditFilter::default()).capacity(),
            10_000
        );
    }
}
