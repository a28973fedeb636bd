//! The `ObjectStore` conformance suite on the local filesystem.

use std::sync::Arc;

use floe::objects::local::{LocalObjectStore, file_url};

use floe_tests::conformance::objects::suite;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_object_store_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    suite(
        Arc::new(LocalObjectStore::new(root.clone())),
        &file_url(&root),
    )
    .await;
}
