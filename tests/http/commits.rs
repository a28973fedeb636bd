use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use floe_tests::*;
use serde_json::json;

/// Names of the table's metadata files, sorted.
async fn metadata_files(c: &TestCatalog, location: &str) -> Vec<String> {
    let files = c.files_under(&format!("{location}/metadata")).await;
    files
        .iter()
        .map(|f| f.rsplit('/').next().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn append_commits_write_numbered_files_and_stamp_authors() {
    let c = TestCatalog::new().await;
    c.create_namespace("cm").await;
    let created = c.create_table("cm", "t").await;
    let location = created["metadata"]["location"].as_str().unwrap().to_owned();
    let first = c.append_snapshot(&c.write_token, "cm", "t", 11).await;
    let body = first.assert_ok(200);
    assert!(
        body["metadata-location"]
            .as_str()
            .unwrap()
            .contains("/metadata/00001-")
    );
    let summary = &body["metadata"]["snapshots"][0]["summary"];
    // Api clients: email stamped, client-supplied name removed; other keys pass through.
    assert_eq!(summary["arraylake.author-email"], "writer@acme.test");
    assert!(summary.get("arraylake.author-name").is_none(), "{summary}");
    assert_eq!(summary["custom.key"], "kept");
    assert_eq!(body["metadata"]["current-snapshot-id"], 11);
    c.append_snapshot(ADMIN_TOKEN, "cm", "t", 12)
        .await
        .assert_ok(200);
    let files = metadata_files(&c, &location).await;
    assert_eq!(files.len(), 3);
    assert!(
        files[0].starts_with("00000-")
            && files[1].starts_with("00001-")
            && files[2].starts_with("00002-")
    );
    let loaded = c.get(&table_path("cm", "t")).await;
    assert_eq!(
        loaded.body["metadata"]["snapshots"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        loaded.body["metadata"]["metadata-log"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn failed_requirements_are_409_and_write_nothing() {
    let c = TestCatalog::new().await;
    c.create_namespace("req").await;
    let created = c.create_table("req", "t").await;
    let metadata = created["metadata"].clone();
    let stale = append_body(&metadata, 1);
    c.post(&table_path("req", "t"), stale.clone())
        .await
        .assert_ok(200);
    // The same commit again: main has moved, so the requirement fails.
    let mut again = stale.clone();
    again["updates"][0]["snapshot"]["snapshot-id"] = json!(2);
    again["updates"][1]["snapshot-id"] = json!(2);
    c.post(&table_path("req", "t"), again)
        .await
        .assert_error(409, "CommitFailedException");
    let wrong_uuid = json!({"requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}], "updates": []});
    c.post(&table_path("req", "t"), wrong_uuid)
        .await
        .assert_error(409, "CommitFailedException");
    let exists = json!({"requirements": [{"type": "assert-create"}], "updates": []});
    c.post(&table_path("req", "t"), exists)
        .await
        .assert_error(409, "CommitFailedException");
    for requirement in [
        json!({"type": "assert-current-schema-id", "current-schema-id": 7}),
        json!({"type": "assert-last-assigned-field-id", "last-assigned-field-id": 99}),
        json!({"type": "assert-default-spec-id", "default-spec-id": 3}),
        json!({"type": "assert-default-sort-order-id", "default-sort-order-id": 5}),
        json!({"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 5}),
    ] {
        let body = json!({"requirements": [requirement], "updates": [{"action": "set-properties", "updates": {"x": "y"}}]});
        c.post(&table_path("req", "t"), body)
            .await
            .assert_error(409, "CommitFailedException");
    }
    assert_eq!(
        metadata_files(&c, metadata["location"].as_str().unwrap())
            .await
            .len(),
        2
    );
}

#[tokio::test]
async fn unknown_or_invalid_updates_are_400() {
    let c = TestCatalog::new().await;
    c.create_namespace("bad").await;
    c.create_table("bad", "t").await;
    let path = table_path("bad", "t");
    c.post(
        &path,
        json!({"requirements": [{"type": "assert-something-new"}], "updates": []}),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.post(
        &path,
        json!({"requirements": [], "updates": [{"action": "do-magic"}]}),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.post(
        &path,
        json!({"requirements": [], "updates": [{"action": "set-current-schema", "schema-id": 42}]}),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.post(&path, json!({"requirements": [], "updates": [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 404}]}))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&path, json!({"requirements": [], "updates": [{"action": "set-properties", "updates": {"format-version": "3"}}]}))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&path, json!({"updates": []}))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&path, json!({"requirements": [], "updates": [{"action": "set-location", "location": "file:///elsewhere"}]}))
        .await
        .assert_error(400, "BadRequestException");
    let wrong_id = json!({"identifier": {"namespace": ["bad"], "name": "other"}, "requirements": [], "updates": []});
    c.post(&path, wrong_id)
        .await
        .assert_error(400, "BadRequestException");
    c.post(
        &table_path("bad", "missing"),
        json!({"requirements": [], "updates": []}),
    )
    .await
    .assert_error(404, "NoSuchTableException");
    c.post(
        &format!("/v1/{ORG}/namespaces/bad%1Fx/tables/t"),
        json!({"requirements": [], "updates": []}),
    )
    .await
    .assert_error(404, "NoSuchTableException");
}

#[tokio::test]
async fn stale_sequence_numbers_are_409() {
    let c = TestCatalog::new().await;
    c.create_namespace("seq").await;
    c.create_table("seq", "t").await;
    c.append_snapshot(ADMIN_TOKEN, "seq", "t", 1)
        .await
        .assert_ok(200);
    // A client that rebased its requirement but not its sequence number.
    let current = c.get(&table_path("seq", "t")).await.body["metadata"].clone();
    let mut body = append_body(&current, 2);
    body["updates"][0]["snapshot"]["sequence-number"] = json!(1);
    c.post(&table_path("seq", "t"), body)
        .await
        .assert_error(409, "CommitFailedException");
}

#[tokio::test]
async fn a_no_op_commit_writes_no_file() {
    let c = TestCatalog::new().await;
    c.create_namespace("noop").await;
    let created = c.create_table("noop", "t").await;
    let answer = c
        .post(
            &table_path("noop", "t"),
            json!({"requirements": [], "updates": []}),
        )
        .await;
    assert_eq!(
        answer.assert_ok(200)["metadata-location"],
        created["metadata-location"]
    );
    assert_eq!(
        metadata_files(&c, created["metadata"]["location"].as_str().unwrap())
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn schema_evolution_commit() {
    let c = TestCatalog::new().await;
    c.create_namespace("evo").await;
    c.create_table("evo", "t").await;
    let body = json!({
        "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 0}, {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 2}],
        "updates": [
            {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
                {"id": 1, "name": "id", "type": "long", "required": true},
                {"id": 2, "name": "data", "type": "string", "required": false},
                {"id": 3, "name": "extra", "type": "double", "required": false}]}},
            {"action": "set-current-schema", "schema-id": -1}
        ]
    });
    let answer = c.post(&table_path("evo", "t"), body).await;
    let metadata = &answer.assert_ok(200)["metadata"];
    assert_eq!(metadata["current-schema-id"], 1);
    assert_eq!(metadata["last-column-id"], 3);
}

/// A catalog whose pointer swaps misreport with `fault` once the returned flag is set.
async fn with_swap_fault(fault: Fault) -> (TestCatalog, Arc<AtomicBool>) {
    TestCatalog::with_fault(Target::Write(is_table_swap), fault).await
}

#[tokio::test]
async fn an_unknown_swap_outcome_is_5xx_commit_state_unknown_and_keeps_the_file() {
    let (c, armed) = with_swap_fault(Fault::UnknownOutcome).await;
    c.create_namespace("unk").await;
    let created = c.create_table("unk", "t").await;
    armed.store(true, Ordering::SeqCst);
    let answer = c.append_snapshot(ADMIN_TOKEN, "unk", "t", 1).await;
    answer.assert_error(500, "CommitStateUnknownException");
    // The new metadata file is kept: the swap may have landed.
    assert_eq!(
        metadata_files(&c, created["metadata"]["location"].as_str().unwrap())
            .await
            .len(),
        2
    );
}
