//! Storage for "find anything by any id" and the Idempotency-Key page (issue 17): prefix
//! search over every id a person may hold, a stored key with what later requests with it got,
//! and the keys of a payment. Part of the storage abstraction; conformance-tested on both
//! backends (tests/it/lookup.rs).

use async_trait::async_trait;

use super::{Backend, StoreError};
use crate::store::keys::KeyRecord;

pub use converge_wire::lookup::IdKind;

/// One thing whose id starts with the query, as the store finds it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct IdMatch {
    /// [`IdKind::as_str`] of the id that matched.
    pub kind: String,
    /// The matching id itself, as stored (its case kept).
    pub value: String,
    /// The payment it is or belongs to (an Idempotency-Key's: the payment it made, or the
    /// payment of the refund it made); None for a key that made neither, or an error-pool
    /// item without a payment.
    pub payment_id: Option<String>,
    /// The owning merchant (payments, orders, keys, channel keys); None for the rest.
    pub merchant_id: Option<i64>,
    /// Its status (payment, refund, error item, action) or state (key: `running`, `done`).
    pub status: String,
    /// Minor units (payments and refunds).
    pub amount: Option<i64>,
    /// ISO 4217 (payments and refunds).
    pub currency: Option<String>,
}

pub use converge_wire::lookup::KeyOutcomeCount;

/// A stored key in a list (the payment page): the wire type, read as a row.
pub use converge_wire::KeySummary;

/// The most results one search shows.
pub const MAX_ID_MATCHES: i64 = 20;

/// Prefix search and Idempotency-Key records for the console.
#[async_trait]
pub trait Lookup: Send + Sync + 'static {
    /// Things whose id starts with `query`, ignoring ASCII case (PostgreSQL: case as its
    /// `lower()` folds), in [`IdKind::ALL`] order and by id within a kind, at most `limit`
    /// (clamped to 1..=[`MAX_ID_MATCHES`] + 1, so a caller may ask for one more than it shows
    /// to learn that there are more) in all. `%`, `_` and `\` in `query` are plain
    /// characters. Error-pool items match when `query` is their number (an optional `#`
    /// before it). Each prefix kind is a range scan over an index (migration 0106), never a
    /// scan of the table. An empty `query` matches nothing.
    ///
    /// Issue 41: after a merchant order id's prefix matches come the order ids holding
    /// `query` further in ([`infix_sql`], a query of at least [`MIN_INFIX_LEN`] characters),
    /// and last the payments whose amount `query` is ([`amount_sql`]); both newest first,
    /// walking the payments by creation time until the limit is met (a scan when few match,
    /// bounded by the limit, not an index range).
    async fn find_ids(&self, query: &str, limit: i64) -> Result<Vec<IdMatch>, StoreError>;
    /// The stored key `idem_key` of merchant `merchant_id` (exact, case-sensitive: keys are).
    async fn idempotency_key(
        &self,
        merchant_id: i64,
        idem_key: &str,
    ) -> Result<Option<KeyRecord>, StoreError>;
    /// What later requests with that key got, per outcome, in `replay`, `in_use`, `reused`
    /// order.
    async fn key_outcomes(
        &self,
        merchant_id: i64,
        idem_key: &str,
    ) -> Result<Vec<KeyOutcomeCount>, StoreError>;
    /// The keys whose request made payment `payment_id` or one of its refunds, oldest first.
    async fn payment_keys(&self, payment_id: &str) -> Result<Vec<KeySummary>, StoreError>;
}

/// The error-pool item numbered `$1` (see [`IdKind::ErrorItem`]), as an [`IdMatch`].
pub const FIND_ERROR_ITEM_SQL: &str = "SELECT 'error_item' AS kind, CAST(e.id AS TEXT) AS value, e.payment_id, \
     p.merchant_id, e.status, p.amount, p.currency \
     FROM error_pool e LEFT JOIN payments p ON p.id = e.payment_id WHERE e.id = $1";

