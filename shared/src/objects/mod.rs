//! The `ObjectStore` port: metadata files, marker files and prefix checks in table storage.
//!
//! Locations are full URLs (`file:///...`, `s3://bucket/...`, `gs://bucket/...`). Writes never
//! overwrite: a metadata file, once written, is immutable, which is what makes the pointer swap
//! safe.

pub mod gcs;
pub mod local;
pub mod observed;
pub mod s3;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::model::BucketRow;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ObjectError {
    #[error("object not found: {0}")]
    NotFound(String),
    #[error("object already exists: {0}")]
    AlreadyExists(String),
    #[error("location {0} is outside this store")]
    OutsideStore(String),
    /// A request that failed: `code` is the storage's error code (S3's `AccessDenied`, GCS's
    /// `HTTP 403`, an I/O error kind, or how the request failed when no answer came). The
    /// detail (messages, what the endpoint answered) is logged where the error is made, never
    /// carried, so no answer can reflect it.
    #[error("storage request for {location} failed: {code}")]
    Io { location: String, code: String },
}

impl ObjectError {
    /// The storage error code, as an answer may show it.
    pub fn code(&self) -> &str {
        match self {
            ObjectError::NotFound(_) => "NotFound",
            ObjectError::AlreadyExists(_) => "AlreadyExists",
            ObjectError::OutsideStore(_) => "OutsideStore",
            ObjectError::Io { code, .. } => code,
        }
    }

    /// A failed request, its detail logged here and dropped.
    pub(crate) fn io(
        location: &str,
        code: impl Into<String>,
        detail: &dyn std::fmt::Display,
    ) -> Self {
        let code = code.into();
        tracing::warn!(location, code, detail = %detail, "storage request failed");
        ObjectError::Io {
            location: location.to_owned(),
            code,
        }
    }
}

/// An error code from a remote answer, as an answer may carry it: a short token of letters,
/// digits, `.`, `-` and `_`, else `Unrecognized` (a remote's free text is never repeated).
pub(crate) fn safe_code(code: &str) -> String {
    let token = !code.is_empty()
        && code.len() <= 64
        && code
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if token {
        code.to_owned()
    } else {
        "Unrecognized".to_owned()
    }
}

/// Object access within one bucket configuration.
/// One way of using table storage (`ObjectStore`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectUse {
    Get,
    Put,
    List,
    Delete,
}

impl ObjectUse {
    pub const ALL: [ObjectUse; 4] = [
        ObjectUse::Get,
        ObjectUse::Put,
        ObjectUse::List,
        ObjectUse::Delete,
    ];
}

/// One listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub location: String,
    pub size: u64,
    /// When the object was last written, in Unix milliseconds (storage's clock).
    pub modified_ms: u64,
}

#[async_trait]
pub trait ObjectStore: Send + Sync + 'static {
    async fn get(&self, location: &str) -> Result<Bytes, ObjectError>;

    /// Writes only when nothing exists at `location` yet.
    async fn put_if_absent(&self, location: &str, bytes: Bytes) -> Result<(), ObjectError>;

    /// Up to `limit` objects under `prefix` (a location ending in `/`), with their size and
    /// age: what storage reclamation needs to report bytes and to spare young files.
    async fn list_detailed(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<ObjectMeta>, ObjectError>;

    /// Up to `limit` object locations under `prefix` (a location ending in `/`).
    async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<String>, ObjectError> {
        Ok(self
            .list_detailed(prefix, limit)
            .await?
            .into_iter()
            .map(|o| o.location)
            .collect())
    }

    /// Deletes objects; absent ones are not an error.
    async fn delete(&self, locations: &[String]) -> Result<(), ObjectError>;
}

/// Picks the object store that serves a bucket configuration.
#[async_trait]
pub trait ObjectStores: Send + Sync + 'static {
    async fn for_bucket(
        &self,
        bucket: &BucketRow,
    ) -> Result<Arc<dyn ObjectStore>, ObjectStoresError>;
}

#[derive(Debug, thiserror::Error)]
pub enum ObjectStoresError {
    #[error("{0} buckets are not supported for Iceberg storage")]
    Unsupported(&'static str),
    #[error("bucket configuration '{nickname}' is invalid: {reason}")]
    Invalid { nickname: String, reason: String },
}

/// Whether `location` is `root` itself or below it (segment-wise, no `..`).
pub fn is_within(location: &str, root: &str) -> bool {
    let location = location.trim_end_matches('/');
    let root = root.trim_end_matches('/');
    let below = location == root
        || location
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'));
    below && !location.split('/').any(|seg| seg == ".." || seg == ".")
}

/// Joins a directory-like location and a relative path with exactly one `/`.
pub fn join(base: &str, rest: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        rest.trim_start_matches('/')
    )
}

/// Routes each bucket configuration to the adapter of its platform.
pub struct PlatformStores {
    pub local: local::LocalObjectStores,
    /// S3 access; `None` when the server was started without it.
    pub s3: Option<s3::S3Stores>,
    /// GCS access; `None` when the server was started without it.
    pub gcs: Option<gcs::GcsStores>,
}

#[async_trait]
impl ObjectStores for PlatformStores {
    async fn for_bucket(
        &self,
        bucket: &BucketRow,
    ) -> Result<Arc<dyn ObjectStore>, ObjectStoresError> {
        use crate::model::Platform;
        match bucket.platform {
            Platform::S3 => match &self.s3 {
                Some(s3) => Ok(s3.for_bucket(bucket).await?),
                None => Err(ObjectStoresError::Unsupported(
                    "S3 (not configured on this server)",
                )),
            },
            Platform::Gcs => match &self.gcs {
                Some(gcs) => Ok(gcs.for_bucket(bucket)?),
                None => Err(ObjectStoresError::Unsupported(
                    "GCS (not configured on this server)",
                )),
            },
            Platform::Local | Platform::Azure => self.local.for_bucket(bucket).await,
        }
    }
}
