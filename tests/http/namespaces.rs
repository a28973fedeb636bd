use floe::model::BucketAuth;
use floe::store::rows::{NameClaimRow, NameHolder, keys};
use floe::store::{Condition, rows};
use floe_tests::*;
use http::Method;
use serde_json::json;

#[tokio::test]
async fn create_load_head_list_drop() {
    let c = TestCatalog::new().await;
    let created = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["sales"], "properties": {"owner": "ada"}}),
        )
        .await;
    let body = created.assert_ok(200);
    assert_eq!(body["namespace"], json!(["sales"]));
    assert_eq!(body["properties"]["owner"], "ada");
    let location = body["properties"]["location"].as_str().unwrap().to_owned();
    assert!(
        location.starts_with(&format!("{}/sales-", c.default_root())),
        "{location}"
    );

    let loaded = c.get(&ns_path("sales")).await;
    assert_eq!(
        loaded.assert_ok(200)["properties"]["location"],
        location.as_str()
    );
    assert_eq!(c.head(&ns_path("sales")).await.status.as_u16(), 204);
    assert_eq!(c.head(&ns_path("nope")).await.status.as_u16(), 404);
    c.get(&ns_path("nope"))
        .await
        .assert_error(404, "NoSuchNamespaceException");

    let marker = c
        .read_json(&format!("{location}/.arraylake-warehouse.json"))
        .await;
    assert_eq!(marker["owner"], "sales");

    c.create_namespace("alpha").await;
    let list = c.get(&format!("/v1/{ORG}/namespaces")).await;
    assert_eq!(
        list.assert_ok(200)["namespaces"],
        json!([["alpha"], ["sales"]])
    );
    assert!(list.body.get("next-page-token").is_none());

    assert_eq!(c.delete(&ns_path("alpha")).await.status.as_u16(), 204);
    c.get(&ns_path("alpha"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    c.delete(&ns_path("alpha"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    assert_eq!(
        c.get(&format!("/v1/{ORG}/namespaces")).await.body["namespaces"],
        json!([["sales"]])
    );

    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["sales"]}),
    )
    .await
    .assert_error(409, "AlreadyExistsException");
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["SALES"]}),
    )
    .await
    .assert_error(409, "AlreadyExistsException");
}

#[tokio::test]
async fn namespaces_are_flat() {
    let c = TestCatalog::new().await;
    let nested = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["raw", "obs"]}),
        )
        .await;
    nested.assert_error(400, "BadRequestException");
    assert!(
        nested.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ested namespaces are not supported")
    );
    c.post(&format!("/v1/{ORG}/namespaces"), json!({"namespace": []}))
        .await
        .assert_error(400, "BadRequestException");
    c.create_namespace("raw").await;
    // The 0x1F separator is parsed: raw\x1fobs is a nested reference.
    c.get(&ns_path("raw%1Fobs"))
        .await
        .assert_error(400, "BadRequestException");
    c.get(&format!("/v1/{ORG}/namespaces/raw%1Fobs/tables"))
        .await
        .assert_error(400, "BadRequestException");
    // Nothing nests, so a parent lists nothing; an empty parent is the root.
    let children = c.get(&format!("/v1/{ORG}/namespaces?parent=raw")).await;
    assert_eq!(children.assert_ok(200)["namespaces"], json!([]));
    let root = c.get(&format!("/v1/{ORG}/namespaces?parent=")).await;
    assert_eq!(root.assert_ok(200)["namespaces"], json!([["raw"]]));
}

