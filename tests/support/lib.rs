//! Test support: a real catalog (embedded store, local warehouse) driven in-process through the
//! full HTTP router, with principals of every org role.

use std::sync::Arc;

use axum::Router;
use bytes::Bytes;
use floe::bootstrap::{self, DevSettings};
use floe::catalog::Catalog;
use floe::clock::SystemClock;
use floe::objects::local::{LocalObjectStores, file_url};
use floe::routes::Group;
use floe::store::MetaStore;
use floe::store::embedded::EmbeddedStore;
use floe::store::rows::{BucketAuth, BucketRow, OrgRole, OrgRow, Platform};
use floe::vending::NoVending;
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
    pub read_token: String,
    pub write_token: String,
    /// A valid token of a principal that is no member of the org.
    pub outsider_token: String,
}

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
        Self::with_store(|store| store).await
    }

    /// A catalog whose store is wrapped (to inject faults, say).
    pub async fn with_store(wrap: impl FnOnce(Arc<dyn MetaStore>) -> Arc<dyn MetaStore>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let embedded: Arc<dyn MetaStore> =
            Arc::new(EmbeddedStore::open(&dir.path().join("catalog")).expect("store"));
        let clock = SystemClock;
        let warehouse = dir.path().join("warehouse");
        let settings = DevSettings {
            org: ORG,
            bucket: bootstrap::local_bucket(&warehouse).unwrap(),
            token: Some(ADMIN_TOKEN),
        };
        bootstrap::bootstrap_dev(&*embedded, &clock, &settings)
            .await
            .expect("bootstrap");
        let (_, read_token) =
            bootstrap::issue_api_client(&*embedded, &clock, ORG, "reader", None, OrgRole::Read)
                .await
                .unwrap();
        let (_, write_token) = bootstrap::issue_api_client(
            &*embedded,
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
        bootstrap::ensure_org(&*embedded, &other).await.unwrap();
        let (_, outsider_token) = bootstrap::issue_api_client(
            &*embedded,
            &clock,
            "other-org",
            "outsider",
            None,
            OrgRole::Admin,
        )
        .await
        .unwrap();
        let store = wrap(embedded);
        let catalog = Arc::new(Catalog::new(
            store.clone(),
            Arc::new(LocalObjectStores),
            Arc::new(NoVending),
            Arc::new(clock),
        ));
        let router = floe::http::router(catalog, &Group::ALL);
        Self {
            dir,
            store,
            router,
            read_token,
            write_token,
            outsider_token,
        }
    }

    /// Adds a bucket configuration on a new local directory; returns its root URL.
    pub async fn add_local_bucket(&self, nickname: &str, auth: BucketAuth) -> String {
        let root = self.dir.path().join(format!("bucket-{nickname}"));
        std::fs::create_dir_all(&root).unwrap();
        let root = file_url(&root.canonicalize().unwrap());
        let bucket = BucketRow {
            nickname: nickname.into(),
            platform: Platform::Local,
            root: root.clone(),
            auth,
            endpoint: None,
            region: None,
            path_style: false,
        };
        bootstrap::put_bucket(&*self.store, ORG, &bucket)
            .await
            .unwrap();
        root
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Bytes>,
    ) -> Answer {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("/iceberg{path}"));
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
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
