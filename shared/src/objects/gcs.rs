//! `ObjectStore` on Google Cloud Storage: a thin client of GCS's JSON API, with the server's
//! own Google tokens (gcp_auth, shared with vending).
//!
//! A create is a multipart upload with `ifGenerationMatch=0`, which GCS refuses with 412 once
//! any generation of the object exists, so metadata files are never overwritten. (The general
//! object-store crates create through other requests: the XML API, or a resumable upload whose
//! precondition rides on the initiating request; the multipart upload is the one request every
//! GCS implementation, emulators included, checks the precondition on.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;

use super::{ObjectError, ObjectMeta, ObjectStore, ObjectStoresError};
use crate::google::{CLOUD_PLATFORM_SCOPE, HttpClient, http_client};
use crate::model::{BucketAuth, BucketRow, parse_gs_url};

/// Google's storage endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";
/// Bound on one request, so a stalled connection cannot hold a catalog request for long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Deletes in flight at once (the JSON API deletes one object per request).
const CONCURRENT_DELETES: usize = 16;
/// Everything but unreserved characters is escaped in an object name within a URL path.
const OBJECT_NAME: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// How the server reaches GCS: Google's endpoint with its own tokens, or an emulator unsigned.
struct GcsClient {
    endpoint: String,
    /// `None`: an emulator, reached without credentials.
    credentials: Option<Arc<dyn gcp_auth::TokenProvider>>,
    /// Built on first use: a server that never touches GCS needs no TLS roots for Google.
    http: tokio::sync::OnceCell<HttpClient>,
}

/// A failed request: the HTTP status (if any answer came), how it failed when none came, and
/// why (for the log only).
struct Failure {
    status: Option<StatusCode>,
    /// The error code when no answer came.
    stage: &'static str,
    reason: String,
}

impl GcsClient {
    async fn send(
        &self,
        method: Method,
        url: String,
        content_type: Option<String>,
        body: Bytes,
    ) -> Result<Bytes, Failure> {
        let failure = |stage: &'static str| {
            move |reason: String| Failure {
                status: None,
                stage,
                reason,
            }
        };
        let http = self
            .http
            .get_or_try_init(|| async { http_client(self.credentials.is_none()) })
            .await
            .map_err(failure("NoClient"))?;
        let mut request = http::Request::builder().method(method).uri(url);
        if let Some(credentials) = &self.credentials {
            let token = credentials
                .token(&[CLOUD_PLATFORM_SCOPE])
                .await
                .map_err(|e| failure("Credentials")(format!("Google credentials: {e}")))?;
            request = request.header(
                http::header::AUTHORIZATION,
                format!("Bearer {}", token.as_str()),
            );
        }
        if let Some(content_type) = content_type {
            request = request.header(http::header::CONTENT_TYPE, content_type);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| failure("RequestNotBuilt")(e.to_string()))?;
        let exchange = async {
            let response = http
                .request(request)
                .await
                .map_err(|e| failure("Unreachable")(e.to_string()))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| failure("ResponseBody")(e.to_string()))?
                .to_bytes();
            if status.is_success() {
                Ok(body)
            } else {
                Err(Failure {
                    status: Some(status),
                    stage: "Answered",
                    reason: google_error(status, &body),
                })
            }
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| failure("Timeout")("timed out".into()))?
    }
}

/// The message of a JSON API error answer (never a token: Google does not echo them).
fn google_error(status: StatusCode, body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Answer {
        error: Detail,
    }
    #[derive(Deserialize)]
    struct Detail {
        message: String,
    }
    match serde_json::from_slice::<Answer>(body) {
        Ok(answer) => format!("HTTP {status}: {}", answer.error.message),
        Err(_) => format!("HTTP {status}"),
    }
}

/// Objects of one GCS bucket.
#[derive(Clone)]
pub struct GcsObjectStore {
    client: Arc<GcsClient>,
    bucket: String,
}

impl std::fmt::Debug for GcsObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcsObjectStore")
            .field("endpoint", &self.client.endpoint)
            .field("bucket", &self.bucket)
            .finish()
    }
}

fn io_err(location: &str, failure: Failure) -> ObjectError {
    let code = match failure.status {
        Some(status) => format!("HTTP {}", status.as_u16()),
        None => failure.stage.to_owned(),
    };
    ObjectError::io(location, code, &failure.reason)
}

