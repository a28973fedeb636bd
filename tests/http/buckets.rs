//! Bucket configurations through the management API: added after a reachability check, listed
//! and read without secrets, refused while in use, and picked as the org's default.

use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

fn buckets() -> String {
    format!("/orgs/{ORG}/buckets")
}

fn role_bucket(nickname: &str, bucket: &str) -> Value {
    json!({"nickname": nickname, "platform": "s3", "bucket": bucket, "prefix": "/iceberg/",
        "region": "us-east-1", "auth": {"type": "customer_managed_role", "role_arn": VENDING_ROLE}})
}

#[tokio::test]
async fn requests_are_checked_before_anything_is_stored() {
    let c = TestCatalog::new().await;
    let add = |body: Value| {
        let c = &c;
        async move {
            c.management(Method::POST, &buckets(), ADMIN_TOKEN, Some(body))
                .await
        }
    };
    for (body, says) in [
        (
            json!({"nickname": "gee", "platform": "gcs", "bucket": "gee",
                "auth": {"type": "hmac", "access_key_id": "GOOG1", "secret_access_key": "s3cr3t"}}),
            "service_account",
        ),
        (
            json!({"nickname": "cee", "platform": "s3-compatible", "bucket": "cee", "auth": {"type": "anonymous"}}),
            "endpoint",
        ),
        (
            json!({"nickname": "aitch", "platform": "s3", "bucket": "aitch-missing",
                "auth": {"type": "hmac", "access_key_id": "AKIA", "secret_access_key": "s3cr3t"}}),
            "not reachable",
        ),
        (
            json!({"nickname": "arr", "platform": "s3", "bucket": "arr",
                "auth": {"type": "customer_managed_role", "role_arn": "not-an-arn"}}),
            "role ARN",
        ),
        (
            json!({"nickname": "../x", "platform": "s3", "bucket": "ex", "auth": {"type": "anonymous"}}),
            "nickname",
        ),
        (
            json!({"nickname": "bee", "platform": "s3", "bucket": "Bad_Name", "auth": {"type": "anonymous"}}),
            "bucket name",
        ),
    ] {
        let answer = add(body).await;
        answer.assert_error(400, "BadRequestException");
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        assert!(!answer.body.to_string().contains("s3cr3t"));
    }
    // Only org admins administer buckets.
    c.management(
        Method::POST,
        &buckets(),
        &c.write_token,
        Some(json!({"nickname": "wee", "platform": "s3", "bucket": "wee", "auth": {"type": "anonymous"}})),
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.management(Method::GET, &buckets(), &c.write_token, None)
        .await
        .assert_error(403, "ForbiddenException");
    // Nothing was stored.
    let listed = c
        .management(Method::GET, &buckets(), ADMIN_TOKEN, None)
        .await;
    let nicknames: Vec<&str> = listed.assert_ok(200)["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["nickname"].as_str().unwrap())
        .collect();
    assert_eq!(nicknames, ["default"]);
}

#[tokio::test]
async fn anonymous_configurations_never_back_iceberg_storage() {
    let c = TestCatalog::new().await;
    let open = json!({"nickname": "open-data", "platform": "s3", "bucket": "open-data",
        "auth": {"type": "anonymous"}});
    let added = c
        .management(Method::POST, &buckets(), ADMIN_TOKEN, Some(open.clone()))
        .await;
    assert_eq!(added.assert_ok(201)["auth"], json!({"type": "anonymous"}));
    c.management(Method::POST, &buckets(), ADMIN_TOKEN, Some(open))
        .await
        .assert_error(409, "AlreadyExistsException");
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["anon"], "properties": {"arraylake.bucket": "open-data"}}),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.management(
        Method::PUT,
        &format!("/orgs/{ORG}/default-bucket"),
        ADMIN_TOKEN,
        Some(json!({"nickname": "open-data"})),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.management(
        Method::DELETE,
        &format!("{}/open-data", buckets()),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(204);
    c.management(
        Method::GET,
        &format!("{}/open-data", buckets()),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_error(404, "NotFoundException");
    c.management(
        Method::DELETE,
        &format!("{}/default", buckets()),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_error(409, "CommitFailedException");
}

/// A role-backed bucket is reachable only where S3 is (moto); locally the check refuses it.
#[tokio::test]
async fn role_backed_buckets_are_checked_used_and_protected_while_in_use() {
    let c = TestCatalog::new().await;
    let name = format!("lake-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let missing = c
        .management(
            Method::POST,
            &buckets(),
            ADMIN_TOKEN,
            Some(role_bucket("nowhere", &format!("{name}-missing"))),
        )
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
    if c.backend != Backend::Aws {
        return;
    }
    moto::create_bucket(&name).await;
    let added = c
        .management(
            Method::POST,
            &buckets(),
            ADMIN_TOKEN,
            Some(role_bucket("lake", &name)),
        )
        .await;
    let added = added.assert_ok(201).clone();
    assert_eq!(added["bucket"], name);
    assert_eq!(added["prefix"], "iceberg");
    assert_eq!(added["platform"], "s3");
    assert_eq!(added["default"], false);
    let external_id = added["auth"]["external_id"].as_str().unwrap().to_owned();
    assert!(external_id.starts_with("floe-") && external_id.len() == 37);
    let one = c
        .management(
            Method::GET,
            &format!("{}/lake", buckets()),
            ADMIN_TOKEN,
            None,
        )
        .await;
    assert_eq!(one.assert_ok(200), &added);

    let ns = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["onlake"], "properties": {"arraylake.bucket": "lake"}}),
        )
        .await;
    let location = ns.assert_ok(200)["properties"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        location.starts_with(&format!("s3://{name}/iceberg/")),
        "{location}"
    );
    c.management(
        Method::DELETE,
        &format!("{}/lake", buckets()),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_error(409, "CommitFailedException");

    c.management(
        Method::PUT,
        &format!("/orgs/{ORG}/default-bucket"),
        ADMIN_TOKEN,
        Some(json!({"nickname": "lake"})),
    )
    .await
    .assert_ok(204);
    let listed = c
        .management(Method::GET, &buckets(), ADMIN_TOKEN, None)
        .await;
    let lake = listed.assert_ok(200)["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["nickname"] == "lake")
        .unwrap()
        .clone();
    assert_eq!(lake["default"], true);
    let defaulted = c.create_namespace("defaulted").await;
    assert!(
        defaulted["properties"]["location"]
            .as_str()
            .unwrap()
            .starts_with(&format!("s3://{name}/iceberg/")),
        "{defaulted}"
    );
}

/// Static keys: the secret is sealed in the row, never answered nor logged (also when a bucket
/// is refused), and opened only to reach the bucket (a namespace on it works). Reachable only
/// where S3 is (moto).
#[tokio::test(flavor = "current_thread")]
async fn hmac_secrets_are_sealed_at_rest_and_never_answered() {
    let (log, _guard) = CapturedLog::start();
    let c = TestCatalog::new().await;
    if c.backend != Backend::Aws {
        return;
    }
    let name = format!("keys-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    moto::create_bucket(&name).await;
    const SECRET: &str = "wJalrXUtnFEMI-floe-test-secret";
    let unreachable = json!({"nickname": "nowhere", "platform": "s3", "bucket": "floe-no-such-bucket",
        "auth": {"type": "hmac", "access_key_id": "AKIAFLOETEST", "secret_access_key": SECRET}});
    let refused = c
        .management(Method::POST, &buckets(), ADMIN_TOKEN, Some(unreachable))
        .await;
    refused.assert_error(400, "BadRequestException");
    assert!(!refused.body.to_string().contains(SECRET));
    let body = json!({"nickname": "keyed", "platform": "s3", "bucket": name,
        "auth": {"type": "hmac", "access_key_id": "AKIAFLOETEST", "secret_access_key": SECRET}});
    let added = c
        .management(Method::POST, &buckets(), ADMIN_TOKEN, Some(body))
        .await;
    assert_eq!(
        added.assert_ok(201)["auth"],
        json!({"type": "hmac", "access_key_id": "AKIAFLOETEST"})
    );
    for answer in [
        c.management(Method::GET, &buckets(), ADMIN_TOKEN, None)
            .await,
        c.management(
            Method::GET,
            &format!("{}/keyed", buckets()),
            ADMIN_TOKEN,
            None,
        )
        .await,
    ] {
        assert!(!answer.body.to_string().contains(SECRET), "{}", answer.body);
    }
    let raw = c
        .store
        .get(&floe::store::rows::keys::bucket(ORG, "keyed"))
        .await
        .unwrap()
        .unwrap();
    let stored = String::from_utf8(raw.body.clone()).unwrap();
    assert!(!stored.contains(SECRET), "{stored}");
    assert!(
        stored.contains("SealedHmac") || stored.contains("sealed"),
        "{stored}"
    );
    // The opened secret reaches the bucket: a namespace is created on it.
    c.catalog.forget_cached();
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["onkeys"], "properties": {"arraylake.bucket": "keyed"}}),
    )
    .await
    .assert_ok(200);
    let logged = log.text();
    assert!(
        logged.contains("bucket configuration added"),
        "the log is captured"
    );
    assert!(!logged.contains(SECRET), "a secret reached the log");
}
