//! Credential vending with STS AssumeRole, scoped by a session policy, plus a cache that
//! collapses concurrent misses into one STS call and never hands out nearly expired credentials.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use aws_sdk_sts::Client;

use super::VendError;
use super::policy::{MAX_SESSION_POLICY_CHARS, arn_partition, session_name, session_policy};
use super::{AccessLevel, CredentialVendor, StorageCredential, Vended};
use crate::cache::Cache;
use crate::clock::Clock;
use crate::model::{BucketAuth, BucketRow, Platform, Principal, S3Defaults, s3_client_config};

/// Credential sets remembered at most (one per role, table directory and access level).
const CACHED_CREDENTIALS: u64 = 10_000;

/// Vended credentials live for one hour.
pub const SESSION_SECONDS: i32 = 3600;

/// Short-lived S3 credentials.
#[derive(Debug, Clone, PartialEq)]
pub struct TemporaryCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    pub expires_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    role_arn: String,
    location: String,
    access: AccessLevel,
}

/// Vends through STS for role-backed S3 buckets and passes static HMAC keys through.
pub struct StsVendor {
    client: Client,
    clock: Arc<dyn Clock>,
    defaults: S3Defaults,
    /// Role for S3 buckets that the server reaches with its own credentials.
    default_role_arn: Option<String>,
    /// Cached credentials are only handed out with at least this much lifetime left.
    min_remaining_ms: u64,
    /// Credentials by role, location and level; concurrent misses share one STS call.
    cached: Cache<CacheKey, TemporaryCredentials>,
    sts_calls: AtomicU64,
}

impl StsVendor {
    /// What vending calls (crate::iam).
    pub const AWS_ACTIONS: &[&str] = &["sts:AssumeRole"];

    pub fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        defaults: S3Defaults,
        default_role_arn: Option<String>,
        min_remaining_ms: u64,
    ) -> Self {
        Self {
            client,
            clock,
            defaults,
            default_role_arn,
            min_remaining_ms,
            cached: Cache::bounded(CACHED_CREDENTIALS)
                .expiring_after(std::time::Duration::from_secs(SESSION_SECONDS as u64)),
            sts_calls: AtomicU64::new(0),
        }
    }

    /// STS AssumeRole calls made so far (for measuring the cache).
    pub fn sts_calls(&self) -> u64 {
        self.sts_calls.load(Ordering::Relaxed)
    }

    async fn assume(
        &self,
        role_arn: &str,
        external_id: Option<&str>,
        location: &str,
        access: AccessLevel,
        principal: &Principal,
    ) -> Result<TemporaryCredentials, VendError> {
        let key = CacheKey {
            role_arn: role_arn.to_owned(),
            location: location.to_owned(),
            access,
        };
        // Credentials are handed out only with `min_remaining_ms` left: a cached set that is
        // older is dropped and fetched again (once; what this call fetched itself is fresh).
        for _ in 0..2 {
            let fetched = AtomicBool::new(false);
            let load = async {
                fetched.store(true, Ordering::Relaxed);
                self.call_sts(role_arn, external_id, location, access, principal)
                    .await
            };
            let credentials = self.cached.get_or_load(&key, load).await?;
            let now = self.clock.now_ms();
            if fetched.load(Ordering::Relaxed)
                || credentials.expires_at_ms >= now + self.min_remaining_ms
            {
                return Ok(credentials);
            }
            self.cached.remove(&key);
        }
        Err(VendError::Failed(
            "Could not obtain fresh storage credentials; retry the request".into(),
        ))
    }

    async fn call_sts(
        &self,
        role_arn: &str,
        external_id: Option<&str>,
        location: &str,
        access: AccessLevel,
        principal: &Principal,
    ) -> Result<TemporaryCredentials, VendError> {
        let partition = arn_partition(role_arn)
            .ok_or_else(|| VendError::Failed("The bucket's role is not a valid role ARN".into()))?;
        let policy = session_policy(partition, location, access).ok_or_else(|| {
            VendError::Failed("The table location is not an s3:// location".into())
        })?;
        if policy.len() > MAX_SESSION_POLICY_CHARS {
            return Err(VendError::Failed(
                "The table location is too long for a scoped session policy".into(),
            ));
        }
        self.sts_calls.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .client
            .assume_role()
            .role_arn(role_arn)
            .role_session_name(session_name(&principal.id, location))
            .policy(policy)
            .duration_seconds(SESSION_SECONDS)
            .set_external_id(external_id.map(str::to_owned))
            .send()
            .await
            .map_err(|e| {
                tracing::error!(error = ?e, role_arn, "AssumeRole failed");
                VendError::Failed("Could not obtain storage credentials; retry the request".into())
            })?;
        let credentials = answer
            .credentials()
            .ok_or_else(|| VendError::Failed("STS returned no credentials".into()))?;
        let fresh = TemporaryCredentials {
            access_key_id: credentials.access_key_id().to_owned(),
            secret_access_key: credentials.secret_access_key().to_owned(),
            session_token: credentials.session_token().to_owned(),
            expires_at_ms: credentials.expiration().to_millis().unwrap_or(0).max(0) as u64,
        };
        Ok(fresh)
    }

    /// Endpoint, region and addressing keys that let a client reach the bucket unconfigured.
    fn client_config(&self, bucket: &BucketRow) -> BTreeMap<String, String> {
        s3_client_config(bucket, &self.defaults)
    }
}

