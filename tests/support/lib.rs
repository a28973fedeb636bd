//! Test support: a real catalog (embedded store, local warehouse) driven in-process through the
//! full HTTP router, with principals of every org role.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use axum::Router;
use bytes::Bytes;
use floe::bootstrap::{self, DevSettings};
use floe::catalog::Catalog;
use floe::clock::{Clock, SystemClock};
use floe::core::Builder;
use floe::model::{BucketAuth, BucketRow, OrgRole, OrgRow, Platform, S3Defaults};
use floe::objects::local::{LocalObjectStores, file_url};
use floe::objects::s3::S3Stores;
use floe::objects::{ObjectStore, ObjectStores, PlatformStores};
use floe::store::MetaStore;
use floe::store::dynamodb::DynamoStore;
use floe::store::embedded::EmbeddedStore;
use floe::vending::CredentialVendor;
use floe::vending::sts::StsVendor;
use floe::vending::{NoVending, PlatformVendor};

pub mod conformance;
pub mod faults;
pub mod gcs;
pub mod moto;
pub use faults::{Fault, FaultStore, Pause, Target};
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

pub const ORG: &str = "acme";
pub const ADMIN_TOKEN: &str = "ema_test_admin_token";

/// A catalog on a temporary data directory.
pub struct TestCatalog {
    pub dir: tempfile::TempDir,
    pub store: Arc<dyn MetaStore>,
    pub router: Router,
    pub catalog: Arc<Catalog>,
    pub read_token: String,
    pub write_token: String,
    /// A valid token of a principal that is no member of the org.
    pub outsider_token: String,
    pub backend: Backend,
    pub objects: Arc<dyn ObjectStores>,
    /// Bucket configurations added so far, the org's default first.
    buckets: std::sync::Mutex<Vec<BucketRow>>,
    sts: Option<Arc<StsVendor>>,
    /// Google's token endpoint and STS, faked (GCS backend only).
    pub google: Option<gcs::FakeGoogle>,
    /// The catalog's DynamoDB table (AWS backend only).
    pub dynamodb_table: Option<String>,
}

/// Where a test catalog keeps its state. `FLOE_TEST_BACKEND=aws` runs the same tests on
/// DynamoDB, S3 and STS (moto at FLOE_MOTO_ENDPOINT); the default is the embedded store with a
/// local warehouse. `Gcs` (`TestCatalog::gcs`, tests/gcs) keeps the catalog in the embedded
/// store and tables on the GCS emulator (FLOE_FAKE_GCS_ENDPOINT), vending through a fake of
/// Google's STS; it is no FLOE_TEST_BACKEND, since several HTTP-level tests configure buckets
/// with S3 auth types that GCS refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Local,
    Aws,
    Gcs,
}

impl Backend {
    pub fn from_env() -> Self {
        match std::env::var("FLOE_TEST_BACKEND").as_deref() {
            Ok("aws") => Backend::Aws,
            Ok("local") | Err(_) => Backend::Local,
            Ok(other) => panic!("unknown FLOE_TEST_BACKEND '{other}': use local or aws"),
        }
    }
}

/// Turns an adapter into another (a wrapper around it), as the deployment's wrappers do.
pub use floe::deployment::Wrap as WrapFn;

/// Wrappers around the adapters a test catalog's `Catalog` uses (to inject faults or observe
/// calls). The test helpers (`files_under`, ...) use the unwrapped adapters.
pub struct Wrap {
    pub store: WrapFn<dyn MetaStore>,
    pub objects: WrapFn<dyn ObjectStores>,
    pub vendor: WrapFn<dyn CredentialVendor>,
    pub sealer: WrapFn<dyn floe::secrets::SecretSealer>,
}

impl Default for Wrap {
    fn default() -> Self {
        Self {
            store: Box::new(|store| store),
            objects: Box::new(|objects| objects),
            vendor: Box::new(|vendor| vendor),
            sealer: Box::new(|sealer| sealer),
        }
    }
}

/// A clock standing still at the current time.
fn frozen_clock(builder: Builder) -> Builder {
    builder.clock(Arc::new(floe::clock::ManualClock::new(
        SystemClock.now_ms(),
    )))
}

