//! Every file in events/ goes through lambda_http's own decoding and response encoding into the
//! function that owns its route (an endpoint group's, the management function, or the web
//! view's), on a real embedded catalog provisioned as the events expect.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use floe::catalog::Catalog;
use floe::http::management::MANAGEMENT_ROUTES;
use floe::iam::Function;
use floe::model::OrgRole;
use floe::routes::{Group, ROUTES};
use floe::store::Condition;
use floe::store::rows::{self, ApiClientRow, MemberRow, SessionRow, keys};
use lambda_http::request::LambdaRequest;
use lambda_http::tower::Service;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};

fn now_ms() -> u64 {
    floe::clock::Clock::now_ms(&floe::clock::SystemClock)
}

const TOKEN: &str = "ema_events_example_token";
/// The web view session the `ui-*` events with a cookie carry (events/generate.py).
const SESSION: &str = "eventsExampleSession00000000000000000000000";

fn events_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../events")
}

/// Org `demo` with `events_ns` (holding `events_table` and the view `events_view`), an empty `events_empty` and a dropped
/// `events_dropped`; for the
/// management events also the team `events_team`, the api client `events_client`, and the
/// token's principal a service administrator; for the web view's events a session of the token's
/// principal.
async fn provisioned(dir: &Path) -> Arc<Catalog> {
    let (catalog, _) = floe::deployment::open(dir, "demo", Some(TOKEN))
        .await
        .unwrap();
    catalog
        .access
        .make_service_admin(&floe::bootstrap::dev_admin("demo"))
        .await
        .unwrap();
    let store = &*catalog.core.store;
    floe::bootstrap::put_member(store, "demo", "api-client:events_client", OrgRole::Read)
        .await
        .unwrap();
    let client = ApiClientRow {
        id: "events_client".into(),
        name: "events-client".into(),
        email: None,
        role: Some(OrgRole::Read),
        token_hash: floe::auth::hash_token("ema_events_client_token"),
        created_ms: 0,
    };
    let listed = rows::put(
        keys::api_client("demo", "events_client"),
        &client,
        Condition::NotExists,
    );
    store.write(vec![listed]).await.unwrap();
    let anonymous = floe::model::BucketRow {
        nickname: "events_bucket".into(),
        platform: floe::model::Platform::S3,
        root: "s3://events-bucket".into(),
        auth: floe::model::BucketAuth::Anonymous,
        endpoint: None,
        region: None,
        path_style: false,
        static_keys_to_writers: false,
    };
    floe::bootstrap::put_bucket(store, "demo", &anonymous)
        .await
        .unwrap();
    let router = floe::http::full_router(catalog.clone());
    for (path, body) in [
        (
            "/iceberg/v1/demo/namespaces",
            json!({"namespace": ["events_ns"], "properties": {"stale": "x"}}),
        ),
        (
            "/iceberg/v1/demo/namespaces",
            json!({"namespace": ["events_empty"]}),
        ),
        (
            "/iceberg/v1/demo/namespaces/events_ns/tables",
            json!({"name": "events_table", "schema": {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": true}]}}),
        ),
        (
            "/iceberg/v1/demo/namespaces/events_ns/views",
            json!({"name": "events_view",
                "schema": {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": true}]},
                "view-version": {"version-id": 1, "schema-id": 0, "timestamp-ms": 1_764_547_200_000_u64,
                    "summary": {}, "default-namespace": ["events_ns"],
                    "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}]}}),
        ),
        (
            "/iceberg/v1/demo/namespaces",
            json!({"namespace": ["events_dropped"]}),
        ),
        ("/api/v1/orgs/demo/teams", json!({"name": "events_team"})),
    ] {
        let request = http::Request::post(path)
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(axum::body::Body::from(body.to_string()))
            .unwrap();
        let response = tower::ServiceExt::oneshot(router.clone(), request)
            .await
            .unwrap();
        assert!(response.status().is_success(), "provisioning {path}");
    }
    let drop = http::Request::delete("/iceberg/v1/demo/namespaces/events_dropped")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let dropped = tower::ServiceExt::oneshot(router, drop).await.unwrap();
    assert_eq!(dropped.status(), 204, "provisioning events_dropped");
    let now_ms = floe::clock::Clock::now_ms(&floe::clock::SystemClock);
    let expires_at = now_ms / 1000 + 3600;
    let session = SessionRow {
        principal: catalog.sessions.authenticate(TOKEN).await.unwrap(),
        token_hash: Some(floe::auth::hash_token(TOKEN)),
        created_ms: now_ms,
        expires_at,
    };
    let key = keys::session(&floe::auth::hash_token(SESSION));
    let put = rows::put_expiring(key, &session, Condition::NotExists, expires_at);
    store.write(vec![put]).await.unwrap();
    catalog
}

/// The functions behind API Gateway: one per endpoint group, the management function and the
/// web view's.
fn http_functions() -> Vec<Function> {
    let mut functions: Vec<Function> = Group::ALL.into_iter().map(Function::serving).collect();
    functions.push(Function::Management);
    functions.push(Function::Ui);
    functions
}

/// What a function serves, as its binary mounts it.
fn router_of(catalog: Arc<Catalog>, function: Function) -> axum::Router {
    match Group::ALL
        .into_iter()
        .find(|g| Function::serving(*g) == function)
    {
        Some(group) => {
            let handlers = floe::http::GroupHandlers::of(group);
            floe_lambda::fit_lambda_limits(floe::http::group_router(
                as_deployed(catalog, function),
                handlers,
            ))
        }
        None if function == Function::Management => {
            floe_lambda::fit_lambda_limits(floe::http::management_router(catalog))
        }
        None if function == Function::Ui => floe_lambda::fit_lambda_limits(
            floe::ui::standalone_router(catalog, floe::ui::UiConfig::default()),
        ),
        None => panic!("{function:?} serves no HTTP routes"),
    }
}

/// The catalog a function is deployed with, on the same store: the config function has no
/// bucket storage (`Storage::NONE` in its main), so its events must answer without any.
fn as_deployed(catalog: Arc<Catalog>, function: Function) -> Arc<Catalog> {
    if function != Function::serving(Group::Config) {
        return catalog;
    }
    let (objects, vendor) = floe::deployment::NoBucketStorage::adapters();
    let core = floe::core::Builder::new(catalog.core.store.clone(), objects, vendor).build();
    Arc::new(Catalog::new(core))
}

/// The function an event's route key belongs to, and the route's method.
fn route_of(event: &Value) -> (Function, &'static str) {
    let key = event["routeKey"].as_str().unwrap();
    let iceberg = ROUTES
        .iter()
        .find(|r| format!("{} /iceberg{}", r.method, r.path) == key)
        .map(|r| (Function::serving(r.group), r.method));
    let management = || {
        MANAGEMENT_ROUTES
            .iter()
            .find(|r| r.endpoint() == key)
            .map(|r| (Function::Management, r.method))
    };
    let ui = || {
        floe::ui::GATEWAY_ROUTES
            .iter()
            .find(|(method, path)| format!("{method} {path}") == key)
            .map(|(method, _)| (Function::Ui, *method))
    };
    iceberg
        .or_else(management)
        .or_else(ui)
        .unwrap_or_else(|| panic!("no route for {key}"))
}

/// Decodes an event the way the Lambda runtime does and answers it with `function`.
async fn invoke(catalog: Arc<Catalog>, function: Function, raw: &str) -> Value {
    let request: LambdaRequest = serde_json::from_str(raw).expect("lambda_http decodes the event");
    let mut adapter = lambda_http::Adapter::from(router_of(catalog, function));
    let response = adapter
        .call(LambdaEvent::new(request, Context::default()))
        .await
        .unwrap();
    serde_json::to_value(response).unwrap()
}

fn expected_status(file: &str) -> u16 {
    match file {
        "namespace-exists.json"
        | "table-exists.json"
        | "drop-namespace.json"
        | "drop-table.json"
        | "rename-table.json"
        | "commit-transaction.json"
        | "view-exists.json"
        | "drop-view.json"
        | "rename-view.json"
        | "report-metrics.json" => 204,
        "create-org.json"
        | "create-api-client.json"
        | "create-team.json"
        | "create-bucket.json" => 201,
        "delete-api-client.json"
        | "delete-bucket.json"
        | "delete-org-namespace.json"
        | "set-default-bucket.json"
        | "put-member.json"
        | "put-team-member.json"
        | "delete-team-member.json"
        | "put-grant.json"
        | "delete-grant.json" => 204,
        // The events' table is on a local warehouse, which engines reach directly: there is
        // nothing to sign (what the route signs: tests/http/signing.rs).
        "sign-request.json" => 400,
        // The file it names lies in no storage of the org (what registers: tests/http/register.rs).
        "register-table.json" | "register-view.json" => 400,
        // No table of that uuid was dropped in the events' org (what restores and purges:
        // tests/http/recovery.rs).
        "restore-dropped-table.json" | "purge-dropped-table.json" => 404,
        // Plan ids and plan tasks are the catalog's signed tokens: made-up ones name nothing
        // (what plans and fetches: tests/http/planning.rs).
        "fetch-planning-result.json" | "cancel-planning.json" | "fetch-scan-tasks.json" => 404,
        // Signing in and out answer with a redirect to the web view's first page.
        "ui-sign-in.json" | "ui-sign-out.json" => 303,
        // A page without a session is the sign-in page, as a 401.
        "ui-org-signed-out.json" => 401,
        _ => 200,
    }
}

#[tokio::test]
async fn every_event_is_answered_by_its_own_function() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(events_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && !p.ends_with("purge-schedule.json")
                && !p.ends_with("maintenance-schedule.json")
                && !p.ends_with("maintenance-queue.json")
                && !p.ends_with("events-stream.json")
        })
        .collect();
    files.sort();
    let (ui, api): (Vec<&PathBuf>, Vec<&PathBuf>) = files.iter().partition(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("ui-"))
    });
    // Each route has its event: a route added without one is named here.
    let api_keys: std::collections::BTreeSet<String> = api
        .iter()
        .map(|p| {
            let event: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            event["routeKey"].as_str().unwrap().to_owned()
        })
        .collect();
    let routes: Vec<String> = ROUTES
        .iter()
        .map(|r| format!("{} /iceberg{}", r.method, r.path))
        .chain(MANAGEMENT_ROUTES.iter().map(|r| r.endpoint()))
        .collect();
    let missing: Vec<&String> = routes.iter().filter(|r| !api_keys.contains(*r)).collect();
    assert!(
        missing.is_empty(),
        "routes without an event in events/ (add them to events/generate.py and run it): {missing:?}"
    );
    assert_eq!(api.len(), routes.len(), "one event per route");
    // The web view's routes are API Gateway's greedy ones: each has an event at least.
    let ui_keys: std::collections::BTreeSet<String> = ui
        .iter()
        .map(|p| {
            let event: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            event["routeKey"].as_str().unwrap().to_owned()
        })
        .collect();
    let gateway: std::collections::BTreeSet<String> = floe::ui::GATEWAY_ROUTES
        .iter()
        .map(|(method, path)| format!("{method} {path}"))
        .collect();
    assert_eq!(ui_keys, gateway, "the web view's events cover its routes");
    for path in files {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let raw = std::fs::read_to_string(&path).unwrap();
        let event: Value = serde_json::from_str(&raw).unwrap();
        let (function, method) = route_of(&event);
        let dir = tempfile::tempdir().unwrap();
        let catalog = provisioned(dir.path()).await;
        let answer = invoke(catalog.clone(), function, &raw).await;
        assert_eq!(
            answer["statusCode"],
            expected_status(&name),
            "{name}: {answer}"
        );
        let body = answer["body"].as_str().unwrap_or_default();
        let content_type = answer["headers"]["content-type"]
            .as_str()
            .unwrap_or_default();
        match method {
            "HEAD" => assert!(body.is_empty(), "{name}"),
            _ if expected_status(&name) == 204 => assert!(body.is_empty(), "{name}"),
            _ if expected_status(&name) == 303 => {
                assert_eq!(answer["headers"]["location"], "/ui", "{name}: {answer}");
            }
            _ if name == "ui-stylesheet.json" => {
                assert!(content_type.starts_with("text/css"), "{name}: {answer}");
            }
            _ if function == Function::Ui => {
                assert!(content_type.starts_with("text/html"), "{name}: {answer}");
                assert!(body.starts_with("<!doctype html>"), "{name}: {body}");
            }
            _ => {
                let json: Value =
                    serde_json::from_str(body).unwrap_or_else(|_| panic!("{name}: {body}"));
                assert!(json.is_object(), "{name}");
            }
        }
        // Every other function answers the same event with a 404 (a spec one from the API's
        // functions, a page from the web view's), not a crash.
        for other in http_functions().into_iter().filter(|f| *f != function) {
            let answer = invoke(catalog.clone(), other, &raw).await;
            assert_eq!(answer["statusCode"], 404, "{name} on {other:?}: {answer}");
            if method == "HEAD" {
                continue;
            }
            if other == Function::Ui {
                let page = answer["body"].as_str().unwrap_or_default();
                assert!(page.contains("There is no such page."), "{name}: {page}");
            } else {
                let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
                assert_eq!(body["error"]["code"], 404);
                assert_eq!(body["error"]["type"], "NotFoundException");
            }
        }
    }
}

#[tokio::test]
async fn responses_carry_the_spec_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    let read = |f: &str| std::fs::read_to_string(events_dir().join(f)).unwrap();
    let config = invoke(catalog.clone(), Function::Config, &read("get-config.json")).await;
    let body: Value = serde_json::from_str(config["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["overrides"]["prefix"], "demo");
    assert_eq!(
        body["endpoints"].as_array().unwrap().len(),
        floe::routes::ROUTES.len()
    );
    let load = invoke(catalog.clone(), Function::Tables, &read("load-table.json")).await;
    let body: Value = serde_json::from_str(load["body"].as_str().unwrap()).unwrap();
    assert!(
        body["metadata-location"]
            .as_str()
            .unwrap()
            .contains("/metadata/00000-")
    );
    let properties = invoke(
        catalog.clone(),
        Function::Namespaces,
        &read("update-namespace-properties.json"),
    )
    .await;
    let body: Value = serde_json::from_str(properties["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"updated": ["owner"], "removed": ["stale"], "missing": []})
    );
}

#[tokio::test]
async fn management_events_land_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    let read = |f: &str| std::fs::read_to_string(events_dir().join(f)).unwrap();
    let body = |answer: &Value| -> Value {
        serde_json::from_str(answer["body"].as_str().unwrap()).unwrap()
    };
    let management =
        async |file: &str| invoke(catalog.clone(), Function::Management, &read(file)).await;

    let me = body(&management("get-me.json").await);
    assert_eq!(me["principal"], "api_client:demo-admin");
    assert_eq!(me["service_admin"], true);
    assert_eq!(me["org_roles"], json!({"demo": "admin"}));

    // The JSON body of the PUT reaches the grant; the listing shows it.
    assert_eq!(management("put-grant.json").await["statusCode"], 204);
    let grants = body(&management("list-grants.json").await);
    assert_eq!(
        grants,
        json!({"grants": [{"principal": "team:events_team", "action": "read", "table": null}]})
    );

    // A principal percent-encoded in the raw path (`user%3Aevents-user`) is decoded once.
    assert_eq!(management("put-member.json").await["statusCode"], 204);
    let member = rows::get::<MemberRow>(
        &*catalog.core.store,
        &keys::member("demo", "user:events-user"),
    )
    .await
    .unwrap()
    .expect("the member row of user:events-user");
    assert_eq!(member.row.role, OrgRole::Read);

    // The query string names the grant to remove.
    assert_eq!(management("delete-grant.json").await["statusCode"], 204);
    let grants = body(&management("list-grants.json").await);
    assert_eq!(grants, json!({"grants": []}));
}

/// The web view behind API Gateway: a form post arrives base64-encoded and signs in; the session
/// cookie leaves in the payload's `cookies` (API Gateway sets each as a `Set-Cookie`) and comes
/// back in them; pages are HTML with the web view's headers; signing out ends the session.
#[tokio::test]
async fn ui_events_sign_in_browse_and_sign_out() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    let read = |f: &str| std::fs::read_to_string(events_dir().join(f)).unwrap();
    let ui = async |event: &str| invoke(catalog.clone(), Function::Ui, event).await;

    let index = ui(&read("ui-index.json")).await;
    assert_eq!(index["statusCode"], 200, "{index}");
    assert!(index["body"].as_str().unwrap().contains("name=\"token\""));
    assert_eq!(index["headers"]["cache-control"], "no-store");
    assert!(
        index["headers"]["content-security-policy"]
            .as_str()
            .unwrap()
            .starts_with("default-src 'none'")
    );

    // Sign-in: a new session, its cookie Secure (the request came over https).
    let signed_in = ui(&read("ui-sign-in.json")).await;
    assert_eq!(signed_in["statusCode"], 303, "{signed_in}");
    let cookies = signed_in["cookies"]
        .as_array()
        .expect("cookies in the payload");
    assert_eq!(cookies.len(), 1, "{signed_in}");
    let cookie = cookies[0].as_str().unwrap();
    assert!(cookie.starts_with("floe_session="), "{cookie}");
    assert!(
        cookie.contains("; HttpOnly; SameSite=Strict; Secure"),
        "{cookie}"
    );
    let session = cookie
        .trim_start_matches("floe_session=")
        .split(';')
        .next()
        .unwrap();
    assert_ne!(session, SESSION);
    assert!(!signed_in.to_string().contains(TOKEN));

    // The new session opens the table page; so does the provisioned one.
    let mut table: Value = serde_json::from_str(&read("ui-table.json")).unwrap();
    for id in [session, SESSION] {
        table["cookies"] = json!([format!("floe_session={id}")]);
        let page = ui(&table.to_string()).await;
        assert_eq!(page["statusCode"], 200, "{page}");
        let body = page["body"].as_str().unwrap();
        assert!(body.contains("events_table"), "{body}");
        assert!(body.contains("Sign out"), "{body}");
    }

    // Without a cookie, or with an unknown session: the sign-in page, as a 401.
    let signed_out = ui(&read("ui-org-signed-out.json")).await;
    assert_eq!(signed_out["statusCode"], 401, "{signed_out}");
    assert!(
        signed_out["body"]
            .as_str()
            .unwrap()
            .contains("name=\"token\"")
    );

    // Sign-out clears the cookie and ends the session: its pages are the sign-in page again.
    let out = ui(&read("ui-sign-out.json")).await;
    assert_eq!(out["statusCode"], 303, "{out}");
    let cleared = out["cookies"][0].as_str().unwrap();
    assert!(cleared.starts_with("floe_session=;"), "{cleared}");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    let org = ui(&read("ui-org.json")).await;
    assert_eq!(org["statusCode"], 401, "{org}");
    table["cookies"] = json!([format!("floe_session={session}")]);
    assert_eq!(ui(&table.to_string()).await["statusCode"], 200);
}

#[tokio::test]
async fn the_schedule_event_runs_the_purge() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    let raw = std::fs::read_to_string(events_dir().join("purge-schedule.json")).unwrap();
    let event: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(event["detail-type"], "Scheduled Event");
    let report = floe_lambda::purge(&catalog, LambdaEvent::new(event, Context::default()))
        .await
        .unwrap();
    // Nothing has been deleted for seven days yet.
    assert!(!report.did_anything(), "{report:?}");
}

#[tokio::test]
async fn the_schedule_event_claims_the_tables_due() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    let raw = std::fs::read_to_string(events_dir().join("maintenance-schedule.json")).unwrap();
    // As the runtime decodes the payload for the scheduler's handler (it reads nothing of it).
    let event: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(event["detail-type"], "Scheduled Event");
    // The provisioned table was never maintained: the sweep indexes it and the claim takes it.
    let claimed = catalog.schedule_due(now_ms(), 100).await.unwrap();
    assert!(!claimed.is_empty(), "{claimed:?}");
}

#[tokio::test]
async fn the_queue_event_runs_the_worker_on_its_table() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    let now = now_ms();
    let claimed = catalog.schedule_due(now, 100).await.unwrap();
    let due = claimed
        .first()
        .expect("the provisioned table is due")
        .clone();
    let raw = std::fs::read_to_string(events_dir().join("maintenance-queue.json")).unwrap();
    let mut event: Value = serde_json::from_str(&raw).unwrap();
    // The sample's body is a message as the scheduler writes it, for another deployment.
    let sample: floe::catalog::tables::maintenance::DueTable =
        serde_json::from_str(event["Records"][0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(sample.org, "demo");
    event["Records"][0]["body"] = json!(serde_json::to_string(&due).unwrap());
    // As the runtime decodes the payload for the worker's handler.
    let batch: aws_lambda_events::event::sqs::SqsEvent = serde_json::from_value(event).unwrap();
    let answer = floe_queue::work(&catalog, batch.clone(), now).await;
    assert!(answer.batch_item_failures.is_empty(), "{answer:?}");
    // Delivered again (SQS delivers at least once): nothing more happens.
    let again = floe_queue::work(&catalog, batch, now).await;
    assert!(again.batch_item_failures.is_empty());
    assert!(catalog.schedule_due(now, 100).await.unwrap().is_empty());
    // A message that names no table goes back to the queue (and on to its dead letters).
    let mut bad: aws_lambda_events::event::sqs::SqsEvent = serde_json::from_str(&raw).unwrap();
    bad.records[0].body = Some("not a table".into());
    let refused = floe_queue::work(&catalog, bad, now).await;
    assert_eq!(refused.batch_item_failures.len(), 1);
}

#[tokio::test]
async fn the_stream_event_yields_the_change_event_and_nothing_else() {
    let raw = std::fs::read_to_string(events_dir().join("events-stream.json")).unwrap();
    // As the runtime decodes the payload for the function's handler.
    let batch: aws_lambda_events::event::dynamodb::Event = serde_json::from_str(&raw).unwrap();
    assert_eq!(batch.records.len(), 2);
    let events: Vec<_> = batch
        .records
        .iter()
        .map(|r| floe_events::change_event(r).unwrap())
        .collect();
    assert!(events[0].is_none(), "a table row is no event");
    let event = events[1].as_ref().expect("the outbox item is an event");
    assert_eq!(event.kind, floe::events::Kind::TableCreated);
    assert_eq!(event.data.sequence, 1);
    assert_eq!(event.data.table.as_deref(), Some("events_table"));
}

/// A store that panics: the function must still answer, with a spec 500.
struct PanickingStore;

#[async_trait::async_trait]
impl floe::store::MetaStore for PanickingStore {
    async fn get(
        &self,
        _: &floe::store::Key,
    ) -> Result<Option<floe::store::Item>, floe::store::StoreError> {
        panic!("store exploded")
    }
    async fn query(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: usize,
    ) -> Result<Vec<floe::store::Item>, floe::store::StoreError> {
        panic!("store exploded")
    }
    async fn write(&self, _: Vec<floe::store::Write>) -> Result<(), floe::store::StoreError> {
        panic!("store exploded")
    }
    async fn query_index(
        &self,
        _: &str,
        _: &str,
        _: usize,
    ) -> Result<Vec<floe::store::Key>, floe::store::StoreError> {
        panic!("store exploded")
    }
}

#[tokio::test]
async fn a_panic_becomes_a_spec_500_not_a_runtime_crash() {
    let catalog = Arc::new(Catalog::new(
        floe::core::Builder::new(
            Arc::new(PanickingStore),
            Arc::new(floe::objects::local::LocalObjectStores),
            Arc::new(floe::vending::NoVending),
        )
        .build(),
    ));
    let raw = std::fs::read_to_string(events_dir().join("get-config.json")).unwrap();
    let answer = invoke(catalog, Function::Config, &raw).await;
    assert_eq!(answer["statusCode"], 500);
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"error": {"message": "Internal server error", "type": "InternalServerError", "code": 500}})
    );
}

