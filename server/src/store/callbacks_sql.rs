//! The channel callbacks' SQL both backends share ([`Callbacks`](super::Callbacks);
//! conventions in `backend.rs`).

macro_rules! impl_callbacks {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Callbacks for $store {
            async fn claim_callback(
                &self,
                event_id: &str,
                channel_key: &str,
                kind: &str,
                now: i64,
                stale_before: i64,
            ) -> Result<$crate::store::CallbackClaim, $crate::store::StoreError> {
                // 'received' is an unsettled claim; taking over one that is old enough means
                // its handler died between the claim and the settlement.
                let r = sqlx::query(
                    "INSERT INTO channel_callbacks (event_id, channel_key, kind, outcome, received_at) \
                     VALUES ($1, $2, $3, 'received', $4) ON CONFLICT (event_id) DO UPDATE \
                     SET received_at = excluded.received_at \
                     WHERE channel_callbacks.outcome = 'received' AND channel_callbacks.received_at <= $5",
                )
                .bind(event_id)
                .bind(channel_key)
                .bind(kind)
                .bind(now)
                .bind(stale_before)
                .execute(self.writer())
                .await?;
                if r.rows_affected() == 1 {
                    return Ok($crate::store::CallbackClaim::Claimed);
                }
                let outcome = sqlx::query_scalar::<_, String>(
                    "SELECT outcome FROM channel_callbacks WHERE event_id = $1",
                )
                .bind(event_id)
                .fetch_optional(self.writer())
                .await?;
                Ok(match outcome.as_deref() {
                    Some("received") => $crate::store::CallbackClaim::InProgress,
                    Some(_) => $crate::store::CallbackClaim::Settled,
                    // Dropped by a failed handler between the two statements: not settled.
                    None => $crate::store::CallbackClaim::InProgress,
                })
            }

            async fn settle_callback(
                &self,
                event_id: &str,
                outcome: Option<&str>,
            ) -> Result<(), $crate::store::StoreError> {
                let q = match outcome {
                    Some(o) => sqlx::query(
                        "UPDATE channel_callbacks SET outcome = $2 WHERE event_id = $1 AND outcome = 'received'",
                    )
                    .bind(event_id)
                    .bind(o),
                    None => sqlx::query(
                        "DELETE FROM channel_callbacks WHERE event_id = $1 AND outcome = 'received'",
                    )
                    .bind(event_id),
                };
                q.execute(self.writer()).await?;
                Ok(())
            }

            async fn settle_ignored_callback(
                &self,
                event_id: &str,
                ignored: &$crate::store::IgnoredEvent,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                insert_ignored_event(&mut *tx, ignored).await?;
                sqlx::query(
                    "UPDATE channel_callbacks SET outcome = 'ignored' WHERE event_id = $1 AND outcome = 'received'",
                )
                .bind(event_id)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }
        }
    };
}
