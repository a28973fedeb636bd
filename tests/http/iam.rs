//! The least-privilege declaration (floe::iam) against what the code does: every route of every
//! endpoint group, every management route, every page of the web view, and a purge run, through adapters that record each
//! use of the store, of table storage and of the vendor, attributed to the function that serves
//! the request. Each function must use exactly what it declares: a use it does not declare would
//! be an action its role lacks on AWS; a declared use no path exercises would be a grant to
//! remove. The test also checks that it called every route, so a new route is checked too.
//! Every request carries an Idempotency-Key, as Java clients send on mutations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use floe::catalog::purge::RECOVERY_PERIOD;
use floe::catalog::{Catalog, issue_service_admin};
use floe::iam::{Capability, Function, ObjectUse, SecretUse, StoreUse};
use floe::model::{BucketAuth, BucketRow, Principal};
use floe::objects::local::{LocalObjectStore, file_url};
use floe::objects::{ObjectError, ObjectMeta, ObjectStore, ObjectStores, ObjectStoresError};
use floe::secrets::{Sealed, SecretError, SecretSealer};
use floe::store::observed::{ObservedStore, Observer};
use floe::vending::{AccessLevel, CredentialVendor, Vended};
use floe_tests::*;
use http::Method;
use serde_json::{Value, json};

/// Uses seen per function, while a function is set.
#[derive(Default)]
struct Recorder {
    current: Mutex<Option<Function>>,
    seen: Mutex<BTreeMap<Function, BTreeSet<Capability>>>,
}

impl Recorder {
    fn note(&self, capability: Capability) {
        if let Some(function) = *self.current.lock().unwrap() {
            self.seen
                .lock()
                .unwrap()
                .entry(function)
                .or_default()
                .insert(capability);
        }
    }

    fn set(&self, function: Option<Function>) {
        *self.current.lock().unwrap() = function;
    }
}

struct RecordingObjects {
    inner: Arc<dyn ObjectStores>,
    recorder: Arc<Recorder>,
    stand_ins: Arc<tempfile::TempDir>,
}

#[async_trait]
impl ObjectStores for RecordingObjects {
    async fn for_bucket(
        &self,
        bucket: &BucketRow,
    ) -> Result<Arc<dyn ObjectStore>, ObjectStoresError> {
        // A bucket this test server has no client for (S3 on the local backend) is stood in
        // for by a directory, so requests on it go on and record their uses as on AWS.
        let inner: Arc<dyn ObjectStore> = match self.inner.for_bucket(bucket).await {
            Ok(inner) => inner,
            Err(_) => Arc::new(StandIn::new(
                &bucket.root,
                &self.stand_ins.path().join(&bucket.nickname),
            )),
        };
        Ok(Arc::new(RecordingObjectStore {
            inner,
            recorder: self.recorder.clone(),
        }))
    }
}

/// A directory standing in for a bucket: locations under the bucket's root map to files.
struct StandIn {
    root: String,
    dir: String,
    files: LocalObjectStore,
}

impl StandIn {
    fn new(root: &str, dir: &std::path::Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        Self {
            root: root.trim_end_matches('/').to_owned(),
            dir: file_url(dir),
            files: LocalObjectStore::new(dir.to_path_buf()),
        }
    }

    fn local(&self, location: &str) -> String {
        location.replacen(&self.root, &self.dir, 1)
    }
}

#[async_trait]
impl ObjectStore for StandIn {
    async fn get(&self, location: &str) -> Result<Bytes, ObjectError> {
        self.files.get(&self.local(location)).await
    }

    async fn put_if_absent(&self, location: &str, bytes: Bytes) -> Result<(), ObjectError> {
        self.files.put_if_absent(&self.local(location), bytes).await
    }

    async fn list_detailed(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<ObjectMeta>, ObjectError> {
        let found = self.files.list_detailed(&self.local(prefix), limit).await?;
        Ok(found
            .into_iter()
            .map(|f| ObjectMeta {
                location: f.location.replacen(&self.dir, &self.root, 1),
                ..f
            })
            .collect())
    }

    async fn delete(&self, locations: &[String]) -> Result<(), ObjectError> {
        let local: Vec<String> = locations.iter().map(|l| self.local(l)).collect();
        self.files.delete(&local).await
    }
}

struct RecordingObjectStore {
    inner: Arc<dyn ObjectStore>,
    recorder: Arc<Recorder>,
}

#[async_trait]
impl ObjectStore for RecordingObjectStore {
    async fn get(&self, location: &str) -> Result<Bytes, ObjectError> {
        self.recorder.note(Capability::Objects(ObjectUse::Get));
        self.inner.get(location).await
    }

