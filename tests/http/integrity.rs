//! Table integrity: the row decides where a table lives, the pointer swap is exact, and no file a
//! client can write moves a table or makes two tables share a directory.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use floe_tests::*;
use serde_json::{Value, json};

/// A catalog that, once armed, holds its next pointer swap while the test acts: before it is
/// applied, or (`landed`) after it is applied, then reporting an unknown outcome.
async fn pausing_swaps(landed: bool) -> (TestCatalog, Arc<Pause>, Arc<AtomicBool>) {
    let pause = Pause::new();
    let fault = if landed {
        Fault::LandedThenUnknown(pause.clone())
    } else {
        Fault::Pause(pause.clone())
    };
    let (c, armed) = TestCatalog::with_fault(Target::Write(is_table_swap), fault).await;
    (c, pause, armed)
}

fn snapshot_count(metadata: &Value) -> usize {
    metadata["snapshots"].as_array().map_or(0, Vec::len)
}

async fn metadata_files(c: &TestCatalog, answer: &Value) -> Vec<String> {
    let location = answer["metadata"]["location"].as_str().unwrap();
    c.files_under(&format!("{location}/metadata"))
        .await
        .into_iter()
        .filter(|f| f.ends_with(".metadata.json"))
        .collect()
}

#[tokio::test]
async fn a_stale_commit_never_lands_on_a_dropped_and_recreated_table() {
    let (c, pause, armed) = pausing_swaps(false).await;
    c.create_namespace("dr").await;
    let old = c.create_table("dr", "t").await;
    armed.store(true, Ordering::SeqCst);
    let stale = c.append_snapshot(ADMIN_TOKEN, "dr", "t", 1);
    let meanwhile = async {
        pause.reached().await;
        assert_eq!(c.delete(&table_path("dr", "t")).await.status.as_u16(), 204);
        let new = c.create_table("dr", "t").await;
        pause.resume();
        new
    };
    let (stale, new) = tokio::join!(stale, meanwhile);
    stale.assert_error(409, "CommitFailedException");
    let loaded = c.get(&table_path("dr", "t")).await;
    let metadata = &loaded.assert_ok(200)["metadata"];
    assert_eq!(metadata["table-uuid"], new["metadata"]["table-uuid"]);
    assert_ne!(metadata["table-uuid"], old["metadata"]["table-uuid"]);
    assert_eq!(metadata["location"], new["metadata"]["location"]);
    assert_eq!(snapshot_count(metadata), 0);
}

#[tokio::test]
async fn a_stale_commit_never_lands_on_a_renamed_and_recreated_table() {
    let (c, pause, armed) = pausing_swaps(false).await;
    c.create_namespace("rr").await;
    let old = c.create_table("rr", "t").await;
    armed.store(true, Ordering::SeqCst);
    let stale = c.append_snapshot(ADMIN_TOKEN, "rr", "t", 1);
    let meanwhile = async {
        pause.reached().await;
        let rename = json!({
            "source": {"namespace": ["rr"], "name": "t"},
            "destination": {"namespace": ["rr"], "name": "moved"}
        });
        assert_eq!(
            c.post(&format!("/v1/{ORG}/tables/rename"), rename)
                .await
                .status
                .as_u16(),
            204
        );
        let new = c.create_table("rr", "t").await;
        pause.resume();
        new
    };
    let (stale, new) = tokio::join!(stale, meanwhile);
    assert!(
        matches!(stale.status.as_u16(), 404 | 409),
        "stale commit answered {}: {}",
        stale.status,
        stale.body
    );
    let recreated = c.get(&table_path("rr", "t")).await;
    assert_eq!(
        recreated.assert_ok(200)["metadata"]["table-uuid"],
        new["metadata"]["table-uuid"]
    );
    assert_eq!(snapshot_count(&recreated.body["metadata"]), 0);
    let moved = c.get(&table_path("rr", "moved")).await;
    assert_eq!(
        moved.assert_ok(200)["metadata"]["table-uuid"],
        old["metadata"]["table-uuid"]
    );
    assert_eq!(
        moved.body["metadata"]["location"],
        old["metadata"]["location"]
    );
}

