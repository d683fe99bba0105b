//! The SQL both backends share. SQLite and PostgreSQL agree on `$N` parameters,
//! `ON CONFLICT ... DO NOTHING`, `RETURNING` and partial unique indexes, so one text serves
//! both; each backend supplies `reader()`, `writer()` and `begin_write()` (SQLite starts write
//! transactions with `BEGIN IMMEDIATE` so a read-then-write transaction never fails to
//! upgrade), and `impl_store!` writes the [`Store`](super::Store) impl around them. The
//! Idempotency-Key SQL is in `keys_sql.rs`.

/// Columns of `payments` in [`PaymentRow`](super::records::PaymentRow) order.
pub(crate) const PAYMENT_COLUMNS: &str = "id, merchant_id, merchant_order_id, amount, currency, description, \
     params_hash, status, version, channel_key, submit_attempts, refunded_amount, last_error, created_at, updated_at, reversal_id";

/// How one transition inside a transaction went (`apply_step`).
pub(crate) enum Step {
    /// Applied: the payment after it.
    Applied(super::Payment),
    /// The (payment, event id) was recorded before.
    Duplicate,
    /// The payment is no longer at (from, version).
    Stale,
}

/// The state-machine row a transition applies ([`check`](crate::domain::state::check)):
/// refused when the triple is not whitelisted. Before any write, the caller's ledger lines and
/// follow-up job are checked against the row's effects (paired with the service, which builds
/// them from the same row): a mismatch is a caller's bug, reported as corrupt, never written.
pub(crate) fn rule_for(
    t: &super::Transition,
) -> Result<
    Result<&'static crate::domain::state::Rule, crate::domain::state::TransitionError>,
    super::StoreError,
> {
    let rule = match crate::domain::state::check(t.from, t.event, t.to) {
        Ok(rule) => rule,
        Err(refused) => return Ok(Err(refused)),
    };
    let follow_up: Vec<_> = t.enqueue.iter().map(|j| j.kind).collect();
    let expected: Vec<_> = rule.effects.follow_up.iter().map(|f| f.kind).collect();
    if t.posting.is_some() != rule.effects.ledger.is_some() || follow_up != expected {
        return Err(super::StoreError::Corrupt(format!(
            "{} --{}--> {} of payment {} does not carry its row's effects (ledger {:?}, follow-up {:?}; given {}, {:?})",
            t.from,
            t.event,
            t.to,
            t.payment_id,
            rule.effects.ledger,
            expected,
            if t.posting.is_some() {
                "lines"
            } else {
                "no lines"
            },
            follow_up
        )));
    }
    Ok(Ok(rule))
}

