//! The catalog service: one plain async function per REST operation.
//!
//! Each operation reads in three steps: validate the input, authorize the principal, act. Inputs
//! and outputs are typed; nothing here knows about HTTP or about which adapters are plugged in.

mod access;
mod admin;
mod browse;
mod buckets;
pub use buckets::{OWNERSHIP_OBJECT, ownership_value};
mod changes;
mod commit;
mod config;
mod grants;
pub mod idempotency;
mod lifecycle;
pub mod metadata;
pub mod names;
mod namespaces;
pub mod paging;
pub mod parity;
pub mod placement;
pub mod sessions;
mod signing;
pub mod storage;
mod tables;

use std::sync::Arc;
use std::time::Duration;

pub use admin::{
    ApiClientView, Me, NamespacePatch, NamespaceSettings, TeamView, display_principal,
    issue_service_admin,
};
pub use browse::NamespaceSummary;
pub use buckets::{AuthRequest, AuthView, BucketRequest, BucketView};
pub use changes::DEFAULT_EVENT_RETENTION;
pub use commit::{AUTHOR_EMAIL_KEY, AUTHOR_NAME_KEY, CommitRetry};
pub use config::{iso_duration, parse_iso_duration};
pub use grants::{GrantView, canonical_principal};
pub use lifecycle::{DeleteOptions, NamespaceStatus};
pub use tables::TableRequestOptions;

use crate::authz::{Access, access_denied};
use crate::cache::TtlCache;
use crate::clock::Clock;
use crate::error::{CatalogError, Result};
use crate::model::{BucketRow, NamespaceRow, OrgRow, Platform, Principal, TableRow};
use crate::objects::{ObjectStore, ObjectStores};
use crate::store::MetaStore;
use crate::store::rows::{self, Versioned, keys};
use crate::vending::CredentialVendor;
use metadata::MetadataCache;
use metadata::TableRef;

/// The catalog with its adapters; shared by every request.
pub struct Catalog {
    pub store: Arc<dyn MetaStore>,
    pub objects: Arc<dyn ObjectStores>,
    pub vendor: Arc<dyn CredentialVendor>,
    pub clock: Arc<dyn Clock>,
    metadata: MetadataCache,
    page_tokens: paging::PageTokens,
    tokens: TtlCache<String, Principal>,
    /// Verifier of OIDC users' JWTs; `None`: only api-client tokens authenticate.
    oidc: Option<Arc<crate::auth::oidc::OidcVerifier>>,
    /// (org, principal id) -> the org row and the principal's access in it.
    standing: TtlCache<(String, String), (Option<OrgRow>, Access)>,
    /// (org, namespace) -> the live namespace, for reads: a table row's existence proves its
    /// namespace live (a namespace with tables cannot be dropped), so a read needs only the
    /// table row; a miss re-reads the namespace.
    namespaces: TtlCache<(String, String), NamespaceRow>,
    /// (org, nickname) -> bucket configuration.
    buckets: TtlCache<(String, String), BucketRow>,
    commit_retry: CommitRetry,
    /// Seals secrets kept in rows (bucket HMAC keys); `None`: this deployment cannot seal.
    sealer: Option<Arc<dyn crate::secrets::SecretSealer>>,
    /// Whether bucket endpoints may be plain http and private, loopback or link-local
    /// addresses (FLOE_ALLOW_PRIVATE_ENDPOINTS).
    private_endpoints: bool,
    /// Signalled when an admin asks for a purge now (an immediate delete): a purger running
    /// beside the server (`floe serve`) wakes on it.
    purge_wanted: Arc<tokio::sync::Notify>,
    /// How long clients may retry a mutation with one `Idempotency-Key`; `None`: off.
    idempotency_lifetime: Option<Duration>,
    /// How long change events are kept and readable.
    event_retention: Duration,
    /// Signalled when this process wrote a change event.
    events_written: Arc<tokio::sync::Notify>,
    /// Each org's event counter as this instance last wrote it.
    event_counters:
        std::sync::Mutex<std::collections::HashMap<String, crate::events::outbox::Counter>>,
}

pub use crate::cache::DEFAULT_TTL as DEFAULT_AUTH_CACHE_TTL;
const AUTH_CACHE_ENTRIES: u64 = 10_000;

