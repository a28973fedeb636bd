//! STS credential vending against moto: exact session policies, the cache, and its effect.

use std::sync::Arc;

use floe::clock::ManualClock;
use floe::config::DEFAULT_CREDENTIALS_MIN_REMAINING_SECS;
use floe::model::{BucketAuth, BucketRow, Platform, Principal, PrincipalKind, S3Defaults};
use floe::vending::policy::{session_name, session_policy};
use floe::vending::sts::StsVendor;
use floe::vending::{AccessLevel, CredentialVendor};

use floe_tests::moto;

const ROLE: &str = "arn:aws:iam::123456789012:role/floe-vending";

fn principal() -> Principal {
    Principal {
        id: moto::unique("api-client"),
        kind: PrincipalKind::ApiClient,
        name: "etl".into(),
        email: None,
    }
}

fn bucket(name: &str) -> BucketRow {
    BucketRow {
        nickname: "default".into(),
        platform: Platform::S3,
        root: format!("s3://{name}/wh"),
        auth: BucketAuth::CustomerManagedRole {
            role_arn: ROLE.into(),
            external_id: None,
        },
        endpoint: Some(moto::endpoint()),
        region: Some("us-east-1".into()),
        path_style: true,
        static_keys_to_writers: false,
    }
}

async fn vendor(clock: Arc<ManualClock>, min_remaining_ms: u64) -> StsVendor {
    let defaults = S3Defaults {
        endpoint: Some(moto::endpoint()),
        region: Some("us-east-1".into()),
        path_style: true,
    };
    StsVendor::new(
        aws_sdk_sts::Client::new(&moto::sdk().await),
        clock,
        defaults,
        None,
        min_remaining_ms,
    )
}

/// The floor a deployment uses unless configured otherwise.
const MIN_REMAINING_MS: u64 = DEFAULT_CREDENTIALS_MIN_REMAINING_SECS * 1000;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn vended_credentials_are_scoped_to_the_table_and_level() {
    let clock = Arc::new(ManualClock::new(now_ms()));
    let vendor = vendor(clock, MIN_REMAINING_MS).await;
    let bucket = bucket("scoped");
    let table = "s3://scoped/wh/sales-abc123/orders";
    let who = principal();
    for access in [AccessLevel::Read, AccessLevel::ReadWrite] {
        let vended = vendor.vend(&bucket, table, access, &who).await.unwrap();
        assert_eq!(vended.credentials.len(), 1);
        let credential = &vended.credentials[0];
        assert_eq!(credential.prefix, table);
        for key in [
            "s3.access-key-id",
            "s3.secret-access-key",
            "s3.session-token",
            "s3.session-token-expires-at-ms",
        ] {
            assert!(
                credential.config.contains_key(key),
                "{key} in storage-credentials"
            );
            assert_eq!(
                vended.config.get(key),
                credential.config.get(key),
                "{key} duplicated in config"
            );
        }
        assert_eq!(vended.config["s3.endpoint"], moto::endpoint());
        assert_eq!(vended.config["s3.path-style-access"], "true");
        assert_eq!(vended.config["s3.region"], "us-east-1");
        let expires: u64 = vended.config["s3.session-token-expires-at-ms"]
            .parse()
            .unwrap();
        assert!(expires > now_ms() + 50 * 60 * 1000, "one hour of lifetime");
    }
    // What STS received, exactly: one table-scoped policy per level.
    let sent = moto::assumed_role_policies(&session_name(&who.id, table)).await;
    assert_eq!(
        sent,
        vec![
            session_policy("aws", table, AccessLevel::Read).unwrap(),
            session_policy("aws", table, AccessLevel::ReadWrite).unwrap()
        ]
    );
    assert!(sent[0].contains("\"arn:aws:s3:::scoped/wh/sales-abc123/orders/*\""));
    assert!(sent[0].contains("[\"wh/sales-abc123/orders/\",\"wh/sales-abc123/orders/*\"]"));
    assert!(!sent[0].contains("s3:PutObject"));
    assert!(!sent[0].contains("Deny"));
    assert!(sent[1].contains("s3:PutObject"));
    assert!(sent[1].contains(
        "{\"Action\":[\"s3:PutObject\",\"s3:DeleteObject\"],\"Effect\":\"Deny\",\"Resource\":\"arn:aws:s3:::scoped/*.metadata.json\"}"
    ));
    assert!(
        !sent
            .iter()
            .any(|p| p.contains("\"arn:aws:s3:::scoped/wh/sales-abc123/*\"")
                || p.contains("\"arn:aws:s3:::scoped/*\""))
    );
}

#[tokio::test]
async fn the_session_policy_sts_received_for_a_table_with_iam_special_characters() {
    let clock = Arc::new(ManualClock::new(now_ms()));
    let vendor = vendor(clock, MIN_REMAINING_MS).await;
    let table = "s3://bucket/ns-abc/we*ird?$name";
    let who = principal();
    vendor
        .vend(&bucket("bucket"), table, AccessLevel::ReadWrite, &who)
        .await
        .unwrap();
    let sent = moto::assumed_role_policies(&session_name(&who.id, table)).await;
    assert_eq!(
        sent,
        vec![session_policy("aws", table, AccessLevel::ReadWrite).unwrap()]
    );
    let policy = &sent[0];
    assert!(
        policy.contains("\"arn:aws:s3:::bucket/ns-abc/we${*}ird${?}${$}name/*\""),
        "{policy}"
    );
    assert!(
        policy.contains("[\"ns-abc/we${*}ird${?}${$}name/\",\"ns-abc/we${*}ird${?}${$}name/*\"]"),
        "{policy}"
    );
    assert!(
        !policy.contains("we*ird") && !policy.contains("?$name"),
        "{policy}"
    );
}

