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
            // Paired with the service's dating of every batch it builds: an undated batch
            // would fall out of every accounting day's totals.
            if posting.accounting_date.len() != 10 {
                return Err($crate::store::StoreError::Corrupt(format!(
                    "{} batch of payment {payment_id} has no accounting date",
                    posting.kind
                )));
            }
            let batch_id: i64 = sqlx::query_scalar(
                "INSERT INTO ledger_batches (payment_id, refund_id, kind, currency, created_at, capture_id, \
                 pricing_version, accounting_date) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            )
            .bind(payment_id)
            .bind(posting.refund_id.as_deref())
            .bind(posting.kind)
            .bind(&posting.currency)
            .bind(now)
            .bind(posting.capture_id.as_deref())
            .bind(posting.pricing_version)
            .bind(&posting.accounting_date)
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

        /// The fee of a charge, capture or merchant refund `posting` of merchant
        /// `merchant_id`, just inserted for `payment_id` (issue 35): priced by the merchant's
        /// latest pricing version on what the posting credits the merchant (a refund: its
        /// fixed refund fee), posted as its own batch and added to the payment's `fee_amount`,
        /// all in the posting's transaction (a refund's moves the payment's version: it is no
        /// transition's). Returns the fee in minor units: 0 (and nothing written) for other
        /// kinds, without a pricing, or when the pricing comes to nothing.
        async fn insert_fee(
            tx: &mut $crate::store::backend::Tx<$store>,
            payment_id: &str,
            merchant_id: i64,
            posting: &$crate::store::LedgerPosting,
            now: i64,
        ) -> Result<i64, $crate::store::StoreError> {
            use $crate::domain::{fees, ledger};
            let payable = ledger::merchant_account(merchant_id);
            let on_payable = |debit: bool| -> i64 {
                posting
                    .lines
                    .iter()
                    .filter(|l| l.debit == debit && l.account == payable)
                    .map(|l| l.amount)
                    .sum()
            };
            let (amount, refund) = match posting.kind {
                "charge" | "capture" => (on_payable(false), false),
                "refund" => (on_payable(true), true),
                _ => return Ok(0),
            };
            let pricing: Option<(i64, i64, i64, i64)> = sqlx::query_as(
                "SELECT version, percent_ppm, fixed_fee, refund_fee FROM merchant_pricing \
                 WHERE merchant_id = $1 ORDER BY version DESC LIMIT 1",
            )
            .bind(merchant_id)
            .fetch_optional(&mut **tx)
            .await?;
            let Some((version, percent_ppm, fixed, refund_fee)) = pricing else {
                return Ok(0);
            };
            let pricing = fees::Pricing { version, percent_ppm, fixed, refund_fee };
            let fee = match (amount > 0, refund) {
                (false, _) => 0,
                (true, false) => fees::fee(amount, &pricing),
                (true, true) => fees::refund_fee(amount, &pricing),
            };
            if fee == 0 {
                return Ok(0);
            }
            insert_posting(tx, payment_id, &ledger::fee(merchant_id, posting, fee, version), now).await?;
            sqlx::query(
                "UPDATE payments SET fee_amount = fee_amount + $1, version = version + $3, \
                 updated_at = CASE WHEN $3 = 1 THEN $4 ELSE updated_at END WHERE id = $2",
            )
            .bind(fee)
            .bind(payment_id)
            .bind(i64::from(refund))
            .bind(now)
            .execute(&mut **tx)
            .await?;
            Ok(fee)
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

            async fn ledger_day(&self, date: &str) -> Result<Vec<$crate::store::LedgerDayLine>, $crate::store::StoreError> {
                // The merchants' payable accounts (`merchant_payable:{id}`, domain::ledger); no
                // other account's name matches the pattern.
                let payable = |direction: &str| {
                    format!(
                        "CAST(COALESCE(SUM(CASE WHEN e.account LIKE 'merchant_payable:%' \
                         AND e.direction = '{direction}' THEN e.amount ELSE 0 END), 0) AS BIGINT)"
                    )
                };
                Ok(sqlx::query_as::<_, $crate::store::LedgerDayLine>(&format!(
                    "SELECT b.currency, b.kind, COUNT(DISTINCT b.id) AS batches, \
                     {} AS payable_credits, {} AS payable_debits \
                     FROM ledger_batches b JOIN ledger_entries e ON e.batch_id = b.id \
                     WHERE b.accounting_date = $1 GROUP BY b.currency, b.kind ORDER BY b.currency, b.kind",
                    payable("credit"),
                    payable("debit")
                ))
                .bind(date)
                .fetch_all(self.reader())
                .await?)
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
