//! Behaviour that follows Iceberg's Java catalog where the `iceberg` crate alone would differ:
//! rebased commits, requirement wording, create transactions, default properties, list order.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use floe_tests::*;
use serde_json::{Value, json};

fn set_property(uuid: &Value, key: &str, value: &str) -> Value {
    json!({
        "requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
        "updates": [{"action": "set-properties", "updates": {key: value}}]
    })
}

/// Another writer lands while a commit waits at its swap: the commit, whose requirements still
/// hold, is rebased onto the new state and lands too (Java's server does the same).
#[tokio::test]
async fn a_commit_that_loses_the_swap_is_rebased_when_its_requirements_hold() {
    let pause = Pause::new();
    let (c, armed) =
        TestCatalog::with_fault(Target::Write(is_table_swap), Fault::Pause(pause.clone())).await;
    c.create_namespace("rb").await;
    let created = c.create_table("rb", "t").await;
    let uuid = created["metadata"]["table-uuid"].clone();
    armed.store(true, Ordering::SeqCst);
    let path = table_path("rb", "t");
    let slow = c.post(&path, set_property(&uuid, "slow", "1"));
    let fast = async {
        pause.reached().await;
        c.post(&table_path("rb", "t"), set_property(&uuid, "fast", "1"))
            .await
            .assert_ok(200);
        pause.resume();
    };
    let (slow, ()) = tokio::join!(slow, fast);
    let slow = slow.assert_ok(200);
    assert_eq!(slow["metadata"]["properties"]["fast"], "1");
    assert_eq!(slow["metadata"]["properties"]["slow"], "1");
    assert!(
        slow["metadata-location"]
            .as_str()
            .unwrap()
            .contains("/metadata/00002-"),
        "{}",
        slow["metadata-location"]
    );
    let loaded = c.get(&table_path("rb", "t")).await;
    let metadata = &loaded.assert_ok(200)["metadata"];
    assert_eq!(metadata["properties"]["fast"], "1");
    assert_eq!(metadata["properties"]["slow"], "1");
    assert_eq!(metadata["metadata-log"].as_array().unwrap().len(), 2);
}

/// The rebase re-checks the requirements on the fresh base: an append whose parent moved is the
/// 409, worded as Java words it.
#[tokio::test]
async fn a_rebased_commit_whose_requirements_fail_is_a_409_with_javas_words() {
    let pause = Pause::new();
    let (c, armed) =
        TestCatalog::with_fault(Target::Write(is_table_swap), Fault::Pause(pause.clone())).await;
    c.create_namespace("rq").await;
    c.create_table("rq", "t").await;
    armed.store(true, Ordering::SeqCst);
    let slow = c.append_snapshot(ADMIN_TOKEN, "rq", "t", 1);
    let fast = async {
        pause.reached().await;
        c.append_snapshot(ADMIN_TOKEN, "rq", "t", 2)
            .await
            .assert_ok(200);
        pause.resume();
    };
    let (slow, ()) = tokio::join!(slow, fast);
    slow.assert_error(409, "CommitFailedException");
    assert_eq!(
        slow.body["error"]["message"],
        "Requirement failed: branch main was created concurrently"
    );
    let loaded = c.get(&table_path("rq", "t")).await;
    assert_eq!(loaded.assert_ok(200)["metadata"]["current-snapshot-id"], 2);
}

/// Six clients set different properties at once: none of them conflicts with another, so all
/// land, as against Java's catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unrelated_concurrent_commits_all_land() {
    const WRITERS: usize = 6;
    let c = Arc::new(TestCatalog::new().await);
    c.create_namespace("un").await;
    let created = c.create_table("un", "t").await;
    let uuid = created["metadata"]["table-uuid"].clone();
    let start = Arc::new(tokio::sync::Barrier::new(WRITERS));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let (c, uuid, start) = (c.clone(), uuid.clone(), start.clone());
        writers.push(tokio::spawn(async move {
            start.wait().await;
            c.post(
                &table_path("un", "t"),
                set_property(&uuid, &format!("writer.{writer}"), "done"),
            )
            .await
        }));
    }
    for writer in writers {
        let answer = writer.await.unwrap();
        answer.assert_ok(200);
    }
    let loaded = c.get(&table_path("un", "t")).await;
    let properties = &loaded.assert_ok(200)["metadata"]["properties"];
    for writer in 0..WRITERS {
        assert_eq!(properties[format!("writer.{writer}")], "done");
    }
}

