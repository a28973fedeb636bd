//! Namespace operations: flat, bound to a bucket prefix, soft-deleted on drop.

mod lifecycle;
pub mod purge;

use crate::core::{AsRead, Change, ChangeFailure, Core};
use crate::events::{Draft, Kind};
pub use lifecycle::{DeleteOptions, NamespaceStatus};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::authz::{Action, Resource, authorize};
use crate::catalog::storage::{self, MarkerOwner};
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names, paging};
use crate::error::{CatalogError, Result};
use crate::model::{NamespaceRow, Visibility};
use crate::store::rows::{self, NameClaimRow, NameHolder, PrefixClaimRow, Versioned, keys};
use crate::store::{Condition, Write};
use crate::types::{
    CreateNamespaceRequest, ListNamespacesResponse, NamespaceResponse,
    UpdateNamespacePropertiesRequest, UpdateNamespacePropertiesResponse,
};

/// Property naming the bucket configuration a namespace or table is created on.
pub const BUCKET_PROPERTY: &str = "arraylake.bucket";
/// Properties the catalog manages; clients cannot change them after creation.
const MANAGED_PROPERTIES: [&str; 2] = ["location", BUCKET_PROPERTY];

fn response(ns: &NamespaceRow) -> NamespaceResponse {
    NamespaceResponse {
        namespace: vec![ns.name.clone()],
        properties: ns.properties.clone(),
    }
}

/// What each write of a new namespace guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NewNamespacePart {
    /// The name (its claim and its row), not yet taken.
    Name,
    /// The generated storage prefix, claimed by nothing else in its bucket.
    Prefix,
}

/// Namespaces with their lifecycle (drop, restore, immediate delete) and the purge.
pub struct NamespaceService {
    core: Arc<Core>,
    /// Purges a namespace's dropped tables before its own purge empties it.
    dropped_tables: Arc<dyn purge::DroppedTables>,
}

impl NamespaceService {
    pub fn new(core: Arc<Core>, dropped_tables: Arc<dyn purge::DroppedTables>) -> Self {
        Self {
            core,
            dropped_tables,
        }
    }
}

impl NamespaceService {
    pub async fn list_namespaces(
        &self,
        ctx: &OrgContext,
        parent: Option<&str>,
        page: &paging::PageRequest,
    ) -> Result<ListNamespacesResponse> {
        authorize(&ctx.access, Resource::Catalog, Action::Read)?;
        if let Some(parent) = parent.filter(|p| !p.is_empty()) {
            // The parent must be a namespace the caller could load (404 when it does not
            // exist, as the spec says; a nested one is 400 like every nested reference), and
            // since nothing nests, it has no children.
            let levels = names::split_levels(parent);
            self.load_namespace(ctx, names::single_level(&levels)?)
                .await?;
            let token = page.size.map(|_| None);
            return Ok(ListNamespacesResponse {
                namespaces: vec![],
                next_page_token: token,
            });
        }
        let pk = keys::org_partition(&ctx.org.name);
        let scope = format!("namespaces:{}", ctx.org.name);
        let after = self
            .core
            .page_tokens
            .resume(&scope, page)?
            .map(|name| format!("{}{name}", keys::NAMESPACE_PREFIX));
        let found: Vec<NamespaceRow> = rows::collect(
            &*self.core.store,
            &pk,
            keys::NAMESPACE_PREFIX,
            after,
            page.read_limit(),
            |ns: &NamespaceRow| {
                ns.deleted_ms.is_none() && ctx.access.allows(Resource::Namespace(ns), Action::Read)
            },
        )
        .await?;
        let (found, token) = self
            .core
            .page_tokens
            .paginate(&scope, found, page, |ns| ns.name.as_str());
        Ok(ListNamespacesResponse {
            namespaces: found.into_iter().map(|ns| vec![ns.name]).collect(),
            next_page_token: token,
        })
    }

