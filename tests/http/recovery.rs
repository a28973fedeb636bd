//! Dropped tables: recoverable for the recovery period with their data (table grants stay on
//! names, never with a dropped table), listed,
//! restored (under their name or another), purged at the end of the period (their own
//! directory and only it) or at once by an admin, and never both restored and purged.

use std::sync::Arc;

use floe::authz::Action;
use floe::catalog::purge::RECOVERY_PERIOD;
use floe::model::BucketAuth;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

fn deleted_tables(ns: &str) -> String {
    format!("/orgs/{ORG}/namespaces/{ns}/deleted-tables")
}

async fn listed(c: &TestCatalog, ns: &str) -> Vec<Value> {
    c.management(Method::GET, &deleted_tables(ns), ADMIN_TOKEN, None)
        .await
        .assert_ok(200)["tables"]
        .as_array()
        .unwrap()
        .clone()
}

async fn restore(c: &TestCatalog, ns: &str, uuid: &str, body: Option<Value>) -> Answer {
    c.management(
        Method::POST,
        &format!("{}/{uuid}/restore", deleted_tables(ns)),
        ADMIN_TOKEN,
        body,
    )
    .await
}

/// A table with a snapshot and a data file; its uuid and location.
async fn table_with_data(c: &TestCatalog, ns: &str, name: &str) -> (String, String) {
    c.create_table(ns, name).await;
    c.append_snapshot(ADMIN_TOKEN, ns, name, 1)
        .await
        .assert_ok(200);
    let metadata = c.get(&table_path(ns, name)).await.assert_ok(200)["metadata"].clone();
    let location = metadata["location"].as_str().unwrap().to_owned();
    c.overwrite(
        &format!("{location}/data/part-00000.parquet"),
        b"PAR1 rows PAR1".to_vec(),
    )
    .await;
    (
        metadata["table-uuid"].as_str().unwrap().to_owned(),
        location,
    )
}

async fn drop(c: &TestCatalog, ns: &str, name: &str, purge_requested: bool) {
    let path = format!(
        "{}{}",
        table_path(ns, name),
        if purge_requested {
            "?purgeRequested=true"
        } else {
            ""
        }
    );
    assert_eq!(c.delete(&path).await.status.as_u16(), 204);
}

fn after_the_period(c: &TestCatalog) -> u64 {
    c.now_ms() + RECOVERY_PERIOD.as_millis() as u64 + 1_000
}