/// The query [`Lookup::find_ids`] runs on `backend` for the prefix kinds (None for
/// [`IdKind::ErrorItem`], matched by number with [`FIND_ERROR_ITEM_SQL`], and for
/// [`IdKind::Amount`], matched with [`amount_sql`]): `$1` and `$2` are
/// [`prefix_bounds`], `$3` the most rows. Public so a test can `EXPLAIN` exactly what runs.
pub fn find_sql(backend: Backend, kind: IdKind) -> Option<String> {
    // (table and joins, prefix column, lower-case ids only, the other IdMatch columns)
    let (from, col, lower_only, cols) = match kind {
        IdKind::Payment => (
            "payments p",
            "p.id",
            true,
            "p.id AS payment_id, p.merchant_id, p.status, p.amount, p.currency",
        ),
        IdKind::MerchantOrder => (
            "payments p",
            "p.merchant_order_id",
            false,
            "p.id AS payment_id, p.merchant_id, p.status, p.amount, p.currency",
        ),
        IdKind::IdempotencyKey => (
            "idempotency_keys k LEFT JOIN payments p ON p.id = k.resource_id \
             LEFT JOIN refunds r ON r.id = k.resource_id",
            "k.idem_key",
            false,
            "COALESCE(p.id, r.payment_id) AS payment_id, k.merchant_id, k.state AS status, \
             CAST(NULL AS BIGINT) AS amount, CAST(NULL AS TEXT) AS currency",
        ),
        IdKind::ChannelKey => (
            "payments p",
            "p.channel_key",
            true,
            "p.id AS payment_id, p.merchant_id, p.status, p.amount, p.currency",
        ),
        IdKind::Refund => (
            "refunds r JOIN payments p ON p.id = r.payment_id",
            "r.id",
            true,
            "r.payment_id, p.merchant_id, r.status, r.amount, p.currency",
        ),
        IdKind::ErrorItem | IdKind::Amount => return None,
        IdKind::Action => (
            "actions a JOIN payments p ON p.id = a.payment_id",
            "a.id",
            true,
            "a.payment_id, p.merchant_id, a.status, p.amount, p.currency",
        ),
    };
    let (cond, order) = prefix_match(backend, col, lower_only);
    Some(format!(
        "SELECT '{kind}' AS kind, {col} AS value, {cols} FROM {from} \
         WHERE {cond} ORDER BY {order}, {col} LIMIT $3",
        kind = kind.as_str(),
    ))
}

/// The shortest query an order id is searched for inside (issue 41): one or two characters
/// are inside nearly every id, so they would list arbitrary payments.
pub const MIN_INFIX_LEN: usize = 3;

/// `s` with the LIKE wildcards `%` and `_` and the escape `\` escaped by `\`, so a LIKE
/// pattern built from it (with `ESCAPE '\'`) matches them as plain characters.
pub fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The LIKE patterns [`infix_sql`] binds for `query`, ASCII lower-cased and escaped: `$1`
/// anywhere in the id, `$2` at its start (those were listed as prefix matches already). None
/// for a query shorter than [`MIN_INFIX_LEN`] characters.
pub fn infix_patterns(query: &str) -> Option<(String, String)> {
    if query.chars().count() < MIN_INFIX_LEN {
        return None;
    }
    let esc = like_escape(&query.to_ascii_lowercase());
    Some((format!("%{esc}%"), format!("{esc}%")))
}

/// Merchant order ids holding `$1` but not starting with `$2` ([`infix_patterns`]), ignoring
/// case as the prefix match does, as [`IdMatch`]es of [`IdKind::MerchantOrder`], newest first,
/// at most `$3`. The same SQL on both backends (`lower()` folds the column and the pattern
/// alike on each).
pub fn infix_sql() -> &'static str {
    "SELECT 'merchant_order' AS kind, p.merchant_order_id AS value, p.id AS payment_id, \
     p.merchant_id, p.status, p.amount, p.currency FROM payments p \
     WHERE lower(p.merchant_order_id) LIKE lower($1) ESCAPE '\\' \
     AND lower(p.merchant_order_id) NOT LIKE lower($2) ESCAPE '\\' \
     ORDER BY p.created_at DESC, p.id DESC LIMIT $3"
}

