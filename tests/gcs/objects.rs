//! The `ObjectStore` conformance suite on the GCS emulator.

use floe::model::BucketAuth;
use floe::objects::{ObjectError, ObjectStore};
use floe_tests::conformance::objects::suite;
use floe_tests::{gcs, moto};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcs_object_store_conformance() {
    let bucket = moto::unique("floe-objects");
    gcs::create_bucket(&bucket).await;
    let row = gcs::gcs_bucket("default", &bucket, BucketAuth::ServiceAccount);
    let stores = gcs::stores();
    let store = stores.for_bucket(&row).unwrap();
    suite(store.clone(), &row.root).await;
    // The bucket root lists (the reachability probe does) and another bucket is outside.
    assert!(
        !store
            .list(&format!("gs://{bucket}"), 1)
            .await
            .unwrap()
            .is_empty()
    );
    let outside = store.get("gs://some-other-bucket/x").await;
    assert!(
        matches!(outside, Err(ObjectError::OutsideStore(_))),
        "{outside:?}"
    );
}

/// Only the catalog's service account reaches GCS buckets.
#[tokio::test]
async fn gcs_buckets_need_the_service_account() {
    let stores = gcs::stores();
    for auth in [BucketAuth::Anonymous, BucketAuth::Server] {
        let row = gcs::gcs_bucket("x", "some-bucket", auth.clone());
        assert!(stores.for_bucket(&row).is_err(), "{auth:?}");
    }
    let mut s3 = gcs::gcs_bucket("x", "some-bucket", BucketAuth::ServiceAccount);
    s3.root = "s3://some-bucket/wh".into();
    assert!(stores.for_bucket(&s3).is_err());
}
