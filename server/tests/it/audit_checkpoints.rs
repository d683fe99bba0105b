//! Signed audit checkpoints on both backends (issue 13, "Audit log that proves it is whole";
//! RFC 6962 signed tree heads): truncating the log, rebuilding it with plain SHA-256, or
//! TRUNCATE / INSERT OR REPLACE underneath the triggers is detected, naming the first missing
//! or differing record; exports carry a checkpoint and verify offline.

use std::sync::Arc;

use converge_server::domain::audit::{AuditEntry, GENESIS, chain};
use converge_server::domain::checkpoint::{self, signing_key_from_seed};
use converge_server::service::audit_export::{CheckpointError, verify_export};
use converge_server::store::{DbPool, Store};

use crate::support::core_of;

fn entry(i: i64) -> AuditEntry {
    AuditEntry {
        at: 1_000 + i,
        actor: "alice".into(),
        roles: "operator".into(),
        action: "action_requested".into(),
        target: format!("payment:pay_{i}"),
        reason: format!("reason {i}"),
        before: "{}".into(),
        after: "{}".into(),
        meta: "{}".into(),
    }
}

async fn append(store: &Arc<dyn Store>, from: i64, to: i64) {
    for i in from..=to {
        store.append_audit(&entry(i)).await.unwrap();
    }
}

/// Runs `sql` with the audit triggers out of the way, as an attacker with DDL rights (the
/// table's owner) can.
async fn as_attacker(store: &Arc<dyn Store>, sql: &[&str]) {
    match store.db_pool() {
        DbPool::Sqlite(p) => {
            for t in [
                "audit_log_no_update",
                "audit_log_no_delete",
                "audit_log_append_next_only",
            ] {
                sqlx::query(&format!("DROP TRIGGER IF EXISTS {t}"))
                    .execute(&p)
                    .await
                    .unwrap();
            }
            for s in sql {
                sqlx::query(s).execute(&p).await.unwrap();
            }
        }
        DbPool::Postgres(p) => {
            sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER USER")
                .execute(&p)
                .await
                .unwrap();
            for s in sql {
                sqlx::query(s).execute(&p).await.unwrap();
            }
        }
    }
}

/// Inserts a whole chain of `n` records built with plain SHA-256 (what an attacker who
/// rewrote history would do), record `edited` saying something else.
async fn insert_rebuilt_chain(store: &Arc<dyn Store>, n: i64, edited: i64) {
    let (mut seq, mut hash) = (0, GENESIS.to_string());
    for i in 1..=n {
        let mut e = entry(i);
        if i == edited {
            e.reason = "nothing happened".into();
        }
        let r = chain(seq, &hash, e);
        let sql = "INSERT INTO audit_log (seq, at, actor, roles, action, target, reason, before_state, \
                   after_state, request_meta, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
        macro_rules! ins {
            ($p:expr) => {
                sqlx::query(sql)
                    .bind(r.seq)
                    .bind(r.at)
                    .bind(&r.actor)
                    .bind(&r.roles)
                    .bind(&r.action)
                    .bind(&r.target)
                    .bind(&r.reason)
                    .bind(&r.before_state)
                    .bind(&r.after_state)
                    .bind(&r.request_meta)
                    .bind(&r.prev_hash)
                    .bind(&r.hash)
                    .execute($p)
                    .await
                    .unwrap()
            };
        }
        match store.db_pool() {
            DbPool::Sqlite(p) => {
                ins!(&p);
            }
            DbPool::Postgres(p) => {
                ins!(&p);
            }
        }
        seq = r.seq;
        hash = r.hash;
    }
}

store_conformance!(
    deleting_the_newest_records_is_detected_against_the_checkpoint,
    |store| {
        let key = signing_key_from_seed([1; 32]);
        append(&store, 1, 10).await;
        let c = core_of(&store)
            .take_checkpoint(&key, 5_000, false)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(c.seq, 10);
        assert_eq!(store.latest_checkpoint().await.unwrap(), Some(c.clone()));
        let public = key.verifying_key();
        let v = core_of(&store).verify_audit(Some(&public)).await.unwrap();
        assert!(v.broken.is_none(), "{:?}", v.broken);
        assert!(v.signatures_checked);
        // An idle log gets no new periodic checkpoint.
        assert_eq!(
            core_of(&store)
                .take_checkpoint(&key, 6_000, true)
                .await
                .unwrap(),
            None
        );

        as_attacker(&store, &["DELETE FROM audit_log WHERE seq > 7"]).await;
        // Without checkpoints the shorter chain would verify; with one, record 8 is missing.
        let (_, _, broken) = core_of(&store).verify_audit_chain().await.unwrap();
        let b = broken.expect("truncation detected");
        assert_eq!(b.seq, 8, "{}", b.reason);
        assert!(b.reason.contains("missing"), "{}", b.reason);
        // And no new checkpoint vouches for the cut log.
        let refused = core_of(&store).take_checkpoint(&key, 7_000, false).await;
        assert!(
            matches!(&refused, Err(CheckpointError::Broken(b)) if b.seq == 8),
            "{refused:?}"
        );
    }
);