impl GcsObjectStore {
    /// The object name of a `gs://` location in this bucket.
    fn key_of<'a>(&self, location: &'a str) -> Result<&'a str, ObjectError> {
        match parse_gs_url(location) {
            Some((bucket, key)) if bucket == self.bucket && !key.contains("/../") => Ok(key),
            _ => Err(ObjectError::OutsideStore(location.to_owned())),
        }
    }

    fn object_url(&self, key: &str) -> String {
        format!(
            "{}/storage/v1/b/{}/o/{}",
            self.client.endpoint,
            utf8_percent_encode(&self.bucket, OBJECT_NAME),
            utf8_percent_encode(key, OBJECT_NAME)
        )
    }

    fn query(pairs: &[(&str, &str)]) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in pairs {
            query.append_pair(name, value);
        }
        query.finish()
    }
}

#[async_trait]
impl ObjectStore for GcsObjectStore {
    async fn get(&self, location: &str) -> Result<Bytes, ObjectError> {
        let key = self.key_of(location)?;
        let url = format!("{}?alt=media", self.object_url(key));
        match self.client.send(Method::GET, url, None, Bytes::new()).await {
            Ok(bytes) => Ok(bytes),
            Err(f) if f.status == Some(StatusCode::NOT_FOUND) => {
                Err(ObjectError::NotFound(location.to_owned()))
            }
            Err(f) => Err(io_err(location, f)),
        }
    }

    async fn put_if_absent(&self, location: &str, bytes: Bytes) -> Result<(), ObjectError> {
        let key = self.key_of(location)?;
        let url = format!(
            "{}/upload/storage/v1/b/{}/o?{}",
            self.client.endpoint,
            utf8_percent_encode(&self.bucket, OBJECT_NAME),
            Self::query(&[
                ("uploadType", "multipart"),
                ("ifGenerationMatch", "0"),
                ("fields", "name"),
            ])
        );
        let boundary = format!("floe-{}", uuid::Uuid::new_v4().simple());
        let resource = serde_json::json!({"name": key, "contentType": "application/json"});
        let mut body = Vec::with_capacity(bytes.len() + 512);
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{resource}\r\n\
                 --{boundary}\r\nContent-Type: application/json\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(&bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let answer = self
            .client
            .send(
                Method::POST,
                url,
                Some(format!("multipart/related; boundary={boundary}")),
                Bytes::from(body),
            )
            .await;
        match answer {
            Ok(_) => Ok(()),
            Err(f) if f.status == Some(StatusCode::PRECONDITION_FAILED) => {
                Err(ObjectError::AlreadyExists(location.to_owned()))
            }
            Err(f) => Err(io_err(location, f)),
        }
    }

    async fn list_detailed(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<ObjectMeta>, ObjectError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Page {
            #[serde(default)]
            items: Vec<Item>,
            next_page_token: Option<String>,
        }
        #[derive(Deserialize)]
        struct Item {
            name: String,
            /// Decimal bytes, as the JSON API gives every 64-bit number.
            #[serde(default)]
            size: Option<String>,
            /// RFC 3339.
            #[serde(default)]
            updated: Option<String>,
        }
        let key_prefix = self.key_of(prefix)?;
        let mut found = Vec::new();
        let mut page_token: Option<String> = None;
        while found.len() < limit {
            let max = (limit - found.len()).min(1000).to_string();
            let mut pairs = vec![
                ("prefix", key_prefix),
                ("maxResults", max.as_str()),
                ("fields", "items(name,size,updated),nextPageToken"),
            ];
            if let Some(token) = &page_token {
                pairs.push(("pageToken", token));
            }
            let url = format!(
                "{}/storage/v1/b/{}/o?{}",
                self.client.endpoint,
                utf8_percent_encode(&self.bucket, OBJECT_NAME),
                Self::query(&pairs)
            );
            let body = self
                .client
                .send(Method::GET, url, None, Bytes::new())
                .await
                .map_err(|f| io_err(prefix, f))?;
            let page: Page = serde_json::from_slice(&body)
                .map_err(|e| ObjectError::io(prefix, "UnreadableListing", &e))?;
            found.extend(page.items.into_iter().map(|item| {
                ObjectMeta {
                    location: format!("gs://{}/{}", self.bucket, item.name),
                    size: item.size.and_then(|s| s.parse().ok()).unwrap_or(0),
                    modified_ms: item
                        .updated
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
                        .map_or(0, |t| t.timestamp_millis().max(0) as u64),
                }
            }));
            match page.next_page_token {
                Some(token) => page_token = Some(token),
                None => break,
            }
        }
        found.truncate(limit);
        Ok(found)
    }

    async fn delete(&self, locations: &[String]) -> Result<(), ObjectError> {
        let requests = locations
            .iter()
            .map(|l| Ok((l.clone(), self.object_url(self.key_of(l)?))))
            .collect::<Result<Vec<_>, ObjectError>>()?;
        let deletes = requests.into_iter().map(|(location, url)| {
            let client = self.client.clone();
            async move {
                match client.send(Method::DELETE, url, None, Bytes::new()).await {
                    Ok(_) => Ok(()),
                    Err(f) if f.status == Some(StatusCode::NOT_FOUND) => Ok(()),
                    Err(f) => Err(io_err(&location, f)),
                }
            }
        });
        futures::stream::iter(deletes)
            .buffer_unordered(CONCURRENT_DELETES)
            .try_collect()
            .await
    }
}

/// GCS stores per bucket, built once and reused; they share one client.
pub struct GcsStores {
    client: Arc<GcsClient>,
    stores: Mutex<HashMap<String, Arc<GcsObjectStore>>>,
}

impl GcsStores {
    /// Google's storage endpoint, reached with `credentials` (the server's own).
    pub fn new(credentials: Arc<dyn gcp_auth::TokenProvider>) -> Self {
        Self::with_client(GcsClient {
            endpoint: DEFAULT_ENDPOINT.into(),
            credentials: Some(credentials),
            http: tokio::sync::OnceCell::new(),
        })
    }

