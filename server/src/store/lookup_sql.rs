//! The SQL of [`Lookup`](super::Lookup), shared by both backends; the prefix conditions differ
//! only in collation (see [`prefix_match`](super::lookup::prefix_match)).

macro_rules! impl_lookup {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Lookup for $store {
            async fn find_ids(
                &self,
                query: &str,
                limit: i64,
            ) -> Result<Vec<$crate::store::IdMatch>, $crate::store::StoreError> {
                use $crate::store::lookup::{item_number, prefix_bounds};
                use $crate::store::{IdKind, IdMatch};
                let limit = limit.clamp(1, $crate::store::MAX_ID_MATCHES + 1);
                if query.is_empty() {
                    return Ok(Vec::new());
                }
                let (lo, hi) = prefix_bounds(query);
                let mut found: Vec<IdMatch> = Vec::new();
                for kind in IdKind::ALL {
                    let left = limit - found.len() as i64;
                    if left <= 0 {
                        break;
                    }
                    let rows = match kind {
                        IdKind::ErrorItem => {
                            let Some(n) = item_number(query) else { continue };
                            sqlx::query_as::<_, IdMatch>($crate::store::lookup::FIND_ERROR_ITEM_SQL)
                                .bind(n)
                                .fetch_all(self.reader())
                                .await?
                        }
                        IdKind::Amount => {
                            let Some((cond, amounts)) = $crate::store::lookup::amount_condition(query) else { continue };
                            let sql = $crate::store::lookup::amount_sql(&cond, amounts.len());
                            let mut q = sqlx::query_as::<_, IdMatch>(&sql);
                            for a in amounts {
                                q = q.bind(a);
                            }
                            q.bind(left).fetch_all(self.reader()).await?
                        }
                        _ => {
                            let Some(sql) = $crate::store::lookup::find_sql(<$store as $crate::store::backend::SqlBackend>::BACKEND, kind) else { continue };
                            sqlx::query_as::<_, IdMatch>(&sql)
                                .bind(&lo)
                                .bind(&hi)
                                .bind(left)
                                .fetch_all(self.reader())
                                .await?
                        }
                    };
                    found.extend(rows);
                    // An order id's middle (issue 41), after the ids that start with the query.
                    let left = limit - found.len() as i64;
                    if kind == IdKind::MerchantOrder && left > 0
                        && let Some((inside, start)) = $crate::store::lookup::infix_patterns(query)
                    {
                        let rows = sqlx::query_as::<_, IdMatch>($crate::store::lookup::infix_sql())
                            .bind(inside)
                            .bind(start)
                            .bind(left)
                            .fetch_all(self.reader())
                            .await?;
                        found.extend(rows);
                    }
                }
                found.truncate(limit as usize);
                Ok(found)
            }

            async fn idempotency_key(
                &self,
                merchant_id: i64,
                idem_key: &str,
            ) -> Result<Option<$crate::store::keys::KeyRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::keys::KeyRecord>(
                    "SELECT merchant_id, scope, idem_key, route, fingerprint, state, lease_token, lease_expires_at, \
                     resource_id, response_status, response_headers, response_body, created_at, expires_at \
                     FROM idempotency_keys WHERE merchant_id = $1 AND idem_key = $2",
                )
                .bind(merchant_id)
                .bind(idem_key)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn key_outcomes(
                &self,
                merchant_id: i64,
                idem_key: &str,
            ) -> Result<Vec<$crate::store::KeyOutcomeCount>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::KeyOutcomeCount>(
                    "SELECT outcome, count, first_at, last_at FROM idempotency_key_outcomes \
                     WHERE merchant_id = $1 AND idem_key = $2 \
                     ORDER BY CASE outcome WHEN 'replay' THEN 0 WHEN 'in_use' THEN 1 WHEN 'reused' THEN 2 ELSE 3 END, outcome",
                )
                .bind(merchant_id)
                .bind(idem_key)
                .fetch_all(self.reader())
                .await?)
            }

            async fn payment_keys(
                &self,
                payment_id: &str,
            ) -> Result<Vec<$crate::store::KeySummary>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::KeySummary>(
                    "SELECT merchant_id, idem_key, route, state, resource_id, created_at FROM idempotency_keys \
                     WHERE resource_id = $1 OR resource_id IN (SELECT id FROM refunds WHERE payment_id = $1) \
                     ORDER BY created_at, idem_key",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }
        }
    };
}
