//! Credential vending on GCS: the catalog's own Google access token, exchanged at Google's
//! Security Token Service for a downscoped one whose Credential Access Boundary allows only the
//! table's own prefix (read, or read and write). Engines receive it as `gcs.oauth2.token`.
//!
//! Downscoping needs no IAM permission beyond the source credential's own: Google checks the
//! boundary on every request made with the downscoped token, so the token can never do more
//! than the catalog's service account, and never outside the table's prefix.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::{BodyExt, Full, Limited};
use serde::Deserialize;
use serde_json::{Value, json};

use super::VendError;
use super::sts::vended;
use super::{AccessLevel, CredentialVendor, Vended};
use crate::cache::Cache;
use crate::clock::Clock;
use crate::google::{CLOUD_PLATFORM_SCOPE, HttpClient, http_client, is_https_or_loopback};
use crate::model::{BucketAuth, BucketRow, Platform, Principal, parse_gs_url};

/// Google's Security Token Service.
pub const DEFAULT_STS_ENDPOINT: &str = "https://sts.googleapis.com/v1/token";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Downscoped tokens remembered at most (one per table directory and access level).
const CACHED_TOKENS: u64 = 10_000;
/// Bound on one exchange, so a stalled endpoint cannot hold requests for long.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Answers larger than this are refused: real ones are a few kilobytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Why a GCS vendor cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum GcsVendingError {
    #[error(
        "the token exchange endpoint must be an https:// URL or an http:// URL on a loopback host; got {0}"
    )]
    InvalidEndpoint(String),
}

/// A downscoped access token.
#[derive(Clone, PartialEq)]
pub struct DownscopedToken {
    pub token: String,
    pub expires_at_ms: u64,
}

impl std::fmt::Debug for DownscopedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownscopedToken")
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// Vends downscoped tokens for GCS buckets reached with the catalog's service account.
pub struct GcsVendor {
    source: Arc<dyn gcp_auth::TokenProvider>,
    endpoint: url::Url,
    /// Built on first use: a server that never vends for GCS needs no TLS roots for Google.
    http: tokio::sync::OnceCell<HttpClient>,
    clock: Arc<dyn Clock>,
    /// An emulator's URL, handed to engines as `gcs.service.host`.
    engine_host: Option<String>,
    /// Cached tokens are only handed out with at least this much lifetime left.
    min_remaining_ms: u64,
    cached: Cache<(String, AccessLevel), DownscopedToken>,
    exchanges: AtomicU64,
}

impl GcsVendor {
    /// A vendor exchanging `source`'s tokens at `endpoint` (`DEFAULT_STS_ENDPOINT` in
    /// production); `engine_host` points engines at an emulator.
    pub fn new(
        source: Arc<dyn gcp_auth::TokenProvider>,
        endpoint: &str,
        clock: Arc<dyn Clock>,
        engine_host: Option<String>,
        min_remaining_ms: u64,
    ) -> Result<Self, GcsVendingError> {
        let endpoint = exchange_endpoint(endpoint)?;
        Ok(Self {
            source,
            http: tokio::sync::OnceCell::new(),
            endpoint,
            clock,
            engine_host,
            min_remaining_ms,
            cached: Cache::bounded(CACHED_TOKENS).expiring_after(Duration::from_secs(3600)),
            exchanges: AtomicU64::new(0),
        })
    }

    /// Token exchanges made so far (for measuring the cache).
    pub fn exchanges(&self) -> u64 {
        self.exchanges.load(Ordering::Relaxed)
    }

    async fn token(
        &self,
        location: &str,
        access: AccessLevel,
    ) -> Result<DownscopedToken, VendError> {
        let key = (location.to_owned(), access);
        // As with STS credentials: a cached token with too little lifetime left is dropped and
        // fetched again (once; what this call fetched itself is as fresh as it gets).
        for _ in 0..2 {
            let fetched = AtomicBool::new(false);
            let load = async {
                fetched.store(true, Ordering::Relaxed);
                self.exchange(location, access).await
            };
            let token = self.cached.get_or_load(&key, load).await?;
            if fetched.load(Ordering::Relaxed)
                || token.expires_at_ms >= self.clock.now_ms() + self.min_remaining_ms
            {
                return Ok(token);
            }
            self.cached.remove(&key);
        }
        Err(VendError::Failed(
            "Could not obtain a fresh storage token; retry the request".into(),
        ))
    }

