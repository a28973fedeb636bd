//! Namespace lifecycle for org admins (the management API): the recoverable namespaces of an
//! org, restoring one with everything it had, and deletes that purge now (`immediate`) or free
//! the name while keeping every byte (`retain_data`).
//!
//! A soft-deleted namespace keeps its row (and id), so its tables, directory claims and grants,
//! all keyed by the namespace id, come back with it on restore. The purge fences a namespace
//! before it touches a file; from then on a restore is refused (409).

use crate::core::{AsRead, Change, ChangeFailure};
use crate::events::{Draft, Kind};
use serde::Serialize;

use super::NamespaceService;
use super::purge::{self, RECOVERY_PERIOD};
use super::{already_exists, being_purged};
use crate::authz::{Action, Resource, authorize};
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, no_such_namespace};
use crate::error::{CatalogError, Result};
use crate::model::{BucketRow, NamespaceRow, Visibility};
use crate::store::rows::{self, PublicNamespaceRow, PurgeProgressRow, Versioned, keys};
use crate::store::{Condition, Write};

/// A namespace as the management API lists it: live, or soft-deleted and recoverable until
/// its purge.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NamespaceStatus {
    pub name: String,
    pub bucket: String,
    pub location: String,
    pub visibility: Visibility,
    pub created_ms: u64,
    /// When it was dropped; absent while live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_ms: Option<u64>,
    /// When the purge takes it: the end of its recovery period, the time an immediate delete
    /// was asked for, or the next attempt after a failed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purge_at_ms: Option<u64>,
    /// `live`, `deleted` (recoverable) or `purging` (fenced by the purge: no longer
    /// recoverable).
    pub state: &'static str,
    /// An admin asked for it to be purged now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub immediate: bool,
    /// Objects the purge has deleted so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objects_deleted: Option<u64>,
    #[serde(skip_serializing_if = "is_zero")]
    pub purge_attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purge_last_error: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How a management delete goes (`DELETE /api/v1/orgs/{org}/namespaces/{namespace}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Purge now rather than after the recovery period.
    pub immediate: bool,
    /// Remove the namespace and free its name and prefix claim at once, deleting no object.
    pub retain_data: bool,
}

impl NamespaceService {
    /// The org's namespaces, live ones or (`deleted`) the recoverable ones (org admins).
    pub async fn namespace_statuses(
        &self,
        ctx: &OrgContext,
        deleted: bool,
    ) -> Result<Vec<NamespaceStatus>> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        let found: Vec<NamespaceRow> = rows::collect(
            &*self.core.store,
            &keys::org_partition(&ctx.org.name),
            keys::NAMESPACE_PREFIX,
            None,
            usize::MAX,
            |ns: &NamespaceRow| ns.deleted_ms.is_some() == deleted,
        )
        .await?;
        let mut out = Vec::with_capacity(found.len());
        for ns in found {
            let progress = match ns.purging {
                Some(_) => {
                    rows::get::<PurgeProgressRow>(&*self.core.store, &keys::purge_progress(&ns.id))
                        .await?
                        .map(|p| p.row.objects_deleted)
                        .or(Some(0))
                }
                None => None,
            };
            out.push(status(&ns, progress));
        }
        Ok(out)
    }

    /// Brings a soft-deleted namespace back with its properties, visibility, tables and grants
    /// (org admins). 409 when the name is live again or the purge has begun.
    pub async fn restore_namespace(&self, ctx: &OrgContext, name: &str) -> Result<NamespaceStatus> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        let org = ctx.org.name.as_str();
        let key = keys::namespace(org, name);
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.existing(ctx, name).await?;
            if ns.row.deleted_ms.is_none() {
                return Err(already_exists(name));
            }
            if ns.row.purging.is_some() {
                return Err(being_purged(name));
            }
            let mut row = ns.row.clone();
            row.deleted_ms = None;
            row.purge_attempts = 0;
            row.purge_last_error = None;
            row.purge_index_ms = None;
            row.purge_requested_ms = None;
            let mut writes = vec![rows::put(
                key.clone(),
                &row,
                Condition::VersionIs(ns.version),
            )];
            if row.visibility == Visibility::AuthenticatedPublic {
                let entry = PublicNamespaceRow {
                    namespace_id: row.id.clone(),
                    name: row.name.clone(),
                };
                writes.push(rows::put(
                    keys::public_namespace(org, name),
                    &entry,
                    Condition::Always,
                ));
            }
            let event = Draft::new(Kind::NamespaceRestored, org, name, &row.id, &ctx.principal);
            match self
                .core
                .changes
                .write(ctx.key(), Change::as_read(writes), event)
                .await
            {
                Ok(()) => {
                    self.core.lookups.namespace_changed(org, name);
                    self.core.lookups.org_access_changed(org);
                    tracing::info!(audit = "restore", org, by = %ctx.principal.id, namespace = name, "namespace restored");
                    return Ok(status(&row, None));
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }

    /// Deletes a namespace as an org admin: a soft delete like the catalog's drop (409 while
    /// it has tables), due for the purge now with `immediate`; with `retain_data` the namespace
    /// is removed at once and its name and prefix freed, every object left in place. An
    /// immediate or data-keeping delete also applies to a namespace already soft-deleted.
    pub async fn delete_namespace(
        &self,
        ctx: &OrgContext,
        name: &str,
        options: DeleteOptions,
    ) -> Result<()> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        if options.retain_data {
            return self.remove_keeping_data(ctx, name).await;
        }
        let ns = self.existing(ctx, name).await?;
        if ns.row.deleted_ms.is_none() {
            self.soft_delete(ctx, name, Action::Manage, options.immediate)
                .await?;
        } else if options.immediate {
            self.expedite(ctx, name).await?;
        } else {
            return Err(no_such_namespace(name));
        }
        if options.immediate {
            self.core.purge_wanted.notify_one();
        }
        tracing::info!(audit = "namespace_delete", org = %ctx.org.name, by = %ctx.principal.id, namespace = name, immediate = options.immediate, "namespace deleted");
        Ok(())
    }

    /// Makes an already soft-deleted namespace due for the purge now.
    async fn expedite(&self, ctx: &OrgContext, name: &str) -> Result<()> {
        let key = keys::namespace(&ctx.org.name, name);
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.existing(ctx, name).await?;
            if ns.row.deleted_ms.is_none() {
                return Err(no_such_namespace(name));
            }
            if ns.row.purging.is_some() || ns.row.purge_requested_ms.is_some() {
                // Already on its way.
                return Ok(());
            }
            let mut row = ns.row.clone();
            purge::request_immediate(&mut row, self.core.clock.now_ms());
            let write = rows::put_indexed(
                key.clone(),
                &row,
                Condition::VersionIs(ns.version),
                purge::index_key(&row),
            );
            match self
                .core
                .changes
                .write_unrecorded(Change::as_read(vec![write]))
                .await
            {
                Ok(()) => return Ok(()),
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }

    /// `retain_data`: the row goes with its name and prefix claims (and its public entry) in
    /// one write; then its directory claims and grants. Objects, the marker included, stay.
    async fn remove_keeping_data(&self, ctx: &OrgContext, name: &str) -> Result<()> {
        let org = ctx.org.name.as_str();
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.existing(ctx, name).await?;
            if ns.row.purging.is_some() {
                return Err(being_purged(name));
            }
            super::refuse_if_holding(&ns.row)?;
            let bucket =
                rows::get::<BucketRow>(&*self.core.store, &keys::bucket(org, &ns.row.bucket))
                    .await?
                    .map(|b| b.row.root);
            let mut writes = vec![
                Write::Delete {
                    key: keys::namespace(org, name),
                    condition: Condition::VersionIs(ns.version),
                },
                Write::Delete {
                    key: keys::public_namespace(org, name),
                    condition: Condition::Always,
                },
            ];
            writes.extend(self.name_claim_release(&ns.row).await?);
            if let Some(root) = bucket {
                writes.push(Write::Delete {
                    key: keys::prefix_claim(&root, &ns.row.prefix),
                    condition: Condition::Always,
                });
            }
            let event = Draft::new(Kind::NamespacePurged, org, name, &ns.row.id, &ctx.principal);
            match self
                .core
                .changes
                .write(ctx.key(), Change::as_read(writes), event)
                .await
            {
                Ok(()) => {}
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
            self.core.lookups.namespace_changed(org, name);
            self.core.lookups.org_access_changed(org);
            // The namespace is gone: what its partition still holds is unreachable. A failure
            // here leaves rows nothing reads; logged, not an error for the caller.
            if let Err(e) = self.remove_namespace_leftovers(&ns.row).await {
                tracing::warn!(org, namespace = name, error = %e, "rows of a removed namespace were left behind");
            }
            tracing::info!(audit = "namespace_delete", org, by = %ctx.principal.id, namespace = name, retain_data = true, location = %ns.row.location, "namespace removed, data kept");
            return Ok(());
        }
        Err(CatalogError::contended("The namespace"))
    }

    /// The namespace's row, live or soft-deleted, or 404.
    async fn existing(&self, ctx: &OrgContext, name: &str) -> Result<Versioned<NamespaceRow>> {
        rows::get::<NamespaceRow>(&*self.core.store, &keys::namespace(&ctx.org.name, name))
            .await?
            .ok_or_else(|| no_such_namespace(name))
    }
}

fn status(ns: &NamespaceRow, objects_deleted: Option<u64>) -> NamespaceStatus {
    let state = match (ns.deleted_ms, ns.purging) {
        (None, _) => "live",
        (Some(_), None) => "deleted",
        (Some(_), Some(_)) => "purging",
    };
    NamespaceStatus {
        name: ns.name.clone(),
        bucket: ns.bucket.clone(),
        location: ns.location.clone(),
        visibility: ns.visibility,
        created_ms: ns.created_ms,
        deleted_ms: ns.deleted_ms,
        purge_at_ms: purge::due_ms(ns, RECOVERY_PERIOD),
        state,
        immediate: ns.purge_requested_ms.is_some(),
        objects_deleted,
        purge_attempts: ns.purge_attempts,
        purge_last_error: ns.purge_last_error.clone(),
    }
}
