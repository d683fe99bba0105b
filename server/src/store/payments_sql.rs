//! The payments' SQL both backends share ([`Payments`](super::Payments); conventions in
//! `backend.rs`): creation with its submit job, and the transitions of the state machine with
//! the effects their row gives. The Idempotency-Key steps a create takes are `keys_sql.rs`'s.

/// Columns of `payments` in [`PaymentRow`](super::records::PaymentRow) order.
pub(crate) const PAYMENT_COLUMNS: &str = "id, merchant_id, merchant_order_id, amount, currency, description, \
     params_hash, status, version, channel_key, submit_attempts, refunded_amount, last_error, created_at, updated_at, reversal_id, connector, \
     capture_mode, captured_amount, released_amount, hold_expires_at, capture_id, capture_amount, capture_last, fee_amount";

/// The WHERE of a transition's UPDATE (`apply_step`, binds $5 id, $6 status read, $7 version
/// read): the compare-and-set on what the caller read, so a writer holding an old read loses.
/// Planted bug 3 (`planted`) compares the id alone.
pub(crate) fn transition_guard() -> &'static str {
    match () {
        #[cfg(feature = "planted-bugs")]
        () if crate::planted::on(crate::planted::Bug::TransitionWithoutVersion) => {
            "id = $5 AND $6 = $6 AND $7 = $7"
        }
        () => "id = $5 AND status = $6 AND version = $7",
    }
}

/// Whether a transition's outcome event is written in its transaction (`apply_step`): always,
/// so it commits with the transition or not at all. Planted bug 6 (`planted`) leaves it to a
/// transaction after the commit.
pub(crate) fn outcome_event_in_transition() -> bool {
    match () {
        #[cfg(feature = "planted-bugs")]
        () if crate::planted::on(crate::planted::Bug::EventOutsideTransition) => {
            !crate::planted::events_deferred()
        }
        () => true,
    }
}

/// How one transition inside a transaction went (`apply_step`).
// Matched once where it is returned: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
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
    let hold = t.hold.as_ref().map(super::HoldWrite::effect);
    if t.posting.is_some() != rule.effects.ledger.is_some()
        || follow_up != expected
        || hold != rule.effects.hold
    {
        return Err(super::StoreError::Corrupt(format!(
            "{} --{}--> {} of payment {} does not carry its row's effects (ledger {:?}, follow-up {:?}, hold {:?}; given {}, {:?}, {:?})",
            t.from,
            t.event,
            t.to,
            t.payment_id,
            rule.effects.ledger,
            expected,
            rule.effects.hold,
            if t.posting.is_some() {
                "lines"
            } else {
                "no lines"
            },
            follow_up,
            hold
        )));
    }
    Ok(Ok(rule))
}

/// The job writes of a batch of transitions applied in one transaction (issue 15, "a create in
/// two atomic phases"): every kind a step closes is closed by one statement, before any
/// follow-up is written, and a follow-up that a later step of the same batch closes is not
/// written at all. A CHANNEL_SUCCESS step's post_ledger job guards against a crash before
/// its posting; when the posting commits with it, that job could only be written and closed
/// in the same commit.
///
/// Equivalent to each step closing and then writing in order, because the batch commits or
/// rolls back as one: a job a step writes is either closed later in the batch (so never
/// written here) or survives, and the closes then reach only the jobs that were there before.
pub(crate) struct BatchJobs<'a> {
    /// The kinds any step closes, each once, in the order first named.
    pub closes: Vec<crate::domain::jobs::JobKind>,
    /// The follow-ups that outlive the batch, with their step's time (epoch ms UTC).
    pub writes: Vec<(&'a super::NewJob, i64)>,
}

/// [`BatchJobs`] for `steps`, whose rows are `rules` (same length, same order).
pub(crate) fn batch_jobs<'a>(
    steps: &'a [super::Transition],
    rules: &[&'static crate::domain::state::Rule],
) -> BatchJobs<'a> {
    debug_assert_eq!(steps.len(), rules.len());
    let mut closes = Vec::new();
    for kind in rules.iter().flat_map(|r| r.effects.closes) {
        if !closes.contains(kind) {
            closes.push(*kind);
        }
    }
    let writes = steps
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            let later = &rules[i + 1..];
            t.enqueue
                .iter()
                .filter(move |job| !later.iter().any(|r| r.effects.closes.contains(&job.kind)))
                .map(move |job| (job, t.now))
        })
        .collect();
    BatchJobs { closes, writes }
}

