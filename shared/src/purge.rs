//! The purge: empties and removes soft-deleted namespaces whose recovery period has passed.
//!
//! Each namespace is handled in three idempotent steps: re-read it (it may have been restored),
//! delete everything under its storage prefix in bounded batches, then remove its row and its
//! name and prefix claims in one conditional write. A run killed at any point leaves a state the
//! next run finishes from.

use std::time::Duration;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::error::{CatalogError, Result};
use crate::store::rows::{self, BucketRow, NameClaimRow, NameHolder, NamespaceRow, keys};
use crate::store::{Condition, StoreError, Write};

/// How long a dropped namespace stays recoverable.
pub const RECOVERY_PERIOD: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Objects deleted per storage request.
pub const DELETE_BATCH: usize = 1000;

/// What one purge run did.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct PurgeReport {
    /// Namespaces removed, as `org/name`.
    pub purged: Vec<String>,
    pub objects_deleted: u64,
    /// Index entries that no longer named an expired, soft-deleted namespace.
    pub skipped: u64,
}

impl Catalog {
    /// Purges at most `max_namespaces` namespaces deleted before `now_ms - recovery`.
    pub async fn purge_expired(
        &self,
        now_ms: u64,
        recovery: Duration,
        max_namespaces: usize,
    ) -> Result<PurgeReport> {
        let cutoff = now_ms.saturating_sub(recovery.as_millis() as u64);
        // Everything deleted at or before the cutoff sorts at or below "<cutoff>~".
        let upto = format!("{}~", keys::deleted_sort_key(cutoff));
        let candidates = self
            .store
            .query_index(keys::DELETED_NAMESPACES, &upto, max_namespaces)
            .await?;
        let mut report = PurgeReport::default();
        for key in candidates {
            let Some(ns) = rows::get::<NamespaceRow>(&*self.store, &key).await? else {
                report.skipped += 1;
                continue;
            };
            if ns.row.deleted_ms.is_none_or(|d| d > cutoff) {
                report.skipped += 1;
                continue;
            }
            let bucket =
                rows::get::<BucketRow>(&*self.store, &keys::bucket(&ns.row.org, &ns.row.bucket))
                    .await?
                    .ok_or_else(|| {
                        CatalogError::Internal(format!(
                            "bucket configuration '{}' is gone",
                            ns.row.bucket
                        ))
                    })?
                    .row;
            let deleted = self.empty_prefix(&ns.row, &bucket).await?;
            report.objects_deleted += deleted;
            self.remove_namespace(&ns.row, ns.version, &bucket).await?;
            tracing::info!(org = %ns.row.org, namespace = %ns.row.name, objects = deleted, "purged namespace");
            report
                .purged
                .push(format!("{}/{}", ns.row.org, ns.row.name));
        }
        Ok(report)
    }

    /// Deletes every object under the namespace's storage root, a batch at a time.
    async fn empty_prefix(&self, ns: &NamespaceRow, bucket: &BucketRow) -> Result<u64> {
        let objects = self.objects_for(bucket).await?;
        let prefix = format!("{}/", ns.location.trim_end_matches('/'));
        let mut deleted = 0;
        loop {
            let batch = objects.list(&prefix, DELETE_BATCH).await?;
            if batch.is_empty() {
                return Ok(deleted);
            }
            objects.delete(&batch).await?;
            deleted += batch.len() as u64;
        }
    }

    /// Removes the row and its claims, unless the namespace changed (was restored) meanwhile.
    async fn remove_namespace(
        &self,
        ns: &NamespaceRow,
        version: u64,
        bucket: &BucketRow,
    ) -> Result<()> {
        let mut writes = vec![Write::Delete {
            key: keys::namespace(&ns.org, &ns.name),
            condition: Condition::VersionIs(version),
        }];
        let claim =
            rows::get::<NameClaimRow>(&*self.store, &keys::name_claim(&ns.org, &ns.name)).await?;
        if let Some(claim) =
            claim.filter(|c| c.row.holder == NameHolder::Namespace { id: ns.id.clone() })
        {
            writes.push(Write::Delete {
                key: keys::name_claim(&ns.org, &ns.name),
                condition: Condition::VersionIs(claim.version),
            });
        }
        let prefix_key = keys::prefix_claim(&bucket.root, &ns.prefix);
        if self.store.get(&prefix_key).await?.is_some() {
            writes.push(Write::Delete {
                key: prefix_key,
                condition: Condition::Exists,
            });
        }
        match self.store.write(writes).await {
            Ok(()) => Ok(()),
            // Restored or purged by a concurrent run: nothing to remove any more.
            Err(StoreError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