/// The spec's listNamespaces with a parent: an unknown parent is 404 (Daft's `has_namespace`
/// lists with a parent, and an empty 200 made it create nothing), a nested one 400 like every
/// other nested reference; a parent the caller cannot see answers as it would for a load.
#[tokio::test]
async fn listing_under_a_parent_needs_the_parent() {
    let c = TestCatalog::new().await;
    c.create_namespace("raw").await;
    c.get(&format!("/v1/{ORG}/namespaces?parent=missing"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    c.get(&format!("/v1/{ORG}/namespaces?parent=raw%1Fobs"))
        .await
        .assert_error(400, "BadRequestException");
    let children = c.get(&format!("/v1/{ORG}/namespaces?parent=raw")).await;
    assert_eq!(children.assert_ok(200)["namespaces"], json!([]));
    // Someone who sees nothing of the org learns nothing of its namespaces either way.
    for parent in ["raw", "missing"] {
        let outsider = c
            .request(
                Method::GET,
                &format!("/v1/{ORG}/namespaces?parent={parent}"),
                Some(&c.outsider_token),
                None,
            )
            .await;
        assert_eq!(outsider.status.as_u16(), 403, "{parent}: {}", outsider.body);
    }
}

#[tokio::test]
async fn names_follow_repo_rules() {
    let c = TestCatalog::new().await;
    for bad in [
        "a",
        "-x",
        "has space",
        "slash/y",
        "ünïcode",
        &"n".repeat(129),
    ] {
        c.post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": [bad]}),
        )
        .await
        .assert_error(400, "BadRequestException");
    }
    c.create_namespace(&"n".repeat(128)).await;
    c.create_namespace("_under.score-9").await;
}

#[tokio::test]
async fn properties_update_reports_updated_removed_missing() {
    let c = TestCatalog::new().await;
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["pp"], "properties": {"a": "1", "b": "2"}}),
    )
    .await
    .assert_ok(200);
    let path = format!("{}/properties", ns_path("pp"));
    let answer = c
        .post(
            &path,
            json!({"updates": {"c": "3", "a": "10"}, "removals": ["b", "zz"]}),
        )
        .await;
    let body = answer.assert_ok(200);
    assert_eq!(body["updated"], json!(["a", "c"]));
    assert_eq!(body["removed"], json!(["b"]));
    assert_eq!(body["missing"], json!(["zz"]));
    let props = &c.get(&ns_path("pp")).await.body["properties"];
    assert_eq!(
        (props["a"].as_str(), props["c"].as_str(), props.get("b")),
        (Some("10"), Some("3"), None)
    );
    c.post(&path, json!({"updates": {"x": "1"}, "removals": ["x"]}))
        .await
        .assert_error(422, "UnprocessableEntityException");
    c.post(&path, json!({"updates": {"location": "file:///elsewhere"}}))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&format!("{}/properties", ns_path("missing")), json!({}))
        .await
        .assert_error(404, "NoSuchNamespaceException");
    // Readers cannot change properties.
    c.post_as(&c.read_token, &path, json!({"updates": {"x": "1"}}))
        .await
        .assert_error(403, "ForbiddenException");
}

#[tokio::test]
async fn location_defaults_to_the_storage_root_and_must_stay_inside() {
    let c = TestCatalog::new().await;
    let created = c.create_namespace("loc").await;
    let root = created["properties"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    let inside = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["loc2"], "properties": {"location": "file:///tmp/else"}}),
        )
        .await;
    inside.assert_error(400, "BadRequestException");
    assert!(!root.ends_with('/'));
}

#[tokio::test]
async fn drop_of_a_non_empty_namespace_is_409() {
    let c = TestCatalog::new().await;
    c.create_namespace("full").await;
    c.create_table("full", "t").await;
    c.delete(&ns_path("full"))
        .await
        .assert_error(409, "NamespaceNotEmptyException");
    assert_eq!(
        c.delete(&format!("{}/tables/t", ns_path("full")))
            .await
            .status
            .as_u16(),
        204
    );
    assert_eq!(c.delete(&ns_path("full")).await.status.as_u16(), 204);
}

#[tokio::test]
async fn soft_delete_keeps_the_name_and_recreate_restores_in_place() {
    let c = TestCatalog::new().await;
    let first = c.create_namespace("keep").await;
    let location = first["properties"]["location"].as_str().unwrap().to_owned();
    assert_eq!(c.delete(&ns_path("keep")).await.status.as_u16(), 204);
    // The name stays claimed case-insensitively while soft-deleted.
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["KEEP"]}),
    )
    .await
    .assert_error(409, "AlreadyExistsException");
    // Same name, still empty: restored in place, same storage prefix.
    let again = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["keep"], "properties": {"v": "2"}}),
        )
        .await;
    let body = again.assert_ok(200);
    assert_eq!(body["properties"]["location"], location.as_str());
    assert_eq!(body["properties"]["v"], "2");
    assert_eq!(c.get(&ns_path("keep")).await.status.as_u16(), 200);
}

