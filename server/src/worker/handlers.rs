//! What each job kind does. Every handler re-reads the payment and decides from its current
//! state, so a job that runs twice (lease lapsed, crash) does no harm.

use crate::domain::state::{AutoStep, PaymentStatus};
use crate::service::resolve::Step;
use crate::service::{Core, ServiceError};
use crate::store::LeasedJob;

/// Runs one job and says what it achieved.
pub async fn run(core: &Core, job: &LeasedJob) -> Result<Step, ServiceError> {
    use crate::domain::jobs::JobKind;
    let Some(kind) = JobKind::parse(&job.kind) else {
        return Ok(Step::GiveUp {
            kind: "job_unknown_kind",
            summary: format!("unknown job kind {:?}", job.kind),
            evidence: serde_json::json!({"job_id": job.id, "kind": job.kind}),
        });
    };
    // Exhaustive: a new kind does not compile until it has its handler here.
    match kind {
        JobKind::Submit => submit(core, job).await,
        JobKind::Query => match payment(core, job).await? {
            // A resubmission that died before its answer was recorded: send it again (same
            // channel key, so the channel charges at most once).
            Some(p) if AutoStep::awaits_channel(p.status) => submit(core, job).await,
            Some(p) if p.status == PaymentStatus::RequiresAction => {
                core.resolve_action(p, "worker").await
            }
            Some(p) => core.resolve_unknown(p, "worker").await,
            None => Ok(Step::Done),
        },
        JobKind::PostLedger => match payment(core, job).await? {
            Some(p) => core.retry_posting(p, "worker").await,
            None => Ok(Step::Done),
        },
        JobKind::Refund => refund(core, job).await,
        JobKind::Reverse => reverse(core, job).await,
        JobKind::Reconcile => Ok(match core.reconcile(&job.payload, "channel", None).await {
            Ok(_) => Step::Done,
            // `reconcile` has already put the bad file in the error pool, naming the line; a
            // second item for the job would report one fault twice. A person re-runs the day
            // (`converge reconcile --date`) once the channel serves a whole statement.
            Err(crate::service::reconcile::ReconcileError::BadFile(_)) => Step::Done,
            Err(e) => Step::Retry(e.to_string()),
        }),
        JobKind::Webhook => core.deliver_webhook(job).await,
        JobKind::Capture => match payment(core, job).await? {
            Some(p) => core.settle_capture(p, "worker").await,
            None => Ok(Step::Done),
        },
        JobKind::VoidHold => match payment(core, job).await? {
            Some(p) if p.hold.is_some() => Ok(core.send_void(p, "worker").await?.1),
            _ => Ok(Step::Done),
        },
        JobKind::ExpireHold => match payment(core, job).await? {
            Some(p) => core.expire_hold(p, "worker").await,
            None => Ok(Step::Done),
        },
    }
}

async fn payment(
    core: &Core,
    job: &LeasedJob,
) -> Result<Option<crate::store::Payment>, ServiceError> {
    match &job.payment_id {
        Some(id) => Ok(core.store.payment(id).await?),
        None => Ok(None),
    }
}

async fn submit(core: &Core, job: &LeasedJob) -> Result<Step, ServiceError> {
    let Some(p) = payment(core, job).await? else {
        return Ok(Step::Done);
    };
    let Some(step) = AutoStep::of(p.status) else {
        return Ok(Step::Done);
    };
    // Claimed just before a pause reached this process, or a query job resubmitting: hold,
    // spending no attempt, rather than count the pause as a failure.
    if step.reaches_channel() && core.active_pauses().await.submissions() {
        return Ok(Step::Held("submissions are paused".into()));
    }
    let after = core.drive(p, "worker").await?;
    Ok(if AutoStep::awaits_channel(after.status) {
        Step::Retry(format!("payment still {}", after.status))
    } else {
        Step::Done
    })
}

async fn refund(core: &Core, job: &LeasedJob) -> Result<Step, ServiceError> {
    let Some(id) = &job.refund_id else {
        return Ok(Step::Done);
    };
    let Some(r) = core.store.refund(id).await? else {
        return Ok(Step::Done);
    };
    let after = core.drive_refund(r, "worker").await?;
    Ok(
        if after.status == crate::domain::refunds::RefundStatus::Pending {
            Step::Retry("refund outcome unknown".into())
        } else {
            Step::Done
        },
    )
}

/// Finishes an ops reversal whose executing request died after reserving the payment: the
/// channel refund is keyed by the action id, so it is never issued twice.
async fn reverse(core: &Core, job: &LeasedJob) -> Result<Step, ServiceError> {
    use crate::domain::actions::reversible;
    let Some(p) = payment(core, job).await? else {
        return Ok(Step::Done);
    };
    let Some(action_id) = p.reversal_id.clone() else {
        return Ok(Step::Done);
    };
    if !reversible(p.status) {
        return Ok(Step::Done);
    }
    Ok(match core.finish_reversal(&action_id, p, "worker").await {
        Ok(_) => Step::Done,
        // Still held (the channel's answer was undecidable): try again later. Released (the
        // channel refused) or recorded meanwhile: nothing left to do.
        Err(why) => match payment(core, job).await? {
            Some(now) if now.reversal_id.is_some() && reversible(now.status) => Step::Retry(why),
            _ => Step::Done,
        },
    })
}
