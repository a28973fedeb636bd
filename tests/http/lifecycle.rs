//! Namespace lifecycle through the management API: recoverable namespaces listed with their
//! deletion and purge times, restored with properties and grants, purged now on request (ahead
//! of every other), and removed with their data kept; on both backends.

use std::sync::atomic::Ordering;

use floe::catalog::purge::RECOVERY_PERIOD;
use floe::store::Write;
use floe::store::rows::keys;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn namespaces() -> String {
    format!("/orgs/{ORG}/namespaces")
}

async fn admin(c: &TestCatalog, method: Method, path: &str) -> Answer {
    c.management(method, path, ADMIN_TOKEN, None).await
}

/// The org's recoverable namespaces, by name.
async fn recoverable(c: &TestCatalog) -> Vec<Value> {
    let answer = admin(c, Method::GET, &format!("{}?deleted=true", namespaces())).await;
    answer.assert_ok(200)["namespaces"]
        .as_array()
        .unwrap()
        .clone()
}

async fn recoverable_named(c: &TestCatalog, name: &str) -> Option<Value> {
    recoverable(c)
        .await
        .into_iter()
        .find(|ns| ns["name"] == name)
}

/// A namespace holding the files of a dropped table, with a property and a grant; returns its
/// location.
async fn namespace_with_files(c: &TestCatalog, name: &str) -> String {
    let created = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": [name], "properties": {"owner": "etl"}}),
        )
        .await;
    let location = created.assert_ok(200)["properties"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    c.create_table(name, "t").await;
    c.append_snapshot(ADMIN_TOKEN, name, "t", 1)
        .await
        .assert_ok(200);
    let dropped = c
        .delete(&format!("/v1/{ORG}/namespaces/{name}/tables/t"))
        .await;
    assert_eq!(dropped.status.as_u16(), 204);
    let grant = json!({"principal": "user:ada", "action": "read"});
    c.management(
        Method::PUT,
        &format!("{}/{name}/grants", namespaces()),
        ADMIN_TOKEN,
        Some(grant),
    )
    .await
    .assert_ok(204);
    location
}

async fn grants_of(c: &TestCatalog, name: &str) -> Value {
    admin(c, Method::GET, &format!("{}/{name}/grants", namespaces()))
        .await
        .assert_ok(200)["grants"]
        .clone()
}