#[tokio::test]
async fn a_soft_deleted_namespace_whose_storage_holds_data_is_not_restored() {
    let c = TestCatalog::new().await;
    c.create_namespace("data").await;
    let table = c.create_table("data", "t").await;
    assert!(
        table["metadata-location"]
            .as_str()
            .unwrap()
            .contains("/metadata/00000-")
    );
    c.delete(&format!("{}/tables/t", ns_path("data"))).await;
    c.delete(&ns_path("data")).await;
    // The dropped table's files remain under the prefix, so the name stays taken.
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["data"]}),
    )
    .await
    .assert_error(409, "AlreadyExistsException");
}

#[tokio::test]
async fn a_name_held_by_a_repo_is_409() {
    let c = TestCatalog::new().await;
    let claim = NameClaimRow {
        name: "climate".into(),
        holder: NameHolder::Repo,
    };
    c.store
        .write(vec![rows::put(
            keys::name_claim(ORG, "climate"),
            &claim,
            Condition::NotExists,
        )])
        .await
        .unwrap();
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["Climate"]}),
    )
    .await
    .assert_error(409, "AlreadyExistsException");
}

#[tokio::test]
async fn bucket_selection_rules() {
    let c = TestCatalog::new().await;
    let other = c.add_bucket("archive", BucketAuth::Server).await;
    c.add_bucket("public", BucketAuth::Anonymous).await;
    let created = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["arch"], "properties": {"arraylake.bucket": "archive"}}),
        )
        .await;
    assert!(
        created.assert_ok(200)["properties"]["location"]
            .as_str()
            .unwrap()
            .starts_with(&other)
    );
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["x1"], "properties": {"arraylake.bucket": "nope"}}),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["x2"], "properties": {"arraylake.bucket": "public"}}),
    )
    .await
    .assert_error(400, "BadRequestException");
}

#[tokio::test]
async fn org_roles_gate_namespace_operations() {
    let c = TestCatalog::new().await;
    c.create_namespace("gated").await;
    let path = format!("/v1/{ORG}/namespaces");
    let body = json!({"namespace": ["by_role"]});
    c.post_as(&c.read_token, &path, body.clone())
        .await
        .assert_error(403, "ForbiddenException");
    c.post_as(&c.outsider_token, &path, body.clone())
        .await
        .assert_error(403, "ForbiddenException");
    c.post_as(&c.write_token, &path, body).await.assert_ok(200);
    // Readers see and load, but cannot drop.
    let as_reader = c
        .request(Method::GET, &ns_path("gated"), Some(&c.read_token), None)
        .await;
    as_reader.assert_ok(200);
    c.request(Method::DELETE, &ns_path("gated"), Some(&c.read_token), None)
        .await
        .assert_error(403, "ForbiddenException");
    // Outsiders learn nothing, not even whether a namespace exists.
    c.request(
        Method::GET,
        &ns_path("gated"),
        Some(&c.outsider_token),
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.request(
        Method::GET,
        &ns_path("missing"),
        Some(&c.outsider_token),
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
}

#[tokio::test]
async fn pagination_is_opt_in() {
    let c = TestCatalog::new().await;
    for name in ["n1", "n2", "n3", "n4", "n5"] {
        c.create_namespace(name).await;
    }
    c.delete(&ns_path("n3")).await;
    let all = c.get(&format!("/v1/{ORG}/namespaces")).await;
    assert_eq!(all.body["namespaces"].as_array().unwrap().len(), 4);
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = c
            .get(&format!(
                "/v1/{ORG}/namespaces?pageSize=2&pageToken={token}"
            ))
            .await;
        let body = page.assert_ok(200).clone();
        seen.extend(
            body["namespaces"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n[0].as_str().unwrap().to_owned()),
        );
        assert!(body["namespaces"].as_array().unwrap().len() <= 2);
        match body["next-page-token"].as_str() {
            Some(next) => token = next.to_owned(),
            None => {
                assert!(
                    body.get("next-page-token").is_some(),
                    "last page carries a null token"
                );
                break;
            }
        }
    }
    assert_eq!(seen, vec!["n1", "n2", "n4", "n5"]);
}
