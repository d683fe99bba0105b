//! Signed audit checkpoints (DESIGN.md "Ops console": signed checkpoints over sequence, head
//! hash and time, with a key outside the database, make truncation and rebuilding of the audit
//! chain detectable). The model is Certificate Transparency's signed tree head (RFC 6962
//! section 3.5): a signature over (size, root hash, timestamp) by a key the log's storage
//! does not hold. Here the "tree" is the hash chain, so the head is the hash of record `seq`.
//!
//! The signed message is plain text so that an auditor can rebuild it with `printf` and check
//! the signature with `openssl pkeyutl -verify -rawin` or Python's `cryptography`:
//!
//! ```text
//! converge audit checkpoint v1\n
//! seq <seq>\n
//! head <64 lowercase hex>\n
//! at <epoch ms UTC>\n
//! ```
//!
//! Keys are Ed25519 (RFC 8032), stored as PKCS#8 PEM (the private key, `openssl genpkey
//! -algorithm ed25519` writes the same form) and SubjectPublicKeyInfo PEM (the public key).
//! Signatures travel as standard base64 of the 64 raw bytes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer, Verifier};
/// The Ed25519 keys, re-exported for the command line (which does not name the crate).
pub use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::audit::{AuditRecord, Break};
use super::fingerprint::sha256_hex;

/// First line of every signed message; a new format gets a new version.
pub const MESSAGE_TAG: &str = "converge audit checkpoint v1";

/// A signed statement that the audit chain had `seq` records whose last hash was `head_hash`
/// at time `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct Checkpoint {
    /// Number of records covered (the seq of the last one); 0 for an empty log.
    pub seq: i64,
    /// Hash of record `seq` (64 lowercase hex; the genesis hash when `seq` is 0).
    pub head_hash: String,
    /// When it was signed, epoch ms UTC.
    pub at: i64,
    /// Which key signed: the first 16 hex digits of SHA-256 over the public key's 32 bytes.
    pub key_id: String,
    /// Ed25519 signature over [`message`], standard base64 (64 bytes raw).
    pub signature: String,
}

impl From<Checkpoint> for converge_wire::audit::CheckpointView {
    fn from(c: Checkpoint) -> Self {
        Self {
            seq: c.seq,
            head_hash: c.head_hash,
            at: c.at,
            key_id: c.key_id,
            signature: c.signature,
        }
    }
}

/// The exact bytes a checkpoint signs.
pub fn message(seq: i64, head_hash: &str, at: i64) -> String {
    format!("{MESSAGE_TAG}\nseq {seq}\nhead {head_hash}\nat {at}\n")
}

/// The short id of a public key (first 16 hex of SHA-256 over its 32 raw bytes).
pub fn key_id(key: &VerifyingKey) -> String {
    sha256_hex(key.as_bytes())[..16].to_string()
}

/// Signs (seq, head hash, time) with `key`.
pub fn sign(key: &SigningKey, seq: i64, head_hash: &str, at: i64) -> Checkpoint {
    let sig = key.sign(message(seq, head_hash, at).as_bytes());
    Checkpoint {
        seq,
        head_hash: head_hash.to_string(),
        at,
        key_id: key_id(&key.verifying_key()),
        signature: B64.encode(sig.to_bytes()),
    }
}

/// Checks `c`'s signature with `key`. Errors say why in one line.
pub fn verify_signature(key: &VerifyingKey, c: &Checkpoint) -> Result<(), String> {
    let raw = B64
        .decode(c.signature.trim())
        .map_err(|e| format!("checkpoint at seq {}: signature is not base64: {e}", c.seq))?;
    let sig = Signature::from_slice(&raw)
        .map_err(|_| format!("checkpoint at seq {}: signature is not 64 bytes", c.seq))?;
    key.verify(message(c.seq, &c.head_hash, c.at).as_bytes(), &sig)
        .map_err(|_| {
            format!(
                "checkpoint at seq {} does not verify with key {} (forged, altered, or another key)",
                c.seq,
                key_id(key)
            )
        })
}

/// A new signing key from 32 random bytes (the caller supplies the randomness).
pub fn signing_key_from_seed(seed: [u8; 32]) -> SigningKey {
    SigningKey::from_bytes(&seed)
}

/// The signing key in a PKCS#8 PEM text.
pub fn signing_key_from_pem(pem: &str) -> Result<SigningKey, String> {
    SigningKey::from_pkcs8_pem(pem.trim())
        .map_err(|e| format!("not an Ed25519 private key in PKCS#8 PEM: {e}"))
}

/// The signing key as PKCS#8 PEM.
pub fn signing_key_to_pem(key: &SigningKey) -> Result<String, String> {
    key.to_pkcs8_pem(Default::default())
        .map(|p| p.to_string())
        .map_err(|e| e.to_string())
}

/// The public key in a SubjectPublicKeyInfo PEM text (`-----BEGIN PUBLIC KEY-----`).
pub fn verifying_key_from_pem(pem: &str) -> Result<VerifyingKey, String> {
    VerifyingKey::from_public_key_pem(pem.trim())
        .map_err(|e| format!("not an Ed25519 public key in PEM: {e}"))
}

/// The public key as SubjectPublicKeyInfo PEM.
pub fn verifying_key_to_pem(key: &VerifyingKey) -> Result<String, String> {
    key.to_public_key_pem(Default::default())
        .map_err(|e| e.to_string())
}

/// Checks a chain, walked in seq order, against signed checkpoints: every checkpointed seq
/// must be present with exactly the signed hash. Feed records with [`push`](Self::push)
/// after the chain itself verified them, then call [`finish`](Self::finish).
#[derive(Debug, Clone)]
pub struct CheckpointMatcher {
    /// Checkpoints sorted by seq.
    pending: Vec<Checkpoint>,
    next: usize,
    /// Last seq seen.
    last_seq: i64,
    /// The highest checkpointed seq matched so far (0: none).
    pub matched: i64,
}

