//! Format version 3: row lineage as Java's `TableMetadata.Builder` keeps it (a table's
//! `next-row-id` moves by each added snapshot's `added-rows`; a snapshot must carry a
//! `first-row-id` no lower than it), the v3 file shape (`current-snapshot-id` null before the
//! first snapshot), and what only v3 may hold (nanosecond timestamps, initial defaults,
//! encryption properties).

use std::collections::HashSet;
use std::sync::Arc;

use floe_tests::*;
use serde_json::{Value, json};

/// An append of `snapshot_id` on top of `metadata`'s main, claiming `added_rows` row ids from
/// `first_row_id` (left out when `None`).
fn lineage_append(
    metadata: &Value,
    snapshot_id: i64,
    first_row_id: Option<i64>,
    added_rows: Option<i64>,
) -> Value {
    let mut body = append_body(metadata, snapshot_id);
    let snapshot = body["updates"][0]["snapshot"].as_object_mut().unwrap();
    if let Some(first) = first_row_id {
        snapshot.insert("first-row-id".into(), json!(first));
    }
    if let Some(added) = added_rows {
        snapshot.insert("added-rows".into(), json!(added));
    }
    body
}

async fn create_v3(c: &TestCatalog, ns: &str, name: &str) -> Value {
    let mut body = create_table_body(name);
    body["properties"] = json!({"format-version": "3"});
    c.post(&tables_path(ns), body).await.assert_ok(200).clone()
}

/// Each snapshot's (first-row-id, added-rows), in the `snapshots` array's order.
fn row_ranges(metadata: &Value) -> Vec<(i64, i64)> {
    metadata["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["first-row-id"].as_i64().unwrap(),
                s["added-rows"].as_i64().unwrap(),
            )
        })
        .collect()
}

async fn metadata(c: &TestCatalog, ns: &str, table: &str) -> Value {
    c.get(&table_path(ns, table)).await.assert_ok(200)["metadata"].clone()
}

#[tokio::test]
async fn a_v3_table_assigns_row_ids_snapshot_by_snapshot() {
    let c = TestCatalog::new().await;
    c.create_namespace("v3").await;
    let created = create_v3(&c, "v3", "t").await;
    let file = c
        .read_json(created["metadata-location"].as_str().unwrap())
        .await;
    assert_eq!(file["format-version"], 3);
    assert_eq!(file["next-row-id"], 0);
    // Java writes a v3 table's missing current snapshot as null, where v1 and v2 had -1.
    assert!(
        file.as_object()
            .unwrap()
            .contains_key("current-snapshot-id")
    );
    assert!(file["current-snapshot-id"].is_null());
    assert_eq!(created["metadata"], file);

    let base = metadata(&c, "v3", "t").await;
    c.post(
        &table_path("v3", "t"),
        lineage_append(&base, 1, Some(0), Some(10)),
    )
    .await
    .assert_ok(200);
    let once = metadata(&c, "v3", "t").await;
    assert_eq!(once["next-row-id"], 10);
    // A writer may leave a gap; the next ids start after its range.
    c.post(
        &table_path("v3", "t"),
        lineage_append(&once, 2, Some(12), Some(5)),
    )
    .await
    .assert_ok(200);
    let twice = metadata(&c, "v3", "t").await;
    assert_eq!(twice["next-row-id"], 15);
    assert_eq!(row_ranges(&twice), [(0, 10), (12, 5)]);
    assert_eq!(twice["current-snapshot-id"], 2);

    // A snapshot on a branch claims ids from the same counter.
    let branch = json!({"requirements": [], "updates": [
        {"action": "add-snapshot", "snapshot": {
            "snapshot-id": 3, "parent-snapshot-id": 1, "sequence-number": 3,
            "timestamp-ms": twice["last-updated-ms"],
            "manifest-list": format!("{}/metadata/snap-3.avro", twice["location"].as_str().unwrap()),
            "summary": {"operation": "append"}, "schema-id": 0,
            "first-row-id": 15, "added-rows": 4}},
        {"action": "set-snapshot-ref", "ref-name": "audit", "type": "branch", "snapshot-id": 3}
    ]});
    c.post(&table_path("v3", "t"), branch).await.assert_ok(200);
    let branched = metadata(&c, "v3", "t").await;
    assert_eq!(branched["next-row-id"], 19);
    assert_eq!(branched["current-snapshot-id"], 2);
    assert_eq!(branched["refs"]["audit"]["snapshot-id"], 3);
}

