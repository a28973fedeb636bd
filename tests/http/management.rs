//! The management API under /api/v1: orgs, api clients, members, teams, namespace settings,
//! grants and who-am-I, with their authorization and the ErrorModel.

use floe::bootstrap;
use floe::catalog::issue_service_admin;
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

async fn service_admin_token(c: &TestCatalog) -> String {
    issue_service_admin(&c.catalog, "operator").await.unwrap().1
}

#[tokio::test]
async fn service_administrators_create_orgs_and_switch_iceberg() {
    let c = TestCatalog::new().await;
    let operator = service_admin_token(&c).await;
    let created = c
        .management(
            Method::POST,
            "/orgs",
            &operator,
            Some(json!({"name": "neworg"})),
        )
        .await;
    assert_eq!(
        created.assert_ok(201),
        &json!({"name": "neworg", "iceberg_enabled": true})
    );
    c.management(
        Method::POST,
        "/orgs",
        &operator,
        Some(json!({"name": "neworg"})),
    )
    .await
    .assert_error(409, "AlreadyExistsException");
    c.management(
        Method::POST,
        "/orgs",
        ADMIN_TOKEN,
        Some(json!({"name": "mine"})),
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.management(
        Method::POST,
        "/orgs",
        &operator,
        Some(json!({"name": "bad/name"})),
    )
    .await
    .assert_error(400, "BadRequestException");

    // Something public, so that a stranger sees the org at all.
    c.create_namespace("open").await;
    c.management(
        Method::PATCH,
        &format!("/orgs/{ORG}/namespaces/open"),
        ADMIN_TOKEN,
        Some(json!({"visibility": "AUTHENTICATED_PUBLIC"})),
    )
    .await
    .assert_ok(200);
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces"),
        Some(&c.outsider_token),
        None,
    )
    .await
    .assert_ok(200);
    let off = c
        .management(
            Method::PATCH,
            &format!("/orgs/{ORG}"),
            &operator,
            Some(json!({"iceberg_enabled": false})),
        )
        .await;
    assert_eq!(off.assert_ok(200)["iceberg_enabled"], false);
    // Members learn why; the catalog routes refuse with NotAuthorizedException.
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces"),
        Some(ADMIN_TOKEN),
        None,
    )
    .await
    .assert_error(403, "NotAuthorizedException");
    // Everyone else learns nothing, not even that Iceberg is off.
    let stranger = c
        .request(
            Method::GET,
            &format!("/v1/{ORG}/namespaces"),
            Some(&c.outsider_token),
            None,
        )
        .await;
    stranger.assert_error(403, "ForbiddenException");
    assert_eq!(stranger.body["error"]["message"], "Access denied");
    c.management(
        Method::PATCH,
        &format!("/orgs/{ORG}"),
        ADMIN_TOKEN,
        Some(json!({"iceberg_enabled": true})),
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.management(
        Method::PATCH,
        "/orgs/nowhere",
        &operator,
        Some(json!({"iceberg_enabled": true})),
    )
    .await
    .assert_error(404, "NotFoundException");
}

#[tokio::test]
async fn api_clients_are_created_listed_and_revoked_by_org_admins() {
    let c = TestCatalog::new().await;
    let path = format!("/orgs/{ORG}/api-clients");
    let created = c
        .management(
            Method::POST,
            &path,
            ADMIN_TOKEN,
            Some(json!({"name": "etl", "email": "etl@acme.test", "role": "read"})),
        )
        .await;
    let created = created.assert_ok(201).clone();
    let token = created["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("ema_"));
    assert_eq!(created["role"], "read");
    assert_eq!(
        created["principal"],
        format!("api_client:{}", created["id"].as_str().unwrap())
    );
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces"),
        Some(&token),
        None,
    )
    .await
    .assert_ok(200);

    let listed = c.management(Method::GET, &path, ADMIN_TOKEN, None).await;
    let clients = listed.assert_ok(200)["api_clients"]
        .as_array()
        .unwrap()
        .clone();
    let etl = clients.iter().find(|k| k["name"] == "etl").unwrap();
    assert!(etl.get("token").is_none(), "a token is shown only once");
    assert!(clients.iter().all(|k| k.get("token").is_none()));

    c.management(Method::GET, &path, &c.write_token, None)
        .await
        .assert_error(403, "ForbiddenException");
    c.management(
        Method::POST,
        &path,
        ADMIN_TOKEN,
        Some(json!({"name": "x", "role": "owner"})),
    )
    .await
    .assert_error(400, "BadRequestException");

    let id = created["id"].as_str().unwrap();
    c.management(Method::DELETE, &format!("{path}/{id}"), ADMIN_TOKEN, None)
        .await
        .assert_ok(204);
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces"),
        Some(&token),
        None,
    )
    .await
    .assert_error(401, "NotAuthorizedException");
    c.management(Method::DELETE, &format!("{path}/{id}"), ADMIN_TOKEN, None)
        .await
        .assert_error(404, "NotFoundException");
}

