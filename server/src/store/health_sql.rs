//! The SQL of [`ChannelHealth`](super::ChannelHealth), shared by both backends.

macro_rules! impl_channel_health {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::ChannelHealth for $store {
            async fn record_channel_attempt(
                &self,
                a: &$crate::store::NewChannelAttempt,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query(
                    "INSERT INTO channel_attempts (payment_id, connector, outcome, reason, duration_ms, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&a.payment_id)
                .bind(&a.connector)
                .bind(a.outcome.as_str())
                .bind(a.reason.as_ref().map(|r| r.key()).unwrap_or_default())
                .bind(a.duration_ms.max(0))
                .bind(a.at)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn channel_attempts_since(
                &self,
                since: i64,
            ) -> Result<Vec<$crate::store::ChannelAttemptRow>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ChannelAttemptRow>(
                    "SELECT connector, outcome, duration_ms, created_at FROM channel_attempts \
                     WHERE created_at >= $1 ORDER BY created_at, id",
                )
                .bind(since)
                .fetch_all(self.reader())
                .await?)
            }

            async fn failure_groups_since(
                &self,
                since: i64,
            ) -> Result<Vec<$crate::store::FailureGroup>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::FailureGroup>(
                    "SELECT reason, count, last_at FROM (\
                     SELECT reason, CAST(COUNT(*) AS BIGINT) AS count, CAST(MAX(created_at) AS BIGINT) AS last_at \
                     FROM channel_attempts WHERE created_at >= $1 AND outcome <> 'success' GROUP BY reason \
                     UNION ALL \
                     SELECT 'fenced' AS reason, CAST(COUNT(*) AS BIGINT) AS count, CAST(MAX(created_at) AS BIGINT) AS last_at \
                     FROM payment_events WHERE event = 'query_not_found_fenced' AND applied AND created_at >= $1 \
                     HAVING COUNT(*) > 0\
                     ) g ORDER BY count DESC, reason",
                )
                .bind(since)
                .fetch_all(self.reader())
                .await?)
            }

            async fn purge_channel_attempts(&self, before: i64) -> Result<u64, $crate::store::StoreError> {
                Ok(sqlx::query("DELETE FROM channel_attempts WHERE created_at < $1")
                    .bind(before)
                    .execute(self.writer())
                    .await?
                    .rows_affected())
            }
        }
    };
}
