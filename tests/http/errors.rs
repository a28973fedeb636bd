use bytes::Bytes;
use floe_tests::*;
use http::Method;
use serde_json::json;

#[tokio::test]
async fn malformed_json_wrong_types_and_missing_bodies_are_400() {
    let c = TestCatalog::new().await;
    let path = format!("/v1/{ORG}/namespaces");
    let raw = |body: &'static str| {
        c.request(
            Method::POST,
            &path,
            Some(ADMIN_TOKEN),
            Some(Bytes::from_static(body.as_bytes())),
        )
    };
    raw("{not json")
        .await
        .assert_error(400, "BadRequestException");
    raw("").await.assert_error(400, "BadRequestException");
    raw("{\"namespace\": \"flat-string\"}")
        .await
        .assert_error(400, "BadRequestException");
    raw("{\"namespace\": [1]}")
        .await
        .assert_error(400, "BadRequestException");
    raw("[]").await.assert_error(400, "BadRequestException");
    c.create_namespace("errs").await;
    let tables = format!("/v1/{ORG}/namespaces/errs/tables");
    c.post(&tables, json!({"name": "t"}))
        .await
        .assert_error(400, "BadRequestException");
    c.post(&tables, json!({"name": "t", "schema": {"type": "struct", "fields": [{"id": 1, "name": "x", "type": "nope", "required": true}]}}))
        .await
        .assert_error(400, "BadRequestException");
}

#[tokio::test]
async fn unknown_and_unsupported_routes_answer_an_error_model() {
    let c = TestCatalog::new().await;
    c.get("/v1/acme/nothing-here")
        .await
        .assert_error(404, "NotFoundException");
    c.get(&format!("/v1/{ORG}/namespaces/ns/functions"))
        .await
        .assert_error(406, "UnsupportedOperationException");
    let put = c
        .request(
            Method::PUT,
            &format!("/v1/{ORG}/namespaces"),
            Some(ADMIN_TOKEN),
            None,
        )
        .await;
    put.assert_error(405, "MethodNotAllowedException");
}

#[tokio::test]
async fn bad_query_values_are_400() {
    let c = TestCatalog::new().await;
    c.create_namespace("qs").await;
    c.get(&format!("/v1/{ORG}/namespaces?pageSize=0"))
        .await
        .assert_error(400, "BadRequestException");
    c.get(&format!("/v1/{ORG}/namespaces?pageSize=abc"))
        .await
        .assert_error(400, "BadRequestException");
    c.get(&format!("/v1/{ORG}/namespaces?pageToken=%21%21"))
        .await
        .assert_error(400, "BadRequestException");
    c.create_table("qs", "t").await;
    c.get(&format!("/v1/{ORG}/namespaces/qs/tables/t?snapshots=some"))
        .await
        .assert_error(400, "BadRequestException");
    c.delete(&format!(
        "/v1/{ORG}/namespaces/qs/tables/t?purgeRequested=maybe"
    ))
    .await
    .assert_error(400, "BadRequestException");
}
