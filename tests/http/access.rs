//! The authorization matrix: every principal kind × every target × every catalog and management
//! route, with the expected answer derived from one declarative model of the reference's access
//! rules.

use floe::authz::Action;
use floe::bootstrap;
use floe::model::Visibility;
use floe::store::rows::{ServiceAdminRow, keys};
use floe::store::{Condition, rows};
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

/// Who calls. Roles are in the org `acme`; the stranger is an admin of another org only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Reader,
    Writer,
    Admin,
    TeamRead,
    TeamWrite,
    TeamManage,
    TableRead,
    TableWrite,
    TableManage,
    Stranger,
    ServiceAdmin,
}

const EVERYONE: [Who; 11] = [
    Who::Reader,
    Who::Writer,
    Who::Admin,
    Who::TeamRead,
    Who::TeamWrite,
    Who::TeamManage,
    Who::TableRead,
    Who::TableWrite,
    Who::TableManage,
    Who::Stranger,
    Who::ServiceAdmin,
];

/// `granted` holds t1 (table grants) and t2; `other` holds t3; `open` is public and holds tp.
const NAMESPACES: [&str; 3] = ["granted", "other", "open"];
const TABLES: [(&str, &str); 4] = [
    ("granted", "t1"),
    ("granted", "t2"),
    ("other", "t3"),
    ("open", "tp"),
];

/// The model: the highest action `who` holds on a namespace or (with `table`) a table of acme.
fn holds(who: Who, namespace: &str, table: Option<&str>) -> Option<Action> {
    let role = match who {
        Who::Reader => Some(Action::Read),
        Who::Writer => Some(Action::Write),
        Who::Admin | Who::ServiceAdmin => Some(Action::Manage),
        _ => None,
    };
    let team = match (who, namespace) {
        (Who::TeamRead, "granted") => Some(Action::Read),
        (Who::TeamWrite, "granted") => Some(Action::Write),
        (Who::TeamManage, "granted") => Some(Action::Manage),
        _ => None,
    };
    let table_grant = match who {
        Who::TableRead => Some(Action::Read),
        Who::TableWrite => Some(Action::Write),
        Who::TableManage => Some(Action::Manage),
        _ => None,
    }
    .filter(|_| namespace == "granted");
    let grant = match table {
        // A table grant covers its table; on the namespace it only makes it visible.
        Some(t) => table_grant.filter(|_| t == "t1"),
        None => table_grant.map(|_| Action::Read),
    };
    let public = (namespace == "open").then_some(Action::Read);
    role.max(team).max(grant).max(public)
}

fn allowed(who: Who, namespace: &str, table: Option<&str>, needs: Action) -> bool {
    holds(who, namespace, table).is_some_and(|held| held >= needs)
}

struct Caller {
    who: Who,
    token: String,
}

/// The org as the matrix needs it, and a token per principal kind.
/// The static keys `granted` and `other` keep their files behind on the AWS backend: no
/// answer of the matrix may carry them.
const MATRIX_KEY_ID: &str = "AKIAFLOEMATRIX";
const MATRIX_SECRET: &str = "floe-matrix-secret-Qv8Lw2";

async fn setup(c: &TestCatalog) -> Vec<Caller> {
    if c.backend == Backend::Aws {
        let auth = c.sealed_hmac(MATRIX_KEY_ID, MATRIX_SECRET).await;
        c.add_bucket("matrix-keys", auth).await;
    }
    for ns in NAMESPACES {
        if c.backend == Backend::Aws && ns != "open" {
            c.post(
                &format!("/v1/{ORG}/namespaces"),
                json!({"namespace": [ns], "properties": {"arraylake.bucket": "matrix-keys"}}),
            )
            .await
            .assert_ok(200);
        } else {
            c.create_namespace(ns).await;
        }
    }
    for (ns, table) in TABLES {
        c.create_table(ns, table).await;
    }
    let admin = c
        .catalog
        .core
        .lookups
        .org_context(&bootstrap::dev_admin(ORG), ORG)
        .await
        .unwrap();
    c.catalog
        .access
        .set_visibility(&admin, "open", Visibility::AuthenticatedPublic)
        .await
        .unwrap();
    let mut callers = vec![
        Caller {
            who: Who::Reader,
            token: c.read_token.clone(),
        },
        Caller {
            who: Who::Writer,
            token: c.write_token.clone(),
        },
        Caller {
            who: Who::Admin,
            token: ADMIN_TOKEN.into(),
        },
        Caller {
            who: Who::Stranger,
            token: c.outsider_token.clone(),
        },
    ];
    for (who, team, action) in [
        (Who::TeamRead, "readers", Action::Read),
        (Who::TeamWrite, "writers", Action::Write),
        (Who::TeamManage, "managers", Action::Manage),
    ] {
        let (principal, token) = principal_without_role(c, team).await;
        c.catalog.access.create_team(&admin, team).await.unwrap();
        c.catalog
            .access
            .set_team_member(&admin, team, &principal.id, true)
            .await
            .unwrap();
        c.catalog
            .access
            .put_grant(&admin, "granted", &format!("team:{team}"), None, action)
            .await
            .unwrap();
        callers.push(Caller { who, token });
    }
    for (who, name, action) in [
        (Who::TableRead, "t-reader", Action::Read),
        (Who::TableWrite, "t-writer", Action::Write),
        (Who::TableManage, "t-manager", Action::Manage),
    ] {
        let (principal, token) = principal_without_role(c, name).await;
        c.catalog
            .access
            .put_grant(&admin, "granted", &principal.id, Some("t1"), action)
            .await
            .unwrap();
        callers.push(Caller { who, token });
    }
    let (principal, token) = principal_without_role(c, "operator").await;
    let row = ServiceAdminRow {
        principal_id: principal.id.clone(),
        created_ms: 0,
    };
    c.store
        .write(vec![rows::put(
            keys::service_admin(&principal.id),
            &row,
            Condition::Always,
        )])
        .await
        .unwrap();
    callers.push(Caller {
        who: Who::ServiceAdmin,
        token,
    });
    assert_eq!(callers.len(), EVERYONE.len());
    callers
}

