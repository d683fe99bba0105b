//! The merchants' SQL both backends share ([`Merchants`](super::Merchants); conventions in
//! `backend.rs`).

macro_rules! impl_merchants {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        async fn insert_merchant(
            tx: &mut $crate::store::backend::Tx<$store>,
            name: &str,
            key: &$crate::store::NewMerchantKey,
        ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
            let m: $crate::store::Merchant = sqlx::query_as::<_, $crate::store::Merchant>(
                "INSERT INTO merchants (name, api_key_hash, frozen, created_at) VALUES ($1, $2, FALSE, $3) \
                 RETURNING id, name, frozen, created_at",
            )
            .bind(name)
            .bind(&key.key_hash)
            .bind(key.now)
            .fetch_one(&mut **tx)
            .await?
            .into();
            insert_merchant_key(tx, m.id, key).await?;
            Ok(m)
        }

        /// The merchant row alone. `merchants.api_key_hash` is the pre-0102 single key,
        /// NOT NULL UNIQUE and no longer read for sign-in (keys are in `merchant_keys`), so a
        /// keyless merchant gets a unique value no SHA-256 hex can equal.
        async fn insert_keyless_merchant(
            tx: &mut $crate::store::backend::Tx<$store>,
            name: &str,
            now: i64,
        ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
            Ok(sqlx::query_as::<_, $crate::store::Merchant>(
                "INSERT INTO merchants (name, api_key_hash, frozen, created_at) VALUES ($1, $2, FALSE, $3) \
                 RETURNING id, name, frozen, created_at",
            )
            .bind(name)
            .bind(format!("keyless:{name}"))
            .bind(now)
            .fetch_one(&mut **tx)
            .await?)
        }

        async fn insert_merchant_key(
            tx: &mut $crate::store::backend::Tx<$store>,
            merchant_id: i64,
            key: &$crate::store::NewMerchantKey,
        ) -> Result<$crate::store::MerchantKey, $crate::store::StoreError> {
            Ok(sqlx::query_as::<_, $crate::store::MerchantKey>(
                "INSERT INTO merchant_keys (id, merchant_id, prefix, key_hash, created_at) VALUES ($1, $2, $3, $4, $5) \
                 RETURNING id, merchant_id, prefix, created_at, last_used_at, revoked_at",
            )
            .bind(&key.id)
            .bind(merchant_id)
            .bind(&key.prefix)
            .bind(&key.key_hash)
            .bind(key.now)
            .fetch_one(&mut **tx)
            .await?)
        }

        #[async_trait::async_trait]
        impl $crate::store::Merchants for $store {
            async fn create_merchant(
                &self,
                name: &str,
                api_key_hash: &str,
                now: i64,
            ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let key = $crate::store::NewMerchantKey {
                    id: format!("mk_{}", &api_key_hash[..api_key_hash.len().min(24)]),
                    prefix: String::new(),
                    key_hash: api_key_hash.to_string(),
                    now,
                };
                let m = insert_merchant(&mut tx, name, &key).await?;
                tx.commit().await?;
                Ok(m)
            }

            async fn set_merchant_frozen_audited(
                &self,
                name: &str,
                frozen: bool,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let r = sqlx::query("UPDATE merchants SET frozen = $1 WHERE name = $2")
                    .bind(frozen)
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
                if r.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn create_merchant_with_key(
                &self,
                name: &str,
                key: &$crate::store::NewMerchantKey,
                audit: &$crate::store::AuditEntry,
            ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let m = insert_merchant(&mut tx, name, key).await?;
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(m)
            }

            async fn create_merchant_keyless(
                &self,
                name: &str,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let m = insert_keyless_merchant(&mut tx, name, now).await?;
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(m)
            }

            async fn add_merchant_key(
                &self,
                name: &str,
                key: &$crate::store::NewMerchantKey,
                audit: &$crate::store::AuditEntry,
            ) -> Result<Option<$crate::store::MerchantKey>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let id: Option<i64> = sqlx::query_scalar("SELECT id FROM merchants WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(merchant_id) = id else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                let k = insert_merchant_key(&mut tx, merchant_id, key).await?;
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(Some(k))
            }

            async fn merchant_keys(
                &self,
                name: &str,
            ) -> Result<Option<Vec<$crate::store::MerchantKey>>, $crate::store::StoreError> {
                let id: Option<i64> = sqlx::query_scalar("SELECT id FROM merchants WHERE name = $1")
                    .bind(name)
                    .fetch_optional(self.reader())
                    .await?;
                let Some(merchant_id) = id else {
                    return Ok(None);
                };
                Ok(Some(
                    sqlx::query_as::<_, $crate::store::MerchantKey>(
                        "SELECT id, merchant_id, prefix, created_at, last_used_at, revoked_at FROM merchant_keys \
                         WHERE merchant_id = $1 ORDER BY created_at, id",
                    )
                    .bind(merchant_id)
                    .fetch_all(self.reader())
                    .await?,
                ))
            }

            async fn revoke_merchant_key(
                &self,
                name: &str,
                key_id: &str,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let revoked = sqlx::query(
                    "UPDATE merchant_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL \
                     AND merchant_id = (SELECT id FROM merchants WHERE name = $3)",
                )
                .bind(now)
                .bind(key_id)
                .bind(name)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if revoked == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn touch_merchant_key(&self, api_key_hash: &str, now: i64) -> Result<(), $crate::store::StoreError> {
                sqlx::query(
                    "UPDATE merchant_keys SET last_used_at = $1 WHERE key_hash = $2 \
                     AND (last_used_at IS NULL OR last_used_at < $3)",
                )
                .bind(now)
                .bind(api_key_hash)
                .bind(now - 60_000)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn merchant_by_key_hash(
                &self,
                api_key_hash: &str,
            ) -> Result<Option<$crate::store::Merchant>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Merchant>(
                    "SELECT m.id, m.name, m.frozen, m.created_at FROM merchant_keys k \
                     JOIN merchants m ON m.id = k.merchant_id \
                     WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
                )
                .bind(api_key_hash)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn merchant(&self, id: i64) -> Result<Option<$crate::store::Merchant>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Merchant>(
                    "SELECT id, name, frozen, created_at FROM merchants WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn set_merchant_connector_audited(
                &self,
                name: &str,
                account: Option<&$crate::store::NewMerchantConnector>,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let id: Option<i64> = sqlx::query_scalar("SELECT id FROM merchants WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(id) = id else {
                    tx.rollback().await?;
                    return Ok(false);
                };
                match account {
                    Some(a) => {
                        sqlx::query(
                            "INSERT INTO merchant_connectors (merchant_id, kind, routed, api_base, secret_key, \
                             webhook_secrets, key_hint, payment_method, updated_at) \
                             VALUES ($1, $2, TRUE, $3, $4, $5, $6, $7, $8) \
                             ON CONFLICT (merchant_id) DO UPDATE SET kind = excluded.kind, routed = TRUE, \
                             api_base = excluded.api_base, secret_key = excluded.secret_key, \
                             webhook_secrets = excluded.webhook_secrets, key_hint = excluded.key_hint, \
                             payment_method = excluded.payment_method, updated_at = excluded.updated_at",
                        )
                        .bind(id)
                        .bind(&a.kind)
                        .bind(&a.api_base)
                        .bind(&a.secret_key)
                        .bind(&a.webhook_secrets)
                        .bind(&a.key_hint)
                        .bind(&a.payment_method)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    }
                    None => {
                        sqlx::query(
                            "UPDATE merchant_connectors SET routed = FALSE, updated_at = $1 WHERE merchant_id = $2",
                        )
                        .bind(now)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                    }
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn merchant_connectors(
                &self,
            ) -> Result<Vec<$crate::store::MerchantConnector>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::MerchantConnector>(
                    "SELECT c.merchant_id, m.name AS merchant_name, c.kind, c.routed, c.api_base, \
                     c.secret_key, c.webhook_secrets, c.key_hint, c.payment_method, c.updated_at \
                     FROM merchant_connectors c JOIN merchants m ON m.id = c.merchant_id \
                     ORDER BY c.merchant_id",
                )
                .fetch_all(self.reader())
                .await?)
            }

            async fn set_merchant_pricing_audited(
                &self,
                name: &str,
                percent_ppm: i64,
                fixed_fee: i64,
                refund_fee: i64,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<Option<converge_wire::merchants::MerchantPricing>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let merchant: Option<i64> = sqlx::query_scalar("SELECT id FROM merchants WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(merchant_id) = merchant else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                let version: i64 = sqlx::query_scalar(
                    "INSERT INTO merchant_pricing (merchant_id, version, percent_ppm, fixed_fee, created_at, refund_fee) \
                     SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3, $4, $5 FROM merchant_pricing \
                     WHERE merchant_id = $1 RETURNING version",
                )
                .bind(merchant_id)
                .bind(percent_ppm)
                .bind(fixed_fee)
                .bind(now)
                .bind(refund_fee)
                .fetch_one(&mut *tx)
                .await?;
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(Some(converge_wire::merchants::MerchantPricing {
                    version,
                    percent_ppm,
                    fixed_fee,
                    refund_fee,
                    created_at: now,
                }))
            }

            async fn current_pricings(
                &self,
            ) -> Result<Vec<(i64, converge_wire::merchants::MerchantPricing)>, $crate::store::StoreError> {
                let sql = format!(
                    "SELECT p.merchant_id, {} FROM merchant_pricing p WHERE p.version = \
                     (SELECT MAX(q.version) FROM merchant_pricing q WHERE q.merchant_id = p.merchant_id) \
                     ORDER BY p.merchant_id",
                    $crate::store::merchants::PRICING_COLUMNS
                );
                let rows: Vec<(i64, i64, i64, i64, i64, i64)> =
                    sqlx::query_as(&sql).fetch_all(self.reader()).await?;
                Ok(rows
                    .into_iter()
                    .map(|(merchant_id, version, percent_ppm, fixed_fee, refund_fee, created_at)| {
                        let row = (version, percent_ppm, fixed_fee, refund_fee, created_at);
                        (merchant_id, $crate::store::merchants::pricing_of(row))
                    })
                    .collect())
            }

            async fn merchant_pricing(
                &self,
                name: &str,
            ) -> Result<Option<Vec<converge_wire::merchants::MerchantPricing>>, $crate::store::StoreError> {
                let merchant: Option<i64> = sqlx::query_scalar("SELECT id FROM merchants WHERE name = $1")
                    .bind(name)
                    .fetch_optional(self.reader())
                    .await?;
                let Some(merchant_id) = merchant else {
                    return Ok(None);
                };
                let sql = format!(
                    "SELECT {} FROM merchant_pricing WHERE merchant_id = $1 ORDER BY version DESC",
                    $crate::store::merchants::PRICING_COLUMNS
                );
                let rows: Vec<(i64, i64, i64, i64, i64)> = sqlx::query_as(&sql)
                    .bind(merchant_id)
                    .fetch_all(self.reader())
                    .await?;
                Ok(Some(
                    rows.into_iter()
                        .map($crate::store::merchants::pricing_of)
                        .collect(),
                ))
            }

            async fn set_merchant_frozen(&self, name: &str, frozen: bool) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query("UPDATE merchants SET frozen = $1 WHERE name = $2")
                    .bind(frozen)
                    .bind(name)
                    .execute(self.writer())
                    .await?;
                Ok(r.rows_affected() == 1)
            }
        }
    };
}