/// The adapters of one backend, before the catalog is built.
struct Parts {
    store: Arc<dyn MetaStore>,
    bucket: BucketRow,
    objects: Arc<dyn ObjectStores>,
    vendor: Arc<dyn CredentialVendor>,
    sts: Option<Arc<StsVendor>>,
    google: Option<gcs::FakeGoogle>,
    dynamodb_table: Option<String>,
}

/// Role the AWS backend vends through.
pub const VENDING_ROLE: &str = "arn:aws:iam::123456789012:role/floe-vending";

/// An HTTP answer: status and JSON body (`Null` when empty).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// Asserts a spec ErrorModel with this status and type.
    #[track_caller]
    pub fn assert_error(&self, status: u16, error_type: &str) {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status, body: {}",
            self.body
        );
        assert_eq!(
            self.body["error"]["code"], status,
            "body code must equal the status: {}",
            self.body
        );
        assert_eq!(self.body["error"]["type"], error_type, "{}", self.body);
        assert!(
            self.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{}",
            self.body
        );
        assert_eq!(
            self.body.as_object().map(|o| o.len()),
            Some(1),
            "only the error key: {}",
            self.body
        );
    }

    #[track_caller]
    pub fn assert_ok(&self, status: u16) -> &Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status, body: {}",
            self.body
        );
        &self.body
    }
}

impl TestCatalog {
    pub async fn new() -> Self {
        Self::build(Backend::from_env(), Wrap::default()).await
    }

    /// A catalog on the embedded store, whatever the test backend.
    pub async fn local() -> Self {
        Self::build(Backend::Local, Wrap::default()).await
    }

    /// A catalog on DynamoDB, S3 and STS (moto), whatever the test backend.
    pub async fn aws() -> Self {
        Self::build(Backend::Aws, Wrap::default()).await
    }

    /// A catalog whose tables live on the GCS emulator, whatever the test backend.
    pub async fn gcs() -> Self {
        Self::build(Backend::Gcs, Wrap::default()).await
    }

    /// STS AssumeRole calls the catalog has made (AWS backend only).
    pub fn sts_calls(&self) -> u64 {
        self.sts.as_ref().map_or(0, |v| v.sts_calls())
    }

    /// A catalog whose store is wrapped (to inject faults, say).
    pub async fn with_store(
        wrap: impl FnOnce(Arc<dyn MetaStore>) -> Arc<dyn MetaStore> + Send + 'static,
    ) -> Self {
        Self::with_adapters(Wrap {
            store: Box::new(wrap),
            ..Wrap::default()
        })
        .await
    }

    /// A catalog whose clock stands still at the current time unless a test moves it: a test
    /// about time (recovery periods, expiry) then never depends on how long its steps took.
    pub async fn frozen() -> Self {
        Self::custom(Wrap::default(), frozen_clock).await
    }

    /// [`Self::with_fault`] on a clock that stands still ([`Self::frozen`]).
    pub async fn frozen_with_fault(target: Target, fault: Fault) -> (Self, Arc<AtomicBool>) {
        Self::with_fault_configured(target, fault, frozen_clock).await
    }

    /// The time on the catalog's own clock.
    pub fn now_ms(&self) -> u64 {
        self.catalog.core.clock.now_ms()
    }

    /// A catalog whose adapters are wrapped.
    pub async fn with_adapters(wrap: Wrap) -> Self {
        Self::build(Backend::from_env(), wrap).await
    }

    /// A catalog whose store applies `fault` to the operations `target` matches once the
    /// returned flag is set.
    pub async fn with_fault(target: Target, fault: Fault) -> (Self, Arc<AtomicBool>) {
        Self::with_fault_configured(target, fault, |catalog| catalog).await
    }

    /// [`Self::with_fault`] for a catalog whose options `configure` sets (a clock, say).
    pub async fn with_fault_configured(
        target: Target,
        fault: Fault,
        configure: impl FnOnce(Builder) -> Builder,
    ) -> (Self, Arc<AtomicBool>) {
        let armed = Arc::new(AtomicBool::new(false));
        let flag = armed.clone();
        let wrap = Wrap {
            store: Box::new(move |inner| {
                Arc::new(FaultStore {
                    inner,
                    armed: flag,
                    target,
                    fault,
                })
            }),
            ..Wrap::default()
        };
        (Self::custom(wrap, configure).await, armed)
    }

