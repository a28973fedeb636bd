use floe::model::OrgRow;
use floe::routes::ROUTES;
use floe::store::Condition;
use floe::store::rows::keys;
use floe_tests::*;
use http::Method;

#[tokio::test]
async fn config_resolves_the_org_and_advertises_exactly_the_routes() {
    let c = TestCatalog::new().await;
    let answer = c.get(&format!("/v1/config?warehouse={ORG}")).await;
    let body = answer.assert_ok(200);
    assert_eq!(body["overrides"]["prefix"], ORG);
    assert_eq!(body["overrides"]["warehouse"], ORG);
    assert_eq!(body["defaults"], serde_json::json!({}));
    let endpoints: Vec<&str> = body["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(endpoints.len(), floe::routes::ROUTES.len());
    for route in ROUTES {
        assert!(
            endpoints.contains(&route.endpoint().as_str()),
            "{}",
            route.endpoint()
        );
    }
    assert!(
        endpoints.contains(&"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials")
    );
    assert!(endpoints.contains(&"HEAD /v1/{prefix}/namespaces/{namespace}"));
    assert!(endpoints.contains(&"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign"));
    assert!(endpoints.contains(&"POST /v1/{prefix}/namespaces/{namespace}/register"));
    assert!(
        endpoints.contains(&"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister")
    );
}

#[tokio::test]
async fn config_errors_follow_the_reference() {
    let c = TestCatalog::new().await;
    c.get("/v1/config?warehouse=acme/bucket")
        .await
        .assert_error(400, "BadRequestException");
    c.get("/v1/config")
        .await
        .assert_error(400, "BadRequestException");
    c.get("/v1/config?warehouse=")
        .await
        .assert_error(400, "BadRequestException");
    c.get("/v1/config?warehouse=nope")
        .await
        .assert_error(404, "NotFoundException");
    // An outsider learns the org exists (404 comes first for unknown orgs) but nothing else.
    c.request(
        Method::GET,
        "/v1/config?warehouse=acme",
        Some(&c.outsider_token),
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
    // Unknown org is 404 even for outsiders: before any authorization detail.
    c.request(
        Method::GET,
        "/v1/config?warehouse=nope",
        Some(&c.outsider_token),
        None,
    )
    .await
    .assert_error(404, "NotFoundException");
}

#[tokio::test]
async fn iceberg_disabled_org_is_403_not_authorized() {
    let c = TestCatalog::new().await;
    let current = c.store.get(&keys::org(ORG)).await.unwrap().unwrap();
    let mut org: OrgRow = serde_json::from_slice(&current.body).unwrap();
    org.iceberg_enabled = false;
    c.store
        .write(vec![floe::store::rows::put(
            keys::org(ORG),
            &org,
            Condition::VersionIs(current.version),
        )])
        .await
        .unwrap();
    c.get(&format!("/v1/config?warehouse={ORG}"))
        .await
        .assert_error(403, "NotAuthorizedException");
    c.get(&format!("/v1/{ORG}/namespaces"))
        .await
        .assert_error(403, "NotAuthorizedException");
}

#[tokio::test]
async fn every_route_requires_a_valid_bearer_token() {
    let c = TestCatalog::new().await;
    for route in ROUTES {
        let path = route
            .path
            .replace("{prefix}", ORG)
            .replace("{namespace}", "ns")
            .replace("{table}", "t");
        let path = if path == "/v1/config" {
            format!("{path}?warehouse={ORG}")
        } else {
            path
        };
        let method = Method::from_bytes(route.method.as_bytes()).unwrap();
        let missing = c.request(method.clone(), &path, None, None).await;
        let bad = c
            .request(method.clone(), &path, Some("ema_not_a_real_token"), None)
            .await;
        if method == Method::HEAD {
            assert_eq!(missing.status.as_u16(), 401, "{path}");
            assert_eq!(bad.status.as_u16(), 401, "{path}");
        } else {
            missing.assert_error(401, "NotAuthorizedException");
            bad.assert_error(401, "NotAuthorizedException");
        }
    }
    let basic = c
        .request(Method::GET, "/v1/config?warehouse=acme", None, None)
        .await;
    basic.assert_error(401, "NotAuthorizedException");
}

#[tokio::test]
async fn oauth_token_endpoint_is_not_served() {
    let c = TestCatalog::new().await;
    let answer = c
        .post(
            "/v1/oauth/tokens",
            serde_json::json!({"grant_type": "client_credentials"}),
        )
        .await;
    answer.assert_error(400, "BadRequestException");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("static bearer token")
    );
}

#[tokio::test]
async fn unknown_org_prefix_is_404_not_found() {
    let c = TestCatalog::new().await;
    c.get("/v1/nope/namespaces")
        .await
        .assert_error(404, "NotFoundException");
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces"),
        Some(&c.outsider_token),
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
}
