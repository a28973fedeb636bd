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

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut json = Vec::new();
    // GzDecoder reads one gzip member and checks its CRC and length.
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut json).unwrap();
    json
}

/// Table answers are compressed around their document's cached compressed form, and inflate to
/// exactly the plain answer's bytes: loads whole and trimmed, with and without vended
/// credentials, again from the cache, and the answer of a commit.
#[tokio::test]
async fn compressed_table_answers_inflate_to_the_plain_answers_bytes() {
    let c = TestCatalog::new().await;
    let path = sizeable_table(&c).await;
    let vended = ("x-iceberg-access-delegation", "vended-credentials");
    for query in ["", "?snapshots=refs"] {
        let url = format!("{path}{query}");
        for delegation in [None, Some(vended)] {
            let extra: Vec<(&str, &str)> = delegation.into_iter().collect();
            let (_, headers, plain) = c.get_raw(ADMIN_TOKEN, &url, &extra).await;
            assert!(headers.get("content-encoding").is_none());
            for round in 0..2 {
                for (accept, inflate) in [
                    ("gzip", gunzip as fn(&[u8]) -> Vec<u8>),
                    ("zstd", |b: &[u8]| zstd::decode_all(b).unwrap()),
                    ("gzip;q=0.5, zstd;q=0.4", gunzip),
                ] {
                    let mut asked = extra.clone();
                    asked.push(("accept-encoding", accept));
                    let (status, headers, body) = c.get_raw(ADMIN_TOKEN, &url, &asked).await;
                    assert_eq!(status, 200);
                    let expected = if accept == "zstd" { "zstd" } else { "gzip" };
                    assert_eq!(headers["content-encoding"], expected, "{accept}");
                    assert_eq!(headers["vary"], "accept-encoding");
                    assert!(headers.contains_key("etag"));
                    let inflated = inflate(&body);
                    if delegation.is_none() {
                        assert_eq!(inflated, plain, "{url} {accept} round {round}");
                    } else {
                        // Vended credentials are the same within their reuse window.
                        let a: Value = serde_json::from_slice(&inflated).unwrap();
                        let b: Value = serde_json::from_slice(&plain).unwrap();
                        assert_eq!(a, b, "{url} {accept} round {round}");
                    }
                }
            }
        }
    }
    let update = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"more": "compressible text ".repeat(100)}}
    ]});
    let (status, headers, body) = exchange(
        &c.router,
        Method::POST,
        ADMIN_TOKEN,
        &path,
        Some(update),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(
        (
            status.as_u16(),
            headers["content-encoding"].to_str().unwrap()
        ),
        (200, "gzip")
    );
    let committed = gunzip(&body);
    let answer: Value = serde_json::from_slice(&committed).unwrap();
    let loaded = c.get(&path).await;
    let loaded = loaded.assert_ok(200);
    assert_eq!(answer["metadata"], loaded["metadata"]);
    assert_eq!(answer["metadata-location"], loaded["metadata-location"]);
    assert!(committed.starts_with(b"{\"metadata-location\":"));
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
