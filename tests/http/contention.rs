//! Retryable is retryable: a write that keeps losing to concurrent ones past its retries, or that
//! the store declines for now (throttling), applied nothing, so the catalog answers the 503 with
//! `Retry-After` that tells a client to send the same request again; the spec's 409 stays where
//! the spec names a conflict (a commit that keeps losing its swap). A 500 is left for what is
//! unknown or broken.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use floe_tests::*;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// Every write batch.
fn any_write(_: &[floe::store::Write]) -> bool {
    true
}

/// One request from the root (`/iceberg/...` or `/api/v1/...`): status, `Retry-After`, body.
async fn send(
    c: &TestCatalog,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Option<String>, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .body(axum::body::Body::from(
            body.map(|b| Bytes::from(b.to_string())).unwrap_or_default(),
        ))
        .unwrap();
    let response = c.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (status, retry_after, body)
}

#[track_caller]
fn assert_retryable(case: &str, (status, retry_after, body): &(StatusCode, Option<String>, Value)) {
    assert_eq!(status.as_u16(), 503, "{case}: {body}");
    assert_eq!(
        body["error"]["type"], "ServiceUnavailableException",
        "{case}: {body}"
    );
    assert_eq!(body["error"]["code"], 503, "{case}: {body}");
    assert_eq!(retry_after.as_deref(), Some("1"), "{case}: Retry-After");
}

/// The requests of each area whose writes lost, and what each answers.
async fn requests_answer_retryable(fault: Fault) {
    let (c, armed) = TestCatalog::with_fault(Target::Write(any_write), fault.clone()).await;
    c.create_namespace("busy").await;
    c.create_table("busy", "t").await;
    let buckets = c
        .management(
            Method::GET,
            &format!("/orgs/{ORG}/buckets"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    let default_bucket = buckets.assert_ok(200)["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["default"] == true)
        .map(|b| b["nickname"].clone())
        .unwrap();
    armed.store(true, Ordering::SeqCst);
    let cases: Vec<(&str, Method, String, Option<Value>)> = vec![
        (
            "updateNamespaceProperties",
            Method::POST,
            format!("/iceberg{}/properties", ns_path("busy")),
            Some(json!({"updates": {"owner": "x"}, "removals": []})),
        ),
        (
            "createNamespace",
            Method::POST,
            format!("/iceberg/v1/{ORG}/namespaces"),
            Some(json!({"namespace": ["fresh"]})),
        ),
        (
            "dropTable",
            Method::DELETE,
            format!("/iceberg{}", table_path("busy", "t")),
            None,
        ),
        (
            "the org's default bucket",
            Method::PUT,
            format!("/api/v1/orgs/{ORG}/default-bucket"),
            Some(json!({"nickname": default_bucket})),
        ),
        (
            "a grant",
            Method::PUT,
            format!("/api/v1/orgs/{ORG}/namespaces/busy/grants"),
            Some(json!({"principal": "user:reader", "action": "read"})),
        ),
        (
            "a namespace's settings",
            Method::PATCH,
            format!("/api/v1/orgs/{ORG}/namespaces/busy"),
            Some(json!({"description": "changed"})),
        ),
    ];
    for (case, method, uri, body) in cases {
        if case == "createNamespace" && matches!(fault, Fault::LosesRace) {
            // Its first condition is that the name is free: failing, the name is taken (409).
            continue;
        }
        let answer = send(&c, method, &uri, body).await;
        assert_retryable(case, &answer);
    }
    // Nothing was applied.
    armed.store(false, Ordering::SeqCst);
    let ns = c.get(&ns_path("busy")).await;
    assert!(ns.assert_ok(200)["properties"].get("owner").is_none());
    c.get(&table_path("busy", "t")).await.assert_ok(200);
    c.get(&ns_path("fresh"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
}

#[tokio::test]
async fn writes_that_keep_losing_to_concurrent_ones_answer_503_with_retry_after() {
    requests_answer_retryable(Fault::LosesRace).await;
}

#[tokio::test]
async fn writes_the_store_throttles_answer_503_with_retry_after() {
    requests_answer_retryable(Fault::Throttled).await;
}

/// A commit that keeps losing its swap is the spec's 409 (the engine refreshes and retries);
/// one the store throttles applied nothing and is the 503.
#[tokio::test]
async fn a_commit_keeps_the_specs_409_for_a_lost_swap_and_503_when_throttled() {
    for (fault, status, error_type) in [
        (Fault::LosesRace, 409, "CommitFailedException"),
        (Fault::Throttled, 503, "ServiceUnavailableException"),
    ] {
        let (c, armed) = TestCatalog::with_fault(Target::Write(any_write), fault).await;
        c.create_namespace("busy").await;
        c.create_table("busy", "t").await;
        armed.store(true, Ordering::SeqCst);
        let commit = json!({"requirements": [], "updates": [
            {"action": "set-properties", "updates": {"k": "v"}}
        ]});
        c.post(&table_path("busy", "t"), commit)
            .await
            .assert_error(status, error_type);
    }
}