#[tokio::test]
async fn a_dropped_table_comes_back_with_its_data_under_the_grants_of_its_name() {
    let c = TestCatalog::frozen().await;
    c.create_namespace("rec").await;
    let (uuid, location) = table_with_data(&c, "rec", "orders").await;
    let before = c
        .get(&table_path("rec", "orders"))
        .await
        .assert_ok(200)
        .clone();
    let files = c.files_under(&location).await;
    let admin = admin_context(&c).await;
    let (reader, token) = principal_without_role(&c, "reader").await;
    c.catalog
        .access
        .put_grant(&admin, "rec", &reader.id, Some("orders"), Action::Read)
        .await
        .unwrap();
    let load_as_reader = |name: &'static str| {
        let (c, token) = (&c, token.clone());
        async move {
            c.request(Method::GET, &table_path("rec", name), Some(&token), None)
                .await
                .status
                .as_u16()
        }
    };
    assert_eq!(load_as_reader("orders").await, 200);

    drop(&c, "rec", "orders", false).await;
    c.get(&table_path("rec", "orders"))
        .await
        .assert_error(404, "NoSuchTableException");
    assert_eq!(
        c.files_under(&location).await,
        files,
        "a drop touches no file"
    );
    let entries = listed(&c, "rec").await;
    let now = floe::events::rfc3339(c.now_ms());
    let purge_at = floe::events::rfc3339(c.now_ms() + RECOVERY_PERIOD.as_millis() as u64);
    assert_eq!(
        entries,
        vec![
            json!({"name": "orders", "table-uuid": uuid, "dropped-at": now,
                    "purge-at": purge_at, "state": "deleted", "purges-files": true})
        ]
    );

    // The name is free at once, and its table grant stays on it (the reference: table grants
    // survive a table being dropped and recreated under the same name).
    c.create_table("rec", "orders").await;
    assert_eq!(load_as_reader("orders").await, 200);
    restore(&c, "rec", &uuid, None)
        .await
        .assert_error(409, "AlreadyExistsException");
    // Nor may a view hold the name it comes back under.
    c.post(
        &format!("{}/views", ns_path("rec")),
        json!({"name": "as_view", "schema": {"type": "struct", "schema-id": 0, "fields": []},
               "view-version": {"version-id": 1, "schema-id": 0, "timestamp-ms": 1,
                                "summary": {}, "default-namespace": ["rec"],
                                "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}]}}),
    )
    .await
    .assert_ok(200);
    restore(&c, "rec", &uuid, Some(json!({"name": "as_view"})))
        .await
        .assert_error(409, "AlreadyExistsException");

    let restored = restore(&c, "rec", &uuid, Some(json!({"name": "orders_v1"})))
        .await
        .assert_ok(200)
        .clone();
    assert_eq!(restored, json!({"name": "orders_v1", "table-uuid": uuid}));
    let back = c
        .get(&table_path("rec", "orders_v1"))
        .await
        .assert_ok(200)
        .clone();
    assert_eq!(back["metadata-location"], before["metadata-location"]);
    assert_eq!(back["metadata"], before["metadata"]);
    assert_eq!(
        load_as_reader("orders_v1").await,
        403,
        "a dropped table holds no grants: under a new name, that name's grants cover it"
    );
    assert_eq!(
        load_as_reader("orders").await,
        200,
        "the name keeps its grant"
    );
    assert!(listed(&c, "rec").await.is_empty());
    // It takes commits as before, in its own directory.
    c.append_snapshot(ADMIN_TOKEN, "rec", "orders_v1", 2)
        .await
        .assert_ok(200);
    // Restoring twice finds nothing.
    restore(&c, "rec", &uuid, None)
        .await
        .assert_error(404, "NoSuchTableException");

    let events = c
        .management(
            Method::GET,
            &format!("/orgs/{ORG}/events"),
            ADMIN_TOKEN,
            None,
        )
        .await
        .assert_ok(200)["events"]
        .clone();
    let restored_events: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "io.floe.table.restored")
        .collect();
    assert_eq!(restored_events.len(), 1);
    assert_eq!(restored_events[0]["data"]["table"], "orders_v1");
}

#[tokio::test]
async fn the_purge_deletes_a_dropped_tables_directory_at_the_end_of_the_period_and_only_it() {
    let c = TestCatalog::frozen().await;
    let ns = c.create_namespace("gone").await;
    let root = ns["properties"]["location"].as_str().unwrap().to_owned();
    let (uuid, location) = table_with_data(&c, "gone", "old").await;
    let (_, kept) = table_with_data(&c, "gone", "kept").await;
    // A neighbour whose name starts like the dropped directory's.
    let neighbour = format!("{location}-neighbour/stray.txt");
    c.overwrite(&neighbour, b"stays".to_vec()).await;
    let kept_files = c.files_under(&kept).await;
    drop(&c, "gone", "old", false).await;

    let early = c.catalog.purge_due(c.now_ms()).await.unwrap();
    assert!(!early.did_anything(), "{early:?}");
    assert!(!c.files_under(&location).await.is_empty());

    let run = c.catalog.purge_due(after_the_period(&c)).await.unwrap();
    assert_eq!(run.tables.purged, [format!("{ORG}/gone/old@{uuid}")]);
    assert!(run.tables.objects_deleted >= 3, "{run:?}");
    assert!(c.files_under(&location).await.is_empty());
    assert_eq!(c.files_under(&kept).await, kept_files);
    assert!(c.exists(&neighbour).await);
    assert!(c.exists(&format!("{root}/.arraylake-warehouse.json")).await);
    assert!(listed(&c, "gone").await.is_empty());
    restore(&c, "gone", &uuid, None)
        .await
        .assert_error(404, "NoSuchTableException");
    // Its directory is free again: a table may be created there.
    let mut body = create_table_body("reborn");
    body["location"] = json!(location);
    c.post(&tables_path("gone"), body).await.assert_ok(200);
    // A second run has nothing left to do.
    let again = c.catalog.purge_due(after_the_period(&c)).await.unwrap();
    assert!(again.tables.purged.is_empty());
}

#[tokio::test]
async fn a_namespace_that_keeps_dropped_data_keeps_it_unless_the_drop_asked_for_a_purge() {
    let c = TestCatalog::frozen().await;
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["keep"], "properties": {"floe.dropped-tables.retain-data": "true"}}),
    )
    .await
    .assert_ok(200);
    let (_, kept) = table_with_data(&c, "keep", "kept").await;
    let (_, purged) = table_with_data(&c, "keep", "purged").await;
    let kept_files = c.files_under(&kept).await;
    drop(&c, "keep", "kept", false).await;
    drop(&c, "keep", "purged", true).await;
    let flags: Vec<(Value, Value)> = listed(&c, "keep")
        .await
        .iter()
        .map(|t| (t["name"].clone(), t["purges-files"].clone()))
        .collect();
    assert!(flags.contains(&(json!("kept"), json!(false))), "{flags:?}");
    assert!(flags.contains(&(json!("purged"), json!(true))), "{flags:?}");

    let run = c.catalog.purge_due(after_the_period(&c)).await.unwrap();
    assert_eq!(run.tables.purged.len(), 2, "{run:?}");
    assert_eq!(c.files_under(&kept).await, kept_files);
    assert!(c.files_under(&purged).await.is_empty());
    assert!(listed(&c, "keep").await.is_empty());
    // The kept files' directory stays claimed: no table may be created over them.
    let mut body = create_table_body("over");
    body["location"] = json!(kept);
    c.post(&tables_path("keep"), body)
        .await
        .assert_error(400, "BadRequestException");
}

