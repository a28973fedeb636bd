//! registerTable and unregisterTable: an existing metadata file becomes a table that owns its
//! directory like any other, only where the org's storage holds it and nothing else owns it;
//! unregistering forgets the table and keeps every file.

use floe::model::BucketAuth;
use floe_tests::*;
use serde_json::{Value, json};

fn register_path(ns: &str) -> String {
    format!("{}/register", ns_path(ns))
}

/// The namespace's root: the parent of a table's server-assigned directory.
fn root_of(table: &Value) -> String {
    let location = table["metadata"]["location"].as_str().unwrap();
    location.rsplit_once('/').unwrap().0.to_owned()
}

/// `metadata` as another table's: a fresh uuid and `location`, written at
/// `<location>/metadata/00003-<uuid>.metadata.json`, as a migration tool would leave it.
async fn copy_as_new_table(c: &TestCatalog, metadata: &Value, location: &str) -> String {
    let mut copy = metadata.clone();
    copy["table-uuid"] = json!(uuid::Uuid::new_v4().to_string());
    copy["location"] = json!(location);
    let file = format!(
        "{location}/metadata/00003-{}.metadata.json",
        uuid::Uuid::new_v4()
    );
    c.overwrite(&file, serde_json::to_vec(&copy).unwrap()).await;
    file
}

async fn source_table(c: &TestCatalog, ns: &str) -> Value {
    c.create_namespace(ns).await;
    c.create_table(ns, "source").await;
    c.append_snapshot(ADMIN_TOKEN, ns, "source", 1)
        .await
        .assert_ok(200);
    let loaded = c.get(&table_path(ns, "source")).await;
    loaded.assert_ok(200).clone()
}

fn register_body(name: &str, file: &str) -> Value {
    json!({"name": name, "metadata-location": file})
}

