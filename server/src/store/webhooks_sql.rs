//! The outbox and webhook SQL both backends share (see `backend.rs` for the conventions).

macro_rules! impl_webhooks {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        use $crate::store::webhooks_sql::{DELIVERY_SELECT, ENDPOINT_COLUMNS, EVENT_COLUMNS};

        /// Inserts the outbox row of an outcome, then one delivery and one `webhook` job per
        /// enabled endpoint of the merchant that subscribes to its type, all in the caller's
        /// transaction (seed 004 §6.1: the event commits with the state change or not at all).
        /// An outcome already recorded (a replayed or raced transition) writes nothing: one
        /// per aggregate, type and `occurrence` (`""`, or the capture id of a
        /// `payment.captured`).
        #[allow(clippy::too_many_arguments)]
        async fn insert_outbox_event(
            tx: &mut $crate::store::backend::Tx<$store>,
            plan: &$crate::store::WebhookPlan,
            merchant_id: i64,
            event_type: $crate::domain::webhooks::EventType,
            aggregateid: &str,
            occurrence: &str,
            payload: &str,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            let id = $crate::ids::new_event_id(now);
            let inserted = sqlx::query(
                "INSERT INTO events (id, merchant_id, aggregatetype, aggregateid, type, payload, created_at, occurrence) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (aggregatetype, aggregateid, type, occurrence) DO NOTHING",
            )
            .bind(&id)
            .bind(merchant_id)
            .bind(event_type.aggregate_type())
            .bind(aggregateid)
            .bind(event_type.as_str())
            .bind(payload)
            .bind(now)
            .bind(occurrence)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                return Ok(());
            }
            let due = now + plan.first_delay_ms();
            let deliveries = sqlx::query(
                concat!("INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, next_attempt_at, \
                 created_at, updated_at) \
                 SELECT $1, id, ", converge_wire::delivery_sql!(Pending), concat!(", 0, $2, $3, $3 FROM webhook_endpoints \
                 WHERE merchant_id = $4 AND status = ", converge_wire::endpoint_sql!(Enabled), " \
                 AND (enabled_events = ',*,' OR enabled_events LIKE $5)")),
            )
            .bind(&id)
            .bind(due)
            .bind(now)
            .bind(merchant_id)
            .bind(format!("%,{},%", event_type.as_str()))
            .execute(&mut **tx)
            .await?
            .rows_affected();
            if deliveries == 0 {
                // No endpoint wants it: the event stays for the stream, with nothing to deliver.
                return Ok(());
            }
            let payment_id = if event_type.aggregate_type() == "payment" {
                Some(aggregateid.to_string())
            } else {
                sqlx::query_scalar::<_, String>("SELECT payment_id FROM refunds WHERE id = $1")
                    .bind(aggregateid)
                    .fetch_optional(&mut **tx)
                    .await?
            };
            sqlx::query(
                concat!("INSERT INTO jobs (kind, payment_id, refund_id, status, attempts, max_attempts, run_at, \
                 created_at, updated_at, payload) \
                 SELECT 'webhook', $1, NULL, ", converge_wire::job_sql!(Due), ", 0, $2, $3, $4, $4, CAST(id AS TEXT) \
                 FROM webhook_deliveries WHERE event_id = $5"),
            )
            .bind(payment_id)
            .bind(plan.attempts())
            .bind(due)
            .bind(now)
            .bind(&id)
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        /// A connection of `$store`'s reader pool, as the verify helpers below take it: the
        /// outbox's reads run on one connection taken once, since each taken from the pool
        /// costs a round trip more when it goes back (sqlx pings it on release), and verify
        /// runs after every step of the simulator (issue 39).
        type VerifyReader = <$crate::store::backend::DbOf<$store> as sqlx::Database>::Connection;

        /// `OutboxFacts`' outcomes without their event: payments, then refunds, that reached
        /// an outcome since the outbox was installed (`mark`) and have no event for it.
        async fn verify_outbox_outcomes(
            r: &mut VerifyReader,
            mark: i64,
        ) -> Result<(Vec<(String, String)>, Vec<(String, String, String)>), $crate::store::StoreError> {
            let (outcomes, outcome_event) = $crate::store::webhooks::payment_outcome_sql("p.status");
            let sql = format!(
                "SELECT p.id, p.status FROM payments p \
                 WHERE p.status IN ({outcomes}) AND p.updated_at >= $1 \
                 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.aggregatetype = 'payment' AND e.aggregateid = p.id \
                   AND e.type = {outcome_event}) \
                 ORDER BY p.id LIMIT 1000"
            );
            let payments_without_event = sqlx::query_as::<_, (String, String)>(&sql)
            .bind(mark)
            .fetch_all(&mut *r)
            .await?;
            let refunds_without_event = sqlx::query_as::<_, (String, String, String)>(
                concat!("SELECT rf.id, rf.payment_id, rf.status FROM refunds rf \
                 WHERE rf.status IN (", converge_wire::refund_sql!(Succeeded), ", ", converge_wire::refund_sql!(Failed), ") AND rf.updated_at >= $1 \
                 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.aggregatetype = 'refund' AND e.aggregateid = rf.id \
                   AND e.type = 'refund.' || rf.status) \
                 ORDER BY rf.id LIMIT 1000"),
            )
            .bind(mark)
            .fetch_all(&mut *r)
            .await?;
            Ok((payments_without_event, refunds_without_event))
        }

        /// `OutboxFacts`' deliveries past the window: the undelivered ones, then the
        /// subscribed endpoints an event made none to. A pending delivery whose job is due
        /// after the cutoff (its retry schedule's next attempt, a breaker's probe, a pause's
        /// recheck) or leased past it is still within its schedule (DESIGN.md invariant 6),
        /// not undelivered: the simulator's flaky endpoints found the check reading every
        /// retry older than the window as lost (issue 39).
        async fn verify_outbox_deliveries(
            r: &mut VerifyReader,
            cutoff: i64,
        ) -> Result<(Vec<(i64, String, String, String)>, Vec<(String, String, String)>), $crate::store::StoreError> {
            let undelivered = sqlx::query_as::<_, (i64, String, String, String)>(
                concat!("SELECT d.id, d.event_id, e.aggregateid, d.status FROM webhook_deliveries d \
                 JOIN events e ON e.id = d.event_id WHERE e.created_at <= $1 \
                 AND ((d.status = ", converge_wire::delivery_sql!(Pending), " AND NOT EXISTS \
                   (SELECT 1 FROM jobs j WHERE j.kind = 'webhook' AND j.payload = CAST(d.id AS TEXT) \
                    AND ((j.status = ", converge_wire::job_sql!(Due), " AND j.run_at > $1) \
                      OR (j.status = ", converge_wire::job_sql!(Leased), " AND j.lease_expires_at > $1)))) \
                 OR (d.status = ", converge_wire::delivery_sql!(Dead), " AND NOT EXISTS \
                   (SELECT 1 FROM error_pool x WHERE x.dedupe_key = 'webhook:' || CAST(d.id AS TEXT)))) \
                 ORDER BY d.id LIMIT 1000"),
            )
            .bind(cutoff)
            .fetch_all(&mut *r)
            .await?;
            // An endpoint changed since the event (disabled and re-enabled, say) is left
            // out: whether it was subscribed and enabled then is not recorded.
            let missing_deliveries = sqlx::query_as::<_, (String, String, String)>(
                concat!("SELECT e.id, w.id, e.aggregateid FROM events e JOIN webhook_endpoints w \
                 ON w.merchant_id = e.merchant_id AND w.status = ", converge_wire::endpoint_sql!(Enabled), " AND w.updated_at <= e.created_at \
                 AND (w.enabled_events = ',*,' OR w.enabled_events LIKE '%,' || e.type || ',%') \
                 WHERE e.created_at <= $1 \
                 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.endpoint_id = w.id) \
                 ORDER BY e.seq LIMIT 1000"),
            )
            .bind(cutoff)
            .fetch_all(&mut *r)
            .await?;
            Ok((undelivered, missing_deliveries))
        }

        /// `OutboxFacts::unpublished`: when a relay publishes from this database
        /// (`stream_configured`), the events past the window it has not published.
        async fn verify_outbox_unpublished(
            r: &mut VerifyReader,
            stream_configured: bool,
            cutoff: i64,
        ) -> Result<Vec<(String, String)>, $crate::store::StoreError> {
            if !stream_configured {
                return Ok(Vec::new());
            }
            Ok(sqlx::query_as::<_, (String, String)>(
                "SELECT e.id, e.aggregateid FROM events e WHERE e.created_at <= $1 \
                 AND NOT EXISTS (SELECT 1 FROM event_publications p WHERE p.event_id = e.id) \
                 ORDER BY e.seq LIMIT 1000",
            )
            .bind(cutoff)
            .fetch_all(&mut *r)
            .await?)
        }

        /// `OutboxFacts::pending_drift`: where `outbox_pending` and the events without a
        /// publication disagree, each way.
        async fn verify_outbox_drift(
            r: &mut VerifyReader,
        ) -> Result<Vec<(String, String, &'static str)>, $crate::store::StoreError> {
            // Checked against the anti-join itself, so a trigger that missed a write shows
            // as a breach instead of as an event the relay never sees. Both ways in one
            // round trip (each side's first 1000).
            let rows: Vec<(String, Option<String>, i64)> = sqlx::query_as(
                "SELECT id, agg, side FROM (SELECT e.id AS id, e.aggregateid AS agg, CAST(0 AS BIGINT) AS side \
                   FROM events e \
                   WHERE NOT EXISTS (SELECT 1 FROM event_publications p WHERE p.event_id = e.id) \
                   AND NOT EXISTS (SELECT 1 FROM outbox_pending o WHERE o.event_id = e.id) \
                   ORDER BY e.seq LIMIT 1000) unpublished \
                 UNION ALL \
                 SELECT id, agg, side FROM (SELECT o.event_id AS id, e.aggregateid AS agg, CAST(1 AS BIGINT) AS side \
                   FROM outbox_pending o \
                   LEFT JOIN events e ON e.id = o.event_id AND e.seq = o.seq \
                   WHERE e.id IS NULL \
                   OR EXISTS (SELECT 1 FROM event_publications p WHERE p.event_id = o.event_id) \
                   ORDER BY o.seq LIMIT 1000) backlog",
            )
            .fetch_all(&mut *r)
            .await?;
            let pending_drift = rows
                .into_iter()
                .map(|(id, agg, side)| {
                    let what = if side == 0 {
                        "is unpublished but missing from the outbox backlog"
                    } else {
                        "is in the outbox backlog but published or gone"
                    };
                    (id, agg.unwrap_or_default(), what)
                })
                .collect();
            Ok(pending_drift)
        }

        /// The stored breaker of an endpoint with its version, if it has a row.
        async fn breaker_row(
            db: &sqlx::Pool<<$store as $crate::store::backend::SqlBackend>::Db>,
            endpoint_id: &str,
        ) -> Result<Option<($crate::store::BreakerState, i64)>, $crate::store::StoreError> {
            let row: Option<(i64, i64, i64, i64, Option<i64>, Option<i64>, Option<i64>, i64)> = sqlx::query_as(
                "SELECT attempts, recent, failures, opens, open_until, probe_until, opened_at, version FROM webhook_breakers WHERE endpoint_id = $1",
            )
            .bind(endpoint_id)
            .fetch_optional(db)
            .await?;
            Ok(row.map(|(attempts, recent, failures, opens, open_until, probe_until, opened_at, version)| {
                ($crate::store::BreakerState { attempts, recent, failures, opens, open_until, probe_until, opened_at }, version)
            }))
        }

        #[async_trait::async_trait]
        impl $crate::store::Webhooks for $store {
            fn webhook_plan(&self) -> &$crate::store::WebhookPlan {
                self.outbox_plan()
            }

            async fn create_endpoint(
                &self,
                e: &$crate::store::NewEndpoint,
                audit: Option<&$crate::store::AuditEntry>,
            ) -> Result<Option<$crate::store::WebhookEndpoint>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                // The merchant's row locked for the rest of the transaction (PostgreSQL; a
                // SQLite write transaction is the only writer already): a create racing for
                // the last place waits here, then counts the winner's endpoint (READ
                // COMMITTED: the count's snapshot is taken after the lock). A no-op update of
                // a column no key holds: a key-share lock (a payment's foreign key) is not
                // blocked by it.
                sqlx::query("UPDATE merchants SET frozen = frozen WHERE id = $1")
                    .bind(e.merchant_id)
                    .execute(&mut *tx)
                    .await?;
                let cap = e.max_live.map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
                let ep = sqlx::query_as::<_, $crate::store::WebhookEndpoint>(&format!(
                    concat!("INSERT INTO webhook_endpoints (id, merchant_id, url, description, enabled_events, secret, \
                     status, created_at, updated_at) SELECT $1, $2, $3, $4, $5, $6, ", converge_wire::endpoint_sql!(Enabled), ", $7, $7 \
                     WHERE (SELECT COUNT(*) FROM webhook_endpoints WHERE merchant_id = $2 AND status <> ",
                     converge_wire::endpoint_sql!(Deleted), ") < $8 \
                     RETURNING {ENDPOINT_COLUMNS}"),
                    ENDPOINT_COLUMNS = ENDPOINT_COLUMNS,
                ))
                .bind(&e.id)
                .bind(e.merchant_id)
                .bind(&e.url)
                .bind(&e.description)
                .bind(&e.enabled_events)
                .bind(&e.secret)
                .bind(e.now)
                .bind(cap)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(ep) = ep else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                if let Some(a) = audit {
                    append_audit_in(&mut tx, a).await?;
                }
                tx.commit().await?;
                Ok(Some(ep))
            }

            async fn sealed_secret_sample(
                &self,
            ) -> Result<Option<String>, $crate::store::StoreError> {
                Ok(sqlx::query_scalar::<_, String>(
                    "SELECT secret FROM webhook_endpoints WHERE secret LIKE 'sealed:%' LIMIT 1",
                )
                .fetch_optional(self.reader())
                .await?)
            }

            async fn seal_plaintext_secrets(
                &self,
                secrets: &$crate::domain::secret_box::SecretBox,
            ) -> Result<u64, $crate::store::StoreError> {
                use $crate::domain::secret_box::{Purpose, is_sealed_bytes};
                let mut sealed = 0u64;
                let plain: Vec<(String, String, Option<String>)> = sqlx::query_as(
                    "SELECT id, secret, previous_secret FROM webhook_endpoints \
                     WHERE secret NOT LIKE 'sealed:%' \
                     OR (previous_secret IS NOT NULL AND previous_secret NOT LIKE 'sealed:%')",
                )
                .fetch_all(self.reader())
                .await?;
                let seal = |v: &str| {
                    if $crate::domain::secret_box::is_sealed_text(v) {
                        v.to_string()
                    } else {
                        secrets.seal_text(Purpose::WebhookSecret, v)
                    }
                };
                for (id, secret, previous) in plain {
                    let mut tx = self.begin_write().await?;
                    sealed += sqlx::query(
                        "UPDATE webhook_endpoints SET secret = $1, previous_secret = $2 \
                         WHERE id = $3 AND secret = $4 \
                         AND (previous_secret = $5 OR (previous_secret IS NULL AND $5 IS NULL))",
                    )
                    .bind(seal(&secret))
                    .bind(previous.as_deref().map(seal))
                    .bind(&id)
                    .bind(&secret)
                    .bind(previous.as_deref())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    tx.commit().await?;
                }
                let answers: Vec<(i64, String, Vec<u8>)> = sqlx::query_as(
                    "SELECT merchant_id, idem_key, response_body FROM idempotency_keys \
                     WHERE route LIKE 'POST /v1/webhook_endpoints%' AND response_body IS NOT NULL",
                )
                .fetch_all(self.reader())
                .await?;
                for (merchant_id, idem_key, body) in answers {
                    if is_sealed_bytes(&body) {
                        continue;
                    }
                    let mut tx = self.begin_write().await?;
                    sealed += sqlx::query(
                        "UPDATE idempotency_keys SET response_body = $1 \
                         WHERE merchant_id = $2 AND idem_key = $3 AND response_body = $4",
                    )
                    .bind(secrets.seal_bytes(Purpose::StoredAnswer, &body))
                    .bind(merchant_id)
                    .bind(&idem_key)
                    .bind(&body)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    tx.commit().await?;
                }
                Ok(sealed)
            }

            async fn endpoint(
                &self,
                id: &str,
            ) -> Result<Option<$crate::store::WebhookEndpoint>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::WebhookEndpoint>(&format!(
                    "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1"
                ))
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn endpoints(
                &self,
                merchant_id: Option<i64>,
            ) -> Result<Vec<$crate::store::WebhookEndpoint>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::WebhookEndpoint>(&format!(
                    "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints \
                     WHERE ($1 IS NULL OR merchant_id = $1) ORDER BY created_at DESC, id"
                ))
                .bind(merchant_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn set_endpoint_status(
                &self,
                id: &str,
                status: $crate::store::EndpointStatus,
                reason: Option<&str>,
                now: i64,
                audit: Option<&$crate::store::AuditEntry>,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let moved = sqlx::query(
                    concat!("UPDATE webhook_endpoints SET status = $1, disabled_reason = $2, updated_at = $3, \
                     failing_since = CASE WHEN $1 = ", converge_wire::endpoint_sql!(Enabled), " THEN NULL ELSE failing_since END \
                     WHERE id = $4 AND status <> ", converge_wire::endpoint_sql!(Deleted), " AND status <> $1"),
                )
                .bind(status.as_str())
                .bind(reason)
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if moved == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                if let Some(a) = audit {
                    append_audit_in(&mut tx, a).await?;
                }
                tx.commit().await?;
                Ok(true)
            }

            async fn rotate_endpoint_secret(
                &self,
                id: &str,
                new_secret: &str,
                previous_expires_at: i64,
                now: i64,
                audit: Option<&$crate::store::AuditEntry>,
            ) -> Result<Option<$crate::store::WebhookEndpoint>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let ep = sqlx::query_as::<_, $crate::store::WebhookEndpoint>(&format!(
                    concat!("UPDATE webhook_endpoints SET previous_secret = secret, previous_expires_at = $1, \
                     secret = $2, updated_at = $3 WHERE id = $4 AND status <> ", converge_wire::endpoint_sql!(Deleted), " \
                     RETURNING {ENDPOINT_COLUMNS}"),
                    ENDPOINT_COLUMNS = ENDPOINT_COLUMNS,
                ))
                .bind(previous_expires_at)
                .bind(new_secret)
                .bind(now)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                if ep.is_none() {
                    tx.rollback().await?;
                    return Ok(None);
                }
                if let Some(a) = audit {
                    append_audit_in(&mut tx, a).await?;
                }
                tx.commit().await?;
                Ok(ep)
            }

            async fn outbox_event(
                &self,
                id: &str,
            ) -> Result<Option<$crate::store::OutboxEvent>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::OutboxEvent>(&format!(
                    "SELECT {EVENT_COLUMNS} FROM events WHERE id = $1"
                ))
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn payment_outbox_events(
                &self,
                payment_id: &str,
            ) -> Result<Vec<$crate::store::OutboxEvent>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::OutboxEvent>(&format!(
                    "SELECT {EVENT_COLUMNS} FROM events WHERE (aggregatetype = 'payment' AND aggregateid = $1) \
                     OR (aggregatetype = 'refund' AND aggregateid IN (SELECT id FROM refunds WHERE payment_id = $1)) \
                     ORDER BY seq"
                ))
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn aggregate_events(
                &self,
                aggregatetype: &str,
                aggregateid: &str,
            ) -> Result<Vec<$crate::store::OutboxEvent>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::OutboxEvent>(&format!(
                    "SELECT {EVENT_COLUMNS} FROM events WHERE aggregatetype = $1 AND aggregateid = $2 ORDER BY seq"
                ))
                .bind(aggregatetype)
                .bind(aggregateid)
                .fetch_all(self.reader())
                .await?)
            }

            async fn delivery(
                &self,
                id: i64,
            ) -> Result<Option<$crate::store::DeliveryRow>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::DeliveryRow>(&format!(
                    "{DELIVERY_SELECT} WHERE d.id = $1"
                ))
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn deliveries(
                &self,
                f: &$crate::store::DeliveryFilter,
                limit: i64,
            ) -> Result<Vec<$crate::store::DeliveryRow>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::DeliveryRow>(&format!(
                    "{DELIVERY_SELECT} WHERE ($1 IS NULL OR w.merchant_id = $1) AND ($2 IS NULL OR d.status = $2) \
                     AND ($3 IS NULL OR d.endpoint_id = $3) AND ($4 IS NULL OR e.type = $4) \
                     AND ($5 IS NULL OR d.created_at >= $5) AND ($6 IS NULL OR d.created_at < $6) \
                     AND ($7 IS NULL OR (e.aggregatetype = 'payment' AND e.aggregateid = $7) \
                          OR (e.aggregatetype = 'refund' AND e.aggregateid IN (SELECT id FROM refunds WHERE payment_id = $7))) \
                     AND ($9 IS NULL OR d.id < $9) \
                     ORDER BY d.id DESC LIMIT $8"
                ))
                .bind(f.merchant_id)
                .bind(f.status.map(|s| s.as_str()))
                .bind(f.endpoint_id.as_deref())
                .bind(f.event_type.as_deref())
                .bind(f.from)
                .bind(f.to)
                .bind(f.payment_id.as_deref())
                .bind(limit)
                .bind(f.before_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn delivery_attempts(
                &self,
                delivery_id: i64,
            ) -> Result<Vec<$crate::store::AttemptRow>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::AttemptRow>(
                    "SELECT id, delivery_id, attempted_at, duration_ms, status_code, response, error \
                     FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id",
                )
                .bind(delivery_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn record_attempt(
                &self,
                a: &$crate::store::AttemptResult,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    "INSERT INTO webhook_attempts (delivery_id, attempted_at, duration_ms, status_code, response, error) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(a.delivery_id)
                .bind(a.attempted_at)
                .bind(a.duration_ms)
                .bind(a.status_code)
                .bind(&a.response)
                .bind(a.error.as_deref())
                .execute(&mut *tx)
                .await?;
                let succeeded = a.new_status == $crate::store::DeliveryStatus::Succeeded;
                let endpoint: Option<String> = sqlx::query_scalar(
                    concat!("UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, next_attempt_at = $2, \
                     last_status = $3, last_error = $4, updated_at = $5, \
                     delivered_at = CASE WHEN $1 = ", converge_wire::delivery_sql!(Succeeded), " THEN $5 ELSE delivered_at END \
                     WHERE id = $6 AND status = ", converge_wire::delivery_sql!(Pending), " RETURNING endpoint_id"),
                )
                .bind(a.new_status.as_str())
                .bind(a.next_attempt_at)
                .bind(a.status_code)
                .bind(a.error.as_deref())
                .bind(a.attempted_at)
                .bind(a.delivery_id)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(endpoint) = endpoint {
                    let sql = if succeeded {
                        "UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND $2 >= 0"
                    } else {
                        "UPDATE webhook_endpoints SET failing_since = $2 WHERE id = $1 AND failing_since IS NULL"
                    };
                    sqlx::query(sql)
                        .bind(&endpoint)
                        .bind(a.attempted_at)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn endpoint_breaker(
                &self,
                endpoint_id: &str,
            ) -> Result<$crate::store::BreakerState, $crate::store::StoreError> {
                Ok(breaker_row(self.reader(), endpoint_id).await?.map_or_else(Default::default, |(s, _)| s))
            }

            async fn open_breakers(
                &self,
            ) -> Result<Vec<(String, $crate::store::BreakerState)>, $crate::store::StoreError> {
                let rows: Vec<(String, i64, i64, i64, i64, Option<i64>, Option<i64>, Option<i64>)> = sqlx::query_as(
                    concat!("SELECT b.endpoint_id, b.attempts, b.recent, b.failures, b.opens, b.open_until, b.probe_until, b.opened_at \
                     FROM webhook_breakers b JOIN webhook_endpoints e ON e.id = b.endpoint_id \
                     WHERE b.open_until IS NOT NULL AND e.status = ", converge_wire::endpoint_sql!(Enabled), " ORDER BY b.endpoint_id"),
                )
                .fetch_all(self.reader())
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, attempts, recent, failures, opens, open_until, probe_until, opened_at)| {
                        (id, $crate::store::BreakerState { attempts, recent, failures, opens, open_until, probe_until, opened_at })
                    })
                    .collect())
            }

            async fn claim_breaker_probe(
                &self,
                endpoint_id: &str,
                now: i64,
                until: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    "UPDATE webhook_breakers SET probe_until = $1, version = version + 1, updated_at = $2 \
                     WHERE endpoint_id = $3 AND open_until IS NOT NULL AND open_until <= $2 \
                     AND (probe_until IS NULL OR probe_until <= $2)",
                )
                .bind(until)
                .bind(now)
                .bind(endpoint_id)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn record_breaker(
                &self,
                endpoint_id: &str,
                success: bool,
                now: i64,
                policy: &$crate::store::BreakerPolicy,
            ) -> Result<$crate::store::BreakerState, $crate::store::StoreError> {
                // Optimistic: read, decide, write if the version is still the one read; a
                // concurrent attempt's write makes this one read again.
                let mut last = $crate::store::BreakerState::default();
                for _ in 0..10 {
                    let row = breaker_row(self.writer(), endpoint_id).await?;
                    let (before, version) = row.unwrap_or_default();
                    let after = policy.after(&before, success, now);
                    last = after;
                    if row.is_some() && after == before {
                        // A success on a full, clean window: nothing to write.
                        return Ok(after);
                    }
                    let written = if row.is_none() {
                        sqlx::query(
                            "INSERT INTO webhook_breakers (endpoint_id, attempts, recent, failures, opens, open_until, probe_until, opened_at, version, updated_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9) ON CONFLICT (endpoint_id) DO NOTHING",
                        )
                        .bind(endpoint_id)
                        .bind(after.attempts)
                        .bind(after.recent)
                        .bind(after.failures)
                        .bind(after.opens)
                        .bind(after.open_until)
                        .bind(after.probe_until)
                        .bind(after.opened_at)
                        .bind(now)
                        .execute(self.writer())
                        .await?
                    } else {
                        sqlx::query(
                            "UPDATE webhook_breakers SET attempts = $1, recent = $2, failures = $3, opens = $4, open_until = $5, \
                             probe_until = $6, opened_at = $7, version = version + 1, updated_at = $8 WHERE endpoint_id = $9 AND version = $10",
                        )
                        .bind(after.attempts)
                        .bind(after.recent)
                        .bind(after.failures)
                        .bind(after.opens)
                        .bind(after.open_until)
                        .bind(after.probe_until)
                        .bind(after.opened_at)
                        .bind(now)
                        .bind(endpoint_id)
                        .bind(version)
                        .execute(self.writer())
                        .await?
                    };
                    if written.rows_affected() == 1 {
                        return Ok(after);
                    }
                }
                tracing::warn!(endpoint = endpoint_id, "breaker not updated after 10 concurrent changes; this attempt's outcome is not counted");
                Ok(last)
            }

            async fn abandon_delivery(
                &self,
                id: i64,
                reason: &str,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    concat!("UPDATE webhook_deliveries SET status = ", converge_wire::delivery_sql!(Abandoned), ", last_error = $1, next_attempt_at = NULL, \
                     updated_at = $2 WHERE id = $3 AND status = ", converge_wire::delivery_sql!(Pending)),
                )
                .bind(reason)
                .bind(now)
                .bind(id)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn hasten_endpoint_deliveries(
                &self,
                endpoint: &str,
                now: i64,
            ) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    concat!("UPDATE webhook_deliveries SET next_attempt_at = $1, updated_at = $1 \
                     WHERE endpoint_id = $2 AND status = ", converge_wire::delivery_sql!(Pending), " AND next_attempt_at > $1"),
                )
                .bind(now)
                .bind(endpoint)
                .execute(&mut *tx)
                .await?;
                let woken = sqlx::query(
                    concat!("UPDATE jobs SET run_at = $1, updated_at = $1 WHERE kind = 'webhook' AND status = ",
                     converge_wire::job_sql!(Due), " AND run_at > $1 AND payload IN \
                     (SELECT CAST(id AS TEXT) FROM webhook_deliveries WHERE endpoint_id = $2 AND status = ",
                     converge_wire::delivery_sql!(Pending), ")"),
                )
                .bind(now)
                .bind(endpoint)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                Ok(woken)
            }

            async fn redeliver(
                &self,
                ids: &[i64],
                now: i64,
                audit: Option<&$crate::store::AuditEntry>,
            ) -> Result<Vec<i64>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let mut done = Vec::new();
                for id in ids {
                    let moved = sqlx::query(
                        concat!("UPDATE webhook_deliveries SET status = ", converge_wire::delivery_sql!(Pending), ", next_attempt_at = $1, updated_at = $1 \
                         WHERE id = $2 AND status <> ", converge_wire::delivery_sql!(Pending)),
                    )
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if moved == 0 {
                        continue;
                    }
                    let payment_id: Option<String> = sqlx::query_scalar(
                        "SELECT CASE WHEN e.aggregatetype = 'payment' THEN e.aggregateid \
                         ELSE (SELECT r.payment_id FROM refunds r WHERE r.id = e.aggregateid) END \
                         FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.id = $1",
                    )
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
                    sqlx::query(
                        concat!("INSERT INTO jobs (kind, payment_id, refund_id, status, attempts, max_attempts, run_at, \
                         created_at, updated_at, payload) VALUES ('webhook', $1, NULL, ", converge_wire::job_sql!(Due), ", 0, $2, $3, $3, $3, $4)"),
                    )
                    .bind(payment_id)
                    .bind(self.outbox_plan().attempts())
                    .bind(now)
                    .bind(id.to_string())
                    .execute(&mut *tx)
                    .await?;
                    done.push(*id);
                }
                if let Some(a) = audit {
                    append_audit_in(&mut tx, a).await?;
                }
                tx.commit().await?;
                Ok(done)
            }

            async fn endpoint_health(
                &self,
                since: i64,
            ) -> Result<Vec<$crate::store::EndpointHealth>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::EndpointHealth>(
                    "SELECT d.endpoint_id, COUNT(a.id) AS attempts, \
                     CAST(COALESCE(SUM(CASE WHEN a.status_code BETWEEN 200 AND 299 THEN 1 ELSE 0 END), 0) AS BIGINT) AS succeeded, \
                     MAX(CASE WHEN a.error IS NOT NULL THEN a.attempted_at END) AS last_failure_at, \
                     (SELECT a2.error FROM webhook_attempts a2 JOIN webhook_deliveries d2 ON d2.id = a2.delivery_id \
                      WHERE d2.endpoint_id = d.endpoint_id AND a2.error IS NOT NULL ORDER BY a2.id DESC LIMIT 1) AS last_failure \
                     FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id \
                     WHERE a.attempted_at >= $1 GROUP BY d.endpoint_id ORDER BY d.endpoint_id",
                )
                .bind(since)
                .fetch_all(self.reader())
                .await?)
            }

            async fn webhook_backlog(
                &self,
                since: i64,
            ) -> Result<$crate::store::WebhookBacklog, $crate::store::StoreError> {
                let (pending, dead, oldest): (i64, i64, Option<i64>) = sqlx::query_as(
                    concat!("SELECT CAST(COALESCE(SUM(CASE WHEN status = ", converge_wire::delivery_sql!(Pending), " THEN 1 ELSE 0 END), 0) AS BIGINT), \
                     CAST(COALESCE(SUM(CASE WHEN status = ", converge_wire::delivery_sql!(Dead), " THEN 1 ELSE 0 END), 0) AS BIGINT), \
                     MIN(CASE WHEN status = ", converge_wire::delivery_sql!(Pending), " THEN created_at END) \
                     FROM webhook_deliveries WHERE status IN (", converge_wire::delivery_sql!(Pending), ", ", converge_wire::delivery_sql!(Dead), ")"),
                )
                .fetch_one(self.reader())
                .await?;
                let failed: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM webhook_attempts WHERE attempted_at >= $1 AND error IS NOT NULL",
                )
                .bind(since)
                .fetch_one(self.reader())
                .await?;
                Ok($crate::store::WebhookBacklog {
                    pending,
                    dead,
                    oldest_pending_at: oldest,
                    failed_attempts: failed,
                })
            }

            async fn verify_outbox(
                &self,
                cutoff: i64,
                since_ms: i64,
                clock_only: bool,
            ) -> Result<$crate::store::OutboxFacts, $crate::store::StoreError> {
                let mut conn = self.reader().acquire().await?;
                let r = &mut *conn;
                // The counts in one round trip: verify runs after every step of the
                // simulator (issue 39), where round trips, not rows, are the cost.
                let counts: (Option<i64>, i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(concat!(
                    "SELECT (SELECT at FROM schema_marks WHERE name = 'outbox'), \
                     (SELECT COUNT(*) FROM events), \
                     (SELECT COUNT(*) FROM webhook_deliveries), \
                     (SELECT CAST(COALESCE(SUM(CASE WHEN status = ", converge_wire::delivery_sql!(Succeeded), " THEN 1 ELSE 0 END), 0) AS BIGINT) \
                      FROM webhook_deliveries), \
                     (SELECT CAST(COALESCE(SUM(CASE WHEN status = ", converge_wire::delivery_sql!(Pending), " THEN 1 ELSE 0 END), 0) AS BIGINT) \
                      FROM webhook_deliveries), \
                     (SELECT COUNT(*) FROM relay_leases), \
                     (SELECT COUNT(*) FROM event_publications WHERE refused IS NULL), \
                     (SELECT CAST(COALESCE(SUM(CASE WHEN duplicate THEN 1 ELSE 0 END), 0) AS BIGINT) \
                      FROM event_publications WHERE refused IS NULL)",
                ))
                .fetch_one(&mut *r)
                .await?;
                let (mark, events, deliveries) = (counts.0.unwrap_or(0), counts.1, (counts.2, counts.3));
                let pending_deliveries = counts.4;
                let (stream_configured, published) = (counts.5 > 0, (counts.6, counts.7));
                let (payments_without_event, refunds_without_event) = if clock_only {
                    (Vec::new(), Vec::new())
                } else {
                    verify_outbox_outcomes(r, mark.max(since_ms)).await?
                };
                let (undelivered, missing_deliveries) = verify_outbox_deliveries(r, cutoff).await?;
                let unpublished = verify_outbox_unpublished(r, stream_configured, cutoff).await?;
                let pending_drift = if clock_only {
                    Vec::new()
                } else {
                    verify_outbox_drift(r).await?
                };
                Ok($crate::store::OutboxFacts {
                    pending_drift,
                    stream_configured,
                    published,
                    unpublished,
                    events,
                    deliveries,
                    pending_deliveries,
                    payments_without_event,
                    refunds_without_event,
                    undelivered,
                    missing_deliveries,
                })
            }

            async fn acquire_relay_lease(
                &self,
                name: &str,
                owner: &str,
                token: &str,
                now: i64,
                expires_at: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    "INSERT INTO relay_leases (name, owner, token, expires_at, connected, heartbeat_at) \
                     VALUES ($1, $2, $3, $4, FALSE, $5) ON CONFLICT (name) DO UPDATE \
                     SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at, \
                     heartbeat_at = excluded.heartbeat_at \
                     WHERE relay_leases.expires_at <= $5 OR relay_leases.owner = $2",
                )
                .bind(name)
                .bind(owner)
                .bind(token)
                .bind(expires_at)
                .bind(now)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn relay_heartbeat(
                &self,
                name: &str,
                token: &str,
                connected: bool,
                last_error: Option<&str>,
                now: i64,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query(
                    "UPDATE relay_leases SET connected = $1, last_error = $2, heartbeat_at = $3 \
                     WHERE name = $4 AND token = $5",
                )
                .bind(connected)
                .bind(last_error)
                .bind(now)
                .bind(name)
                .bind(token)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn unpublished_events(
                &self,
                limit: i64,
            ) -> Result<Vec<$crate::store::OutboxEvent>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::OutboxEvent>(
                    // outbox_pending holds exactly the events without a publication (migration
                    // 0115), so the batch reads the backlog, not every retained event.
                    "SELECT e.seq, e.id, e.merchant_id, e.aggregatetype, e.aggregateid, e.type, e.payload, e.created_at \
                     FROM outbox_pending o JOIN events e ON e.id = o.event_id \
                     ORDER BY o.seq LIMIT $1",
                )
                .bind(limit)
                .fetch_all(self.reader())
                .await?)
            }

            async fn record_publications(
                &self,
                name: &str,
                token: &str,
                pubs: &[$crate::store::Publication],
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                // Locks the lease row until commit, so a relay that takes the lease over waits
                // for these marks and never re-reads an event as unpublished after them.
                let held = sqlx::query(
                    "UPDATE relay_leases SET heartbeat_at = $1 WHERE name = $2 AND token = $3",
                )
                .bind(now)
                .bind(name)
                .bind(token)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if held == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                for p in pubs {
                    sqlx::query(
                        "INSERT INTO event_publications (event_id, stream_seq, duplicate, refused, published_at) \
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (event_id) DO NOTHING",
                    )
                    .bind(&p.event_id)
                    .bind(p.stream_seq)
                    .bind(p.duplicate)
                    .bind(p.refused.as_deref())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(true)
            }

            async fn replay_refused_event(
                &self,
                event_id: &str,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let gone = sqlx::query(
                    "DELETE FROM event_publications WHERE event_id = $1 AND refused IS NOT NULL",
                )
                .bind(event_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if gone == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn relay_status(
                &self,
                name: &str,
                now: i64,
            ) -> Result<$crate::store::RelayStatus, $crate::store::StoreError> {
                let r = self.reader();
                let lease: Option<(i64, bool, Option<String>, i64)> = sqlx::query_as(
                    "SELECT expires_at, connected, last_error, heartbeat_at FROM relay_leases WHERE name = $1",
                )
                .bind(name)
                .fetch_optional(r)
                .await?;
                let (backlog, oldest): (i64, Option<i64>) = sqlx::query_as(
                    "SELECT COUNT(*), MIN(created_at) FROM outbox_pending",
                )
                .fetch_one(r)
                .await?;
                let refused: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM event_publications WHERE refused IS NOT NULL",
                )
                .fetch_one(r)
                .await?;
                Ok(match lease {
                    Some((expires_at, connected, last_error, heartbeat_at)) => $crate::store::RelayStatus {
                        configured: true,
                        running: expires_at > now,
                        connected: connected && expires_at > now,
                        last_error,
                        heartbeat_at: Some(heartbeat_at),
                        backlog,
                        oldest_unpublished_at: oldest,
                        refused,
                    },
                    None => $crate::store::RelayStatus {
                        backlog,
                        oldest_unpublished_at: oldest,
                        refused,
                        ..Default::default()
                    },
                })
            }

            async fn purge_published_events(&self, before: i64) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let gone = concat!("SELECT e.id FROM events e JOIN event_publications p ON p.event_id = e.id \
                     WHERE e.created_at < $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d \
                     WHERE d.event_id = e.id AND d.status IN (", converge_wire::delivery_sql!(Pending), ", ", converge_wire::delivery_sql!(Dead), "))");
                sqlx::query(&format!(
                    "DELETE FROM webhook_attempts WHERE delivery_id IN \
                     (SELECT id FROM webhook_deliveries WHERE event_id IN ({gone}))"
                ))
                .bind(before)
                .execute(&mut *tx)
                .await?;
                sqlx::query(&format!("DELETE FROM webhook_deliveries WHERE event_id IN ({gone})"))
                    .bind(before)
                    .execute(&mut *tx)
                    .await?;
                // The events go before their publications (the subquery reads those).
                let ids: Vec<String> = sqlx::query_scalar(gone).bind(before).fetch_all(&mut *tx).await?;
                for id in &ids {
                    sqlx::query("DELETE FROM event_publications WHERE event_id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query("DELETE FROM events WHERE id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
                if !ids.is_empty() {
                    sqlx::query("UPDATE schema_marks SET at = $1 WHERE name = 'outbox' AND at < $1")
                        .bind(before)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(ids.len() as u64)
            }

            async fn publications(
                &self,
            ) -> Result<Vec<(String, Option<i64>, bool)>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, (String, Option<i64>, bool)>(
                    "SELECT event_id, stream_seq, duplicate FROM event_publications ORDER BY published_at, event_id",
                )
                .fetch_all(self.reader())
                .await?)
            }
        }
    };
}

/// Columns of `webhook_endpoints` in [`WebhookEndpoint`](super::WebhookEndpoint) order.
pub(crate) const ENDPOINT_COLUMNS: &str = "id, merchant_id, url, description, enabled_events, secret, \
     previous_secret, previous_expires_at, status, disabled_reason, failing_since, created_at, updated_at";

/// Columns of `events` in [`OutboxEvent`](super::OutboxEvent) order.
pub(crate) const EVENT_COLUMNS: &str =
    "seq, id, merchant_id, aggregatetype, aggregateid, type, payload, created_at";

/// A delivery joined with its event and endpoint, in [`DeliveryRow`](super::DeliveryRow) order.
pub(crate) const DELIVERY_SELECT: &str = "SELECT d.id, d.event_id, e.type AS event_type, e.aggregateid, \
     d.endpoint_id, w.url, w.merchant_id, d.status, d.attempts, d.next_attempt_at, d.last_status, d.last_error, \
     d.created_at, d.updated_at, d.delivered_at \
     FROM webhook_deliveries d JOIN events e ON e.id = d.event_id JOIN webhook_endpoints w ON w.id = d.endpoint_id";
