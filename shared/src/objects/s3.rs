//! `ObjectStore` on Amazon S3 and S3-compatible services.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_credential_types::Credentials;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::Region;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use bytes::Bytes;

use super::ObjectUse;
use super::{ObjectError, ObjectMeta, ObjectStore, ObjectStoresError, safe_code};
use crate::model::{BucketAuth, BucketRow, S3Defaults, bucket_endpoint, parse_s3_url};

/// Objects of one S3 bucket.
#[derive(Clone, Debug)]
pub struct S3ObjectStore {
    client: Client,
    bucket: String,
}

/// A failed S3 request: the service's error code (or the HTTP status of an answer without
/// one, or how the request failed when none came); the SDK's whole error goes to the log only.
fn io_err<E>(location: &str, e: SdkError<E, HttpResponse>) -> ObjectError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let code = match (e.code(), e.raw_response()) {
        (Some(code), _) => safe_code(code),
        (None, Some(raw)) => format!("HTTP {}", raw.status().as_u16()),
        (None, None) => match &e {
            SdkError::ConstructionFailure(_) => "RequestNotBuilt",
            SdkError::TimeoutError(_) => "Timeout",
            SdkError::DispatchFailure(_) => "Unreachable",
            _ => "NoAnswer",
        }
        .to_owned(),
    };
    ObjectError::io(location, code, &DisplayErrorContext(&e))
}

impl S3ObjectStore {
    /// The IAM actions this adapter calls for each use of table storage (`crate::iam`).
    pub fn aws_actions(object_use: ObjectUse) -> &'static [&'static str] {
        match object_use {
            ObjectUse::Get => &["s3:GetObject"],
            // A conditional PutObject (If-None-Match).
            ObjectUse::Put => &["s3:PutObject"],
            // ListObjectsV2.
            ObjectUse::List => &["s3:ListBucket"],
            // DeleteObjects, which IAM authorizes as s3:DeleteObject per key.
            ObjectUse::Delete => &["s3:DeleteObject"],
        }
    }

    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    fn key_of<'a>(&self, location: &'a str) -> Result<&'a str, ObjectError> {
        match parse_s3_url(location) {
            Some((bucket, key)) if bucket == self.bucket && !key.contains("/../") => Ok(key),
            _ => Err(ObjectError::OutsideStore(location.to_owned())),
        }
    }
}

#[async_trait]
impl ObjectStore for S3ObjectStore {
    async fn get(&self, location: &str) -> Result<Bytes, ObjectError> {
        let key = self.key_of(location)?;
        let answer = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        let object = match answer {
            Ok(object) => object,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Err(ObjectError::NotFound(location.to_owned()));
            }
            Err(e) => return Err(io_err(location, e)),
        };
        let body = object
            .body
            .collect()
            .await
            .map_err(|e| ObjectError::io(location, "ResponseBody", &e))?;
        Ok(body.into_bytes())
    }

    async fn put_if_absent(&self, location: &str, bytes: Bytes) -> Result<(), ObjectError> {
        let key = self.key_of(location)?;
        let answer = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .if_none_match("*")
            .content_type("application/json")
            .body(ByteStream::from(bytes))
            .send()
            .await;
        match answer {
            Ok(_) => Ok(()),
            // 412: the object exists; 409: a concurrent conditional write to the same key.
            Err(e)
                if matches!(
                    e.code(),
                    Some("PreconditionFailed" | "ConditionalRequestConflict")
                ) =>
            {
                Err(ObjectError::AlreadyExists(location.to_owned()))
            }
            Err(e) => Err(io_err(location, e)),
        }
    }

    async fn list_detailed(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<ObjectMeta>, ObjectError> {
        let key_prefix = self.key_of(prefix)?;
        let mut found = Vec::new();
        let mut continuation = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(key_prefix)
                .max_keys(i32::try_from(limit - found.len()).unwrap_or(1000).min(1000))
                .set_continuation_token(continuation.take())
                .send()
                .await
                .map_err(|e| io_err(prefix, e))?;
            for object in page.contents() {
                if let Some(key) = object.key() {
                    found.push(ObjectMeta {
                        location: format!("s3://{}/{key}", self.bucket),
                        size: object.size().unwrap_or(0).max(0) as u64,
                        modified_ms: object
                            .last_modified()
                            .and_then(|t| t.to_millis().ok())
                            .map_or(0, |ms| ms.max(0) as u64),
                    });
                    if found.len() >= limit {
                        return Ok(found);
                    }
                }
            }
            match page.next_continuation_token() {
                Some(token) if page.is_truncated() == Some(true) => {
                    continuation = Some(token.to_owned())
                }
                _ => return Ok(found),
            }
        }
    }

    async fn delete(&self, locations: &[String]) -> Result<(), ObjectError> {
        for batch in locations.chunks(1000) {
            let objects = batch
                .iter()
                .map(|l| {
                    let key = self.key_of(l)?;
                    Ok(ObjectIdentifier::builder()
                        .key(key)
                        .build()
                        .expect("object identifier"))
                })
                .collect::<Result<Vec<_>, ObjectError>>()?;
            let delete = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .expect("delete");
            let answer = self
                .client
                .delete_objects()
                .bucket(&self.bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|e| io_err(&batch[0], e))?;
            if let Some(failed) = answer.errors().first() {
                return Err(ObjectError::io(
                    &format!("s3://{}/{}", self.bucket, failed.key().unwrap_or_default()),
                    safe_code(failed.code().unwrap_or_default()),
                    &failed.message().unwrap_or("delete failed"),
                ));
            }
        }
        Ok(())
    }
}