    pub async fn create_namespace(
        &self,
        ctx: &OrgContext,
        request: CreateNamespaceRequest,
    ) -> Result<NamespaceResponse> {
        // A caller who may not create namespaces learns nothing about its request.
        authorize(&ctx.access, Resource::Catalog, Action::Write)?;
        let name = names::single_level(&request.namespace)?.to_owned();
        names::validate_namespace_name(&name)?;
        let mut properties = request.properties.unwrap_or_default();
        crate::catalog::maintenance_policy::check(properties.clone())
            .map_err(|e| CatalogError::BadRequest(e.to_string()))?;
        let nickname = properties
            .get(BUCKET_PROPERTY)
            .cloned()
            .unwrap_or_else(|| ctx.org.default_bucket.clone());
        let bucket = self
            .core
            .lookups
            .usable_bucket(&ctx.org.name, &nickname)
            .await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let org = ctx.org.name.as_str();

        if let Some(claim) =
            rows::get::<NameClaimRow>(&*self.core.store, &keys::name_claim(org, &name)).await?
        {
            return self
                .create_over_claim(ctx, claim, &name, &nickname, properties)
                .await;
        }

        let id = uuid::Uuid::now_v7().to_string();
        let now = self.core.clock.now_ms();
        let owner = MarkerOwner {
            org,
            kind: "namespace",
            name: &name,
            id: &id,
            created_ms: now,
        };
        let (prefix, root) =
            storage::reserve_prefix(&*objects, &bucket.root, &name, &owner).await?;
        if let Err(e) = default_location(&mut properties, &root) {
            storage::remove_marker(&*objects, &root).await;
            return Err(e);
        }
        let row = NamespaceRow {
            id: id.clone(),
            org: org.to_owned(),
            name: name.clone(),
            bucket: nickname,
            prefix: prefix.clone(),
            location: root.clone(),
            properties,
            visibility: Default::default(),
            description: None,
            metadata: Default::default(),
            table_count: 0,
            view_count: 0,
            created_ms: now,
            deleted_ms: None,
            purging: None,
            purge_attempts: 0,
            purge_last_error: None,
            purge_index_ms: None,
            purge_requested_ms: None,
        };
        let claim = NameClaimRow {
            name: name.clone(),
            holder: NameHolder::Namespace { id: id.clone() },
        };
        let prefix_claim = PrefixClaimRow {
            bucket_root: bucket.root.clone(),
            prefix: prefix.clone(),
            owner: id,
        };
        let change = Change::new()
            .with(
                NewNamespacePart::Name,
                rows::put(keys::name_claim(org, &name), &claim, Condition::NotExists),
            )
            .with(
                NewNamespacePart::Name,
                rows::put(keys::namespace(org, &name), &row, Condition::NotExists),
            )
            .with(
                NewNamespacePart::Prefix,
                rows::put(
                    keys::prefix_claim(&bucket.root, &prefix),
                    &prefix_claim,
                    Condition::NotExists,
                ),
            );
        let event = Draft::new(Kind::NamespaceCreated, org, &name, &row.id, &ctx.principal);
        match self.core.changes.write(ctx.key(), change, event).await {
            Ok(()) => Ok(response(&row)),
            Err(failure) => {
                storage::remove_marker(&*objects, &root).await;
                match failure {
                    ChangeFailure::Refused(NewNamespacePart::Name) => Err(already_exists(&name)),
                    ChangeFailure::Refused(NewNamespacePart::Prefix) => {
                        Err(CatalogError::AlreadyExists(
                            "The generated storage prefix is already claimed; retry the request"
                                .into(),
                        ))
                    }
                    // A concurrent change or the store's failure: the store's 500.
                    failure => Err(failure.into()),
                }
            }
        }
    }

