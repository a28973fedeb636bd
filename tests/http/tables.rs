use floe::model::BucketAuth;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn create_load_head_list_drop() {
    let c = TestCatalog::new().await;
    let ns = c.create_namespace("t1").await;
    let ns_location = ns["properties"]["location"].as_str().unwrap();
    let created = c.create_table("t1", "events").await;
    let location = created["metadata"]["location"].as_str().unwrap();
    // A directory of its own: `<namespace root>/<name>-<random>`.
    let directory = location
        .strip_prefix(&format!("{ns_location}/events-"))
        .unwrap_or_else(|| panic!("{location}"));
    assert!(
        directory.len() == 12 && !directory.contains('/'),
        "{location}"
    );
    let metadata_location = created["metadata-location"].as_str().unwrap();
    assert!(
        metadata_location.starts_with(&format!("{location}/metadata/00000-"))
            && metadata_location.ends_with(".metadata.json")
    );
    assert!(c.exists(metadata_location).await);
    assert_eq!(created["metadata"]["format-version"], 2);

    let loaded = c.get(&format!("{}/events", tables_path("t1"))).await;
    assert_eq!(
        loaded.assert_ok(200)["metadata-location"],
        metadata_location
    );
    assert_eq!(loaded.body["metadata"], created["metadata"]);
    assert_eq!(
        c.head(&format!("{}/events", tables_path("t1")))
            .await
            .status
            .as_u16(),
        204
    );
    assert_eq!(
        c.head(&format!("{}/nope", tables_path("t1")))
            .await
            .status
            .as_u16(),
        404
    );
    c.get(&format!("{}/nope", tables_path("t1")))
        .await
        .assert_error(404, "NoSuchTableException");
    c.get(&format!("{}/x", tables_path("missing")))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    c.post(&tables_path("missing"), create_table_body("x"))
        .await
        .assert_error(404, "NoSuchNamespaceException");

    c.create_table("t1", "alpha").await;
    let list = c.get(&tables_path("t1")).await;
    assert_eq!(
        list.assert_ok(200)["identifiers"],
        json!([{"namespace": ["t1"], "name": "alpha"}, {"namespace": ["t1"], "name": "events"}])
    );
    c.post(&tables_path("t1"), create_table_body("events"))
        .await
        .assert_error(409, "AlreadyExistsException");

    // Drop with purge: 204, the catalog entry goes, the files stay.
    let dropped = c
        .delete(&format!("{}/events?purgeRequested=true", tables_path("t1")))
        .await;
    assert_eq!(dropped.status.as_u16(), 204);
    assert!(
        c.exists(metadata_location).await,
        "drop never deletes files"
    );
    c.get(&format!("{}/events", tables_path("t1")))
        .await
        .assert_error(404, "NoSuchTableException");
    c.delete(&format!("{}/events", tables_path("t1")))
        .await
        .assert_error(404, "NoSuchTableException");
    // Re-creating the name gets a fresh table.
    let again = c.create_table("t1", "events").await;
    assert_ne!(
        again["metadata"]["table-uuid"],
        created["metadata"]["table-uuid"]
    );
}

#[tokio::test]
async fn table_identifiers_are_validated() {
    let c = TestCatalog::new().await;
    c.create_namespace("ids").await;
    c.post(&tables_path("ids"), create_table_body("a/b"))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&tables_path("ids"), create_table_body("a\u{1f}b"))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&tables_path("ids"), create_table_body(""))
        .await
        .assert_error(400, "BadRequestException");
    // A nested table identifier is 404 NoSuchTableException, not 400.
    c.get(&format!("/v1/{ORG}/namespaces/ids%1Fdeeper/tables/t"))
        .await
        .assert_error(404, "NoSuchTableException");
    assert_eq!(
        c.head(&format!("/v1/{ORG}/namespaces/ids%1Fdeeper/tables/t"))
            .await
            .status
            .as_u16(),
        404
    );
}

