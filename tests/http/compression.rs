//! Compressed answers as the client's Accept-Encoding asks, plain ones otherwise; request
//! bodies over the limit are a 413 ErrorModel; an answer over what Lambda can return is an
//! ErrorModel that says how to ask for less.

use axum::routing::get;
use floe_tests::*;
use http::Method;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// A table whose loadTable answer is a few KiB.
async fn sizeable_table(c: &TestCatalog) -> String {
    c.create_namespace("zip").await;
    c.create_table("zip", "t").await;
    let update = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"comment": "compressible text ".repeat(300)}}
    ]});
    let path = format!("/v1/{ORG}/namespaces/zip/tables/t");
    c.post(&path, update).await.assert_ok(200);
    path
}

/// The raw answer to a GET with these headers: status, Content-Encoding, body bytes.
async fn fetch(
    c: &TestCatalog,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Option<String>, Vec<u8>) {
    let (status, headers, body) = c.get_raw(ADMIN_TOKEN, path, headers).await;
    let encoding = headers
        .get("content-encoding")
        .map(|v| v.to_str().unwrap().to_owned());
    (status.as_u16(), encoding, body.to_vec())
}

#[tokio::test]
async fn answers_are_compressed_as_the_client_asks() {
    let c = TestCatalog::new().await;
    let path = sizeable_table(&c).await;
    let (status, encoding, plain) = fetch(&c, &path, &[]).await;
    assert_eq!(
        (status, encoding),
        (200, None),
        "no Accept-Encoding: plain JSON"
    );
    let plain: Value = serde_json::from_slice(&plain).unwrap();

    let (status, encoding, gzipped) = fetch(&c, &path, &[("accept-encoding", "gzip")]).await;
    assert_eq!((status, encoding.as_deref()), (200, Some("gzip")));
    let mut json = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(gzipped.as_slice()),
        &mut json,
    )
    .unwrap();
    assert!(
        gzipped.len() * 5 < json.len(),
        "{} of {}",
        gzipped.len(),
        json.len()
    );
    assert_eq!(serde_json::from_slice::<Value>(&json).unwrap(), plain);

    let (status, encoding, zstded) = fetch(&c, &path, &[("accept-encoding", "zstd")]).await;
    assert_eq!((status, encoding.as_deref()), (200, Some("zstd")));
    let json = zstd::decode_all(zstded.as_slice()).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&json).unwrap(), plain);

    // An encoding Floe does not offer, and a small answer: plain.
    let (_, encoding, _) = fetch(&c, &path, &[("accept-encoding", "br")]).await;
    assert_eq!(encoding, None);
    let namespace = format!("/v1/{ORG}/namespaces/zip");
    let (status, encoding, _) = fetch(&c, &namespace, &[("accept-encoding", "gzip")]).await;
    assert_eq!(
        (status, encoding),
        (200, None),
        "under 1 KiB: not worth compressing"
    );
}

#[tokio::test]
async fn a_request_body_over_the_limit_is_413() {
    let c = TestCatalog::new().await;
    let huge = json!({"namespace": ["big"], "properties": {"blob": "x".repeat(5 * 1024 * 1024)}});
    let answer = c
        .request(
            Method::POST,
            &format!("/v1/{ORG}/namespaces"),
            Some(ADMIN_TOKEN),
            Some(bytes::Bytes::from(huge.to_string())),
        )
        .await;
    answer.assert_error(413, "PayloadTooLargeException");
    c.get(&format!("/v1/{ORG}/namespaces/big"))
        .await
        .assert_error(404, "NoSuchNamespaceException");
}

/// Lambda's limit, on a router that answers 7 MB: the gateway would fail opaquely, the function
/// answers an ErrorModel naming what to do; an answer that fits passes untouched.
#[tokio::test]
async fn an_answer_over_the_lambda_limit_is_an_error_model_that_says_what_to_do() {
    let router = axum::Router::new()
        .route("/big", get(|| async { "x".repeat(7_000_000) }))
        .route("/fits", get(|| async { "y".repeat(5_000_000) }))
        .layer(axum::middleware::from_fn(
            floe::http::lambda_limits::fit_lambda_response,
        ));
    let call = |uri: &'static str| {
        let router = router.clone();
        async move {
            let response = router
                .oneshot(
                    http::Request::get(uri)
                        .body(axum::body::Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.into_body().collect().await.unwrap().to_bytes(),
            )
        }
    };
    let (status, body) = call("/big").await;
    assert_eq!(status, 500);
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["error"]["type"], "ResponseTooLargeException");
    assert_eq!(answer["error"]["code"], 500);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("snapshots=refs"), "{message}");
    assert!(message.contains("Accept-Encoding: gzip"), "{message}");
    let (status, body) = call("/fits").await;
    assert_eq!((status, body.len()), (200, 5_000_000));
}