#[tokio::test]
async fn a_copied_table_registers_loads_and_takes_commits() {
    let c = TestCatalog::new().await;
    let source = source_table(&c, "reg").await;
    let location = format!("{}/legacy-orders", root_of(&source));
    let file = copy_as_new_table(&c, &source["metadata"], &location).await;
    let registered = c
        .post(&register_path("reg"), register_body("orders", &file))
        .await;
    let body = registered.assert_ok(200);
    assert_eq!(body["metadata-location"], file);
    assert_eq!(body["metadata"]["location"], location);
    assert_eq!(
        body["metadata"]["snapshots"],
        source["metadata"]["snapshots"]
    );

    let loaded = c.get(&table_path("reg", "orders")).await;
    assert_eq!(loaded.assert_ok(200)["metadata-location"], file);
    let listed = c.get(&tables_path("reg")).await;
    let names: Vec<&str> = listed.assert_ok(200)["identifiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["orders", "source"]);

    // The next commit numbers its file after the registered one, in the table's directory.
    let committed = c.append_snapshot(ADMIN_TOKEN, "reg", "orders", 2).await;
    let next = committed.assert_ok(200)["metadata-location"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        next.starts_with(&format!("{location}/metadata/00004-")),
        "{next}"
    );
    let log = committed.body["metadata"]["metadata-log"]
        .as_array()
        .unwrap();
    assert_eq!(log.last().unwrap()["metadata-file"], file);

    // One event says the table was registered, naming the file.
    let events = c
        .management(
            http::Method::GET,
            &format!("/orgs/{ORG}/events"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    let registered: Vec<&Value> = events.assert_ok(200)["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "io.floe.table.registered")
        .collect();
    assert_eq!(registered.len(), 1, "{}", events.body);
    assert_eq!(registered[0]["data"]["metadata-location"], file);
    assert_eq!(registered[0]["data"]["table"], "orders");
}

/// Each refusal is a 4xx and leaves no row behind.
#[tokio::test]
async fn files_the_table_could_not_own_are_refused() {
    let c = TestCatalog::new().await;
    let source = source_table(&c, "refuse").await;
    let root = root_of(&source);
    let source_location = source["metadata"]["location"].as_str().unwrap().to_owned();
    let outside = c.add_bucket("elsewhere", BucketAuth::Server).await;
    c.management(
        http::Method::DELETE,
        &format!("/orgs/{ORG}/buckets/elsewhere"),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(204);
    let gone_bucket = copy_as_new_table(&c, &source["metadata"], &format!("{outside}/t")).await;

    // The source table's own file: its directory is taken.
    let own = source["metadata-location"].as_str().unwrap().to_owned();
    // A fresh directory whose metadata names the source table's directory.
    let mut pointing = source["metadata"].clone();
    pointing["location"] = json!(source_location);
    pointing["table-uuid"] = json!(uuid::Uuid::new_v4().to_string());
    let pointing_file = format!("{root}/fresh-dir/metadata/00001-a.metadata.json");
    c.overwrite(&pointing_file, serde_json::to_vec(&pointing).unwrap())
        .await;
    // Inside the source's directory, under a name of its own.
    let inside = copy_as_new_table(
        &c,
        &source["metadata"],
        &format!("{source_location}/nested"),
    )
    .await;
    // Tampered: the current snapshot is not among the snapshots.
    let mut tampered = source["metadata"].clone();
    tampered["location"] = json!(format!("{root}/tampered"));
    tampered["current-snapshot-id"] = json!(424242);
    let tampered_file = format!("{root}/tampered/metadata/00001-b.metadata.json");
    c.overwrite(&tampered_file, serde_json::to_vec(&tampered).unwrap())
        .await;
    // Not JSON at all.
    let garbage_file = format!("{root}/garbage/metadata/00001-c.metadata.json");
    c.overwrite(&garbage_file, b"{\"format-version\": 2,".to_vec())
        .await;
    // A write path outside the directory.
    let mut escaping = source["metadata"].clone();
    escaping["location"] = json!(format!("{root}/escaping"));
    escaping["table-uuid"] = json!(uuid::Uuid::new_v4().to_string());
    escaping["properties"]["write.data.path"] = json!(format!("{source_location}/data"));
    let escaping_file = format!("{root}/escaping/metadata/00001-d.metadata.json");
    c.overwrite(&escaping_file, serde_json::to_vec(&escaping).unwrap())
        .await;

    for (case, file) in [
        ("a bucket the org no longer configures", gone_bucket),
        (
            "a file of no storage at all",
            "file:///etc/x/metadata/v1.metadata.json".into(),
        ),
        ("the source table's own file", own),
        ("a file whose location is another table's", pointing_file),
        ("a file inside another table's directory", inside),
        ("a tampered file", tampered_file),
        ("a file that is not JSON", garbage_file),
        ("a write path into another table", escaping_file),
        (
            "a missing file",
            format!("{root}/missing/metadata/00001-e.metadata.json"),
        ),
        (
            "not a metadata file",
            format!("{source_location}/data/x.parquet"),
        ),
    ] {
        let answer = c
            .post(&register_path("refuse"), register_body("taken", &file))
            .await;
        assert_eq!(answer.status.as_u16(), 400, "{case}: {}", answer.body);
        answer.assert_error(400, "BadRequestException");
        let message = answer.body["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{case}");
        c.get(&table_path("refuse", "taken"))
            .await
            .assert_error(404, "NoSuchTableException");
    }
    c.post(
        &register_path("missing_ns"),
        register_body("t", &own_file(&source)),
    )
    .await
    .assert_error(404, "NoSuchNamespaceException");
}

fn own_file(table: &Value) -> String {
    table["metadata-location"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_taken_name_is_a_conflict_unless_overwritten() {
    let c = TestCatalog::new().await;
    let source = source_table(&c, "over").await;
    let location = format!("{}/moved", root_of(&source));
    let first = copy_as_new_table(&c, &source["metadata"], &location).await;
    c.post(&register_path("over"), register_body("source", &first))
        .await
        .assert_error(409, "AlreadyExistsException");
    c.post(&register_path("over"), register_body("copy", &first))
        .await
        .assert_ok(200);
    // A newer file of the same table in its own directory replaces the pointer.
    let loaded = c.get(&table_path("over", "copy")).await;
    let mut newer = loaded.assert_ok(200)["metadata"].clone();
    newer["properties"]["migrated"] = json!("yes");
    let newer_file = format!(
        "{location}/metadata/00009-{}.metadata.json",
        uuid::Uuid::new_v4()
    );
    c.overwrite(&newer_file, serde_json::to_vec(&newer).unwrap())
        .await;
    c.post(&register_path("over"), register_body("copy", &newer_file))
        .await
        .assert_error(409, "AlreadyExistsException");
    let overwritten = c
        .post(
            &register_path("over"),
            json!({"name": "copy", "metadata-location": newer_file, "overwrite": true}),
        )
        .await;
    assert_eq!(
        overwritten.assert_ok(200)["metadata"]["properties"]["migrated"],
        "yes"
    );
    // Overwriting never takes another table's directory.
    c.post(
        &register_path("over"),
        json!({"name": "copy", "metadata-location": own_file(&source), "overwrite": true}),
    )
    .await
    .assert_error(400, "BadRequestException");
    let loaded = c.get(&table_path("over", "copy")).await;
    assert_eq!(loaded.assert_ok(200)["metadata-location"], newer_file);
}

#[tokio::test]
async fn unregistering_keeps_every_file_and_frees_the_directory() {
    let c = TestCatalog::new().await;
    let source = source_table(&c, "unreg").await;
    let location = source["metadata"]["location"].as_str().unwrap().to_owned();
    let before = c.files_under(&location).await;
    let answer = c
        .post(
            &format!("{}/unregister", table_path("unreg", "source")),
            json!({}),
        )
        .await;
    let body = answer.assert_ok(200);
    assert_eq!(body["metadata-location"], source["metadata-location"]);
    assert_eq!(body["metadata"], source["metadata"]);
    c.get(&table_path("unreg", "source"))
        .await
        .assert_error(404, "NoSuchTableException");
    assert_eq!(c.files_under(&location).await, before);
    // Later commits fail.
    let touch = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"after": "unregister"}}
    ]});
    c.post(&table_path("unreg", "source"), touch)
        .await
        .assert_error(404, "NoSuchTableException");
    c.post(
        &format!("{}/unregister", table_path("unreg", "source")),
        json!({}),
    )
    .await
    .assert_error(404, "NoSuchTableException");
    // The same file registers again, in its own directory, under any name.
    let again = c
        .post(
            &register_path("unreg"),
            register_body("back", &own_file(&source)),
        )
        .await;
    assert_eq!(again.assert_ok(200)["metadata"], source["metadata"]);
    c.append_snapshot(ADMIN_TOKEN, "unreg", "back", 2)
        .await
        .assert_ok(200);
}

/// Outside every namespace root, a bucket configuration's first directory is claimed whole, in
/// the store and by its marker file, and given up on unregister.
#[tokio::test]
async fn a_table_registers_from_a_bucket_configuration_of_the_org() {
    let c = TestCatalog::new().await;
    let source = source_table(&c, "byb").await;
    let root = c.add_bucket("legacy", BucketAuth::Server).await;
    let location = format!("{root}/warehouse/orders");
    let file = copy_as_new_table(&c, &source["metadata"], &location).await;
    let registered = c
        .post(&register_path("byb"), register_body("orders", &file))
        .await;
    registered.assert_ok(200);
    let marker = format!("{root}/warehouse/.arraylake-warehouse.json");
    assert!(c.exists(&marker).await, "the directory is marked");
    c.append_snapshot(ADMIN_TOKEN, "byb", "orders", 2)
        .await
        .assert_ok(200);

    // Anything else in that directory belongs to the table now.
    let sibling = copy_as_new_table(
        &c,
        &source["metadata"],
        &format!("{root}/warehouse/customers"),
    )
    .await;
    c.post(&register_path("byb"), register_body("customers", &sibling))
        .await
        .assert_error(400, "BadRequestException");
    // So is a namespace's root, seen from another namespace: its first directory on the bucket
    // is the namespace's own.
    c.create_namespace("byb_other").await;
    let stolen = copy_as_new_table(
        &c,
        &source["metadata"],
        &format!("{}/stolen", root_of(&source)),
    )
    .await;
    c.post(
        &register_path("byb_other"),
        register_body("stolen", &stolen),
    )
    .await
    .assert_error(400, "BadRequestException");

    c.post(
        &format!("{}/unregister", table_path("byb", "orders")),
        json!({}),
    )
    .await
    .assert_ok(200);
    assert!(!c.exists(&marker).await, "the directory is given up");
    assert!(c.exists(&file).await);
    c.post(&register_path("byb"), register_body("customers", &sibling))
        .await
        .assert_ok(200);
}

#[tokio::test]
async fn register_and_unregister_answer_a_retry_with_the_same_key_once() {
    let c = TestCatalog::new().await;
    let source = source_table(&c, "idem").await;
    let location = format!("{}/copy", root_of(&source));
    let file = copy_as_new_table(&c, &source["metadata"], &location).await;
    let key = uuid::Uuid::now_v7().to_string();
    let body = bytes::Bytes::from(register_body("copy", &file).to_string());
    let path = format!("/iceberg{}", register_path("idem"));
    for _ in 0..2 {
        let answer = c
            .send(
                http::Method::POST,
                &path,
                Some(ADMIN_TOKEN),
                Some(body.clone()),
                &[("idempotency-key", &key)],
            )
            .await;
        assert_eq!(answer.assert_ok(200)["metadata-location"], file);
    }
    let key = uuid::Uuid::now_v7().to_string();
    let path = format!("/iceberg{}/unregister", table_path("idem", "copy"));
    for _ in 0..2 {
        let answer = c
            .send(
                http::Method::POST,
                &path,
                Some(ADMIN_TOKEN),
                None,
                &[("idempotency-key", &key)],
            )
            .await;
        assert_eq!(answer.assert_ok(200)["metadata-location"], file);
    }
    let events = c
        .management(
            http::Method::GET,
            &format!("/orgs/{ORG}/events"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    let kinds: Vec<&str> = events.assert_ok(200)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .filter(|t| t.contains("registered"))
        .collect();
    assert_eq!(
        kinds,
        ["io.floe.table.registered", "io.floe.table.unregistered"]
    );
}

fn deletes_a_table(writes: &[floe::store::Write]) -> bool {
    writes.iter().any(
        |w| matches!(w, floe::store::Write::Delete { key, .. } if key.sk.starts_with("TABLE#")),
    )
}

/// The unregister landed but its answer was lost: the retry with the same key answers with the
/// same file, read again, though the catalog no longer knows the table.
#[tokio::test]
async fn an_unregister_whose_answer_was_lost_is_answered_again() {
    let pause = Pause::new();
    let (c, armed) = TestCatalog::with_fault(
        Target::Write(deletes_a_table),
        Fault::LandedThenUnknown(pause.clone()),
    )
    .await;
    let source = source_table(&c, "lost").await;
    let key = uuid::Uuid::now_v7().to_string();
    let path = format!("/iceberg{}/unregister", table_path("lost", "source"));
    let headers = [("idempotency-key", key.as_str())];
    let unregister = || c.send(http::Method::POST, &path, Some(ADMIN_TOKEN), None, &headers);
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let (lost, ()) = tokio::join!(unregister(), async {
        pause.reached().await;
        pause.resume();
    });
    assert!(
        lost.status.is_server_error(),
        "{}: {}",
        lost.status,
        lost.body
    );
    let retry = unregister().await;
    assert_eq!(retry.assert_ok(200)["metadata"], source["metadata"]);
    assert_eq!(retry.body["metadata-location"], source["metadata-location"]);
    c.get(&table_path("lost", "source"))
        .await
        .assert_error(404, "NoSuchTableException");
}

/// The management API's list of a namespace's dropped tables.
async fn dropped_tables(c: &TestCatalog, ns: &str) -> Vec<Value> {
    c.management(
        http::Method::GET,
        &format!("/orgs/{ORG}/namespaces/{ns}/deleted-tables"),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(200)["tables"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The events of one type, in order.
async fn events_of(c: &TestCatalog, kind: &str) -> Vec<Value> {
    let events = c
        .management(
            http::Method::GET,
            &format!("/orgs/{ORG}/events"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    events.assert_ok(200)["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind)
        .cloned()
        .collect()
}

/// Drop then register, the way Java catalogs are used (PyIceberg's own `test_register_table`,
/// Spark's `CALL system.register_table` after `DROP TABLE`): the metadata file a recoverable
/// dropped table recorded last registers the table in its namespace again, under any name. The
/// dropped entry leaves the recovery list, its directory passes to the registered table, no file
/// is touched, and one `registered` event says so.
#[tokio::test]
async fn a_dropped_tables_own_file_registers_it_again() {
    let c = TestCatalog::new().await;
    let source = source_table(&c, "undo").await;
    let location = source["metadata"]["location"].as_str().unwrap().to_owned();
    let uuid = source["metadata"]["table-uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let files = c.files_under(&location).await;
    c.delete(&table_path("undo", "source")).await.assert_ok(204);
    assert_eq!(dropped_tables(&c, "undo").await.len(), 1);

    let registered = c
        .post(
            &register_path("undo"),
            register_body("back", &own_file(&source)),
        )
        .await;
    let body = registered.assert_ok(200);
    assert_eq!(body["metadata-location"], source["metadata-location"]);
    assert_eq!(body["metadata"], source["metadata"]);
    assert!(
        dropped_tables(&c, "undo").await.is_empty(),
        "off the recovery list"
    );
    assert_eq!(c.files_under(&location).await, files, "no file touched");
    let events = events_of(&c, "io.floe.table.registered").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["data"]["table"], "back");
    assert_eq!(events[0]["data"]["table-uuid"], uuid.as_str());

    // The table is whole again: it loads, takes commits in its directory, and nothing
    // recoverable has its uuid any more.
    c.get(&table_path("undo", "back")).await.assert_ok(200);
    let committed = c.append_snapshot(ADMIN_TOKEN, "undo", "back", 2).await;
    let next = committed.assert_ok(200)["metadata-location"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(next.starts_with(&format!("{location}/metadata/")), "{next}");
    c.management(
        http::Method::POST,
        &format!("/orgs/{ORG}/namespaces/undo/deleted-tables/{uuid}/restore"),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_error(404, "NoSuchTableException");
    // Dropped again, the directory is the dropped table's once more: the same drop-then-register
    // works twice.
    c.delete(&table_path("undo", "back")).await.assert_ok(204);
    c.post(&register_path("undo"), register_body("source", &next))
        .await
        .assert_ok(200);
}

/// Only a file the catalog can verify as a dropped table's own takes it over: an older file of
/// its history, a file changed since it was recorded, another namespace's registration of it,
/// and a live table's directory stay refused, and nothing changes.
#[tokio::test]
async fn only_a_dropped_tables_verified_file_takes_it_over() {
    let c = TestCatalog::new().await;
    let source = source_table(&c, "guard").await;
    let older = own_file(&source);
    let current = c.append_snapshot(ADMIN_TOKEN, "guard", "source", 2).await;
    let current = current.assert_ok(200).clone();
    let latest = own_file(&current);
    c.create_namespace("elsewhere").await;
    c.create_table("guard", "live").await;
    let live = c.get(&table_path("guard", "live")).await;
    let live_file = own_file(live.assert_ok(200));
    c.delete(&table_path("guard", "source"))
        .await
        .assert_ok(204);

    let mut cases = vec![
        ("an older file of the dropped table", "guard", older.clone()),
        (
            "the dropped table's file, from another namespace",
            "elsewhere",
            latest.clone(),
        ),
        ("a live table's file", "guard", live_file),
    ];
    for (case, ns, file) in &cases {
        let answer = c
            .post(&register_path(ns), register_body("taken", file))
            .await;
        assert_eq!(answer.status.as_u16(), 400, "{case}: {}", answer.body);
        answer.assert_error(400, "BadRequestException");
        c.get(&table_path(ns, "taken"))
            .await
            .assert_error(404, "NoSuchTableException");
    }
    assert_eq!(dropped_tables(&c, "guard").await.len(), 1);

    // Changed since the catalog recorded it: the same name, other bytes.
    let mut changed = current["metadata"].clone();
    changed["properties"]["changed"] = json!("after the drop");
    c.overwrite(&latest, serde_json::to_vec(&changed).unwrap())
        .await;
    cases = vec![("the dropped table's file, changed", "guard", latest)];
    for (case, ns, file) in &cases {
        let answer = c
            .post(&register_path(ns), register_body("taken", file))
            .await;
        assert_eq!(answer.status.as_u16(), 400, "{case}: {}", answer.body);
    }
    assert_eq!(
        dropped_tables(&c, "guard").await.len(),
        1,
        "still recoverable"
    );
    assert!(events_of(&c, "io.floe.table.registered").await.is_empty());
}
