//! Bucket configurations of an org: where its namespaces (and table overrides) keep their files,
//! chosen by nickname. Org admins add, list, remove and pick the default; secrets are never
//! answered.

use crate::core::{AsRead, Change, ChangeFailure, Core};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use super::{OrgContext, ROW_RACE_RETRIES, names};
use crate::authz::{Action, Resource, authorize};
use crate::error::{CatalogError, Result};
use crate::model::{BucketAuth, BucketRow, NamespaceRow, OrgRow, Platform, TableRow};
use crate::secrets;
use crate::store::rows::{self, keys};
use crate::store::{Condition, Write};

/// `POST /api/v1/orgs/{org}/buckets`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketRequest {
    pub nickname: String,
    pub platform: String,
    pub bucket: String,
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub path_style: bool,
    pub auth: AuthRequest,
    /// HMAC auth only: hand the keys to principals with write access on a table, for engines
    /// that cannot remote-sign (they are not scoped to the table). Off unless asked for.
    #[serde(default)]
    pub static_keys_to_writers: bool,
}

/// How Floe reaches a bucket, as a request names it.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuthRequest {
    CustomerManagedRole {
        role_arn: String,
    },
    /// GCS: the catalog's own Google service account, which it vends downscoped tokens from.
    ServiceAccount,
    Hmac {
        access_key_id: String,
        secret_access_key: String,
    },
    Anonymous,
}

/// A bucket configuration as the management API shows it: never a secret.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BucketView {
    pub nickname: String,
    pub platform: &'static str,
    pub bucket: String,
    pub prefix: String,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub path_style: bool,
    pub auth: AuthView,
    /// Whether writers receive the static keys (see `BucketRequest`).
    pub static_keys_to_writers: bool,
    /// Whether namespaces use it unless they name another.
    pub default: bool,
}

/// The shown part of a bucket's auth: the external id the customer's trust policy must name,
/// the access key id of static keys, never their secret.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AuthView {
    CustomerManagedRole {
        role_arn: String,
        external_id: Option<String>,
    },
    Hmac {
        access_key_id: String,
    },
    /// The catalog's own Google service account (GCS).
    ServiceAccount,
    Anonymous,
    /// The server's own access (the local warehouse of `floe serve`).
    Server,
}

/// Bucket configurations of an org.
pub struct BucketService {
    core: Arc<Core>,
}

impl BucketService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }
}

