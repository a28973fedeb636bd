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

/// Functions bootstrap at every cold start: once the org and token exist, a restart only reads.
#[tokio::test]
async fn a_restart_bootstraps_without_writing() {
    use floe::store::observed::{ObservedStore, StoreCounter};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let token = "ema_restart_bootstrap_token_0123456789abcdef";
    let open = |counter: Arc<StoreCounter>| {
        let path = dir.path().to_path_buf();
        async move {
            let observer = counter.observer();
            let wraps =
                floe::deployment::Wraps::store(move |s| Arc::new(ObservedStore::new(s, observer)));
            let (catalog, boot) = floe::deployment::open_wrapped(&path, "boot", Some(token), wraps)
                .await
                .unwrap();
            (catalog, boot, counter.counts())
        }
    };
    let (first, boot, counts) = open(Arc::default()).await;
    assert!(boot.created_org);
    assert!(counts.writes > 0);
    drop(first);
    let (second, boot, counts) = open(Arc::default()).await;
    assert!(!boot.created_org);
    assert_eq!(counts.writes, 0, "{counts:?}");
    assert!(second.sessions.authenticate(token).await.is_ok());
}