    async fn exchange(
        &self,
        location: &str,
        access: AccessLevel,
    ) -> Result<DownscopedToken, VendError> {
        let failed =
            || VendError::Failed("Could not obtain storage credentials; retry the request".into());
        let boundary = access_boundary(location, access).ok_or_else(|| {
            VendError::Failed("The table location is not a gs:// location".into())
        })?;
        let source = self
            .source
            .token(&[CLOUD_PLATFORM_SCOPE])
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "cannot obtain the server's Google access token");
                failed()
            })?;
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", TOKEN_EXCHANGE)
            .append_pair("subject_token_type", ACCESS_TOKEN)
            .append_pair("requested_token_type", ACCESS_TOKEN)
            .append_pair("subject_token", source.as_str())
            .append_pair("options", &boundary.to_string())
            .finish();
        let request = http::Request::post(self.endpoint.as_str())
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(bytes::Bytes::from(form)))
            .map_err(|_| failed())?;
        let http = self
            .http
            .get_or_try_init(|| async { http_client(self.endpoint.scheme() == "http") })
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "no HTTP client for the token exchange");
                failed()
            })?;
        self.exchanges.fetch_add(1, Ordering::Relaxed);
        let answer = tokio::time::timeout(EXCHANGE_TIMEOUT, async {
            let response = http.request(request).await.map_err(|e| e.to_string())?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, body))
        })
        .await
        .map_err(|_| "timed out".to_owned())
        .and_then(|r| r);
        let (status, body) = answer.map_err(|why| {
            tracing::error!(endpoint = %self.endpoint, why, "token exchange failed");
            failed()
        })?;
        if !status.is_success() {
            // Google's error answers name the problem, never the token.
            tracing::error!(endpoint = %self.endpoint, %status, answer = %String::from_utf8_lossy(&body), "token exchange refused");
            return Err(failed());
        }
        #[derive(Deserialize)]
        struct Answer {
            access_token: String,
            expires_in: Option<u64>,
        }
        let answer: Answer = serde_json::from_slice(&body).map_err(|e| {
            tracing::error!(endpoint = %self.endpoint, error = %e, "token exchange answered no token");
            failed()
        })?;
        // A downscoped token lives as long as its source unless the answer says otherwise.
        let expires_at_ms = match answer.expires_in {
            Some(seconds) => self.clock.now_ms() + seconds * 1000,
            None => u64::try_from(source.expires_at().timestamp_millis()).unwrap_or(0),
        };
        Ok(DownscopedToken {
            token: answer.access_token,
            expires_at_ms,
        })
    }
}

/// The exchange's `options`: a Credential Access Boundary allowing objects under the table's
/// prefix only (and listing them), with the object roles of the access level.
pub fn access_boundary(location: &str, access: AccessLevel) -> Option<Value> {
    let (bucket, key) = parse_gs_url(location)?;
    let prefix = format!("{}/", key.trim_end_matches('/'));
    if prefix == "/" {
        return None;
    }
    let role = match access {
        AccessLevel::Read => "inRole:roles/storage.objectViewer",
        AccessLevel::ReadWrite => "inRole:roles/storage.objectAdmin",
    };
    let expression = format!(
        "resource.name.startsWith('projects/_/buckets/{bucket}/objects/{prefix}') || \
         api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('{prefix}')",
        bucket = cel_string(bucket),
        prefix = cel_string(&prefix),
    );
    Some(json!({
        "accessBoundary": {
            "accessBoundaryRules": [{
                "availableResource": format!("//storage.googleapis.com/projects/_/buckets/{bucket}"),
                "availablePermissions": [role],
                "availabilityCondition": {
                    "title": "Floe table prefix",
                    "expression": expression,
                }
            }]
        }
    }))
}