impl BucketService {
    /// Adds a bucket configuration (org admins) after checking that the bucket is reachable
    /// with the given auth. A customer-managed role gets a server-generated external id, which
    /// the answer shows: the customer's trust policy must name it.
    pub async fn create_bucket(
        &self,
        ctx: &OrgContext,
        request: BucketRequest,
    ) -> Result<BucketView> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        let row = bucket_row(request)?;
        if let Some(endpoint) = &row.endpoint {
            check_endpoint(endpoint, self.core.limits.private_endpoints).await?;
        }
        if matches!(row.auth, BucketAuth::Hmac { .. }) {
            secrets::required(self.core.sealer())
                .map_err(|e| CatalogError::BadRequest(e.to_string()))?;
        }
        if rows::get::<BucketRow>(
            &*self.core.store,
            &keys::bucket(&ctx.org.name, &row.nickname),
        )
        .await?
        .is_some()
        {
            return Err(already_exists(&row.nickname));
        }
        if row.auth != BucketAuth::Anonymous {
            self.probe(&row).await?;
        }
        if row.platform == Platform::Gcs && row.auth == BucketAuth::ServiceAccount {
            self.check_ownership(&ctx.org.name, &row).await?;
        }
        let row = self.sealed(row).await?;
        match self
            .core
            .changes
            .write_unrecorded(Change::as_read(vec![rows::put(
                keys::bucket(&ctx.org.name, &row.nickname),
                &row,
                Condition::NotExists,
            )]))
            .await
        {
            Ok(()) => {}
            Err(ChangeFailure::Refused(AsRead)) => return Err(already_exists(&row.nickname)),
            Err(failure) => return Err(failure.into()),
        }
        tracing::info!(audit = "bucket", org = %ctx.org.name, by = %ctx.principal.id, nickname = %row.nickname, "bucket configuration added");
        Ok(view(&row, &ctx.org))
    }

    /// The org's bucket configurations (org admins).
    pub async fn list_buckets(&self, ctx: &OrgContext) -> Result<Vec<BucketView>> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        let rows: Vec<BucketRow> = rows::collect(
            &*self.core.store,
            &keys::org_partition(&ctx.org.name),
            "BUCKET#",
            None,
            usize::MAX,
            |_| true,
        )
        .await?;
        Ok(rows.iter().map(|b| view(b, &ctx.org)).collect())
    }

    /// One bucket configuration (org admins).
    pub async fn get_bucket(&self, ctx: &OrgContext, nickname: &str) -> Result<BucketView> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        let row = self.bucket_row(ctx, nickname).await?;
        Ok(view(&row, &ctx.org))
    }

    /// Removes a bucket configuration (org admins); 409 while the org's default, a namespace
    /// (live or recoverable) or a table override uses it.
    pub async fn delete_bucket(&self, ctx: &OrgContext, nickname: &str) -> Result<()> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        self.bucket_row(ctx, nickname).await?;
        if ctx.org.default_bucket == nickname {
            return Err(in_use(nickname, "it is the org's default"));
        }
        let namespaces: Vec<NamespaceRow> = rows::collect(
            &*self.core.store,
            &keys::org_partition(&ctx.org.name),
            keys::NAMESPACE_PREFIX,
            None,
            usize::MAX,
            |_| true,
        )
        .await?;
        if let Some(ns) = namespaces.iter().find(|ns| ns.bucket == nickname) {
            return Err(in_use(
                nickname,
                &format!("namespace '{}' uses it", ns.name),
            ));
        }
        for ns in &namespaces {
            let overrides: Vec<TableRow> = rows::collect(
                &*self.core.store,
                &keys::namespace_partition(&ns.id),
                keys::TABLE_PREFIX,
                None,
                1,
                |t: &TableRow| {
                    t.storage_override
                        .as_ref()
                        .is_some_and(|s| s.bucket == nickname)
                },
            )
            .await?;
            if let Some(table) = overrides.first() {
                return Err(in_use(
                    nickname,
                    &format!("table '{}.{}' keeps its files there", ns.name, table.name),
                ));
            }
        }
        self.core
            .changes
            .write_unrecorded(Change::as_read(vec![Write::Delete {
                key: keys::bucket(&ctx.org.name, nickname),
                condition: Condition::Exists,
            }]))
            .await?;
        self.core.lookups.bucket_changed(&ctx.org.name, nickname);
        tracing::info!(audit = "bucket", org = %ctx.org.name, by = %ctx.principal.id, nickname, "bucket configuration removed");
        Ok(())
    }

    /// Picks the bucket configuration namespaces use unless they name another (org admins).
    pub async fn set_default_bucket(&self, ctx: &OrgContext, nickname: &str) -> Result<()> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        self.core
            .lookups
            .usable_bucket(&ctx.org.name, nickname)
            .await?;
        for _ in 0..ROW_RACE_RETRIES {
            let org = rows::get::<OrgRow>(&*self.core.store, &keys::org(&ctx.org.name))
                .await?
                .ok_or_else(|| {
                    CatalogError::NotFound(format!("Org does not exist: {}", ctx.org.name))
                })?;
            let mut row = org.row.clone();
            row.default_bucket = nickname.to_owned();
            match self
                .core
                .changes
                .write_unrecorded(Change::as_read(vec![rows::put(
                    keys::org(&ctx.org.name),
                    &row,
                    Condition::VersionIs(org.version),
                )]))
                .await
            {
                Ok(()) => {
                    self.core.lookups.org_access_changed(&ctx.org.name);
                    tracing::info!(audit = "bucket", org = %ctx.org.name, by = %ctx.principal.id, nickname, "default bucket set");
                    return Ok(());
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The org's default bucket"))
    }

    /// The row as stored: static keys' secret sealed, never in plain text.
    async fn sealed(&self, row: BucketRow) -> Result<BucketRow> {
        crate::core::bucket_keys::sealed(self.core.sealer(), row).await
    }

    async fn bucket_row(&self, ctx: &OrgContext, nickname: &str) -> Result<BucketRow> {
        rows::get::<BucketRow>(&*self.core.store, &keys::bucket(&ctx.org.name, nickname))
            .await?
            .map(|v| v.row)
            .ok_or_else(|| {
                CatalogError::NotFound(format!("Bucket configuration does not exist: {nickname}"))
            })
    }

    /// A GCS bucket is reached with the catalog's own Google identity, which may reach other
    /// tenants' buckets too: an org adds one only after writing, under the configuration's
    /// root, the ownership object with the value derived from the org and the root. A 400 names
    /// both when it is missing or says anything else.
    async fn check_ownership(&self, org: &str, row: &BucketRow) -> Result<()> {
        let location = crate::objects::join(&row.root, OWNERSHIP_OBJECT);
        let expected = ownership_value(org, &row.root);
        let unproven = |found: &str| {
            CatalogError::BadRequest(format!(
                "Bucket '{}' is not shown to be this org's ({found}). Write the object {location} holding only the value {expected} and add the configuration again",
                row.root
            ))
        };
        let objects = self.core.lookups.objects_for(row).await?;
        match objects.get(&location).await {
            Ok(bytes) if String::from_utf8_lossy(&bytes).trim() == expected => Ok(()),
            Ok(_) => Err(unproven("the ownership object holds another value")),
            Err(crate::objects::ObjectError::NotFound(_)) => Err(unproven("no ownership object")),
            Err(e) => Err(CatalogError::BadRequest(format!(
                "Bucket '{}' is not reachable with the given auth (storage error {})",
                row.root,
                e.code()
            ))),
        }
    }

    /// Lists one key under the configuration's root with its credentials: a clear 400 when the
    /// bucket cannot be reached, with the storage error code only (what the endpoint answered
    /// is logged, never answered).
    async fn probe(&self, row: &BucketRow) -> Result<()> {
        let objects = self.core.objects.for_bucket(row).await.map_err(|e| {
            CatalogError::BadRequest(format!(
                "Bucket '{}' is not reachable with the given auth: {e}",
                row.root
            ))
        })?;
        objects.list(&row.root, 1).await.map_err(|e| {
            CatalogError::BadRequest(format!(
                "Bucket '{}' is not reachable with the given auth (storage error {})",
                row.root,
                e.code()
            ))
        })?;
        Ok(())
    }
}

/// The object a GCS bucket configuration's root must hold before an org may add it, and what
/// it must say (see [`ownership_value`]).
pub const OWNERSHIP_OBJECT: &str = ".floe-ownership";

/// What the ownership object of `root` must hold for `org`: derived from both, so the proof one
/// org wrote never admits another. It needs no secret: the proof is that the customer could
/// write into the bucket, which the catalog's own identity reaching it does not show (the
/// catalog writes no such object, and nobody gets tokens for a bucket before it is added).
pub fn ownership_value(org: &str, root: &str) -> String {
    let digest = super::metadata::sha256_hex(format!("floe-ownership/1\n{org}\n{root}").as_bytes());
    format!("floe-ownership-{}", &digest[..32])
}

/// The row a request describes, checked.
fn bucket_row(request: BucketRequest) -> Result<BucketRow> {
    names::validate_namespace_name(&request.nickname).map_err(|_| {
        CatalogError::BadRequest(format!(
            "Invalid bucket nickname '{}': use letters, digits, '_', '.' and '-'",
            request.nickname
        ))
    })?;
    let endpoint = request.endpoint.filter(|e| !e.is_empty());
    let region = request.region.filter(|r| !r.is_empty());
    let platform = match request.platform.as_str() {
        "s3" => Platform::S3,
        "s3-compatible" if endpoint.is_some() => Platform::S3,
        "s3-compatible" => {
            return Err(CatalogError::BadRequest(
                "An s3-compatible bucket needs its endpoint".into(),
            ));
        }
        // The GCS endpoint is the server's (FLOE_GCS_EMULATOR in tests), not a bucket's.
        "gcs" if endpoint.is_some() || region.is_some() || request.path_style => {
            return Err(CatalogError::BadRequest(
                "A gcs bucket takes no endpoint, region or path_style".into(),
            ));
        }
        "gcs" => Platform::Gcs,
        other => {
            return Err(CatalogError::BadRequest(format!(
                "Unknown platform '{other}': use s3, s3-compatible or gcs"
            )));
        }
    };
    // GCS names may also hold '_'.
    let underscore = platform == Platform::Gcs;
    let valid_bucket = (3..=63).contains(&request.bucket.len())
        && request.bucket.chars().all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '-'
                || c == '.'
                || (underscore && c == '_')
        });
    if !valid_bucket {
        return Err(CatalogError::BadRequest(format!(
            "Invalid bucket name '{}'",
            request.bucket
        )));
    }
    let prefix = request.prefix.unwrap_or_default();
    let prefix = prefix.trim_matches('/');
    if prefix
        .split('/')
        .any(|segment| segment == "." || segment == "..")
        || prefix.chars().any(char::is_control)
    {
        return Err(CatalogError::BadRequest(format!(
            "Invalid prefix '{prefix}'"
        )));
    }
    let scheme = match platform {
        Platform::Gcs => "gs",
        _ => "s3",
    };
    let root = if prefix.is_empty() {
        format!("{scheme}://{}", request.bucket)
    } else {
        format!("{scheme}://{}/{prefix}", request.bucket)
    };
    let auth = match (platform, request.auth) {
        // Vending on GCS exchanges the catalog's own token for a downscoped one: neither a role
        // to assume nor static keys fit.
        (Platform::Gcs, AuthRequest::CustomerManagedRole { .. } | AuthRequest::Hmac { .. }) => {
            return Err(CatalogError::BadRequest(
                "A gcs bucket is reached with the catalog's service account: use auth type service_account".into(),
            ));
        }
        (Platform::Gcs, AuthRequest::ServiceAccount) => BucketAuth::ServiceAccount,
        (_, AuthRequest::ServiceAccount) => {
            return Err(CatalogError::BadRequest(
                "Auth type service_account is for gcs buckets".into(),
            ));
        }
        (_, AuthRequest::CustomerManagedRole { role_arn }) => {
            if !role_arn.starts_with("arn:") || role_arn.split(':').count() < 6 {
                return Err(CatalogError::BadRequest(format!(
                    "Invalid role ARN '{role_arn}'"
                )));
            }
            BucketAuth::CustomerManagedRole {
                role_arn,
                external_id: Some(external_id()),
            }
        }
        (
            _,
            AuthRequest::Hmac {
                access_key_id,
                secret_access_key,
            },
        ) => {
            if access_key_id.is_empty() || secret_access_key.is_empty() {
                return Err(CatalogError::BadRequest(
                    "HMAC auth needs an access key id and a secret access key".into(),
                ));
            }
            BucketAuth::Hmac {
                access_key_id,
                secret_access_key,
            }
        }
        (_, AuthRequest::Anonymous) => BucketAuth::Anonymous,
    };
    if request.static_keys_to_writers && !matches!(auth, BucketAuth::Hmac { .. }) {
        return Err(CatalogError::BadRequest(
            "static_keys_to_writers applies to hmac auth only: other auth types vend scoped credentials".into(),
        ));
    }
    Ok(BucketRow {
        nickname: request.nickname,
        platform,
        root,
        auth,
        endpoint,
        region,
        path_style: request.path_style,
        static_keys_to_writers: request.static_keys_to_writers,
    })
}

