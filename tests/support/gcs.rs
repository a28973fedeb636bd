//! GCS for tests: the emulator the test script started (fake-gcs-server, at
//! FLOE_FAKE_GCS_ENDPOINT), and a fake of Google's OAuth token endpoint and Security Token
//! Service on loopback that records what the catalog asks for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use floe::clock::SystemClock;
use floe::model::{BucketAuth, BucketRow, Platform};
use floe::objects::gcs::GcsStores;
use floe::vending::gcs::GcsVendor;
use serde_json::{Value, json};

pub fn emulator() -> String {
    std::env::var("FLOE_FAKE_GCS_ENDPOINT").expect(
        "FLOE_FAKE_GCS_ENDPOINT is not set: run ./scripts/test, which starts fake-gcs-server on a loopback port",
    )
}

/// Object stores that reach the emulator.
pub fn stores() -> GcsStores {
    GcsStores::emulator(&emulator())
}

/// Creates a bucket on the emulator (JSON API).
pub async fn create_bucket(name: &str) {
    use http_body_util::{BodyExt, Full};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<bytes::Bytes>>();
    let request = http::Request::post(format!("{}/storage/v1/b", emulator()))
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(
            json!({"name": name}).to_string(),
        )))
        .unwrap();
    let response = client.request(request).await.expect("emulator answers");
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(
        status.is_success(),
        "create bucket {name}: {status} {}",
        String::from_utf8_lossy(&body)
    );
}

/// A bucket configuration for an emulator bucket, under `wh/`.
pub fn gcs_bucket(nickname: &str, bucket: &str, auth: BucketAuth) -> BucketRow {
    BucketRow {
        nickname: nickname.into(),
        platform: Platform::Gcs,
        root: format!("gs://{bucket}/wh"),
        auth,
        endpoint: None,
        region: None,
        path_style: false,
        static_keys_to_writers: false,
    }
}

/// One request the fake received: its path and form fields.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub form: BTreeMap<String, String>,
}

/// Source tokens the fake token endpoint issues live this long.
pub const SOURCE_TOKEN_SECONDS: u64 = 3600;
/// Downscoped tokens the fake STS issues live this long.
pub const DOWNSCOPED_TOKEN_SECONDS: u64 = 3599;

/// Google's OAuth token endpoint (service-account JWT grants) and STS token exchange, faked on
/// 127.0.0.1. Runs on the test's runtime and stops with it.
pub struct FakeGoogle {
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    key_file: PathBuf,
}

impl FakeGoogle {
    /// Starts the fake and writes a service-account key file (a fresh RSA key) into `dir`
    /// whose `token_uri` is the fake.
    pub async fn start(dir: &Path) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let router = Router::new()
            .route("/oauth2/token", post(answer))
            .route("/v1/token", post(answer))
            .with_state(requests.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        let key_file = dir.join("floe-gcs-key.json");
        std::fs::write(&key_file, key_file_json(&format!("{url}/oauth2/token"))).unwrap();
        Self {
            url,
            requests,
            key_file,
        }
    }

    pub fn key_file(&self) -> &Path {
        &self.key_file
    }

    /// The token exchange endpoint.
    pub fn sts_endpoint(&self) -> String {
        format!("{}/v1/token", self.url)
    }

    /// Every request to `path` so far.
    pub fn requests(&self, path: &str) -> Vec<Recorded> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// Token exchanges so far.
    pub fn exchanges(&self) -> Vec<Recorded> {
        self.requests("/v1/token")
    }

    /// The access boundary an exchange asked for.
    pub fn boundary(exchange: &Recorded) -> Value {
        serde_json::from_str(&exchange.form["options"]).expect("options is JSON")
    }

    /// A vendor exchanging tokens of the key file at this fake.
    pub fn vendor(&self, engine_host: Option<String>) -> GcsVendor {
        GcsVendor::new(
            Arc::new(floe::google::GoogleCredentials::new(Some(
                self.key_file.clone(),
            ))),
            &self.sts_endpoint(),
            Arc::new(SystemClock),
            engine_host,
            floe::config::DEFAULT_CREDENTIALS_MIN_REMAINING_SECS * 1000,
        )
        .unwrap()
    }
}

/// Records the form and answers a token: `source-token-<n>` from the token endpoint,
/// `downscoped-<n>` from STS.
async fn answer(
    State(requests): State<Arc<Mutex<Vec<Recorded>>>>,
    uri: http::Uri,
    body: bytes::Bytes,
) -> axum::Json<Value> {
    let form: BTreeMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let path = uri.path().to_owned();
    let n = {
        let mut requests = requests.lock().unwrap();
        requests.push(Recorded {
            path: path.clone(),
            form,
        });
        requests.iter().filter(|r| r.path == path).count()
    };
    axum::Json(if path == "/oauth2/token" {
        json!({"access_token": format!("source-token-{n}"), "token_type": "Bearer",
               "expires_in": SOURCE_TOKEN_SECONDS})
    } else {
        json!({"access_token": format!("downscoped-{n}"), "token_type": "Bearer",
               "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
               "expires_in": DOWNSCOPED_TOKEN_SECONDS})
    })
}

/// A service-account key file as Google issues them, with a fresh RSA key.
fn key_file_json(token_uri: &str) -> String {
    use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
    let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let der: Pkcs8V1Der = pair.as_der().unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        lines.join("\n")
    );
    json!({
        "type": "service_account",
        "project_id": "floe-test",
        "private_key_id": "k1",
        "private_key": pem,
        "client_email": "floe-catalog@floe-test.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    })
    .to_string()
}
