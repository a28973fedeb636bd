//! Every file in events/ goes through lambda_http's own decoding and response encoding into the
//! function that owns its route, on a real embedded catalog provisioned as the events expect.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use floe::catalog::Catalog;
use floe::routes::{Group, ROUTES, Route};
use lambda_http::request::LambdaRequest;
use lambda_http::tower::Service;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};

const TOKEN: &str = "ema_events_example_token";

fn events_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../events")
}

/// Org `demo` with `events_ns` (holding `events_table`) and an empty `events_empty`.
async fn provisioned(dir: &Path) -> Arc<Catalog> {
    let (catalog, _) = floe::deployment::open(dir, "demo", Some(TOKEN))
        .await
        .unwrap();
    let router = floe::http::router(catalog.clone(), &Group::ALL);
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
    ] {
        let request = http::Request::post(path)
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(axum::body::Body::from(body.to_string()))
            .unwrap();
        let response = tower::ServiceExt::oneshot(router.clone(), request)
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "provisioning {path}");
    }
    catalog
}

fn route_of(event: &Value) -> &'static Route {
    let key = event["routeKey"].as_str().unwrap();
    ROUTES
        .iter()
        .find(|r| format!("{} /iceberg{}", r.method, r.path) == key)
        .unwrap_or_else(|| panic!("no route for {key}"))
}

/// Decodes an event the way the Lambda runtime does and answers it with the functions of `group`.
async fn invoke(catalog: Arc<Catalog>, group: Group, raw: &str) -> Value {
    let request: LambdaRequest = serde_json::from_str(raw).expect("lambda_http decodes the event");
    let mut adapter = lambda_http::Adapter::from(floe::http::router(catalog, &[group]));
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
        | "report-metrics.json" => 204,
        _ => 200,
    }
}

#[tokio::test]
async fn every_event_is_answered_by_its_own_function() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(events_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json") && !p.ends_with("purge-schedule.json")
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), ROUTES.len(), "one event per route");
    for path in files {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let raw = std::fs::read_to_string(&path).unwrap();
        let event: Value = serde_json::from_str(&raw).unwrap();
        let route = route_of(&event);
        let dir = tempfile::tempdir().unwrap();
        let catalog = provisioned(dir.path()).await;
        let answer = invoke(catalog.clone(), route.group, &raw).await;
        assert_eq!(
            answer["statusCode"],
            expected_status(&name),
            "{name}: {answer}"
        );
        let body = answer["body"].as_str().unwrap_or_default();
        match route.method {
            "HEAD" => assert!(body.is_empty(), "{name}"),
            _ if expected_status(&name) == 204 => assert!(body.is_empty(), "{name}"),
            _ => {
                let json: Value =
                    serde_json::from_str(body).unwrap_or_else(|_| panic!("{name}: {body}"));
                assert!(json.is_object(), "{name}");
            }
        }
        // Every other function answers the same event with a spec 404, not a crash.
        for other in Group::ALL.into_iter().filter(|g| *g != route.group) {
            let answer = invoke(catalog.clone(), other, &raw).await;
            assert_eq!(answer["statusCode"], 404, "{name} on {other:?}: {answer}");
            if route.method != "HEAD" {
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
    let config = invoke(catalog.clone(), Group::Config, &read("get-config.json")).await;
    let body: Value = serde_json::from_str(config["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["overrides"]["prefix"], "demo");
    assert_eq!(body["endpoints"].as_array().unwrap().len(), 17);
    let load = invoke(catalog.clone(), Group::Tables, &read("load-table.json")).await;
    let body: Value = serde_json::from_str(load["body"].as_str().unwrap()).unwrap();
    assert!(
        body["metadata-location"]
            .as_str()
            .unwrap()
            .contains("/metadata/00000-")
    );
    let properties = invoke(
        catalog,
        Group::Namespaces,
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
    assert!(report.purged.is_empty());
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
        Arc::new(PanickingStore),
        Arc::new(floe::objects::local::LocalObjectStores),
        Arc::new(floe::vending::NoVending),
        Arc::new(floe::clock::SystemClock),
    ));
    let raw = std::fs::read_to_string(events_dir().join("get-config.json")).unwrap();
    let answer = invoke(catalog, Group::Config, &raw).await;
    assert_eq!(answer["statusCode"], 500);
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"error": {"message": "Internal server error", "type": "InternalServerError", "code": 500}})
    );
}