/// An endpoint the catalog may send storage requests to: an `https` URL of a public host, or
/// (with FLOE_ALLOW_PRIVATE_ENDPOINTS) also plain `http` and loopback, private, link-local and
/// metadata addresses. A name is resolved now and refused when any of its addresses is
/// internal. Credentials in the URL are refused and never repeated.
async fn check_endpoint(endpoint: &str, private_allowed: bool) -> Result<()> {
    let invalid = |why: &str| CatalogError::BadRequest(format!("Invalid endpoint: {why}"));
    let url = url::Url::parse(endpoint).map_err(|_| invalid("use an https:// URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("it must not hold credentials"));
    }
    match url.scheme() {
        "https" => {}
        "http" if private_allowed => {}
        "http" => {
            return Err(invalid(
                "use an https:// URL (plain http only where the server allows private endpoints)",
            ));
        }
        _ => return Err(invalid("use an https:// URL")),
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("it must not have a query or fragment"));
    }
    if private_allowed {
        return Ok(());
    }
    let port = url.port_or_known_default().unwrap_or(443);
    let addresses: Vec<std::net::IpAddr> = match url.host() {
        Some(url::Host::Ipv4(ip)) => vec![ip.into()],
        Some(url::Host::Ipv6(ip)) => vec![ip.into()],
        Some(url::Host::Domain(name)) => match tokio::net::lookup_host((name, port)).await {
            Ok(found) => found.map(|a| a.ip()).collect(),
            Err(e) => {
                tracing::info!(host = name, error = %e, "bucket endpoint does not resolve");
                return Err(invalid(&format!("host '{name}' does not resolve")));
            }
        },
        None => return Err(invalid("it names no host")),
    };
    if addresses.is_empty() {
        return Err(invalid("its host has no address"));
    }
    if addresses.iter().any(|ip| crate::outbound::is_internal(*ip)) {
        return Err(invalid(&format!(
            "'{}' is a loopback, private, link-local or metadata address (allowed only where the server allows private endpoints)",
            url.host_str().unwrap_or_default()
        )));
    }
    Ok(())
}

