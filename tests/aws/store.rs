//! The `MetaStore` conformance suite (tests/support/conformance/store.rs) on DynamoDB (moto).

use std::sync::Arc;

use floe::store::dynamodb::DynamoStore;

use floe_tests::conformance::store::suite;
use floe_tests::moto;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamodb_store_conformance() {
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&moto::sdk().await),
        moto::unique("floe-conformance"),
    );
    assert!(store.create_table().await.unwrap());
    assert!(!store.create_table().await.unwrap(), "init is idempotent");
    suite(Arc::new(store)).await;
}