    async fn put_if_absent(&self, location: &str, bytes: Bytes) -> Result<(), ObjectError> {
        self.recorder.note(Capability::Objects(ObjectUse::Put));
        self.inner.put_if_absent(location, bytes).await
    }

    async fn list_detailed(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<ObjectMeta>, ObjectError> {
        self.recorder.note(Capability::Objects(ObjectUse::List));
        self.inner.list_detailed(prefix, limit).await
    }

    async fn delete(&self, locations: &[String]) -> Result<(), ObjectError> {
        self.recorder.note(Capability::Objects(ObjectUse::Delete));
        self.inner.delete(locations).await
    }
}

struct RecordingVendor {
    inner: Arc<dyn CredentialVendor>,
    recorder: Arc<Recorder>,
}

#[async_trait]
impl CredentialVendor for RecordingVendor {
    async fn vend(
        &self,
        bucket: &BucketRow,
        table_location: &str,
        access: AccessLevel,
        principal: &Principal,
    ) -> Result<Vended, floe::vending::VendError> {
        self.recorder.note(Capability::Vend);
        self.inner
            .vend(bucket, table_location, access, principal)
            .await
    }

    fn storage_config(&self, bucket: &BucketRow) -> std::collections::BTreeMap<String, String> {
        self.inner.storage_config(bucket)
    }
}

struct RecordingSealer {
    inner: Arc<dyn SecretSealer>,
    recorder: Arc<Recorder>,
}

#[async_trait]
impl SecretSealer for RecordingSealer {
    async fn seal(&self, plaintext: &[u8]) -> Result<Sealed, SecretError> {
        self.recorder.note(Capability::Secrets(SecretUse::Seal));
        self.inner.seal(plaintext).await
    }