/// The region a bucket configuration uses, falling back to the server's defaults.
pub fn bucket_region(bucket: &BucketRow, defaults: &S3Defaults, sdk: &SdkConfig) -> Option<String> {
    bucket
        .region
        .clone()
        .or_else(|| defaults.region.clone())
        .or_else(|| sdk.region().map(|r| r.to_string()))
}

/// S3 clients per bucket configuration, built once and reused.
pub struct S3Stores {
    sdk: SdkConfig,
    defaults: S3Defaults,
    clients: Mutex<HashMap<String, Arc<S3ObjectStore>>>,
}

impl S3Stores {
    /// What reaching a bucket through the role its configuration names calls (`crate::iam`).
    pub const ROLE_ACTIONS: &[&str] = &["sts:AssumeRole"];

    pub fn new(sdk: SdkConfig, defaults: S3Defaults) -> Self {
        Self {
            sdk,
            defaults,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The store of a bucket configuration. Customer-managed-role buckets are reached through
    /// that role (with its external id), static-key buckets with their keys, others with the
    /// server's own credentials.
    pub async fn for_bucket(
        &self,
        bucket: &BucketRow,
    ) -> Result<Arc<S3ObjectStore>, ObjectStoresError> {
        let (name, _) = parse_s3_url(&bucket.root)
            .ok_or_else(|| invalid(bucket, "the root must be an s3:// URL"))?;
        let cache_key = serde_json::to_string(bucket).expect("bucket serializes");
        if let Some(store) = self.clients.lock().expect("client cache").get(&cache_key) {
            return Ok(store.clone());
        }
        // Building a client awaits the SDK's role provider, whose future is kilobytes: boxed,
        // it is paid for on a miss only, and this future (moved into every caller's, and into
        // a box per request by `ObjectStores`) stays small.
        Box::pin(self.build_client(bucket, name, cache_key)).await
    }

    /// A new client for `bucket`, remembered under `cache_key`.
    async fn build_client(
        &self,
        bucket: &BucketRow,
        name: &str,
        cache_key: String,
    ) -> Result<Arc<S3ObjectStore>, ObjectStoresError> {
        let mut config = aws_sdk_s3::config::Builder::from(&self.sdk);
        if let Some(endpoint) = bucket_endpoint(bucket, &self.defaults) {
            config = config.endpoint_url(endpoint);
        }
        if let Some(region) = bucket_region(bucket, &self.defaults, &self.sdk) {
            config = config.region(Region::new(region));
        }
        config = config.force_path_style(bucket.path_style || self.defaults.path_style);
        match &bucket.auth {
            BucketAuth::Hmac {
                access_key_id,
                secret_access_key,
            } => {
                config = config.credentials_provider(Credentials::new(
                    access_key_id,
                    secret_access_key,
                    None,
                    None,
                    "floe-bucket-hmac",
                ));
            }
            BucketAuth::CustomerManagedRole {
                role_arn,
                external_id,
            } => {
                let mut role = aws_config::sts::AssumeRoleProvider::builder(role_arn)
                    .session_name("floe-catalog")
                    .configure(&self.sdk);
                if let Some(id) = external_id {
                    role = role.external_id(id);
                }
                config = config.credentials_provider(role.build().await);
            }
            BucketAuth::Server => {}
            BucketAuth::ServiceAccount => {
                return Err(invalid(bucket, "service_account auth is for GCS buckets"));
            }
            BucketAuth::Anonymous => {
                return Err(invalid(
                    bucket,
                    "anonymous buckets cannot back Iceberg storage",
                ));
            }
            BucketAuth::SealedHmac { .. } => {
                return Err(invalid(bucket, "its secret is still sealed"));
            }
        }
        let store = Arc::new(S3ObjectStore::new(Client::from_conf(config.build()), name));
        self.clients
            .lock()
            .expect("client cache")
            .insert(cache_key, store.clone());
        Ok(store)
    }
}

/// A bucket configuration this adapter cannot serve, and why.
fn invalid(bucket: &BucketRow, reason: &str) -> ObjectStoresError {
    ObjectStoresError::Invalid {
        nickname: bucket.nickname.clone(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table request awaits this future (boxed once more by `ObjectStores`): what it
    /// needs only on a cache miss must not make every request move kilobytes.
    #[test]
    fn a_client_lookup_is_a_small_future() {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let stores = S3Stores::new(sdk, Default::default());
        let bucket = BucketRow {
            nickname: "b".into(),
            platform: crate::model::Platform::S3,
            root: "s3://b/w".into(),
            auth: BucketAuth::Server,
            endpoint: None,
            region: None,
            path_style: false,
            static_keys_to_writers: false,
        };
        let lookup = stores.for_bucket(&bucket);
        let size = std::mem::size_of_val(&lookup);
        assert!(size <= 1024, "the lookup's future is {size} bytes");
    }

    #[test]
    fn s3_urls_split_into_bucket_and_key() {
        assert_eq!(parse_s3_url("s3://b/a/b.json"), Some(("b", "a/b.json")));
        assert_eq!(parse_s3_url("s3://b"), Some(("b", "")));
        assert_eq!(parse_s3_url("s3:///x"), None);
        assert_eq!(parse_s3_url("file:///x"), None);
    }
}
