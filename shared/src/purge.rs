//! The purge: empties and removes soft-deleted namespaces whose recovery period has passed.
//!
//! Candidates come from the sparse index of soft-deleted namespaces, oldest first. Each one is
//! handled in idempotent steps, so a run killed at any point leaves a state the next run
//! finishes from:
//!
//! 1. Re-read the row: it may have been restored meanwhile.
//! 2. Fence it: write `purging` conditioned on the version just read. The write moves the
//!    version, so a restore that read the row earlier fails its own conditional write, and a
//!    restore that reads it later sees `purging` and answers 409. A restore that landed first
//!    makes the fence fail instead, and the namespace is left alone. Nothing touches storage
//!    before the fence holds; a namespace already fenced by an earlier run is not fenced again.
//! 3. Delete everything under its storage prefix in bounded batches.
//! 4. Remove the row (conditioned on the fenced version) with its name and prefix claims in one
//!    write. Only a removal that landed counts the namespace as purged.

use std::time::Duration;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::error::{CatalogError, Result};
use crate::objects::ObjectStore;
use crate::store::rows::{self, BucketRow, NameClaimRow, NameHolder, NamespaceRow, keys};
use crate::store::{Condition, Key, StoreError, Write};

/// How long a dropped namespace stays recoverable.
pub const RECOVERY_PERIOD: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Objects deleted per storage request.
pub const DELETE_BATCH: usize = 1000;

/// What one purge run did.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct PurgeReport {
    /// Namespaces whose rows this run removed, as `org/name`.
    pub purged: Vec<String>,
    pub objects_deleted: u64,
    /// Index entries that no longer named an expired, soft-deleted namespace, or whose namespace
    /// changed while this run handled it.
    pub skipped: u64,
}

/// How one candidate ended, short of a failure.
enum Outcome {
    Purged,
    Skipped,
}

/// Where the purge index orders a soft-deleted namespace (see the module documentation).
fn index_ms(ns: &NamespaceRow) -> Option<u64> {
    ns.purge_index_ms.or(ns.deleted_ms)
}

fn index_key(ns: &NamespaceRow) -> Option<Key> {
    index_ms(ns).map(|ms| keys::deleted_namespace(ms, &ns.org, &ns.name))
}

/// `org/name` of a namespace row key.
fn label(key: &Key) -> String {
    let org = key.pk.strip_prefix("ORG#").unwrap_or(&key.pk);
    let name = key
        .sk
        .strip_prefix(keys::NAMESPACE_PREFIX)
        .unwrap_or(&key.sk);
    format!("{org}/{name}")
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
        // Everything due at or before the cutoff sorts at or below "<cutoff>~".
        let upto = format!("{}~", keys::deleted_sort_key(cutoff));
        let candidates = self
            .store
            .query_index(keys::DELETED_NAMESPACES, &upto, max_namespaces)
            .await?;
        let mut report = PurgeReport::default();
        for key in candidates {
            let mut deleted = 0;
            let outcome = self.purge_namespace(&key, cutoff, &mut deleted).await;
            report.objects_deleted += deleted;
            match outcome? {
                Outcome::Purged => {
                    tracing::info!(namespace = %label(&key), objects = deleted, "purged namespace");
                    report.purged.push(label(&key));
                }
                Outcome::Skipped => report.skipped += 1,
            }
        }
        Ok(report)
    }

    /// Fences, empties and removes one namespace; `deleted` counts the objects deleted so far.
    async fn purge_namespace(&self, key: &Key, cutoff: u64, deleted: &mut u64) -> Result<Outcome> {
        let Some(ns) = rows::get::<NamespaceRow>(&*self.store, key).await? else {
            return Ok(Outcome::Skipped);
        };
        if ns.row.deleted_ms.is_none() || index_ms(&ns.row).is_none_or(|due| due > cutoff) {
            return Ok(Outcome::Skipped);
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
        let objects = self.objects_for(&bucket).await?;
        let version = match ns.row.purging {
            // Fenced by an earlier run that did not finish.
            Some(_) => ns.version,
            None => {
                let mut fenced = ns.row.clone();
                fenced.purging = Some(self.clock.now_ms());
                let write = rows::put_indexed(
                    key.clone(),
                    &fenced,
                    Condition::VersionIs(ns.version),
                    index_key(&fenced),
                );
                match self.store.write(vec![write]).await {
                    Ok(()) => ns.version + 1,
                    // Restored (or handled by a concurrent run) since it was read.
                    Err(StoreError::ConditionFailed { .. }) => return Ok(Outcome::Skipped),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        empty_prefix(&*objects, &ns.row, deleted).await?;
        if self.remove_namespace(&ns.row, version, &bucket).await? {
            Ok(Outcome::Purged)
        } else {
            tracing::warn!(
                org = %ns.row.org,
                namespace = %ns.row.name,
                "namespace changed after it was fenced; left for the next run"
            );
            Ok(Outcome::Skipped)
        }
    }

    /// Removes the row and its claims, unless the row moved past `version`. True when the
    /// removal landed.
    async fn remove_namespace(
        &self,
        ns: &NamespaceRow,
        version: u64,
        bucket: &BucketRow,
    ) -> Result<bool, StoreError> {
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
            Ok(()) => Ok(true),
            Err(StoreError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Deletes every object under the namespace's storage root, a batch at a time.
async fn empty_prefix(
    objects: &dyn ObjectStore,
    ns: &NamespaceRow,
    deleted: &mut u64,
) -> Result<()> {
    let prefix = format!("{}/", ns.location.trim_end_matches('/'));
    loop {
        let batch = objects.list(&prefix, DELETE_BATCH).await?;
        if batch.is_empty() {
            return Ok(());
        }
        objects.delete(&batch).await?;
        *deleted += batch.len() as u64;
    }
}
