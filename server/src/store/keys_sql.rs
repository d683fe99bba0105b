//! The Idempotency-Key SQL both backends share: the
//! [`KeyStore`](crate::store::keys::KeyStore) impl and the in-transaction helpers the
//! payment writes use (`claim_in_tx` and `set_key_resource_in` in a create's phase 1,
//! `complete_key_in` in its phase 2, `store/payments_sql.rs`). Expanded in each backend's
//! module over its [`SqlBackend`](super::SqlBackend) (`backend.rs`).

/// How a claim inside a transaction went (`claim_in_tx`).
pub(crate) use super::keys::ClaimStep;

macro_rules! impl_keys {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        /// The claim of [`KeyStore::claim_key`](crate::store::keys::KeyStore::claim_key) inside the caller's transaction; a new claim is
        /// inserted with `resource_id` as its recovery point.
        async fn claim_in_tx(
            tx: &mut $crate::store::backend::Tx<$store>,
            c: &$crate::store::keys::KeyClaim,
            resource_id: Option<&str>,
        ) -> Result<$crate::store::keys_sql::ClaimStep, $crate::store::StoreError> {
            use $crate::store::keys::KeyRecord;
            use $crate::store::keys_sql::ClaimStep;
            // On PostgreSQL (READ COMMITTED) the holder may release the key (its request was
            // refused) between our insert finding it and our read: the read then finds
            // nothing and the key is free again, so try the insert once more. Each retry
            // means another request claimed and released the key, so this ends quickly.
            let mut attempts = 0;
            let rec = loop {
                attempts += 1;
                let inserted = sqlx::query(
                    concat!("INSERT INTO idempotency_keys (merchant_id, scope, idem_key, route, fingerprint, state, \
                     lease_token, lease_expires_at, created_at, expires_at, resource_id) \
                     VALUES ($1, $2, $3, $4, $5, ", converge_wire::key_sql!(Running), ", $6, $7, $8, $9, $10) \
                     ON CONFLICT (merchant_id, idem_key) DO NOTHING"),
                )
                .bind(c.merchant_id)
                .bind(&c.scope)
                .bind(&c.idem_key)
                .bind(&c.route)
                .bind(&c.fingerprint)
                .bind(&c.lease_token)
                .bind(c.lease_expires_at)
                .bind(c.now)
                .bind(c.expires_at)
                .bind(resource_id)
                .execute(&mut **tx)
                .await?
                .rows_affected();
                if inserted == 1 {
                    return Ok(ClaimStep::Inserted);
                }
                let rec = sqlx::query_as::<_, KeyRecord>(
                    "SELECT merchant_id, scope, idem_key, route, fingerprint, state, lease_token, lease_expires_at, \
                     resource_id, response_status, response_headers, response_body, created_at, expires_at \
                     FROM idempotency_keys WHERE merchant_id = $1 AND idem_key = $2",
                )
                .bind(c.merchant_id)
                .bind(&c.idem_key)
                .fetch_optional(&mut **tx)
                .await?;
                match rec {
                    Some(rec) => break rec,
                    None if attempts < 10 => continue,
                    None => {
                        return Err($crate::store::StoreError::Conflict(format!(
                            "idempotency key {:?} kept being claimed and released",
                            c.idem_key
                        )));
                    }
                }
            };
            if $crate::domain::idempotency::may_take_over(
                (&rec.fingerprint, &rec.scope, rec.state),
                rec.lease_expires_at,
                &c.fingerprint,
                &c.scope,
                c.now,
            ) {
                let taken = sqlx::query(
                    concat!("UPDATE idempotency_keys SET lease_token = $1, lease_expires_at = $2 \
                     WHERE merchant_id = $3 AND idem_key = $4 AND state = ", converge_wire::key_sql!(Running), " AND lease_token = $5"),
                )
                .bind(&c.lease_token)
                .bind(c.lease_expires_at)
                .bind(c.merchant_id)
                .bind(&c.idem_key)
                .bind(rec.lease_token.as_deref().unwrap_or(""))
                .execute(&mut **tx)
                .await?
                .rows_affected();
                if taken == 1 {
                    return Ok(ClaimStep::TakenOver(rec.resource_id));
                }
            }
            Ok(ClaimStep::Existing(rec))
        }

        /// Stores the answer and marks the key done, inside the caller's transaction; false
        /// when the claim's lease was lost.
        async fn complete_key_in<'e, E: sqlx::Executor<'e, Database = $crate::store::backend::DbOf<$store>>>(
            e: E,
            k: &$crate::store::keys::KeyRef,
            resp: &$crate::store::keys::StoredResponse,
        ) -> Result<bool, $crate::store::StoreError> {
            let headers = serde_json::to_string(&resp.headers).unwrap_or_else(|_| "[]".into());
            let r = sqlx::query(
                concat!("UPDATE idempotency_keys SET state = ", converge_wire::key_sql!(Done), ", response_status = $1, response_headers = $2, \
                 response_body = $3, lease_token = NULL, lease_expires_at = NULL \
                 WHERE merchant_id = $4 AND idem_key = $5 AND state = ", converge_wire::key_sql!(Running), " AND lease_token = $6"),
            )
            .bind(i64::from(resp.status))
            .bind(headers)
            .bind(&resp.body)
            .bind(k.merchant_id)
            .bind(&k.idem_key)
            .bind(&k.lease_token)
            .execute(e)
            .await?;
            Ok(r.rows_affected() == 1)
        }

        /// Planted bug 5 (`planted`): the key marked done inside the caller's transaction,
        /// without its answer.
        #[cfg(feature = "planted-bugs")]
        async fn planted_key_done_in<'e, E: sqlx::Executor<'e, Database = $crate::store::backend::DbOf<$store>>>(
            e: E,
            k: &$crate::store::keys::KeyRef,
        ) -> Result<bool, $crate::store::StoreError> {
            let r = sqlx::query(
                concat!("UPDATE idempotency_keys SET state = ", converge_wire::key_sql!(Done), ", lease_token = NULL, lease_expires_at = NULL \
                 WHERE merchant_id = $1 AND idem_key = $2 AND state = ", converge_wire::key_sql!(Running), " AND lease_token = $3"),
            )
            .bind(k.merchant_id)
            .bind(&k.idem_key)
            .bind(&k.lease_token)
            .execute(e)
            .await?;
            Ok(r.rows_affected() == 1)
        }

        /// Planted bug 5 (`planted`): a done key's answer, written after the commit.
        #[cfg(feature = "planted-bugs")]
        async fn planted_answer_in<'e, E: sqlx::Executor<'e, Database = $crate::store::backend::DbOf<$store>>>(
            e: E,
            k: &$crate::store::keys::KeyRef,
            resp: &$crate::store::keys::StoredResponse,
        ) -> Result<(), $crate::store::StoreError> {
            let headers = serde_json::to_string(&resp.headers).unwrap_or_else(|_| "[]".into());
            sqlx::query(
                "UPDATE idempotency_keys SET response_status = $1, response_headers = $2, response_body = $3 \
                 WHERE merchant_id = $4 AND idem_key = $5",
            )
            .bind(i64::from(resp.status))
            .bind(headers)
            .bind(&resp.body)
            .bind(k.merchant_id)
            .bind(&k.idem_key)
            .execute(e)
            .await?;
            Ok(())
        }

        /// Records the recovery point of a claim still held by `k`'s lease token, with `e`
        /// (the pool or the caller's transaction); false when the lease was lost.
        async fn set_key_resource_in<'e, E: sqlx::Executor<'e, Database = $crate::store::backend::DbOf<$store>>>(
            e: E,
            k: &$crate::store::keys::KeyRef,
            resource_id: &str,
        ) -> Result<bool, $crate::store::StoreError> {
            let r = sqlx::query(
                concat!("UPDATE idempotency_keys SET resource_id = $1 \
                 WHERE merchant_id = $2 AND idem_key = $3 AND state = ", converge_wire::key_sql!(Running), " AND lease_token = $4"),
            )
            .bind(resource_id)
            .bind(k.merchant_id)
            .bind(&k.idem_key)
            .bind(&k.lease_token)
            .execute(e)
            .await?;
            Ok(r.rows_affected() == 1)
        }

        /// Unsets the recovery point a claim was inserted with, in the caller's transaction
        /// (phase 1 found the merchant_order_id taken: the claim leads to no new payment).
        async fn clear_key_resource_in(
            tx: &mut $crate::store::backend::Tx<$store>,
            merchant_id: i64,
            idem_key: &str,
        ) -> Result<(), $crate::store::StoreError> {
            sqlx::query("UPDATE idempotency_keys SET resource_id = NULL WHERE merchant_id = $1 AND idem_key = $2")
                .bind(merchant_id)
                .bind(idem_key)
                .execute(&mut **tx)
                .await?;
            Ok(())
        }

        #[async_trait::async_trait]
        impl $crate::store::keys::KeyStore for $store {
            async fn claim_key(
                &self,
                c: &$crate::store::keys::KeyClaim,
            ) -> Result<$crate::store::keys::ClaimResult, $crate::store::StoreError> {
                use $crate::store::keys::ClaimResult;
                let mut tx = self.begin_write().await?;
                let step = claim_in_tx(&mut tx, c, None).await?;
                tx.commit().await?;
                Ok(match step {
                    $crate::store::keys_sql::ClaimStep::Inserted => ClaimResult::Claimed { resource_id: None },
                    $crate::store::keys_sql::ClaimStep::TakenOver(resource_id) => ClaimResult::Claimed { resource_id },
                    $crate::store::keys_sql::ClaimStep::Existing(rec) => ClaimResult::Existing(rec),
                })
            }

            async fn claim_key_at(
                &self,
                c: &$crate::store::keys::KeyClaim,
                resource_id: &str,
            ) -> Result<$crate::store::keys::ClaimStep, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let step = claim_in_tx(&mut tx, c, Some(resource_id)).await?;
                tx.commit().await?;
                Ok(step)
            }

            async fn set_key_resource(
                &self,
                k: &$crate::store::keys::KeyRef,
                resource_id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                set_key_resource_in(self.writer(), k, resource_id).await
            }

            async fn complete_key(
                &self,
                k: &$crate::store::keys::KeyRef,
                resp: &$crate::store::keys::StoredResponse,
            ) -> Result<bool, $crate::store::StoreError> {
                complete_key_in(self.writer(), k, resp).await
            }

            async fn release_key(&self, k: &$crate::store::keys::KeyRef) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    concat!("DELETE FROM idempotency_keys \
                     WHERE merchant_id = $1 AND idem_key = $2 AND state = ", converge_wire::key_sql!(Running), " AND lease_token = $3"),
                )
                .bind(k.merchant_id)
                .bind(&k.idem_key)
                .bind(&k.lease_token)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn lapse_key(
                &self,
                k: &$crate::store::keys::KeyRef,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    concat!("UPDATE idempotency_keys SET lease_expires_at = $1 \
                     WHERE merchant_id = $2 AND idem_key = $3 AND state = ", converge_wire::key_sql!(Running), " AND lease_token = $4 AND lease_expires_at > $1"),
                )
                .bind(now)
                .bind(k.merchant_id)
                .bind(&k.idem_key)
                .bind(&k.lease_token)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn purge_keys(&self, now: i64) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let r = sqlx::query("DELETE FROM idempotency_keys WHERE expires_at < $1")
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                // Outcomes outlive no key: also those of a key released (its request was
                // refused) while later requests were told it was in use.
                sqlx::query(
                    "DELETE FROM idempotency_key_outcomes WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k \
                     WHERE k.merchant_id = idempotency_key_outcomes.merchant_id \
                     AND k.idem_key = idempotency_key_outcomes.idem_key)",
                )
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(r.rows_affected())
            }

            async fn add_outcome_counts(
                &self,
                routes: &[$crate::store::keys::RouteOutcomeDelta],
                keys: &[$crate::store::keys::KeyOutcomeDelta],
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                for r in routes {
                    sqlx::query(
                        "INSERT INTO idempotency_outcomes (route, outcome, minute, count) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (route, outcome, minute) DO UPDATE SET count = idempotency_outcomes.count + $4",
                    )
                    .bind(&r.route)
                    .bind(&r.outcome)
                    .bind(r.minute)
                    .bind(r.count)
                    .execute(&mut *tx)
                    .await?;
                }
                for k in keys {
                    sqlx::query(
                        "INSERT INTO idempotency_key_outcomes (merchant_id, idem_key, outcome, count, first_at, last_at) \
                         VALUES ($1, $2, $3, $4, $5, $6) \
                         ON CONFLICT (merchant_id, idem_key, outcome) DO UPDATE SET \
                         count = idempotency_key_outcomes.count + $4, \
                         first_at = CASE WHEN $5 < idempotency_key_outcomes.first_at THEN $5 ELSE idempotency_key_outcomes.first_at END, \
                         last_at = CASE WHEN $6 > idempotency_key_outcomes.last_at THEN $6 ELSE idempotency_key_outcomes.last_at END",
                    )
                    .bind(k.merchant_id)
                    .bind(&k.idem_key)
                    .bind(&k.outcome)
                    .bind(k.count)
                    .bind(k.first_at)
                    .bind(k.last_at)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn outcome_counts(
                &self,
                since_minute: i64,
            ) -> Result<Vec<(String, String, i64)>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, (String, String, i64)>(
                    "SELECT route, outcome, CAST(SUM(count) AS BIGINT) FROM idempotency_outcomes \
                     WHERE minute >= $1 GROUP BY route, outcome ORDER BY route, outcome",
                )
                .bind(since_minute)
                .fetch_all(self.reader())
                .await?)
            }
        }
    };
}
