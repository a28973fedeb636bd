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

fn compatible(nickname: &str, endpoint: &str, auth: Value) -> Value {
    json!({"nickname": nickname, "platform": "s3-compatible", "bucket": "compat-lake",
        "endpoint": endpoint, "region": "us-east-1", "path_style": true, "auth": auth})
}

/// An S3-compatible endpoint on loopback that answers every request with `status` (a status
/// line's code and reason), `headers` and `body`, as an internal service reached through a
/// bucket configuration would.
async fn answering(status: &str, headers: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let response: &'static str = Box::leak(
        format!(
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_boxed_str(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut request).await;
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    format!("http://{address}")
}

/// An endpoint refusing every request as S3 does, with a message of its own.
async fn access_denied() -> String {
    answering(
        "403 Forbidden",
        "Content-Type: application/xml\r\n",
        "<Error><Code>AccessDenied</Code><Message>message-leak</Message>\
         <RequestId>r1</RequestId></Error>",
    )
    .await
}

/// A catalog that reaches S3-compatible endpoints (on either backend) and, with `private`,
/// allows them on loopback (FLOE_ALLOW_PRIVATE_ENDPOINTS).
async fn s3_catalog(private: bool) -> TestCatalog {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "server", "server", None, None, "test",
        ))
        .load()
        .await;
    let wrap = Wrap {
        objects: Box::new(move |_| {
            std::sync::Arc::new(floe::objects::PlatformStores {
                local: floe::objects::local::LocalObjectStores,
                s3: Some(floe::objects::s3::S3Stores::new(
                    sdk,
                    floe::model::S3Defaults::default(),
                )),
                gcs: None,
            })
        }),
        ..Wrap::default()
    };
    TestCatalog::custom(wrap, move |catalog| catalog.private_endpoints(private)).await
}

/// Bucket endpoints are public https hosts unless the operator allows private ones
/// (FLOE_ALLOW_PRIVATE_ENDPOINTS): plain http, and loopback, private, link-local, unspecified
/// and metadata addresses (literal, mapped into IPv6, or a name resolving there) are refused
/// before anything is reached or stored.
#[tokio::test]
async fn bucket_endpoints_must_be_public_https() {
    let c = TestCatalog::new().await;
    let anonymous = json!({"type": "anonymous"});
    for endpoint in [
        "http://203.0.113.7",
        "ftp://203.0.113.7",
        "https://127.0.0.1:9000",
        "https://localhost:9000",
        "https://169.254.169.254",
        "https://[fd00:ec2::254]",
        "https://[::1]",
        "https://[::ffff:127.0.0.1]",
        "https://0.0.0.0",
        "https://10.1.2.3",
        "https://172.16.0.1",
        "https://192.168.1.1",
        "https://100.100.100.200",
        "https://[fe80::1]",
        "https://user:password@203.0.113.7",
    ] {
        let answer = c
            .management(
                Method::POST,
                &buckets(),
                ADMIN_TOKEN,
                Some(compatible("compat", endpoint, anonymous.clone())),
            )
            .await;
        answer.assert_error(400, "BadRequestException");
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("endpoint"), "{endpoint}: {message}");
        assert!(!message.contains("password"), "{message}");
    }
    let listed = c
        .management(Method::GET, &buckets(), ADMIN_TOKEN, None)
        .await;
    assert_eq!(
        listed.assert_ok(200)["buckets"].as_array().unwrap().len(),
        1
    );
    // A public https endpoint is accepted (anonymous auth is not probed).
    c.management(
        Method::POST,
        &buckets(),
        ADMIN_TOKEN,
        Some(compatible(
            "public",
            "https://203.0.113.7:9000",
            anonymous.clone(),
        )),
    )
    .await
    .assert_ok(201);
    // With the operator's setting, plain http on loopback is accepted.
    let allowed = s3_catalog(true).await;
    allowed
        .management(
            Method::POST,
            &buckets(),
            ADMIN_TOKEN,
            Some(compatible("local", "http://127.0.0.1:9", anonymous)),
        )
        .await
        .assert_ok(201);
}

/// The reachability check answers a fixed message with the storage error code: never the
/// endpoint's status line, headers, body or error message, which go to the log only.
#[tokio::test]
async fn unreachable_endpoints_are_not_reflected_in_answers() {
    let c = s3_catalog(true).await;
    let hmac = json!({"type": "hmac", "access_key_id": "AKIAFLOE", "secret_access_key": "s3cr3t"});
    let plain = answering(
        "400 Bad Request",
        "X-Internal: header-leak\r\n",
        "body-leak",
    )
    .await;
    let xml = access_denied().await;
    for (endpoint, code) in [(&plain, "HTTP 400"), (&xml, "AccessDenied")] {
        let answer = c
            .management(
                Method::POST,
                &buckets(),
                ADMIN_TOKEN,
                Some(compatible("inside", endpoint, hmac.clone())),
            )
            .await;
        answer.assert_error(400, "BadRequestException");
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("not reachable"), "{message}");
        assert!(message.contains(code), "{message}");
        for leak in [
            "leak",
            "X-Internal",
            "Bad Request",
            "Forbidden",
            "RequestId",
        ] {
            assert!(!message.contains(leak), "{message}");
        }
    }
}

