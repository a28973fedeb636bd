//! The web view (`/ui`) over the real catalog: sign-in sessions, pages authorized exactly as
//! the API, escaping of client-supplied values, lineage links, and the paged history of a
//! 10,000-snapshot table.

use axum::Router;
use floe::store::rows::keys;
use floe_tests::{ADMIN_TOKEN, ORG, TestCatalog, table_path};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

/// One answer of the web view.
struct Page {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

fn ui(c: &TestCatalog, config: floe::ui::UiConfig) -> Router {
    floe::ui::router(c.catalog.clone(), config)
}

async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    cookie: Option<&str>,
    form: Option<String>,
) -> Page {
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "127.0.0.1:8181");
    if let Some(cookie) = cookie {
        builder = builder.header("cookie", cookie);
    }
    if form.is_some() {
        builder = builder.header("content-type", "application/x-www-form-urlencoded");
    }
    let request = builder
        .body(axum::body::Body::from(form.unwrap_or_default()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    Page {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

async fn get(router: &Router, uri: &str, cookie: &str) -> Page {
    send(router, Method::GET, uri, Some(cookie), None).await
}

/// Signs in with `token`; answers the `Cookie` header value of the session.
async fn sign_in(router: &Router, token: &str) -> String {
    let answer = send(
        router,
        Method::POST,
        "/ui/signin",
        None,
        Some(format!("token={token}")),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let set = answer.headers["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

fn ok(page: &Page) -> &str {
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    &page.body
}

#[tokio::test]
async fn sign_in_opens_a_strict_http_only_session_stored_only_as_a_hash() {
    let c = TestCatalog::new().await;
    let router = ui(&c, Default::default());
    let answer = send(
        &router,
        Method::POST,
        "/ui/signin",
        None,
        Some(format!("token={ADMIN_TOKEN}")),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    assert_eq!(answer.headers["location"], "/ui");
    let set = answer.headers["set-cookie"].to_str().unwrap();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/ui")
    );
    // Plain http on loopback: no Secure (a browser would drop the cookie).
    assert!(!set.contains("Secure"), "{set}");
    assert!(!set.contains(ADMIN_TOKEN));
    let cookie = set.split(';').next().unwrap().to_owned();
    let id = cookie.strip_prefix("floe_session=").unwrap();
    let hash = floe::auth::hash_token(id);
    let row = c.store.get(&keys::session(&hash)).await.unwrap().unwrap();
    assert!(row.expires_at.is_some(), "the store's TTL reaps sessions");
    let body = String::from_utf8(row.body.clone()).unwrap();
    assert!(!body.contains(id) && !body.contains(ADMIN_TOKEN), "{body}");

    let index = get(&router, "/ui/", &cookie).await;
    let html = ok(&index);
    assert!(html.contains(&format!("href=\"/ui/orgs/{ORG}\"")), "{html}");
    assert!(!html.contains(ADMIN_TOKEN) && !html.contains(id));
    let csp = index.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && !csp.contains("script-src"));
    assert_eq!(index.headers["cache-control"], "no-store");

    // Behind https (or on any other host) the cookie is Secure.
    let request = Request::builder()
        .method(Method::POST)
        .uri("/ui/signin")
        .header("host", "catalog.example.com")
        .body(axum::body::Body::from(format!("token={ADMIN_TOKEN}")))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert!(
        response.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .ends_with("; Secure")
    );

    // Sign-out deletes the row; the cookie no longer works.
    let out = send(&router, Method::POST, "/ui/signout", Some(&cookie), None).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(
        out.headers["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    assert!(c.store.get(&keys::session(&hash)).await.unwrap().is_none());
    let after = get(&router, &format!("/ui/orgs/{ORG}"), &cookie).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED);
    assert!(after.body.contains("name=\"token\""), "the sign-in form");
}

#[tokio::test]
async fn refused_tokens_and_cross_site_posts_open_no_session() {
    let c = TestCatalog::new().await;
    let router = ui(&c, Default::default());
    let bad = "ema_not_a_real_token_<script>";
    let answer = send(
        &router,
        Method::POST,
        "/ui/signin",
        None,
        Some(format!("token={bad}")),
    )
    .await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert!(answer.headers.get("set-cookie").is_none());
    assert!(
        !answer.body.contains("ema_not_a_real_token"),
        "the token is never echoed"
    );
    let request = Request::builder()
        .method(Method::POST)
        .uri("/ui/signin")
        .header("host", "127.0.0.1:8181")
        .header("origin", "https://evil.example")
        .body(axum::body::Body::from(format!("token={ADMIN_TOKEN}")))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(response.headers().get("set-cookie").is_none());
    for forged in [
        "floe_session=abc",
        "floe_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    ] {
        let page = get(&router, &format!("/ui/orgs/{ORG}"), forged).await;
        assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    }
}

#[tokio::test]
async fn deleting_an_api_client_ends_its_sessions() {
    let c = TestCatalog::new().await;
    let router = ui(&c, Default::default());
    let made = c
        .management(
            Method::POST,
            &format!("/orgs/{ORG}/api-clients"),
            ADMIN_TOKEN,
            Some(json!({"name": "viewer", "role": "read"})),
        )
        .await;
    let client = made.assert_ok(201).clone();
    let cookie = sign_in(&router, client["token"].as_str().unwrap()).await;
    ok(&get(&router, &format!("/ui/orgs/{ORG}"), &cookie).await);
    c.management(
        Method::DELETE,
        &format!("/orgs/{ORG}/api-clients/{}", client["id"].as_str().unwrap()),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(204);
    c.catalog.forget_cached();
    let page = get(&router, &format!("/ui/orgs/{ORG}"), &cookie).await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn pages_show_only_what_the_api_lets_the_principal_read() {
    let c = TestCatalog::new().await;
    let router = ui(&c, Default::default());
    c.create_namespace("shared").await;
    c.create_namespace("secret").await;
    c.create_table("shared", "granted").await;
    c.create_table("shared", "hidden").await;
    let made = c
        .management(
            Method::POST,
            &format!("/orgs/{ORG}/api-clients"),
            ADMIN_TOKEN,
            Some(json!({"name": "reader", "role": "read"})),
        )
        .await;
    let client = made.assert_ok(201).clone();
    let principal = client["principal"].as_str().unwrap();
    c.management(
        Method::PUT,
        &format!("/orgs/{ORG}/members/{principal}"),
        ADMIN_TOKEN,
        Some(json!({"role": "none"})),
    )
    .await
    .assert_ok(204);
    c.management(
        Method::PUT,
        &format!("/orgs/{ORG}/namespaces/shared/grants"),
        ADMIN_TOKEN,
        Some(json!({"principal": principal, "action": "read", "table": "granted"})),
    )
    .await
    .assert_ok(204);
    c.catalog.forget_cached();
    let cookie = sign_in(&router, client["token"].as_str().unwrap()).await;

    let org = get(&router, &format!("/ui/orgs/{ORG}"), &cookie).await;
    let html = ok(&org);
    assert!(
        html.contains(">shared<") && !html.contains(">secret<"),
        "{html}"
    );
    assert!(html.contains("private"), "visibility shown: {html}");
    // The table count is of the tables the principal may list (one of the two).
    assert!(
        html.contains(r#"<td class="num">1</td>"#) && !html.contains(r#"<td class="num">2</td>"#),
        "{html}"
    );
    let ns = get(
        &router,
        &format!("/ui/orgs/{ORG}/namespaces/shared"),
        &cookie,
    )
    .await;
    let html = ok(&ns);
    assert!(
        html.contains(">granted<") && !html.contains("hidden"),
        "{html}"
    );

    // A table without a grant answers as loadTable does for this principal.
    let api = c
        .request(
            Method::GET,
            &table_path("shared", "hidden"),
            client["token"].as_str(),
            None,
        )
        .await;
    let page = get(
        &router,
        &format!("/ui/orgs/{ORG}/namespaces/shared/tables/hidden"),
        &cookie,
    )
    .await;
    assert_eq!(page.status, api.status);
    assert!(!page.body.contains("metadata"), "{}", page.body);
    let missing = get(
        &router,
        &format!("/ui/orgs/{ORG}/namespaces/shared/tables/nope"),
        &cookie,
    )
    .await;
    let api_missing = c
        .request(
            Method::GET,
            &table_path("shared", "nope"),
            client["token"].as_str(),
            None,
        )
        .await;
    assert_eq!(missing.status, api_missing.status);
    ok(&get(
        &router,
        &format!("/ui/orgs/{ORG}/namespaces/shared/tables/granted"),
        &cookie,
    )
    .await);

    // Another org's principal sees nothing of this one.
    let outsider = sign_in(&router, &c.outsider_token).await;
    let page = get(&router, &format!("/ui/orgs/{ORG}"), &outsider).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(!page.body.contains("shared"));
    let unknown = get(&router, "/ui/orgs/no-such-org", &outsider).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.body.contains("<html"), "an HTML error page");
    assert_eq!(
        get(&router, "/ui/nowhere", &outsider).await.status,
        StatusCode::NOT_FOUND
    );
}

/// A commit adding one snapshot with `summary` (and `count` snapshots before it with none).
fn commit_body(metadata: &Value, first_id: i64, count: usize, summary: Value) -> Value {
    let mut parent = metadata
        .get("current-snapshot-id")
        .cloned()
        .filter(|v| !v.is_null() && v.as_i64() != Some(-1));
    let mut sequence = metadata["last-sequence-number"].as_i64().unwrap_or(0);
    let location = metadata["location"].as_str().unwrap();
    let requirements =
        json!([{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}]);
    let mut updates = Vec::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for i in 0..count {
        let id = first_id + i as i64;
        sequence += 1;
        let mut summary = summary.clone();
        summary["total-records"] = json!((sequence * 10).to_string());
        summary["total-data-files"] = json!(sequence.to_string());
        updates.push(json!({"action": "add-snapshot", "snapshot": {
            "snapshot-id": id, "parent-snapshot-id": parent, "sequence-number": sequence,
            "timestamp-ms": now - 20_000 + sequence, "schema-id": 0,
            "manifest-list": format!("{location}/metadata/snap-{id}.avro"),
            "summary": summary}}));
        parent = Some(json!(id));
    }
    updates.push(json!({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": parent}));
    json!({"requirements": requirements, "updates": updates})
}

async fn commit(
    c: &TestCatalog,
    ns: &str,
    table: &str,
    first_id: i64,
    count: usize,
    summary: Value,
) {
    let current = c.get(&table_path(ns, table)).await;
    let body = commit_body(
        &current.assert_ok(200)["metadata"],
        first_id,
        count,
        summary,
    );
    c.post(&table_path(ns, table), body).await.assert_ok(200);
}

#[tokio::test]
async fn the_table_page_escapes_client_values_and_links_lineage_repos() {
    let c = TestCatalog::new().await;
    c.create_namespace("lineage").await;
    c.create_table("lineage", "points").await;
    let evil = "<script>alert(1)</script>";
    commit(
        &c,
        "lineage",
        "points",
        7,
        1,
        json!({
            "operation": "append", "added-records": "42", "added-data-files": "3",
            "arraylake.source.repo": "earthmover/era5",
            "arraylake.source.ref": "main",
            "arraylake.source.snapshot-id": "ABC123",
            "arraylake.source.query": evil,
            "note\"><img src=x>": evil,
        }),
    )
    .await;
    commit(
        &c,
        "lineage",
        "points",
        8,
        1,
        json!({"operation": "append", "arraylake.source.repo": "javascript:alert(1)"}),
    )
    .await;
    let path = format!("/ui/orgs/{ORG}/namespaces/lineage/tables/points");

    let linked = ui(
        &c,
        floe::ui::UiConfig::with_repo_url("https://app.example.com/{org}/{repo}").unwrap(),
    );
    let cookie = sign_in(&linked, ADMIN_TOKEN).await;
    let page = get(&linked, &path, &cookie).await;
    let html = ok(&page);
    assert!(
        !html.contains("<script>") && !html.contains("<img src=x>"),
        "{html}"
    );
    assert!(
        html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "{html}"
    );
    assert!(
        html.contains("href=\"https://app.example.com/earthmover/era5\""),
        "{html}"
    );
    assert!(!html.contains("href=\"javascript:"), "{html}");
    assert_eq!(html.matches("<details").count(), 2);
    assert!(html.contains("ABC123") && html.contains("arraylake.source.ref"));
    // The server stamps the author from the committing principal (an api client: email only).
    assert!(
        html.contains("<th>arraylake.author-email</th><td><code>acme-admin@"),
        "{html}"
    );
    assert!(
        html.contains("<svg") && html.contains("<polyline"),
        "the chart"
    );
    // Newest first: snapshot 8 before snapshot 7.
    assert!(html.find("snapshot-8").unwrap() < html.find("snapshot-7").unwrap());
    assert!(html.contains("id=\"schema\"") && html.contains(">data<"));
    // Its maintenance: compaction off, never run, until the schedule finds it.
    assert!(
        html.contains("<tr><th>Compaction</th><td>off</td></tr>")
            && html.contains("<tr><th>Last run</th><td>never</td></tr>"),
        "{html}"
    );

    let plain = ui(&c, Default::default());
    let html = get(&plain, &path, &cookie).await.body;
    assert!(!html.contains("app.example.com") && html.contains("earthmover/era5"));
    assert!(
        !html.contains("class=\"repo\""),
        "no link without FLOE_UI_REPO_URL"
    );
}

#[tokio::test]
async fn a_ten_thousand_snapshot_history_renders_one_page_at_a_time() {
    let c = TestCatalog::new().await;
    c.create_namespace("big").await;
    c.create_table("big", "events").await;
    const TOTAL: usize = 10_000;
    const BATCH: usize = 2_500;
    for first in (0..TOTAL).step_by(BATCH) {
        commit(
            &c,
            "big",
            "events",
            1 + first as i64,
            BATCH,
            json!({"operation": "append", "added-records": "10"}),
        )
        .await;
    }
    let router = ui(&c, Default::default());
    let cookie = sign_in(&router, ADMIN_TOKEN).await;
    let base = format!("/ui/orgs/{ORG}/namespaces/big/tables/events");

    let first = get(&router, &base, &cookie).await;
    let html = ok(&first);
    assert_eq!(html.matches("<details").count(), 50);
    assert!(html.contains("id=\"snapshot-10000\""), "the newest first");
    assert!(html.contains("id=\"snapshot-9951\"") && !html.contains("id=\"snapshot-9950\""));
    assert!(html.contains("page 1 of 200"));
    assert!(html.contains("href=\"/ui/orgs/acme/namespaces/big/tables/events?page=2\""));
    assert!(html.contains("href=\"/ui/orgs/acme/namespaces/big/tables/events?page=200\""));
    // The chart is sampled: a bounded number of points, whatever the history's length.
    let points = html.split("<polyline points=\"").nth(1).unwrap();
    let points = points.split('"').next().unwrap().split(' ').count();
    assert!(points <= 120, "{points}");
    assert!(
        html.len() < 200_000,
        "one page, not the history: {} bytes",
        html.len()
    );

    let last = get(&router, &format!("{base}?page=200"), &cookie).await;
    let html = ok(&last);
    assert!(html.contains("id=\"snapshot-1\"") && html.contains("id=\"snapshot-50\""));
    assert!(!html.contains("?page=201"));
    assert_eq!(
        get(&router, &format!("{base}?page=201"), &cookie)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&router, &format!("{base}?page=0"), &cookie)
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
}

/// A namespace's page lists the views the principal may read with their current SQL per
/// dialect, escaped as everything a client wrote is.
#[tokio::test]
async fn a_namespace_page_lists_its_views_and_their_sql() {
    let c = TestCatalog::new().await;
    let router = ui(&c, Default::default());
    c.create_namespace("vpage").await;
    let view = json!({
        "name": "daily",
        "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "type": "long", "required": false}]},
        "view-version": {"version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
            "default-namespace": ["vpage"], "representations": [
                {"type": "sql", "sql": "SELECT '<script>x</script>' AS id", "dialect": "trino"}]}
    });
    c.post(&format!("/v1/{ORG}/namespaces/vpage/views"), view)
        .await
        .assert_ok(200);
    let cookie = sign_in(&router, ADMIN_TOKEN).await;
    let page = get(
        &router,
        &format!("/ui/orgs/{ORG}/namespaces/vpage"),
        &cookie,
    )
    .await;
    let html = ok(&page);
    assert!(html.contains("<dt>daily</dt>"), "{html}");
    assert!(html.contains(">trino<"), "{html}");
    assert!(html.contains("&#60;script&#62;x"), "{html}");
    assert!(!html.contains("<script>x"), "{html}");
}