/// Writers commit without pause while the table is dropped and re-created, round after round:
/// the re-created table always survives with its own identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_racing_drop_and_recreate_never_resurrect_the_old_table() {
    const ROUNDS: usize = 12;
    const WRITERS: i64 = 4;
    let c = Arc::new(TestCatalog::new().await);
    c.create_namespace("race").await;
    c.create_table("race", "t").await;
    for round in 0..ROUNDS {
        let mut writers = Vec::new();
        for writer in 0..WRITERS {
            let c = c.clone();
            writers.push(tokio::spawn(async move {
                for n in 0..3 {
                    let id = (round as i64) * 1_000 + writer * 10 + n;
                    let current = c.get(&table_path("race", "t")).await;
                    if current.status.as_u16() != 200 {
                        continue;
                    }
                    let body = append_body(&current.body["metadata"], id);
                    let answer = c.post(&table_path("race", "t"), body).await;
                    assert!(
                        matches!(answer.status.as_u16(), 200 | 404 | 409),
                        "{}: {}",
                        answer.status,
                        answer.body
                    );
                }
            }));
        }
        let dropped = c.delete(&table_path("race", "t")).await.status.as_u16();
        assert!(matches!(dropped, 204 | 404), "drop answered {dropped}");
        let created = c.post(&tables_path("race"), create_table_body("t")).await;
        let new_uuid = created.assert_ok(200)["metadata"]["table-uuid"].clone();
        for writer in writers {
            writer.await.unwrap();
        }
        let loaded = c.get(&table_path("race", "t")).await;
        assert_eq!(
            loaded.assert_ok(200)["metadata"]["table-uuid"],
            new_uuid,
            "round {round}: the re-created table was replaced"
        );
    }
}

#[tokio::test]
async fn a_lost_race_is_409_and_deletes_no_file() {
    let (c, pause, armed) = pausing_swaps(false).await;
    c.create_namespace("lost").await;
    let created = c.create_table("lost", "t").await;
    armed.store(true, Ordering::SeqCst);
    let loser = c.append_snapshot(ADMIN_TOKEN, "lost", "t", 1);
    let winner = async {
        pause.reached().await;
        let answer = c.append_snapshot(ADMIN_TOKEN, "lost", "t", 2).await;
        pause.resume();
        answer
    };
    let (loser, winner) = tokio::join!(loser, winner);
    winner.assert_ok(200);
    loser.assert_error(409, "CommitFailedException");
    // Version 0, the winner's file and the loser's orphan: nothing is deleted on a failure path.
    assert_eq!(metadata_files(&c, &created).await.len(), 3);
}

#[tokio::test]
async fn a_landed_swap_whose_answer_was_lost_is_5xx_and_keeps_its_file_after_the_log_is_shortened()
{
    let (c, pause, armed) = pausing_swaps(true).await;
    c.create_namespace("short").await;
    let created = c.create_table("short", "t").await;
    let shorten = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"write.metadata.previous-versions-max": "1"}}
    ]});
    c.post(&table_path("short", "t"), shorten)
        .await
        .assert_ok(200);
    armed.store(true, Ordering::SeqCst);
    let landed = c.append_snapshot(ADMIN_TOKEN, "short", "t", 1);
    let meanwhile = async {
        pause.reached().await;
        // Two more commits push the landed file out of the metadata log.
        c.append_snapshot(ADMIN_TOKEN, "short", "t", 2)
            .await
            .assert_ok(200);
        c.append_snapshot(ADMIN_TOKEN, "short", "t", 3)
            .await
            .assert_ok(200);
        pause.resume();
    };
    let (landed, ()) = tokio::join!(landed, meanwhile);
    landed.assert_error(500, "CommitStateUnknownException");
    let loaded = c.get(&table_path("short", "t")).await;
    assert_eq!(snapshot_count(&loaded.assert_ok(200)["metadata"]), 3);
    let log = loaded.body["metadata"]["metadata-log"].as_array().unwrap();
    assert_eq!(log.len(), 1, "the log was shortened");
    assert_eq!(
        metadata_files(&c, &created).await.len(),
        5,
        "every file kept"
    );
}

