//! The ledger's SQL both backends share ([`Ledger`](super::Ledger); conventions in
//! `backend.rs`): the batch a payment or refund posts, and the ledger's reads.

macro_rules! impl_ledger {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        async fn insert_posting(
            tx: &mut $crate::store::backend::Tx<$store>,
            payment_id: &str,
            posting: &$crate::store::LedgerPosting,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            let batch_id: i64 = sqlx::query_scalar(
                "INSERT INTO ledger_batches (payment_id, refund_id, kind, currency, created_at, capture_id) \
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            )
            .bind(payment_id)
            .bind(posting.refund_id.as_deref())
            .bind(posting.kind)
            .bind(&posting.currency)
            .bind(now)
            .bind(posting.capture_id.as_deref())
            .fetch_one(&mut **tx)
            .await?;
            // Every line of the batch in one statement.
            let rows: Vec<String> = (0..posting.lines.len())
                .map(|i| format!("($1, ${}, ${}, ${}, $2)", 3 * i + 3, 3 * i + 4, 3 * i + 5))
                .collect();
            let sql = format!(
                "INSERT INTO ledger_entries (batch_id, account, direction, amount, currency) VALUES {}",
                rows.join(", ")
            );
            let mut q = sqlx::query(&sql).bind(batch_id).bind(&posting.currency);
            for line in &posting.lines {
                q = q
                    .bind(&line.account)
                    .bind(if line.debit { "debit" } else { "credit" })
                    .bind(line.amount);
            }
            q.execute(&mut **tx).await?;
            Ok(())
        }

        #[async_trait::async_trait]
        impl $crate::store::Ledger for $store {
            async fn ledger_totals(&self) -> Result<Vec<$crate::store::LedgerTotal>, $crate::store::StoreError> {
                // One statement (one snapshot). SQL sums would overflow 64 bits on a long
                // enough history (SQLite raises "integer overflow", PostgreSQL's cast to
                // BIGINT fails), so each group of LEDGER_SUM_GROUP entries is summed in two
                // halves that cannot overflow and the halves are added here in 128 bits.
                let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(
                    "SELECT currency, direction, \
                     CAST(SUM(amount / 4294967296) AS BIGINT), CAST(SUM(amount % 4294967296) AS BIGINT) \
                     FROM ledger_entries GROUP BY currency, direction, id / $1",
                )
                .bind($crate::store::LEDGER_SUM_GROUP)
                .fetch_all(self.reader())
                .await?;
                let mut sums: std::collections::BTreeMap<String, (i128, i128)> = Default::default();
                for (currency, direction, high, low) in rows {
                    let part = i128::from(high) * 4_294_967_296 + i128::from(low);
                    let e = sums.entry(currency).or_default();
                    if direction == "debit" {
                        e.0 += part;
                    } else {
                        e.1 += part;
                    }
                }
                Ok(sums
                    .into_iter()
                    .map(|(currency, (debits, credits))| $crate::store::LedgerTotal { currency, debits, credits })
                    .collect())
            }

            async fn ledger_batch_count(&self, payment_id: &str, kind: &str) -> Result<i64, $crate::store::StoreError> {
                Ok(sqlx::query_scalar::<_, i64>(
                    "SELECT COUNT(*) FROM ledger_batches WHERE payment_id = $1 AND kind = $2",
                )
                .bind(payment_id)
                .bind(kind)
                .fetch_one(self.reader())
                .await?)
            }
        }
    };
}