macro_rules! impl_payments {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Payments for $store {
            async fn create_payment(
                &self,
                n: &$crate::store::NewPayment,
            ) -> Result<$crate::store::CreatePayment, $crate::store::StoreError> {
                use $crate::store::CreatePayment;
                let mut tx = self.begin_write().await?;
                let created = insert_payment(&mut tx, n).await?;
                if matches!(created, CreatePayment::Tombstoned) {
                    tx.rollback().await?;
                    return Ok(created);
                }
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
                use $crate::store::keys::ClaimResult;
                use $crate::store::{CreatePayment, OpenedPayment};
                use $crate::store::keys_sql::ClaimStep;
                use $crate::store::payments_sql::Step;
                let n = &o.payment;
                let submit = match &o.submit {
                    Some(t) => match $crate::store::payments_sql::rule_for(t)? {
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
                    CreatePayment::Tombstoned => {
                        // Nothing of this request stays: not the claim either (the caller
                        // answers 409 and releases a key that is not there).
                        tx.rollback().await?;
                        return Ok(OpenedPayment::Tombstoned);
                    }
                };
                if let Some((t, rule)) = submit {
                    match apply_step(&mut tx, self.outbox_plan(), t, rule).await? {
                        Step::Applied(p) => {
                            let jobs = $crate::store::payments_sql::batch_jobs(std::slice::from_ref(t), &[rule]);
                            write_jobs(&mut tx, &t.payment_id, t.now, &jobs).await?;
                            created = p
                        }
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

            async fn cancel_order(
                &self,
                merchant_id: i64,
                merchant_order_id: &str,
                now: i64,
            ) -> Result<$crate::store::OrderCancel, $crate::store::StoreError> {
                use $crate::store::{OrderCancel, Payment, PaymentRow};
                let mut tx = self.begin_write().await?;
                <$store as $crate::store::backend::SqlBackend>::lock_order(&mut tx, merchant_id, merchant_order_id).await?;
                let row = sqlx::query_as::<_, PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE merchant_id = $1 AND merchant_order_id = $2",
                    $crate::store::payments_sql::PAYMENT_COLUMNS
                ))
                .bind(merchant_id)
                .bind(merchant_order_id)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(row) = row {
                    tx.commit().await?;
                    return Ok(OrderCancel::Payment(Box::new(Payment::try_from(row)?)));
                }
                sqlx::query(
                    "INSERT INTO order_tombstones (merchant_id, merchant_order_id, created_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (merchant_id, merchant_order_id) DO NOTHING",
                )
                .bind(merchant_id)
                .bind(merchant_order_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let since: i64 = sqlx::query_scalar(
                    "SELECT created_at FROM order_tombstones WHERE merchant_id = $1 AND merchant_order_id = $2",
                )
                .bind(merchant_id)
                .bind(merchant_order_id)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(OrderCancel::Tombstoned { since })
            }

            async fn purge_order_tombstones(&self, before: i64) -> Result<u64, $crate::store::StoreError> {
                let r = sqlx::query("DELETE FROM order_tombstones WHERE created_at < $1")
                    .bind(before)
                    .execute(self.writer())
                    .await?;
                Ok(r.rows_affected())
            }

            async fn payment(&self, id: &str) -> Result<Option<$crate::store::Payment>, $crate::store::StoreError> {
                let row = sqlx::query_as::<_, $crate::store::PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE id = $1",
                    $crate::store::payments_sql::PAYMENT_COLUMNS
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
                    $crate::store::payments_sql::PAYMENT_COLUMNS
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
                completion: Option<&$crate::store::keys::KeyCompletion<'_>>,
            ) -> Result<$crate::store::TransitionsResult, $crate::store::StoreError> {
                use $crate::store::{TransitionResult, TransitionsResult};
                use $crate::store::payments_sql::Step;
                let written = |result| TransitionsResult { result, stored: None };
                let Some(first) = steps.first() else {
                    return Err($crate::store::StoreError::Corrupt("no transition to apply".into()));
                };
                // Whoever the caller is (request, worker, ops action), only a whitelisted
                // (from, event) -> to is ever written (DESIGN.md "Payment state machine"); the
                // store is the last place a caller's slip can be stopped before it is history.
                let mut rules = Vec::with_capacity(steps.len());
                for (i, t) in steps.iter().enumerate() {
                    match $crate::store::payments_sql::rule_for(t)? {
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
                let jobs = $crate::store::payments_sql::batch_jobs(steps, &rules);
                let mut tx = self.begin_write().await?;
                let mut after = None;
                for (t, rule) in steps.iter().zip(rules.iter().copied()) {
                    #[cfg(feature = "planted-bugs")]
                    $crate::planted::defer_events(true);
                    let step = apply_step(&mut tx, self.outbox_plan(), t, rule).await;
                    #[cfg(feature = "planted-bugs")]
                    $crate::planted::defer_events(false);
                    match step? {
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
                write_jobs(&mut tx, &first.payment_id, first.now, &jobs).await?;
                let mut stored = None;
                if let Some(c) = completion {
                    let resp = (c.render)(&after);
                    let completed = match () {
                        #[cfg(feature = "planted-bugs")]
                        () if $crate::planted::on($crate::planted::Bug::AnswerAfterCommit) => {
                            planted_key_done_in(&mut *tx, c.key).await?
                        }
                        () => complete_key_in(&mut *tx, c.key, &resp).await?,
                    };
                    if completed {
                        stored = Some(resp);
                    }
                }
                tx.commit().await?;
                #[cfg(feature = "planted-bugs")]
                self.planted_after_commit(steps, &after, completion, stored.as_ref()).await?;
                Ok(TransitionsResult { result: TransitionResult::Applied(after), stored })
            }

            async fn record_ignored_event(&self, e: &$crate::store::IgnoredEvent) -> Result<bool, $crate::store::StoreError> {
                insert_ignored_event(self.writer(), e).await
            }

            async fn payment_captures(
                &self,
                payment_id: &str,
            ) -> Result<Vec<$crate::store::CaptureRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::CaptureRecord>(
                    "SELECT id, payment_id, amount, last, status, reason, source, requested_at, settled_at \
                     FROM payment_captures WHERE payment_id = $1 ORDER BY requested_at, id",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
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
        }

        /// An event recorded as not applied ([`IgnoredEvent`]($crate::store::IgnoredEvent)),
        /// on `db` (the writer, or a transaction); false when (payment, event id) was recorded
        /// before.
        async fn insert_ignored_event<'e, E: sqlx::Executor<'e, Database = $crate::store::backend::DbOf<$store>>>(
            db: E,
            e: &$crate::store::IgnoredEvent,
        ) -> Result<bool, $crate::store::StoreError> {
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
            .execute(db)
            .await?;
            Ok(r.rows_affected() == 1)
        }

        /// A PENDING payment with its `created` event and submit job, in the caller's
        /// transaction; or, when the merchant_order_id is taken, the payment that has it; or,
        /// when it is tombstoned, nothing ([`CreatePayment::Tombstoned`]; the caller rolls
        /// back). The order's lock comes first (`SqlBackend::lock_order`, one statement on
        /// PostgreSQL, none on SQLite), so the insert's own snapshot sees a tombstone any
        /// cancel of the order committed; the tombstone is read by the insert itself (its
        /// `NOT EXISTS`), no statement more.
        async fn insert_payment(
            tx: &mut $crate::store::backend::Tx<$store>,
            n: &$crate::store::NewPayment,
        ) -> Result<$crate::store::CreatePayment, $crate::store::StoreError> {
            use $crate::store::{CreatePayment, Payment, PaymentRow};
            <$store as $crate::store::backend::SqlBackend>::lock_order(tx, n.merchant_id, &n.merchant_order_id).await?;
            // SQLite needs the WHERE for `INSERT ... SELECT ... ON CONFLICT` to parse (the
            // upsert's ON is not a join's); the NOT EXISTS is it.
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, \
                 params_hash, status, version, channel_key, created_at, updated_at, connector, capture_mode) \
                 SELECT $1, $2, $3, $4, $5, $6, $7, 'PENDING', 1, $8, $9, $9, $10, $11 \
                 WHERE NOT EXISTS (SELECT 1 FROM order_tombstones t WHERE t.merchant_id = $2 AND t.merchant_order_id = $3) \
                 ON CONFLICT (merchant_id, merchant_order_id) DO NOTHING RETURNING {}",
                $crate::store::payments_sql::PAYMENT_COLUMNS
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
            .bind(&n.connector)
            .bind(n.capture_mode.as_str())
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else {
                // Not inserted: the order is taken (its payment) or tombstoned (none).
                let row = sqlx::query_as::<_, PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE merchant_id = $1 AND merchant_order_id = $2",
                    $crate::store::payments_sql::PAYMENT_COLUMNS
                ))
                .bind(n.merchant_id)
                .bind(&n.merchant_order_id)
                .fetch_optional(&mut **tx)
                .await?;
                return Ok(match row {
                    Some(row) => CreatePayment::Existing(Payment::try_from(row)?),
                    None => CreatePayment::Tombstoned,
                });
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
        /// [`Payments::apply_transition`](crate::store::Payments::apply_transition), after
        /// `rule_for`): the event, the conditional update on (id, status, version), the
        /// row's ledger batch and the outbox row. Its jobs are the batch's
        /// ([`write_jobs`], after every step).
        async fn apply_step(
            tx: &mut $crate::store::backend::Tx<$store>,
            plan: &$crate::store::WebhookPlan,
            t: &$crate::store::Transition,
            rule: &'static $crate::domain::state::Rule,
        ) -> Result<$crate::store::payments_sql::Step, $crate::store::StoreError> {
            use $crate::store::{Payment, PaymentRow};
            use $crate::store::payments_sql::Step;
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
            let guard = $crate::store::payments_sql::transition_guard();
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "UPDATE payments SET status = $1, version = version + 1, updated_at = $2, \
                 submit_attempts = submit_attempts + $3, \
                 last_error = CASE WHEN $8 THEN NULL ELSE COALESCE($4, last_error) END \
                 WHERE {guard} RETURNING {}",
                $crate::store::payments_sql::PAYMENT_COLUMNS
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
            let mut after = Payment::try_from(row)?;
            if let Some(hold) = &t.hold {
                after = write_hold(tx, &after, t, hold).await?;
            }
            if let Some(posting) = &t.posting {
                insert_posting(tx, &t.payment_id, posting, t.now).await?;
                after.fee += insert_fee(tx, &t.payment_id, after.merchant_id, posting, t.now).await?;
            }
            // Told once per capture, with its amount.
            if let Some($crate::store::HoldWrite::Capture { id, amount, .. }) = &t.hold {
                insert_outbox_event(
                    tx,
                    plan,
                    after.merchant_id,
                    $crate::domain::webhooks::EventType::PaymentCaptured,
                    &after.id,
                    id,
                    &$crate::store::views::capture_payload(&after, id, *amount),
                    t.now,
                )
                .await?;
            }
            if let Some(event_type) = $crate::domain::webhooks::EventType::for_payment_status(t.to)
                && $crate::store::payments_sql::outcome_event_in_transition()
            {
                insert_outbox_event(
                    tx,
                    plan,
                    after.merchant_id,
                    event_type,
                    &after.id,
                    "",
                    &$crate::store::views::payment_payload(&after),
                    t.now,
                )
                .await?;
            }
            if let Some(item) = rule.effects.suspense_item {
                write_suspense_item(tx, &after, t, item).await?;
            }
            Ok(Step::Applied(after))
        }

        /// A step's [`HoldWrite`]($crate::store::HoldWrite), in its transaction: the payment's
        /// hold figures and its capture's record. Returns the payment after it. A write that
        /// names another capture than the pending one, or leaves more captured and released
        /// than was authorized, is corrupt (the transaction rolls back).
        async fn write_hold(
            tx: &mut $crate::store::backend::Tx<$store>,
            before: &$crate::store::Payment,
            t: &$crate::store::Transition,
            hold: &$crate::store::HoldWrite,
        ) -> Result<$crate::store::Payment, $crate::store::StoreError> {
            use $crate::store::{HoldWrite, Payment, PaymentRow, StoreError};
            let cols = $crate::store::payments_sql::PAYMENT_COLUMNS;
            let pending = before.hold.as_ref().and_then(|h| h.pending_capture.clone());
            let names_pending = |id: &str| pending.as_ref().is_some_and(|c| c.id == id);
            // (captured +, released +, the pending capture's new record status and reason)
            let (captured, released, settles) = match hold {
                HoldWrite::Authorize { expires_at } => {
                    let row = sqlx::query_as::<_, PaymentRow>(&format!(
                        "UPDATE payments SET hold_expires_at = $1 WHERE id = $2 RETURNING {cols}"
                    ))
                    .bind(expires_at)
                    .bind(&before.id)
                    .fetch_one(&mut **tx)
                    .await?;
                    return Payment::try_from(row);
                }
                HoldWrite::BeginCapture { id, amount, last } => {
                    return begin_capture(tx, before, t, id, *amount, *last).await;
                }
                HoldWrite::Capture { id, amount, released } => {
                    if !names_pending(id) || pending.as_ref().is_some_and(|c| c.amount != *amount) {
                        return Err(StoreError::Corrupt(format!(
                            "capture {id} of {amount} is not payment {}'s pending capture",
                            before.id
                        )));
                    }
                    (*amount, *released, Some((converge_wire::CaptureStatus::Captured, None)))
                }
                HoldWrite::RefuseCapture { id, reason } => {
                    if !names_pending(id) {
                        return Err(StoreError::Corrupt(format!(
                            "refused capture {id} is not payment {}'s pending capture",
                            before.id
                        )));
                    }
                    (0, 0, Some((converge_wire::CaptureStatus::Refused, Some(reason.as_str()))))
                }
                HoldWrite::Release { amount, reason } => (
                    0,
                    *amount,
                    pending
                        .is_some()
                        .then_some((converge_wire::CaptureStatus::Refused, Some(reason.as_str()))),
                ),
            };
            if let (Some((status, reason)), Some(c)) = (settles, &pending) {
                settle_capture(tx, &c.id, status, reason, t.now).await?;
            }
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "UPDATE payments SET captured_amount = captured_amount + $1, \
                 released_amount = released_amount + $2, capture_id = NULL, capture_amount = NULL, \
                 capture_last = NULL WHERE id = $3 RETURNING {cols}"
            ))
            .bind(captured)
            .bind(released)
            .bind(&before.id)
            .fetch_one(&mut **tx)
            .await?;
            let after = Payment::try_from(row)?;
            let h = after.hold.as_ref();
            if h.is_none_or(|h| h.captured + h.released > after.amount || h.released < 0) {
                return Err(StoreError::Corrupt(format!(
                    "payment {} would capture and release more than its {} authorized",
                    after.id, after.amount
                )));
            }
            Ok(after)
        }

        /// `HoldWrite::BeginCapture`: the capture's record and the payment's pending capture,
        /// refused as corrupt when one is pending already or the amount is not held.
        async fn begin_capture(
            tx: &mut $crate::store::backend::Tx<$store>,
            before: &$crate::store::Payment,
            t: &$crate::store::Transition,
            id: &str,
            amount: i64,
            last: bool,
        ) -> Result<$crate::store::Payment, $crate::store::StoreError> {
            use $crate::store::{Payment, PaymentRow, StoreError};
            let cols = $crate::store::payments_sql::PAYMENT_COLUMNS;
            let pending = before.hold.as_ref().and_then(|h| h.pending_capture.as_ref());
            if pending.is_some() || amount <= 0 || amount > before.held_amount() {
                return Err(StoreError::Corrupt(format!(
                    "capture {id} of {amount} on payment {} holding {}",
                    before.id,
                    before.held_amount()
                )));
            }
            sqlx::query(concat!(
                "INSERT INTO payment_captures (id, payment_id, amount, last, status, source, requested_at) \
                 VALUES ($1, $2, $3, $4, ", converge_wire::capture_sql!(Pending), ", $5, $6)"
            ))
            .bind(id)
            .bind(&before.id)
            .bind(amount)
            .bind(last)
            .bind(&t.source)
            .bind(t.now)
            .execute(&mut **tx)
            .await?;
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "UPDATE payments SET capture_id = $1, capture_amount = $2, capture_last = $3 \
                 WHERE id = $4 RETURNING {cols}"
            ))
            .bind(id)
            .bind(amount)
            .bind(last)
            .bind(&before.id)
            .fetch_one(&mut **tx)
            .await?;
            Payment::try_from(row)
        }

        /// The pending capture `id` settled as `status` (with the refusal's `reason`), in the
        /// step's transaction.
        async fn settle_capture(
            tx: &mut $crate::store::backend::Tx<$store>,
            id: &str,
            status: converge_wire::CaptureStatus,
            reason: Option<&str>,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            sqlx::query(concat!(
                "UPDATE payment_captures SET status = $1, reason = $2, settled_at = $3 \
                 WHERE id = $4 AND status = ", converge_wire::capture_sql!(Pending)
            ))
            .bind(status.as_str())
            .bind(reason)
            .bind(now)
            .bind(id)
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        /// A step's [`SuspenseItem`]($crate::domain::state::SuspenseItem) effect, in its
        /// transaction: the parked payment's item opened (again), or the posted payment's open
        /// item resolved by `system`.
        async fn write_suspense_item(
            tx: &mut $crate::store::backend::Tx<$store>,
            after: &$crate::store::Payment,
            t: &$crate::store::Transition,
            item: $crate::domain::state::SuspenseItem,
        ) -> Result<(), $crate::store::StoreError> {
            use $crate::domain::state::{SuspenseItem, suspense_key, suspense_resolution};
            match item {
                SuspenseItem::Open => {
                    upsert_error(tx, &$crate::store::NewErrorItem::suspense(after, true, t.now)).await?;
                }
                SuspenseItem::Resolve => {
                    sqlx::query(concat!(
                        "UPDATE error_pool SET status = ", converge_wire::error_item_sql!(Resolved),
                        ", resolution_note = $1, resolved_by = 'system', resolved_at = $2 \
                         WHERE dedupe_key = $3 AND status = ", converge_wire::error_item_sql!(Open)
                    ))
                    .bind(suspense_resolution(t.event, &t.source))
                    .bind(t.now)
                    .bind(suspense_key(&after.id))
                    .execute(&mut **tx)
                    .await?;
                }
            }
            Ok(())
        }

        /// The jobs of a batch of one payment's transitions, in the caller's transaction,
        /// after its steps ([`BatchJobs`]($crate::store::payments_sql::BatchJobs)).
        async fn write_jobs(
            tx: &mut $crate::store::backend::Tx<$store>,
            payment_id: &str,
            now: i64,
            jobs: &$crate::store::payments_sql::BatchJobs<'_>,
        ) -> Result<(), $crate::store::StoreError> {
            if !jobs.closes.is_empty() {
                let kinds: Vec<String> = (0..jobs.closes.len()).map(|i| format!("${}", i + 3)).collect();
                let sql = format!(
                    concat!("UPDATE jobs SET status = ", converge_wire::job_sql!(Done), ", updated_at = $1 \
                     WHERE payment_id = $2 AND status = ", converge_wire::job_sql!(Due), " AND kind IN ({})"),
                    kinds.join(", ")
                );
                let mut q = sqlx::query(&sql).bind(now).bind(payment_id);
                for kind in &jobs.closes {
                    q = q.bind(kind.as_str());
                }
                q.execute(&mut **tx).await?;
            }
            for (job, at) in &jobs.writes {
                insert_job(tx, job, *at).await?;
            }
            Ok(())
        }

        #[cfg(feature = "planted-bugs")]
        impl $store {
            /// Planted bugs 5 and 6 (`planted`): what a transition should have written in its
            /// own transaction, written after its commit in another.
            async fn planted_after_commit(
                &self,
                steps: &[$crate::store::Transition],
                after: &$crate::store::Payment,
                completion: Option<&$crate::store::keys::KeyCompletion<'_>>,
                stored: Option<&$crate::store::keys::StoredResponse>,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::planted::{Bug, on};
                if on(Bug::EventOutsideTransition) {
                    let mut tx = self.begin_write().await?;
                    for t in steps {
                        if let Some(event_type) = $crate::domain::webhooks::EventType::for_payment_status(t.to) {
                            let payload = $crate::store::views::payment_payload(after);
                            insert_outbox_event(&mut tx, self.outbox_plan(), after.merchant_id, event_type, &after.id, "", &payload, t.now).await?;
                        }
                    }
                    tx.commit().await?;
                }
                if let (true, Some(c), Some(resp)) = (on(Bug::AnswerAfterCommit), completion, stored) {
                    let mut tx = self.begin_write().await?;
                    planted_answer_in(&mut *tx, c.key, resp).await?;
                    tx.commit().await?;
                }
                Ok(())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::batch_jobs;
    use crate::domain::jobs::JobKind;
    use crate::domain::state::{PaymentEvent as E, PaymentStatus as S, check};
    use crate::store::{NewJob, Transition};

    fn step(from: S, event: E, to: S, version: i64, enqueue: &[JobKind]) -> Transition {
        Transition {
            payment_id: "pay_1".into(),
            from,
            version,
            to,
            event,
            event_id: format!("{event}@v{version}"),
            source: "api".into(),
            detail: String::new(),
            now: 1_000 * version,
            last_error: None,
            posting: None,
            enqueue: enqueue
                .iter()
                .map(|&kind| NewJob {
                    kind,
                    payment_id: Some("pay_1".into()),
                    refund_id: None,
                    run_at: 5_000,
                    max_attempts: 3,
                })
                .collect(),
            hold: None,
        }
    }

    fn rules(steps: &[Transition]) -> Vec<&'static crate::domain::state::Rule> {
        steps
            .iter()
            .map(|t| check(t.from, t.event, t.to).expect("a whitelisted row"))
            .collect()
    }

    #[test]
    fn a_charge_posted_in_the_same_batch_writes_no_post_ledger_job_and_closes_once() {
        let steps = [
            step(
                S::Processing,
                E::ChannelSucceeded,
                S::ChannelSuccess,
                2,
                &[JobKind::PostLedger],
            ),
            step(S::ChannelSuccess, E::LedgerPosted, S::Success, 3, &[]),
        ];
        let jobs = batch_jobs(&steps, &rules(&steps));
        assert!(jobs.writes.is_empty(), "the posting closes its safety job");
        assert_eq!(
            jobs.closes,
            vec![JobKind::Submit, JobKind::Query, JobKind::PostLedger]
        );
    }

    #[test]
    fn a_charge_alone_keeps_its_post_ledger_job_for_the_crash_before_the_posting() {
        let steps = [step(
            S::Processing,
            E::ChannelSucceeded,
            S::ChannelSuccess,
            2,
            &[JobKind::PostLedger],
        )];
        let jobs = batch_jobs(&steps, &rules(&steps));
        assert_eq!(jobs.closes, vec![JobKind::Submit, JobKind::Query]);
        assert_eq!(jobs.writes.len(), 1);
        assert_eq!(jobs.writes[0].0.kind, JobKind::PostLedger);
        assert_eq!(jobs.writes[0].1, 2_000, "written at its step's time");
    }

    #[test]
    fn a_step_that_closes_the_kind_it_queues_keeps_the_new_job() {
        // UNKNOWN's resubmission closes the query and queues a submit; a channel error then
        // closes that submit and queues a query: only the last query outlives the batch.
        let steps = [
            step(
                S::Unknown,
                E::QueryNotFound,
                S::Processing,
                4,
                &[JobKind::Submit],
            ),
            step(
                S::Processing,
                E::ChannelError,
                S::Unknown,
                5,
                &[JobKind::Query],
            ),
        ];
        let jobs = batch_jobs(&steps, &rules(&steps));
        assert_eq!(jobs.closes, vec![JobKind::Query, JobKind::Submit]);
        let kinds: Vec<_> = jobs.writes.iter().map(|(j, _)| j.kind).collect();
        assert_eq!(kinds, vec![JobKind::Query]);
    }
}