    /// A catalog that also authenticates OIDC users with `verifier`.
    pub async fn with_oidc(verifier: Arc<floe::auth::oidc::OidcVerifier>) -> Self {
        Self::build_with(Backend::from_env(), Wrap::default(), move |catalog| {
            catalog.oidc(verifier)
        })
        .await
    }

    /// A catalog with wrapped adapters whose options `configure` sets (a clock, say).
    pub async fn custom(wrap: Wrap, configure: impl FnOnce(Builder) -> Builder) -> Self {
        Self::build_with(Backend::from_env(), wrap, configure).await
    }

    async fn build(backend: Backend, wrap: Wrap) -> Self {
        Self::build_with(backend, wrap, |catalog| catalog).await
    }

    /// Builds a catalog, letting `configure` set its options before it is shared.
    async fn build_with(
        backend: Backend,
        wrap: Wrap,
        configure: impl FnOnce(Builder) -> Builder,
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let parts = match backend {
            Backend::Local => Parts {
                store: Arc::new(EmbeddedStore::open(&dir.path().join("catalog")).expect("store")),
                bucket: bootstrap::local_bucket(&dir.path().join("warehouse")).unwrap(),
                objects: Arc::new(PlatformStores {
                    local: LocalObjectStores,
                    s3: None,
                    gcs: None,
                }),
                vendor: Arc::new(NoVending),
                sts: None,
                google: None,
                dynamodb_table: None,
            },
            Backend::Gcs => {
                let bucket = moto::unique("floe-http");
                gcs::create_bucket(&bucket).await;
                let google = gcs::FakeGoogle::start(dir.path()).await;
                Parts {
                    store: Arc::new(
                        EmbeddedStore::open(&dir.path().join("catalog")).expect("store"),
                    ),
                    bucket: gcs::gcs_bucket("default", &bucket, BucketAuth::ServiceAccount),
                    objects: Arc::new(PlatformStores {
                        local: LocalObjectStores,
                        s3: None,
                        gcs: Some(gcs::stores()),
                    }),
                    vendor: Arc::new(PlatformVendor {
                        s3: None,
                        gcs: Some(Arc::new(google.vendor(Some(gcs::emulator())))),
                    }),
                    sts: None,
                    google: Some(google),
                    dynamodb_table: None,
                }
            }
            Backend::Aws => {
                let sdk = moto::sdk().await;
                let table = moto::unique("floe-http");
                let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), table.clone());
                store
                    .create_table()
                    .await
                    .expect("create the DynamoDB table");
                let bucket = moto::unique("floe-http");
                moto::create_bucket(&bucket).await;
                let sts = Arc::new(StsVendor::new(
                    aws_sdk_sts::Client::new(&sdk),
                    Arc::new(SystemClock),
                    S3Defaults::default(),
                    None,
                    floe::config::DEFAULT_CREDENTIALS_MIN_REMAINING_SECS * 1000,
                ));
                let role = BucketAuth::CustomerManagedRole {
                    role_arn: VENDING_ROLE.into(),
                    external_id: None,
                };
                Parts {
                    store: Arc::new(store),
                    bucket: moto::s3_bucket("default", &bucket, role),
                    objects: Arc::new(PlatformStores {
                        local: LocalObjectStores,
                        s3: Some(S3Stores::new(sdk.clone(), S3Defaults::default())),
                        gcs: None,
                    }),
                    vendor: sts.clone(),
                    sts: Some(sts),
                    google: None,
                    dynamodb_table: Some(table),
                }
            }
        };
        let clock = SystemClock;
        let inner = parts.store;
        let settings = DevSettings {
            org: ORG,
            bucket: parts.bucket.clone(),
            token: Some(ADMIN_TOKEN),
        };
        // Secrets in rows are sealed as deployed: a key file locally, KMS (on moto) on AWS.
        let sealer: Arc<dyn floe::secrets::SecretSealer> = match backend {
            Backend::Local | Backend::Gcs => Arc::new(
                floe::secrets::LocalKeySealer::open_or_create(&dir.path().join("secret.key"))
                    .expect("key file"),
            ),
            Backend::Aws => Arc::new(floe::secrets::KmsSealer::new(
                moto::kms().await,
                moto::create_kms_key().await,
            )),
        };
        bootstrap::bootstrap_dev(&*inner, &clock, &settings, Some(&*sealer))
            .await
            .expect("bootstrap");
        let (_, read_token) =
            bootstrap::issue_api_client(&*inner, &clock, ORG, "reader", None, OrgRole::Read)
                .await
                .unwrap();
        let (_, write_token) = bootstrap::issue_api_client(
            &*inner,
            &clock,
            ORG,
            "writer",
            Some("writer@acme.test".into()),
            OrgRole::Write,
        )
        .await
        .unwrap();
        // A principal that belongs to another org only.
        let other = OrgRow {
            name: "other-org".into(),
            iceberg_enabled: true,
            default_bucket: "default".into(),
            created_ms: 0,
        };
        bootstrap::ensure_org(&*inner, &other).await.unwrap();
        let (_, outsider_token) = bootstrap::issue_api_client(
            &*inner,
            &clock,
            "other-org",
            "outsider",
            None,
            OrgRole::Admin,
        )
        .await
        .unwrap();
        let store = (wrap.store)(inner);
        let builder = Builder::new(store.clone(), parts.objects.clone(), parts.vendor)
            .clock(Arc::new(clock))
            .sealer(sealer)
            .wrap_objects(wrap.objects)
            .wrap_vendor(wrap.vendor)
            .wrap_sealer(wrap.sealer);
        let catalog = Arc::new(Catalog::new(configure(builder).build()));
        let router = floe::http::full_router(catalog.clone());
        let sts = parts.sts;
        Self {
            dir,
            store,
            router,
            catalog,
            read_token,
            write_token,
            outsider_token,
            backend,
            objects: parts.objects,
            buckets: std::sync::Mutex::new(vec![parts.bucket]),
            sts,
            google: parts.google,
            dynamodb_table: parts.dynamodb_table,
        }
    }

    /// The router of a second catalog over the same store, storage and vendor, with caches
    /// of its own: another instance (another Lambda) of the same deployment.
    pub fn another_instance(&self) -> Router {
        let core = &self.catalog.core;
        let mut builder = Builder::new(
            self.store.clone(),
            self.objects.clone(),
            core.vendor.clone(),
        )
        .clock(core.clock.clone());
        if let Some(sealer) = &core.sealer {
            builder = builder.sealer(sealer.clone());
        }
        floe::http::full_router(Arc::new(Catalog::new(builder.build())))
    }

    /// Static keys sealed as the catalog seals them (a bucket configuration's auth).
    pub async fn sealed_hmac(&self, access_key_id: &str, secret: &str) -> BucketAuth {
        let sealer = self.catalog.core.sealer().expect("test catalogs seal");
        let sealed = sealer.seal(secret.as_bytes()).await.unwrap();
        BucketAuth::SealedHmac {
            access_key_id: access_key_id.into(),
            sealed_secret: serde_json::to_value(sealed).unwrap(),
        }
    }

    /// Root URL of the org's default bucket.
    pub fn default_root(&self) -> String {
        self.buckets.lock().unwrap()[0].root.clone()
    }

    /// Adds a bucket configuration on fresh storage of the test backend; returns its root URL.
    pub async fn add_bucket(&self, nickname: &str, auth: BucketAuth) -> String {
        self.add_bucket_configured(nickname, auth, |_| {}).await
    }

    /// `add_bucket`, with the row changed by `configure` before it is stored.
    pub async fn add_bucket_configured(
        &self,
        nickname: &str,
        auth: BucketAuth,
        configure: impl FnOnce(&mut BucketRow),
    ) -> String {
        let bucket = match self.backend {
            Backend::Local => {
                let root = self.dir.path().join(format!("bucket-{nickname}"));
                std::fs::create_dir_all(&root).unwrap();
                BucketRow {
                    nickname: nickname.into(),
                    platform: Platform::Local,
                    root: file_url(&root.canonicalize().unwrap()),
                    auth,
                    endpoint: None,
                    region: None,
                    path_style: false,
                    static_keys_to_writers: false,
                }
            }
            Backend::Aws => {
                let name = moto::unique(nickname);
                moto::create_bucket(&name).await;
                moto::s3_bucket(nickname, &name, auth)
            }
            Backend::Gcs => {
                let name = moto::unique(nickname);
                gcs::create_bucket(&name).await;
                gcs::gcs_bucket(nickname, &name, auth)
            }
        };
        let mut bucket = bucket;
        configure(&mut bucket);
        bootstrap::put_bucket(&*self.store, ORG, &bucket)
            .await
            .unwrap();
        let root = bucket.root.clone();
        self.buckets.lock().unwrap().push(bucket);
        root
    }

    /// The object store holding `location`, among this catalog's buckets.
    async fn objects_at(&self, location: &str) -> Arc<dyn ObjectStore> {
        let buckets = self.buckets.lock().unwrap().clone();
        let bucket = buckets
            .iter()
            .find(|b| location.starts_with(&b.root))
            .unwrap_or_else(|| panic!("{location} is in no bucket of this catalog"));
        self.objects.for_bucket(bucket).await.unwrap()
    }

    /// Every object under `prefix` (a location), sorted.
    pub async fn files_under(&self, prefix: &str) -> Vec<String> {
        let dir = format!("{}/", prefix.trim_end_matches('/'));
        let mut found = self
            .objects_at(prefix)
            .await
            .list(&dir, 10_000)
            .await
            .unwrap();
        found.sort();
        found
    }

    pub async fn delete_files(&self, locations: &[String]) {
        if let Some(first) = locations.first() {
            self.objects_at(first)
                .await
                .delete(locations)
                .await
                .unwrap();
        }
    }

    /// Replaces an object, as a client holding write credentials for its directory could.
    pub async fn overwrite(&self, location: &str, bytes: Vec<u8>) {
        let objects = self.objects_at(location).await;
        objects.delete(&[location.to_owned()]).await.unwrap();
        objects
            .put_if_absent(location, Bytes::from(bytes))
            .await
            .unwrap();
    }

    pub async fn exists(&self, location: &str) -> bool {
        self.objects_at(location).await.get(location).await.is_ok()
    }

    pub async fn read_bytes(&self, location: &str) -> Vec<u8> {
        self.objects_at(location)
            .await
            .get(location)
            .await
            .unwrap()
            .to_vec()
    }

    pub async fn read_json(&self, location: &str) -> Value {
        serde_json::from_slice(&self.read_bytes(location).await).unwrap()
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Bytes>,
    ) -> Answer {
        self.raw_request(method, &format!("/iceberg{path}"), token, body)
            .await
    }

    /// A management API request: `path` is relative to `/api/v1`.
    pub async fn management(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Answer {
        self.raw_request(
            method,
            &format!("/api/v1{path}"),
            Some(token),
            body.map(|b| Bytes::from(b.to_string())),
        )
        .await
    }

    async fn raw_request(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<Bytes>,
    ) -> Answer {
        self.send(method, uri, token, body, &[]).await
    }

    /// A request to `uri` (from the root, e.g. `/iceberg/v1/...`) with extra headers.
    pub async fn send(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(axum::body::Body::from(body.unwrap_or_default()))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| panic!("non-JSON body: {}", String::from_utf8_lossy(&bytes)))
        };
        Answer { status, body }
    }

    /// A GET of `path` (under `/iceberg`) with extra headers, answered as it was sent: status,
    /// headers and undecoded body bytes (for Content-Encoding, ETag and 304s).
    pub async fn get_raw(
        &self,
        token: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, http::HeaderMap, Bytes) {
        exchange(&self.router, Method::GET, token, path, None, headers).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.request(Method::GET, path, Some(ADMIN_TOKEN), None)
            .await
    }

    pub async fn head(&self, path: &str) -> Answer {
        self.request(Method::HEAD, path, Some(ADMIN_TOKEN), None)
            .await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.request(Method::DELETE, path, Some(ADMIN_TOKEN), None)
            .await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.post_as(ADMIN_TOKEN, path, body).await
    }

    pub async fn post_as(&self, token: &str, path: &str, body: Value) -> Answer {
        self.request(
            Method::POST,
            path,
            Some(token),
            Some(Bytes::from(body.to_string())),
        )
        .await
    }

    pub async fn create_namespace(&self, name: &str) -> Value {
        self.post(
            &format!("/v1/{ORG}/namespaces"),
            json!({"namespace": [name]}),
        )
        .await
        .assert_ok(200)
        .clone()
    }

    /// `tables` tables named `t0000`, `t0001`, ... in namespaces `{prefix}00`, `{prefix}01`,
    /// ... of fifty each, created a namespace at a time in parallel (creates in one namespace
    /// take turns on its row). The namespaces' names.
    pub async fn create_tables_spread(self: &Arc<Self>, prefix: &str, tables: u64) -> Vec<String> {
        let namespaces: Vec<String> = (0..tables.div_ceil(50))
            .map(|k| format!("{prefix}{k:02}"))
            .collect();
        let creates: Vec<_> = namespaces
            .iter()
            .enumerate()
            .map(|(k, ns)| {
                let (c, ns) = (self.clone(), ns.clone());
                tokio::spawn(async move {
                    c.create_namespace(&ns).await;
                    for i in (k as u64 * 50)..((k as u64 + 1) * 50).min(tables) {
                        c.create_table(&ns, &format!("t{i:04}")).await;
                    }
                })
            })
            .collect();
        for create in creates {
            create.await.unwrap();
        }
        namespaces
    }

    /// The maintenance state rows of namespace `ns` of the test org, by table name.
    pub async fn maintenance_states(
        &self,
        ns: &str,
    ) -> std::collections::BTreeMap<String, floe::catalog::tables::maintenance::MaintenanceStateRow>
    {
        let store = &*self.catalog.core.store;
        let ns_row = floe::store::rows::get::<floe::model::NamespaceRow>(
            store,
            &floe::store::rows::keys::namespace(ORG, ns),
        )
        .await
        .unwrap()
        .expect("the namespace exists");
        let rows: Vec<floe::catalog::tables::maintenance::MaintenanceStateRow> =
            floe::store::rows::collect(
                store,
                &floe::store::rows::keys::namespace_partition(&ns_row.row.id),
                floe::store::rows::keys::MAINTENANCE_STATE_PREFIX,
                None,
                usize::MAX,
                |_| true,
            )
            .await
            .unwrap();
        rows.into_iter().map(|r| (r.table.clone(), r)).collect()
    }

    pub async fn create_table(&self, namespace: &str, name: &str) -> Value {
        self.post(
            &format!("/v1/{ORG}/namespaces/{namespace}/tables"),
            create_table_body(name),
        )
        .await
        .assert_ok(200)
        .clone()
    }

    /// Commits one appended snapshot on `main`, as an engine would after writing files.
    pub async fn append_snapshot(
        &self,
        token: &str,
        namespace: &str,
        table: &str,
        snapshot_id: i64,
    ) -> Answer {
        let current = self
            .request(
                Method::GET,
                &format!("/v1/{ORG}/namespaces/{namespace}/tables/{table}"),
                Some(token),
                None,
            )
            .await;
        let metadata = &current.assert_ok(200)["metadata"];
        self.post_as(
            token,
            &format!("/v1/{ORG}/namespaces/{namespace}/tables/{table}"),
            append_body(metadata, snapshot_id),
        )
        .await
    }
}