/// The external id a customer's trust policy must name: random, unguessable.
fn external_id() -> String {
    format!("floe-{}", crate::auth::random_alphanumeric(32))
}

fn view(row: &BucketRow, org: &OrgRow) -> BucketView {
    let (bucket, prefix) = match crate::model::parse_bucket_url(&row.root) {
        Some((bucket, prefix)) => (bucket.to_owned(), prefix.to_owned()),
        None => (row.root.clone(), String::new()),
    };
    BucketView {
        nickname: row.nickname.clone(),
        platform: match row.platform {
            Platform::S3 if row.endpoint.is_some() => "s3-compatible",
            Platform::S3 => "s3",
            Platform::Local => "local",
            Platform::Azure => "azure",
            Platform::Gcs => "gcs",
        },
        bucket,
        prefix,
        region: row.region.clone(),
        endpoint: row.endpoint.clone(),
        path_style: row.path_style,
        static_keys_to_writers: row.static_keys_to_writers,
        auth: match &row.auth {
            BucketAuth::CustomerManagedRole {
                role_arn,
                external_id,
            } => AuthView::CustomerManagedRole {
                role_arn: role_arn.clone(),
                external_id: external_id.clone(),
            },
            BucketAuth::Hmac { access_key_id, .. }
            | BucketAuth::SealedHmac { access_key_id, .. } => AuthView::Hmac {
                access_key_id: access_key_id.clone(),
            },
            BucketAuth::ServiceAccount => AuthView::ServiceAccount,
            BucketAuth::Anonymous => AuthView::Anonymous,
            BucketAuth::Server => AuthView::Server,
        },
        default: org.default_bucket == row.nickname,
    }
}

