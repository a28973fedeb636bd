//! The composition root of every deployment: builds the catalog that `Settings` describe (the
//! store, object stores and credential vendor they name) and runs the first-start bootstrap of
//! the development org. `floe serve`, the admin commands, the bench and every Lambda function
//! start here, so they cannot differ in how they are put together.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::auth::oidc::{OidcConfig, OidcConfigError, OidcVerifier};
use crate::bootstrap::{self, DevBootstrap, DevSettings};
use crate::catalog::Catalog;
use crate::clock::{Clock, SystemClock};
use crate::config::{DEFAULT_CREDENTIALS_MIN_REMAINING_SECS, Settings, StoreKind};
use crate::error::CatalogError;
use crate::google::GoogleCredentials;
use crate::model::{BucketAuth, BucketRow, Platform, S3Defaults, parse_gs_url, parse_s3_url};
use crate::objects::gcs::GcsStores;
use crate::objects::local::LocalObjectStores;
use crate::objects::s3::S3Stores;
use crate::objects::{ObjectStores, PlatformStores};
use crate::secrets::{KmsSealer, LocalKeySealer, SecretError, SecretSealer};
use crate::store::MetaStore;
use crate::store::dynamodb::DynamoStore;
use crate::store::embedded::{EmbeddedStore, OpenError};
use crate::vending::gcs::{GcsVendingError, GcsVendor};
use crate::vending::sts::StsVendor;
use crate::vending::{CredentialVendor, PlatformVendor};

mod storage;
pub use storage::{BucketAdapters, NoBucketStorage, Storage};

#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("bootstrap failed: {0}")]
    Bootstrap(#[from] CatalogError),
    #[error("invalid settings: {0}")]
    Settings(String),
    #[error("invalid OIDC settings: {0}")]
    Oidc(#[from] OidcConfigError),
    #[error("secret sealing: {0}")]
    Secrets(#[from] SecretError),
    #[error("GCS vending: {0}")]
    GcsVending(#[from] GcsVendingError),
}

/// Where the embedded store lives inside a data directory.
pub fn store_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("catalog")
}

pub use aws_config::SdkConfig;
pub use aws_sdk_dynamodb::Client as DynamoClient;

/// The AWS SDK configuration: standard AWS_* variables, shared config files and credentials.
pub async fn aws_config() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}

/// The S3 endpoint, region and addressing the deployment uses by default.
fn s3_defaults(settings: &Settings, sdk: &aws_config::SdkConfig) -> S3Defaults {
    let endpoint = settings
        .s3_endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL_S3").ok())
        .or_else(|| sdk.endpoint_url().map(str::to_owned));
    S3Defaults {
        path_style: settings.s3_path_style.unwrap_or(endpoint.is_some()),
        endpoint,
        region: settings
            .s3_region
            .clone()
            .or_else(|| sdk.region().map(|r| r.to_string())),
    }
}

/// Opens the store named by the settings.
pub async fn open_store(
    settings: &Settings,
    sdk: Option<&aws_config::SdkConfig>,
) -> Result<Arc<dyn MetaStore>, DeploymentError> {
    match (settings.store, sdk) {
        (StoreKind::Embedded, _) => Ok(Arc::new(EmbeddedStore::open(&store_dir(
            &settings.data_dir,
        ))?)),
        (StoreKind::Dynamodb, Some(sdk)) => Ok(Arc::new(DynamoStore::new(
            aws_sdk_dynamodb::Client::new(sdk),
            &settings.dynamodb_table,
        ))),
        (StoreKind::Dynamodb, None) => Err(DeploymentError::Settings(
            "the DynamoDB store needs AWS settings".into(),
        )),
    }
}

/// How secrets kept in catalog rows are sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealerChoice {
    /// Envelope encryption under this KMS key (FLOE_SECRETS_KMS_KEY).
    Kms(String),
    /// AES-256-GCM under the key file at this path (the embedded store without a KMS key).
    LocalKeyFile(PathBuf),
    /// No sealer: a DynamoDB store without a KMS key. A key file would have to live on every
    /// function's disk, and a key kept in the table would protect nothing, so sealing fails
    /// with [`SecretError::Unconfigured`] until FLOE_SECRETS_KMS_KEY is set.
    Unconfigured,
}