    /// An emulator at `url`, reached without credentials.
    pub fn emulator(url: &str) -> Self {
        Self::with_client(GcsClient {
            endpoint: url.trim_end_matches('/').to_owned(),
            credentials: None,
            http: tokio::sync::OnceCell::new(),
        })
    }

    fn with_client(client: GcsClient) -> Self {
        Self {
            client: Arc::new(client),
            stores: Mutex::new(HashMap::new()),
        }
    }

    /// The store of a GCS bucket configuration: only the catalog's service account reaches it.
    pub fn for_bucket(&self, bucket: &BucketRow) -> Result<Arc<GcsObjectStore>, ObjectStoresError> {
        let invalid = |reason: &str| ObjectStoresError::Invalid {
            nickname: bucket.nickname.clone(),
            reason: reason.into(),
        };
        match bucket.auth {
            BucketAuth::ServiceAccount => {}
            BucketAuth::Anonymous => {
                return Err(invalid("anonymous buckets cannot back Iceberg storage"));
            }
            _ => return Err(invalid("a gcs bucket is reached with the service account")),
        }
        let (name, _) =
            parse_gs_url(&bucket.root).ok_or_else(|| invalid("the root must be a gs:// URL"))?;
        let mut stores = self.stores.lock().expect("store cache");
        let store = stores.entry(name.to_owned()).or_insert_with(|| {
            Arc::new(GcsObjectStore {
                client: self.client.clone(),
                bucket: name.to_owned(),
            })
        });
        Ok(store.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_outside_the_bucket_are_refused_and_names_are_escaped() {
        let stores = GcsStores::emulator("http://127.0.0.1:9/");
        let row = BucketRow {
            nickname: "lake".into(),
            platform: crate::model::Platform::Gcs,
            root: "gs://lake/wh".into(),
            auth: BucketAuth::ServiceAccount,
            endpoint: None,
            region: None,
            path_style: false,
            static_keys_to_writers: false,
        };
        let store = stores.for_bucket(&row).unwrap();
        assert_eq!(store.key_of("gs://lake/a/b.json").unwrap(), "a/b.json");
        for outside in ["gs://other/a", "s3://lake/a", "gs://lake/a/../../x"] {
            assert!(
                matches!(store.key_of(outside), Err(ObjectError::OutsideStore(_))),
                "{outside}"
            );
        }
        assert_eq!(
            store.object_url("wh/t x/m?.json"),
            "http://127.0.0.1:9/storage/v1/b/lake/o/wh%2Ft%20x%2Fm%3F.json"
        );
        assert_eq!(parse_gs_url("gs://lake"), Some(("lake", "")));
        assert_eq!(parse_gs_url("gs:///x"), None);
    }
}
