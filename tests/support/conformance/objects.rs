//! One `ObjectStore` conformance suite, run against every adapter: the local filesystem
//! (tests/local), S3 (tests/aws) and GCS (tests/gcs).

use std::sync::Arc;

use bytes::Bytes;
use floe::objects::{ObjectError, ObjectStore};

/// Writes never overwrite and concurrent creators of one name have one winner; reads, prefix
/// listings with limits, batched deletes and locations outside the store behave as the port
/// says. `root` is a location in the store with nothing under it.
pub async fn suite(store: Arc<dyn ObjectStore>, root: &str) {
    let meta = format!("{root}/ns/t/metadata/00000-a.metadata.json");
    store
        .put_if_absent(&meta, Bytes::from_static(b"{\"v\":0}"))
        .await
        .unwrap();
    let again = store
        .put_if_absent(&meta, Bytes::from_static(b"{\"v\":1}"))
        .await;
    assert!(
        matches!(again, Err(ObjectError::AlreadyExists(_))),
        "{again:?}"
    );
    assert_eq!(
        store.get(&meta).await.unwrap(),
        Bytes::from_static(b"{\"v\":0}")
    );
    assert!(matches!(
        store.get(&format!("{root}/ns/t/none.json")).await,
        Err(ObjectError::NotFound(_))
    ));

    // Emptiness checks see files under a prefix and nothing next to it.
    assert_eq!(
        store.list(&format!("{root}/ns/"), 10).await.unwrap(),
        vec![meta.clone()]
    );
    assert!(
        store
            .list(&format!("{root}/ns-other/"), 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Concurrent creators of one name: exactly one wins.
    let contested = format!("{root}/ns/t/metadata/00001-b.metadata.json");
    let mut tasks = Vec::new();
    for n in 0..8 {
        let (store, contested) = (store.clone(), contested.clone());
        tasks.push(tokio::spawn(async move {
            store
                .put_if_absent(&contested, Bytes::from(format!("{n}")))
                .await
        }));
    }
    let mut winners = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => winners += 1,
            Err(ObjectError::AlreadyExists(_)) => {}
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(winners, 1);

    // Batched deletes, past one request's 1,000 keys.
    let many: Vec<String> = (0..1_005).map(|n| format!("{root}/bulk/f{n:04}")).collect();
    for location in &many {
        store
            .put_if_absent(location, Bytes::from_static(b"x"))
            .await
            .unwrap();
    }
    assert_eq!(
        store
            .list(&format!("{root}/bulk/"), 2_000)
            .await
            .unwrap()
            .len(),
        1_005
    );
    assert_eq!(
        store.list(&format!("{root}/bulk/"), 7).await.unwrap().len(),
        7
    );
    store.delete(&many).await.unwrap();
    store.delete(&many[..3]).await.unwrap();
    assert!(
        store
            .list(&format!("{root}/bulk/"), 10)
            .await
            .unwrap()
            .is_empty()
    );

    let outside = store.get("s3://some-other-bucket/x").await;
    assert!(
        matches!(outside, Err(ObjectError::OutsideStore(_))),
        "{outside:?}"
    );
}
