//! Read-through resolution of what every request starts from (the org and the caller's standing
//! in it, a namespace, a table's row, a bucket configuration and its object store), with the
//! caches that make a warm request cost only the reads of what it is about.
//!
//! Each change says what it made stale through a named invalidation (an org's access, one
//! namespace, one bucket configuration, one principal), so no change empties a cache it cannot
//! have made stale. Another instance sees a change within the cache TTL.

use std::sync::Arc;

use super::OrgContext;
use crate::authz::{Access, Action, Grants, Resource, access_denied, authorize};
use crate::cache::Cache;
use crate::error::{CatalogError, Result};
use crate::model::{
    BucketAuth, BucketRow, GrantRow, NamespaceRow, OrgRow, Platform, Principal, TableRow,
    TeamMemberRow, team_principal,
};
use crate::objects::{ObjectStore, ObjectStores};
use crate::secrets::SecretSealer;
use crate::store::rows::{self, MemberRow, ServiceAdminRow, Versioned, keys};
use crate::store::{Item, MetaStore};

const ENTRIES: u64 = 10_000;

/// An org (`None`: there is none by that name) and a principal's access in it.
type Standing = (Option<Arc<OrgRow>>, Arc<Access>);

pub struct Lookups {
    store: Arc<dyn MetaStore>,
    objects: Arc<dyn ObjectStores>,
    sealer: Option<Arc<dyn SecretSealer>>,
    /// (org, principal id) -> the org row and the principal's access in it.
    standing: Cache<(String, String), Standing>,
    /// (org, namespace) -> the live namespace, for reads: a table row's existence proves its
    /// namespace live (a namespace with tables cannot be dropped), so a read needs only the
    /// table row; a miss re-reads the namespace.
    namespaces: Cache<(String, String), Arc<NamespaceRow>>,
    /// (org, nickname) -> bucket configuration, its secret opened; shared, so that what was
    /// built from one can tell whether it is still the one remembered
    /// ([`Lookups::remembered_bucket`]).
    buckets: Cache<(String, String), Arc<BucketRow>>,
}