/// A request to `path` (under `/iceberg`) through `router` (this catalog's, or
/// [`TestCatalog::another_instance`]), answered as it was sent.
pub async fn exchange(
    router: &Router,
    method: Method,
    token: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (StatusCode, http::HeaderMap, Bytes) {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("/iceberg{path}"))
        .header("authorization", format!("Bearer {token}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = body.map_or_else(axum::body::Body::empty, |b| b.to_string().into());
    let response = router
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, body)
}

/// Path of a namespace's catalog routes, relative to `/iceberg`.
pub fn ns_path(ns: &str) -> String {
    format!("/v1/{ORG}/namespaces/{ns}")
}

/// Path of a namespace's tables.
pub fn tables_path(ns: &str) -> String {
    format!("/v1/{ORG}/namespaces/{ns}/tables")
}

/// Path of one table.
pub fn table_path(ns: &str, table: &str) -> String {
    format!("/v1/{ORG}/namespaces/{ns}/tables/{table}")
}

/// Whether a write batch is a commit's pointer swap: a put of an existing table row
/// conditioned on its write token (with the commit's event, and its idempotency key's move).
pub fn is_table_swap(writes: &[floe::store::Write]) -> bool {
    writes.first().is_some_and(|w| {
        matches!(w, floe::store::Write::Put { item, condition: floe::store::Condition::TokenIs(_) } if item.key.sk.starts_with("TABLE#"))
    })
}

pub fn create_table_body(name: &str) -> Value {
    json!({
        "name": name,
        "schema": {"type": "struct", "fields": [
            {"id": 1, "name": "id", "type": "long", "required": true},
            {"id": 2, "name": "data", "type": "string", "required": false}
        ]}
    })
}

/// A commit appending snapshot `snapshot_id` on top of `metadata`'s current snapshot.
pub fn append_body(metadata: &Value, snapshot_id: i64) -> Value {
    let parent = metadata
        .get("current-snapshot-id")
        .cloned()
        .filter(|v| !v.is_null() && v.as_i64() != Some(-1));
    let sequence = metadata["last-sequence-number"].as_i64().unwrap_or(0) + 1;
    json!({
        "requirements": [
            {"type": "assert-table-uuid", "uuid": metadata["table-uuid"]},
            {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}
        ],
        "updates": [
            {"action": "add-snapshot", "snapshot": {
                "snapshot-id": snapshot_id,
                "parent-snapshot-id": parent,
                "sequence-number": sequence,
                "timestamp-ms": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64,
                "manifest-list": format!("{}/metadata/snap-{snapshot_id}.avro", metadata["location"].as_str().unwrap()),
                "summary": {"operation": "append", "arraylake.author-name": "spoofed", "custom.key": "kept"},
                "schema-id": 0
            }},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id}
        ]
    })
}

