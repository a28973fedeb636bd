//! The `ObjectStore` conformance suite (tests/support/conformance/objects.rs) on S3 (moto).

use floe::model::{BucketAuth, S3Defaults};
use floe::objects::s3::S3Stores;

use floe_tests::conformance::objects::suite;
use floe_tests::moto;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_object_store_conformance() {
    let bucket = moto::unique("floe-objects");
    moto::create_bucket(&bucket).await;
    let row = moto::s3_bucket("default", &bucket, BucketAuth::Server);
    let stores = S3Stores::new(moto::sdk().await, S3Defaults::default());
    suite(stores.for_bucket(&row).await.unwrap(), &row.root).await;
}
