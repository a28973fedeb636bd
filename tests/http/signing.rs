//! Static keys stay with the catalog: tables on buckets with static keys are reached through
//! remote signing (`POST .../tables/{table}/sign`), each request checked against the table's
//! directory and the caller's access; only a bucket configuration that opts in hands its keys
//! to writers. Signatures themselves are checked by moto in tests/interop/test_signing.py.

use floe::catalog::OrgContext;
use floe::model::Visibility;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

const KEY_ID: &str = "AKIAFLOESIGNTEST";
const SECRET: &str = "floe-sign-test-secret-Xy9Qw3Zr";
const SIGNING: (&str, &str) = ("x-iceberg-access-delegation", "remote-signing");
const VENDED: (&str, &str) = ("x-iceberg-access-delegation", "vended-credentials");

/// A namespace `keyed` on a bucket with static keys (opted in to writers when `to_writers`),
/// with table `t`; `None` on the local backend, which has no S3 bucket.
async fn keyed_table(c: &TestCatalog, to_writers: bool) -> Option<Value> {
    if c.backend != Backend::Aws {
        return None;
    }
    let auth = c.sealed_hmac(KEY_ID, SECRET).await;
    c.add_bucket_configured("keys", auth, |b| b.static_keys_to_writers = to_writers)
        .await;
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["keyed"], "properties": {"arraylake.bucket": "keys"}}),
    )
    .await
    .assert_ok(200);
    Some(c.create_table("keyed", "t").await)
}

async fn load(c: &TestCatalog, token: &str, delegation: Option<(&str, &str)>) -> Answer {
    let headers: Vec<(&str, &str)> = delegation.into_iter().collect();
    c.send(
        Method::GET,
        &format!("/iceberg{}", table_path("keyed", "t")),
        Some(token),
        None,
        &headers,
    )
    .await
}

async fn sign(c: &TestCatalog, token: &str, table: &str, request: Value) -> Answer {
    c.post_as(
        token,
        &format!("{}/sign", table_path("keyed", table)),
        request,
    )
    .await
}

/// The key of `location` (`s3://bucket/key`) in its bucket.
fn key_of(location: &str) -> &str {
    location
        .strip_prefix("s3://")
        .unwrap()
        .split_once('/')
        .unwrap()
        .1
}

/// A request as PyIceberg's signer sends it, for `key` (relative to the table location) of
/// the table at `location`.
fn s3_request(method: &str, location: &str, key: &str, query: &str) -> Value {
    let (bucket, dir) = location
        .strip_prefix("s3://")
        .unwrap()
        .split_once('/')
        .unwrap();
    let path = if key.is_empty() {
        format!("/{bucket}")
    } else {
        format!("/{bucket}/{dir}/{key}")
    };
    json!({
        "method": method,
        "region": "us-east-1",
        "uri": format!("{}{path}{query}", moto::endpoint()),
        "headers": {"User-Agent": ["Botocore/1.0"]}
    })
}

/// The spec (`X-Iceberg-Access-Delegation`): "The server may choose to supply access via any or
/// none of the requested mechanisms." On a bucket whose static keys the catalog keeps, an
/// engine that lists only `vended-credentials` gets its table with no credentials (the
/// bucket's endpoint, region and addressing still in `config`), never a 4xx; the credentials
/// route answers its own shape with none; no answer carries a key.
#[tokio::test]
async fn static_keys_are_answered_to_nobody_without_the_opt_in() {
    let c = TestCatalog::new().await;
    let Some(created) = keyed_table(&c, false).await else {
        return;
    };
    assert!(!created.to_string().contains(SECRET));
    for token in [
        c.read_token.clone(),
        c.write_token.clone(),
        ADMIN_TOKEN.into(),
    ] {
        let vended = load(&c, &token, Some(VENDED)).await;
        let body = vended.assert_ok(200).clone();
        assert!(body.get("storage-credentials").is_none(), "{body}");
        assert_eq!(body["config"]["s3.endpoint"], moto::endpoint(), "{body}");
        assert_eq!(body["config"]["s3.region"], "us-east-1", "{body}");
        assert!(
            body["config"].get("s3.path-style-access").is_some(),
            "{body}"
        );
        assert!(body["config"].get("s3.signer").is_none(), "{body}");
        let refreshed = c
            .request(
                Method::GET,
                &format!("{}/credentials", table_path("keyed", "t")),
                Some(&token),
                None,
            )
            .await;
        assert_eq!(
            refreshed.assert_ok(200),
            &json!({"storage-credentials": []})
        );
        for answer in [vended, refreshed, load(&c, &token, None).await] {
            assert!(!answer.body.to_string().contains(SECRET), "{}", answer.body);
            assert!(!answer.body.to_string().contains(KEY_ID), "{}", answer.body);
        }
    }
    // A create listing only vended credentials is answered the same way.
    let created = c
        .send(
            Method::POST,
            &format!("/iceberg{}/tables", ns_path("keyed")),
            Some(&c.write_token),
            Some(bytes::Bytes::from(create_table_body("t2").to_string())),
            &[VENDED],
        )
        .await;
    let body = created.assert_ok(200);
    assert!(body.get("storage-credentials").is_none(), "{body}");
    assert!(!body.to_string().contains(SECRET));
}