#[tokio::test]
async fn an_api_client_created_with_role_none_reads_only_what_it_is_granted() {
    let c = TestCatalog::new().await;
    c.create_namespace("sales").await;
    c.create_table("sales", "orders").await;
    c.create_table("sales", "refunds").await;
    let path = format!("/orgs/{ORG}/api-clients");
    let created = c
        .management(
            Method::POST,
            &path,
            ADMIN_TOKEN,
            Some(json!({"name": "pipeline", "role": "none"})),
        )
        .await;
    let created = created.assert_ok(201).clone();
    assert_eq!(created["role"], "none");
    let token = created["token"].as_str().unwrap().to_owned();
    let shown = created["principal"].as_str().unwrap().to_owned();
    // No org role, not even for a moment: nothing is readable before a grant.
    let load = |table: &'static str| {
        let c = &c;
        let token = token.clone();
        async move {
            c.request(
                Method::GET,
                &format!("/v1/{ORG}/namespaces/sales/tables/{table}"),
                Some(&token),
                None,
            )
            .await
        }
    };
    load("orders").await.assert_error(403, "ForbiddenException");
    let me = c.management(Method::GET, "/me", &token, None).await;
    assert_eq!(me.assert_ok(200)["org_roles"], json!({}));
    let listed = c.management(Method::GET, &path, ADMIN_TOKEN, None).await;
    let clients = listed.assert_ok(200)["api_clients"].clone();
    let pipeline = clients
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["principal"] == shown.as_str())
        .unwrap();
    assert_eq!(pipeline["role"], "none");

    c.management(
        Method::PUT,
        &format!("/orgs/{ORG}/namespaces/sales/grants"),
        ADMIN_TOKEN,
        Some(json!({"principal": shown, "action": "read", "table": "orders"})),
    )
    .await
    .assert_ok(204);
    load("orders").await.assert_ok(200);
    load("refunds")
        .await
        .assert_error(403, "ForbiddenException");
}