impl Lookups {
    pub fn new(
        store: Arc<dyn MetaStore>,
        objects: Arc<dyn ObjectStores>,
        sealer: Option<Arc<dyn SecretSealer>>,
        ttl: std::time::Duration,
    ) -> Self {
        Self {
            store,
            objects,
            sealer,
            standing: Cache::bounded(ENTRIES).expiring_after(ttl),
            namespaces: Cache::bounded(ENTRIES).expiring_after(ttl),
            buckets: Cache::bounded(ENTRIES).expiring_after(ttl),
        }
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
                .map(|v| Arc::new(v.row));
            let access = match &org_row {
                Some(_) => self.resolve_access(org, principal).await?,
                None => Access::default(),
            };
            Ok::<_, CatalogError>((org_row, Arc::new(access)))
        };
        let (org_row, access) = self.standing.get_or_load(&cache_key, load).await?;
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
            idempotency: None,
        })
    }

    /// The principal's access in `org`, read from the store: its org role, its teams, every
    /// grant naming it or one of its teams, and whether the org shows anything to outsiders.
    async fn resolve_access(&self, org: &str, principal: &Principal) -> Result<Access> {
        let store = &*self.store;
        let org_role = rows::get::<MemberRow>(store, &keys::member(org, &principal.id))
            .await?
            .map(|m| m.row.role);
        let service_admin = self.is_service_admin(principal).await?;
        let teams: Vec<TeamMemberRow> = rows::collect(
            store,
            &keys::teams_of_partition(org, &principal.id),
            keys::TEAM_PREFIX,
            None,
            usize::MAX,
            |_| true,
        )
        .await?;
        let mut grantees = vec![principal.id.clone()];
        grantees.extend(teams.iter().map(|t| team_principal(&t.team)));
        let mut grants: Vec<GrantRow> = Vec::new();
        for grantee in &grantees {
            grants.extend(
                rows::collect::<GrantRow>(
                    store,
                    &keys::grantee_partition(org, grantee),
                    keys::GRANT_PREFIX,
                    None,
                    usize::MAX,
                    |_| true,
                )
                .await?,
            );
        }
        let org_has_public = !store
            .query(
                &keys::public_partition(org),
                keys::NAMESPACE_PREFIX,
                None,
                1,
            )
            .await?
            .is_empty();
        Ok(Access {
            principal: principal.id.clone(),
            org: org.to_owned(),
            org_role,
            service_admin,
            grants: Arc::new(Grants::from_rows(&grants)),
            org_has_public,
        })
    }

    /// Whether `principal` administers the whole service, read now.
    pub async fn is_service_admin(&self, principal: &Principal) -> Result<bool> {
        Ok(
            rows::get::<ServiceAdminRow>(&*self.store, &keys::service_admin(&principal.id))
                .await?
                .is_some(),
        )
    }

    /// A live (not soft-deleted) namespace, read now, or 404.
    pub async fn live_namespace(
        &self,
        ctx: &OrgContext,
        name: &str,
    ) -> Result<Versioned<NamespaceRow>> {
        match rows::get::<NamespaceRow>(&*self.store, &keys::namespace(&ctx.org.name, name)).await?
        {
            Some(ns) if ns.row.deleted_ms.is_none() => {
                self.namespaces.insert(
                    (ctx.org.name.clone(), name.to_owned()),
                    Arc::new(ns.row.clone()),
                );
                Ok(ns)
            }
            // Without an org role a caller sees only what it was given: a namespace it cannot
            // see and one that does not exist answer alike.
            _ if !ctx.access.is_member() => Err(access_denied()),
            _ => Err(super::no_such_namespace(name)),
        }
    }

    /// A live namespace as recently seen (within the cache TTL), for operations that go on to
    /// read one of its tables.
    pub async fn recent_namespace(&self, ctx: &OrgContext, name: &str) -> Result<NamespaceRow> {
        self.recent_namespace_shared(ctx, name)
            .await
            .map(Arc::unwrap_or_clone)
    }

    /// [`Lookups::recent_namespace`], shared with the cache rather than copied.
    async fn recent_namespace_shared(
        &self,
        ctx: &OrgContext,
        name: &str,
    ) -> Result<Arc<NamespaceRow>> {
        match self
            .namespaces
            .get(&(ctx.org.name.clone(), name.to_owned()))
        {
            Some(ns) => Ok(ns),
            None => Ok(Arc::new(self.live_namespace(ctx, name).await?.row)),
        }
    }

    /// A table and its namespace, authorized for `action` on the table, with one store read
    /// when the namespace was seen recently.
    pub async fn authorized_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        action: Action,
    ) -> Result<(NamespaceRow, Versioned<TableRow>)> {
        let (ns, item) = self
            .authorized_table_item(ctx, namespace, table, action)
            .await?;
        Ok((Arc::unwrap_or_clone(ns), rows::versioned(&item)?))
    }

    /// As [`Lookups::authorized_table`], with the table's row as stored (not yet decoded): what
    /// an answer made from the same bytes can be reused for.
    pub async fn authorized_table_item(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        action: Action,
    ) -> Result<(Arc<NamespaceRow>, Item)> {
        let authorize = |ns: &NamespaceRow| {
            authorize(
                &ctx.access,
                Resource::Table {
                    namespace: ns,
                    table,
                },
                action,
            )
        };
        let ns = self.recent_namespace_shared(ctx, namespace).await?;
        authorize(&ns)?;
        if let Some(item) = self.store.get(&keys::table(&ns.id, table)).await? {
            return Ok((ns, item));
        }
        // The remembered namespace may have been dropped or replaced since.
        let fresh = self.live_namespace(ctx, namespace).await?.row;
        if fresh.id == ns.id {
            return Err(super::no_such_table(namespace, table));
        }
        authorize(&fresh)?;
        let item = self
            .store
            .get(&keys::table(&fresh.id, table))
            .await?
            .ok_or_else(|| super::no_such_table(namespace, table))?;
        Ok((Arc::new(fresh), item))
    }

    /// A table's row, read now, or 404.
    pub async fn table_row(&self, ns: &NamespaceRow, table: &str) -> Result<Versioned<TableRow>> {
        rows::get::<TableRow>(&*self.store, &keys::table(&ns.id, table))
            .await?
            .ok_or_else(|| super::no_such_table(&ns.name, table))
    }

    /// A bucket configuration that can back Iceberg storage, or 400.
    pub async fn usable_bucket(&self, org: &str, nickname: &str) -> Result<BucketRow> {
        let bucket = rows::get::<BucketRow>(&*self.store, &keys::bucket(org, nickname))
            .await?
            .ok_or_else(|| {
                CatalogError::BadRequest(format!("Unknown bucket configuration: {nickname}"))
            })?
            .row;
        let bucket = self.opened(bucket).await?;
        if bucket.auth == BucketAuth::Anonymous {
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

    /// A stored bucket row ready for use: a sealed secret opened, in memory only.
    pub async fn opened(&self, row: BucketRow) -> Result<BucketRow> {
        super::bucket_keys::opened(self.sealer.as_deref(), row).await
    }

    /// The object store of a bucket configuration.
    pub async fn objects_for(&self, bucket: &BucketRow) -> Result<Arc<dyn ObjectStore>> {
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
    pub async fn table_bucket(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        table: &TableRow,
    ) -> Result<Arc<BucketRow>> {
        let nickname = table.bucket_nickname(ns);
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
            self.opened(stored).await.map(Arc::new)
        };
        self.buckets
            .get_or_load(&(ctx.org.name.clone(), nickname.to_owned()), load)
            .await
    }

    /// The bucket configuration remembered now under `nickname`, without reading it: `None`
    /// once it changed on this instance or its TTL ran out.
    pub fn remembered_bucket(&self, org: &str, nickname: &str) -> Option<Arc<BucketRow>> {
        self.buckets.get(&(org.to_owned(), nickname.to_owned()))
    }

    /// Who may see or do what in `org` changed (a grant, a membership, a team, a namespace's
    /// visibility, an org setting): every principal's standing there is read again.
    pub fn org_access_changed(&self, org: &str) {
        let org = org.to_owned();
        self.standing.remove_if(move |(o, _), _| *o == org);
    }

    /// One namespace changed (dropped, restored, its storage moved): it is read again.
    pub fn namespace_changed(&self, org: &str, name: &str) {
        self.namespaces.remove(&(org.to_owned(), name.to_owned()));
    }

    /// One bucket configuration changed or went.
    pub fn bucket_changed(&self, org: &str, nickname: &str) {
        self.buckets.remove(&(org.to_owned(), nickname.to_owned()));
    }

    /// A principal was removed: its standing in every org is read again.
    pub fn principal_removed(&self, principal_id: &str) {
        let id = principal_id.to_owned();
        self.standing.remove_if(move |(_, p), _| *p == id);
    }

    /// Forgets everything, as a newly started instance would (tests simulating another one).
    pub fn clear_all(&self) {
        self.standing.clear();
        self.namespaces.clear();
        self.buckets.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{OrgRole, PrincipalKind};
    use crate::objects::PlatformStores;
    use crate::objects::local::LocalObjectStores;
    use crate::store::embedded::EmbeddedStore;

    fn principal() -> Principal {
        Principal {
            id: "api-client:someone".into(),
            kind: PrincipalKind::ApiClient,
            name: "someone".into(),
            email: None,
        }
    }

    async fn lookups_with_two_orgs(dir: &std::path::Path) -> (Arc<dyn MetaStore>, Lookups) {
        let store: Arc<dyn MetaStore> = Arc::new(EmbeddedStore::open(dir).unwrap());
        for name in ["a", "b"] {
            let org = OrgRow {
                name: name.into(),
                iceberg_enabled: true,
                default_bucket: "default".into(),
                created_ms: 0,
            };
            crate::bootstrap::ensure_org(&*store, &org).await.unwrap();
            crate::bootstrap::put_member(&*store, name, &principal().id, OrgRole::Read)
                .await
                .unwrap();
        }
        let objects = Arc::new(PlatformStores {
            local: LocalObjectStores,
            s3: None,
            gcs: None,
        });
        let lookups = Lookups::new(
            store.clone(),
            objects,
            None,
            std::time::Duration::from_secs(3600),
        );
        (store, lookups)
    }

    async fn role(lookups: &Lookups, org: &str) -> Option<OrgRole> {
        match lookups.management_context(&principal(), org).await {
            Ok(ctx) => ctx.access.org_role,
            Err(_) => None,
        }
    }

    /// A change of one org's access is seen there at once, and the other org's standing stays
    /// remembered; removing a principal forgets its standing everywhere.
    #[tokio::test]
    async fn invalidations_forget_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let (store, lookups) = lookups_with_two_orgs(dir.path()).await;
        assert_eq!(role(&lookups, "a").await, Some(OrgRole::Read));
        assert_eq!(role(&lookups, "b").await, Some(OrgRole::Read));
        for org in ["a", "b"] {
            crate::bootstrap::put_member(&*store, org, &principal().id, OrgRole::Admin)
                .await
                .unwrap();
        }
        assert_eq!(role(&lookups, "a").await, Some(OrgRole::Read), "remembered");
        lookups.org_access_changed("a");
        assert_eq!(
            role(&lookups, "a").await,
            Some(OrgRole::Admin),
            "read again"
        );
        assert_eq!(
            role(&lookups, "b").await,
            Some(OrgRole::Read),
            "another org's standing is not forgotten"
        );
        lookups.principal_removed(&principal().id);
        assert_eq!(role(&lookups, "b").await, Some(OrgRole::Admin));
    }
}
