//! The `CredentialVendor` port: short-lived storage credentials scoped to one table location.

pub mod gcs;
pub mod policy;
pub mod sts;

use std::sync::Arc;

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Serialize;

use crate::model::{BucketRow, Platform, Principal};

/// Why no credentials were vended; the catalog maps it to its own error at its edge.
#[derive(Debug, Clone, thiserror::Error)]
pub enum VendError {
    /// The bucket configuration cannot back vended credentials (anonymous access, say): the
    /// request cannot succeed as it is (400).
    #[error("{0}")]
    Unusable(String),
    /// The identity service failed or refused; the message is safe to show a client (500).
    #[error("{0}")]
    Failed(String),
}

/// What the credentials may do: readers never receive write access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessLevel {
    Read,
    ReadWrite,
}

/// The spec's StorageCredential: a config map valid under `prefix`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StorageCredential {
    pub prefix: String,
    pub config: BTreeMap<String, String>,
}

/// Credentials plus the flat client config that goes with them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vended {
    pub credentials: Vec<StorageCredential>,
    /// Keys for the LoadTableResult `config` (credentials duplicated, endpoint, region, ...).
    pub config: BTreeMap<String, String>,
}

#[async_trait]
pub trait CredentialVendor: Send + Sync + 'static {
    async fn vend(
        &self,
        bucket: &BucketRow,
        table_location: &str,
        access: AccessLevel,
        principal: &Principal,
    ) -> Result<Vended, VendError>;

    /// The non-secret settings a client needs to reach the bucket (endpoint, region,
    /// addressing), sent on every table answer, with or without vended credentials: a client
    /// that brings its own credentials reaches the right endpoint, and one without any fails
    /// with a clear access error instead of a missing-region one.
    fn storage_config(&self, bucket: &BucketRow) -> BTreeMap<String, String>;
}

/// For storage the engine reaches directly (a local warehouse): nothing to vend.
#[derive(Debug, Default, Clone)]
pub struct NoVending;

#[async_trait]
impl CredentialVendor for NoVending {
    async fn vend(
        &self,
        bucket: &BucketRow,
        _table_location: &str,
        _access: AccessLevel,
        _principal: &Principal,
    ) -> Result<Vended, VendError> {
        match bucket.platform {
            Platform::Local => Ok(Vended::default()),
            _ => Err(VendError::Failed(
                "Credential vending is not configured on this server".into(),
            )),
        }
    }

    fn storage_config(&self, _bucket: &BucketRow) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
}

/// Routes each bucket to the vendor of its platform: STS for S3, downscoped tokens for GCS,
/// nothing for a local warehouse.
pub struct PlatformVendor {
    /// S3 vending; `None` when the server was started without AWS.
    pub s3: Option<Arc<dyn CredentialVendor>>,
    /// GCS vending.
    pub gcs: Option<Arc<gcs::GcsVendor>>,
}

#[async_trait]
impl CredentialVendor for PlatformVendor {
    async fn vend(
        &self,
        bucket: &BucketRow,
        table_location: &str,
        access: AccessLevel,
        principal: &Principal,
    ) -> Result<Vended, VendError> {
        self.vendor_of(bucket)
            .vend(bucket, table_location, access, principal)
            .await
    }

    fn storage_config(&self, bucket: &BucketRow) -> BTreeMap<String, String> {
        self.vendor_of(bucket).storage_config(bucket)
    }
}

impl PlatformVendor {
    fn vendor_of(&self, bucket: &BucketRow) -> &dyn CredentialVendor {
        match (bucket.platform, &self.s3, &self.gcs) {
            (Platform::Gcs, _, Some(gcs)) => &**gcs,
            (Platform::S3 | Platform::Azure, Some(s3), _) => &**s3,
            _ => &NoVending,
        }
    }
}
