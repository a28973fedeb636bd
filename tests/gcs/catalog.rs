//! The catalog on GCS bucket configurations, through the HTTP router: a configuration added
//! through the management API after a reachability check, a namespace and a table on it,
//! commits, loads with vended tokens, drops, and the purge emptying the prefix.

use std::sync::Arc;

use floe::model::BucketAuth;
use floe::objects::ObjectStore;
use floe_tests::{gcs, moto, *};
use http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// Loads a table asking for vended credentials, as engines do.
async fn load_vended(c: &TestCatalog, path: &str) -> Value {
    let request = Request::builder()
        .method(Method::GET)
        .uri(format!("/iceberg{path}"))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .header("x-iceberg-access-delegation", "vended-credentials")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = c.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// Every object under `prefix` (a location) on the emulator bucket of `store`.
async fn objects_under(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<String> {
    store
        .list(&format!("{}/", prefix.trim_end_matches('/')), 10_000)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_namespace_on_a_gcs_bucket_lives_and_is_purged() {
    let c = TestCatalog::gcs().await;
    let name = moto::unique("lake");
    let body = json!({"nickname": "lake", "platform": "gcs", "bucket": name,
        "prefix": "/iceberg/", "auth": {"type": "service_account"}});
    let buckets = format!("/orgs/{ORG}/buckets");

    // Checked by listing under its root: a bucket that does not exist is refused.
    let missing = c
        .management(Method::POST, &buckets, ADMIN_TOKEN, Some(body.clone()))
        .await;
    missing.assert_error(400, "BadRequestException");
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not reachable"),
        "{}",
        missing.body
    );
    gcs::create_bucket(&name).await;
    // Only with proof that the org controls the bucket: the object the refusal names, holding
    // the value it names (a value of another org's, or none, is refused).
    let mut row = gcs::gcs_bucket("lake", &name, BucketAuth::ServiceAccount);
    row.root = format!("gs://{name}/iceberg");
    let store: Arc<dyn ObjectStore> = gcs::stores().for_bucket(&row).unwrap();
    let proof = format!("gs://{name}/iceberg/.floe-ownership");
    let unproven = c
        .management(Method::POST, &buckets, ADMIN_TOKEN, Some(body.clone()))
        .await;
    unproven.assert_error(400, "BadRequestException");
    let message = unproven.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&proof), "{message}");
    let value = message
        .split_whitespace()
        .find(|w| w.starts_with("floe-ownership-"))
        .unwrap_or_else(|| panic!("no value in: {message}"))
        .trim_end_matches(['.', ',', ')'])
        .to_owned();
    store
        .put_if_absent(&proof, bytes::Bytes::from("floe-ownership-of-another-org"))
        .await
        .unwrap();
    c.management(Method::POST, &buckets, ADMIN_TOKEN, Some(body.clone()))
        .await
        .assert_error(400, "BadRequestException");
    store.delete(std::slice::from_ref(&proof)).await.unwrap();
    store
        .put_if_absent(&proof, bytes::Bytes::from(format!("{value}\n")))
        .await
        .unwrap();
    let added = c
        .management(Method::POST, &buckets, ADMIN_TOKEN, Some(body))
        .await;
    let added = added.assert_ok(201).clone();
    assert_eq!(added["platform"], "gcs");
    assert_eq!(added["bucket"], name);
    assert_eq!(added["prefix"], "iceberg");
    assert_eq!(added["auth"], json!({"type": "service_account"}));

    // A namespace and a table on it; metadata files land on GCS, never overwritten.
    let ns = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["ongcs"], "properties": {"arraylake.bucket": "lake"}}),
        )
        .await;
    let location = ns.assert_ok(200)["properties"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        location.starts_with(&format!("gs://{name}/iceberg/")),
        "{location}"
    );
    let created = c.create_table("ongcs", "t").await;
    let first = created["metadata-location"].as_str().unwrap().to_owned();
    assert!(first.starts_with(&location), "{first}");
    let table = created["metadata"]["location"].as_str().unwrap().to_owned();
    c.append_snapshot(ADMIN_TOKEN, "ongcs", "t", 1)
        .await
        .assert_ok(200);
    c.append_snapshot(ADMIN_TOKEN, "ongcs", "t", 2)
        .await
        .assert_ok(200);
    let files = objects_under(&store, &table).await;
    assert_eq!(files.len(), 3, "{files:?}");
    let metadata: Value = serde_json::from_slice(&store.get(&first).await.unwrap()).unwrap();
    assert_eq!(metadata["location"], table.as_str());

    // Loads vend a token downscoped to the table's own prefix (object admin for the admin).
    let loaded = load_vended(&c, &table_path("ongcs", "t")).await;
    assert_eq!(loaded["metadata"]["current-snapshot-id"], 2);
    let token = loaded["config"]["gcs.oauth2.token"].as_str().unwrap();
    assert!(token.starts_with("downscoped-"), "{loaded}");
    assert_eq!(loaded["storage-credentials"][0]["prefix"], table.as_str());
    assert_eq!(
        loaded["storage-credentials"][0]["config"]["gcs.oauth2.token"],
        token
    );
    assert!(
        loaded["config"]["gcs.oauth2.token-expires-at"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    assert_eq!(loaded["config"]["gcs.service.host"], gcs::emulator());
    let google = c.google.as_ref().unwrap();
    let exchanges = google.exchanges();
    let boundary = gcs::FakeGoogle::boundary(exchanges.last().unwrap());
    let rule = &boundary["accessBoundary"]["accessBoundaryRules"][0];
    assert_eq!(
        rule["availableResource"],
        format!("//storage.googleapis.com/projects/_/buckets/{name}")
    );
    assert_eq!(
        rule["availablePermissions"],
        json!(["inRole:roles/storage.objectAdmin"])
    );
    let key = table.strip_prefix(&format!("gs://{name}/")).unwrap();
    assert!(
        rule["availabilityCondition"]["expression"]
            .as_str()
            .unwrap()
            .contains(&format!("/objects/{key}/')")),
        "{rule}"
    );
    // The credentials endpoint hands out the same (remembered) token.
    let refreshed = c
        .get(&format!("{}/credentials", table_path("ongcs", "t")))
        .await;
    assert_eq!(
        refreshed.assert_ok(200)["storage-credentials"][0]["config"]["gcs.oauth2.token"],
        token
    );

    // Drops keep the files; the purge of the dropped namespace empties its prefix.
    assert_eq!(
        c.delete(&table_path("ongcs", "t")).await.status.as_u16(),
        204
    );
    assert_eq!(objects_under(&store, &table).await.len(), 3);
    assert_eq!(c.delete(&ns_path("ongcs")).await.status.as_u16(), 204);
    let left = objects_under(&store, &location).await;
    assert!(files.iter().all(|f| left.contains(f)), "{left:?}");
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + floe::catalog::purge::RECOVERY_PERIOD.as_millis() as u64
        + 1_000;
    let report = c
        .catalog
        .namespaces
        .purge_expired(later, floe::catalog::purge::RECOVERY_PERIOD, 100)
        .await
        .unwrap();
    assert_eq!(report.purged, vec![format!("{ORG}/ongcs")]);
    assert_eq!(report.objects_deleted, left.len() as u64);
    assert!(objects_under(&store, &location).await.is_empty());
}

/// The org's default bucket on GCS serves namespaces that name none.
#[tokio::test]
async fn the_default_bucket_on_gcs_serves_plain_namespaces() {
    let c = TestCatalog::gcs().await;
    let ns = c.create_namespace("plain").await;
    let location = ns["properties"]["location"].as_str().unwrap().to_owned();
    assert!(location.starts_with(&c.default_root()), "{location}");
    c.create_table("plain", "t").await;
    c.append_snapshot(ADMIN_TOKEN, "plain", "t", 1)
        .await
        .assert_ok(200);
    let files = c.files_under(&location).await;
    let metadata = files.iter().filter(|f| f.ends_with(".metadata.json"));
    assert_eq!(metadata.count(), 2, "{files:?}");
    assert!(files.iter().all(|f| f.starts_with(&location)), "{files:?}");
}