/// The sealer the settings select: a KMS key wins; else the embedded store's key file.
pub fn sealer_choice(settings: &Settings) -> SealerChoice {
    // An empty key (an unset template parameter, say) means none.
    match settings
        .secrets_kms_key
        .as_deref()
        .filter(|k| !k.is_empty())
    {
        Some(key) => SealerChoice::Kms(key.to_owned()),
        None => match settings.store {
            StoreKind::Embedded => {
                SealerChoice::LocalKeyFile(crate::secrets::local::key_file(&settings.data_dir))
            }
            StoreKind::Dynamodb => SealerChoice::Unconfigured,
        },
    }
}

/// Opens the sealer the settings select (creating the local key file on first start), or
/// `None` when the deployment has none. A bad key file stops the start.
pub fn open_sealer(
    settings: &Settings,
    sdk: Option<&aws_config::SdkConfig>,
) -> Result<Option<Arc<dyn SecretSealer>>, DeploymentError> {
    match sealer_choice(settings) {
        SealerChoice::Kms(key) => {
            let sdk = sdk.ok_or_else(|| {
                DeploymentError::Settings("FLOE_SECRETS_KMS_KEY needs AWS settings".into())
            })?;
            tracing::info!(kms_key = %key, "secrets sealed with KMS data keys");
            Ok(Some(Arc::new(KmsSealer::new(
                aws_sdk_kms::Client::new(sdk),
                key,
            ))))
        }
        SealerChoice::LocalKeyFile(path) => {
            Ok(Some(Arc::new(LocalKeySealer::open_or_create(&path)?)))
        }
        SealerChoice::Unconfigured => {
            tracing::info!(
                "no FLOE_SECRETS_KMS_KEY: bucket configurations with static keys cannot be stored"
            );
            Ok(None)
        }
    }
}

/// The dev org's default bucket: FLOE_DEV_BUCKET on S3 or GCS, else the local warehouse.
fn dev_bucket(
    settings: &Settings,
    defaults: Option<&S3Defaults>,
) -> Result<BucketRow, DeploymentError> {
    let Some(url) = &settings.dev_bucket else {
        return Ok(bootstrap::local_bucket(
            &settings.data_dir.join("warehouse"),
        )?);
    };
    if parse_gs_url(url).is_some() {
        return Ok(BucketRow {
            nickname: "default".into(),
            platform: Platform::Gcs,
            root: url.trim_end_matches('/').to_owned(),
            auth: BucketAuth::ServiceAccount,
            endpoint: None,
            region: None,
            path_style: false,
            static_keys_to_writers: false,
        });
    }
    if parse_s3_url(url).is_none() {
        return Err(DeploymentError::Settings(format!(
            "FLOE_DEV_BUCKET must be s3://bucket[/prefix] or gs://bucket[/prefix], not {url}"
        )));
    }
    let defaults = defaults.cloned().unwrap_or_default();
    let auth = match (
        &settings.vending_role_arn,
        &settings.s3_access_key_id,
        &settings.s3_secret_access_key,
    ) {
        (Some(role), _, _) => BucketAuth::CustomerManagedRole {
            role_arn: role.clone(),
            external_id: None,
        },
        (None, Some(key), Some(secret)) => BucketAuth::Hmac {
            access_key_id: key.clone(),
            secret_access_key: secret.clone(),
        },
        _ => BucketAuth::Server,
    };
    Ok(BucketRow {
        nickname: "default".into(),
        platform: Platform::S3,
        root: url.trim_end_matches('/').to_owned(),
        auth,
        endpoint: defaults.endpoint,
        region: defaults.region,
        path_style: defaults.path_style,
        static_keys_to_writers: settings.s3_static_keys_to_writers,
    })
}