/// A compressed answer leaves the function as API Gateway needs it: the body base64-encoded,
/// flagged so, with its Content-Encoding; decoded, it is the plain answer.
#[tokio::test]
async fn a_compressed_answer_is_a_valid_gateway_payload() {
    let raw = std::fs::read_to_string(events_dir().join("load-table.json")).unwrap();
    let mut event: Value = serde_json::from_str(&raw).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    // A table whose answer is worth compressing (over 1 KiB).
    let raw = std::fs::read_to_string(events_dir().join("commit-table.json")).unwrap();
    let mut commit: Value = serde_json::from_str(&raw).unwrap();
    let update = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"comment": "a table about events ".repeat(100)}}
    ]});
    commit["body"] = Value::from(update.to_string());
    let committed = invoke(catalog.clone(), Function::Commits, &commit.to_string()).await;
    assert_eq!(committed["statusCode"], 200, "{committed}");
    let plain = invoke(catalog.clone(), Function::Tables, &event.to_string()).await;
    assert_eq!(plain["isBase64Encoded"], false);
    let plain_body: Value = serde_json::from_str(plain["body"].as_str().unwrap()).unwrap();

    event["headers"]["accept-encoding"] = Value::from("gzip, deflate, br");
    let answer = invoke(catalog, Function::Tables, &event.to_string()).await;
    assert_eq!(answer["statusCode"], 200, "{answer}");
    assert_eq!(answer["isBase64Encoded"], true, "{answer}");
    assert_eq!(answer["headers"]["content-encoding"], "gzip", "{answer}");
    use base64::Engine as _;
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(answer["body"].as_str().unwrap())
        .unwrap();
    let mut json = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(compressed.as_slice()),
        &mut json,
    )
    .unwrap();
    assert!(compressed.len() < json.len());
    let body: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(body["metadata-location"], plain_body["metadata-location"]);
    assert_eq!(body["metadata"], plain_body["metadata"]);
}