#[tokio::test]
async fn remote_signing_answers_name_the_tables_sign_route_and_no_keys() {
    let c = TestCatalog::new().await;
    let Some(_) = keyed_table(&c, false).await else {
        // A local warehouse needs nothing: the answer is the plain one.
        c.create_namespace("keyed").await;
        c.create_table("keyed", "t").await;
        let plain = load(&c, &c.read_token, Some(SIGNING)).await;
        assert_eq!(plain.assert_ok(200)["config"], json!({}));
        return;
    };
    for token in [c.read_token.clone(), c.write_token.clone()] {
        let answer = load(&c, &token, Some(SIGNING)).await;
        let config = &answer.assert_ok(200)["config"];
        assert_eq!(config["s3.remote-signing-enabled"], "true");
        assert_eq!(config["s3.signer"], "S3V4RestSigner");
        assert_eq!(
            config["s3.signer.endpoint"],
            format!("v1/{ORG}/namespaces/keyed/tables/t/sign")
        );
        assert_eq!(config["s3.endpoint"], moto::endpoint());
        assert!(answer.body.get("storage-credentials").is_none());
        assert!(!answer.body.to_string().contains(SECRET));
        assert!(!answer.body.to_string().contains(KEY_ID));
    }
    // Both modes asked: signing, since these keys cannot be scoped.
    let both = c
        .send(
            Method::GET,
            &format!("/iceberg{}", table_path("keyed", "t")),
            Some(&c.write_token),
            None,
            &[(
                "x-iceberg-access-delegation",
                "vended-credentials,remote-signing",
            )],
        )
        .await;
    assert_eq!(both.assert_ok(200)["config"]["s3.signer"], "S3V4RestSigner");
}

