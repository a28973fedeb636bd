//! Views: create, load, exists, list, replace, rename, drop and register, their names kept apart
//! from tables', their grants shared with tables' by name, their events.

use floe_tests::*;
use serde_json::{Value, json};

fn views_path(ns: &str) -> String {
    format!("{}/views", ns_path(ns))
}

fn view_path(ns: &str, view: &str) -> String {
    format!("{}/views/{view}", ns_path(ns))
}

fn view_body(ns: &str, name: &str, sql: &str) -> Value {
    json!({
        "name": name,
        "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "type": "long", "required": false}
        ]},
        "view-version": {
            "version-id": 1, "schema-id": 0, "timestamp-ms": 1_764_547_200_000_u64,
            "summary": {"engine-name": "spark", "arraylake.author-name": "spoofed"},
            "default-namespace": [ns],
            "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}]
        },
        "properties": {"comment": "made in a test"}
    })
}

fn rename_body(ns: &str, from: &str, to: &str) -> Value {
    json!({
        "source": {"namespace": [ns], "name": from},
        "destination": {"namespace": [ns], "name": to}
    })
}

fn listed(answer: &Answer) -> Vec<String> {
    answer.body["identifiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_owned())
        .collect()
}

async fn create_view(c: &TestCatalog, ns: &str, name: &str) -> Value {
    c.post(&views_path(ns), view_body(ns, name, "SELECT 1 AS id"))
        .await
        .assert_ok(200)
        .clone()
}

#[tokio::test]
async fn a_view_is_created_loaded_replaced_and_dropped() {
    let c = TestCatalog::new().await;
    c.create_namespace("vw").await;
    let created = create_view(&c, "vw", "daily").await;
    let metadata = &created["metadata"];
    assert_eq!(metadata["format-version"], 1);
    assert_eq!(metadata["current-version-id"], 1);
    assert_eq!(metadata["versions"].as_array().unwrap().len(), 1);
    assert_eq!(metadata["version-log"].as_array().unwrap().len(), 1);
    assert_eq!(metadata["properties"]["comment"], "made in a test");
    let summary = &metadata["versions"][0]["summary"];
    assert_eq!(summary["engine-name"], "spark");
    assert_ne!(
        summary["arraylake.author-name"], "spoofed",
        "authors are stamped"
    );
    let location = created["metadata-location"].as_str().unwrap();
    assert!(location.contains("/metadata/00000-"), "{location}");
    assert!(created["config"].is_object());

    let loaded = c.get(&view_path("vw", "daily")).await;
    assert_eq!(loaded.assert_ok(200)["metadata"], *metadata);
    assert_eq!(c.head(&view_path("vw", "daily")).await.status.as_u16(), 204);
    assert_eq!(
        c.head(&view_path("vw", "missing")).await.status.as_u16(),
        404
    );
    let list = c.get(&views_path("vw")).await;
    list.assert_ok(200);
    assert_eq!(listed(&list), ["daily"]);
    // Views are not tables.
    c.get(&table_path("vw", "daily"))
        .await
        .assert_error(404, "NoSuchTableException");
    assert!(listed(&c.get(&tables_path("vw")).await).is_empty());

    // A new version with two dialects becomes current.
    let uuid = metadata["view-uuid"].clone();
    let replace = json!({
        "requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
        "updates": [
            {"action": "add-view-version", "view-version": {
                "version-id": 2, "schema-id": 0, "timestamp-ms": 1_764_547_300_000_u64,
                "summary": {"engine-name": "trino"}, "default-namespace": ["vw"],
                "representations": [
                    {"type": "sql", "sql": "SELECT 2 AS id", "dialect": "spark"},
                    {"type": "sql", "sql": "SELECT 2 AS id", "dialect": "trino"}
                ]}},
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-properties", "updates": {"owner": "analytics"}}
        ]
    });
    let replaced = c.post(&view_path("vw", "daily"), replace).await;
    let after = &replaced.assert_ok(200)["metadata"];
    assert_eq!(after["current-version-id"], 2);
    assert_eq!(after["versions"].as_array().unwrap().len(), 2);
    assert_eq!(after["version-log"].as_array().unwrap().len(), 2);
    assert_eq!(after["properties"]["owner"], "analytics");
    assert_eq!(
        after["versions"][1]["representations"][1]["dialect"],
        "trino"
    );
    assert!(
        after["versions"][1]["summary"]["arraylake.author-name"].is_string()
            || after["versions"][1]["summary"]["arraylake.author-email"].is_string()
    );
    assert!(
        replaced.body["metadata-location"]
            .as_str()
            .unwrap()
            .contains("/metadata/00001-")
    );
    // Dropping a dialect is refused, as the view spec asks.
    let drop_dialect = json!({"requirements": [], "updates": [
        {"action": "add-view-version", "view-version": {
            "version-id": 3, "schema-id": 0, "timestamp-ms": 1_764_547_400_000_u64,
            "summary": {}, "default-namespace": ["vw"],
            "representations": [{"type": "sql", "sql": "SELECT 3 AS id", "dialect": "spark"}]}},
        {"action": "set-current-view-version", "view-version-id": -1}
    ]});
    c.post(&view_path("vw", "daily"), drop_dialect)
        .await
        .assert_error(400, "BadRequestException");
    let stale = json!({"requirements": [
        {"type": "assert-view-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}
    ], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]});
    c.post(&view_path("vw", "daily"), stale)
        .await
        .assert_error(409, "CommitFailedException");

    assert_eq!(
        c.delete(&view_path("vw", "daily")).await.status.as_u16(),
        204
    );
    c.get(&view_path("vw", "daily"))
        .await
        .assert_error(404, "NoSuchViewException");
    c.delete(&view_path("vw", "daily"))
        .await
        .assert_error(404, "NoSuchViewException");
    assert!(listed(&c.get(&views_path("vw")).await).is_empty());

    let events = c
        .management(
            http::Method::GET,
            &format!("/orgs/{ORG}/events"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    let kinds: Vec<(&str, &str)> = events.assert_ok(200)["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("io.floe.view."))
        .map(|e| (e["type"].as_str().unwrap(), e["subject"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("io.floe.view.created", "namespaces/vw/views/daily"),
            ("io.floe.view.replaced", "namespaces/vw/views/daily"),
            ("io.floe.view.dropped", "namespaces/vw/views/daily"),
        ]
    );
}

/// The spec's 409 either way: a view takes no table's name, a table no view's, by create,
/// rename or create commit.
#[tokio::test]
async fn tables_and_views_never_share_a_name() {
    let c = TestCatalog::new().await;
    c.create_namespace("names").await;
    c.create_table("names", "t").await;
    create_view(&c, "names", "v").await;
    c.post(&views_path("names"), view_body("names", "t", "SELECT 1"))
        .await
        .assert_error(409, "AlreadyExistsException");
    c.post(&tables_path("names"), create_table_body("v"))
        .await
        .assert_error(409, "AlreadyExistsException");
    let rename = format!("/v1/{ORG}/tables/rename");
    c.post(&rename, rename_body("names", "t", "v"))
        .await
        .assert_error(409, "AlreadyExistsException");
    let rename_view = format!("/v1/{ORG}/views/rename");
    c.post(&rename_view, rename_body("names", "v", "t"))
        .await
        .assert_error(409, "AlreadyExistsException");
    // A staged create's commit under the view's name.
    let mut staged = create_table_body("v");
    staged["stage-create"] = json!(true);
    let staged = c.post(&tables_path("names"), staged).await;
    let staged = staged.assert_ok(200)["metadata"].clone();
    let create = json!({
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": staged["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": staged["schemas"][0]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "set-location", "location": staged["location"]}
        ]
    });
    c.post(&table_path("names", "v"), create)
        .await
        .assert_error(409, "AlreadyExistsException");
    // Both still what they were.
    c.get(&table_path("names", "t")).await.assert_ok(200);
    c.get(&view_path("names", "v")).await.assert_ok(200);
    // Renaming a view moves it; the old name is free for a table.
    c.post(&rename_view, rename_body("names", "v", "w"))
        .await
        .assert_ok(204);
    c.get(&view_path("names", "v"))
        .await
        .assert_error(404, "NoSuchViewException");
    c.get(&view_path("names", "w")).await.assert_ok(200);
    c.create_table("names", "v").await;
}

/// One grant namespace serves tables and views: a grant on `<ns>.<name>` covers the view of that
/// name; namespace grants cover every view.
#[tokio::test]
async fn grants_by_name_cover_views() {
    let c = TestCatalog::new().await;
    c.create_namespace("shared").await;
    create_view(&c, "shared", "granted").await;
    create_view(&c, "shared", "other").await;
    let client = c
        .management(
            http::Method::POST,
            &format!("/orgs/{ORG}/api-clients"),
            ADMIN_TOKEN,
            Some(json!({"name": "viewer", "role": "none"})),
        )
        .await;
    let body = client.assert_ok(201).clone();
    let token = body["token"].as_str().unwrap().to_owned();
    let principal = body["principal"].as_str().unwrap().to_owned();
    let grant = |action: &str, table: Option<&str>| {
        let mut grant = json!({"principal": principal, "action": action});
        if let Some(table) = table {
            grant["table"] = json!(table);
        }
        grant
    };
    c.management(
        http::Method::PUT,
        &format!("/orgs/{ORG}/namespaces/shared/grants"),
        ADMIN_TOKEN,
        Some(grant("read", Some("granted"))),
    )
    .await
    .assert_ok(204);
    let viewer = token.as_str();
    let catalog = &c;
    let as_viewer = |path: String| async move {
        catalog
            .request(http::Method::GET, &path, Some(viewer), None)
            .await
    };
    as_viewer(view_path("shared", "granted"))
        .await
        .assert_ok(200);
    as_viewer(view_path("shared", "other"))
        .await
        .assert_error(403, "ForbiddenException");
    let list = as_viewer(views_path("shared")).await;
    list.assert_ok(200);
    assert_eq!(listed(&list), ["granted"]);
    let touch = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "v"}}
    ]});
    c.post_as(&token, &view_path("shared", "granted"), touch.clone())
        .await
        .assert_error(403, "ForbiddenException");

    c.management(
        http::Method::PUT,
        &format!("/orgs/{ORG}/namespaces/shared/grants"),
        ADMIN_TOKEN,
        Some(grant("write", None)),
    )
    .await
    .assert_ok(204);
    c.post_as(&token, &view_path("shared", "other"), touch)
        .await
        .assert_ok(200);
}