#[tokio::test]
async fn an_admin_purges_a_dropped_table_now() {
    let c = TestCatalog::frozen().await;
    c.create_namespace("now").await;
    let (uuid, location) = table_with_data(&c, "now", "t").await;
    drop(&c, "now", "t", false).await;
    let (writer, token) = principal_without_role(&c, "writer").await;
    let admin = admin_context(&c).await;
    c.catalog
        .access
        .put_grant(&admin, "now", &writer.id, None, Action::Write)
        .await
        .unwrap();
    // Write on the namespace lists; purging needs manage.
    let as_writer = c
        .management(Method::GET, &deleted_tables("now"), &token, None)
        .await;
    assert_eq!(as_writer.assert_ok(200)["tables"][0]["table-uuid"], uuid);
    c.management(
        Method::DELETE,
        &format!("{}/{uuid}", deleted_tables("now")),
        &token,
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");

    assert_eq!(
        c.management(
            Method::DELETE,
            &format!("{}/{uuid}", deleted_tables("now")),
            ADMIN_TOKEN,
            None
        )
        .await
        .status
        .as_u16(),
        204
    );
    let entry = listed(&c, "now").await;
    assert_eq!(entry[0]["state"], "purging");
    assert_eq!(entry[0]["purge-at"], floe::events::rfc3339(c.now_ms()));
    restore(&c, "now", &uuid, None)
        .await
        .assert_error(404, "NoSuchTableException");
    // Taken by the next run, whatever the period.
    let run = c.catalog.purge_due(c.now_ms()).await.unwrap();
    assert_eq!(run.tables.purged.len(), 1, "{run:?}");
    assert!(c.files_under(&location).await.is_empty());

    for bad in ["not-a-uuid", "00000000-0000-0000-0000-000000000000"] {
        restore(&c, "now", bad, None)
            .await
            .assert_error(404, "NoSuchTableException");
        c.management(
            Method::DELETE,
            &format!("{}/{bad}", deleted_tables("now")),
            ADMIN_TOKEN,
            None,
        )
        .await
        .assert_error(404, "NoSuchTableException");
    }
    restore(&c, "now", &uuid, Some(json!({"name": ""})))
        .await
        .assert_error(400, "BadRequestException");
    restore(&c, "now", &uuid, Some(json!({"nom": "x"})))
        .await
        .assert_error(400, "BadRequestException");
}

#[tokio::test]
async fn a_dropped_override_table_is_purged_with_its_namespace() {
    let c = TestCatalog::frozen().await;
    let other = c.add_bucket("big", BucketAuth::Server).await;
    c.create_namespace("ovr").await;
    let mut body = create_table_body("huge");
    body["properties"] = json!({"arraylake.bucket": "big"});
    let location = c.post(&tables_path("ovr"), body).await.assert_ok(200)["metadata"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(location.starts_with(&other));
    c.overwrite(&format!("{location}/data/x.parquet"), b"PAR1".to_vec())
        .await;
    drop(&c, "ovr", "huge", false).await;
    // The namespace is purged now, long before the table's own period ends: its purge takes
    // the dropped table's override prefix (outside the namespace's) with it.
    assert_eq!(
        c.management(
            Method::DELETE,
            &format!("/orgs/{ORG}/namespaces/ovr?immediate=true"),
            ADMIN_TOKEN,
            None
        )
        .await
        .status
        .as_u16(),
        204
    );
    let run = c.catalog.purge_due(c.now_ms()).await.unwrap();
    assert!(run.failures().is_empty(), "{run:?}");
    assert!(run.tables.purged.is_empty(), "not due on its own: {run:?}");
    assert_eq!(run.namespaces.purged, [format!("{ORG}/ovr")]);
    assert!(c.files_under(&location).await.is_empty());
    // Its prefix is free again.
    c.create_namespace("ovr2").await;
    let mut again = create_table_body("huge");
    again["properties"] = json!({"arraylake.bucket": "big"});
    c.post(&tables_path("ovr2"), again).await.assert_ok(200);
}

/// A restore and the purge race for the same dropped table, many rounds: exactly one wins;
/// a restored table keeps every file, a purged one is gone from the listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restore_and_purge_never_both_win() {
    const ROUNDS: usize = 20;
    let c = Arc::new(TestCatalog::frozen().await);
    c.create_namespace("race").await;
    let (mut restored, mut purged) = (0, 0);
    for round in 0..ROUNDS {
        let name = format!("t{round}");
        let (uuid, location) = table_with_data(&c, "race", &name).await;
        let files = c.files_under(&location).await;
        drop(&c, "race", &name, false).await;
        let later = after_the_period(&c);
        let purge = {
            let c = c.clone();
            tokio::spawn(async move { c.catalog.purge_due(later).await.unwrap() })
        };
        let restoring = {
            let (c, uuid) = (c.clone(), uuid.clone());
            tokio::spawn(async move { restore(&c, "race", &uuid, None).await })
        };
        let run = purge.await.unwrap();
        let answer = restoring.await.unwrap();
        match answer.status.as_u16() {
            200 => {
                restored += 1;
                assert!(run.tables.purged.is_empty(), "round {round}: {run:?}");
                assert_eq!(c.files_under(&location).await, files, "round {round}");
                c.get(&table_path("race", &name)).await.assert_ok(200);
            }
            404 => {
                purged += 1;
                assert_eq!(run.tables.purged.len(), 1, "round {round}: {run:?}");
                assert!(c.files_under(&location).await.is_empty(), "round {round}");
                c.get(&table_path("race", &name))
                    .await
                    .assert_error(404, "NoSuchTableException");
            }
            other => panic!("round {round}: restore answered {other}: {}", answer.body),
        }
    }
    assert_eq!(restored + purged, ROUNDS);
    eprintln!("restore won {restored} rounds, the purge {purged}");
}