impl CheckpointMatcher {
    /// Starts with `checkpoints` (any order).
    pub fn new(mut checkpoints: Vec<Checkpoint>) -> Self {
        checkpoints.sort_by_key(|c| c.seq);
        CheckpointMatcher {
            pending: checkpoints,
            next: 0,
            last_seq: 0,
            matched: 0,
        }
    }

    /// The next record of the chain.
    pub fn push(&mut self, r: &AuditRecord) -> Result<(), Break> {
        self.last_seq = r.seq;
        while let Some(c) = self.pending.get(self.next) {
            if c.seq > r.seq {
                break;
            }
            if c.seq == r.seq && c.head_hash != r.hash {
                return Err(Break {
                    seq: r.seq,
                    reason: format!(
                        "record {} differs from the signed checkpoint of {} (signed hash {}, found {}): \
                         the chain was rebuilt or edited after record {}",
                        r.seq,
                        super::clock::rfc3339(c.at),
                        c.head_hash,
                        r.hash,
                        self.matched
                    ),
                });
            }
            self.matched = self.matched.max(c.seq);
            self.next += 1;
        }
        Ok(())
    }

    /// After the last record: a checkpoint beyond it means records were cut off.
    pub fn finish(&self) -> Result<(), Break> {
        match self.pending.last() {
            Some(c) if c.seq > self.last_seq => Err(Break {
                seq: self.last_seq + 1,
                reason: format!(
                    "record {} is missing: a signed checkpoint of {} covers {} records, the log ends at {} (truncated)",
                    self.last_seq + 1,
                    super::clock::rfc3339(c.at),
                    c.seq,
                    self.last_seq
                ),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::audit::{AuditEntry, GENESIS, chain};

    fn key() -> SigningKey {
        signing_key_from_seed([7; 32])
    }

    fn records(n: i64) -> Vec<AuditRecord> {
        let mut out: Vec<AuditRecord> = Vec::new();
        for i in 1..=n {
            let (seq, hash) = out
                .last()
                .map_or((0, GENESIS.to_string()), |r| (r.seq, r.hash.clone()));
            out.push(chain(
                seq,
                &hash,
                AuditEntry {
                    at: i,
                    actor: "a".into(),
                    roles: String::new(),
                    action: "login".into(),
                    target: "t".into(),
                    reason: String::new(),
                    before: String::new(),
                    after: String::new(),
                    meta: String::new(),
                },
            ));
        }
        out
    }

    #[test]
    fn a_checkpoint_verifies_with_its_key_only() {
        let c = sign(&key(), 3, "ab", 1000);
        verify_signature(&key().verifying_key(), &c).unwrap();
        let other = signing_key_from_seed([8; 32]).verifying_key();
        assert!(verify_signature(&other, &c).is_err());
        let mut moved = c.clone();
        moved.seq = 2;
        assert!(verify_signature(&key().verifying_key(), &moved).is_err());
    }

    #[test]
    fn keys_round_trip_through_pem() {
        let k = key();
        let back = signing_key_from_pem(&signing_key_to_pem(&k).unwrap()).unwrap();
        assert_eq!(back.to_bytes(), k.to_bytes());
        let pem = verifying_key_to_pem(&k.verifying_key()).unwrap();
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(verifying_key_from_pem(&pem).unwrap(), k.verifying_key());
        assert!(signing_key_from_pem("nonsense").is_err());
    }

    #[test]
    fn a_truncated_chain_names_the_first_missing_record() {
        let rs = records(5);
        let mut m = CheckpointMatcher::new(vec![sign(&key(), 5, &rs[4].hash, 9)]);
        for r in &rs[..3] {
            m.push(r).unwrap();
        }
        assert_eq!(m.finish().unwrap_err().seq, 4);
    }

    #[test]
    fn a_rebuilt_chain_names_the_checkpointed_record_that_differs() {
        let rs = records(5);
        let cps = vec![
            sign(&key(), 2, &rs[1].hash, 8),
            sign(&key(), 4, &rs[3].hash, 9),
        ];
        let mut rebuilt = records(5);
        let mut v = crate::domain::audit::ChainVerifier::default();
        // Rebuild from record 3 on with valid hashes: the chain alone verifies.
        let mut prev = (rebuilt[1].seq, rebuilt[1].hash.clone());
        for r in rebuilt.iter_mut().skip(2) {
            let e = AuditEntry {
                at: r.at,
                actor: r.actor.clone(),
                roles: r.roles.clone(),
                action: r.action.clone(),
                target: r.target.clone(),
                reason: "x".into(),
                before: String::new(),
                after: String::new(),
                meta: String::new(),
            };
            *r = chain(prev.0, &prev.1, e);
            prev = (r.seq, r.hash.clone());
        }
        let mut m = CheckpointMatcher::new(cps);
        let mut broken = None;
        for r in &rebuilt {
            v.push(r).expect("the rebuilt chain is self-consistent");
            if let Err(b) = m.push(r) {
                broken = Some(b);
                break;
            }
        }
        assert_eq!(broken.unwrap().seq, 4);
        assert_eq!(m.matched, 2);
    }

    #[test]
    fn an_intact_chain_matches_every_checkpoint() {
        let rs = records(4);
        let mut m = CheckpointMatcher::new(vec![
            sign(&key(), 4, &rs[3].hash, 9),
            sign(&key(), 1, &rs[0].hash, 8),
        ]);
        for r in &rs {
            m.push(r).unwrap();
        }
        m.finish().unwrap();
        assert_eq!(m.matched, 4);
    }
}
