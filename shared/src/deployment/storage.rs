//! Which bucket storage a catalog is built with: a function whose routes never reach a bucket
//! (config) links none of the S3, STS or GCS clients.

use std::sync::Arc;

use async_trait::async_trait;

use crate::model::{BucketRow, Platform};
use crate::objects::{ObjectStore, ObjectStores, ObjectStoresError};
use crate::vending::{CredentialVendor, NoVending};

/// The bucket adapters a catalog reads, writes and vends through.
pub type BucketAdapters = (Arc<dyn ObjectStores>, Arc<dyn CredentialVendor>);

/// How a deployment builds its bucket adapters. Passing a function pointer instead of always
/// calling one is what lets the linker drop the storage clients from a function that has none.
#[derive(Clone, Copy)]
pub struct Storage {
    pub(crate) build: Option<super::BuildBuckets>,
}

impl Storage {
    /// Local, S3 and GCS buckets, as the settings configure them.
    pub const BUCKETS: Storage = Storage {
        build: Some(super::platform_buckets),
    };
    /// No bucket storage at all: every bucket access fails cleanly.
    pub const NONE: Storage = Storage { build: None };
}

/// Object storage for a function that serves no route reaching a bucket.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoBucketStorage;

impl NoBucketStorage {
    /// As the adapters a catalog is built with: no object store, and the vendor that has
    /// nothing to vend.
    pub fn adapters() -> BucketAdapters {
        (Arc::new(NoBucketStorage), Arc::new(NoVending))
    }
}

/// Read as "{platform} buckets are not supported for Iceberg storage".
fn not_served(bucket: &BucketRow) -> &'static str {
    match bucket.platform {
        Platform::Local => "Local (not served by this function)",
        Platform::S3 => "S3 (not served by this function)",
        Platform::Azure => "Azure (not served by this function)",
        Platform::Gcs => "GCS (not served by this function)",
    }
}

#[async_trait]
impl ObjectStores for NoBucketStorage {
    async fn for_bucket(
        &self,
        bucket: &BucketRow,
    ) -> Result<Arc<dyn ObjectStore>, ObjectStoresError> {
        Err(ObjectStoresError::Unsupported(not_served(bucket)))
    }
}
