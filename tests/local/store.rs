//! The `MetaStore` conformance suite on the embedded store, and what only the embedded store
//! does itself: reaping expired items (DynamoDB's TTL does it there).

use std::sync::Arc;

use floe::store::embedded::EmbeddedStore;
use floe::store::{Condition, Item, Key, MetaStore};

use floe_tests::conformance::store::{item, put, suite, unix_now};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn embedded_store_conformance() {
    let dir = tempfile::tempdir().unwrap();
    suite(Arc::new(EmbeddedStore::open(dir.path()).unwrap())).await;
}

/// The embedded store deletes items whose expiry has passed as it writes, with their index
/// entries, and keeps the rest.
#[tokio::test]
async fn embedded_store_reaps_expired_items() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let past = unix_now() - 10;
    let expired = Item {
        expires_at: Some(past),
        index: Some(Key::new("IDX", "1")),
        ..item("R#1", "gone", 1, "expired")
    };
    let alive = Item {
        expires_at: Some(unix_now() + 3600),
        ..item("R#1", "kept", 1, "alive")
    };
    store
        .write(vec![put(expired, Condition::NotExists)])
        .await
        .unwrap();
    store
        .write(vec![put(alive, Condition::NotExists)])
        .await
        .unwrap();
    let left: Vec<String> = store
        .query("R#1", "", None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key.sk)
        .collect();
    assert_eq!(left, ["kept"]);
    assert!(store.query_index("IDX", "9", 10).await.unwrap().is_empty());
}