/// The OIDC verifier the settings describe, or `None` when OIDC is off. Checked before
/// anything else is opened, so a misconfigured deployment stops at once.
pub fn oidc_verifier(settings: &Settings) -> Result<Option<OidcVerifier>, DeploymentError> {
    let Some(config) = OidcConfig::from_settings(
        settings.oidc_issuer.as_deref(),
        settings.oidc_audience.as_deref(),
        settings.oidc_jwks.as_deref(),
    )?
    else {
        return Ok(None);
    };
    let verifier = OidcVerifier::new(config)?
        .with_cache_ttl(std::time::Duration::from_secs(settings.auth_cache_secs));
    tracing::info!(issuer = %verifier.issuer(), "OIDC users enabled");
    Ok(Some(verifier))
}

/// A dev token must be an api-client token: only those are looked up in the store, any other
/// bearer token is taken for a JWT.
fn check_dev_token(settings: &Settings) -> Result<(), DeploymentError> {
    match settings.dev_token.as_deref() {
        Some(token) if !token.is_empty() && !crate::auth::is_api_client_token(token) => {
            Err(DeploymentError::Settings(format!(
                "FLOE_DEV_TOKEN must start with '{}'",
                crate::auth::TOKEN_PREFIX
            )))
        }
        _ => Ok(()),
    }
}

/// Builds the catalog the settings describe and bootstraps the development org.
pub async fn open_catalog(
    settings: &Settings,
) -> Result<(Arc<Catalog>, DevBootstrap), DeploymentError> {
    open_catalog_wrapped(settings, Wraps::default()).await
}

/// As `open_catalog`, with the bucket storage a function's routes need (none, for config).
pub async fn open_catalog_for(
    settings: &Settings,
    storage: Storage,
) -> Result<(Arc<Catalog>, DevBootstrap), DeploymentError> {
    open_catalog_with(settings, Wraps::default(), storage).await
}

pub use crate::core::Wrap;

/// Wrappers around the adapters a catalog is built with (to count their requests, say).
pub struct Wraps {
    pub store: Wrap<dyn MetaStore>,
    pub objects: Wrap<dyn ObjectStores>,
    /// A clock other than the system's: the maintenance bench ages its table with one.
    pub clock: Option<Arc<dyn Clock>>,
}

impl Default for Wraps {
    fn default() -> Self {
        Self {
            store: Box::new(|store| store),
            objects: Box::new(|objects| objects),
            clock: None,
        }
    }
}

impl Wraps {
    /// Only the store wrapped.
    pub fn store(
        wrap: impl FnOnce(Arc<dyn MetaStore>) -> Arc<dyn MetaStore> + Send + 'static,
    ) -> Self {
        Self {
            store: Box::new(wrap),
            ..Self::default()
        }
    }
}

/// As `open_catalog`, with adapters wrapped.
pub async fn open_catalog_wrapped(
    settings: &Settings,
    wraps: Wraps,
) -> Result<(Arc<Catalog>, DevBootstrap), DeploymentError> {
    open_catalog_with(settings, wraps, Storage::BUCKETS).await
}

async fn open_catalog_with(
    settings: &Settings,
    wraps: Wraps,
    storage: Storage,
) -> Result<(Arc<Catalog>, DevBootstrap), DeploymentError> {
    let wrap = wraps.store;
    check_dev_token(settings)?;
    let oidc = oidc_verifier(settings)?;
    let sdk = if settings.uses_aws() {
        Some(aws_config().await)
    } else {
        None
    };
    let store = wrap(open_store(settings, sdk.as_ref()).await?);
    let sealer = open_sealer(settings, sdk.as_ref())?;
    let clock: Arc<dyn Clock> = wraps.clock.unwrap_or_else(|| Arc::new(SystemClock));
    let defaults = sdk.as_ref().map(|sdk| s3_defaults(settings, sdk));
    let boot = if settings.bootstrap {
        let dev = DevSettings {
            org: &settings.dev_org,
            bucket: dev_bucket(settings, defaults.as_ref())?,
            // An empty token (an unset template parameter, say) means none.
            token: settings.dev_token.as_deref().filter(|t| !t.is_empty()),
        };
        bootstrap::bootstrap_dev(&*store, &*clock, &dev, sealer.as_deref()).await?
    } else {
        DevBootstrap {
            created_org: false,
            generated_token: None,
        }
    };
    let (objects, vendor) = match storage.build {
        Some(build) => build(BucketParts {
            settings,
            sdk: sdk.as_ref(),
            defaults,
            clock: clock.clone(),
        })?,
        None => NoBucketStorage::adapters(),
    };
    let mut builder = crate::core::Builder::new(store, objects, vendor)
        .clock(clock)
        .wrap_objects(wraps.objects)
        .auth_cache_ttl(std::time::Duration::from_secs(settings.auth_cache_secs))
        .idempotency_lifetime(settings.idempotency_key_lifetime.0)
        .event_retention(settings.event_retention)
        .private_endpoints(settings.allow_private_endpoints)
        .plan_entries_per_answer(settings.plan_entries_per_answer)
        .plan_cache_bytes(settings.plan_cache_mb.saturating_mul(1024 * 1024));
    if let Some(secret) = &settings.page_token_secret {
        builder = builder.page_token_key(secret.as_bytes());
    }
    if let Some(oidc) = oidc {
        builder = builder.oidc(Arc::new(oidc));
    }
    if let Some(sealer) = sealer {
        builder = builder.sealer(sealer);
    }
    let catalog = Catalog::new(builder.build());
    Ok((Arc::new(catalog), boot))
}