#[tokio::test]
async fn readers_get_reads_signed_and_writers_writes_inside_the_table_only() {
    let c = TestCatalog::new().await;
    let Some(created) = keyed_table(&c, false).await else {
        c.create_namespace("keyed").await;
        c.create_table("keyed", "t").await;
        let local = sign(
            &c,
            &c.write_token,
            "t",
            json!({"method": "GET", "region": "us-east-1", "uri": "http://127.0.0.1:1/b/k", "headers": {}}),
        )
        .await;
        local.assert_error(400, "BadRequestException");
        return;
    };
    let location = created["metadata"]["location"].as_str().unwrap().to_owned();
    let other = c.create_table("keyed", "other").await;
    let other_location = other["metadata"]["location"].as_str().unwrap().to_owned();
    let data = s3_request("GET", &location, "data/a.parquet", "");
    // Readers: GET and HEAD of the table's objects, signed.
    let signed = sign(&c, &c.read_token, "t", data.clone()).await;
    let result = signed.assert_ok(200);
    assert_eq!(result["uri"], data["uri"]);
    let authorization = result["headers"]["authorization"][0].as_str().unwrap();
    assert!(authorization.starts_with(&format!("AWS4-HMAC-SHA256 Credential={KEY_ID}/")));
    assert_eq!(result["headers"]["User-Agent"], json!(["Botocore/1.0"]));
    assert!(!result.to_string().contains(SECRET));
    sign(
        &c,
        &c.read_token,
        "t",
        s3_request("HEAD", &location, "data/a.parquet", ""),
    )
    .await
    .assert_ok(200);
    let listing = s3_request(
        "GET",
        &location,
        "",
        &format!(
            "?list-type=2&prefix={}%2Fdata%2F",
            key_of(&location).replace('/', "%2F")
        ),
    );
    sign(&c, &c.read_token, "t", listing).await.assert_ok(200);
    // ... and nothing else.
    let refused = [
        (
            c.read_token.clone(),
            s3_request("PUT", &location, "data/a.parquet", ""),
        ),
        (
            c.read_token.clone(),
            s3_request("DELETE", &location, "data/a.parquet", ""),
        ),
        (
            c.read_token.clone(),
            s3_request("POST", &location, "data/a.parquet", "?uploads"),
        ),
        // Another table's objects, and a listing of the whole bucket.
        (
            c.write_token.clone(),
            s3_request("GET", &other_location, "data/a.parquet", ""),
        ),
        (
            c.write_token.clone(),
            s3_request("GET", &location, "", "?list-type=2&prefix=wh%2F"),
        ),
        (
            c.write_token.clone(),
            s3_request("GET", &location, "", "?list-type=2"),
        ),
        // A metadata file, whoever writes it.
        (
            c.write_token.clone(),
            s3_request("PUT", &location, "metadata/00009-x.metadata.json", ""),
        ),
        (
            ADMIN_TOKEN.to_owned(),
            s3_request("DELETE", &location, "metadata/00000-x.metadata.json", ""),
        ),
        // The table's bucket on another host.
        (
            c.write_token.clone(),
            json!({"method": "GET", "region": "us-east-1",
                   "uri": format!("http://127.0.0.2:9/{}", location.strip_prefix("s3://").unwrap()),
                   "headers": {}}),
        ),
    ];
    for (token, request) in refused {
        let answer = sign(&c, &token, "t", request.clone()).await;
        answer.assert_error(403, "ForbiddenException");
        assert!(!answer.body.to_string().contains(SECRET));
        assert!(
            answer.body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Storage request not signed"),
            "{request}: {}",
            answer.body
        );
    }
    // Writers: PUT of data and manifests, multipart, deletes, a checked batch delete.
    for request in [
        s3_request("PUT", &location, "data/a.parquet", ""),
        s3_request("PUT", &location, "metadata/snap-1-x.avro", ""),
        s3_request("POST", &location, "data/big.parquet", "?uploads"),
        s3_request("DELETE", &location, "data/a.parquet", ""),
    ] {
        sign(&c, &c.write_token, "t", request).await.assert_ok(200);
    }
    let dir = key_of(&location);
    let mut batch = s3_request("POST", &location, "", "?delete");
    batch["body"] = json!(format!(
        "<Delete><Object><Key>{dir}/data/a.parquet</Key></Object></Delete>"
    ));
    sign(&c, &c.write_token, "t", batch.clone())
        .await
        .assert_ok(200);
    let other_dir = key_of(&other_location);
    batch["body"] = json!(format!(
        "<Delete><Object><Key>{dir}/data/a.parquet</Key></Object><Object><Key>{other_dir}/data/b</Key></Object></Delete>"
    ));
    sign(&c, &c.write_token, "t", batch)
        .await
        .assert_error(403, "ForbiddenException");
    // Nobody outside the org signs anything.
    sign(&c, &c.outsider_token, "t", data)
        .await
        .assert_error(403, "ForbiddenException");
}

#[tokio::test]
async fn an_opted_in_bucket_hands_its_keys_to_writers_only() {
    let c = TestCatalog::new().await;
    let Some(_) = keyed_table(&c, true).await else {
        return;
    };
    let writer = load(&c, &c.write_token, Some(VENDED)).await;
    let [credential] = writer.assert_ok(200)["storage-credentials"]
        .as_array()
        .unwrap()
        .clone()
        .try_into()
        .unwrap();
    assert_eq!(credential["config"]["s3.access-key-id"], KEY_ID);
    assert_eq!(credential["config"]["s3.secret-access-key"], SECRET);
    let reader = load(&c, &c.read_token, Some(VENDED)).await;
    assert!(reader.assert_ok(200).get("storage-credentials").is_none());
    assert!(!reader.body.to_string().contains(SECRET));
    assert!(!reader.body.to_string().contains(KEY_ID));
    // A reader that can sign still reads.
    load(&c, &c.read_token, Some(SIGNING)).await.assert_ok(200);
    // Public namespaces never sit on static keys, opted in or not.
    let admin: OrgContext = c
        .catalog
        .core
        .lookups
        .org_context(&floe::bootstrap::dev_admin(ORG), ORG)
        .await
        .unwrap();
    assert!(
        c.catalog
            .access
            .set_visibility(&admin, "keyed", Visibility::AuthenticatedPublic)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn the_opt_in_is_for_static_keys_only() {
    let c = TestCatalog::new().await;
    let body = json!({"nickname": "roled", "platform": "s3", "bucket": "floe-roled",
        "auth": {"type": "customer_managed_role", "role_arn": "arn:aws:iam::123456789012:role/x"},
        "static_keys_to_writers": true});
    c.management(
        Method::POST,
        &format!("/orgs/{ORG}/buckets"),
        ADMIN_TOKEN,
        Some(body),
    )
    .await
    .assert_error(400, "BadRequestException");
}