#[tokio::test]
async fn requirement_failures_read_as_in_java() {
    let c = TestCatalog::new().await;
    c.create_namespace("rw").await;
    c.create_table("rw", "t").await;
    let answer = c
        .post(
            &table_path("rw", "t"),
            json!({
                "requirements": [{"type": "assert-default-spec-id", "default-spec-id": 1}],
                "updates": [{"action": "set-properties", "updates": {"k": "v"}}]
            }),
        )
        .await;
    answer.assert_error(409, "CommitFailedException");
    assert_eq!(
        answer.body["error"]["message"],
        "Requirement failed: default partition spec changed: expected id 1 != 0"
    );
}

#[tokio::test]
async fn new_tables_carry_javas_default_properties_unless_the_client_sets_them() {
    let c = TestCatalog::new().await;
    c.create_namespace("dp").await;
    let created = c.create_table("dp", "plain").await;
    assert_eq!(
        created["metadata"]["properties"]["write.parquet.compression-codec"],
        "zstd"
    );
    let mut body = create_table_body("snappy");
    body["properties"] = json!({"write.parquet.compression-codec": "snappy"});
    let chosen = c.post(&tables_path("dp"), body).await;
    assert_eq!(
        chosen.assert_ok(200)["metadata"]["properties"]["write.parquet.compression-codec"],
        "snappy"
    );
    let mut staged = create_table_body("staged");
    staged["stage-create"] = json!(true);
    let staged = c.post(&tables_path("dp"), staged).await;
    assert_eq!(
        staged.assert_ok(200)["metadata"]["properties"]["write.parquet.compression-codec"],
        "zstd"
    );
}

/// The updates a client sends to commit a staged create, with `extra` updates after them.
fn create_commit(staged: &Value, extra: &[Value]) -> Value {
    let metadata = &staged["metadata"];
    let mut updates = vec![
        json!({"action": "assign-uuid", "uuid": metadata["table-uuid"]}),
        json!({"action": "upgrade-format-version", "format-version": 2}),
        json!({"action": "add-schema", "schema": metadata["schemas"][0]}),
        json!({"action": "set-current-schema", "schema-id": -1}),
        json!({"action": "add-spec", "spec": metadata["partition-specs"][0]}),
        json!({"action": "set-default-spec", "spec-id": -1}),
        json!({"action": "add-sort-order", "sort-order": metadata["sort-orders"][0]}),
        json!({"action": "set-default-sort-order", "sort-order-id": -1}),
        json!({"action": "set-location", "location": metadata["location"]}),
        json!({"action": "set-properties", "updates": metadata["properties"]}),
    ];
    updates.extend(extra.iter().cloned());
    json!({"requirements": [{"type": "assert-create"}], "updates": updates})
}