fn already_exists(nickname: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!("Bucket configuration already exists: {nickname}"))
}

fn in_use(nickname: &str, why: &str) -> CatalogError {
    CatalogError::CommitFailed(format!(
        "Bucket configuration '{nickname}' is in use: {why}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(auth: serde_json::Value) -> BucketRequest {
        serde_json::from_value(serde_json::json!({
            "nickname": "lake", "platform": "s3", "bucket": "my-lake", "prefix": "/iceberg/",
            "region": "eu-west-1", "auth": auth
        }))
        .unwrap()
    }

    #[test]
    fn roles_get_a_generated_external_id_and_prefixes_are_trimmed() {
        let row = bucket_row(request(serde_json::json!({
            "type": "customer_managed_role", "role_arn": "arn:aws:iam::123456789012:role/lake"
        })))
        .unwrap();
        assert_eq!(row.root, "s3://my-lake/iceberg");
        let BucketAuth::CustomerManagedRole { external_id, .. } = &row.auth else {
            panic!("{:?}", row.auth)
        };
        assert!(external_id.as_deref().unwrap().starts_with("floe-"));
        assert_eq!(external_id.as_deref().unwrap().len(), 37);
    }

    #[test]
    fn bad_requests_name_what_is_wrong() {
        let role = serde_json::json!({"type": "customer_managed_role", "role_arn": "nope"});
        assert!(
            bucket_row(request(role))
                .unwrap_err()
                .to_string()
                .contains("role ARN")
        );
        let mut compatible = request(serde_json::json!({"type": "anonymous"}));
        compatible.platform = "s3-compatible".into();
        assert!(
            bucket_row(compatible)
                .unwrap_err()
                .to_string()
                .contains("endpoint")
        );
        let mut dots = request(serde_json::json!({"type": "anonymous"}));
        dots.prefix = Some("a/../b".into());
        assert!(bucket_row(dots).is_err());
    }

    fn gcs_request(auth: serde_json::Value) -> BucketRequest {
        serde_json::from_value(serde_json::json!({
            "nickname": "lake", "platform": "gcs", "bucket": "my_lake", "prefix": "/iceberg/",
            "auth": auth
        }))
        .unwrap()
    }

    #[test]
    fn gcs_buckets_use_the_catalog_service_account() {
        let row = bucket_row(gcs_request(serde_json::json!({"type": "service_account"}))).unwrap();
        assert_eq!(row.platform, Platform::Gcs);
        assert_eq!(row.root, "gs://my_lake/iceberg");
        assert_eq!(row.auth, BucketAuth::ServiceAccount);
        let org = OrgRow {
            name: "acme".into(),
            iceberg_enabled: true,
            default_bucket: "lake".into(),
            created_ms: 0,
        };
        let shown = view(&row, &org);
        assert_eq!(
            (shown.platform, shown.bucket.as_str(), shown.prefix.as_str()),
            ("gcs", "my_lake", "iceberg")
        );
        assert_eq!(shown.auth, AuthView::ServiceAccount);
        // Configurable like S3's: refused when used for Iceberg storage.
        let anonymous = bucket_row(gcs_request(serde_json::json!({"type": "anonymous"}))).unwrap();
        assert_eq!(anonymous.auth, BucketAuth::Anonymous);
    }

    /// The ownership value binds the org and the root, and is stable across instances.
    #[test]
    fn ownership_values_bind_org_and_root() {
        let value = ownership_value("acme", "gs://lake/iceberg");
        assert_eq!(value, ownership_value("acme", "gs://lake/iceberg"));
        assert!(
            value.starts_with("floe-ownership-") && value.len() == 47,
            "{value}"
        );
        assert_ne!(value, ownership_value("other", "gs://lake/iceberg"));
        assert_ne!(value, ownership_value("acme", "gs://lake"));
        assert_ne!(value, ownership_value("acme", "gs://lake/iceberg/ns"));
    }

    #[test]
    fn gcs_buckets_refuse_aws_auth_and_s3_settings() {
        for auth in [
            serde_json::json!({"type": "customer_managed_role", "role_arn": "arn:aws:iam::1:role/x"}),
            serde_json::json!({"type": "hmac", "access_key_id": "GOOG1", "secret_access_key": "s"}),
        ] {
            let error = bucket_row(gcs_request(auth)).unwrap_err().to_string();
            assert!(error.contains("service_account"), "{error}");
        }
        let mut endpoint = gcs_request(serde_json::json!({"type": "service_account"}));
        endpoint.endpoint = Some("http://127.0.0.1:1".into());
        assert!(
            bucket_row(endpoint)
                .unwrap_err()
                .to_string()
                .contains("endpoint")
        );
        let mut region = gcs_request(serde_json::json!({"type": "service_account"}));
        region.region = Some("europe-west1".into());
        assert!(bucket_row(region).is_err());
        let s3 = bucket_row(request(serde_json::json!({"type": "service_account"})));
        assert!(s3.unwrap_err().to_string().contains("gcs"));
        let mut underscore = request(serde_json::json!({"type": "anonymous"}));
        underscore.bucket = "my_lake".into();
        assert!(bucket_row(underscore).is_err(), "S3 names have no '_'");
    }
}