#[tokio::test]
async fn row_ids_behind_the_table_conflict_and_missing_ones_are_refused() {
    let c = TestCatalog::new().await;
    c.create_namespace("v3r").await;
    create_v3(&c, "v3r", "t").await;
    let base = metadata(&c, "v3r", "t").await;
    c.post(
        &table_path("v3r", "t"),
        lineage_append(&base, 1, Some(0), Some(10)),
    )
    .await
    .assert_ok(200);
    let current = c.get(&table_path("v3r", "t")).await.assert_ok(200).clone();
    let metadata_location = current["metadata-location"].clone();
    let latest = current["metadata"].clone();

    // Ids another writer already took: the writer must re-read and renumber, so 409.
    let stale = c
        .post(
            &table_path("v3r", "t"),
            lineage_append(&latest, 2, Some(3), Some(5)),
        )
        .await;
    stale.assert_error(409, "CommitFailedException");
    assert!(
        stale.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("first-row-id is behind table next-row-id: 3 < 10"),
        "{}",
        stale.body
    );
    // No first-row-id, or one without its added-rows: not a v3 snapshot.
    for (first, added) in [(None, Some(5)), (Some(10), None), (None, None)] {
        c.post(
            &table_path("v3r", "t"),
            lineage_append(&latest, 2, first, added),
        )
        .await
        .assert_error(400, "BadRequestException");
    }
    // Negative ids do not parse.
    c.post(
        &table_path("v3r", "t"),
        lineage_append(&latest, 2, Some(-1), Some(5)),
    )
    .await
    .assert_error(400, "BadRequestException");
    let after = c.get(&table_path("v3r", "t")).await.assert_ok(200).clone();
    assert_eq!(after["metadata-location"], metadata_location);
    assert_eq!(after["metadata"]["next-row-id"], 10);
}

#[tokio::test]
async fn upgrading_to_v3_starts_row_lineage_and_never_goes_back() {
    let c = TestCatalog::new().await;
    c.create_namespace("up3").await;
    c.create_table("up3", "t").await;
    c.append_snapshot(ADMIN_TOKEN, "up3", "t", 1)
        .await
        .assert_ok(200);
    let upgrade = |v: i64| json!({"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": v}]});
    let upgraded = c
        .post(&table_path("up3", "t"), upgrade(3))
        .await
        .assert_ok(200)
        .clone();
    let file = c
        .read_json(upgraded["metadata-location"].as_str().unwrap())
        .await;
    assert_eq!(file["format-version"], 3);
    assert_eq!(file["next-row-id"], 0);
    // The v2 snapshot keeps no row ids; the first v3 one must bring them.
    assert!(file["snapshots"][0].get("first-row-id").is_none());
    assert_eq!(file["current-snapshot-id"], 1);
    let latest = metadata(&c, "up3", "t").await;
    c.post(
        &table_path("up3", "t"),
        lineage_append(&latest, 2, None, None),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.post(
        &table_path("up3", "t"),
        lineage_append(&latest, 2, Some(0), Some(3)),
    )
    .await
    .assert_ok(200);
    assert_eq!(metadata(&c, "up3", "t").await["next-row-id"], 3);

    c.post(&table_path("up3", "t"), upgrade(2))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&table_path("up3", "t"), upgrade(4))
        .await
        .assert_error(400, "BadRequestException");
    // Created at v1 and upgraded straight to v3.
    let mut v1 = create_table_body("old");
    v1["properties"] = json!({"format-version": "1"});
    c.post(&tables_path("up3"), v1).await.assert_ok(200);
    let answer = c
        .post(&table_path("up3", "old"), upgrade(3))
        .await
        .assert_ok(200)
        .clone();
    assert_eq!(answer["metadata"]["format-version"], 3);
    assert_eq!(answer["metadata"]["next-row-id"], 0);
}