/// The inside of a single-quoted CEL string literal.
fn cel_string(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\'', "\\'")
}

/// The token exchange endpoint: https, or plain http to a loopback host (a test endpoint).
fn exchange_endpoint(value: &str) -> Result<url::Url, GcsVendingError> {
    url::Url::parse(value)
        .ok()
        .filter(is_https_or_loopback)
        .ok_or_else(|| GcsVendingError::InvalidEndpoint(value.to_owned()))
}

#[async_trait]
impl CredentialVendor for GcsVendor {
    async fn vend(
        &self,
        bucket: &BucketRow,
        table_location: &str,
        access: AccessLevel,
        _principal: &Principal,
    ) -> Result<Vended, VendError> {
        if bucket.platform != Platform::Gcs {
            return Err(VendError::Failed(
                "The GCS vendor was asked for another platform's credentials".into(),
            ));
        }
        match bucket.auth {
            BucketAuth::ServiceAccount => {}
            BucketAuth::Anonymous => {
                return Err(VendError::Unusable(
                    "Anonymous buckets cannot back Iceberg storage".into(),
                ));
            }
            _ => {
                return Err(VendError::Failed(
                    "A gcs bucket configuration names auth other than service_account".into(),
                ));
            }
        }
        let token = self.token(table_location, access).await?;
        let config = self.storage_config(bucket);
        let secrets = BTreeMap::from([
            ("gcs.oauth2.token".to_owned(), token.token),
            (
                "gcs.oauth2.token-expires-at".to_owned(),
                token.expires_at_ms.to_string(),
            ),
        ]);
        Ok(vended(table_location, config, secrets))
    }

    fn storage_config(&self, _bucket: &BucketRow) -> BTreeMap<String, String> {
        let mut config = BTreeMap::new();
        if let Some(host) = &self.engine_host {
            config.insert("gcs.service.host".to_owned(), host.clone());
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boundary_allows_the_table_prefix_only() {
        let read = access_boundary("gs://lake/wh/ns/t-1", AccessLevel::Read).unwrap();
        let rule = &read["accessBoundary"]["accessBoundaryRules"][0];
        assert_eq!(
            rule["availableResource"],
            "//storage.googleapis.com/projects/_/buckets/lake"
        );
        assert_eq!(
            rule["availablePermissions"],
            json!(["inRole:roles/storage.objectViewer"])
        );
        assert_eq!(
            rule["availabilityCondition"]["expression"],
            "resource.name.startsWith('projects/_/buckets/lake/objects/wh/ns/t-1/') || \
             api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('wh/ns/t-1/')"
        );
        let write = access_boundary("gs://lake/wh/ns/t-1/", AccessLevel::ReadWrite).unwrap();
        let rule = &write["accessBoundary"]["accessBoundaryRules"][0];
        assert_eq!(
            rule["availablePermissions"],
            json!(["inRole:roles/storage.objectAdmin"])
        );
        assert!(
            rule["availabilityCondition"]["expression"]
                .as_str()
                .unwrap()
                .contains("objects/wh/ns/t-1/')")
        );
        // Never the whole bucket, never another scheme.
        assert_eq!(access_boundary("gs://lake", AccessLevel::Read), None);
        assert_eq!(access_boundary("s3://lake/t", AccessLevel::Read), None);
        assert_eq!(cel_string(r"a'b\c"), r"a\'b\\c");
    }

    #[test]
    fn exchange_endpoints_are_https_or_loopback() {
        assert!(exchange_endpoint(DEFAULT_STS_ENDPOINT).is_ok());
        assert!(exchange_endpoint("http://127.0.0.1:9/v1/token").is_ok());
        assert!(exchange_endpoint("http://localhost:9/v1/token").is_ok());
        for bad in [
            "http://sts.example.com/v1/token",
            "ftp://127.0.0.1/x",
            "nope",
        ] {
            assert!(exchange_endpoint(bad).is_err(), "{bad}");
        }
    }
}