macro_rules! impl_store {
    ($store:ty, $backend:expr) => {
        async fn insert_merchant(
            tx: &mut sqlx::Transaction<'static, Db>,
            name: &str,
            key: &$crate::store::NewMerchantKey,
        ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
            let m: $crate::store::Merchant = sqlx::query_as::<_, $crate::store::DbMerchant>(
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

        async fn insert_merchant_key(
            tx: &mut sqlx::Transaction<'static, Db>,
            merchant_id: i64,
            key: &$crate::store::NewMerchantKey,
        ) -> Result<$crate::store::MerchantKey, $crate::store::StoreError> {
            Ok(sqlx::query_as::<_, $crate::store::DbMerchantKey>(
                "INSERT INTO merchant_keys (id, merchant_id, prefix, key_hash, created_at) VALUES ($1, $2, $3, $4, $5) \
                 RETURNING id, merchant_id, prefix, created_at, last_used_at, revoked_at",
            )
            .bind(&key.id)
            .bind(merchant_id)
            .bind(&key.prefix)
            .bind(&key.key_hash)
            .bind(key.now)
            .fetch_one(&mut **tx)
            .await?
            .into())
        }

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> $crate::store::Backend {
                $backend
            }

            async fn ping(&self) -> Result<(), $crate::store::StoreError> {
                sqlx::query("SELECT 1").execute(self.reader()).await.map_err($crate::store::StoreError::Unavailable)?;
                Ok(())
            }

            async fn close(&self) {
                self.close_pools().await;
            }

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
                    sqlx::query_as::<_, $crate::store::DbMerchantKey>(
                        "SELECT id, merchant_id, prefix, created_at, last_used_at, revoked_at FROM merchant_keys \
                         WHERE merchant_id = $1 ORDER BY created_at, id",
                    )
                    .bind(merchant_id)
                    .fetch_all(self.reader())
                    .await?
                    .into_iter()
                    .map(Into::into)
                    .collect(),
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
                Ok(sqlx::query_as::<_, $crate::store::DbMerchant>(
                    "SELECT m.id, m.name, m.frozen, m.created_at FROM merchant_keys k \
                     JOIN merchants m ON m.id = k.merchant_id \
                     WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
                )
                .bind(api_key_hash)
                .fetch_optional(self.reader())
                .await?
                .map(Into::into))
            }

            async fn merchant(&self, id: i64) -> Result<Option<$crate::store::Merchant>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::DbMerchant>(
                    "SELECT id, name, frozen, created_at FROM merchants WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(self.reader())
                .await?
                .map(Into::into))
            }

            async fn set_merchant_frozen(&self, name: &str, frozen: bool) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query("UPDATE merchants SET frozen = $1 WHERE name = $2")
                    .bind(frozen)
                    .bind(name)
                    .execute(self.writer())
                    .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn create_payment(
                &self,
                n: &$crate::store::NewPayment,
            ) -> Result<$crate::store::CreatePayment, $crate::store::StoreError> {
                use $crate::store::CreatePayment;
                let mut tx = self.begin_write().await?;
                let created = insert_payment(&mut tx, n).await?;
                if let (CreatePayment::Created(_), Some(k)) = (&created, &n.recovery_key) {
                    // A lost lease leaves the key as it is (`NewPayment::recovery_key`).
                    set_key_resource_in(&mut *tx, k, &n.id).await?;
                }
                tx.commit().await?;
                Ok(created)
            }

            async fn open_payment(
                &self,
                o: &$crate::store::OpenPayment,
            ) -> Result<$crate::store::OpenedPayment, $crate::store::StoreError> {
                use $crate::idempotency::store::ClaimResult;
                use $crate::store::{CreatePayment, OpenedPayment};
                use $crate::store::keys_sql::ClaimStep;
                use $crate::store::shared::Step;
                let n = &o.payment;
                let submit = match &o.submit {
                    Some(t) => match $crate::store::shared::rule_for(t)? {
                        Ok(rule) => Some((t, rule)),
                        Err(refused) => {
                            return Err($crate::store::StoreError::Corrupt(format!("store refused {refused}")));
                        }
                    },
                    None => None,
                };
                let mut tx = self.begin_write().await?;
                // The recovery point goes in with the claim: the payment below is inserted in
                // the same transaction, and unset again when its merchant_order_id is taken.
                match claim_in_tx(&mut tx, &o.claim, Some(&n.id)).await? {
                    ClaimStep::Inserted => {}
                    ClaimStep::TakenOver(resource_id) => {
                        tx.commit().await?;
                        return Ok(OpenedPayment::Key(ClaimResult::Claimed { resource_id }));
                    }
                    ClaimStep::Existing(rec) => {
                        tx.commit().await?;
                        return Ok(OpenedPayment::Key(ClaimResult::Existing(rec)));
                    }
                }
                let mut created = match insert_payment(&mut tx, n).await? {
                    CreatePayment::Created(p) => p,
                    CreatePayment::Existing(p) => {
                        clear_key_resource_in(&mut tx, o.claim.merchant_id, &o.claim.idem_key).await?;
                        tx.commit().await?;
                        return Ok(OpenedPayment::Existing(p));
                    }
                };
                if let Some((t, rule)) = submit {
                    match apply_step(&mut tx, &self.webhook_plan, t, rule).await? {
                        Step::Applied(p) => created = p,
                        Step::Duplicate | Step::Stale => {
                            tx.rollback().await?;
                            return Err($crate::store::StoreError::Corrupt(format!(
                                "the submit transition of new payment {} did not follow its insert",
                                n.id
                            )));
                        }
                    }
                }
                tx.commit().await?;
                Ok(OpenedPayment::Created(created))
            }

            async fn payment(&self, id: &str) -> Result<Option<$crate::store::Payment>, $crate::store::StoreError> {
                let row = sqlx::query_as::<_, $crate::store::PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE id = $1",
                    $crate::store::shared::PAYMENT_COLUMNS
                ))
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
                row.map($crate::store::Payment::try_from).transpose()
            }

            async fn payment_by_channel_key(
                &self,
                channel_key: &str,
            ) -> Result<Option<$crate::store::Payment>, $crate::store::StoreError> {
                let row = sqlx::query_as::<_, $crate::store::PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE channel_key = $1",
                    $crate::store::shared::PAYMENT_COLUMNS
                ))
                .bind(channel_key)
                .fetch_optional(self.reader())
                .await?;
                row.map($crate::store::Payment::try_from).transpose()
            }

            async fn apply_transition(
                &self,
                t: &$crate::store::Transition,
            ) -> Result<$crate::store::TransitionResult, $crate::store::StoreError> {
                Ok(self.apply_transitions(std::slice::from_ref(t), None).await?.result)
            }

            async fn apply_transitions(
                &self,
                steps: &[$crate::store::Transition],
                completion: Option<&$crate::idempotency::store::KeyCompletion<'_>>,
            ) -> Result<$crate::store::TransitionsResult, $crate::store::StoreError> {
                use $crate::store::{TransitionResult, TransitionsResult};
                use $crate::store::shared::Step;
                let written = |result| TransitionsResult { result, stored: None };
                let Some(first) = steps.first() else {
                    return Err($crate::store::StoreError::Corrupt("no transition to apply".into()));
                };
                // Whoever the caller is (request, worker, ops action), only a whitelisted
                // (from, event) -> to is ever written (DESIGN.md "Payment state machine"); the
                // store is the last place a caller's slip can be stopped before it is history.
                let mut rules = Vec::with_capacity(steps.len());
                for (i, t) in steps.iter().enumerate() {
                    match $crate::store::shared::rule_for(t)? {
                        Ok(rule) => rules.push(rule),
                        Err(refused) => return Ok(written(TransitionResult::Refused(refused))),
                    }
                    // A batch is one payment's chain: each step starts where the last ended.
                    if i > 0 {
                        let prev = &steps[i - 1];
                        if t.payment_id != prev.payment_id || t.from != prev.to || t.version != prev.version + 1 {
                            return Err($crate::store::StoreError::Corrupt(format!(
                                "transition {} of payment {} does not follow the one before it",
                                t.event, t.payment_id
                            )));
                        }
                    }
                }
                let mut tx = self.begin_write().await?;
                let mut after = None;
                for (t, rule) in steps.iter().zip(rules) {
                    match apply_step(&mut tx, &self.webhook_plan, t, rule).await? {
                        Step::Applied(p) => after = Some(p),
                        Step::Duplicate => {
                            tx.rollback().await?;
                            return Ok(written(TransitionResult::DuplicateEvent));
                        }
                        Step::Stale => {
                            tx.rollback().await?;
                            let current = self.payment(&first.payment_id).await?.ok_or_else(|| {
                                $crate::store::StoreError::Corrupt(format!("payment {} vanished", first.payment_id))
                            })?;
                            return Ok(written(TransitionResult::Stale(current)));
                        }
                    }
                }
                let Some(after) = after else {
                    return Err($crate::store::StoreError::Corrupt("no transition applied".into()));
                };
                let mut stored = None;
                if let Some(c) = completion {
                    let resp = (c.render)(&after);
                    if complete_key_in(&mut *tx, c.key, &resp).await? {
                        stored = Some(resp);
                    }
                }
                tx.commit().await?;
                Ok(TransitionsResult { result: TransitionResult::Applied(after), stored })
            }

            async fn record_ignored_event(&self, e: &$crate::store::IgnoredEvent) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    "INSERT INTO payment_events (payment_id, event_id, event, from_status, to_status, applied, \
                     source, detail, created_at, trace_id) VALUES ($1, $2, $3, $4, NULL, FALSE, $5, $6, $7, $8) \
                     ON CONFLICT (payment_id, event_id) DO NOTHING",
                )
                .bind(&e.payment_id)
                .bind(&e.event_id)
                .bind(e.event.as_str())
                .bind(e.from.as_str())
                .bind(&e.source)
                .bind(&e.detail)
                .bind(e.now)
                .bind($crate::telemetry::current_trace())
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn payment_events(
                &self,
                payment_id: &str,
            ) -> Result<Vec<$crate::store::EventRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::EventRecord>(
                    "SELECT event_id, event, from_status, to_status, applied, source, detail, created_at, trace_id \
                     FROM payment_events WHERE payment_id = $1 ORDER BY id",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn payment_jobs(&self, payment_id: &str) -> Result<Vec<$crate::store::Job>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Job>(
                    "SELECT id, kind, payment_id, refund_id, status, attempts, max_attempts, run_at, last_error \
                     FROM jobs WHERE payment_id = $1 ORDER BY id",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn create_refund(
                &self,
                n: &$crate::store::NewRefund,
            ) -> Result<$crate::store::CreateRefund, $crate::store::StoreError> {
                use $crate::store::{CreateRefund, Payment, PaymentRow, Refund};
                let mut tx = self.begin_write().await?;
                let reserved = sqlx::query(
                    "UPDATE payments SET refunded_amount = refunded_amount + $1, version = version + 1, updated_at = $2 \
                     WHERE id = $3 AND status = 'SUCCESS' AND refunded_amount + $1 <= amount AND reversal_id IS NULL",
                )
                .bind(n.amount)
                .bind(n.now)
                .bind(&n.payment_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if reserved == 0 {
                    let row = sqlx::query_as::<_, PaymentRow>(&format!(
                        "SELECT {} FROM payments WHERE id = $1",
                        $crate::store::shared::PAYMENT_COLUMNS
                    ))
                    .bind(&n.payment_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    tx.rollback().await?;
                    return Ok(match row.map(Payment::try_from).transpose()? {
                        None => CreateRefund::NoPayment,
                        Some(p) if p.status != $crate::domain::state::PaymentStatus::Success => {
                            CreateRefund::NotRefundable(p.status)
                        }
                        Some(p) if p.reversal_id.is_some() => CreateRefund::Reversing,
                        Some(p) => CreateRefund::ExceedsRemaining { remaining: p.amount - p.refunded_amount },
                    });
                }
                let refund = sqlx::query_as::<_, Refund>(
                    "INSERT INTO refunds (id, payment_id, amount, reason, status, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, 'pending', $5, $5) \
                     RETURNING id, payment_id, amount, reason, status, last_error, created_at, updated_at",
                )
                .bind(&n.id)
                .bind(&n.payment_id)
                .bind(n.amount)
                .bind(&n.reason)
                .bind(n.now)
                .fetch_one(&mut *tx)
                .await?;
                insert_job(
                    &mut tx,
                    &$crate::store::NewJob {
                        kind: $crate::store::JobKind::Refund,
                        payment_id: Some(n.payment_id.clone()),
                        refund_id: Some(n.id.clone()),
                        run_at: n.job_due_at,
                        max_attempts: n.max_attempts,
                    },
                    n.now,
                )
                .await?;
                tx.commit().await?;
                Ok(CreateRefund::Created(refund))
            }

            async fn refund(&self, id: &str) -> Result<Option<$crate::store::Refund>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Refund>(
                    "SELECT id, payment_id, amount, reason, status, last_error, created_at, updated_at \
                     FROM refunds WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn pending_refund_count(&self, payment_id: &str) -> Result<i64, $crate::store::StoreError> {
                Ok(sqlx::query_scalar::<_, i64>(
                    "SELECT COUNT(*) FROM refunds WHERE payment_id = $1 AND status = 'pending'",
                )
                .bind(payment_id)
                .fetch_one(self.reader())
                .await?)
            }

            async fn refund_succeeded(
                &self,
                id: &str,
                posting: &$crate::store::LedgerPosting,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let payment_id: Option<String> = sqlx::query_scalar(
                    "UPDATE refunds SET status = 'succeeded', updated_at = $1 WHERE id = $2 AND status = 'pending' \
                     RETURNING payment_id",
                )
                .bind(now)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(payment_id) = payment_id else {
                    tx.rollback().await?;
                    return Ok(false);
                };
                insert_posting(&mut tx, &payment_id, posting, now).await?;
                sqlx::query(
                    "UPDATE jobs SET status = 'done', updated_at = $1 WHERE refund_id = $2 AND status = 'due'",
                )
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                refund_event(&mut tx, &self.webhook_plan, id, $crate::domain::webhooks::EventType::RefundSucceeded, now).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn refund_failed(&self, id: &str, error: &str, now: i64) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let row: Option<(String, i64)> = sqlx::query_as(
                    "UPDATE refunds SET status = 'failed', last_error = $1, updated_at = $2 \
                     WHERE id = $3 AND status = 'pending' RETURNING payment_id, amount",
                )
                .bind(error)
                .bind(now)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some((payment_id, amount)) = row else {
                    tx.rollback().await?;
                    return Ok(false);
                };
                sqlx::query(
                    "UPDATE payments SET refunded_amount = refunded_amount - $1, version = version + 1, updated_at = $2 \
                     WHERE id = $3",
                )
                .bind(amount)
                .bind(now)
                .bind(&payment_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE jobs SET status = 'done', updated_at = $1 WHERE refund_id = $2 AND status = 'due'",
                )
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                refund_event(&mut tx, &self.webhook_plan, id, $crate::domain::webhooks::EventType::RefundFailed, now).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn reserve_reversal(
                &self,
                r: &$crate::store::ReserveReversal,
            ) -> Result<$crate::store::ReversalReservation, $crate::store::StoreError> {
                use $crate::store::{Payment, PaymentRow, ReversalReservation};
                let mut tx = self.begin_write().await?;
                let reserved = sqlx::query(
                    "UPDATE payments SET reversal_id = $1, version = version + 1, updated_at = $2 \
                     WHERE id = $3 AND version = $4 AND status IN ('SUCCESS', 'SUSPENSE') AND reversal_id IS NULL \
                     AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = $3 AND r.status = 'pending')",
                )
                .bind(&r.action_id)
                .bind(r.now)
                .bind(&r.payment_id)
                .bind(r.pinned_version)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if reserved == 1 {
                    insert_job(&mut tx, &r.job, r.now).await?;
                }
                let row = sqlx::query_as::<_, PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE id = $1",
                    $crate::store::shared::PAYMENT_COLUMNS
                ))
                .bind(&r.payment_id)
                .fetch_optional(&mut *tx)
                .await?;
                let pending_refunds: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM refunds WHERE payment_id = $1 AND status = 'pending'",
                )
                .bind(&r.payment_id)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                let Some(payment) = row.map(Payment::try_from).transpose()? else {
                    return Ok(ReversalReservation::NoPayment);
                };
                Ok(if reserved == 1 {
                    ReversalReservation::Reserved(payment)
                } else if payment.reversal_id.as_deref() == Some(r.action_id.as_str()) {
                    ReversalReservation::AlreadyHeld(payment)
                } else {
                    ReversalReservation::Refused { payment, pending_refunds }
                })
            }

            async fn release_reversal(
                &self,
                payment_id: &str,
                action_id: &str,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let released = sqlx::query(
                    "UPDATE payments SET reversal_id = NULL, version = version + 1, updated_at = $1 \
                     WHERE id = $2 AND reversal_id = $3 AND status IN ('SUCCESS', 'SUSPENSE')",
                )
                .bind(now)
                .bind(payment_id)
                .bind(action_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                sqlx::query(
                    "UPDATE jobs SET status = 'done', updated_at = $1 \
                     WHERE payment_id = $2 AND kind = 'reverse' AND status = 'due'",
                )
                .bind(now)
                .bind(payment_id)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(released == 1)
            }

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
        }

        /// A PENDING payment with its `created` event and submit job, in the caller's
        /// transaction; or, when the merchant_order_id is taken, the payment that has it.
        async fn insert_payment(
            tx: &mut sqlx::Transaction<'static, Db>,
            n: &$crate::store::NewPayment,
        ) -> Result<$crate::store::CreatePayment, $crate::store::StoreError> {
            use $crate::store::{CreatePayment, Payment, PaymentRow};
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, \
                 params_hash, status, version, channel_key, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'PENDING', 1, $8, $9, $9) \
                 ON CONFLICT (merchant_id, merchant_order_id) DO NOTHING RETURNING {}",
                $crate::store::shared::PAYMENT_COLUMNS
            ))
            .bind(&n.id)
            .bind(n.merchant_id)
            .bind(&n.merchant_order_id)
            .bind(n.amount)
            .bind(&n.currency)
            .bind(&n.description)
            .bind(&n.params_hash)
            .bind(&n.channel_key)
            .bind(n.now)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else {
                let row = sqlx::query_as::<_, PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE merchant_id = $1 AND merchant_order_id = $2",
                    $crate::store::shared::PAYMENT_COLUMNS
                ))
                .bind(n.merchant_id)
                .bind(&n.merchant_order_id)
                .fetch_one(&mut **tx)
                .await?;
                return Ok(CreatePayment::Existing(Payment::try_from(row)?));
            };
            sqlx::query(
                "INSERT INTO payment_events (payment_id, event_id, event, from_status, to_status, applied, \
                 source, detail, created_at, trace_id) VALUES ($1, 'created', 'created', 'PENDING', 'PENDING', TRUE, 'api', '', $2, $3)",
            )
            .bind(&n.id)
            .bind(n.now)
            .bind($crate::telemetry::current_trace())
            .execute(&mut **tx)
            .await?;
            insert_job(
                tx,
                &$crate::store::NewJob {
                    kind: $crate::store::JobKind::Submit,
                    payment_id: Some(n.id.clone()),
                    refund_id: None,
                    run_at: n.submit_due_at,
                    max_attempts: n.max_attempts,
                },
                n.now,
            )
            .await?;
            Ok(CreatePayment::Created(Payment::try_from(row)?))
        }

        /// One transition inside the caller's transaction (the body of
        /// [`Store::apply_transition`], after `rule_for`): the event, the conditional update on
        /// (id, status, version), then the row's effects in the order
        /// [`Effects`]($crate::domain::state::Effects) gives, and the outbox row.
        async fn apply_step(
            tx: &mut sqlx::Transaction<'static, Db>,
            plan: &$crate::store::WebhookPlan,
            t: &$crate::store::Transition,
            rule: &'static $crate::domain::state::Rule,
        ) -> Result<$crate::store::shared::Step, $crate::store::StoreError> {
            use $crate::store::{Payment, PaymentRow};
            use $crate::store::shared::Step;
            let recorded = sqlx::query(
                "INSERT INTO payment_events (payment_id, event_id, event, from_status, to_status, applied, \
                 source, detail, created_at, trace_id) VALUES ($1, $2, $3, $4, $5, TRUE, $6, $7, $8, $9) \
                 ON CONFLICT (payment_id, event_id) DO NOTHING",
            )
            .bind(&t.payment_id)
            .bind(&t.event_id)
            .bind(t.event.as_str())
            .bind(t.from.as_str())
            .bind(t.to.as_str())
            .bind(&t.source)
            .bind(&t.detail)
            .bind(t.now)
            .bind($crate::telemetry::current_trace())
            .execute(&mut **tx)
            .await?
            .rows_affected();
            if recorded == 0 {
                return Ok(Step::Duplicate);
            }
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "UPDATE payments SET status = $1, version = version + 1, updated_at = $2, \
                 submit_attempts = submit_attempts + $3, \
                 last_error = CASE WHEN $8 THEN NULL ELSE COALESCE($4, last_error) END \
                 WHERE id = $5 AND status = $6 AND version = $7 RETURNING {}",
                $crate::store::shared::PAYMENT_COLUMNS
            ))
            .bind(t.to.as_str())
            .bind(t.now)
            .bind(i64::from(rule.effects.counts_submit))
            .bind(t.last_error.as_deref())
            .bind(&t.payment_id)
            .bind(t.from.as_str())
            .bind(t.version)
            .bind(rule.effects.clears_error)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else {
                return Ok(Step::Stale);
            };
            let after = Payment::try_from(row)?;
            if let Some(posting) = &t.posting {
                insert_posting(tx, &t.payment_id, posting, t.now).await?;
            }
            let closes = rule.effects.closes;
            if !closes.is_empty() {
                // One statement for every kind the step closes, before its follow-up job is
                // written: a row may close the kind it queues anew (a forced UNKNOWN).
                let kinds: Vec<String> = (0..closes.len()).map(|i| format!("${}", i + 3)).collect();
                let sql = format!(
                    "UPDATE jobs SET status = 'done', updated_at = $1 \
                     WHERE payment_id = $2 AND status = 'due' AND kind IN ({})",
                    kinds.join(", ")
                );
                let mut q = sqlx::query(&sql).bind(t.now).bind(&t.payment_id);
                for kind in closes {
                    q = q.bind(kind.as_str());
                }
                q.execute(&mut **tx).await?;
            }
            for job in &t.enqueue {
                insert_job(tx, job, t.now).await?;
            }
            // The outcome's outbox row commits with the transition or not at all.
            if let Some(event_type) = $crate::domain::webhooks::EventType::for_payment_status(t.to) {
                insert_outbox_event(
                    tx,
                    plan,
                    after.merchant_id,
                    event_type,
                    &after.id,
                    &$crate::store::views::payment_payload(&after),
                    t.now,
                )
                .await?;
            }
            Ok(Step::Applied(after))
        }

        /// The outbox row of a refund's outcome, in the caller's transaction.
        async fn refund_event(
            tx: &mut sqlx::Transaction<'static, Db>,
            plan: &$crate::store::WebhookPlan,
            refund_id: &str,
            event_type: $crate::domain::webhooks::EventType,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            let refund = sqlx::query_as::<_, $crate::store::Refund>(
                "SELECT id, payment_id, amount, reason, status, last_error, created_at, updated_at \
                 FROM refunds WHERE id = $1",
            )
            .bind(refund_id)
            .fetch_one(&mut **tx)
            .await?;
            let merchant_id: i64 = sqlx::query_scalar("SELECT merchant_id FROM payments WHERE id = $1")
                .bind(&refund.payment_id)
                .fetch_one(&mut **tx)
                .await?;
            insert_outbox_event(
                tx,
                plan,
                merchant_id,
                event_type,
                &refund.id,
                &$crate::store::views::refund_payload(&refund),
                now,
            )
            .await
        }

        async fn insert_job(
            tx: &mut sqlx::Transaction<'static, Db>,
            job: &$crate::store::NewJob,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            sqlx::query(
                "INSERT INTO jobs (kind, payment_id, refund_id, status, attempts, max_attempts, run_at, \
                 created_at, updated_at, trace_id) VALUES ($1, $2, $3, 'due', 0, $4, $5, $6, $6, $7)",
            )
            .bind(job.kind.as_str())
            .bind(job.payment_id.as_deref())
            .bind(job.refund_id.as_deref())
            .bind(job.max_attempts)
            .bind(job.run_at)
            .bind(now)
            // The job runs in the trace of the request or job that wrote it (worker).
            .bind($crate::telemetry::current_trace())
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        async fn insert_posting(
            tx: &mut sqlx::Transaction<'static, Db>,
            payment_id: &str,
            posting: &$crate::store::LedgerPosting,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            let batch_id: i64 = sqlx::query_scalar(
                "INSERT INTO ledger_batches (payment_id, refund_id, kind, currency, created_at) \
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
            )
            .bind(payment_id)
            .bind(posting.refund_id.as_deref())
            .bind(posting.kind)
            .bind(&posting.currency)
            .bind(now)
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
    };
}