    /// A create whose name is already claimed: restore a soft-deleted, still-empty predecessor
    /// of the same name in place, otherwise 409.
    async fn create_over_claim(
        &self,
        ctx: &OrgContext,
        claim: Versioned<NameClaimRow>,
        name: &str,
        nickname: &str,
        mut properties: BTreeMap<String, String>,
    ) -> Result<NamespaceResponse> {
        let NameHolder::Namespace { .. } = claim.row.holder else {
            return Err(CatalogError::AlreadyExists(format!(
                "The name '{name}' is already used by a repo in this organization"
            )));
        };
        let org = ctx.org.name.as_str();
        let Some(old) =
            rows::get::<NamespaceRow>(&*self.core.store, &keys::namespace(org, &claim.row.name))
                .await?
        else {
            return Err(already_exists(name));
        };
        if old.row.deleted_ms.is_none() || old.row.name != name {
            return Err(already_exists(name));
        }
        if old.row.purging.is_some() {
            return Err(being_purged(name));
        }
        if old.row.bucket != nickname {
            return Err(already_exists(name));
        }
        let bucket = self
            .core
            .lookups
            .usable_bucket(org, &old.row.bucket)
            .await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        if !storage::holds_only_marker(&*objects, &old.row.location).await? {
            return Err(CatalogError::AlreadyExists(format!(
                "Namespace already exists: {name} (soft-deleted, and its storage still holds data; restore it instead)"
            )));
        }
        default_location(&mut properties, &old.row.location)?;
        let mut row = old.row.clone();
        row.deleted_ms = None;
        row.purge_attempts = 0;
        row.purge_last_error = None;
        row.purge_index_ms = None;
        row.purge_requested_ms = None;
        row.properties = properties;
        // A namespace created again starts private, like any new one.
        row.visibility = Visibility::Private;
        // Conditioned on the version read: a purge that fenced the namespace since moved it.
        let key = keys::namespace(org, name);
        let write = rows::put(key.clone(), &row, Condition::VersionIs(old.version));
        let event = Draft::new(Kind::NamespaceCreated, org, name, &row.id, &ctx.principal);
        match self
            .core
            .changes
            .write(ctx.key(), Change::as_read(vec![write]), event)
            .await
        {
            Ok(()) => {}
            Err(ChangeFailure::Refused(AsRead)) => {
                let now = rows::get::<NamespaceRow>(&*self.core.store, &key).await?;
                return Err(match now {
                    Some(ns) if ns.row.purging.is_none() => already_exists(name),
                    _ => being_purged(name),
                });
            }
            Err(failure) => return Err(failure.into()),
        }
        // The marker may be missing (a purge interrupted midway, before purges fenced the
        // namespaces they empty): write it again.
        let owner = MarkerOwner {
            org,
            kind: "namespace",
            name,
            id: &row.id,
            created_ms: row.created_ms,
        };
        storage::write_marker(&*objects, &row.location, &owner).await?;
        Ok(response(&row))
    }

    /// The answer to a retried createNamespace whose change landed: the namespace as it is now
    /// (the spec lets a replay reflect newer state).
    pub async fn replay_create(
        &self,
        ctx: &OrgContext,
        request: &CreateNamespaceRequest,
    ) -> Result<NamespaceResponse> {
        let name = names::single_level(&request.namespace)?;
        self.load_namespace(ctx, name).await
    }

