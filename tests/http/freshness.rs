//! Freshness-aware loads: every table answer carries an ETag, and a loadTable whose
//! If-None-Match names the current one is a 304 without a body. Any commit, a change of
//! snapshots mode, delegation or access level, and vended credentials nearing their end all
//! change the tag.

use std::sync::Arc;

use floe::clock::{Clock, ManualClock};
use floe::model::S3Defaults;
use floe::vending::sts::StsVendor;
use floe_tests::*;
use serde_json::{Value, json};
use tower::ServiceExt;

struct Load {
    status: u16,
    etag: Option<String>,
    body: Vec<u8>,
}

async fn load(c: &TestCatalog, token: &str, uri: &str, headers: &[(&str, &str)]) -> Load {
    let (status, headers, body) = c.get_raw(token, uri, headers).await;
    Load {
        status: status.as_u16(),
        etag: headers.get("etag").map(|v| v.to_str().unwrap().to_owned()),
        body: body.to_vec(),
    }
}

async fn load_if(c: &TestCatalog, uri: &str, tag: &str, extra: &[(&str, &str)]) -> Load {
    let mut headers = vec![("if-none-match", tag)];
    headers.extend_from_slice(extra);
    load(c, ADMIN_TOKEN, uri, &headers).await
}

#[tokio::test]
async fn an_unchanged_table_is_304_and_every_change_is_a_new_tag() {
    let c = TestCatalog::new().await;
    c.create_namespace("fresh").await;
    let created = c.post(&tables_path("fresh"), create_table_body("t")).await;
    created.assert_ok(200);
    let uri = table_path("fresh", "t");

    let first = load(&c, ADMIN_TOKEN, &uri, &[]).await;
    assert_eq!(first.status, 200);
    let tag = first.etag.expect("loadTable answers an ETag");
    assert!(tag.starts_with('"') && tag.ends_with('"'), "{tag}");

    let again = load_if(&c, &uri, &tag, &[]).await;
    assert_eq!((again.status, again.body.len()), (304, 0));
    assert_eq!(again.etag.as_deref(), Some(tag.as_str()));
    // Weak and listed forms match too; another tag does not.
    for header in [
        format!("W/{tag}"),
        format!("\"nope\", {tag}"),
        "*".to_owned(),
    ] {
        assert_eq!(
            load_if(&c, &uri, &header, &[]).await.status,
            304,
            "{header}"
        );
    }
    let other = load_if(&c, &uri, "\"0123\"", &[]).await;
    assert_eq!(other.status, 200);
    assert_eq!(
        serde_json::from_slice::<Value>(&other.body).unwrap()["metadata-location"],
        serde_json::from_slice::<Value>(&first.body).unwrap()["metadata-location"]
    );

    // A mode change and a delegation change are other answers.
    let refs = load_if(&c, &format!("{uri}?snapshots=refs"), &tag, &[]).await;
    assert_eq!(refs.status, 200);
    assert_ne!(refs.etag.as_deref(), Some(tag.as_str()));
    let vended = load_if(
        &c,
        &uri,
        &tag,
        &[("x-iceberg-access-delegation", "vended-credentials")],
    )
    .await;
    assert_eq!(vended.status, 200);
    assert_ne!(vended.etag.as_deref(), Some(tag.as_str()));
    // So is another access level: a reader's vended answer is not a writer's.
    let reader = load(
        &c,
        &c.read_token,
        &uri,
        &[
            ("x-iceberg-access-delegation", "vended-credentials"),
            ("if-none-match", vended.etag.as_deref().unwrap()),
        ],
    )
    .await;
    assert_eq!(reader.status, 200);
    assert_ne!(reader.etag, vended.etag);

    // A commit answers the new tag of the table's metadata, and the old one no longer matches.
    let update = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"owner": "fresh"}}
    ]});
    let committed = c.post(&uri, update).await;
    committed.assert_ok(200);
    let after = load_if(&c, &uri, &tag, &[]).await;
    assert_eq!(after.status, 200);
    let new_tag = after.etag.unwrap();
    assert_ne!(new_tag, tag);
    assert_eq!(load_if(&c, &uri, &new_tag, &[]).await.status, 304);
}

#[tokio::test]
async fn create_and_commit_answers_carry_a_tag() {
    let c = TestCatalog::new().await;
    c.create_namespace("tagged").await;
    let created = load_created(&c).await;
    assert!(created.is_some());
    let uri = table_path("tagged", "t");
    let update = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "v"}}
    ]});
    let request = http::Request::post(format!("/iceberg{uri}"))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(update.to_string()))
        .unwrap();
    let response = c.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let commit_tag = response.headers()["etag"].to_str().unwrap().to_owned();
    // The commit's tag is the metadata's, without credentials: a plain load of the same file
    // is the same answer.
    let loaded = load_if(&c, &uri, &commit_tag, &[]).await;
    assert_eq!(loaded.status, 304);
}

async fn load_created(c: &TestCatalog) -> Option<String> {
    let request = http::Request::post(format!("/iceberg{}", tables_path("tagged")))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(create_table_body("t").to_string()))
        .unwrap();
    let response = c.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let tag = response.headers().get("etag")?.to_str().ok()?.to_owned();
    // The create's tag is the plain load's.
    let loaded = load_if(c, &table_path("tagged", "t"), &tag, &[]).await;
    assert_eq!(loaded.status, 304);
    Some(tag)
}

/// Vended credentials are reused only with 55 minutes left: once the ones a cached answer holds
/// are nearer their end, a conditional load is a 200 with fresh ones, never a 304.
#[tokio::test]
async fn credentials_near_their_end_are_never_kept_by_a_304() {
    if Backend::from_env() != Backend::Aws {
        return;
    }
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let clock = Arc::new(ManualClock::new(start));
    let vendor_clock = clock.clone();
    let sdk = moto::sdk().await;
    let c = TestCatalog::with_adapters(Wrap {
        vendor: Box::new(move |_| {
            Arc::new(StsVendor::new(
                aws_sdk_sts::Client::new(&sdk),
                vendor_clock,
                S3Defaults::default(),
                None,
                floe::config::DEFAULT_CREDENTIALS_MIN_REMAINING_SECS * 1000,
            ))
        }),
        ..Wrap::default()
    })
    .await;
    c.create_namespace("creds").await;
    c.create_table("creds", "t").await;
    let uri = table_path("creds", "t");
    let vend = ("x-iceberg-access-delegation", "vended-credentials");
    let first = load(&c, ADMIN_TOKEN, &uri, &[vend]).await;
    assert_eq!(first.status, 200);
    let tag = first.etag.unwrap();
    let key = |body: &[u8]| -> Value {
        serde_json::from_slice::<Value>(body).unwrap()["config"]["s3.access-key-id"].clone()
    };
    assert!(
        key(&first.body).is_string(),
        "vended: {}",
        String::from_utf8_lossy(&first.body)
    );

    // Four minutes on, the same credentials are still handed out: unchanged.
    clock.advance_ms(4 * 60 * 1000);
    assert_eq!(load_if(&c, &uri, &tag, &[vend]).await.status, 304);
    // Six minutes on, they have under 55 minutes left: fresh ones, a new tag.
    clock.advance_ms(2 * 60 * 1000);
    let renewed = load_if(&c, &uri, &tag, &[vend]).await;
    assert_eq!(renewed.status, 200, "{}", clock.now_ms() - start);
    assert_ne!(renewed.etag.as_deref(), Some(tag.as_str()));
    assert_ne!(key(&renewed.body), key(&first.body));
}
