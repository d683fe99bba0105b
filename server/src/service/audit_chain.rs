//! The audit chain's verification over the store (DESIGN.md invariant 5): re-computes every
//! record's hash link and checks it against the stored checkpoints. `converge audit verify`,
//! `GET /ops/v1/audit/verify`, the console and `converge verify` all ask this one place.

use super::Core;
use ed25519_dalek::VerifyingKey;

use crate::domain::audit::{Break, ChainVerifier};
use crate::domain::checkpoint::{self, Checkpoint, CheckpointMatcher};
use crate::store::{AuditFilter, Store, StoreError};

/// Records read per page (memory stays bounded on a long log).
const PAGE: i64 = 1000;

impl Core {
    /// Re-computes the whole chain and checks it against every stored checkpoint's head hash
    /// (signatures are not checked here: see [`Core::verify_audit`]); returns (records checked,
    /// head, first break). A chain cut short of a checkpoint breaks at the first missing record; a
    /// chain rebuilt under a checkpoint breaks at the checkpointed record that differs.
    pub async fn verify_audit_chain(
        &self,
    ) -> Result<(i64, ChainVerifier, Option<Break>), StoreError> {
        let v = self.verify_audit(None).await?;
        Ok((v.records, v.head, v.broken))
    }
}

/// What [`Core::verify_audit`] found.
#[derive(Debug, Clone)]
pub struct AuditVerdict {
    /// Records read.
    pub records: i64,
    /// The last record that verified.
    pub head: ChainVerifier,
    /// The first break: a record that does not chain, a checkpoint it contradicts or falls
    /// short of, or a checkpoint whose signature does not verify.
    pub broken: Option<Break>,
    /// Checkpoints checked against the chain.
    pub checkpoints: usize,
    /// The checkpoint covering the most records.
    pub latest: Option<Checkpoint>,
    /// Whether every checkpoint's signature was checked (a public key was given).
    pub signatures_checked: bool,
}

impl Core {
    /// The chain checked as the console shows it: [`Self::verify_audit`] with this server's
    /// own checkpoint key ([`super::console::ConsoleSettings::audit_key`]), when it holds one.
    pub async fn audit_verdict(&self) -> Result<AuditVerdict, StoreError> {
        let public = self.console.audit_key.as_ref().map(|k| k.verifying_key());
        self.verify_audit(public.as_ref()).await
    }

    /// [`Self::verify_audit_chain`] with the checkpoints' signatures checked against `key`
    /// when one is given.
    pub async fn verify_audit(
        &self,
        key: Option<&VerifyingKey>,
    ) -> Result<AuditVerdict, StoreError> {
        AuditVerdict::read(self.store.as_ref(), key).await
    }
}

impl AuditVerdict {
    /// The verdict on `store`'s chain ([`Core::verify_audit`]): `converge verify` reads it
    /// here, over the database alone, as it reads every other invariant (it starts no core).
    pub async fn read(store: &dyn Store, key: Option<&VerifyingKey>) -> Result<Self, StoreError> {
        let cps = store.checkpoints().await?;
        let latest = store.latest_checkpoint().await?;
        let mut verdict = AuditVerdict {
            records: 0,
            head: ChainVerifier::default(),
            broken: None,
            checkpoints: cps.len(),
            latest,
            signatures_checked: key.is_some(),
        };
        if let Some(key) = key {
            for c in &cps {
                if let Err(reason) = checkpoint::verify_signature(key, c) {
                    verdict.broken = Some(Break { seq: c.seq, reason });
                    return Ok(verdict);
                }
            }
        }
        let mut m = CheckpointMatcher::new(cps);
        let mut after = 0;
        loop {
            let rows = store
                .audit_page(after, PAGE, &AuditFilter::default())
                .await?;
            for r in &rows {
                verdict.records += 1;
                if let Err(b) = verdict.head.push(r).and_then(|()| m.push(r)) {
                    verdict.broken = Some(b);
                    return Ok(verdict);
                }
            }
            match rows.last() {
                Some(r) if rows.len() as i64 == PAGE => after = r.seq,
                _ => break,
            }
        }
        verdict.broken = m.finish().err();
        Ok(verdict)
    }
}