/// The payments whose amount `query` names, as the SQL's `WHERE` condition and its amounts to
/// bind as `$1`, `$2`, ... (the row limit is the next parameter): a whole number is read as
/// minor units of any currency and as major units of each; a decimal (`12.50`) as major units
/// of the currencies with at least that many decimals (12.50 is 1250 fen, 12500 of a KWD's
/// 1/1000, never yen). None when `query` is no amount (anything but digits with at most one
/// `.` inside, or too large for an amount).
pub fn amount_condition(query: &str) -> Option<(String, Vec<i64>)> {
    let valid = |v: &i64| (0..=crate::domain::money::MAX_AMOUNT).contains(v);
    let mut args: Vec<i64> = Vec::new();
    let mut conds: Vec<String> = Vec::new();
    if !query.is_empty() && query.bytes().all(|b| b.is_ascii_digit()) {
        let minor = query.parse::<i64>().ok().filter(valid)?;
        args.push(minor);
        conds.push(format!("p.amount = ${}", args.len()));
    }
    let others = converge_wire::money::codes_not_of_exponent_two();
    let quoted = |codes: &[&str]| {
        codes
            .iter()
            .map(|c| format!("'{c}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let every_other: Vec<&str> = others.iter().flat_map(|(_, c)| c.iter().copied()).collect();
    let classes = others
        .iter()
        .map(|(exp, codes)| (*exp, format!("p.currency IN ({})", quoted(codes))))
        .chain([(2, format!("p.currency NOT IN ({})", quoted(&every_other)))]);
    for (exp, currencies) in classes {
        // A code of that exponent stands in for the class when reading the amount.
        let sample = others
            .iter()
            .find(|(e, _)| *e == exp)
            .map_or("CNY", |(_, c)| c[0]);
        let Some(minor) = converge_wire::money::minor(query, sample).filter(valid) else {
            continue;
        };
        if args.contains(&minor) && exp == 0 {
            // A whole number of yen is already matched as minor units of every currency.
            continue;
        }
        args.push(minor);
        conds.push(format!("({currencies} AND p.amount = ${})", args.len()));
    }
    (!conds.is_empty()).then(|| (conds.join(" OR "), args))
}

/// The payments [`amount_condition`] selects as [`IdMatch`]es of [`IdKind::Amount`] (the
/// payment id as the value), newest first, at most `$n` where `n` is `args + 1`.
pub fn amount_sql(condition: &str, args: usize) -> String {
    format!(
        "SELECT 'amount' AS kind, p.id AS value, p.id AS payment_id, p.merchant_id, p.status, \
         p.amount, p.currency FROM payments p WHERE {condition} \
         ORDER BY p.created_at DESC, p.id DESC LIMIT ${}",
        args + 1
    )
}

/// The `WHERE` condition and `ORDER BY` expression of a prefix match on `col`, for `backend`:
/// `$1` is the query with ASCII letters lower-cased, `$2` the same followed by U+10FFFF
/// (above every character, so `$1 <= x < $2` holds exactly for the `x` that start with `$1`).
/// A range rather than LIKE, so no character of the query is a wildcard and the index is used
/// with the parameters bound (SQLite applies its LIKE optimisation only to literal patterns).
/// `lower_only`: the column holds generated lower-case ids, so its plain index serves.
pub(crate) fn prefix_match(backend: Backend, col: &str, lower_only: bool) -> (String, String) {
    let expr = match (backend, lower_only) {
        (Backend::Sqlite, true) => col.to_string(),
        (Backend::Sqlite, false) => format!("{col} COLLATE NOCASE"),
        (Backend::Postgres, true) => format!("({col} COLLATE \"C\")"),
        (Backend::Postgres, false) => format!("(lower({col}) COLLATE \"C\")"),
    };
    let (lo, hi) = match (backend, lower_only) {
        // lower() of the bound text too, so both sides fold alike beyond ASCII.
        (Backend::Postgres, false) => ("lower($1)", "lower($2)"),
        _ => ("$1", "$2"),
    };
    (format!("{expr} >= {lo} AND {expr} < {hi}"), expr)
}

/// The bounds [`prefix_match`] binds for `query`.
pub(crate) fn prefix_bounds(query: &str) -> (String, String) {
    let lo = query.to_ascii_lowercase();
    let hi = format!("{lo}\u{10FFFF}");
    (lo, hi)
}

/// The error-pool item number `query` names (`12` or `#12`), if it is one.
pub(crate) fn item_number(query: &str) -> Option<i64> {
    let digits = query.strip_prefix('#').unwrap_or(query);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_numbers_are_digits_with_an_optional_hash() {
        assert_eq!(item_number("12"), Some(12));
        assert_eq!(item_number("#7"), Some(7));
        assert_eq!(item_number("#"), None);
        assert_eq!(item_number("1a"), None);
        assert_eq!(item_number("-1"), None);
        assert_eq!(item_number("99999999999999999999999"), None);
    }

    #[test]
    fn bounds_fold_ascii_only_and_close_above_every_character() {
        let (lo, hi) = prefix_bounds("Pay_AB%");
        assert_eq!(lo, "pay_ab%");
        assert!(hi.starts_with("pay_ab%") && hi.ends_with('\u{10FFFF}'));
        assert_eq!(prefix_bounds("É").0, "É");
    }

    #[test]
    fn like_patterns_take_percent_underscore_and_backslash_literally() {
        assert_eq!(like_escape(r"a%b_c\d"), r"a\%b\_c\\d");
        assert_eq!(
            infix_patterns("Ord_A%"),
            Some((r"%ord\_a\%%".to_string(), r"ord\_a\%%".to_string()))
        );
        assert_eq!(infix_patterns("ab"), None, "too short to search inside ids");
    }

    #[test]
    fn amounts_are_read_per_currency_exponent() {
        // 12.50: 1250 of a two-decimal currency, 12500 of a three, 125000 of a four; no yen.
        let (cond, args) = amount_condition("12.50").unwrap();
        assert_eq!(args, vec![12_500, 125_000, 1_250]);
        assert!(cond.contains("p.currency IN ('BHD'"), "{cond}");
        assert!(cond.contains("p.currency NOT IN ('BIF'"), "{cond}");
        // 1250: minor units of any currency, or major units (yen: the same number).
        let (cond, args) = amount_condition("1250").unwrap();
        assert_eq!(args, vec![1_250, 1_250_000, 12_500_000, 125_000]);
        assert!(cond.starts_with("p.amount = $1 OR "), "{cond}");
        assert!(
            !cond.contains("'JPY') AND"),
            "yen are covered by the minor-unit reading"
        );
        // 0.5: only currencies with decimals; 1.2345 only a four-decimal one.
        assert_eq!(amount_condition("1.2345").unwrap().1, vec![12_345]);
        for no in [
            "",
            "abc",
            "12.",
            ".5",
            "1.2.3",
            "-5",
            "1e3",
            "99999999999999999999",
        ] {
            assert_eq!(amount_condition(no), None, "{no:?}");
        }
    }

    #[test]
    fn mixed_case_columns_match_through_a_folded_expression() {
        let (cond, order) = prefix_match(Backend::Postgres, "idem_key", false);
        assert_eq!(order, "(lower(idem_key) COLLATE \"C\")");
        assert!(cond.contains(">= lower($1)") && cond.contains("< lower($2)"));
        let (cond, _) = prefix_match(Backend::Sqlite, "id", true);
        assert_eq!(cond, "id >= $1 AND id < $2");
    }
}