#[tokio::test]
async fn a_landed_swap_whose_answer_was_lost_is_5xx_and_keeps_its_file_after_a_rename() {
    let (c, pause, armed) = pausing_swaps(true).await;
    c.create_namespace("ren").await;
    let created = c.create_table("ren", "t").await;
    armed.store(true, Ordering::SeqCst);
    let landed = c.append_snapshot(ADMIN_TOKEN, "ren", "t", 1);
    let meanwhile = async {
        pause.reached().await;
        let rename = json!({
            "source": {"namespace": ["ren"], "name": "t"},
            "destination": {"namespace": ["ren"], "name": "u"}
        });
        let answer = c.post(&format!("/v1/{ORG}/tables/rename"), rename).await;
        pause.resume();
        answer
    };
    let (landed, renamed) = tokio::join!(landed, meanwhile);
    assert_eq!(renamed.status.as_u16(), 204);
    landed.assert_error(500, "CommitStateUnknownException");
    let moved = c.get(&table_path("ren", "u")).await;
    assert_eq!(snapshot_count(&moved.assert_ok(200)["metadata"]), 1);
    assert_eq!(metadata_files(&c, &created).await.len(), 2);
}

/// A writer replaces the current metadata file (it holds credentials for the directory) with one
/// that points at a sibling table. Neither a load nor a commit accepts it, and the table stays
/// where it was.
#[tokio::test]
async fn a_tampered_metadata_file_is_refused_and_moves_nothing() {
    let c = TestCatalog::new().await;
    c.create_namespace("tamper").await;
    let victim = c.create_table("tamper", "t").await;
    let sibling = c.create_table("tamper", "sibling").await;
    let current = victim["metadata-location"].as_str().unwrap().to_owned();
    let original_bytes = c.read_bytes(&current).await;
    let original: Value = serde_json::from_slice(&original_bytes).unwrap();

    let mut moved = original.clone();
    moved["location"] = sibling["metadata"]["location"].clone();
    let mut altered = original.clone();
    altered["properties"] = json!({"write.data.path": "s3://elsewhere/data"});
    let other_uuid = {
        let mut doc = original.clone();
        doc["table-uuid"] = sibling["metadata"]["table-uuid"].clone();
        doc
    };
    for forged in [moved, altered, other_uuid] {
        c.overwrite(&current, serde_json::to_vec(&forged).unwrap())
            .await;
        c.catalog.forget_cached();
        c.get(&table_path("tamper", "t"))
            .await
            .assert_error(500, "InternalServerError");
        let commit = json!({"requirements": [], "updates": [
            {"action": "set-properties", "updates": {"k": "v"}}
        ]});
        let answer = c.post(&table_path("tamper", "t"), commit).await;
        assert_eq!(answer.status.as_u16(), 500, "{}", answer.body);
        assert!(
            !answer.body.to_string().contains("elsewhere"),
            "the answer reveals no file contents"
        );
    }
    c.overwrite(&current, original_bytes).await;
    c.catalog.forget_cached();
    let loaded = c.get(&table_path("tamper", "t")).await;
    assert_eq!(loaded.assert_ok(200)["metadata-location"], current.as_str());
    assert_eq!(
        loaded.body["metadata"]["location"],
        victim["metadata"]["location"]
    );
    assert_eq!(
        metadata_files(&c, &victim).await.len(),
        1,
        "nothing was written"
    );
}

