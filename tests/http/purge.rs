use floe::purge::RECOVERY_PERIOD;
use floe_tests::*;
use serde_json::json;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A namespace with a table whose files stay behind after the table is dropped, then dropped.
async fn dropped_namespace_with_files(c: &TestCatalog, name: &str) -> String {
    let ns = c.create_namespace(name).await;
    c.create_table(name, "t").await;
    c.append_snapshot(ADMIN_TOKEN, name, "t", 1)
        .await
        .assert_ok(200);
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/{name}/tables/t"))
            .await
            .status
            .as_u16(),
        204
    );
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/{name}"))
            .await
            .status
            .as_u16(),
        204
    );
    ns["properties"]["location"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn expired_namespaces_are_emptied_and_removed_and_nothing_else() {
    let c = TestCatalog::new().await;
    let location = dropped_namespace_with_files(&c, "expired").await;
    let alive = c.create_namespace("alive").await;
    c.create_table("alive", "t").await;
    let files = c.files_under(&location).await;
    assert!(files.len() >= 3, "marker and metadata files: {files:?}");

    // Within the recovery period nothing is touched.
    let early = c
        .catalog
        .purge_expired(now_ms(), RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert!(early.purged.is_empty());
    assert_eq!(c.files_under(&location).await, files);

    let later = now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    let report = c
        .catalog
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/expired")]);
    assert_eq!(report.objects_deleted, files.len() as u64);
    assert!(c.files_under(&location).await.is_empty());
    // The name and prefix are free: a new namespace of that name gets a new prefix.
    let again = c.create_namespace("expired").await;
    assert_ne!(again["properties"]["location"].as_str().unwrap(), location);
    // Live namespaces and their tables are untouched.
    let alive_location = alive["properties"]["location"].as_str().unwrap();
    assert!(!c.files_under(alive_location).await.is_empty());
    c.get(&format!("/v1/{ORG}/namespaces/alive/tables/t"))
        .await
        .assert_ok(200);
    // A second run finds nothing more to do.
    let rerun = c
        .catalog
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert!(rerun.purged.is_empty());
}

#[tokio::test]
async fn a_run_killed_midway_is_finished_by_the_next() {
    let c = TestCatalog::new().await;
    let location = dropped_namespace_with_files(&c, "halfway").await;
    let later = now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    // A run killed while deleting leaves some objects gone and the rows in place.
    let files = c.files_under(&location).await;
    c.delete_files(&files[..files.len() / 2]).await;
    let report = c
        .catalog
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/halfway")]);
    assert!(c.files_under(&location).await.is_empty());

    // A run killed after emptying the prefix but before removing the rows.
    let location = dropped_namespace_with_files(&c, "emptied").await;
    let files = c.files_under(&location).await;
    c.delete_files(&files).await;
    let report = c
        .catalog
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(
        (report.purged, report.objects_deleted),
        (vec![format!("{ORG}/emptied")], 0)
    );
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["emptied"]}),
    )
    .await
    .assert_ok(200);
}

#[tokio::test]
async fn a_restored_namespace_is_not_purged() {
    let c = TestCatalog::new().await;
    c.create_namespace("back").await;
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/back"))
            .await
            .status
            .as_u16(),
        204
    );
    // Re-created while still empty: restored in place, so it leaves the purge's index.
    c.create_namespace("back").await;
    let later = now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    let report = c
        .catalog
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert!(report.purged.is_empty());
    c.get(&format!("/v1/{ORG}/namespaces/back"))
        .await
        .assert_ok(200);
}
