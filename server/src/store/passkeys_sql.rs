//! The passkeys' SQL both backends share. Expanded after `impl_governance!`, whose
//! `append_audit_in` writes a change's audit record in the change's transaction.

macro_rules! impl_passkeys {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Passkeys for $store {
            async fn add_passkey(
                &self,
                p: &$crate::store::PasskeyRecord,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let inserted = sqlx::query(
                    "INSERT INTO passkeys (id, username, credential_id, name, passkey, sign_count, \
                     created_at, last_used_at, confirmed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&p.id)
                .bind(&p.username)
                .bind(&p.credential_id)
                .bind(&p.name)
                .bind(&p.passkey)
                .bind(p.sign_count)
                .bind(p.created_at)
                .bind(p.last_used_at)
                .bind(p.confirmed_at)
                .execute(&mut *tx)
                .await;
                match inserted.map_err($crate::store::StoreError::from) {
                    Ok(_) => {}
                    Err($crate::store::StoreError::Conflict(_)) => {
                        tx.rollback().await?;
                        return Ok(false);
                    }
                    Err(e) => return Err(e),
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn confirm_passkeys(
                &self,
                username: &str,
                registered_by: i64,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let n = sqlx::query(
                    "UPDATE passkeys SET confirmed_at = $1 \
                     WHERE username = $2 AND confirmed_at IS NULL AND created_at <= $3",
                )
                .bind(now)
                .bind(username)
                .bind(registered_by)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(n)
            }

            async fn passkeys_of(
                &self,
                username: &str,
            ) -> Result<Vec<$crate::store::PasskeyRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::PasskeyRecord>(
                    "SELECT * FROM passkeys WHERE username = $1 ORDER BY created_at, id",
                )
                .bind(username)
                .fetch_all(self.reader())
                .await?)
            }

            async fn remove_passkey(
                &self,
                username: &str,
                id: &str,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let gone = sqlx::query("DELETE FROM passkeys WHERE id = $1 AND username = $2")
                    .bind(id)
                    .bind(username)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if gone != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn record_passkey_use(
                &self,
                id: &str,
                passkey: &str,
                sign_count: i64,
                now: i64,
            ) -> Result<$crate::store::PasskeyUse, $crate::store::StoreError> {
                // Conditional on the stored counter: a cloned credential's assertion, or a
                // second one racing with the same counter value, changes nothing.
                let moved = sqlx::query(
                    "UPDATE passkeys SET passkey = $1, sign_count = $2, last_used_at = $3 \
                     WHERE id = $4 AND (sign_count < $2 OR (sign_count = 0 AND $2 = 0))",
                )
                .bind(passkey)
                .bind(sign_count)
                .bind(now)
                .bind(id)
                .execute(self.writer())
                .await?
                .rows_affected();
                Ok(if moved == 1 {
                    $crate::store::PasskeyUse::Recorded
                } else {
                    $crate::store::PasskeyUse::CounterNotRaised
                })
            }

            async fn put_challenge(
                &self,
                id: &str,
                username: &str,
                purpose: &str,
                state: &str,
                expires_at: i64,
                now: i64,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query("DELETE FROM webauthn_challenges WHERE expires_at <= $1")
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO webauthn_challenges (id, username, purpose, state, expires_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(id)
                .bind(username)
                .bind(purpose)
                .bind(state)
                .bind(expires_at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn take_challenge(
                &self,
                id: &str,
                username: &str,
                purpose: &str,
                now: i64,
            ) -> Result<Option<String>, $crate::store::StoreError> {
                // One DELETE: of two finishes racing with one challenge, one gets it.
                let taken: Option<(String, i64)> = sqlx::query_as(
                    "DELETE FROM webauthn_challenges WHERE id = $1 AND username = $2 AND purpose = $3 \
                     RETURNING state, expires_at",
                )
                .bind(id)
                .bind(username)
                .bind(purpose)
                .fetch_optional(self.writer())
                .await?;
                Ok(taken.filter(|(_, exp)| *exp > now).map(|(s, _)| s))
            }

            async fn console_setting(
                &self,
                name: &str,
            ) -> Result<Option<$crate::store::ConsoleSetting>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ConsoleSetting>(
                    "SELECT * FROM console_settings WHERE name = $1",
                )
                .bind(name)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn set_console_setting(
                &self,
                s: &$crate::store::ConsoleSetting,
                audit: &$crate::store::AuditEntry,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    "INSERT INTO console_settings (name, value, updated_by, updated_at) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE SET \
                     value = excluded.value, updated_by = excluded.updated_by, \
                     updated_at = excluded.updated_at",
                )
                .bind(&s.name)
                .bind(&s.value)
                .bind(&s.updated_by)
                .bind(s.updated_at)
                .execute(&mut *tx)
                .await?;
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(())
            }
        }
    };
}