#[tokio::test]
async fn members_teams_and_me() {
    let c = TestCatalog::new().await;
    let writer = c
        .catalog
        .sessions
        .authenticate(&c.write_token)
        .await
        .unwrap();
    let writer_id = floe::catalog::display_principal(&writer.id);
    let members = |principal: &str| format!("/orgs/{ORG}/members/{principal}");
    c.management(
        Method::PUT,
        &members("user:ada"),
        ADMIN_TOKEN,
        Some(json!({"role": "write"})),
    )
    .await
    .assert_ok(204);
    c.management(
        Method::PUT,
        &members("user:ada"),
        &c.write_token,
        Some(json!({"role": "admin"})),
    )
    .await
    .assert_error(403, "ForbiddenException");

    c.management(
        Method::POST,
        &format!("/orgs/{ORG}/teams"),
        ADMIN_TOKEN,
        Some(json!({"name": "data"})),
    )
    .await
    .assert_ok(201);
    let member = format!("/orgs/{ORG}/teams/data/members/{writer_id}");
    c.management(Method::PUT, &member, ADMIN_TOKEN, None)
        .await
        .assert_ok(204);
    c.management(
        Method::PUT,
        &format!("/orgs/{ORG}/teams/data/members/user:ada"),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(204);
    let team = c
        .management(
            Method::GET,
            &format!("/orgs/{ORG}/teams/data"),
            &c.read_token,
            None,
        )
        .await;
    let mut shown: Vec<String> = team.assert_ok(200)["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .collect();
    shown.sort();
    let mut expected = vec![writer_id.clone(), "user:ada".to_owned()];
    expected.sort();
    assert_eq!(shown, expected);

    let me = c.management(Method::GET, "/me", &c.write_token, None).await;
    assert_eq!(
        me.assert_ok(200),
        &json!({
            "principal": writer_id,
            "name": "writer",
            "email": "writer@acme.test",
            "service_admin": false,
            "org_roles": {ORG: "write"},
            "teams": {ORG: ["data"]}
        })
    );
    c.management(Method::DELETE, &member, ADMIN_TOKEN, None)
        .await
        .assert_ok(204);
    c.management(
        Method::PUT,
        &members(&writer_id),
        ADMIN_TOKEN,
        Some(json!({"role": "none"})),
    )
    .await
    .assert_ok(204);
    let me = c.management(Method::GET, "/me", &c.write_token, None).await;
    assert_eq!(me.assert_ok(200)["org_roles"], json!({}));
    assert_eq!(me.body["teams"], json!({}));
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces"),
        Some(&c.write_token),
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
}

#[tokio::test]
async fn namespace_settings_and_grants() {
    let c = TestCatalog::new().await;
    c.create_namespace("sales").await;
    c.create_table("sales", "orders").await;
    let ns = format!("/orgs/{ORG}/namespaces/sales");
    let settings = c.management(Method::GET, &ns, &c.read_token, None).await;
    let settings = settings.assert_ok(200).clone();
    assert_eq!(settings["name"], "sales");
    assert_eq!(settings["visibility"], "PRIVATE");
    assert_eq!(settings["bucket"], "default");
    assert!(settings["location"].as_str().unwrap().contains("sales"));
    assert_eq!(settings["description"], Value::Null);
    assert_eq!(settings["metadata"], json!({}));

    let described = c
        .management(
            Method::PATCH,
            &ns,
            &c.write_token,
            Some(json!({"description": "Orders", "metadata": {"owner": "sales-team"}})),
        )
        .await;
    assert_eq!(described.assert_ok(200)["description"], "Orders");
    assert_eq!(described.body["metadata"], json!({"owner": "sales-team"}));
    c.management(
        Method::PATCH,
        &ns,
        &c.write_token,
        Some(json!({"visibility": "AUTHENTICATED_PUBLIC"})),
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.management(
        Method::PATCH,
        &ns,
        &c.read_token,
        Some(json!({"description": "x"})),
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.management(
        Method::PATCH,
        &ns,
        ADMIN_TOKEN,
        Some(json!({"colour": "red"})),
    )
    .await
    .assert_error(400, "BadRequestException");

    // Grants: an api client without a role gets one table, then loses it.
    let (principal, token) = {
        let p = floe::model::Principal {
            id: "api-client:pipeline".into(),
            kind: floe::model::PrincipalKind::ApiClient,
            name: "pipeline".into(),
            email: None,
        };
        let token = floe::auth::generate_token();
        bootstrap::register_token(&*c.store, &floe::clock::SystemClock, &p, &token)
            .await
            .unwrap();
        (p, token)
    };
    let shown = floe::catalog::display_principal(&principal.id);
    let grants = format!("{ns}/grants");
    c.management(
        Method::PUT,
        &grants,
        ADMIN_TOKEN,
        Some(json!({"principal": shown, "action": "manage", "table": "orders"})),
    )
    .await
    .assert_ok(204);
    let listed = c.management(Method::GET, &grants, ADMIN_TOKEN, None).await;
    assert_eq!(
        listed.assert_ok(200),
        &json!({"grants": [{"principal": shown, "action": "manage", "table": "orders"}]})
    );
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces/sales/tables/orders"),
        Some(&token),
        None,
    )
    .await
    .assert_ok(200);
    // A table-grain manager administers that table's grants only.
    c.management(
        Method::PUT,
        &grants,
        &token,
        Some(json!({"principal": "user:ada", "action": "read", "table": "orders"})),
    )
    .await
    .assert_ok(204);
    c.management(
        Method::PUT,
        &grants,
        &token,
        Some(json!({"principal": "user:ada", "action": "read"})),
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.management(
        Method::PUT,
        &grants,
        ADMIN_TOKEN,
        Some(json!({"principal": "team:missing", "action": "read"})),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.management(
        Method::PUT,
        &grants,
        ADMIN_TOKEN,
        Some(json!({"principal": "user:ada", "action": "own"})),
    )
    .await
    .assert_error(400, "BadRequestException");
    c.management(
        Method::DELETE,
        &format!("{grants}?principal={shown}&table=orders"),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(204);
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces/sales/tables/orders"),
        Some(&token),
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");

    // Public, then readable by another org's principal.
    c.management(
        Method::PATCH,
        &ns,
        ADMIN_TOKEN,
        Some(json!({"visibility": "AUTHENTICATED_PUBLIC"})),
    )
    .await
    .assert_ok(200);
    c.request(
        Method::GET,
        &format!("/v1/{ORG}/namespaces/sales/tables/orders"),
        Some(&c.outsider_token),
        None,
    )
    .await
    .assert_ok(200);
}

#[tokio::test]
async fn unknown_orgs_and_strangers() {
    let c = TestCatalog::new().await;
    c.management(Method::GET, "/orgs/nowhere/api-clients", ADMIN_TOKEN, None)
        .await
        .assert_error(404, "NotFoundException");
    c.management(
        Method::GET,
        &format!("/orgs/{ORG}/api-clients"),
        &c.outsider_token,
        None,
    )
    .await
    .assert_error(403, "ForbiddenException");
    c.management(Method::GET, "/me", "ema_not-a-real-token", None)
        .await
        .assert_error(401, "NotAuthorizedException");
    c.management(Method::GET, "/orgs", ADMIN_TOKEN, None)
        .await
        .assert_error(405, "MethodNotAllowedException");
}

/// docs/management-api.yaml and the router agree route for route.
#[test]
fn the_api_document_matches_the_router() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/management-api.yaml"
    ))
    .unwrap();
    let mut documented = Vec::new();
    let mut in_paths = false;
    let mut current = None;
    for line in text.lines() {
        if line == "paths:" {
            in_paths = true;
            continue;
        }
        if in_paths && !line.starts_with(' ') && !line.is_empty() {
            break;
        }
        if let Some(path) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':'))
            && path.starts_with('/')
        {
            current = Some(path.to_owned());
        } else if let Some(method) = line.strip_prefix("    ").and_then(|l| l.strip_suffix(':'))
            && ["get", "put", "post", "patch", "delete"].contains(&method)
        {
            documented.push(format!(
                "{} {}",
                method.to_uppercase(),
                current.clone().unwrap()
            ));
        }
    }
    let mut served: Vec<String> = floe::http::management::MANAGEMENT_ROUTES
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    documented.sort();
    served.sort();
    assert_eq!(documented, served);
}