#[tokio::test]
async fn drop_list_restore_then_an_immediate_purge_frees_the_name() {
    let c = TestCatalog::new().await;
    let location = namespace_with_files(&c, "life").await;
    let files = c.files_under(&location).await;
    assert!(files.len() > 1, "{files:?}");

    let before = now_ms();
    admin(&c, Method::DELETE, &format!("{}/life", namespaces()))
        .await
        .assert_ok(204);
    c.get(&format!("/v1/{ORG}/namespaces/life"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    let listed = recoverable_named(&c, "life")
        .await
        .expect("listed as deleted");
    assert_eq!(listed["state"], "deleted");
    let deleted_ms = listed["deleted_ms"].as_u64().unwrap();
    assert!(deleted_ms >= before && deleted_ms <= now_ms(), "{listed}");
    assert_eq!(
        listed["purge_at_ms"].as_u64().unwrap(),
        deleted_ms + RECOVERY_PERIOD.as_millis() as u64
    );
    assert!(listed.get("immediate").is_none(), "{listed}");
    let live = admin(&c, Method::GET, &namespaces()).await;
    assert!(
        !live.assert_ok(200)["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|ns| ns["name"] == "life")
    );

    // Restored with its properties, grants and files.
    let restored = admin(&c, Method::POST, &format!("{}/life/restore", namespaces())).await;
    assert_eq!(restored.assert_ok(200)["state"], "live");
    let loaded = c.get(&format!("/v1/{ORG}/namespaces/life")).await;
    assert_eq!(loaded.assert_ok(200)["properties"]["owner"], "etl");
    assert_eq!(grants_of(&c, "life").await[0]["principal"], "user:ada");
    assert_eq!(c.files_under(&location).await, files);
    assert!(recoverable_named(&c, "life").await.is_none());
    // A live namespace cannot be restored; a name nothing holds is unknown.
    admin(&c, Method::POST, &format!("{}/life/restore", namespaces()))
        .await
        .assert_error(409, "AlreadyExistsException");
    admin(&c, Method::POST, &format!("{}/never/restore", namespaces()))
        .await
        .assert_error(404, "NoSuchNamespaceException");

    // Dropped through the catalog, then purged now on an admin's request.
    assert_eq!(
        c.delete(&format!("/v1/{ORG}/namespaces/life"))
            .await
            .status
            .as_u16(),
        204
    );
    let asked = now_ms();
    admin(
        &c,
        Method::DELETE,
        &format!("{}/life?immediate=true", namespaces()),
    )
    .await
    .assert_ok(204);
    let listed = recoverable_named(&c, "life").await.unwrap();
    assert_eq!(listed["immediate"], true);
    let due = listed["purge_at_ms"].as_u64().unwrap();
    assert!(due >= asked && due <= now_ms(), "{listed}");
    let report = c
        .catalog
        .namespaces
        .purge_expired(now_ms(), RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/life")]);
    assert_eq!(report.objects_deleted, files.len() as u64);
    assert!(c.files_under(&location).await.is_empty());
    assert!(recoverable_named(&c, "life").await.is_none());
    admin(&c, Method::POST, &format!("{}/life/restore", namespaces()))
        .await
        .assert_error(404, "NoSuchNamespaceException");

    // The name is free, and the new namespace starts without the old one's grants.
    let again = c.create_namespace("life").await;
    assert_ne!(again["properties"]["location"], location.as_str());
    assert_eq!(grants_of(&c, "life").await, json!([]));
}

#[tokio::test]
async fn the_purge_takes_immediate_requests_first() {
    let c = TestCatalog::frozen().await;
    for name in ["aged", "urgent"] {
        c.create_namespace(name).await;
    }
    admin(&c, Method::DELETE, &format!("{}/aged", namespaces()))
        .await
        .assert_ok(204);
    admin(
        &c,
        Method::DELETE,
        &format!("{}/urgent?immediate=true", namespaces()),
    )
    .await
    .assert_ok(204);
    // Both are due once the recovery period has passed; one run that takes a single namespace
    // takes the immediate one, although it was deleted later.
    let later = c.now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    let report = c
        .catalog
        .namespaces
        .purge_expired(later, RECOVERY_PERIOD, 1)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/urgent")]);
    // Before its recovery period ends, an ordinary delete is left alone.
    let report = c
        .catalog
        .namespaces
        .purge_expired(c.now_ms(), RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert!(report.purged.is_empty(), "{report:?}");
    assert!(recoverable_named(&c, "aged").await.is_some());
}

#[tokio::test]
async fn retain_data_frees_the_name_and_keeps_every_byte() {
    let c = TestCatalog::frozen().await;
    let location = namespace_with_files(&c, "kept").await;
    let files = c.files_under(&location).await;
    c.create_table("kept", "still_here").await;
    // The same rule as the catalog's drop: not while it holds tables.
    admin(
        &c,
        Method::DELETE,
        &format!("{}/kept?retain_data=true", namespaces()),
    )
    .await
    .assert_error(409, "NamespaceNotEmptyException");
    let dropped = c
        .delete(&format!("/v1/{ORG}/namespaces/kept/tables/still_here"))
        .await;
    assert_eq!(dropped.status.as_u16(), 204);
    let files = {
        let now = c.files_under(&location).await;
        assert!(now.len() > files.len());
        now
    };

    admin(
        &c,
        Method::DELETE,
        &format!("{}/kept?retain_data=true", namespaces()),
    )
    .await
    .assert_ok(204);
    assert_eq!(c.files_under(&location).await, files);
    assert!(recoverable_named(&c, "kept").await.is_none());
    admin(&c, Method::POST, &format!("{}/kept/restore", namespaces()))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    let again = c.create_namespace("kept").await;
    assert_ne!(again["properties"]["location"], location.as_str());
    assert_eq!(grants_of(&c, "kept").await, json!([]));
    // No purge ever touches the kept bytes.
    let later = c.now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    c.catalog
        .namespaces
        .purge_expired(later, RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(c.files_under(&location).await, files);

    // A soft-deleted namespace can be finished off the same way.
    c.create_namespace("dropped_first").await;
    admin(
        &c,
        Method::DELETE,
        &format!("{}/dropped_first", namespaces()),
    )
    .await
    .assert_ok(204);
    admin(
        &c,
        Method::DELETE,
        &format!("{}/dropped_first?retain_data=true", namespaces()),
    )
    .await
    .assert_ok(204);
    assert!(recoverable_named(&c, "dropped_first").await.is_none());
    c.create_namespace("dropped_first").await;
}

/// The purge's final write: the namespace row and its claims removed together.
fn namespace_removals(writes: &[Write]) -> bool {
    writes.iter().any(
        |w| matches!(w, Write::Delete { key, .. } if key.sk.starts_with(keys::NAMESPACE_PREFIX)),
    )
}

#[tokio::test]
async fn a_restore_after_the_purge_began_is_409() {
    let pause = Pause::new();
    let (c, armed) = TestCatalog::frozen_with_fault(
        Target::Write(namespace_removals),
        Fault::Pause(pause.clone()),
    )
    .await;
    let location = namespace_with_files(&c, "going").await;
    admin(
        &c,
        Method::DELETE,
        &format!("{}/going?immediate=true", namespaces()),
    )
    .await
    .assert_ok(204);
    armed.store(true, Ordering::SeqCst);
    let catalog = c.catalog.clone();
    let now = c.now_ms();
    let purge = tokio::spawn(async move {
        catalog
            .namespaces
            .purge_expired(now, RECOVERY_PERIOD, 100)
            .await
    });
    // The purge has emptied the prefix and is about to remove the row.
    pause.reached().await;
    let listed = recoverable_named(&c, "going").await.unwrap();
    assert_eq!(listed["state"], "purging");
    assert!(listed["objects_deleted"].as_u64().unwrap() > 0, "{listed}");
    admin(&c, Method::POST, &format!("{}/going/restore", namespaces()))
        .await
        .assert_error(409, "AlreadyExistsException");
    admin(
        &c,
        Method::DELETE,
        &format!("{}/going?retain_data=true", namespaces()),
    )
    .await
    .assert_error(409, "AlreadyExistsException");
    pause.resume();
    let report = purge.await.unwrap().unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/going")]);
    assert!(c.files_under(&location).await.is_empty());
}

#[tokio::test]
async fn only_org_admins_manage_the_lifecycle() {
    let c = TestCatalog::new().await;
    c.create_namespace("guarded").await;
    for token in [&c.read_token, &c.write_token] {
        for (method, path) in [
            (Method::GET, format!("{}?deleted=true", namespaces())),
            (Method::DELETE, format!("{}/guarded", namespaces())),
            (Method::POST, format!("{}/guarded/restore", namespaces())),
        ] {
            c.management(method, &path, token, None)
                .await
                .assert_error(403, "ForbiddenException");
        }
    }
    admin(
        &c,
        Method::DELETE,
        &format!("{}/guarded?immediate=yes", namespaces()),
    )
    .await
    .assert_error(400, "BadRequestException");
    admin(&c, Method::DELETE, &format!("{}/unknown", namespaces()))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    // Nothing above changed it.
    c.get(&format!("/v1/{ORG}/namespaces/guarded"))
        .await
        .assert_ok(200);
}