#[tokio::test]
async fn only_v3_holds_nanosecond_timestamps_initial_defaults_and_encryption_properties() {
    let c = TestCatalog::new().await;
    c.create_namespace("only3").await;
    let nanos_schema = json!({"type": "struct", "fields": [
        {"id": 1, "name": "id", "type": "long", "required": true},
        {"id": 2, "name": "at", "type": "timestamptz_ns", "required": false}
    ]});
    for version in ["1", "2"] {
        let refused = c
            .post(
                &tables_path("only3"),
                json!({"name": "nanos", "schema": nanos_schema, "properties": {"format-version": version}}),
            )
            .await;
        refused.assert_error(400, "BadRequestException");
        assert!(
            refused.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Invalid type for at: timestamptz_ns is not supported until v3"),
            "{}",
            refused.body
        );
    }
    let encrypted = c
        .post(
            &tables_path("only3"),
            json!({"name": "enc", "schema": create_table_body("enc")["schema"],
                   "properties": {"encryption.key-id": "k1"}}),
        )
        .await;
    encrypted.assert_error(400, "BadRequestException");
    assert!(
        encrypted.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid properties for v2: [encryption.key-id]")
    );
    assert_eq!(
        c.get(&format!("/v1/{ORG}/namespaces/only3/tables"))
            .await
            .assert_ok(200)["identifiers"],
        json!([])
    );

    c.post(
        &tables_path("only3"),
        json!({"name": "nanos", "schema": nanos_schema, "properties": {"format-version": "3"}}),
    )
    .await
    .assert_ok(200);

    // A column added with defaults: refused on a v2 table, kept as written on a v3 one.
    let with_defaults = |last_column: i64| {
        json!({"requirements": [], "updates": [
            {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
                {"id": 1, "name": "id", "type": "long", "required": true},
                {"id": 2, "name": "data", "type": "string", "required": false},
                {"id": 3, "name": "region", "type": "string", "required": true,
                 "initial-default": "eu", "write-default": "us"}
            ]}, "last-column-id": last_column},
            {"action": "set-current-schema", "schema-id": -1}
        ]})
    };
    c.create_table("only3", "v2").await;
    let before =
        c.get(&table_path("only3", "v2")).await.assert_ok(200)["metadata-location"].clone();
    let refused = c.post(&table_path("only3", "v2"), with_defaults(3)).await;
    refused.assert_error(400, "BadRequestException");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid initial default for region: non-null default (\"eu\") is not supported until v3"),
        "{}",
        refused.body
    );
    assert_eq!(
        c.get(&table_path("only3", "v2")).await.assert_ok(200)["metadata-location"],
        before
    );
    // Upgrading in the same commit, before the schema, is what makes it valid (Java checks the
    // version the table has when the schema is added).
    let mut upgrade_first = with_defaults(3);
    upgrade_first["updates"].as_array_mut().unwrap().insert(
        0,
        json!({"action": "upgrade-format-version", "format-version": 3}),
    );
    let answer = c
        .post(&table_path("only3", "v2"), upgrade_first)
        .await
        .assert_ok(200)
        .clone();
    let file = c
        .read_json(answer["metadata-location"].as_str().unwrap())
        .await;
    let region = &file["schemas"][1]["fields"][2];
    assert_eq!(region["initial-default"], "eu");
    assert_eq!(region["write-default"], "us");
    assert_eq!(file["current-schema-id"], 1);
}

