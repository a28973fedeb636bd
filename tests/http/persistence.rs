use floe::model::NamespaceRow;
use floe::store::embedded::{EmbeddedStore, OpenError};
use floe::store::rows::{self, keys};
use floe_tests::*;

#[tokio::test]
async fn state_survives_reopening_and_a_second_process_is_refused() {
    let c = TestCatalog::local().await;
    c.create_namespace("durable").await;
    c.create_table("durable", "t").await;
    let dir = c.dir.path().join("catalog");
    // While the catalog holds the data directory, a second opener is refused.
    assert!(matches!(
        EmbeddedStore::open(&dir),
        Err(OpenError::Locked(_))
    ));
    let TestCatalog {
        dir: tmp,
        store,
        router,
        catalog,
        ..
    } = c;
    drop((router, catalog, store));
    let reopened = EmbeddedStore::open(&tmp.path().join("catalog")).expect("reopen after release");
    let ns = rows::get::<NamespaceRow>(&reopened, &keys::namespace(ORG, "durable"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ns.row.table_count, 1);
}