#[tokio::test]
async fn table_names_never_become_unsafe_path_segments() {
    let c = TestCatalog::new().await;
    c.create_namespace("names").await;
    for bad in [".", ".."] {
        c.post(&tables_path("names"), create_table_body(bad))
            .await
            .assert_error(400, "BadRequestException");
    }
    for odd in ["*", "?", "a*b", "we ird$"] {
        let created = c.post(&tables_path("names"), create_table_body(odd)).await;
        let location = created.assert_ok(200)["metadata"]["location"]
            .as_str()
            .unwrap()
            .to_owned();
        let directory = location.rsplit('/').next().unwrap();
        assert!(
            directory
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_'),
            "{odd:?} got directory {directory:?}"
        );
        let encoded: String = odd
            .chars()
            .map(|ch| match ch {
                '*' => "%2A".to_owned(),
                '?' => "%3F".to_owned(),
                ' ' => "%20".to_owned(),
                '$' => "%24".to_owned(),
                ch => ch.to_string(),
            })
            .collect();
        c.get(&table_path("names", &encoded)).await.assert_ok(200);
    }
}

#[tokio::test]
async fn table_directories_never_overlap() {
    let c = TestCatalog::new().await;
    let ns = c.create_namespace("ovl").await;
    let root = ns["properties"]["location"].as_str().unwrap().to_owned();
    let first = c.create_table("ovl", "first").await;
    let first_dir = first["metadata"]["location"].as_str().unwrap().to_owned();
    assert!(
        first_dir.starts_with(&format!("{root}/first-")),
        "{first_dir}"
    );
    let second = c.create_table("ovl", "first-copy").await;
    assert_ne!(
        second["metadata"]["location"],
        first["metadata"]["location"]
    );

    let with_location = |name: &str, location: String| {
        let mut body = create_table_body(name);
        body["location"] = json!(location);
        body
    };
    for location in [
        root.clone(),
        format!("{root}/"),
        first_dir.clone(),
        format!("{first_dir}/nested"),
        format!("{root}/../escape"),
        format!("{root}/a*b"),
        "file:///tmp/elsewhere".to_owned(),
    ] {
        c.post(&tables_path("ovl"), with_location("x", location.clone()))
            .await
            .assert_error(400, "BadRequestException");
    }
    // A fresh directory of the client's choosing is fine, once.
    let chosen = format!("{root}/chosen");
    c.post(&tables_path("ovl"), with_location("mine", chosen.clone()))
        .await
        .assert_ok(200);
    c.post(
        &tables_path("ovl"),
        with_location("yours", format!("{chosen}/sub")),
    )
    .await
    .assert_error(400, "BadRequestException");
    // Dropping a table keeps its directory claimed: its files stay in storage.
    assert_eq!(
        c.delete(&table_path("ovl", "mine")).await.status.as_u16(),
        204
    );
    c.post(&tables_path("ovl"), with_location("again", chosen))
        .await
        .assert_error(400, "BadRequestException");

    // Commits may move the location only inside the table's own directory.
    let set_location = |location: &str| json!({"requirements": [], "updates": [{"action": "set-location", "location": location}]});
    let second_dir = second["metadata"]["location"].as_str().unwrap();
    for location in [root.as_str(), second_dir, "file:///tmp/elsewhere"] {
        c.post(&table_path("ovl", "first"), set_location(location))
            .await
            .assert_error(400, "BadRequestException");
    }
    let inside = format!("{first_dir}/v2");
    let moved = c
        .post(&table_path("ovl", "first"), set_location(&inside))
        .await;
    assert_eq!(
        moved.assert_ok(200)["metadata"]["location"],
        inside.as_str()
    );

    // Location-bearing properties too, at creation and in commits.
    for key in [
        "write.data.path",
        "write.metadata.path",
        "write.object-storage.path",
    ] {
        let mut body = create_table_body("props");
        body["properties"] = json!({key: format!("{second_dir}/data")});
        c.post(&tables_path("ovl"), body)
            .await
            .assert_error(400, "BadRequestException");
        let update = json!({"requirements": [], "updates": [
            {"action": "set-properties", "updates": {key: root.clone()}}
        ]});
        c.post(&table_path("ovl", "first"), update)
            .await
            .assert_error(400, "BadRequestException");
        let update = json!({"requirements": [], "updates": [
            {"action": "set-properties", "updates": {key: format!("{first_dir}/files")}}
        ]});
        c.post(&table_path("ovl", "first"), update)
            .await
            .assert_ok(200);
    }
}