/// Eight writers append to one v3 table at once, each numbering its rows from the table it
/// read. Every attempt lands or gets 409 and re-reads; in the end no two snapshots share a row
/// id and the table's next-row-id is exactly the rows added.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_v3_writers_never_share_a_row_id() {
    const WRITERS: i64 = 8;
    const COMMITS: i64 = 4;
    let c = Arc::new(TestCatalog::new().await);
    c.create_namespace("v3c").await;
    create_v3(&c, "v3c", "t").await;
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..COMMITS {
                let snapshot_id = 1_000 * (writer + 1) + n;
                let rows = writer + 1;
                loop {
                    let base = metadata(&c, "v3c", "t").await;
                    let next = base["next-row-id"].as_i64().unwrap();
                    let answer = c
                        .post(
                            &table_path("v3c", "t"),
                            lineage_append(&base, snapshot_id, Some(next), Some(rows)),
                        )
                        .await;
                    match answer.status.as_u16() {
                        200 => break,
                        409 => answer.assert_error(409, "CommitFailedException"),
                        other => panic!("unexpected status {other}: {}", answer.body),
                    };
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let last = metadata(&c, "v3c", "t").await;
    let mut ranges = row_ranges(&last);
    assert_eq!(ranges.len() as i64, WRITERS * COMMITS);
    ranges.sort();
    let mut end = 0;
    for (first, added) in &ranges {
        assert_eq!(
            *first, end,
            "row ids must follow on without overlap: {ranges:?}"
        );
        end = first + added;
    }
    let total: i64 = (1..=WRITERS).sum::<i64>() * COMMITS;
    assert_eq!(last["next-row-id"].as_i64().unwrap(), total);
    let ids: HashSet<i64> = last["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot-id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len() as i64, WRITERS * COMMITS);
}

/// A v3 table written elsewhere registers with its row lineage, and its next commit continues
/// from the file's `next-row-id`.
#[tokio::test]
async fn a_v3_file_registers_and_keeps_counting_rows() {
    let c = TestCatalog::new().await;
    c.create_namespace("reg3").await;
    create_v3(&c, "reg3", "source").await;
    let base = metadata(&c, "reg3", "source").await;
    c.post(
        &table_path("reg3", "source"),
        lineage_append(&base, 1, Some(0), Some(42)),
    )
    .await
    .assert_ok(200);
    let source = metadata(&c, "reg3", "source").await;
    let root = source["location"]
        .as_str()
        .unwrap()
        .rsplit_once('/')
        .unwrap()
        .0
        .to_owned();
    let location = format!("{root}/migrated");
    let mut copy = source.clone();
    copy["table-uuid"] = json!(uuid::Uuid::new_v4().to_string());
    copy["location"] = json!(location);
    copy["snapshots"][0]["manifest-list"] = json!(format!("{location}/metadata/snap-1.avro"));
    let file = format!(
        "{location}/metadata/00001-{}.metadata.json",
        uuid::Uuid::new_v4()
    );
    c.overwrite(&file, serde_json::to_vec(&copy).unwrap()).await;

    let registered = c
        .post(
            &format!("{}/register", ns_path("reg3")),
            json!({"name": "migrated", "metadata-location": file}),
        )
        .await
        .assert_ok(200)
        .clone();
    assert_eq!(registered["metadata"]["format-version"], 3);
    assert_eq!(registered["metadata"]["next-row-id"], 42);
    let latest = metadata(&c, "reg3", "migrated").await;
    c.post(
        &table_path("reg3", "migrated"),
        lineage_append(&latest, 2, Some(41), Some(1)),
    )
    .await
    .assert_error(409, "CommitFailedException");
    c.post(
        &table_path("reg3", "migrated"),
        lineage_append(&latest, 2, Some(42), Some(8)),
    )
    .await
    .assert_ok(200);
    assert_eq!(metadata(&c, "reg3", "migrated").await["next-row-id"], 50);
}

/// Java's fresh ids keep each field's defaults (`NestedField.from(field).withId(..)`): a table
/// created with them has them, under the ids it was given. A default the catalog could not keep
/// (the iceberg crate reads no nanosecond timestamp default) is refused rather than dropped.
#[tokio::test]
async fn a_v3_create_keeps_defaults_through_fresh_ids_or_refuses_them() {
    let c = TestCatalog::new().await;
    c.create_namespace("def3").await;
    let body = |at_default: Value| {
        json!({"name": "t", "properties": {"format-version": "3"}, "schema": {"type": "struct", "fields": [
            {"id": 7, "name": "id", "type": "long", "required": true},
            {"id": 9, "name": "point", "type": {"type": "struct", "fields": [
                {"id": 11, "name": "x", "type": "double", "required": true, "initial-default": 0.5, "write-default": 1.5}
            ]}, "required": false},
            {"id": 8, "name": "at", "type": "timestamptz", "required": false,
             "initial-default": at_default, "write-default": "2026-01-01T00:00:00+00:00"}
        ]}})
    };
    let answer = c
        .post(
            &tables_path("def3"),
            body(json!("2025-01-01T00:00:00.000001+00:00")),
        )
        .await
        .assert_ok(200)
        .clone();
    let file = c
        .read_json(answer["metadata-location"].as_str().unwrap())
        .await;
    let fields = &file["schemas"][0]["fields"];
    assert_eq!(fields[1]["id"], 2, "{fields}");
    assert_eq!(fields[1]["type"]["fields"][0]["id"], 4);
    assert_eq!(fields[1]["type"]["fields"][0]["initial-default"], 0.5);
    assert_eq!(fields[1]["type"]["fields"][0]["write-default"], 1.5);
    assert_eq!(fields[2]["id"], 3);
    assert_eq!(
        fields[2]["initial-default"],
        "2025-01-01T00:00:00.000001+00:00"
    );
    assert_eq!(fields[2]["write-default"], "2026-01-01T00:00:00+00:00");
    assert_eq!(file["last-column-id"], 4);

    // Unreadable defaults, on create and on add-schema: 400, nothing written.
    let mut nanos = body(json!("2025-01-01T00:00:00.000000001"));
    nanos["name"] = json!("nanos");
    nanos["schema"]["fields"][2]["type"] = json!("timestamp_ns");
    nanos["schema"]["fields"][2]["write-default"] = json!(null);
    let refused = c.post(&tables_path("def3"), nanos).await;
    refused.assert_error(400, "BadRequestException");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initial-default \"2025-01-01T00:00:00.000000001\" of field 'at' cannot be kept as a timestamp_ns value"),
        "{}",
        refused.body
    );
    let before = c.get(&table_path("def3", "t")).await.assert_ok(200)["metadata-location"].clone();
    let wrong = json!({"requirements": [], "updates": [{"action": "add-schema", "schema": {"type": "struct", "fields": [
        {"id": 1, "name": "id", "type": "long", "required": true},
        {"id": 5, "name": "qty", "type": "int", "required": false, "initial-default": "many"}
    ]}}]});
    c.post(&table_path("def3", "t"), wrong)
        .await
        .assert_error(400, "BadRequestException");
    assert_eq!(
        c.get(&table_path("def3", "t")).await.assert_ok(200)["metadata-location"],
        before
    );
    let listed = c.get(&tables_path("def3")).await.assert_ok(200)["identifiers"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // Nor may a file written elsewhere bring one in by registration.
    let mut copy = file.clone();
    let location = format!("{}-copy", file["location"].as_str().unwrap());
    copy["table-uuid"] = json!(uuid::Uuid::new_v4().to_string());
    copy["location"] = json!(location);
    copy["schemas"][0]["fields"][2]["type"] = json!("timestamptz_ns");
    let copied = format!(
        "{location}/metadata/00001-{}.metadata.json",
        uuid::Uuid::new_v4()
    );
    c.overwrite(&copied, serde_json::to_vec(&copy).unwrap())
        .await;
    c.post(
        &format!("{}/register", ns_path("def3")),
        json!({"name": "copied", "metadata-location": copied}),
    )
    .await
    .assert_error(400, "BadRequestException");
}

/// Encryption keys (v3's `encryption-keys`) are added and removed by the spec's updates; the v3
/// types the iceberg crate cannot represent are refused with nothing created.
#[tokio::test]
async fn encryption_keys_come_and_go_and_unrepresentable_types_are_refused() {
    let c = TestCatalog::new().await;
    c.create_namespace("keys3").await;
    create_v3(&c, "keys3", "t").await;
    let key = json!({"key-id": "k1", "encrypted-key-metadata": "aWNlYmVyZw==",
                     "encrypted-by-id": "kms-1", "properties": {"algo": "AES-256"}});
    let added = c
        .post(
            &table_path("keys3", "t"),
            json!({"requirements": [], "updates": [{"action": "add-encryption-key", "encryption-key": key}]}),
        )
        .await
        .assert_ok(200)
        .clone();
    let file = c
        .read_json(added["metadata-location"].as_str().unwrap())
        .await;
    assert_eq!(file["encryption-keys"], json!([key]));
    let removed = c
        .post(
            &table_path("keys3", "t"),
            json!({"requirements": [], "updates": [{"action": "remove-encryption-key", "key-id": "k1"}]}),
        )
        .await
        .assert_ok(200)
        .clone();
    let file = c
        .read_json(removed["metadata-location"].as_str().unwrap())
        .await;
    assert!(file.get("encryption-keys").is_none(), "{file}");

    for v3_type in [
        "variant",
        "unknown",
        "geometry",
        "geography(OGC:CRS84, spherical)",
    ] {
        let body = json!({"name": "typed", "properties": {"format-version": "3"}, "schema": {"type": "struct", "fields": [
            {"id": 1, "name": "id", "type": "long", "required": true},
            {"id": 2, "name": "v", "type": v3_type, "required": false}
        ]}});
        c.post(&tables_path("keys3"), body)
            .await
            .assert_error(400, "BadRequestException");
    }
    let listed = c.get(&tables_path("keys3")).await.assert_ok(200)["identifiers"].clone();
    assert_eq!(listed, json!([{"namespace": ["keys3"], "name": "t"}]));
}