/// One request and whether the model allows it: allowed requests must not be 403, denied ones
/// must be exactly the blanket 403.
struct Check {
    who: Who,
    route: &'static str,
    target: String,
    allowed: bool,
    answer: Answer,
}

#[tokio::test]
async fn every_principal_every_target_every_route() {
    let c = TestCatalog::new().await;
    let callers = setup(&c).await;
    // A storage request the sign route signs for whoever may read the table: a data file GET
    // in its directory, on its bucket's endpoint (tables on other storage answer a 400).
    let mut sign_requests = std::collections::HashMap::new();
    for (ns, table) in TABLES {
        let loaded = c.get(&table_path(ns, table)).await;
        let location = loaded.assert_ok(200)["metadata"]["location"]
            .as_str()
            .unwrap()
            .to_owned();
        let uri = match location.strip_prefix("s3://") {
            Some(path) if c.backend == Backend::Aws => {
                format!("{}/{path}/data/x.parquet", moto::endpoint())
            }
            _ => "https://b.s3.amazonaws.com/k".to_owned(),
        };
        sign_requests.insert(
            table,
            json!({"method": "GET", "region": "us-east-1", "uri": uri, "headers": {}}),
        );
    }
    let mut checks = Vec::new();
    let mut unique = 0;
    for caller in &callers {
        let who = caller.who;
        let token = caller.token.as_str();
        let call = |method: Method, path: String, body: Option<Value>| {
            let c = &c;
            async move {
                c.request(
                    method,
                    &path,
                    Some(token),
                    body.map(|b| bytes::Bytes::from(b.to_string())),
                )
                .await
            }
        };
        let load_as = |path: String, delegation: &'static str| {
            let c = &c;
            async move {
                c.send(
                    Method::GET,
                    &format!("/iceberg{path}"),
                    Some(token),
                    None,
                    &[("x-iceberg-access-delegation", delegation)],
                )
                .await
            }
        };
        for ns in NAMESPACES {
            let namespace_checks: [(&'static str, Method, String, Option<Value>, Action); 5] = [
                (
                    "loadNamespace",
                    Method::GET,
                    ns_path(ns),
                    None,
                    Action::Read,
                ),
                (
                    "namespaceExists",
                    Method::HEAD,
                    ns_path(ns),
                    None,
                    Action::Read,
                ),
                (
                    "listTables",
                    Method::GET,
                    format!("{}/tables", ns_path(ns)),
                    None,
                    Action::Read,
                ),
                (
                    "updateNamespaceProperties",
                    Method::POST,
                    format!("{}/properties", ns_path(ns)),
                    Some(json!({"updates": {"touched": "yes"}})),
                    Action::Write,
                ),
                // Every namespace holds tables: an allowed drop is the 409, never a drop.
                (
                    "dropNamespace",
                    Method::DELETE,
                    ns_path(ns),
                    None,
                    Action::Write,
                ),
            ];
            for (route, method, path, body, needs) in namespace_checks {
                checks.push(Check {
                    who,
                    route,
                    target: ns.into(),
                    allowed: allowed(who, ns, None, needs),
                    answer: call(method, path, body).await,
                });
            }
            // Write on a table that does not exist: an allowed drop is the 404.
            checks.push(Check {
                who,
                route: "dropTable(missing)",
                target: format!("{ns}.gone"),
                allowed: allowed(who, ns, Some("gone"), Action::Write),
                answer: call(Method::DELETE, table_path(ns, "gone"), None).await,
            });
            checks.push(Check {
                who,
                route: "unregisterTable(missing)",
                target: format!("{ns}.gone"),
                allowed: allowed(who, ns, Some("gone"), Action::Write),
                answer: call(
                    Method::POST,
                    format!("{}/unregister", table_path(ns, "gone")),
                    None,
                )
                .await,
            });
            // Views, on a name no view holds: an allowed load, replace or drop is the 404.
            let gone_view = format!("{}/views/gone_view", ns_path(ns));
            for (route, method, body, needs) in [
                ("loadView(missing)", Method::GET, None, Action::Read),
                ("viewExists(missing)", Method::HEAD, None, Action::Read),
                (
                    "replaceView(missing)",
                    Method::POST,
                    Some(json!({"requirements": [], "updates": []})),
                    Action::Write,
                ),
                ("dropView(missing)", Method::DELETE, None, Action::Write),
            ] {
                checks.push(Check {
                    who,
                    route,
                    target: format!("{ns}.gone_view"),
                    allowed: allowed(who, ns, Some("gone_view"), needs),
                    answer: call(method, gone_view.clone(), body).await,
                });
            }
            checks.push(Check {
                who,
                route: "listViews",
                target: ns.into(),
                allowed: allowed(who, ns, None, Action::Read),
                answer: call(Method::GET, format!("{}/views", ns_path(ns)), None).await,
            });
            unique += 1;
            checks.push(Check {
                who,
                route: "createView",
                target: ns.into(),
                allowed: allowed(who, ns, None, Action::Write),
                answer: call(
                    Method::POST,
                    format!("{}/views", ns_path(ns)),
                    Some(json!({
                        "name": format!("view_{unique}"),
                        "schema": {"type": "struct", "schema-id": 0, "fields": [
                            {"id": 1, "name": "id", "type": "long", "required": false}]},
                        "view-version": {"version-id": 1, "schema-id": 0, "timestamp-ms": 1,
                            "summary": {}, "default-namespace": [ns], "representations": [
                                {"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}]}
                    })),
                )
                .await,
            });
            checks.push(Check {
                who,
                route: "renameView(missing)",
                target: ns.into(),
                allowed: allowed(who, ns, None, Action::Write),
                answer: call(
                    Method::POST,
                    format!("/v1/{ORG}/views/rename"),
                    Some(json!({
                        "source": {"namespace": [ns], "name": "gone_view"},
                        "destination": {"namespace": [ns], "name": "gone_view_2"}
                    })),
                )
                .await,
            });
            checks.push(Check {
                who,
                route: "registerView(file outside the namespace)",
                target: ns.into(),
                allowed: allowed(who, ns, None, Action::Write),
                answer: call(
                    Method::POST,
                    format!("{}/register-view", ns_path(ns)),
                    Some(json!({"name": "registered_view", "metadata-location": "file:///elsewhere/v/metadata/v1.metadata.json"})),
                )
                .await,
            });
            // A file in no storage of the org: an allowed registration is the 400.
            checks.push(Check {
                who,
                route: "registerTable(file outside the org's storage)",
                target: ns.into(),
                allowed: allowed(who, ns, None, Action::Write),
                answer: call(
                    Method::POST,
                    format!("{}/register", ns_path(ns)),
                    Some(json!({"name": "registered", "metadata-location": "file:///elsewhere/t/metadata/v1.metadata.json"})),
                )
                .await,
            });
            // Onto a name that exists: an allowed rename is the 409, never a rename.
            let (first, second) = match ns {
                "granted" => ("t1", "t2"),
                "other" => ("t3", "t3"),
                _ => ("tp", "tp"),
            };
            let rename = json!({
                "source": {"namespace": [ns], "name": first},
                "destination": {"namespace": [ns], "name": second}
            });
            checks.push(Check {
                who,
                route: "renameTable(onto an existing name)",
                target: ns.into(),
                allowed: allowed(who, ns, None, Action::Write),
                answer: call(
                    Method::POST,
                    format!("/v1/{ORG}/tables/rename"),
                    Some(rename),
                )
                .await,
            });
            checks.push(Check {
                who,
                route: "createTable(invalid name)",
                target: ns.into(),
                allowed: allowed(who, ns, None, Action::Write),
                answer: call(
                    Method::POST,
                    format!("{}/tables", ns_path(ns)),
                    Some(create_table_body("..")),
                )
                .await,
            });
            unique += 1;
            let create = create_table_body(&format!("new_{unique}"));
            checks.push(Check {
                who,
                route: "createTable",
                target: ns.into(),
                allowed: allowed(who, ns, None, Action::Write),
                answer: call(
                    Method::POST,
                    format!("{}/tables", ns_path(ns)),
                    Some(create),
                )
                .await,
            });
        }
        for (ns, table) in TABLES {
            let path = table_path(ns, table);
            let table_checks: [(&'static str, Method, String, Option<Value>, Action); 10] = [
                ("loadTable", Method::GET, path.clone(), None, Action::Read),
                // Scan planning is a read of the table; a made-up plan id or task is the
                // allowed caller's 404, never a denied caller's.
                (
                    "planTableScan",
                    Method::POST,
                    format!("{path}/plan"),
                    Some(json!({"filter": true})),
                    Action::Read,
                ),
                (
                    "fetchPlanningResult(made-up id)",
                    Method::GET,
                    format!("{path}/plan/made-up"),
                    None,
                    Action::Read,
                ),
                (
                    "cancelPlanning(made-up id)",
                    Method::DELETE,
                    format!("{path}/plan/made-up"),
                    None,
                    Action::Read,
                ),
                (
                    "fetchScanTasks(made-up task)",
                    Method::POST,
                    format!("{path}/tasks"),
                    Some(json!({"plan-task": "made-up"})),
                    Action::Read,
                ),
                // Read suffices to ask; what is signed then follows the caller's action.
                (
                    "signRequest",
                    Method::POST,
                    format!("{path}/sign"),
                    Some(sign_requests[table].clone()),
                    Action::Read,
                ),
                (
                    "tableExists",
                    Method::HEAD,
                    path.clone(),
                    None,
                    Action::Read,
                ),
                (
                    "loadCredentials",
                    Method::GET,
                    format!("{path}/credentials"),
                    None,
                    Action::Read,
                ),
                (
                    "commitTable",
                    Method::POST,
                    path.clone(),
                    Some(json!({"requirements": [], "updates": [
                        {"action": "set-properties", "updates": {"touched": "yes"}}
                    ]})),
                    Action::Write,
                ),
                // 403 before 400: a caller who may not write learns nothing about its body.
                (
                    "commitTable(invalid body)",
                    Method::POST,
                    path.clone(),
                    Some(json!({"requirements": "not a list"})),
                    Action::Write,
                ),
            ];
            for (route, delegation) in [
                ("loadTable(vended-credentials)", "vended-credentials"),
                ("loadTable(remote-signing)", "remote-signing"),
            ] {
                checks.push(Check {
                    who,
                    route,
                    target: format!("{ns}.{table}"),
                    allowed: allowed(who, ns, Some(table), Action::Read),
                    answer: load_as(path.clone(), delegation).await,
                });
            }
            let transaction = json!({"table-changes": [{
                "identifier": {"namespace": [ns], "name": table},
                "requirements": [],
                "updates": [{"action": "set-properties", "updates": {"touched": "in a transaction"}}]
            }]});
            checks.push(Check {
                who,
                route: "commitTransaction",
                target: format!("{ns}.{table}"),
                allowed: allowed(who, ns, Some(table), Action::Write),
                answer: call(
                    Method::POST,
                    format!("/v1/{ORG}/transactions/commit"),
                    Some(transaction),
                )
                .await,
            });
            for (route, method, path, body, needs) in table_checks {
                checks.push(Check {
                    who,
                    route,
                    target: format!("{ns}.{table}"),
                    allowed: allowed(who, ns, Some(table), needs),
                    answer: call(method, path, body).await,
                });
            }
        }
        unique += 1;
        let create_ns = json!({"namespace": [format!("made_{unique}")]});
        checks.push(Check {
            who,
            route: "createNamespace",
            target: "acme".into(),
            allowed: matches!(who, Who::Writer | Who::Admin | Who::ServiceAdmin),
            answer: call(
                Method::POST,
                format!("/v1/{ORG}/namespaces"),
                Some(create_ns),
            )
            .await,
        });
        checks.push(Check {
            who,
            route: "listNamespaces(other org)",
            target: "other-org".into(),
            allowed: matches!(who, Who::Stranger | Who::ServiceAdmin),
            answer: call(Method::GET, "/v1/other-org/namespaces".into(), None).await,
        });

        // The management routes, through the same decision.
        let manage = |method: Method, path: String, body: Option<Value>| {
            let c = &c;
            async move { c.management(method, &path, token, body).await }
        };
        for (ns, table) in [("granted", "t1"), ("other", "t3"), ("open", "tp")] {
            let settings = format!("/orgs/{ORG}/namespaces/{ns}");
            let grants = format!("{settings}/grants");
            let management_checks: [(&'static str, Method, String, Option<Value>, bool); 6] = [
                (
                    "GET namespace settings",
                    Method::GET,
                    settings.clone(),
                    None,
                    allowed(who, ns, None, Action::Read),
                ),
                (
                    "PATCH description",
                    Method::PATCH,
                    settings.clone(),
                    Some(json!({"description": "matrix"})),
                    allowed(who, ns, None, Action::Write),
                ),
                (
                    "PATCH visibility",
                    Method::PATCH,
                    settings.clone(),
                    Some(
                        json!({"visibility": if ns == "open" { "AUTHENTICATED_PUBLIC" } else { "PRIVATE" }}),
                    ),
                    allowed(who, ns, None, Action::Manage),
                ),
                (
                    "GET grants",
                    Method::GET,
                    grants.clone(),
                    None,
                    allowed(who, ns, None, Action::Manage)
                        || allowed(who, ns, Some(table), Action::Manage),
                ),
                (
                    "PUT namespace grant",
                    Method::PUT,
                    grants.clone(),
                    Some(json!({"principal": "user:matrix", "action": "read"})),
                    allowed(who, ns, None, Action::Manage),
                ),
                (
                    "PUT table grant",
                    Method::PUT,
                    grants.clone(),
                    Some(json!({"principal": "user:matrix", "action": "read", "table": table})),
                    allowed(who, ns, Some(table), Action::Manage),
                ),
            ];
            for (route, method, path, body, allowed) in management_checks {
                checks.push(Check {
                    who,
                    route,
                    target: ns.into(),
                    allowed,
                    answer: manage(method, path, body).await,
                });
            }
        }
        let org_admin = matches!(who, Who::Admin | Who::ServiceAdmin);
        let member = matches!(
            who,
            Who::Reader | Who::Writer | Who::Admin | Who::ServiceAdmin
        );
        for (route, method, path, body, allowed) in [
            (
                "GET api-clients",
                Method::GET,
                format!("/orgs/{ORG}/api-clients"),
                None,
                org_admin,
            ),
            (
                "PUT member",
                Method::PUT,
                format!("/orgs/{ORG}/members/user:nobody"),
                Some(json!({"role": "none"})),
                org_admin,
            ),
            (
                "GET team",
                Method::GET,
                format!("/orgs/{ORG}/teams/readers"),
                None,
                member,
            ),
            ("GET me", Method::GET, "/me".to_owned(), None, true),
        ] {
            checks.push(Check {
                who,
                route,
                target: ORG.into(),
                allowed,
                answer: manage(method, path, body).await,
            });
        }

        // Listings show exactly what the caller may read.
        let listed = call(Method::GET, format!("/v1/{ORG}/namespaces"), None).await;
        let mut names: Vec<String> = listed.assert_ok(200)["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n[0].as_str().unwrap().to_owned())
            .filter(|n| NAMESPACES.contains(&n.as_str()))
            .collect();
        names.sort();
        let mut expected: Vec<String> = NAMESPACES
            .iter()
            .filter(|ns| allowed(who, ns, None, Action::Read))
            .map(|ns| ns.to_string())
            .collect();
        expected.sort();
        assert_eq!(names, expected, "listNamespaces as {who:?}");
        let tables = call(Method::GET, format!("{}/tables", ns_path("granted")), None).await;
        if allowed(who, "granted", None, Action::Read) {
            let mut names: Vec<String> = tables.assert_ok(200)["identifiers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .filter(|t| t.starts_with('t'))
                .collect();
            names.sort();
            let expected: Vec<&str> = ["t1", "t2"]
                .into_iter()
                .filter(|t| allowed(who, "granted", Some(t), Action::Read))
                .collect();
            assert_eq!(names, expected, "listTables(granted) as {who:?}");
        }
    }
    let mut failures = Vec::new();
    for check in &checks {
        let answer = check.answer.body.to_string();
        // A signature names the key id it was made with (`Credential=`), never the secret.
        let names_key = check.route != "signRequest" && answer.contains(MATRIX_KEY_ID);
        assert!(
            !answer.contains(MATRIX_SECRET) && !names_key,
            "{:?}: {} on {} answered a static key: {answer}",
            check.who,
            check.route,
            check.target
        );
        let status = check.answer.status.as_u16();
        let denied = status == 403;
        if check.allowed == denied {
            failures.push(format!(
                "{:?}: {} on {}: expected {}, got {status} {}",
                check.who,
                check.route,
                check.target,
                if check.allowed { "allowed" } else { "403" },
                check.answer.body
            ));
        }
        // HEAD answers carry no body.
        if denied && !check.answer.body.is_null() {
            assert_eq!(
                check.answer.body["error"]["message"], "Access denied",
                "{} on {}: a denial reveals nothing",
                check.route, check.target
            );
        }
    }
    eprintln!(
        "authorization matrix: {} principals x {} checks each = {} requests",
        callers.len(),
        checks.len() / callers.len(),
        checks.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Table grants are bound to names (the reference: "They survive a table being dropped and
/// recreated under the same name, and renameTable carries them along to the new name"), merged
/// with grants already on the new name (the higher action wins). A dropped table holds none of
/// its own: restored under its old name it is covered by that name's grants, under a new name by
/// the new name's.
#[tokio::test]
async fn table_grants_follow_names_across_drop_recreate_and_rename() {
    let c = TestCatalog::new().await;
    c.create_namespace("gg").await;
    c.create_table("gg", "a").await;
    let admin = admin_context(&c).await;
    let (principal, token) = principal_without_role(&c, "follower").await;
    for (table, action) in [
        ("a", Action::Write),
        ("b", Action::Read),
        ("d", Action::Read),
    ] {
        c.catalog
            .access
            .put_grant(&admin, "gg", &principal.id, Some(table), action)
            .await
            .unwrap();
    }
    let load = |table: &'static str| {
        let (c, token) = (&c, token.clone());
        async move {
            c.request(Method::GET, &table_path("gg", table), Some(&token), None)
                .await
                .status
                .as_u16()
        }
    };
    let commit = |table: &'static str| {
        let (c, token) = (&c, token.clone());
        async move {
            let body = json!({"requirements": [], "updates": [
                {"action": "set-properties", "updates": {"by": "follower"}}
            ]});
            c.post_as(&token, &table_path("gg", table), body)
                .await
                .status
                .as_u16()
        }
    };
    assert_eq!(load("a").await, 200);
    let first = c.get(&table_path("gg", "a")).await.assert_ok(200)["metadata"]["table-uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(c.delete(&table_path("gg", "a")).await.status.as_u16(), 204);
    assert_eq!(load("a").await, 404, "the name's grant outlives its table");
    c.create_table("gg", "a").await;
    assert_eq!(
        load("a").await,
        200,
        "a table created under the name is covered"
    );
    assert_eq!(commit("a").await, 200, "with the grant's action");

    // Renamed, the table takes the name's grants along.
    c.post(
        &format!("/v1/{ORG}/tables/rename"),
        rename_body("gg", "a", "t1r"),
    )
    .await
    .assert_ok(204);
    assert_eq!(load("t1r").await, 200, "renameTable carries the grants");
    assert_eq!(commit("t1r").await, 200);

    // The first table, restored under its old name, is covered by that name's grants: none
    // now, since the rename carried them away.
    c.management(
        Method::POST,
        &format!("/orgs/{ORG}/namespaces/gg/deleted-tables/{first}/restore"),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(200);
    assert_eq!(
        load("a").await,
        403,
        "a dropped table brought back no grant"
    );
    // Dropped again and restored under `d`, it is covered by `d`'s grant.
    assert_eq!(c.delete(&table_path("gg", "a")).await.status.as_u16(), 204);
    c.management(
        Method::POST,
        &format!("/orgs/{ORG}/namespaces/gg/deleted-tables/{first}/restore"),
        ADMIN_TOKEN,
        Some(json!({"name": "d"})),
    )
    .await
    .assert_ok(200);
    assert_eq!(load("d").await, 200);
    assert_eq!(commit("d").await, 403, "read, as granted on `d`");

    // A rename onto a name with grants merges them: write beats read.
    c.post(
        &format!("/v1/{ORG}/tables/rename"),
        rename_body("gg", "t1r", "b"),
    )
    .await
    .assert_ok(204);
    let grants = c.catalog.access.list_grants(&admin, "gg").await.unwrap();
    assert_eq!(
        grants,
        vec![
            floe::catalog::GrantView {
                principal: principal.id.clone(),
                action: Action::Write,
                table: Some("b".into()),
            },
            floe::catalog::GrantView {
                principal: principal.id.clone(),
                action: Action::Read,
                table: Some("d".into()),
            },
        ],
        "carried to the new name and merged"
    );
    assert_eq!(commit("b").await, 200);
    c.create_table("gg", "a").await;
    assert_eq!(load("a").await, 403, "nothing stays behind on the old name");
}

/// Dropped-table rows written while a drop moved the name's table grants onto the dropped
/// table: the purge's run puts them back on their name (merged with what the name holds now),
/// and so does a restore of such a row.
#[tokio::test]
async fn grants_an_earlier_version_kept_on_dropped_tables_go_back_to_their_names() {
    use floe::model::{DroppedTableRow, GrantRow};

    let c = TestCatalog::frozen().await;
    c.create_namespace("kept").await;
    let admin = admin_context(&c).await;
    let (principal, token) = principal_without_role(&c, "keeper").await;
    let load = |table: &'static str| {
        let (c, token) = (&c, token.clone());
        async move {
            c.request(Method::GET, &table_path("kept", table), Some(&token), None)
                .await
                .status
                .as_u16()
        }
    };
    // Two dropped tables whose rows hold the grants of their names, as rows of the earlier
    // version did (the grants themselves gone from the names).
    let mut uuids = Vec::new();
    for table in ["swept", "restored"] {
        let uuid = c.create_table("kept", table).await["metadata"]["table-uuid"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            c.delete(&table_path("kept", table)).await.status.as_u16(),
            204
        );
        let ns = c
            .catalog
            .core
            .lookups
            .live_namespace(&admin, "kept")
            .await
            .unwrap();
        let key = keys::dropped_table(&ns.row.id, &uuid);
        let mut row = rows::get::<DroppedTableRow>(&*c.store, &key)
            .await
            .unwrap()
            .unwrap();
        assert!(row.row.grants.is_empty(), "a drop keeps no grant now");
        row.row.grants = vec![GrantRow {
            principal: principal.id.clone(),
            namespace_id: ns.row.id.clone(),
            table: Some(table.into()),
            action: Action::Write,
        }];
        c.store
            .write(vec![rows::put_indexed(
                key,
                &row.row,
                Condition::VersionIs(row.version),
                Some(keys::dropped_table_due(
                    row.row.dropped_ms,
                    &ns.row.id,
                    &uuid,
                )),
            )])
            .await
            .unwrap();
        uuids.push(uuid);
    }
    c.create_table("kept", "swept").await;
    c.catalog.forget_cached();
    assert_eq!(load("swept").await, 403, "the grant is still on the row");

    // A restore gives its row's grants back to the name they came from.
    c.management(
        Method::POST,
        &format!(
            "/orgs/{ORG}/namespaces/kept/deleted-tables/{}/restore",
            uuids[1]
        ),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(200);
    assert_eq!(load("restored").await, 200);

    // The purge's run gives back the rest, though the table is far from due.
    let run = c.catalog.purge_due(c.now_ms()).await.unwrap();
    assert_eq!(run.tables.grants_returned, 1, "{run:?}");
    assert!(run.tables.purged.is_empty());
    c.catalog.forget_cached();
    assert_eq!(load("swept").await, 200, "the name has its grant back");
    let grants: Vec<(Value, String)> = listed_grants(&c, "kept")
        .await
        .into_iter()
        .map(|(table, _, action)| (table, action))
        .collect();
    assert_eq!(
        grants,
        vec![
            (json!("restored"), "write".into()),
            (json!("swept"), "write".into()),
        ]
    );
    // Once given back, nothing is left to give.
    let again = c.catalog.purge_due(c.now_ms()).await.unwrap();
    assert_eq!(again.tables.grants_returned, 0);
}

/// The management API's grant listing of namespace `ns`, as (table, principal, action), sorted.
async fn listed_grants(c: &TestCatalog, ns: &str) -> Vec<(Value, String, String)> {
    let answer = c
        .management(
            Method::GET,
            &format!("/orgs/{ORG}/namespaces/{ns}/grants"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    let mut grants: Vec<_> = answer.assert_ok(200)["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["table"].clone(),
                g["principal"].as_str().unwrap().to_owned(),
                g["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    grants.sort_by_key(|g| format!("{g:?}"));
    grants
}

fn rename_body(ns: &str, from: &str, to: &str) -> Value {
    json!({
        "source": {"namespace": [ns], "name": from},
        "destination": {"namespace": [ns], "name": to}
    })
}

/// `#` in a table name is not a key separator: renaming `t` carries the grants on `t` only,
/// never those on `t#x`.
#[tokio::test]
async fn renaming_a_table_carries_only_its_own_grants() {
    let c = TestCatalog::new().await;
    c.create_namespace("hk").await;
    c.create_table("hk", "t").await;
    let (_, other_token) = principal_without_role(&c, "other-table").await;
    let (_, own_token) = principal_without_role(&c, "own-table").await;
    let grants = format!("/orgs/{ORG}/namespaces/hk/grants");
    for (principal, table) in [
        ("api_client:other-table", "t#x"),
        ("api_client:own-table", "t"),
    ] {
        c.management(
            Method::PUT,
            &grants,
            ADMIN_TOKEN,
            Some(json!({"principal": principal, "action": "read", "table": table})),
        )
        .await
        .assert_ok(204);
    }
    c.post(
        &format!("/v1/{ORG}/tables/rename"),
        rename_body("hk", "t", "u"),
    )
    .await
    .assert_ok(204);
    let load = |token: String| {
        let c = &c;
        async move {
            c.request(Method::GET, &table_path("hk", "u"), Some(&token), None)
                .await
                .status
                .as_u16()
        }
    };
    assert_eq!(load(own_token).await, 200, "the grant on t moved to u");
    assert_eq!(
        load(other_token).await,
        403,
        "the grant on t#x stays on t#x"
    );
    assert_eq!(
        listed_grants(&c, "hk").await,
        vec![
            (json!("t#x"), "api_client:other-table".into(), "read".into()),
            (json!("u"), "api_client:own-table".into(), "read".into()),
        ]
    );
}

/// A manager of table `a` administers grants on `a` only: no principal it names reaches the
/// listing row of a grant on another table (here `a#user:x`, whose old key was
/// `GRANT#a#user:x#user:y`, the key of `a`'s grant to `user:x#user:y`).
#[tokio::test]
async fn a_table_manager_cannot_touch_another_tables_grant_rows() {
    let c = TestCatalog::new().await;
    c.create_namespace("hm").await;
    c.create_table("hm", "a").await;
    let (_, manager) = principal_without_role(&c, "a-manager").await;
    let grants = format!("/orgs/{ORG}/namespaces/hm/grants");
    for (principal, table, action) in [
        ("api_client:a-manager", "a", "manage"),
        ("user:y", "a#user:x", "read"),
    ] {
        c.management(
            Method::PUT,
            &grants,
            ADMIN_TOKEN,
            Some(json!({"principal": principal, "action": action, "table": table})),
        )
        .await
        .assert_ok(204);
    }
    let theirs = (json!("a#user:x"), "user:y".to_owned(), "read".to_owned());
    c.management(
        Method::DELETE,
        &format!("{grants}?principal=user:x%23user:y&table=a"),
        &manager,
        None,
    )
    .await
    .assert_ok(204);
    assert!(
        listed_grants(&c, "hm").await.contains(&theirs),
        "a delete on table a left the grant on a#user:x listed"
    );
    c.management(
        Method::PUT,
        &grants,
        &manager,
        Some(json!({"principal": "user:x#user:y", "action": "manage", "table": "a"})),
    )
    .await
    .assert_ok(204);
    assert_eq!(
        listed_grants(&c, "hm").await,
        vec![
            (json!("a"), "api_client:a-manager".into(), "manage".into()),
            (json!("a"), "user:x#user:y".into(), "manage".into()),
            theirs,
        ]
    );
    c.management(
        Method::PUT,
        &grants,
        &manager,
        Some(json!({"principal": "user:y", "action": "read", "table": "a#user:x"})),
    )
    .await
    .assert_error(403, "ForbiddenException");
}

/// Grant rows written before table names and principals were escaped in keys (at
/// `GRANT#<table>#<principal>` verbatim) are listed, resolved, carried by a rename, replaced
/// and removed like rows written since, and each is only ever taken for the grant its body names.
#[tokio::test]
async fn grant_rows_written_before_key_escaping_stay_usable() {
    let c = TestCatalog::new().await;
    c.create_namespace("hl").await;
    c.create_table("hl", "t").await;
    c.create_table("hl", "v#w").await;
    let ns = rows::get::<floe::model::NamespaceRow>(&*c.store, &keys::namespace(ORG, "hl"))
        .await
        .unwrap()
        .unwrap()
        .row;
    let (holder, token) = principal_without_role(&c, "legacy").await;
    // Rows as they were written: the two first share the prefix `GRANT#t#user:a#`.
    let old = [
        ("t#user:a", "user:b", Action::Read),
        ("t", "user:a#user:c", Action::Write),
        ("v#w", holder.id.as_str(), Action::Read),
    ];
    for (table, principal, action) in old {
        let row = floe::model::GrantRow {
            principal: principal.into(),
            namespace_id: ns.id.clone(),
            table: Some(table.into()),
            action,
        };
        let listing = floe::store::Key::new(
            format!("NS#{}", ns.id),
            format!("GRANT#{table}#{principal}"),
        );
        let resolving = floe::store::Key::new(
            format!("GRANTEE#{ORG}#{principal}"),
            format!("GRANT#{}#{table}", ns.id),
        );
        c.store
            .write(vec![
                rows::put(listing, &row, Condition::Always),
                rows::put(resolving, &row, Condition::Always),
            ])
            .await
            .unwrap();
    }
    let shown = floe::catalog::display_principal(&holder.id);
    assert_eq!(
        listed_grants(&c, "hl").await,
        vec![
            (json!("t"), "user:a#user:c".into(), "write".into()),
            (json!("t#user:a"), "user:b".into(), "read".into()),
            (json!("v#w"), shown.clone(), "read".into()),
        ]
    );
    let load = |table: &'static str| {
        let (c, token) = (&c, token.clone());
        async move {
            c.request(Method::GET, &table_path("hl", table), Some(&token), None)
                .await
                .status
                .as_u16()
        }
    };
    assert_eq!(load("v%23w").await, 200, "an old row grants access");

    // A rename carries old rows by what they say, not by where their key starts.
    for (from, to) in [("t", "t2"), ("v#w", "v2")] {
        c.post(
            &format!("/v1/{ORG}/tables/rename"),
            rename_body("hl", from, to),
        )
        .await
        .assert_ok(204);
    }
    assert_eq!(
        load("v2").await,
        200,
        "the old row's grant moved with its table"
    );
    assert_eq!(
        listed_grants(&c, "hl").await,
        vec![
            (json!("t#user:a"), "user:b".into(), "read".into()),
            (json!("t2"), "user:a#user:c".into(), "write".into()),
            (json!("v2"), shown.clone(), "read".into()),
        ]
    );

    // Replacing an old row leaves one row; removing it leaves none.
    let grants = format!("/orgs/{ORG}/namespaces/hl/grants");
    c.management(
        Method::PUT,
        &grants,
        ADMIN_TOKEN,
        Some(json!({"principal": "user:b", "action": "write", "table": "t#user:a"})),
    )
    .await
    .assert_ok(204);
    assert_eq!(
        listed_grants(&c, "hl").await[0],
        (json!("t#user:a"), "user:b".into(), "write".into())
    );
    assert_eq!(listed_grants(&c, "hl").await.len(), 3);
    c.management(
        Method::DELETE,
        &format!("{grants}?principal=user:b&table=t%23user:a"),
        ADMIN_TOKEN,
        None,
    )
    .await
    .assert_ok(204);
    assert_eq!(
        listed_grants(&c, "hl").await,
        vec![
            (json!("t2"), "user:a#user:c".into(), "write".into()),
            (json!("v2"), shown, "read".into()),
        ]
    );
}
/// Revoking a grant or lowering a role takes effect at once on the instance that made the
/// change, and within the auth cache TTL elsewhere (emulated by forgetting what is cached).
#[tokio::test]
async fn revocation_and_downgrade_take_effect() {
    let c = TestCatalog::new().await;
    c.create_namespace("rv").await;
    c.create_table("rv", "t").await;
    let admin = admin_context(&c).await;
    let (principal, token) = principal_without_role(&c, "revoked").await;
    c.catalog
        .access
        .put_grant(&admin, "rv", &principal.id, None, Action::Write)
        .await
        .unwrap();
    let commit = |token: String| {
        let c = &c;
        async move {
            let body = json!({"requirements": [], "updates": [
                {"action": "set-properties", "updates": {"k": "v"}}
            ]});
            c.post_as(&token, &table_path("rv", "t"), body)
                .await
                .status
                .as_u16()
        }
    };
    assert_eq!(commit(token.clone()).await, 200);
    c.catalog
        .access
        .delete_grant(&admin, "rv", &principal.id, None)
        .await
        .unwrap();
    assert_eq!(commit(token.clone()).await, 403);

    assert_eq!(commit(c.write_token.clone()).await, 200);
    let writer = c
        .catalog
        .sessions
        .authenticate(&c.write_token)
        .await
        .unwrap();
    bootstrap::put_member(&*c.store, ORG, &writer.id, floe::model::OrgRole::Read)
        .await
        .unwrap();
    c.catalog.forget_cached();
    assert_eq!(commit(c.write_token.clone()).await, 403);
}

/// A public namespace is listed to everyone while it lives; dropped, it vanishes.
#[tokio::test]
async fn soft_deleted_public_namespaces_are_not_discoverable() {
    let c = TestCatalog::new().await;
    c.create_namespace("shown").await;
    let admin = admin_context(&c).await;
    c.catalog
        .access
        .set_visibility(&admin, "shown", Visibility::AuthenticatedPublic)
        .await
        .unwrap();
    let list = || {
        let c = &c;
        async move {
            c.request(
                Method::GET,
                &format!("/v1/{ORG}/namespaces"),
                Some(&c.outsider_token),
                None,
            )
            .await
        }
    };
    let listed = list().await;
    assert_eq!(listed.assert_ok(200)["namespaces"], json!([["shown"]]));
    assert_eq!(c.delete(&ns_path("shown")).await.status.as_u16(), 204);
    c.catalog.forget_cached();
    list().await.assert_error(403, "ForbiddenException");
    let load = c
        .request(
            Method::GET,
            &ns_path("shown"),
            Some(&c.outsider_token),
            None,
        )
        .await;
    load.assert_error(403, "ForbiddenException");
}

/// Static keys never back a public namespace, neither its own bucket nor a table override.
#[tokio::test]
async fn public_namespaces_need_role_vended_storage() {
    let c = TestCatalog::new().await;
    c.add_bucket(
        "keys",
        floe::model::BucketAuth::Hmac {
            access_key_id: "AKIA".into(),
            secret_access_key: "secret".into(),
        },
    )
    .await;
    let admin = admin_context(&c).await;
    c.post(
        &format!("/v1/{ORG}/namespaces"),
        json!({"namespace": ["keyed"], "properties": {"arraylake.bucket": "keys"}}),
    )
    .await
    .assert_ok(200);
    let refused = c
        .catalog
        .access
        .set_visibility(&admin, "keyed", Visibility::AuthenticatedPublic)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, floe::error::CatalogError::BadRequest(_)),
        "{refused:?}"
    );
    c.create_namespace("mixed").await;
    let mut body = create_table_body("over");
    body["properties"] = json!({"arraylake.bucket": "keys"});
    c.post(&format!("/v1/{ORG}/namespaces/mixed/tables"), body)
        .await
        .assert_ok(200);
    let refused = c
        .catalog
        .access
        .set_visibility(&admin, "mixed", Visibility::AuthenticatedPublic)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("table 'over'"), "{refused}");
}

/// The storage rule of public namespaces holds for tables created after the namespace went
/// public: a table cannot bring static keys in through its own bucket override.
#[tokio::test]
async fn a_public_namespace_refuses_a_table_override_on_static_keys() {
    let c = TestCatalog::new().await;
    c.add_bucket(
        "keys",
        floe::model::BucketAuth::Hmac {
            access_key_id: "AKIA".into(),
            secret_access_key: "secret".into(),
        },
    )
    .await;
    let admin = admin_context(&c).await;
    c.create_namespace("open").await;
    c.catalog
        .access
        .set_visibility(&admin, "open", Visibility::AuthenticatedPublic)
        .await
        .unwrap();
    let mut body = create_table_body("over");
    body["properties"] = json!({"arraylake.bucket": "keys"});
    let refused = c
        .post_as(
            &c.write_token,
            &format!("/v1/{ORG}/namespaces/open/tables"),
            body.clone(),
        )
        .await;
    refused.assert_error(400, "BadRequestException");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("public namespace"), "{message}");
    assert!(message.contains("'keys'"), "{message}");
    // Nothing was made: no table, and the name is free.
    c.get(&table_path("open", "over"))
        .await
        .assert_error(404, "NoSuchTableException");
    c.create_table("open", "over").await;
    // A private namespace still takes the override.
    c.create_namespace("closed").await;
    c.post(&format!("/v1/{ORG}/namespaces/closed/tables"), body)
        .await
        .assert_ok(200);
}

/// Every denial is one structured audit event naming principal, org, resource and action,
/// and never the token.
#[tokio::test(flavor = "current_thread")]
async fn every_denial_is_one_audit_event_without_secrets() {
    let (captured, _guard) = CapturedLog::start();
    let c = TestCatalog::new().await;
    // "au" is this test's alone: the log is the whole test process's.
    c.create_namespace("au").await;
    c.create_table("au", "t").await;
    let body = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "v"}}
    ]});
    c.post_as(&c.read_token, &table_path("au", "t"), body)
        .await
        .assert_error(403, "ForbiddenException");
    let reader = c
        .catalog
        .sessions
        .authenticate(&c.read_token)
        .await
        .unwrap();
    let text = captured.text();
    assert!(!text.contains(&c.read_token), "a token reached the log");
    let denials: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            event["fields"]["audit"] == "denied" && event["fields"]["namespace"] == "au"
        })
        .collect();
    assert_eq!(denials.len(), 1, "{denials:?}");
    let fields = &denials[0]["fields"];
    assert_eq!(fields["principal"], reader.id);
    assert_eq!(fields["org"], ORG);
    assert_eq!(fields["namespace"], "au");
    assert_eq!(fields["table"], "t");
    assert_eq!(fields["action"], "Write");
}

/// Vended credentials follow the caller's action on the table: read-only unless it may write.
/// On DynamoDB + S3 + STS the policy STS received is checked; locally nothing is vended.
#[tokio::test]
async fn vended_credentials_follow_the_callers_action_on_the_table() {
    let c = TestCatalog::new().await;
    c.create_namespace("vd").await;
    c.create_table("vd", "t").await;
    let admin = admin_context(&c).await;
    for (name, action, writes) in [
        ("vend-reader", Action::Read, false),
        ("vend-writer", Action::Write, true),
    ] {
        let (principal, token) = principal_without_role(&c, name).await;
        c.catalog
            .access
            .put_grant(&admin, "vd", &principal.id, Some("t"), action)
            .await
            .unwrap();
        let answer = c
            .request(
                Method::GET,
                &format!("{}/credentials", table_path("vd", "t")),
                Some(&token),
                None,
            )
            .await;
        let vended = answer.assert_ok(200)["storage-credentials"]
            .as_array()
            .unwrap()
            .clone();
        match c.backend {
            Backend::Local => assert!(vended.is_empty()),
            Backend::Aws => {
                assert_eq!(vended.len(), 1);
                let location = c.get(&table_path("vd", "t")).await.body["metadata"]["location"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                let sent = moto::assumed_role_policies(&floe::vending::policy::session_name(
                    &principal.id,
                    &location,
                ))
                .await;
                assert_eq!(sent.len(), 1, "{name}: {sent:?}");
                assert_eq!(
                    sent[0].contains("s3:PutObject"),
                    writes,
                    "{name}: {}",
                    sent[0]
                );
            }
            Backend::Gcs => {
                assert_eq!(vended.len(), 1);
                // Tokens are `downscoped-<n>`, from the n-th exchange.
                let token = vended[0]["config"]["gcs.oauth2.token"].as_str().unwrap();
                let n: usize = token.strip_prefix("downscoped-").unwrap().parse().unwrap();
                let google = c.google.as_ref().unwrap();
                let boundary =
                    floe_tests::gcs::FakeGoogle::boundary(&google.exchanges()[n - 1]).to_string();
                assert_eq!(
                    boundary.contains("roles/storage.objectAdmin"),
                    writes,
                    "{name}: {boundary}"
                );
            }
        }
    }
}