/// A staged create keeps the directory it was given when it is committed; a forged staged
/// location cannot take another table's directory.
#[tokio::test]
async fn staged_creates_commit_into_a_directory_of_their_own() {
    let c = TestCatalog::new().await;
    c.create_namespace("stg").await;
    let existing = c.create_table("stg", "existing").await;
    let mut body = create_table_body("staged");
    body["stage-create"] = json!(true);
    let staged = c.post(&tables_path("stg"), body).await;
    let location = staged.assert_ok(200)["metadata"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    let commit = |location: &str| {
        json!({
            "requirements": [{"type": "assert-create"}],
            "updates": [
                {"action": "assign-uuid", "uuid": staged.body["metadata"]["table-uuid"]},
                {"action": "upgrade-format-version", "format-version": 2},
                {"action": "add-schema", "schema": staged.body["metadata"]["schemas"][0]},
                {"action": "set-current-schema", "schema-id": -1},
                {"action": "set-location", "location": location}
            ]
        })
    };
    c.post(
        &table_path("stg", "staged"),
        commit(existing["metadata"]["location"].as_str().unwrap()),
    )
    .await
    .assert_error(400, "BadRequestException");
    let committed = c
        .post(&table_path("stg", "staged"), commit(&location))
        .await;
    assert_eq!(
        committed.assert_ok(200)["metadata"]["location"],
        location.as_str()
    );
}

/// A table whose row was written before rows recorded directories, bindings, digests and write
/// tokens keeps working: it loads, takes commits (which record them), and is still verified on
/// uuid and location.
#[tokio::test]
async fn tables_from_rows_without_identity_fields_keep_working() {
    use floe::model::NamespaceRow;
    use floe::store::Condition;
    use floe::store::rows::{self, keys};

    let c = TestCatalog::new().await;
    c.create_namespace("legacy").await;
    let created = c.create_table("legacy", "t").await;
    let ns = rows::get::<NamespaceRow>(&*c.store, &keys::namespace(ORG, "legacy"))
        .await
        .unwrap()
        .unwrap()
        .row;
    let key = keys::table(&ns.id, "t");
    let item = c.store.get(&key).await.unwrap().unwrap();
    let mut body: Value = serde_json::from_slice(&item.body).unwrap();
    for field in ["directory", "bucket", "metadata_sha256"] {
        body.as_object_mut().unwrap().remove(field);
    }
    c.store
        .write(vec![rows::put(key.clone(), &body, Condition::Always)])
        .await
        .unwrap();
    c.catalog.forget_cached();
    assert_eq!(c.store.get(&key).await.unwrap().unwrap().token, None);

    let loaded = c.get(&table_path("legacy", "t")).await;
    assert_eq!(loaded.assert_ok(200)["metadata"], created["metadata"]);
    c.append_snapshot(ADMIN_TOKEN, "legacy", "t", 1)
        .await
        .assert_ok(200);
    let upgraded: Value =
        serde_json::from_slice(&c.store.get(&key).await.unwrap().unwrap().body).unwrap();
    assert_eq!(upgraded["directory"], created["metadata"]["location"]);
    assert!(upgraded["metadata_sha256"].is_string());
    assert!(c.store.get(&key).await.unwrap().unwrap().token.is_some());
    c.append_snapshot(ADMIN_TOKEN, "legacy", "t", 2)
        .await
        .assert_ok(200);
}