#[tokio::test]
async fn a_namespace_holding_a_view_is_not_empty() {
    let c = TestCatalog::new().await;
    c.create_namespace("full").await;
    create_view(&c, "full", "v").await;
    c.delete(&ns_path("full"))
        .await
        .assert_error(409, "NamespaceNotEmptyException");
    assert_eq!(c.delete(&view_path("full", "v")).await.status.as_u16(), 204);
    assert_eq!(c.delete(&ns_path("full")).await.status.as_u16(), 204);
}

#[tokio::test]
async fn a_view_file_registers_from_a_directory_of_its_own() {
    let c = TestCatalog::new().await;
    c.create_namespace("regv").await;
    let created = create_view(&c, "regv", "source").await;
    let location = created["metadata"]["location"].as_str().unwrap();
    let root = location.rsplit_once('/').unwrap().0.to_owned();
    let mut copy = created["metadata"].clone();
    copy["view-uuid"] = json!(uuid::Uuid::new_v4().to_string());
    copy["location"] = json!(format!("{root}/moved-view"));
    let file = format!("{root}/moved-view/metadata/00004-a.metadata.json");
    c.overwrite(&file, serde_json::to_vec(&copy).unwrap()).await;
    let path = format!("{}/register-view", ns_path("regv"));
    let registered = c
        .post(&path, json!({"name": "moved", "metadata-location": file}))
        .await;
    assert_eq!(registered.assert_ok(200)["metadata"], copy);
    c.get(&view_path("regv", "moved")).await.assert_ok(200);
    // Its next version follows the file's number.
    let touch = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "v"}}
    ]});
    let replaced = c.post(&view_path("regv", "moved"), touch).await;
    assert!(
        replaced.assert_ok(200)["metadata-location"]
            .as_str()
            .unwrap()
            .contains("/moved-view/metadata/00005-")
    );

    let mut tampered = created["metadata"].clone();
    tampered["location"] = json!(format!("{root}/tampered"));
    tampered["current-version-id"] = json!(99);
    let tampered_file = format!("{root}/tampered/metadata/00001-b.metadata.json");
    c.overwrite(&tampered_file, serde_json::to_vec(&tampered).unwrap())
        .await;
    let own_file = created["metadata-location"].as_str().unwrap().to_owned();
    for (case, file) in [
        ("the source view's own file", own_file),
        ("a tampered file", tampered_file),
        (
            "a file outside the namespace",
            "file:///etc/v/metadata/v1.metadata.json".into(),
        ),
        (
            "a missing file",
            format!("{root}/missing/metadata/00001-c.metadata.json"),
        ),
    ] {
        let answer = c
            .post(&path, json!({"name": "again", "metadata-location": file}))
            .await;
        assert_eq!(answer.status.as_u16(), 400, "{case}: {}", answer.body);
        c.get(&view_path("regv", "again"))
            .await
            .assert_error(404, "NoSuchViewException");
    }
    c.post(&path, json!({"name": "moved", "metadata-location": "x"}))
        .await
        .assert_error(400, "BadRequestException");
}

#[tokio::test]
async fn a_view_change_retried_with_its_key_lands_once() {
    let c = TestCatalog::new().await;
    c.create_namespace("idemv").await;
    create_view(&c, "idemv", "v").await;
    let key = uuid::Uuid::now_v7().to_string();
    let body = bytes::Bytes::from(
        json!({"requirements": [], "updates": [
            {"action": "set-properties", "updates": {"k": "v"}}
        ]})
        .to_string(),
    );
    let mut locations = Vec::new();
    for _ in 0..2 {
        let answer = c
            .send(
                http::Method::POST,
                &format!("/iceberg{}", view_path("idemv", "v")),
                Some(ADMIN_TOKEN),
                Some(body.clone()),
                &[("idempotency-key", &key)],
            )
            .await;
        locations.push(answer.assert_ok(200)["metadata-location"].clone());
    }
    assert_eq!(locations[0], locations[1]);
}