/// A storage failure outside the reachability check (a namespace's marker written to a bucket
/// that refuses it) answers the same: a fixed message with the storage error code.
#[tokio::test]
async fn storage_failures_answer_a_fixed_message_with_the_code() {
    let c = s3_catalog(true).await;
    let endpoint = access_denied().await;
    let row = floe::model::BucketRow {
        nickname: "refusing".into(),
        platform: floe::model::Platform::S3,
        root: "s3://compat-lake/wh".into(),
        auth: c.sealed_hmac("AKIAFLOE", "s3cr3t").await,
        endpoint: Some(endpoint),
        region: Some("us-east-1".into()),
        path_style: true,
        static_keys_to_writers: false,
    };
    floe::bootstrap::put_bucket(&*c.store, ORG, &row)
        .await
        .unwrap();
    let answer = c
        .post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": ["refused"], "properties": {"arraylake.bucket": "refusing"}}),
        )
        .await;
    answer.assert_error(500, "InternalServerError");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("AccessDenied"), "{message}");
    assert!(!message.contains("leak"), "{message}");
}

const DEV_SECRET: &str = "dev-bucket-secret-in-settings";

/// A `default` bucket row with the dev bucket's static keys (FLOE_S3_ACCESS_KEY_ID), on fresh
/// storage of the test backend.
async fn dev_keys_row(c: &TestCatalog, stem: &str) -> floe::model::BucketRow {
    let auth = floe::model::BucketAuth::Hmac {
        access_key_id: "AKIAFLOEDEV".into(),
        secret_access_key: DEV_SECRET.into(),
    };
    if c.backend == Backend::Aws {
        let name = moto::unique(stem);
        moto::create_bucket(&name).await;
        return moto::s3_bucket("default", &name, auth);
    }
    let root = c.dir.path().join(stem);
    std::fs::create_dir_all(&root).unwrap();
    floe::model::BucketRow {
        nickname: "default".into(),
        platform: floe::model::Platform::Local,
        root: floe::objects::local::file_url(&root.canonicalize().unwrap()),
        auth,
        endpoint: None,
        region: None,
        path_style: false,
        static_keys_to_writers: false,
    }
}

/// The stored `default` row of `org`, as the store holds it, and whether it keeps the secret.
async fn stored_dev_row(c: &TestCatalog, org: &str) -> String {
    let raw = c
        .store
        .get(&floe::store::rows::keys::bucket(org, "default"))
        .await
        .unwrap()
        .expect("the dev bucket row");
    let stored = String::from_utf8(raw.body).unwrap();
    assert!(stored.contains("AKIAFLOEDEV"), "{stored}");
    stored
}

/// The dev bucket's static keys are sealed like every other secret: on the first start, and a
/// row an earlier version stored in plain text is sealed on the next start. Both keep working
/// (a namespace is created on each).
#[tokio::test]
async fn dev_bucket_keys_are_sealed_at_rest() {
    let c = TestCatalog::new().await;
    let sealer = c.catalog.core.sealer.clone().expect("test catalogs seal");
    let clock = floe::clock::SystemClock;
    let start = |org: &'static str, bucket: floe::model::BucketRow| {
        let (c, sealer) = (&c, sealer.clone());
        async move {
            let dev = floe::bootstrap::DevSettings {
                org,
                bucket,
                token: Some(match org {
                    "devkeys" => "ema_devkeys_admin_token",
                    _ => "ema_oldkeys_admin_token",
                }),
            };
            floe::bootstrap::bootstrap_dev(&*c.store, &clock, &dev, Some(&*sealer))
                .await
                .unwrap();
        }
    };
    // First start with static keys.
    let row = dev_keys_row(&c, "devkeys").await;
    start("devkeys", row).await;
    let stored = stored_dev_row(&c, "devkeys").await;
    assert!(!stored.contains(DEV_SECRET), "{stored}");

    // A row written in plain text before, then a start.
    let row = dev_keys_row(&c, "oldkeys").await;
    let org = floe::model::OrgRow {
        name: "oldkeys".into(),
        iceberg_enabled: true,
        default_bucket: "default".into(),
        created_ms: 0,
    };
    floe::bootstrap::ensure_org(&*c.store, &org).await.unwrap();
    floe::bootstrap::put_bucket(&*c.store, "oldkeys", &row)
        .await
        .unwrap();
    let admin = floe::bootstrap::dev_admin("oldkeys");
    floe::bootstrap::put_member(&*c.store, "oldkeys", &admin.id, floe::model::OrgRole::Admin)
        .await
        .unwrap();
    assert!(stored_dev_row(&c, "oldkeys").await.contains(DEV_SECRET));
    start("oldkeys", row).await;
    let stored = stored_dev_row(&c, "oldkeys").await;
    assert!(!stored.contains(DEV_SECRET), "{stored}");

    for (org, token) in [
        ("devkeys", "ema_devkeys_admin_token"),
        ("oldkeys", "ema_oldkeys_admin_token"),
    ] {
        c.post_as(
            token,
            &format!("/v1/{org}/namespaces"),
            json!({"namespace": ["on_dev_keys"]}),
        )
        .await
        .assert_ok(200);
    }
}
