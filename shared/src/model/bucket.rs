//! Bucket configurations: where an org's data lives and how the catalog reaches it.

use serde::{Deserialize, Serialize};

/// Which storage platform a bucket configuration points at.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Platform {
    /// A directory on the server's own filesystem (`file://` locations).
    Local,
    /// Amazon S3 or an S3-compatible service.
    S3,
    /// Azure Blob Storage: configurable for repos, refused for Iceberg storage.
    Azure,
    /// Google Cloud Storage (`gs://` locations), reached with the server's Google credentials.
    Gcs,
}

/// How the catalog reaches a bucket.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BucketAuth {
    /// The server's own access (local filesystem).
    Server,
    /// Public-read without credentials: cannot back Iceberg storage.
    Anonymous,
    /// A customer-managed role the catalog assumes to vend scoped credentials.
    CustomerManagedRole {
        role_arn: String,
        external_id: Option<String>,
    },
    /// The server's own Google credentials (a service-account key file or Application Default
    /// Credentials): the catalog reads and writes with them and vends downscoped tokens from
    /// them. GCS only.
    ServiceAccount,
    /// Static HMAC keys, kept by the catalog: engines reach the bucket through remote signing
    /// (or, where the configuration opts in, writers receive the keys). In memory only, or in a deployment's
    /// own settings: rows keep them as `SealedHmac`.
    Hmac {
        access_key_id: String,
        secret_access_key: String,
    },
    /// Static HMAC keys as catalog rows keep them: the secret sealed at rest (see `secrets`),
    /// opened into `Hmac` by the catalog when the bucket is used.
    SealedHmac {
        access_key_id: String,
        sealed_secret: serde_json::Value,
    },
}

/// A bucket configuration of an org, addressed by its nickname.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BucketRow {
    pub nickname: String,
    pub platform: Platform,
    /// Root URL, e.g. `file:///srv/warehouse`, `s3://bucket/prefix` or `gs://bucket/prefix`,
    /// without a trailing `/`.
    pub root: String,
    pub auth: BucketAuth,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub path_style: bool,
    /// Static keys only: hand them to principals with write access on a table, for engines that
    /// cannot remote-sign. An explicit opt-in: the keys reach the whole bucket, are not scoped
    /// to the table and never expire. Never for readers, never behind a public namespace.
    #[serde(default)]
    pub static_keys_to_writers: bool,
}

/// Splits `s3://bucket/key` into bucket and key.
pub fn parse_s3_url(location: &str) -> Option<(&str, &str)> {
    let rest = location
        .strip_prefix("s3://")
        .or_else(|| location.strip_prefix("s3a://"))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    (!bucket.is_empty()).then_some((bucket, key))
}

/// Splits `gs://bucket/key` into bucket and key.
pub fn parse_gs_url(location: &str) -> Option<(&str, &str)> {
    let rest = location.strip_prefix("gs://")?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    (!bucket.is_empty()).then_some((bucket, key))
}

/// Splits an object-store URL (`s3://` or `gs://`) into bucket and key.
pub fn parse_bucket_url(location: &str) -> Option<(&str, &str)> {
    parse_s3_url(location).or_else(|| parse_gs_url(location))
}

/// Settings every S3 client starts from; a bucket configuration's own endpoint, region and
/// credentials override them.
#[derive(Clone, Debug, Default)]
pub struct S3Defaults {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub path_style: bool,
}

/// The endpoint, region and addressing keys of an S3 bucket configuration, `defaults` filling
/// what it leaves out.
pub fn s3_client_config(
    bucket: &BucketRow,
    defaults: &S3Defaults,
) -> std::collections::BTreeMap<String, String> {
    let mut config = std::collections::BTreeMap::new();
    if let Some(endpoint) = bucket_endpoint(bucket, defaults) {
        config.insert("s3.endpoint".into(), endpoint);
        config.insert(
            "s3.path-style-access".into(),
            (bucket.path_style || defaults.path_style).to_string(),
        );
    }
    if let Some(region) = bucket.region.clone().or_else(|| defaults.region.clone()) {
        config.insert("s3.region".into(), region.clone());
        config.insert("client.region".into(), region);
    }
    config
}

/// The endpoint a bucket configuration uses, if not AWS's own.
pub fn bucket_endpoint(bucket: &BucketRow, defaults: &S3Defaults) -> Option<String> {
    bucket
        .endpoint
        .clone()
        .or_else(|| defaults.endpoint.clone())
}