fn partitioned_sorted(name: &str) -> Value {
    let mut body = create_table_body(name);
    body["partition-spec"] = json!({"fields": [
        {"source-id": 1, "field-id": 1000, "name": "id_bucket", "transform": "bucket[4]"}
    ]});
    body["write-order"] = json!({"order-id": 1, "fields": [
        {"source-id": 2, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
    ]});
    body["stage-create"] = json!(true);
    body
}

/// A create transaction ends with the ids a direct create gives (and Java gives either way).
#[tokio::test]
async fn create_transactions_number_specs_and_orders_as_direct_creates_do() {
    let c = TestCatalog::new().await;
    c.create_namespace("ct").await;
    let staged = c.post(&tables_path("ct"), partitioned_sorted("tx")).await;
    let staged = staged.assert_ok(200).clone();
    let committed = c
        .post(&table_path("ct", "tx"), create_commit(&staged, &[]))
        .await;
    let metadata = &committed.assert_ok(200)["metadata"];
    assert_eq!(metadata["default-spec-id"], 0);
    assert_eq!(metadata["partition-specs"].as_array().unwrap().len(), 1);
    assert_eq!(metadata["default-sort-order-id"], 1);
    assert_eq!(metadata["sort-orders"].as_array().unwrap().len(), 1);

    let mut direct = partitioned_sorted("direct");
    direct["stage-create"] = json!(false);
    let direct = c.post(&tables_path("ct"), direct).await;
    let direct = &direct.assert_ok(200)["metadata"];
    for key in [
        "default-spec-id",
        "partition-specs",
        "default-sort-order-id",
        "sort-orders",
        "schemas",
        "last-partition-id",
        "last-column-id",
    ] {
        assert_eq!(metadata[key], direct[key], "{key}");
    }
}

/// A create transaction that also evolves the spec ends one spec id above the first, not two.
#[tokio::test]
async fn a_create_transaction_that_evolves_the_spec_numbers_it_as_java_does() {
    let c = TestCatalog::new().await;
    c.create_namespace("ce").await;
    let staged = c.post(&tables_path("ce"), partitioned_sorted("tx")).await;
    let staged = staged.assert_ok(200).clone();
    let evolved = json!({"action": "add-spec", "spec": {"fields": [
        {"source-id": 1, "field-id": 1000, "name": "id_bucket", "transform": "bucket[4]"},
        {"source-id": 2, "field-id": 1001, "name": "data", "transform": "identity"}
    ]}});
    let committed = c
        .post(
            &table_path("ce", "tx"),
            create_commit(
                &staged,
                &[
                    evolved,
                    json!({"action": "set-default-spec", "spec-id": -1}),
                ],
            ),
        )
        .await;
    let metadata = &committed.assert_ok(200)["metadata"];
    assert_eq!(metadata["default-spec-id"], 1);
    let ids: Vec<i64> = metadata["partition-specs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["spec-id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [0, 1]);
    assert_eq!(metadata["last-partition-id"], 1001);
}

/// History reads in commit order, in the stored file and in every answer.
#[tokio::test]
async fn snapshots_are_listed_in_commit_order() {
    let c = TestCatalog::new().await;
    c.create_namespace("so").await;
    c.create_table("so", "t").await;
    let mut last = Value::Null;
    for n in 1..=24 {
        last = c
            .append_snapshot(ADMIN_TOKEN, "so", "t", 7_000 - n)
            .await
            .assert_ok(200)
            .clone();
    }
    let expected: Vec<i64> = (1..=24).map(|n| 7_000 - n).collect();
    let order = |metadata: &Value| -> Vec<i64> {
        metadata["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["snapshot-id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(order(&last["metadata"]), expected);
    let loaded = c.get(&table_path("so", "t")).await;
    assert_eq!(order(&loaded.assert_ok(200)["metadata"]), expected);
    let stored = c
        .read_json(loaded.body["metadata-location"].as_str().unwrap())
        .await;
    assert_eq!(order(&stored), expected);
}

fn add_spec(fields: Value) -> Value {
    json!({
        "requirements": [],
        "updates": [
            {"action": "add-spec", "spec": {"fields": fields}},
            {"action": "set-default-spec", "spec-id": -1}
        ]
    })
}

/// Evolution that Java's catalog accepts and the crate's builder alone refuses: an hour partition
/// beside a day one on the same column, and (v1) a removed field kept as `void` under its name.
/// Later commits on the table still work, and nothing but the real fields is ever answered.
#[tokio::test]
async fn partition_evolution_that_java_accepts_lands_and_reads_back_as_sent() {
    let c = TestCatalog::new().await;
    c.create_namespace("pe").await;
    for version in ["1", "2"] {
        let name = format!("v{version}");
        let created = c
            .post(
                &tables_path("pe"),
                json!({
                    "name": name,
                    "schema": {"type": "struct", "fields": [
                        {"id": 1, "name": "id", "type": "long", "required": false},
                        {"id": 2, "name": "ts", "type": "timestamp", "required": false},
                        {"id": 3, "name": "category", "type": "string", "required": false}
                    ]},
                    "partition-spec": {"fields": [
                        {"source-id": 3, "field-id": 1000, "name": "category", "transform": "identity"}
                    ]},
                    "properties": {"format-version": version}
                }),
            )
            .await;
        created.assert_ok(200);
        let path = table_path("pe", &name);
        let identity =
            json!({"source-id": 3, "field-id": 1000, "name": "category", "transform": "identity"});
        let void =
            json!({"source-id": 3, "field-id": 1000, "name": "category", "transform": "void"});
        let day = json!({"source-id": 2, "field-id": 1001, "name": "ts_day", "transform": "day"});
        let hour =
            json!({"source-id": 2, "field-id": 1002, "name": "ts_hour", "transform": "hour"});
        c.post(&path, add_spec(json!([identity, day])))
            .await
            .assert_ok(200);
        c.post(&path, add_spec(json!([identity, day, hour])))
            .await
            .assert_ok(200);
        c.post(&path, add_spec(json!([void, day, hour])))
            .await
            .assert_ok(200);
        // The same spec again reuses its id, as Java does.
        c.post(&path, add_spec(json!([identity, day, hour])))
            .await
            .assert_ok(200);
        let uuid = created.body["metadata"]["table-uuid"].clone();
        let last = c
            .post(&path, set_property(&uuid, "after", "evolution"))
            .await;
        let metadata = &last.assert_ok(200)["metadata"];
        assert_eq!(metadata["default-spec-id"], 2, "v{version}");
        assert_eq!(metadata["last-partition-id"], 1002);
        let specs = metadata["partition-specs"].as_array().unwrap();
        assert_eq!(specs.len(), 4);
        assert_eq!(specs[2]["fields"], json!([identity, day, hour]));
        assert_eq!(specs[3]["fields"], json!([void, day, hour]));
        let stored = c
            .read_bytes(last.body["metadata-location"].as_str().unwrap())
            .await;
        assert!(
            !String::from_utf8(stored).unwrap().contains('\u{1}'),
            "a disguised field reached storage"
        );
    }
}

/// Format-version 1 tables keep their branches and tags across commits, as in Java.
#[tokio::test]
async fn v1_tables_keep_their_branches_and_tags() {
    let c = TestCatalog::new().await;
    c.create_namespace("r1").await;
    let mut body = create_table_body("t");
    body["properties"] = json!({"format-version": "1"});
    let created = c.post(&tables_path("r1"), body).await;
    let uuid = created.assert_ok(200)["metadata"]["table-uuid"].clone();
    assert_eq!(created.body["metadata"]["refs"], json!({}));
    let location = created.body["metadata"]["location"].as_str().unwrap();
    c.post(&table_path("r1", "t"), append_v1(location, 1, None))
        .await
        .assert_ok(200);
    let refs = json!({
        "requirements": [],
        "updates": [
            {"action": "set-snapshot-ref", "ref-name": "first", "type": "tag", "snapshot-id": 1},
            {"action": "set-snapshot-ref", "ref-name": "dev", "type": "branch", "snapshot-id": 1}
        ]
    });
    c.post(&table_path("r1", "t"), refs).await.assert_ok(200);
    c.post(&table_path("r1", "t"), append_v1(location, 2, Some(1)))
        .await
        .assert_ok(200);
    c.post(&table_path("r1", "t"), set_property(&uuid, "k", "v"))
        .await
        .assert_ok(200);
    let loaded = c.get(&table_path("r1", "t")).await;
    let metadata = &loaded.assert_ok(200)["metadata"];
    assert_eq!(metadata["format-version"], 1);
    assert_eq!(
        metadata["refs"],
        json!({
            "main": {"snapshot-id": 2, "type": "branch"},
            "first": {"snapshot-id": 1, "type": "tag"},
            "dev": {"snapshot-id": 1, "type": "branch"}
        })
    );
    let again = json!({
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "first", "snapshot-id": null}],
        "updates": [{"action": "set-snapshot-ref", "ref-name": "first", "type": "tag", "snapshot-id": 2}]
    });
    let answer = c.post(&table_path("r1", "t"), again).await;
    answer.assert_error(409, "CommitFailedException");
    assert_eq!(
        answer.body["error"]["message"],
        "Requirement failed: tag first was created concurrently"
    );
}

/// A v1 append (no sequence numbers) of snapshot `id` on `parent`.
fn append_v1(location: &str, id: i64, parent: Option<i64>) -> Value {
    json!({
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": [
            {"action": "add-snapshot", "snapshot": {
                "snapshot-id": id,
                "parent-snapshot-id": parent,
                "timestamp-ms": std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as i64,
                "manifest-list": format!("{location}/metadata/snap-{id}.avro"),
                "summary": {"operation": "append"},
                "schema-id": 0
            }},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": id}
        ]
    })
}

/// A create transaction whose client numbered the schema itself keeps the client's field ids
/// (the spec and data files it wrote refer to them).
#[tokio::test]
async fn a_create_transaction_keeps_field_ids_the_client_chose() {
    let c = TestCatalog::new().await;
    c.create_namespace("cf").await;
    let schema = json!({"type": "struct", "schema-id": 0, "fields": [
        {"id": 5, "name": "id", "type": "long", "required": true},
        {"id": 7, "name": "data", "type": "string", "required": false}
    ]});
    let commit = json!({
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": schema},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"fields": [
                {"source-id": 7, "field-id": 1000, "name": "data", "transform": "identity"}
            ]}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1}
        ]
    });
    let committed = c.post(&table_path("cf", "t"), commit).await;
    let metadata = &committed.assert_ok(200)["metadata"];
    let current = metadata["schemas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["schema-id"] == metadata["current-schema-id"])
        .unwrap();
    let ids: Vec<i64> = current["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [5, 7]);
    let spec = metadata["partition-specs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["spec-id"] == metadata["default-spec-id"])
        .unwrap();
    assert_eq!(spec["fields"][0]["source-id"], 7);
}