/// Both spec forms: the `storage-credentials` entry for the table location and the same keys in
/// the flat config.
pub fn vended(
    location: &str,
    mut config: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
) -> Vended {
    let mut credential_config = config.clone();
    credential_config.extend(secrets.clone());
    config.extend(secrets);
    Vended {
        credentials: vec![StorageCredential {
            prefix: location.to_owned(),
            config: credential_config,
        }],
        config,
    }
}

#[async_trait]
impl CredentialVendor for StsVendor {
    async fn vend(
        &self,
        bucket: &BucketRow,
        table_location: &str,
        access: AccessLevel,
        principal: &Principal,
    ) -> Result<Vended, VendError> {
        if bucket.platform == Platform::Local {
            return Ok(Vended::default());
        }
        let config = self.client_config(bucket);
        let secrets = match &bucket.auth {
            BucketAuth::Hmac {
                access_key_id,
                secret_access_key,
            } => BTreeMap::from([
                ("s3.access-key-id".to_owned(), access_key_id.clone()),
                ("s3.secret-access-key".to_owned(), secret_access_key.clone()),
            ]),
            BucketAuth::CustomerManagedRole {
                role_arn,
                external_id,
            } => {
                let c = self
                    .assume(
                        role_arn,
                        external_id.as_deref(),
                        table_location,
                        access,
                        principal,
                    )
                    .await?;
                temporary(&c)
            }
            BucketAuth::Server => {
                let role = self.default_role_arn.as_deref().ok_or_else(|| {
                    VendError::Failed("No vending role is configured for this bucket".into())
                })?;
                let c = self
                    .assume(role, None, table_location, access, principal)
                    .await?;
                temporary(&c)
            }
            BucketAuth::ServiceAccount => {
                return Err(VendError::Failed(
                    "service_account auth is for GCS buckets".into(),
                ));
            }
            BucketAuth::Anonymous => {
                return Err(VendError::Unusable(
                    "Anonymous buckets cannot back Iceberg storage".into(),
                ));
            }
            BucketAuth::SealedHmac { .. } => {
                return Err(VendError::Failed(
                    "A bucket's sealed secret reached the vendor unopened".into(),
                ));
            }
        };
        Ok(vended(table_location, config, secrets))
    }

    fn storage_config(&self, bucket: &BucketRow) -> BTreeMap<String, String> {
        self.client_config(bucket)
    }
}

fn temporary(c: &TemporaryCredentials) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("s3.access-key-id".to_owned(), c.access_key_id.clone()),
        (
            "s3.secret-access-key".to_owned(),
            c.secret_access_key.clone(),
        ),
        ("s3.session-token".to_owned(), c.session_token.clone()),
        (
            "s3.session-token-expires-at-ms".to_owned(),
            c.expires_at_ms.to_string(),
        ),
    ])
}
