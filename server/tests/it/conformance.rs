//! The storage conformance suite: every test runs against SQLite and PostgreSQL
//! (DESIGN.md "Storage": one abstraction, two implementations, one suite).

use converge_server::store::Backend;

store_conformance!(migrations_apply_and_ping_answers, |store| {
    store.ping().await.expect("ping");
    assert!(matches!(store.backend(), Backend::Sqlite | Backend::Postgres));
});

store_conformance!(merchant_round_trips_and_names_are_unique, |store| {
    let m = store.create_merchant("acme", "hash-1", 1_000).await.expect("insert");
    assert_eq!(store.merchant_by_key_hash("hash-1").await.unwrap(), Some(m.clone()));
    assert_eq!(store.merchant(m.id).await.unwrap(), Some(m));
    let dup = store.create_merchant("acme", "hash-2", 1_000).await;
    assert!(matches!(dup, Err(converge_server::store::StoreError::Conflict(_))), "{dup:?}");
    assert!(store.set_merchant_frozen("acme", true).await.unwrap());
    assert!(store.merchant_by_key_hash("hash-1").await.unwrap().unwrap().frozen);
    assert!(!store.set_merchant_frozen("nobody", true).await.unwrap());
});