    pub async fn load_namespace(&self, ctx: &OrgContext, name: &str) -> Result<NamespaceResponse> {
        let ns = self.core.lookups.live_namespace(ctx, name).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Read)?;
        Ok(response(&ns.row))
    }

    pub async fn namespace_exists(&self, ctx: &OrgContext, name: &str) -> Result<()> {
        let ns = self.core.lookups.live_namespace(ctx, name).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Read)
    }

    pub async fn drop_namespace(&self, ctx: &OrgContext, name: &str) -> Result<()> {
        self.soft_delete(ctx, name, Action::Write, false).await
    }

    /// Soft-deletes a live namespace without tables, for a caller allowed `action` on it. An
    /// `immediate` delete is due for the purge at once, ahead of every namespace waiting out
    /// its recovery period.
    pub(super) async fn soft_delete(
        &self,
        ctx: &OrgContext,
        name: &str,
        action: Action,
        immediate: bool,
    ) -> Result<()> {
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, name).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), action)?;
            refuse_if_holding(&ns.row)?;
            let mut row = ns.row.clone();
            let deleted_ms = self.core.clock.now_ms();
            row.deleted_ms = Some(deleted_ms);
            if immediate {
                self::purge::request_immediate(&mut row, deleted_ms);
            }
            let key = keys::namespace(&ctx.org.name, name);
            // The sparse index is how the purge finds expired namespaces without a scan.
            let index = self::purge::index_key(&row);
            let write = rows::put_indexed(key, &row, Condition::VersionIs(ns.version), index);
            // A dropped namespace is no longer discoverable, public or not.
            let unlist = Write::Delete {
                key: keys::public_namespace(&ctx.org.name, name),
                condition: Condition::Always,
            };
            let event = Draft::new(
                Kind::NamespaceDropped,
                &ctx.org.name,
                name,
                &row.id,
                &ctx.principal,
            );
            match self
                .core
                .changes
                .write(ctx.key(), Change::as_read(vec![write, unlist]), event)
                .await
            {
                Ok(()) => {
                    self.core.lookups.namespace_changed(&ctx.org.name, name);
                    return Ok(());
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }

    pub async fn update_namespace_properties(
        &self,
        ctx: &OrgContext,
        name: &str,
        request: UpdateNamespacePropertiesRequest,
    ) -> Result<UpdateNamespacePropertiesResponse> {
        let seen = self.core.lookups.recent_namespace(ctx, name).await?;
        authorize(&ctx.access, Resource::Namespace(&seen), Action::Write)?;
        let updates = request.updates.unwrap_or_default();
        let removals = request.removals.unwrap_or_default();
        if let Some(both) = removals.iter().find(|k| updates.contains_key(*k)) {
            return Err(CatalogError::Unprocessable(format!(
                "Property '{both}' is both updated and removed"
            )));
        }
        if let Some(managed) = MANAGED_PROPERTIES
            .iter()
            .find(|k| updates.contains_key(**k) || removals.iter().any(|r| r == *k))
        {
            return Err(CatalogError::BadRequest(format!(
                "Property '{managed}' is set by the catalog when the namespace is created and cannot be changed"
            )));
        }
        crate::catalog::maintenance_policy::check(updates.clone())
            .map_err(|e| CatalogError::BadRequest(e.to_string()))?;
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, name).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
            let mut row = ns.row.clone();
            let (mut removed, mut missing) = (Vec::new(), Vec::new());
            for key in &removals {
                match row.properties.remove(key) {
                    Some(_) => removed.push(key.clone()),
                    None => missing.push(key.clone()),
                }
            }
            row.properties.extend(updates.clone());
            let key = keys::namespace(&ctx.org.name, name);
            let answer = UpdateNamespacePropertiesResponse {
                updated: updates.keys().cloned().collect(),
                removed,
                missing,
            };
            let recorded = serde_json::to_string(&answer).ok();
            let mut event = Draft::new(
                Kind::NamespacePropertiesUpdated,
                &ctx.org.name,
                name,
                &row.id,
                &ctx.principal,
            );
            event.data.updated_properties = answer.updated.clone();
            event.data.removed_properties = answer.removed.clone();
            match self
                .core
                .changes
                .write_answering(
                    ctx.key(),
                    Change::as_read(vec![rows::put(key, &row, Condition::VersionIs(ns.version))]),
                    event,
                    recorded,
                )
                .await
            {
                Ok(()) => return Ok(answer),
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }
}

/// Defaults `location` to the storage root; an explicit one must lie inside it.
fn default_location(properties: &mut BTreeMap<String, String>, root: &str) -> Result<()> {
    match properties.get("location") {
        Some(given) if !storage::is_within(given, root) => Err(CatalogError::BadRequest(format!(
            "Namespace location '{given}' is outside the namespace's storage"
        ))),
        Some(given) => {
            let normalized = storage::normalize_location(given);
            properties.insert("location".into(), normalized);
            Ok(())
        }
        None => {
            properties.insert("location".into(), root.to_owned());
            Ok(())
        }
    }
}

pub(super) fn already_exists(name: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!("Namespace already exists: {name}"))
}

/// A soft-deleted namespace the purge has started to empty: no restore can win against it.
pub(super) fn being_purged(name: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!(
        "Namespace {name} is being purged and can no longer be restored; create it again once the purge has finished"
    ))
}

/// A namespace holding tables or views cannot be dropped or removed (409).
pub(super) fn refuse_if_holding(ns: &NamespaceRow) -> Result<()> {
    match (ns.table_count, ns.view_count) {
        (0, 0) => Ok(()),
        (tables, 0) => Err(CatalogError::NamespaceNotEmpty(format!(
            "Namespace is not empty: {} contains {tables} table(s)",
            ns.name
        ))),
        (tables, views) => Err(CatalogError::NamespaceNotEmpty(format!(
            "Namespace is not empty: {} contains {tables} table(s) and {views} view(s)",
            ns.name
        ))),
    }
}