    async fn open(&self, sealed: &Sealed) -> Result<Vec<u8>, SecretError> {
        self.recorder.note(Capability::Secrets(SecretUse::Open));
        self.inner.open(sealed).await
    }
}

/// One catalog instance per function on the same (recording) adapters, as deployed: each
/// function has its own caches, so what one function wrote another reads from storage.
struct Deployment {
    instances: BTreeMap<Function, Arc<Catalog>>,
    recorder: Arc<Recorder>,
    /// The routes called so far, as `METHOD template`.
    called: Mutex<BTreeSet<String>>,
}

impl Deployment {
    fn new(c: &TestCatalog, recorder: Arc<Recorder>) -> Self {
        let shared = &c.catalog;
        let instances = Function::ALL
            .into_iter()
            .filter(|f| f.runs_the_catalog())
            .map(|function| {
                let core = &shared.core;
                let catalog = Catalog::new(
                    floe::core::Builder::new(
                        core.store.clone(),
                        core.objects.clone(),
                        core.vendor.clone(),
                    )
                    .clock(core.clock.clone())
                    .sealer(core.sealer.clone().expect("test catalogs seal"))
                    .build(),
                );
                (function, Arc::new(catalog))
            })
            .collect();
        Self {
            instances,
            recorder,
            called: Mutex::default(),
        }
    }
}

/// One request, served by (and attributed to) the function of its route.
async fn call(d: &Deployment, method: Method, path: &str, body: Option<Value>) -> Answer {
    let route_path = path.split('?').next().unwrap();
    let route = floe::routes::find(method.as_str(), route_path)
        .unwrap_or_else(|| panic!("{method} {path} is no route"));
    d.called.lock().unwrap().insert(route.endpoint());
    let function = Function::serving(route.group);
    let router = floe::http::group_router(
        d.instances[&function].clone(),
        floe::http::GroupHandlers::of(route.group),
    );
    let uri = format!("/iceberg{path}");
    send(d, function, router, method, &uri, ADMIN_TOKEN, body).await
}

/// One management request (`path` relative to `/api/v1`), served by the management function.
async fn call_management(
    d: &Deployment,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Answer {
    let route_path = path.split('?').next().unwrap();
    let route = floe::http::management::find(method.as_str(), route_path)
        .unwrap_or_else(|| panic!("{method} {path} is no management route"));
    d.called.lock().unwrap().insert(route.endpoint());
    let function = Function::Management;
    let router = floe::http::management_router(d.instances[&function].clone());
    let uri = format!("/api/v1{path}");
    send(d, function, router, method, &uri, token, body).await
}

/// One web view request, served by the web view's function: answers status and headers (pages
/// are HTML; their content is tests/http/ui.rs's business).
async fn call_ui(
    d: &Deployment,
    method: Method,
    path: &str,
    cookie: Option<&str>,
    form: Option<&str>,
) -> (http::StatusCode, http::HeaderMap) {
    let function = Function::Ui;
    let router = floe::ui::router(d.instances[&function].clone(), Default::default());
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1:8181");
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    if form.is_some() {
        request = request.header("content-type", "application/x-www-form-urlencoded");
    }
    let request = request
        .body(axum::body::Body::from(form.unwrap_or_default().to_owned()))
        .unwrap();
    d.recorder.set(Some(function));
    let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
    d.recorder.set(None);
    (response.status(), response.headers().clone())
}

async fn send(
    d: &Deployment,
    function: Function,
    router: axum::Router,
    method: Method,
    uri: &str,
    token: &str,
    body: Option<Value>,
) -> Answer {
    d.recorder.set(Some(function));
    let mut request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("x-iceberg-access-delegation", "vended-credentials")
        // Mutations with a key also claim and finalise it: uses of their functions too.
        .header("idempotency-key", uuid::Uuid::now_v7().to_string());
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(axum::body::Body::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        ))
        .unwrap();
    let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
    d.recorder.set(None);
    let status = response.status();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    Answer { status, body }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn every_function_uses_exactly_what_it_declares() {
    let recorder = Arc::new(Recorder::default());
    let (r1, r2, r3, r4) = (
        recorder.clone(),
        recorder.clone(),
        recorder.clone(),
        recorder.clone(),
    );
    let stand_ins = Arc::new(tempfile::tempdir().unwrap());
    // Moved only to age the snapshots that maintenance expires.
    let clock = Arc::new(floe::clock::ManualClock::new(now_ms()));
    let configured = clock.clone();
    let c = TestCatalog::custom(
        Wrap {
            store: Box::new(move |inner| {
                let observer: Observer = Arc::new(move |uses: &[StoreUse]| {
                    for store_use in uses {
                        r1.note(Capability::Store(*store_use));
                    }
                });
                Arc::new(ObservedStore::new(inner, observer))
            }),
            objects: Box::new(move |inner| {
                Arc::new(RecordingObjects {
                    inner,
                    recorder: r2,
                    stand_ins,
                })
            }),
            vendor: Box::new(move |inner| {
                Arc::new(RecordingVendor {
                    inner,
                    recorder: r3,
                })
            }),
            sealer: Box::new(move |inner| {
                Arc::new(RecordingSealer {
                    inner,
                    recorder: r4,
                })
            }),
        },
        move |b| b.clock(configured),
    )
    .await;
    c.add_bucket("own", BucketAuth::Server).await;
    // The namespace the routes run in lives on a bucket with static keys: every function that
    // uses it opens the sealed secret.
    // Opted in to hand its keys to writers, so that the vended-credentials requests below
    // (by an admin) are answered as engines that cannot sign get them.
    let vault = c.sealed_hmac("AKIAFLOEIAM", "iam-secret").await;
    c.add_bucket_configured("vault", vault, |b| b.static_keys_to_writers = true)
        .await;
    let d = &Deployment::new(&c, recorder.clone());
    let namespaces = format!("/v1/{ORG}/namespaces");
    let tables = format!("{namespaces}/ns/tables");

    // Config.
    call(d, Method::GET, &format!("/v1/config?warehouse={ORG}"), None)
        .await
        .assert_ok(200);

    // Namespaces: create, a create whose location is refused (its marker is removed), list,
    // load, exists, properties, drop, and a create over the dropped, still empty one.
    call(
        d,
        Method::POST,
        &namespaces,
        Some(json!({"namespace": ["ns"], "properties": {"arraylake.bucket": "vault"}})),
    )
    .await
    .assert_ok(200);
    let outside = json!({"namespace": ["bad"], "properties": {"location": "s3://elsewhere/x"}});
    call(d, Method::POST, &namespaces, Some(outside))
        .await
        .assert_error(400, "BadRequestException");
    call(d, Method::GET, &namespaces, None).await.assert_ok(200);
    call(d, Method::GET, &format!("{namespaces}/ns"), None)
        .await
        .assert_ok(200);
    call(d, Method::HEAD, &format!("{namespaces}/ns"), None).await;
    let properties = json!({"updates": {"owner": "etl"}});
    call(
        d,
        Method::POST,
        &format!("{namespaces}/ns/properties"),
        Some(properties),
    )
    .await
    .assert_ok(200);
    call(
        d,
        Method::POST,
        &namespaces,
        Some(json!({"namespace": ["gone"]})),
    )
    .await
    .assert_ok(200);
    call(d, Method::DELETE, &format!("{namespaces}/gone"), None).await;
    call(
        d,
        Method::POST,
        &namespaces,
        Some(json!({"namespace": ["gone"]})),
    )
    .await
    .assert_ok(200);

    // Management: orgs as a service administrator, the rest as the org's admin, around `ns`.
    let operator = issue_service_admin(&c.catalog, "operator").await.unwrap().1;
    let neworg = Some(json!({"name": "neworg"}));
    call_management(d, Method::POST, "/orgs", &operator, neworg)
        .await
        .assert_ok(201);
    let off = Some(json!({"iceberg_enabled": false}));
    call_management(d, Method::PATCH, "/orgs/neworg", &operator, off)
        .await
        .assert_ok(200);
    let org = format!("/orgs/{ORG}");
    let management = async |method: Method, path: String, body: Option<Value>| {
        call_management(d, method, &path, ADMIN_TOKEN, body).await
    };
    let client = json!({"name": "etl", "role": "write"});
    let client = management(Method::POST, format!("{org}/api-clients"), Some(client)).await;
    let client_id = client.assert_ok(201)["id"].as_str().unwrap().to_owned();
    management(Method::GET, format!("{org}/api-clients"), None)
        .await
        .assert_ok(200);
    let member = format!("{org}/members/user:ada");
    management(Method::PUT, member.clone(), Some(json!({"role": "read"})))
        .await
        .assert_ok(204);
    management(
        Method::POST,
        format!("{org}/teams"),
        Some(json!({"name": "data"})),
    )
    .await
    .assert_ok(201);
    let team_member = format!("{org}/teams/data/members/user:ada");
    management(Method::PUT, team_member.clone(), None)
        .await
        .assert_ok(204);
    management(Method::GET, format!("{org}/teams/data"), None)
        .await
        .assert_ok(200);
    let settings = format!("{org}/namespaces/ns");
    management(Method::GET, settings.clone(), None)
        .await
        .assert_ok(200);
    // Public and back: the public index entry put, then deleted (on the default bucket, which
    // vends through a role as public namespaces need).
    for (visibility, description) in [("AUTHENTICATED_PUBLIC", "orders"), ("PRIVATE", "")] {
        let patch = json!({"visibility": visibility, "description": description});
        management(Method::PATCH, format!("{org}/namespaces/gone"), Some(patch))
            .await
            .assert_ok(200);
    }
    let grants = format!("{org}/namespaces/ns/grants");
    let grant = json!({"principal": "team:data", "action": "read"});
    management(Method::PUT, grants.clone(), Some(grant))
        .await
        .assert_ok(204);
    management(Method::GET, grants.clone(), None)
        .await
        .assert_ok(200);
    management(
        Method::DELETE,
        format!("{grants}?principal=team:data"),
        None,
    )
    .await
    .assert_ok(204);
    management(Method::DELETE, team_member, None)
        .await
        .assert_ok(204);
    management(Method::PUT, member, Some(json!({"role": "none"})))
        .await
        .assert_ok(204);
    management(
        Method::DELETE,
        format!("{org}/api-clients/{client_id}"),
        None,
    )
    .await
    .assert_ok(204);
    management(Method::GET, "/me".into(), None)
        .await
        .assert_ok(200);
    // Bucket configurations: a role-backed one and one with static keys (sealed) are checked
    // by listing under their root, an anonymous one is not; they are listed, read, removed.
    let reachable = format!("iam-{}", uuid::Uuid::new_v4().simple());
    if c.backend == Backend::Aws {
        moto::create_bucket(&reachable).await;
    }
    let role_bucket = json!({"nickname": "lake", "platform": "s3", "bucket": reachable,
        "auth": {"type": "customer_managed_role", "role_arn": VENDING_ROLE}});
    management(Method::POST, format!("{org}/buckets"), Some(role_bucket))
        .await
        .assert_ok(201);
    let keys_bucket = json!({"nickname": "keys", "platform": "s3", "bucket": reachable,
        "auth": {"type": "hmac", "access_key_id": "AKIAFLOEIAM", "secret_access_key": "k"}});
    management(Method::POST, format!("{org}/buckets"), Some(keys_bucket))
        .await
        .assert_ok(201);
    let anonymous = json!({"nickname": "open-data", "platform": "s3", "bucket": "open-data",
        "auth": {"type": "anonymous"}});
    management(Method::POST, format!("{org}/buckets"), Some(anonymous))
        .await
        .assert_ok(201);
    management(Method::GET, format!("{org}/buckets"), None)
        .await
        .assert_ok(200);
    management(Method::GET, format!("{org}/buckets/open-data"), None)
        .await
        .assert_ok(200);
    management(Method::DELETE, format!("{org}/buckets/open-data"), None)
        .await
        .assert_ok(204);
    for nickname in ["vault", "default"] {
        management(
            Method::PUT,
            format!("{org}/default-bucket"),
            Some(json!({ "nickname": nickname })),
        )
        .await
        .assert_ok(204);
    }

    // Lifecycle: dropped by an admin, listed as recoverable, restored; dropped again through
    // the catalog, then made due for the purge now.
    let gone = format!("{org}/namespaces/gone");
    management(Method::DELETE, gone.clone(), None)
        .await
        .assert_ok(204);
    let recoverable = management(Method::GET, format!("{org}/namespaces?deleted=true"), None).await;
    assert_eq!(recoverable.assert_ok(200)["namespaces"][0]["name"], "gone");
    management(Method::POST, format!("{gone}/restore"), None)
        .await
        .assert_ok(200);
    call(d, Method::DELETE, &format!("{namespaces}/gone"), None).await;
    management(Method::DELETE, format!("{gone}?immediate=true"), None)
        .await
        .assert_ok(204);

    // Tables: create (with credentials), a create on its own bucket whose location is refused
    // (its marker is removed), a staged create, load, exists, list, views, metrics, rename.
    call(d, Method::POST, &tables, Some(create_table_body("t")))
        .await
        .assert_ok(200);
    let mut own = create_table_body("own");
    own["properties"] = json!({"arraylake.bucket": "own"});
    own["location"] = json!("s3://elsewhere/own");
    call(d, Method::POST, &tables, Some(own))
        .await
        .assert_error(400, "BadRequestException");
    let mut staged = create_table_body("staged");
    staged["stage-create"] = json!(true);
    let staged = call(d, Method::POST, &tables, Some(staged))
        .await
        .assert_ok(200)["metadata"]
        .clone();
    let loaded = call(d, Method::GET, &format!("{tables}/t"), None).await;
    assert!(!loaded.assert_ok(200)["config"].is_null());
    call(d, Method::HEAD, &format!("{tables}/t"), None).await;
    call(d, Method::GET, &tables, None).await.assert_ok(200);
    call(d, Method::GET, &format!("{namespaces}/ns/views"), None)
        .await
        .assert_ok(200);
    let report = json!({"report-type": "scan-report"});
    call(
        d,
        Method::POST,
        &format!("{tables}/t/metrics"),
        Some(report),
    )
    .await;
    let rename = json!({
        "source": {"namespace": ["ns"], "name": "t"},
        "destination": {"namespace": ["ns"], "name": "t2"}
    });
    call(
        d,
        Method::POST,
        &format!("/v1/{ORG}/tables/rename"),
        Some(rename),
    )
    .await;

    // Commits: an append, and the create commit of the staged table.
    let current = call(d, Method::GET, &format!("{tables}/t2"), None).await;
    let append = append_body(&current.assert_ok(200)["metadata"], 1);
    call(d, Method::POST, &format!("{tables}/t2"), Some(append))
        .await
        .assert_ok(200);
    let create = json!({
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": staged["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": staged["schemas"][0]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "set-location", "location": staged["location"]}
        ]
    });
    call(d, Method::POST, &format!("{tables}/staged"), Some(create))
        .await
        .assert_ok(200);
    // A transaction over both: one changed table, one held to what was read.
    let transaction = json!({"table-changes": [
        {"identifier": {"namespace": ["ns"], "name": "t2"}, "requirements": [],
         "updates": [{"action": "set-properties", "updates": {"in": "transaction"}}]},
        {"identifier": {"namespace": ["ns"], "name": "staged"}, "requirements": [], "updates": []}
    ]});
    call(
        d,
        Method::POST,
        &format!("/v1/{ORG}/transactions/commit"),
        Some(transaction),
    )
    .await
    .assert_ok(204);

    // Tables loads what the commits function wrote, unregisters the staged table and registers
    // its file again.
    call(d, Method::GET, &format!("{tables}/t2"), None)
        .await
        .assert_ok(200);
    let unregistered = call(
        d,
        Method::POST,
        &format!("{tables}/staged/unregister"),
        None,
    )
    .await;
    let file = unregistered.assert_ok(200)["metadata-location"].clone();
    let register = json!({"name": "staged", "metadata-location": file});
    call(
        d,
        Method::POST,
        &format!("{namespaces}/ns/register"),
        Some(register),
    )
    .await
    .assert_ok(200);

    // Maintenance of two tables, each with an hour-old snapshot to expire and metadata files
    // that left the log: one through the management API (dry, then for real), the other by
    // the scheduled run. The snapshot kept lists no manifests (an empty manifest list).
    for name in ["kept", "swept"] {
        call(d, Method::POST, &tables, Some(create_table_body(name)))
            .await
            .assert_ok(200);
        let properties = json!({"requirements": [], "updates": [{"action": "set-properties", "updates": {
            "history.expire.max-snapshot-age-ms": "60000",
            "write.metadata.previous-versions-max": "1",
            "write.metadata.delete-after-commit.enabled": "true"}}]});
        call(
            d,
            Method::POST,
            &format!("{tables}/{name}"),
            Some(properties),
        )
        .await
        .assert_ok(200);
        for id in [1, 2] {
            let current = call(d, Method::GET, &format!("{tables}/{name}"), None).await;
            let metadata = current.assert_ok(200)["metadata"].clone();
            let append = append_body(&metadata, id);
            let list = append["updates"][0]["snapshot"]["manifest-list"]
                .as_str()
                .unwrap()
                .to_owned();
            // Written as the engine would, with the namespace bucket's keys; not recorded.
            recorder.set(None);
            put_empty_manifest_list(&c, &list, id).await;
            call(d, Method::POST, &format!("{tables}/{name}"), Some(append))
                .await
                .assert_ok(200);
        }
    }
    // A plan of a table with snapshots reads its manifest list.
    call(
        d,
        Method::POST,
        &format!("{tables}/swept/plan"),
        Some(json!({})),
    )
    .await
    .assert_ok(200);
    clock.advance_ms(2 * 3_600_000);
    let kept = format!("{org}/namespaces/ns/tables/kept");
    management(Method::GET, format!("{kept}/maintenance"), None)
        .await
        .assert_ok(200);
    let planned = management(Method::POST, format!("{kept}/maintain?dry_run=true"), None).await;
    assert_eq!(
        planned.assert_ok(200)["snapshots-expired"],
        1,
        "{}",
        planned.body
    );
    let done = management(Method::POST, format!("{kept}/maintain"), None).await;
    assert_eq!(done.assert_ok(200)["snapshots-expired"], 1);
    assert!(
        done.body["files-deleted"].as_u64().unwrap() > 0,
        "{}",
        done.body
    );
    // The scheduler claims what is due (the sweep first), the worker maintains it. The
    // scheduler's messages go onto the queue outside the catalog (floe-queue), which the
    // deployment test checks against `QueueDueTables`.
    recorder.set(Some(Function::Maintenance));
    let now = floe::clock::Clock::now_ms(&*clock);
    let claimed = d.instances[&Function::Maintenance]
        .schedule_due(now, 100)
        .await
        .unwrap();
    recorder.set(None);
    assert!(
        !claimed.iter().any(|t| t.table == "kept"),
        "maintained already today: {claimed:?}"
    );
    let swept = claimed
        .iter()
        .find(|t| t.namespace == "ns" && t.table == "swept")
        .expect("the table never maintained is due");
    recorder.set(Some(Function::Worker));
    let outcome = d.instances[&Function::Worker]
        .maintain_claimed(swept, now)
        .await
        .unwrap();
    recorder.set(None);
    match outcome {
        floe::catalog::tables::maintenance::WorkerOutcome::Maintained(outcome) => {
            assert!(outcome.error.is_none(), "{outcome:?}");
            assert!(outcome.report.unwrap().files_deleted > 0);
        }
        other => panic!("{other:?}"),
    }

    // Views: create, load, exists, replace, rename, drop, and a registration of a file that is
    // not there (its read is what the route does with storage).
    let views = format!("{namespaces}/ns/views");
    let view = json!({
        "name": "v",
        "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "type": "long", "required": false}]},
        "view-version": {"version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
            "default-namespace": ["ns"],
            "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}]}
    });
    let created = call(d, Method::POST, &views, Some(view)).await;
    let view_location = created.assert_ok(200)["metadata"]["location"]
        .as_str()
        .unwrap()
        .to_owned();
    call(d, Method::GET, &format!("{views}/v"), None)
        .await
        .assert_ok(200);
    call(d, Method::HEAD, &format!("{views}/v"), None).await;
    let replace = json!({"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "v"}}]});
    call(d, Method::POST, &format!("{views}/v"), Some(replace))
        .await
        .assert_ok(200);
    let rename = json!({
        "source": {"namespace": ["ns"], "name": "v"},
        "destination": {"namespace": ["ns"], "name": "v2"}
    });
    call(
        d,
        Method::POST,
        &format!("/v1/{ORG}/views/rename"),
        Some(rename),
    )
    .await
    .assert_ok(204);
    call(d, Method::DELETE, &format!("{views}/v2"), None)
        .await
        .assert_ok(204);
    let root = view_location.rsplit_once('/').unwrap().0;
    let register = json!({"name": "r",
        "metadata-location": format!("{root}/fresh-view/metadata/00001-x.metadata.json")});
    call(
        d,
        Method::POST,
        &format!("{namespaces}/ns/register-view"),
        Some(register),
    )
    .await
    .assert_error(400, "BadRequestException");

    // Credentials.
    call(d, Method::GET, &format!("{tables}/t2/credentials"), None)
        .await
        .assert_ok(200);

    // Scan planning, with credentials for the plan: the table's metadata file and manifest
    // list read, a vend (what is planned: tests/http/planning.rs). The snapshot's manifest
    // list is written first, as the engine that appended it would have (not recorded).
    let current = call(d, Method::GET, &format!("{tables}/t2"), None).await;
    let metadata = current.assert_ok(200)["metadata"].clone();
    let snapshot = metadata["current-snapshot-id"].as_i64().unwrap();
    let list = metadata["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["snapshot-id"] == snapshot)
        .unwrap()["manifest-list"]
        .as_str()
        .unwrap()
        .to_owned();
    recorder.set(None);
    put_empty_manifest_list(&c, &list, snapshot).await;
    let plan = call(
        d,
        Method::POST,
        &format!("{tables}/t2/plan"),
        Some(json!({"filter": true})),
    )
    .await
    .assert_ok(200)
    .clone();
    let plan_id = plan["plan-id"].as_str().unwrap();
    call(d, Method::GET, &format!("{tables}/t2/plan/{plan_id}"), None)
        .await
        .assert_ok(200);
    call(
        d,
        Method::DELETE,
        &format!("{tables}/t2/plan/{plan_id}"),
        None,
    )
    .await
    .assert_ok(204);
    call(
        d,
        Method::POST,
        &format!("{tables}/t2/tasks"),
        Some(json!({"plan-task": "not-a-task"})),
    )
    .await
    .assert_error(404, "NoSuchPlanTaskException");

    // Signing: the table's sealed keys opened to check and sign a request (what is signed:
    // tests/http/signing.rs).
    let sign = json!({"method": "GET", "region": "us-east-1",
        "uri": "https://elsewhere.s3.amazonaws.com/x", "headers": {}});
    call(d, Method::POST, &format!("{tables}/t2/sign"), Some(sign)).await;

    // The web view: sign in, every page down to the table (its metadata read from the bucket
    // with static keys), the stylesheet, sign out.
    let form = format!("token={ADMIN_TOKEN}");
    let (status, headers) = call_ui(d, Method::POST, "/ui/signin", None, Some(&form)).await;
    assert_eq!(status, 303);
    let cookie = headers["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_owned();
    for page in [
        "/ui/".to_owned(),
        format!("/ui/orgs/{ORG}"),
        format!("/ui/orgs/{ORG}/namespaces/ns"),
        format!("/ui/orgs/{ORG}/namespaces/ns/tables/t2"),
        "/ui/static/floe.css".to_owned(),
    ] {
        let (status, _) = call_ui(d, Method::GET, &page, Some(&cookie), None).await;
        assert_eq!(status, 200, "{page}");
    }
    let (status, _) = call_ui(d, Method::POST, "/ui/signout", Some(&cookie), Some("")).await;
    assert_eq!(status, 303);
    let (status, _) = call_ui(d, Method::GET, "/ui/", Some(&cookie), None).await;
    assert_eq!(status, 200, "the sign-in page");

    // Tables again: drop; list, restore and drop again, purge one now; then the namespace
    // goes.
    for table in ["t2", "staged"] {
        let dropped = call(d, Method::DELETE, &format!("{tables}/{table}"), None).await;
        assert_eq!(dropped.status.as_u16(), 204);
    }
    let deleted_tables = format!("{org}/namespaces/ns/deleted-tables");
    let listed = management(Method::GET, deleted_tables.clone(), None).await;
    let uuids: Vec<String> = listed.assert_ok(200)["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table-uuid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(uuids.len(), 2);
    management(
        Method::POST,
        format!("{deleted_tables}/{}/restore", uuids[0]),
        Some(json!({"name": "restored"})),
    )
    .await
    .assert_ok(200);
    call(d, Method::DELETE, &format!("{tables}/restored"), None).await;
    management(
        Method::DELETE,
        format!("{deleted_tables}/{}", uuids[1]),
        None,
    )
    .await
    .assert_ok(204);
    for name in ["kept", "swept"] {
        call(d, Method::DELETE, &format!("{tables}/{name}"), None)
            .await
            .assert_ok(204);
    }
    call(d, Method::DELETE, &format!("{namespaces}/ns"), None)
        .await
        .assert_ok(204);

    // The change events of all of the above.
    let events = management(Method::GET, format!("{org}/events?limit=1000"), None).await;
    assert!(
        !events.assert_ok(200)["events"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // The purge, once the recovery period has passed.
    recorder.set(Some(Function::Purge));
    let later = floe::clock::Clock::now_ms(&*clock) + RECOVERY_PERIOD.as_millis() as u64 + 1_000;
    let run = d.instances[&Function::Purge]
        .purge_due(later)
        .await
        .unwrap();
    recorder.set(None);
    assert_eq!(run.tables.purged.len(), 4, "{run:?}");
    assert_eq!(run.namespaces.purged.len(), 2, "{run:?}");

    let called = d.called.lock().unwrap().clone();
    let every_route: BTreeSet<String> = floe::routes::ROUTES
        .iter()
        .map(|r| r.endpoint())
        .chain(
            floe::http::management::MANAGEMENT_ROUTES
                .iter()
                .map(|r| r.endpoint()),
        )
        .collect();
    let uncalled: Vec<_> = every_route.difference(&called).collect();
    assert!(
        uncalled.is_empty(),
        "routes this test never calls: {uncalled:?}"
    );

    let seen = recorder.seen.lock().unwrap().clone();
    let mut mismatches = Vec::new();
    // The events function's PutEvents is exercised on moto by tests/aws/events.rs, the
    // scheduler's sends to the maintenance queue by tests/aws/maintenance_queue.rs.
    for function in Function::ALL.into_iter().filter(|f| f.runs_the_catalog()) {
        let declared: BTreeSet<Capability> = function
            .uses()
            .iter()
            .copied()
            .filter(|c| *c != Capability::QueueDueTables)
            .collect();
        let used = seen.get(&function).cloned().unwrap_or_default();
        let undeclared: Vec<_> = used.difference(&declared).collect();
        let unused: Vec<_> = declared.difference(&used).collect();
        if !undeclared.is_empty() || !unused.is_empty() {
            mismatches.push(format!(
                "{}: used but not declared {undeclared:?}; declared but not used {unused:?}",
                function.name()
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// A manifest list of snapshot `id` listing no manifests, as the iceberg crate writes it.
/// Writes snapshot `id`'s manifest list, empty, at `list` in the `vault` bucket's storage, as
/// the engine that committed the snapshot would have.
async fn put_empty_manifest_list(c: &TestCatalog, list: &str, id: i64) {
    let lookups = &c.catalog.core.lookups;
    let vault = lookups.usable_bucket(ORG, "vault").await.unwrap();
    lookups
        .objects_for(&vault)
        .await
        .unwrap()
        .put_if_absent(list, empty_manifest_list(id).await.into())
        .await
        .unwrap();
}

async fn empty_manifest_list(id: i64) -> Vec<u8> {
    let io = iceberg::io::FileIO::new_with_memory();
    let scratch = format!("memory:///snap-{id}.avro");
    let writer = iceberg::spec::ManifestListWriter::v2(
        io.new_output(&scratch).unwrap().writer().await.unwrap(),
        id,
        None,
        id,
    );
    writer.close().await.unwrap();
    io.new_input(&scratch)
        .unwrap()
        .read()
        .await
        .unwrap()
        .to_vec()
}