/// The config, credentials and signing functions answer a kilobyte or two at most and are built
/// without the compression layer (and so without zstd and gzip), which the groups whose answers
/// carry metadata documents and listings keep: config's answer, over the size `floe serve`
/// compresses, leaves the config function as it is, whatever the client accepts.
#[tokio::test]
async fn the_config_function_answers_uncompressed() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    let raw = std::fs::read_to_string(events_dir().join("get-config.json")).unwrap();
    let mut event: Value = serde_json::from_str(&raw).unwrap();
    event["headers"]["accept-encoding"] = Value::from("gzip, zstd");
    let answer = invoke(catalog, Function::Config, &event.to_string()).await;
    assert_eq!(answer["statusCode"], 200, "{answer}");
    assert_eq!(answer["isBase64Encoded"], false, "{answer}");
    assert!(
        answer["headers"].get("content-encoding").is_none(),
        "{answer}"
    );
    let body = answer["body"].as_str().unwrap();
    assert!(
        body.len() >= usize::from(floe::http::MIN_COMPRESSED_BYTES),
        "an answer `floe serve` would compress ({} bytes)",
        body.len()
    );
    let _: Value = serde_json::from_str(body).unwrap();
}

/// Every route that takes an `Idempotency-Key` honours it in the function that serves it: a
/// malformed key is refused before anything runs. (Functions whose groups have no such route are
/// built without the idempotency layer.)
#[tokio::test]
async fn keyed_routes_honour_keys_in_their_own_functions() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = provisioned(dir.path()).await;
    let mut keyed = 0;
    for route in ROUTES
        .iter()
        .filter(|r| floe::http::idempotency::takes_key(r.operation))
    {
        let key = format!("{} /iceberg{}", route.method, route.path);
        let event = std::fs::read_dir(events_dir())
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .filter_map(|raw| serde_json::from_str::<Value>(&raw).ok())
            .find(|event| event["routeKey"] == key.as_str());
        let mut event = event.unwrap_or_else(|| panic!("no event for {key}"));
        event["headers"]["idempotency-key"] = Value::from("not-a-key");
        let answer = invoke(
            catalog.clone(),
            Function::serving(route.group),
            &event.to_string(),
        )
        .await;
        assert_eq!(answer["statusCode"], 400, "{key}: {answer}");
        let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Invalid Idempotency-Key"),
            "{key}: {body}"
        );
        keyed += 1;
    }
    assert_eq!(keyed, 14, "every keyed route was sent a key");
}
