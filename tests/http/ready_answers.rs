//! Warm loads answer from answers kept ready (`catalog::tables::answers`), and only while all an
//! answer is made of is unchanged: a commit, a drop and re-create, or a rename through another
//! instance of the deployment is answered at once by this one, and a kept answer is never handed
//! to a caller who asked in another form or stands otherwise.

use axum::Router;
use bytes::Bytes;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

const SIGNING: (&str, &str) = ("x-iceberg-access-delegation", "remote-signing");

/// Status, ETag and body of a request to `path` (under `/iceberg`) through `router`.
async fn send(
    router: &Router,
    method: Method,
    token: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, String, Bytes) {
    let (status, headers, body) = exchange(router, method, token, path, body, headers).await;
    let etag = headers
        .get("etag")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status.as_u16(), etag, body)
}

async fn load(
    router: &Router,
    token: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (String, Value) {
    let (status, etag, body) = send(router, Method::GET, token, path, None, headers).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    (etag, serde_json::from_slice(&body).unwrap())
}

fn set_property(key: &str, value: &str) -> Value {
    json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {key: value}}
    ]})
}

#[tokio::test]
async fn changes_through_another_instance_are_answered_at_once() {
    let c = TestCatalog::new().await;
    let other = c.another_instance();
    c.create_namespace("kept").await;
    c.create_table("kept", "t").await;
    let path = table_path("kept", "t");

    let (tag, first) = load(&c.router, ADMIN_TOKEN, &path, &[]).await;
    let (again_tag, again) = load(&c.router, ADMIN_TOKEN, &path, &[]).await;
    assert_eq!(
        (&again_tag, &again),
        (&tag, &first),
        "a warm load answers the same"
    );

    // A commit through the other instance: this one's kept answer is of the old row.
    let (status, _, _) = send(
        &other,
        Method::POST,
        ADMIN_TOKEN,
        &path,
        Some(set_property("owner", "elsewhere")),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    let (committed_tag, committed) = load(&c.router, ADMIN_TOKEN, &path, &[]).await;
    assert_ne!(committed_tag, tag);
    assert_eq!(committed["metadata"]["properties"]["owner"], "elsewhere");
    assert_ne!(committed["metadata-location"], first["metadata-location"]);

    // Dropped and created again under the same name, through the other instance: another
    // table, whose answer is its own.
    let (status, _, _) = send(&other, Method::DELETE, ADMIN_TOKEN, &path, None, &[]).await;
    assert_eq!(status, 204);
    let (status, _, _) = send(
        &other,
        Method::POST,
        ADMIN_TOKEN,
        &tables_path("kept"),
        Some(create_table_body("t")),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    let (_, recreated) = load(&c.router, ADMIN_TOKEN, &path, &[]).await;
    assert_ne!(
        recreated["metadata"]["table-uuid"],
        committed["metadata"]["table-uuid"]
    );
    assert!(recreated["metadata"]["properties"].get("owner").is_none());

    // Renamed away through the other instance: gone here too.
    let rename = json!({
        "source": {"namespace": ["kept"], "name": "t"},
        "destination": {"namespace": ["kept"], "name": "moved"}
    });
    let (status, _, _) = send(
        &other,
        Method::POST,
        ADMIN_TOKEN,
        &format!("/v1/{ORG}/tables/rename"),
        Some(rename),
        &[],
    )
    .await;
    assert_eq!(status, 204);
    let (status, _, _) = send(&c.router, Method::GET, ADMIN_TOKEN, &path, None, &[]).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn each_form_and_caller_gets_its_own_answer() {
    let c = TestCatalog::new().await;
    c.create_namespace("forms").await;
    c.create_table("forms", "t").await;
    c.append_snapshot(ADMIN_TOKEN, "forms", "t", 1)
        .await
        .assert_ok(200);
    let path = table_path("forms", "t");
    let refs_path = format!("{path}?snapshots=refs");

    let (plain_tag, plain) = load(&c.router, ADMIN_TOKEN, &path, &[]).await;
    let (refs_tag, refs) = load(&c.router, ADMIN_TOKEN, &refs_path, &[]).await;
    assert_ne!(refs_tag, plain_tag);
    // Loads alternate between the forms: each keeps answering its own.
    for _ in 0..2 {
        assert_eq!(
            load(&c.router, ADMIN_TOKEN, &path, &[]).await,
            (plain_tag.clone(), plain.clone())
        );
        assert_eq!(
            load(&c.router, ADMIN_TOKEN, &refs_path, &[]).await,
            (refs_tag.clone(), refs.clone())
        );
    }
    // Without delegation, every reader of the table is answered the same bytes.
    assert_eq!(
        load(&c.router, &c.read_token, &path, &[]).await.0,
        plain_tag
    );
    // Callers who see nothing are refused before any kept answer is looked at.
    let (status, _, body) = send(&c.router, Method::GET, &c.outsider_token, &path, None, &[]).await;
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    assert!(!String::from_utf8_lossy(&body).contains("metadata"));
}

#[tokio::test]
async fn signed_answers_follow_the_callers_access() {
    let c = TestCatalog::new().await;
    if c.backend != Backend::Aws {
        return; // Remote signing is for S3 buckets with static keys.
    }
    let auth = c
        .sealed_hmac("AKIAFLOEKEPTTEST", "floe-kept-test-secret")
        .await;
    c.add_bucket("keys", auth).await;
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["keyed"], "properties": {"arraylake.bucket": "keys"}}),
    )
    .await
    .assert_ok(200);
    c.create_table("keyed", "t").await;
    let path = table_path("keyed", "t");

    let (read_tag, read) = load(&c.router, &c.read_token, &path, &[SIGNING]).await;
    let (write_tag, write) = load(&c.router, &c.write_token, &path, &[SIGNING]).await;
    assert_ne!(
        read_tag, write_tag,
        "signed-read and signed-write are other answers"
    );
    assert_eq!(read["config"], write["config"]);
    assert_eq!(
        load(&c.router, &c.read_token, &path, &[SIGNING]).await.0,
        read_tag
    );

    // The reader becomes a writer: its next load is a writer's answer.
    let me = c.management(Method::GET, "/me", &c.read_token, None).await;
    let principal = me.assert_ok(200)["principal"].as_str().unwrap().to_owned();
    c.management(
        Method::PUT,
        &format!("/orgs/{ORG}/members/{principal}"),
        ADMIN_TOKEN,
        Some(json!({"role": "write"})),
    )
    .await
    .assert_ok(204);
    assert_eq!(
        load(&c.router, &c.read_token, &path, &[SIGNING]).await.0,
        write_tag
    );
}