/// An authenticated principal inside one org, with its standing resolved.
#[derive(Debug, Clone)]
pub struct OrgContext {
    pub principal: Principal,
    pub org: OrgRow,
    pub access: Access,
}

impl Catalog {
    pub fn new(
        store: Arc<dyn MetaStore>,
        objects: Arc<dyn ObjectStores>,
        vendor: Arc<dyn CredentialVendor>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            store,
            objects,
            vendor,
            metadata: MetadataCache::new(metadata::DEFAULT_CACHE_BYTES),
            page_tokens: paging::PageTokens::random(),
            tokens: TtlCache::new(DEFAULT_AUTH_CACHE_TTL, AUTH_CACHE_ENTRIES),
            oidc: None,
            standing: TtlCache::new(DEFAULT_AUTH_CACHE_TTL, AUTH_CACHE_ENTRIES),
            namespaces: TtlCache::new(DEFAULT_AUTH_CACHE_TTL, AUTH_CACHE_ENTRIES),
            buckets: TtlCache::new(DEFAULT_AUTH_CACHE_TTL, AUTH_CACHE_ENTRIES),
            commit_retry: CommitRetry::default(),
            sealer: None,
            private_endpoints: false,
            purge_wanted: Arc::default(),
            idempotency_lifetime: Some(idempotency::DEFAULT_LIFETIME),
            event_retention: DEFAULT_EVENT_RETENTION,
            events_written: Arc::default(),
            event_counters: Default::default(),
            clock,
        }
    }

    /// The principal of a bearer token: an api-client token (`ema_...`) from the store, any
    /// other token as an OIDC user's JWT (refused when OIDC is off). Known tokens are
    /// remembered for the cache TTL (a JWT never past its `exp`), so a revoked token stops
    /// working within it.
    pub async fn authenticate(&self, token: &str) -> Result<Principal> {
        if !crate::auth::is_api_client_token(token) {
            return crate::auth::oidc::authenticate(self.oidc.as_deref(), token).await;
        }
        let hash = crate::auth::hash_token(token);
        self.tokens
            .get_or_load(
                hash.clone(),
                crate::auth::authenticate_hash(&*self.store, &hash),
            )
            .await
    }

    /// Authenticates OIDC users by their JWTs with `verifier`.
    pub fn with_oidc(mut self, verifier: Arc<crate::auth::oidc::OidcVerifier>) -> Self {
        self.oidc = Some(verifier);
        self
    }

    /// How long tokens, orgs and memberships are remembered (0 disables the cache).
    pub fn with_auth_cache_ttl(mut self, ttl: Duration) -> Self {
        self.tokens = TtlCache::new(ttl, AUTH_CACHE_ENTRIES);
        self.standing = TtlCache::new(ttl, AUTH_CACHE_ENTRIES);
        self.namespaces = TtlCache::new(ttl, AUTH_CACHE_ENTRIES);
        self.buckets = TtlCache::new(ttl, AUTH_CACHE_ENTRIES);
        self
    }

    /// Forgets every remembered token, row and metadata file, as a newly started instance (another
    /// Lambda, say) would be.
    pub fn forget_cached(&self) {
        self.tokens.clear();
        self.standing.clear();
        self.namespaces.clear();
        self.buckets.clear();
        self.metadata.clear();
    }

    /// How often and how patiently a commit that lost the swap is rebased and retried.
    /// Sets how long clients may retry with one `Idempotency-Key` (`None` turns keys off).
    pub fn with_idempotency_lifetime(mut self, lifetime: Option<Duration>) -> Self {
        self.idempotency_lifetime = lifetime.filter(|l| !l.is_zero());
        self
    }

    pub fn with_commit_retry(mut self, retry: CommitRetry) -> Self {
        self.commit_retry = retry;
        self
    }

    /// Signs page tokens with `key`, so every instance behind one endpoint accepts them.
    pub fn with_page_token_key(mut self, key: &[u8]) -> Self {
        self.page_tokens = paging::PageTokens::new(key);
        self
    }

    /// Seals secrets kept in rows with `sealer`.
    pub fn with_sealer(mut self, sealer: Arc<dyn crate::secrets::SecretSealer>) -> Self {
        self.sealer = Some(sealer);
        self
    }

    /// Allows bucket endpoints that are plain http or private, loopback or link-local
    /// addresses: S3-compatible stores on a private network, and tests.
    pub fn with_private_endpoints(mut self, allowed: bool) -> Self {
        self.private_endpoints = allowed;
        self
    }

    /// The sealer of secrets kept in rows; `None` when the deployment has none
    /// (`secrets::required` turns that into the error that says how to configure one).
    pub fn sealer(&self) -> Option<&dyn crate::secrets::SecretSealer> {
        self.sealer.as_deref()
    }

    /// What an immediate delete signals; a purger beside the server waits on it.
    pub fn purge_wanted(&self) -> Arc<tokio::sync::Notify> {
        self.purge_wanted.clone()
    }

    /// The sealer, shared (another catalog instance on the same deployment uses it too).
    pub fn shared_sealer(&self) -> Option<Arc<dyn crate::secrets::SecretSealer>> {
        self.sealer.clone()
    }

    /// Resolves an org for a principal with the reference's ordering: an unknown org is 404
    /// before anything else, a disabled Iceberg feature is 403 NotAuthorizedException, and a
    /// principal who sees nothing in the org's catalog gets a blanket 403.
    pub async fn org_context(&self, principal: &Principal, org: &str) -> Result<OrgContext> {
        let ctx = self.management_context(principal, org).await?;
        if !ctx.org.iceberg_enabled {
            // Only members learn why; to anyone else the org shows nothing.
            if ctx.access.is_member() {
                return Err(CatalogError::IcebergDisabled(format!(
                    "Iceberg is not enabled for the organization: {org}"
                )));
            }
            return Err(access_denied());
        }
        Ok(ctx)
    }

    /// An org and the principal's access in it, whether or not Iceberg is enabled for it (the
    /// management API administers orgs either way): 404 for an unknown org, the blanket 403 for
    /// a principal who sees nothing in it.
    pub async fn management_context(&self, principal: &Principal, org: &str) -> Result<OrgContext> {
        let cache_key = (org.to_owned(), principal.id.clone());
        let load = async {
            let org_row = rows::get::<OrgRow>(&*self.store, &keys::org(org))
                .await?
                .map(|v| v.row);
            let access = match &org_row {
                Some(_) => self.resolve_access(org, principal).await?,
                None => Access::default(),
            };
            Ok::<_, CatalogError>((org_row, access))
        };
        let (org_row, access) = self.standing.get_or_load(cache_key, load).await?;
        let org_row = org_row
            .ok_or_else(|| CatalogError::NotFound(format!("Warehouse does not exist: {org}")))?;
        if !access.sees_catalog() {
            tracing::info!(audit = "denied", principal = %principal.id, org, "nothing visible in the org");
            return Err(access_denied());
        }
        Ok(OrgContext {
            principal: principal.clone(),
            org: org_row,
            access,
        })
    }

    /// A live (not soft-deleted) namespace, read now, or 404.
    async fn live_namespace(
        &self,
        ctx: &OrgContext,
        name: &str,
    ) -> Result<Versioned<NamespaceRow>> {
        match rows::get::<NamespaceRow>(&*self.store, &keys::namespace(&ctx.org.name, name)).await?
        {
            Some(ns) if ns.row.deleted_ms.is_none() => {
                self.namespaces
                    .insert((ctx.org.name.clone(), name.to_owned()), ns.row.clone())
                    .await;
                Ok(ns)
            }
            // Without an org role a caller sees only what it was given: a namespace it cannot
            // see and one that does not exist answer alike.
            _ if !ctx.access.is_member() => Err(access_denied()),
            _ => Err(no_such_namespace(name)),
        }
    }

    /// A live namespace as recently seen (within the cache TTL), for operations that go on to
    /// read one of its tables.
    async fn recent_namespace(&self, ctx: &OrgContext, name: &str) -> Result<NamespaceRow> {
        match self
            .namespaces
            .get(&(ctx.org.name.clone(), name.to_owned()))
            .await
        {
            Some(ns) => Ok(ns),
            None => Ok(self.live_namespace(ctx, name).await?.row),
        }
    }

    /// A table and its namespace, authorized for `action` on the table, with one store read
    /// when the namespace was seen recently.
    async fn authorized_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        action: crate::authz::Action,
    ) -> Result<(NamespaceRow, Versioned<TableRow>)> {
        let authorize = |ns: &NamespaceRow| {
            crate::authz::authorize(
                &ctx.access,
                crate::authz::Resource::Table {
                    namespace: ns,
                    table,
                },
                action,
            )
        };
        let ns = self.recent_namespace(ctx, namespace).await?;
        authorize(&ns)?;
        if let Some(row) = rows::get::<TableRow>(&*self.store, &keys::table(&ns.id, table)).await? {
            return Ok((ns, row));
        }
        // The remembered namespace may have been dropped or replaced since.
        let fresh = self.live_namespace(ctx, namespace).await?.row;
        if fresh.id == ns.id {
            return Err(no_such_table(namespace, table));
        }
        authorize(&fresh)?;
        let row = self.table_row(&fresh, table).await?;
        Ok((fresh, row))
    }

    async fn table_row(&self, ns: &NamespaceRow, table: &str) -> Result<Versioned<TableRow>> {
        rows::get::<TableRow>(&*self.store, &keys::table(&ns.id, table))
            .await?
            .ok_or_else(|| no_such_table(&ns.name, table))
    }

    /// Who a table's metadata is read for: verification compares against `row`, log lines
    /// name the org and namespace.
    fn table_ref<'a>(ctx: &'a OrgContext, ns: &'a NamespaceRow, row: &'a TableRow) -> TableRef<'a> {
        TableRef {
            org: &ctx.org.name,
            namespace: &ns.name,
            row,
        }
    }

    /// A bucket configuration that can back Iceberg storage, or 400.
    async fn usable_bucket(&self, org: &str, nickname: &str) -> Result<BucketRow> {
        let bucket = rows::get::<BucketRow>(&*self.store, &keys::bucket(org, nickname))
            .await?
            .ok_or_else(|| {
                CatalogError::BadRequest(format!("Unknown bucket configuration: {nickname}"))
            })?
            .row;
        let bucket = self.opened(bucket).await?;
        if bucket.auth == crate::model::BucketAuth::Anonymous {
            return Err(CatalogError::BadRequest(format!(
                "Bucket configuration '{nickname}' allows anonymous access only and cannot back Iceberg storage"
            )));
        }
        if bucket.platform == Platform::Azure {
            return Err(CatalogError::BadRequest(format!(
                "Bucket configuration '{nickname}' is on Azure, which is not supported for Iceberg storage"
            )));
        }
        Ok(bucket)
    }

    pub(crate) async fn objects_for(&self, bucket: &BucketRow) -> Result<Arc<dyn ObjectStore>> {
        self.objects.for_bucket(bucket).await.map_err(|e| {
            tracing::error!(error = %e, bucket = %bucket.nickname, "no object store for bucket");
            CatalogError::Internal(format!(
                "Storage of bucket configuration '{}' is not reachable from this server",
                bucket.nickname
            ))
        })
    }

    /// The bucket a table's files live on, as its row binds it (rows written before the binding
    /// was recorded: its override, else its namespace's). Remembered for the cache TTL.
    async fn table_bucket(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        table: &TableRow,
    ) -> Result<BucketRow> {
        let nickname = table
            .bucket
            .as_ref()
            .or(table.storage_override.as_ref().map(|o| &o.bucket))
            .unwrap_or(&ns.bucket);
        let load = async {
            let stored =
                rows::get::<BucketRow>(&*self.store, &keys::bucket(&ctx.org.name, nickname))
                    .await?
                    .ok_or_else(|| {
                        CatalogError::Internal(format!(
                            "Bucket configuration '{nickname}' has been removed"
                        ))
                    })?
                    .row;
            self.opened(stored).await
        };
        self.buckets
            .get_or_load((ctx.org.name.clone(), nickname.clone()), load)
            .await
    }
}

pub fn no_such_namespace(name: &str) -> CatalogError {
    CatalogError::NoSuchNamespace(format!("Namespace does not exist: {name}"))
}

pub fn no_such_table(namespace: &str, table: &str) -> CatalogError {
    CatalogError::NoSuchTable(format!("Table does not exist: {namespace}.{table}"))
}

/// How many times an operation re-reads and retries after losing a race on a row it does not
/// own (the namespace row's table counter, say). Pointer swaps are never retried.
const ROW_RACE_RETRIES: usize = 16;