/// Log lines (JSON: Floe's from debug up, its dependencies' from info up), collected for tests.
#[derive(Clone, Default)]
pub struct CapturedLog(Arc<std::sync::Mutex<Vec<u8>>>);

/// The one log of this test process: a thread's own subscriber (`set_default`) misses events
/// while other tests' threads register and drop theirs, so every test logs here and a test
/// looks for what only it logs (its names, its principals).
static CAPTURED: std::sync::OnceLock<CapturedLog> = std::sync::OnceLock::new();

impl CapturedLog {
    /// The process's log, collected from the first call on.
    pub fn start() -> (CapturedLog, ()) {
        let captured = CAPTURED.get_or_init(|| {
            let captured = CapturedLog::default();
            let writer = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .json()
                .with_env_filter(tracing_subscriber::EnvFilter::new("info,floe=debug"))
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in the tests");
            captured
        });
        (captured.clone(), ())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An api client with a token and no org role: it sees only what grants give it.
pub async fn principal_without_role(
    c: &TestCatalog,
    name: &str,
) -> (floe::model::Principal, String) {
    let principal = floe::model::Principal {
        id: format!("api-client:{name}"),
        kind: floe::model::PrincipalKind::ApiClient,
        name: name.into(),
        email: Some(format!("{name}@acme.test")),
    };
    let token = floe::auth::generate_token();
    bootstrap::register_token(&*c.store, &SystemClock, &principal, &token)
        .await
        .unwrap();
    (principal, token)
}

/// The org context of the dev admin, for calling services directly.
pub async fn admin_context(c: &TestCatalog) -> floe::catalog::OrgContext {
    c.catalog
        .core
        .lookups
        .org_context(&bootstrap::dev_admin(ORG), ORG)
        .await
        .unwrap()
}
