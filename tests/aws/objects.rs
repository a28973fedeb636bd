//! The `ObjectStore` conformance suite, run against the local filesystem and S3 (moto).

use std::sync::Arc;

use floe::model::{BucketAuth, S3Defaults};
use floe::objects::local::{LocalObjectStore, file_url};
use floe::objects::s3::S3Stores;

use floe_tests::conformance::suite;
use floe_tests::moto;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_object_store_conformance() {
    let bucket = moto::unique("floe-objects");
    moto::create_bucket(&bucket).await;
    let row = moto::s3_bucket("default", &bucket, BucketAuth::Server);
    let stores = S3Stores::new(moto::sdk().await, S3Defaults::default());
    suite(stores.for_bucket(&row).await.unwrap(), &row.root).await;
}
