//! The tamper-evident audit chain (DESIGN.md "Ops console": append-only; each record carries
//! the hash of the one before, SHA-256 chain; verify reports the first broken record).
//!
//! A record's hash is SHA-256 over the canonical JSON of all its fields and the previous
//! hash, so editing any field of any record, deleting one or reordering them breaks the chain
//! at that record.

use serde::Serialize;
use serde_json::json;

use super::fingerprint::{canonical_json, sha256_hex};

/// The `prev_hash` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What happened, by whom, before the chain fields are assigned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// When, epoch ms UTC.
    pub at: i64,
    /// Username (or `system`, or the attempted name of a failed login).
    pub actor: String,
    /// The actor's roles, comma-separated.
    pub roles: String,
    /// `login`, `login_failed`, `logout`, `action_requested`, `action_approved`, ...
    pub action: String,
    /// What it was done to (`payment:pay_x`, `action:act_x`, `user:alice`, `audit`).
    pub target: String,
    /// The reason given.
    pub reason: String,
    /// State before, JSON text (or empty).
    pub before: String,
    /// State after, JSON text (or empty).
    pub after: String,
    /// Request metadata, JSON text (client address).
    pub meta: String,
}

/// A stored record: the entry with its place in the chain (a shape the console reads too).
pub use converge_wire::AuditRecord;

/// The hash of record `seq` holding `e`, chained to `prev_hash` (64 lowercase hex).
pub fn record_hash(seq: i64, prev_hash: &str, e: &AuditEntry) -> String {
    let canonical = canonical_json(&json!({
        "seq": seq, "at": e.at, "actor": e.actor, "roles": e.roles, "action": e.action,
        "target": e.target, "reason": e.reason, "before": e.before, "after": e.after,
        "meta": e.meta, "prev_hash": prev_hash,
    }));
    sha256_hex(canonical.as_bytes())
}

/// Builds the record that follows `(prev_seq, prev_hash)`.
pub fn chain(prev_seq: i64, prev_hash: &str, e: AuditEntry) -> AuditRecord {
    let seq = prev_seq + 1;
    let hash = record_hash(seq, prev_hash, &e);
    AuditRecord {
        seq,
        at: e.at,
        actor: e.actor,
        roles: e.roles,
        action: e.action,
        target: e.target,
        reason: e.reason,
        before_state: e.before,
        after_state: e.after,
        request_meta: e.meta,
        prev_hash: prev_hash.to_string(),
        hash,
    }
}

/// Where and why a chain breaks (a wire type: the console shows it as it is).
pub use converge_wire::audit::Break;

/// Checks records in order, carrying `(last seq, last hash)` across pages; the first
/// failure is returned.
#[derive(Debug, Clone)]
pub struct ChainVerifier {
    /// Last verified seq (0 before the first).
    pub seq: i64,
    /// Last verified hash.
    pub hash: String,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        ChainVerifier {
            seq: 0,
            hash: GENESIS.to_string(),
        }
    }
}

impl ChainVerifier {
    /// Verifies the next record.
    pub fn push(&mut self, r: &AuditRecord) -> Result<(), Break> {
        let fail = |reason: String| Err(Break { seq: r.seq, reason });
        if r.seq != self.seq + 1 {
            return fail(format!(
                "expected record {} next, found {} (a record is missing)",
                self.seq + 1,
                r.seq
            ));
        }
        if r.prev_hash != self.hash {
            return fail("prev_hash does not match the previous record's hash".into());
        }
        let entry = AuditEntry {
            at: r.at,
            actor: r.actor.clone(),
            roles: r.roles.clone(),
            action: r.action.clone(),
            target: r.target.clone(),
            reason: r.reason.clone(),
            before: r.before_state.clone(),
            after: r.after_state.clone(),
            meta: r.request_meta.clone(),
        };
        if record_hash(r.seq, &r.prev_hash, &entry) != r.hash {
            return fail("hash does not match the record's content (edited)".into());
        }
        self.seq = r.seq;
        self.hash = r.hash.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: i64) -> AuditEntry {
        AuditEntry {
            at: n,
            actor: "alice".into(),
            roles: "operator".into(),
            action: "action_requested".into(),
            target: format!("payment:pay_{n}"),
            reason: "customer asked".into(),
            before: "{}".into(),
            after: "{}".into(),
            meta: "{}".into(),
        }
    }

    fn chain_of(n: i64) -> Vec<AuditRecord> {
        let mut out: Vec<AuditRecord> = Vec::new();
        for i in 1..=n {
            let (seq, hash) = out
                .last()
                .map_or((0, GENESIS.to_string()), |r| (r.seq, r.hash.clone()));
            out.push(chain(seq, &hash, entry(i)));
        }
        out
    }

    #[test]
    fn an_intact_chain_verifies() {
        let mut v = ChainVerifier::default();
        for r in chain_of(5) {
            v.push(&r).unwrap();
        }
        assert_eq!(v.seq, 5);
    }

    #[test]
    fn an_edited_record_breaks_the_chain_at_that_record() {
        let mut rs = chain_of(5);
        rs[2].reason = "nothing to see".into();
        let mut v = ChainVerifier::default();
        let broken = rs.iter().find_map(|r| v.push(r).err()).unwrap();
        assert_eq!(broken.seq, 3);
    }

    #[test]
    fn a_deleted_record_is_detected() {
        let mut rs = chain_of(5);
        rs.remove(1);
        let mut v = ChainVerifier::default();
        assert_eq!(rs.iter().find_map(|r| v.push(r).err()).unwrap().seq, 3);
    }
}