store_conformance!(
    a_chain_rebuilt_with_plain_sha256_is_detected_at_the_checkpointed_record,
    |store| {
        let key = signing_key_from_seed([2; 32]);
        append(&store, 1, 4).await;
        core_of(&store)
            .take_checkpoint(&key, 5_000, false)
            .await
            .unwrap();
        append(&store, 5, 8).await;
        core_of(&store)
            .take_checkpoint(&key, 6_000, false)
            .await
            .unwrap();
        // Delete everything and insert a self-consistent chain with record 6 rewritten.
        as_attacker(&store, &["DELETE FROM audit_log"]).await;
        insert_rebuilt_chain(&store, 8, 6).await;
        let v = core_of(&store)
            .verify_audit(Some(&key.verifying_key()))
            .await
            .unwrap();
        let b = v.broken.expect("rebuild detected");
        assert_eq!(b.seq, 8, "{}", b.reason);
        assert!(b.reason.contains("after record 4"), "{}", b.reason);
    }
);

store_conformance!(a_forged_checkpoint_fails_signature_verification, |store| {
    let key = signing_key_from_seed([3; 32]);
    let other = signing_key_from_seed([4; 32]);
    append(&store, 1, 3).await;
    let (seq, hash) = store.audit_head().await.unwrap();
    store
        .add_checkpoint(&checkpoint::sign(&other, seq, &hash, 1))
        .await
        .unwrap();
    let v = core_of(&store)
        .verify_audit(Some(&key.verifying_key()))
        .await
        .unwrap();
    assert!(
        v.broken
            .as_ref()
            .is_some_and(|b| b.reason.contains("does not verify")),
        "{:?}",
        v.broken
    );
});

store_conformance!(
    truncate_and_insert_or_replace_cannot_rewrite_the_log,
    |store| {
        append(&store, 1, 3).await;
        match store.db_pool() {
            DbPool::Postgres(p) => {
                let e = sqlx::query("TRUNCATE audit_log").execute(&p).await;
                assert!(e.is_err(), "TRUNCATE refused");
                let e = sqlx::query("TRUNCATE audit_checkpoints").execute(&p).await;
                assert!(e.is_err(), "TRUNCATE of checkpoints refused");
                let e = sqlx::query(
                    "INSERT INTO audit_log SELECT seq + 10, at, actor, roles, action, target, reason, \
                     before_state, after_state, request_meta, prev_hash, hash FROM audit_log WHERE seq = 1",
                )
                .execute(&p)
                .await;
                assert!(e.is_err(), "a gap is refused");
            }
            DbPool::Sqlite(p) => {
                let e = sqlx::query(
                    "INSERT OR REPLACE INTO audit_log (seq, at, actor, roles, action, target, reason, \
                     before_state, after_state, request_meta, prev_hash, hash) \
                     SELECT seq, at, actor, roles, action, target, 'nothing happened', before_state, \
                     after_state, request_meta, prev_hash, hash FROM audit_log WHERE seq = 2",
                )
                .execute(&p)
                .await;
                assert!(e.is_err(), "INSERT OR REPLACE refused");
                let e = sqlx::query("REPLACE INTO audit_log SELECT * FROM audit_log WHERE seq = 3")
                    .execute(&p)
                    .await;
                assert!(e.is_err(), "REPLACE refused");
            }
        }
        assert_eq!(store.audit_head().await.unwrap().0, 3);
        let (_, _, broken) = core_of(&store).verify_audit_chain().await.unwrap();
        assert!(broken.is_none());
        assert_eq!(
            store.audit_page(1, 1, &Default::default()).await.unwrap()[0].reason,
            "reason 2"
        );
        // The next record still appends.
        append(&store, 4, 4).await;
        assert_eq!(store.audit_head().await.unwrap().0, 4);
    }
);

store_conformance!(
    an_export_carries_a_checkpoint_and_verifies_offline,
    |store| {
        use futures_util::StreamExt;
        let key = signing_key_from_seed([5; 32]);
        append(&store, 1, 5).await;
        let cp = core_of(&store)
            .export_checkpoint(Some(&key), 9)
            .await
            .unwrap()
            .expect("signed at export");
        assert_eq!(cp.seq, 5);
        let mut body = Vec::new();
        let mut s = Box::pin(
            converge_server::service::audit_export::stream_with_checkpoint(
                store.clone(),
                Default::default(),
                converge_server::service::audit_export::Format::Ndjson,
                Some(cp),
            ),
        );
        while let Some(chunk) = s.next().await {
            body.extend_from_slice(&chunk.unwrap());
        }
        let public = key.verifying_key();
        let (n, c) = verify_export(body.as_slice(), &public).unwrap();
        assert_eq!((n, c.seq), (5, 5));
        // The same export cut short: the first missing record is named.
        let text = String::from_utf8(body).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let cut = [&lines[..3], &lines[5..]].concat().join("\n");
        let e = verify_export(cut.as_bytes(), &public).unwrap_err();
        assert!(e.contains("record 4"), "{e}");
        // Another key: refused.
        let other = signing_key_from_seed([6; 32]).verifying_key();
        assert!(verify_export(text.as_bytes(), &other).is_err());
    }
);

store_conformance!(
    the_audit_viewer_lists_each_action_the_log_holds_once_in_byte_order,
    |store| {
        assert!(store.audit_actions().await.unwrap().is_empty());
        for (i, action) in [
            "payment_forced",
            "action_approved",
            "payment_forced",
            "a",
            "z_last",
        ]
        .into_iter()
        .enumerate()
        {
            let e = AuditEntry {
                at: i as i64,
                actor: "cli:tester".into(),
                roles: String::new(),
                action: action.into(),
                target: "t".into(),
                reason: String::new(),
                before: String::new(),
                after: String::new(),
                meta: "{}".into(),
            };
            store.append_audit(&e).await.unwrap();
        }
        assert_eq!(
            store.audit_actions().await.unwrap(),
            ["a", "action_approved", "payment_forced", "z_last"]
        );
    }
);