#[tokio::test]
async fn format_versions_are_one_to_three_and_only_go_up() {
    let c = TestCatalog::new().await;
    c.create_namespace("fv").await;
    let mut v4 = create_table_body("v4");
    v4["properties"] = json!({"format-version": "4"});
    c.post(&tables_path("fv"), v4)
        .await
        .assert_error(400, "BadRequestException");
    let mut v1 = create_table_body("v1");
    v1["properties"] = json!({"format-version": "1"});
    assert_eq!(
        c.post(&tables_path("fv"), v1).await.assert_ok(200)["metadata"]["format-version"],
        1
    );
    let to_v2 = json!({"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 2}]});
    assert_eq!(
        c.post(&format!("{}/v1", tables_path("fv")), to_v2)
            .await
            .assert_ok(200)["metadata"]["format-version"],
        2
    );
    let to_v1 = json!({"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 1}]});
    c.post(&format!("{}/v1", tables_path("fv")), to_v1)
        .await
        .assert_error(400, "BadRequestException");
}

#[tokio::test]
async fn explicit_locations_must_stay_in_the_tables_storage() {
    let c = TestCatalog::new().await;
    let ns = c.create_namespace("locs").await;
    let root = ns["properties"]["location"].as_str().unwrap().to_owned();
    let mut outside = create_table_body("out");
    outside["location"] = json!("file:///tmp/somewhere-else");
    c.post(&tables_path("locs"), outside)
        .await
        .assert_error(400, "BadRequestException");
    let mut sneaky = create_table_body("sneaky");
    sneaky["location"] = json!(format!("{root}/../escape"));
    c.post(&tables_path("locs"), sneaky)
        .await
        .assert_error(400, "BadRequestException");
    let mut inside = create_table_body("in");
    inside["location"] = json!(format!("{root}/custom/dir/"));
    let created = c.post(&tables_path("locs"), inside).await;
    assert_eq!(
        created.assert_ok(200)["metadata"]["location"],
        format!("{root}/custom/dir")
    );
}

#[tokio::test]
async fn storage_overrides_claim_their_own_prefix() {
    let c = TestCatalog::new().await;
    let other = c.add_bucket("big", BucketAuth::Server).await;
    c.add_bucket("anon", BucketAuth::Anonymous).await;
    c.create_namespace("ov").await;
    let mut body = create_table_body("huge");
    body["properties"] = json!({"arraylake.bucket": "big"});
    let created = c.post(&tables_path("ov"), body.clone()).await;
    let location = created.assert_ok(200)["metadata"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        location.starts_with(&format!("{other}/huge-")),
        "{location}"
    );
    assert!(
        c.exists(&format!("{location}/.arraylake-warehouse.json"))
            .await
    );
    // Loads and commits work through the override's storage.
    c.append_snapshot(ADMIN_TOKEN, "ov", "huge", 1)
        .await
        .assert_ok(200);
    let mut staged = body.clone();
    staged["name"] = json!("staged");
    staged["stage-create"] = json!(true);
    c.post(&tables_path("ov"), staged)
        .await
        .assert_error(400, "BadRequestException");
    let mut unknown = create_table_body("u");
    unknown["properties"] = json!({"arraylake.bucket": "nope"});
    c.post(&tables_path("ov"), unknown)
        .await
        .assert_error(400, "BadRequestException");
    let mut anonymous = create_table_body("a");
    anonymous["properties"] = json!({"arraylake.bucket": "anon"});
    c.post(&tables_path("ov"), anonymous)
        .await
        .assert_error(400, "BadRequestException");
    let mut outside = body.clone();
    outside["name"] = json!("outside");
    outside["location"] =
        json!(c.get(&format!("/v1/{ORG}/namespaces/ov")).await.body["properties"]["location"]);
    c.post(&tables_path("ov"), outside)
        .await
        .assert_error(400, "BadRequestException");
}

#[tokio::test]
async fn stage_create_persists_nothing_until_the_create_commit() {
    let c = TestCatalog::new().await;
    c.create_namespace("stage").await;
    let mut body = create_table_body("staged");
    body["stage-create"] = json!(true);
    let staged = c.post(&tables_path("stage"), body).await;
    let staged = staged.assert_ok(200).clone();
    assert!(staged["metadata-location"].is_null());
    c.get(&format!("{}/staged", tables_path("stage")))
        .await
        .assert_error(404, "NoSuchTableException");
    let metadata = &staged["metadata"];
    let commit = json!({
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": metadata["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": metadata["schemas"][0]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": metadata["location"]},
            {"action": "set-properties", "updates": {"owner": "stage"}}
        ]
    });
    let committed = c
        .post(&format!("{}/staged", tables_path("stage")), commit.clone())
        .await;
    let body = committed.assert_ok(200);
    assert!(
        body["metadata-location"]
            .as_str()
            .unwrap()
            .contains("/metadata/00000-")
    );
    assert_eq!(body["metadata"]["table-uuid"], metadata["table-uuid"]);
    assert_eq!(body["metadata"]["properties"]["owner"], "stage");
    c.get(&format!("{}/staged", tables_path("stage")))
        .await
        .assert_ok(200);
    // A second create commit loses: the table exists now.
    c.post(&format!("{}/staged", tables_path("stage")), commit)
        .await
        .assert_error(409, "CommitFailedException");
}

#[tokio::test]
async fn rename_within_a_namespace_only() {
    let c = TestCatalog::new().await;
    c.create_namespace("rn").await;
    c.create_namespace("r2").await;
    let original = c.create_table("rn", "old").await;
    c.create_table("rn", "taken").await;
    let rename = |from: &str, to_ns: &str, to: &str| json!({"source": {"namespace": ["rn"], "name": from}, "destination": {"namespace": [to_ns], "name": to}});
    let path = format!("/v1/{ORG}/tables/rename");
    c.post(&path, rename("old", "r2", "moved"))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&path, rename("old", "rn", "taken"))
        .await
        .assert_error(409, "AlreadyExistsException");
    c.post(&path, rename("missing", "rn", "x"))
        .await
        .assert_error(404, "NoSuchTableException");
    c.post(&path, rename("old", "rn", "bad/name"))
        .await
        .assert_error(400, "BadRequestException");
    assert_eq!(
        c.post(&path, rename("old", "rn", "new"))
            .await
            .status
            .as_u16(),
        204
    );
    c.get(&format!("{}/old", tables_path("rn")))
        .await
        .assert_error(404, "NoSuchTableException");
    let moved = c.get(&format!("{}/new", tables_path("rn"))).await;
    assert_eq!(
        moved.assert_ok(200)["metadata"]["table-uuid"],
        original["metadata"]["table-uuid"]
    );
    // The old name is free again, and its new table does not share the renamed table's files.
    let reborn = c.create_table("rn", "old").await;
    assert_ne!(
        reborn["metadata"]["location"],
        original["metadata"]["location"]
    );
    let nested = json!({"source": {"namespace": ["rn", "x"], "name": "new"}, "destination": {"namespace": ["rn"], "name": "n2"}});
    c.post(&path, nested)
        .await
        .assert_error(404, "NoSuchTableException");
}

#[tokio::test]
async fn metrics_views_and_credentials() {
    let c = TestCatalog::new().await;
    c.create_namespace("mm").await;
    c.create_table("mm", "t").await;
    let report = json!({"report-type": "scan-report", "table-name": "mm.t", "snapshot-id": 1, "filter": true, "schema-id": 0, "projected-field-ids": [1], "projected-field-names": ["id"], "metrics": {}});
    assert_eq!(
        c.post(&format!("{}/t/metrics", tables_path("mm")), report.clone())
            .await
            .status
            .as_u16(),
        204
    );
    c.post(&format!("{}/nope/metrics", tables_path("mm")), report)
        .await
        .assert_error(404, "NoSuchTableException");
    let views = c.get(&format!("/v1/{ORG}/namespaces/mm/views")).await;
    assert_eq!(views.assert_ok(200)["identifiers"], json!([]));
    c.get(&format!("/v1/{ORG}/namespaces/nope/views"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    let creds = c.get(&format!("{}/t/credentials", tables_path("mm"))).await;
    let vended = creds.assert_ok(200)["storage-credentials"]
        .as_array()
        .unwrap();
    match c.backend {
        Backend::Local => assert!(vended.is_empty()),
        Backend::Aws => {
            let location =
                c.get(&format!("{}/t", tables_path("mm"))).await.body["metadata"]["location"]
                    .clone();
            assert_eq!(vended.len(), 1);
            assert_eq!(vended[0]["prefix"], location);
            assert!(vended[0]["config"]["s3.session-token"].is_string());
        }
        Backend::Gcs => {
            let location =
                c.get(&format!("{}/t", tables_path("mm"))).await.body["metadata"]["location"]
                    .clone();
            assert_eq!(vended.len(), 1);
            assert_eq!(vended[0]["prefix"], location);
            assert!(vended[0]["config"]["gcs.oauth2.token"].is_string());
        }
    }
    c.get(&format!("{}/nope/credentials", tables_path("mm")))
        .await
        .assert_error(404, "NoSuchTableException");
    let vended = c
        .request(
            Method::GET,
            &format!("{}/t", tables_path("mm")),
            Some(ADMIN_TOKEN),
            None,
        )
        .await;
    // Without the delegation header: the bucket's settings at most, never a secret.
    let config = vended.assert_ok(200)["config"].clone();
    match c.backend {
        Backend::Local => assert_eq!(config, json!({})),
        _ => {
            for secret in [
                "s3.access-key-id",
                "s3.secret-access-key",
                "s3.session-token",
                "gcs.oauth2.token",
            ] {
                assert!(config.get(secret).is_none(), "{config}");
            }
        }
    }
}

#[tokio::test]
async fn table_operations_respect_org_roles() {
    let c = TestCatalog::new().await;
    c.create_namespace("roles").await;
    c.create_table("roles", "t").await;
    let reader = c.read_token.clone();
    c.request(
        Method::GET,
        &format!("{}/t", tables_path("roles")),
        Some(&reader),
        None,
    )
    .await
    .assert_ok(200);
    c.request(Method::GET, &tables_path("roles"), Some(&reader), None)
        .await
        .assert_ok(200);
    c.post_as(&reader, &tables_path("roles"), create_table_body("x"))
        .await
        .assert_error(403, "ForbiddenException");
    c.request(
        Method::DELETE,
        &format!("{}/t", tables_path("roles")),
        Some(&reader),
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.append_snapshot(&reader, "roles", "t", 5)
        .await
        .assert_error(403, "ForbiddenException");
    let outsider = c.outsider_token.clone();
    c.request(
        Method::GET,
        &format!("{}/t", tables_path("roles")),
        Some(&outsider),
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.post_as(
        &c.write_token,
        &tables_path("roles"),
        create_table_body("w"),
    )
    .await
    .assert_ok(200);
}

#[tokio::test]
async fn snapshots_refs_mode_returns_only_referenced_snapshots() {
    let c = TestCatalog::new().await;
    c.create_namespace("snaps").await;
    c.create_table("snaps", "t").await;
    c.append_snapshot(ADMIN_TOKEN, "snaps", "t", 1)
        .await
        .assert_ok(200);
    c.append_snapshot(ADMIN_TOKEN, "snaps", "t", 2)
        .await
        .assert_ok(200);
    let all: Value = c.get(&format!("{}/t", tables_path("snaps"))).await.body;
    assert_eq!(all["metadata"]["snapshots"].as_array().unwrap().len(), 2);
    let refs: Value = c
        .get(&format!("{}/t?snapshots=refs", tables_path("snaps")))
        .await
        .body;
    let ids = |answer: &Value| -> Vec<i64> {
        answer["metadata"]["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["snapshot-id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(ids(&refs), vec![2]);
    // Only `snapshots` is trimmed; the rest of the document is the stored one.
    let mut trimmed = all["metadata"].clone();
    trimmed["snapshots"] = refs["metadata"]["snapshots"].clone();
    assert_eq!(refs["metadata"], trimmed);
    assert_eq!(
        refs["metadata"]["snapshot-log"].as_array().unwrap().len(),
        2
    );
    // The refs form follows each new metadata file (it is derived once per file).
    c.append_snapshot(ADMIN_TOKEN, "snaps", "t", 3)
        .await
        .assert_ok(200);
    let refs: Value = c
        .get(&format!("{}/t?snapshots=refs", tables_path("snaps")))
        .await
        .body;
    assert_eq!(ids(&refs), vec![3]);
}

/// Every table answer names how to reach the bucket (endpoint, region, addressing), with or
/// without vended credentials; only a vended one carries secrets.
#[tokio::test]
async fn every_load_carries_the_non_secret_storage_settings() {
    let c = TestCatalog::new().await;
    if c.backend != Backend::Aws {
        return;
    }
    c.create_namespace("reach").await;
    let created = c.post(&tables_path("reach"), create_table_body("t")).await;
    let config = created.assert_ok(200)["config"].clone();
    assert_eq!(config["s3.region"], "us-east-1", "{config}");
    assert_eq!(config["s3.endpoint"], moto::endpoint().as_str(), "{config}");
    assert_eq!(config["s3.path-style-access"], "true", "{config}");
    assert!(config.get("s3.access-key-id").is_none(), "{config}");
    let loaded = c.get(&table_path("reach", "t")).await;
    assert_eq!(loaded.assert_ok(200)["config"], config);
    assert!(loaded.body.get("storage-credentials").is_none());
}