/// What building bucket adapters reads from the deployment.
pub(crate) struct BucketParts<'a> {
    settings: &'a Settings,
    sdk: Option<&'a aws_config::SdkConfig>,
    defaults: Option<S3Defaults>,
    clock: Arc<dyn Clock>,
}

pub(crate) type BuildBuckets = fn(BucketParts<'_>) -> Result<BucketAdapters, DeploymentError>;

/// Local, S3 (with STS vending) and GCS buckets, as the settings configure them.
fn platform_buckets(parts: BucketParts<'_>) -> Result<BucketAdapters, DeploymentError> {
    let (s3, s3_vendor): (_, Option<Arc<dyn CredentialVendor>>) = match (parts.sdk, parts.defaults)
    {
        (Some(sdk), Some(defaults)) => (
            Some(S3Stores::new(sdk.clone(), defaults.clone())),
            Some(Arc::new(StsVendor::new(
                aws_sdk_sts::Client::new(sdk),
                parts.clock.clone(),
                defaults,
                parts.settings.vending_role_arn.clone(),
                parts.settings.credentials_min_remaining_secs * 1000,
            ))),
        ),
        _ => (None, None),
    };
    // GCS is always on: its credentials are looked for only when a GCS bucket is used.
    let google = Arc::new(GoogleCredentials::new(
        parts.settings.gcs_credentials.clone(),
    ));
    let gcs = match &parts.settings.gcs_emulator {
        Some(emulator) => GcsStores::emulator(emulator),
        None => GcsStores::new(google.clone()),
    };
    let gcs_vendor = GcsVendor::new(
        google,
        &parts.settings.gcs_token_exchange_endpoint,
        parts.clock.clone(),
        parts.settings.gcs_emulator.clone(),
        parts.settings.credentials_min_remaining_secs * 1000,
    )?;
    let objects = PlatformStores {
        local: LocalObjectStores,
        s3,
        gcs: Some(gcs),
    };
    let vendor: Arc<dyn CredentialVendor> = Arc::new(PlatformVendor {
        s3: s3_vendor,
        gcs: Some(Arc::new(gcs_vendor)),
    });
    Ok((Arc::new(objects), vendor))
}

/// A local catalog (embedded store, local warehouse) in `data_dir`, as the bench and tests use.
pub async fn open(
    data_dir: &Path,
    org: &str,
    token: Option<&str>,
) -> Result<(Arc<Catalog>, DevBootstrap), DeploymentError> {
    open_wrapped(data_dir, org, token, Wraps::default()).await
}

/// As `open`, with adapters wrapped.
pub async fn open_wrapped(
    data_dir: &Path,
    org: &str,
    token: Option<&str>,
    wraps: Wraps,
) -> Result<(Arc<Catalog>, DevBootstrap), DeploymentError> {
    let settings = Settings {
        data_dir: data_dir.to_path_buf(),
        dev_org: org.to_owned(),
        dev_token: token.map(str::to_owned),
        bootstrap: true,
        store: StoreKind::Embedded,
        dynamodb_table: String::new(),
        dev_bucket: None,
        s3_endpoint: None,
        s3_region: None,
        s3_path_style: None,
        vending_role_arn: None,
        s3_access_key_id: None,
        s3_secret_access_key: None,
        s3_static_keys_to_writers: false,
        allow_private_endpoints: false,
        credentials_min_remaining_secs: DEFAULT_CREDENTIALS_MIN_REMAINING_SECS,
        auth_cache_secs: 10,
        idempotency_key_lifetime: crate::config::Lifetime(Some(
            crate::core::idempotency::DEFAULT_LIFETIME,
        )),
        event_retention: crate::catalog::DEFAULT_EVENT_RETENTION,
        plan_entries_per_answer: crate::core::limits::PLAN_ENTRIES_PER_ANSWER,
        plan_cache_mb: 128,
        page_token_secret: None,
        oidc_issuer: None,
        oidc_audience: None,
        oidc_jwks: None,
        secrets_kms_key: None,
        gcs_credentials: None,
        gcs_emulator: None,
        gcs_token_exchange_endpoint: crate::vending::gcs::DEFAULT_STS_ENDPOINT.into(),
        ui_repo_url: None,
    };
    open_catalog_wrapped(&settings, wraps).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_keys::{TestKey, jwks_json};
    use crate::model::PrincipalKind;

    fn settings(dir: &Path, args: &[&str]) -> Settings {
        #[derive(clap::Parser)]
        struct Args {
            #[command(flatten)]
            settings: Settings,
        }
        let mut argv = vec!["floe", "--data-dir", dir.to_str().unwrap()];
        argv.extend_from_slice(args);
        <Args as clap::Parser>::try_parse_from(argv)
            .unwrap()
            .settings
    }

    /// A half-configured issuer or a dev token that would never be looked up stops the start
    /// before the store is opened.
    #[tokio::test]
    async fn bad_authentication_settings_stop_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let issuer = ["--oidc-issuer", "https://idp.example.com/"];
        for (args, expected) in [
            (&issuer[..], "FLOE_OIDC_AUDIENCE"),
            (
                &[&issuer[..], &["--oidc-audience", "floe"]].concat()[..],
                "FLOE_OIDC_JWKS",
            ),
            (
                &[
                    &issuer[..],
                    &[
                        "--oidc-audience",
                        "floe",
                        "--oidc-jwks",
                        "http://idp.example.com/k",
                    ],
                ]
                .concat()[..],
                "http://idp.example.com/k",
            ),
            (&["--dev-token", "plain-secret"][..], "FLOE_DEV_TOKEN"),
        ] {
            let error = open_catalog(&settings(dir.path(), args))
                .await
                .err()
                .unwrap();
            assert!(error.to_string().contains(expected), "{error}");
        }
        assert!(!store_dir(dir.path()).exists(), "nothing was opened");
    }

    /// A KMS key selects the KMS sealer on either store; without one the embedded store uses
    /// its key file and a DynamoDB store has no sealer.
    #[test]
    fn the_settings_choose_the_sealer() {
        let dir = tempfile::tempdir().unwrap();
        let kms = ["--secrets-kms-key", "alias/floe"];
        assert_eq!(
            sealer_choice(&settings(dir.path(), &[])),
            SealerChoice::LocalKeyFile(dir.path().join("secret.key"))
        );
        assert_eq!(
            sealer_choice(&settings(dir.path(), &kms)),
            SealerChoice::Kms("alias/floe".into())
        );
        assert_eq!(
            sealer_choice(&settings(dir.path(), &["--store", "dynamodb"])),
            SealerChoice::Unconfigured
        );
        assert_eq!(
            sealer_choice(&settings(
                dir.path(),
                &["--store", "dynamodb", "--secrets-kms-key", ""]
            )),
            SealerChoice::Unconfigured
        );
        assert_eq!(
            sealer_choice(&settings(
                dir.path(),
                &[&["--store", "dynamodb"][..], &kms].concat()
            )),
            SealerChoice::Kms("alias/floe".into())
        );
        let unconfigured = crate::secrets::required(None).err().unwrap().to_string();
        assert!(
            unconfigured.contains("FLOE_SECRETS_KMS_KEY"),
            "{unconfigured}"
        );
    }

    /// A local catalog seals with its key file, created private on first start; a key file
    /// others can read stops the next start.
    #[tokio::test]
    async fn the_embedded_catalog_seals_with_its_key_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let sealed = {
            let (catalog, _) = open(dir.path(), "demo", None).await.unwrap();
            let sealer = catalog.core.sealer().expect("a sealer");
            sealer.seal(b"hmac secret").await.unwrap()
        };
        let key = dir.path().join("secret.key");
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        {
            let (catalog, _) = open(dir.path(), "demo", None).await.unwrap();
            let opened = catalog.core.sealer().unwrap().open(&sealed).await.unwrap();
            assert_eq!(opened, b"hmac secret");
        }
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = open(dir.path(), "demo", None).await.err().unwrap();
        assert!(
            matches!(
                error,
                DeploymentError::Secrets(SecretError::KeyFilePermissions { .. })
            ),
            "{error}"
        );
    }

    /// With the three settings, the catalog authenticates the issuer's users; api-client
    /// tokens keep working.
    #[tokio::test]
    async fn oidc_settings_enable_users() {
        let dir = tempfile::tempdir().unwrap();
        let key = TestKey::es256("k1");
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, jwks_json(&[&key])).unwrap();
        let s = settings(
            dir.path(),
            &[
                "--dev-token",
                "ema_deployment_test_token",
                "--oidc-issuer",
                "https://idp.example.com/",
                "--oidc-audience",
                "floe",
                "--oidc-jwks",
                jwks.to_str().unwrap(),
            ],
        );
        let (catalog, _) = open_catalog(&s).await.unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let token = key.token(&serde_json::json!({
            "iss": "https://idp.example.com/", "aud": "floe", "sub": "abc",
            "exp": now + 60, "email": "abc@example.com"
        }));
        let user = catalog.sessions.authenticate(&token).await.unwrap();
        assert_eq!(user.id, "user:abc");
        assert_eq!(user.kind, PrincipalKind::User);
        let admin = catalog
            .sessions
            .authenticate("ema_deployment_test_token")
            .await
            .unwrap();
        assert_eq!(admin.kind, PrincipalKind::ApiClient);
    }

    /// The config function's catalog has no bucket storage: config answers, and what needs a
    /// bucket fails with a clean 500 that writes nothing, instead of reaching one.
    #[tokio::test]
    async fn a_catalog_without_bucket_storage_answers_config_alone() {
        use http_body_util::BodyExt;
        use tower::ServiceExt;
        let dir = tempfile::tempdir().unwrap();
        let token = "ema_deployment_test_token";
        let s = settings(dir.path(), &["--dev-token", token]);
        let (catalog, _) = open_catalog_for(&s, Storage::NONE).await.unwrap();
        let router = crate::http::full_router(catalog);
        let call = |method: &str, path: &str, body: &str| {
            let request = http::Request::builder()
                .method(method)
                .uri(format!("/iceberg{path}"))
                .header("authorization", format!("Bearer {token}"))
                .body(axum::body::Body::from(body.to_owned()))
                .unwrap();
            let router = router.clone();
            async move {
                let answer = router.oneshot(request).await.unwrap();
                let status = answer.status().as_u16();
                let bytes = answer.into_body().collect().await.unwrap().to_bytes();
                (status, String::from_utf8_lossy(&bytes).into_owned())
            }
        };
        let org = &s.dev_org;
        let (status, body) = call("GET", &format!("/v1/config?warehouse={org}"), "").await;
        assert_eq!(status, 200, "{body}");
        let (status, body) = call(
            "POST",
            &format!("/v1/{org}/namespaces"),
            r#"{"namespace": ["no_storage"]}"#,
        )
        .await;
        assert_eq!(status, 500, "{body}");
        assert!(body.contains("is not reachable from this server"), "{body}");
        let (status, body) = call("GET", &format!("/v1/{org}/namespaces/no_storage"), "").await;
        assert_eq!(status, 404, "nothing was written: {body}");
    }
}