#[tokio::test]
async fn resource_arns_follow_the_partition_of_the_role() {
    let clock = Arc::new(ManualClock::new(now_ms()));
    let vendor = vendor(clock, MIN_REMAINING_MS).await;
    let mut china = bucket("china");
    china.auth = BucketAuth::CustomerManagedRole {
        role_arn: "arn:aws-cn:iam::123456789012:role/floe-vending".into(),
        external_id: None,
    };
    let table = "s3://china/wh/ns-abc/t";
    let who = principal();
    vendor
        .vend(&china, table, AccessLevel::Read, &who)
        .await
        .unwrap();
    let sent = moto::assumed_role_policies(&session_name(&who.id, table)).await;
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].contains("\"arn:aws-cn:s3:::china/wh/ns-abc/t/*\""),
        "{}",
        sent[0]
    );
    assert!(!sent[0].contains("arn:aws:"), "{}", sent[0]);
}

#[tokio::test]
async fn hmac_buckets_pass_their_keys_through_without_sts() {
    let clock = Arc::new(ManualClock::new(now_ms()));
    let vendor = vendor(clock, 0).await;
    let mut hmac = bucket("hmac");
    hmac.auth = BucketAuth::Hmac {
        access_key_id: "AKIDSTATIC".into(),
        secret_access_key: "s3cr3t".into(),
    };
    let vended = vendor
        .vend(&hmac, "s3://hmac/wh/ns/t", AccessLevel::Read, &principal())
        .await
        .unwrap();
    assert_eq!(vended.config["s3.access-key-id"], "AKIDSTATIC");
    assert!(!vended.config.contains_key("s3.session-token"));
    assert_eq!(vendor.sts_calls(), 0);
}

/// STS calls per 1,000 loads of one table, with the cache and without it (a cache that never
/// reuses), plus expiry handling and collapsing of concurrent misses.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cache_collapses_calls_and_never_serves_nearly_expired_credentials() {
    let clock = Arc::new(ManualClock::new(now_ms()));
    let cached = Arc::new(vendor(clock.clone(), MIN_REMAINING_MS).await);
    let bucket = bucket("cache");
    let who = principal();
    let table = "s3://cache/wh/ns/t";
    for _ in 0..1_000 {
        cached
            .vend(&bucket, table, AccessLevel::Read, &who)
            .await
            .unwrap();
    }
    assert_eq!(cached.sts_calls(), 1);
    // Another level or another table is another key.
    cached
        .vend(&bucket, table, AccessLevel::ReadWrite, &who)
        .await
        .unwrap();
    cached
        .vend(&bucket, "s3://cache/wh/ns/u", AccessLevel::Read, &who)
        .await
        .unwrap();
    assert_eq!(cached.sts_calls(), 3);
    // Concurrent misses on a new key: one STS call.
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (vendor, bucket, who) = (cached.clone(), bucket.clone(), who.clone());
        tasks.push(tokio::spawn(async move {
            vendor
                .vend(&bucket, "s3://cache/wh/ns/burst", AccessLevel::Read, &who)
                .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(cached.sts_calls(), 4);

    // Four minutes later 56 of the hour are left, over the 55-minute floor: still cached.
    clock.advance_ms(4 * 60 * 1000);
    cached
        .vend(&bucket, table, AccessLevel::Read, &who)
        .await
        .unwrap();
    assert_eq!(cached.sts_calls(), 4);
    // Two more minutes and only 54 are left, under the floor: refreshed.
    clock.advance_ms(2 * 60 * 1000);
    cached
        .vend(&bucket, table, AccessLevel::Read, &who)
        .await
        .unwrap();
    assert_eq!(cached.sts_calls(), 5);

    let uncached = vendor(Arc::new(ManualClock::new(now_ms())), u64::MAX / 4).await;
    for _ in 0..1_000 {
        uncached
            .vend(&bucket, table, AccessLevel::Read, &who)
            .await
            .unwrap();
    }
    eprintln!(
        "STS calls per 1,000 loadTable vends: {} with the cache, {} without",
        1,
        uncached.sts_calls()
    );
    assert_eq!(uncached.sts_calls(), 1_000);
}

/// The same figure through the REST API: 1,000 loadTable requests with vended credentials.
#[tokio::test]
async fn one_sts_call_per_thousand_load_table_requests() {
    let c = floe_tests::TestCatalog::aws().await;
    c.create_namespace("vend").await;
    c.create_table("vend", "t").await;
    let before = c.sts_calls();
    let path = format!("/iceberg/v1/{}/namespaces/vend/tables/t", floe_tests::ORG);
    for _ in 0..1_000 {
        let request = http::Request::get(&path)
            .header(
                "authorization",
                format!("Bearer {}", floe_tests::ADMIN_TOKEN),
            )
            .header("x-iceberg-access-delegation", "vended-credentials")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = tower::ServiceExt::oneshot(c.router.clone(), request)
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let calls = c.sts_calls() - before;
    eprintln!("STS calls for 1,000 loadTable requests with vended credentials: {calls}");
    assert_eq!(calls, 1);
}
