//! The purge: empties and removes soft-deleted namespaces whose recovery period has passed.
//!
//! Candidates come from the sparse index of soft-deleted namespaces, oldest first. Each one is
//! handled in idempotent steps, so a run killed at any point leaves a state the next run
//! finishes from:
//!
//! 1. Re-read the row: it may have been restored, or be waiting out a retry backoff.
//! 2. Fence it: write `purging` conditioned on the version just read. The write moves the
//!    version, so a restore that read the row earlier fails its own conditional write, and a
//!    restore that reads it later sees `purging` and answers 409. A restore that landed first
//!    makes the fence fail instead, and the namespace is left alone. Nothing touches storage
//!    before the fence holds; a namespace already fenced by an earlier run is not fenced again.
//! 3. Delete everything under its storage prefix in bounded batches.
//! 4. Remove the row (conditioned on the fenced version) with its name and prefix claims in one
//!    write. Only a removal that landed counts the namespace as purged.
//!
//! A namespace that fails (its bucket configuration is gone, its storage errors) does not stop
//! the run: the failure is logged, counted on the row (`purge_attempts`, `purge_last_error`) and
//! the run goes on with the next candidate. So that a namespace that keeps failing cannot starve
//! those behind it (candidates are taken oldest first, `max_namespaces` at a time), the same
//! write moves its index entry behind every namespace due now: it is due again after a backoff
//! that doubles with each failed attempt, from [`RETRY_BACKOFF`] up to [`RETRY_BACKOFF_MAX`].
//! The index orders by deletion time, and a namespace is due once `now - recovery` reaches it;
//! a failed namespace is therefore re-keyed at `now - recovery + backoff` (`purge_index_ms`).
//! Failures count towards `max_namespaces`, which bounds the work of one run, not its successes:
//! a run stays inside its time limit however many namespaces fail.

use crate::events::{Draft, Kind};
use crate::model::{Principal, PrincipalKind};
use std::time::Duration;

use serde::Serialize;

use super::NamespaceService;
use crate::core::{AsRead, Change, ChangeFailure, Core};
use crate::error::CatalogError;
use crate::model::{BucketRow, GrantRow, NamespaceRow};
use crate::objects::{ObjectError, ObjectStore};
use crate::store::rows::{self, NameClaimRow, NameHolder, PurgeProgressRow, keys};
use crate::store::{Condition, Key, StoreError, Write};

/// How long a dropped namespace stays recoverable.
pub const RECOVERY_PERIOD: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Namespaces one purge run attempts at most: bounds a run's work (a Lambda run has 15 minutes).
pub const NAMESPACES_PER_RUN: usize = 25;

/// Directory claims removed per store write (a DynamoDB transaction holds at most 100 items).
const CLAIMS_PER_WRITE: usize = 100;

/// Objects deleted per storage request.
pub const DELETE_BATCH: usize = 1000;

/// How long a namespace whose purge failed waits before its next attempt (doubled per failure).
pub const RETRY_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// The longest wait between two attempts on a failing namespace.
pub const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(24 * 60 * 60);

/// Longest failure message kept on a row.
const ERROR_MAX_CHARS: usize = 300;

/// What one purge run did.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct PurgeReport {
    /// Namespaces whose rows this run removed, as `org/name`.
    pub purged: Vec<String>,
    /// Namespaces this run failed to purge, as `org/name`; retried after a backoff.
    pub failed: Vec<String>,
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

/// Why one namespace (or dropped table) could not be purged: a short message for its row and
/// the log. Built from the catalog's own error texts (locations, bucket nicknames, error
/// codes), never from a bucket configuration's credentials.
pub(crate) struct Failure(pub(crate) String);

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure(format!("catalog store: {e}"))
    }
}

impl From<ObjectError> for Failure {
    fn from(e: ObjectError) -> Self {
        Failure(format!("storage: {e}"))
    }
}

impl From<CatalogError> for Failure {
    fn from(e: CatalogError) -> Self {
        Failure(e.to_string())
    }
}

impl Failure {
    /// The message, cut to what a row keeps.
    pub(crate) fn message(self) -> String {
        match self.0.char_indices().nth(ERROR_MAX_CHARS) {
            Some((cut, _)) => format!("{}…", &self.0[..cut]),
            None => self.0,
        }
    }
}

/// Where the purge index orders a soft-deleted namespace (see the module documentation).
fn index_ms(ns: &NamespaceRow) -> Option<u64> {
    ns.purge_index_ms.or(ns.deleted_ms)
}

/// The purge index entry of a soft-deleted namespace (`None` for a live one).
pub fn index_key(ns: &NamespaceRow) -> Option<Key> {
    index_ms(ns).map(|ms| keys::deleted_namespace(ms, &ns.org, &ns.name))
}

/// Where an immediate request puts a namespace in the purge index: before every namespace
/// deleted in the ordinary way, so the next run takes it first.
pub(crate) const IMMEDIATE_INDEX_MS: u64 = 0;

/// Marks a soft-deleted namespace for purging now rather than after the recovery period.
pub fn request_immediate(ns: &mut NamespaceRow, now_ms: u64) {
    ns.purge_requested_ms = Some(now_ms);
    ns.purge_index_ms = Some(IMMEDIATE_INDEX_MS);
}

/// When the purge will take a soft-deleted namespace: at the request of an immediate delete,
/// after a failed attempt at its next attempt, else when its recovery period ends.
pub fn due_ms(ns: &NamespaceRow, recovery: Duration) -> Option<u64> {
    let recovery = recovery.as_millis() as u64;
    match (ns.purge_index_ms, ns.purge_requested_ms) {
        (Some(IMMEDIATE_INDEX_MS), Some(requested)) => Some(requested),
        (Some(index), _) => Some(index.saturating_add(recovery)),
        (None, _) => ns.deleted_ms.map(|d| d.saturating_add(recovery)),
    }
}

/// The wait before the next attempt on a namespace that has failed `attempts` times.
pub(crate) fn backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    RETRY_BACKOFF
        .saturating_mul(1 << doublings)
        .min(RETRY_BACKOFF_MAX)
}

/// The org and name of a namespace row key.
fn org_and_name(key: &Key) -> (&str, &str) {
    let org = key.pk.strip_prefix("ORG#").unwrap_or(&key.pk);
    let name = key
        .sk
        .strip_prefix(keys::NAMESPACE_PREFIX)
        .unwrap_or(&key.sk);
    (org, name)
}

/// `org/name` of a namespace row key, as reports name namespaces.
fn label(key: &Key) -> String {
    let (org, name) = org_and_name(key);
    format!("{org}/{name}")
}

/// The purge of a namespace's dropped tables, which a namespace's purge runs first (one with a
/// storage override keeps its files outside the namespace's prefix). The table service
/// provides it.
#[async_trait::async_trait]
pub trait DroppedTables: Send + Sync {
    /// Purges every dropped table of `ns` whatever its own recovery time, counting the objects
    /// deleted in `deleted`; `Err` says which failed and why.
    async fn purge_all_of(&self, ns: &NamespaceRow, deleted: &mut u64) -> Result<(), String>;
}

/// Who a purge's event names: the catalog itself, not the admin who dropped the namespace.
pub(crate) fn purger() -> Principal {
    Principal {
        id: "floe:purge".into(),
        kind: PrincipalKind::ApiClient,
        name: "Floe purge".into(),
        email: None,
    }
}

impl NamespaceService {
    /// Attempts at most `max_namespaces` namespaces deleted before `now_ms - recovery` (or due
    /// again after a failed attempt). Fails only when the candidates cannot be listed.
    pub async fn purge_expired(
        &self,
        now_ms: u64,
        recovery: Duration,
        max_namespaces: usize,
    ) -> crate::error::Result<PurgeReport> {
        let cutoff = now_ms.saturating_sub(recovery.as_millis() as u64);
        // Everything due at or before the cutoff sorts at or below "<cutoff>~".
        let upto = format!("{}~", keys::deleted_sort_key(cutoff));
        let candidates = self
            .core
            .store
            .query_index(keys::DELETED_NAMESPACES, &upto, max_namespaces)
            .await?;
        let mut report = PurgeReport::default();
        for key in candidates {
            let mut deleted = 0;
            let outcome = self.purge_namespace(&key, cutoff, &mut deleted).await;
            report.objects_deleted += deleted;
            match outcome {
                Ok(Outcome::Purged) => {
                    let (org, namespace) = org_and_name(&key);
                    tracing::info!(org, namespace, objects = deleted, "purged namespace");
                    report.purged.push(label(&key));
                }
                Ok(Outcome::Skipped) => report.skipped += 1,
                Err(failure) => {
                    self.record_failure(&key, cutoff, failure.message()).await;
                    report.failed.push(label(&key));
                }
            }
        }
        Ok(report)
    }

    /// Fences, empties and removes one namespace; `deleted` counts the objects deleted so far.
    async fn purge_namespace(
        &self,
        key: &Key,
        cutoff: u64,
        deleted: &mut u64,
    ) -> Result<Outcome, Failure> {
        let Some(ns) = rows::get::<NamespaceRow>(&*self.core.store, key).await? else {
            return Ok(Outcome::Skipped);
        };
        if ns.row.deleted_ms.is_none() || index_ms(&ns.row).is_none_or(|due| due > cutoff) {
            return Ok(Outcome::Skipped);
        }
        let bucket = rows::get::<BucketRow>(
            &*self.core.store,
            &keys::bucket(&ns.row.org, &ns.row.bucket),
        )
        .await?
        .ok_or_else(|| Failure(format!("bucket configuration '{}' is gone", ns.row.bucket)))?
        .row;
        let bucket = self
            .core
            .lookups
            .opened(bucket)
            .await
            .map_err(|e| Failure(e.to_string()))?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let version = match ns.row.purging {
            // Fenced by an earlier run that did not finish.
            Some(_) => ns.version,
            None => {
                let mut fenced = ns.row.clone();
                fenced.purging = Some(self.core.clock.now_ms());
                let write = rows::put_indexed(
                    key.clone(),
                    &fenced,
                    Condition::VersionIs(ns.version),
                    index_key(&fenced),
                );
                match self
                    .core
                    .changes
                    .write_unrecorded(Change::as_read(vec![write]))
                    .await
                {
                    Ok(()) => ns.version + 1,
                    // Restored (or handled by a concurrent run) since it was read.
                    Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => {
                        return Ok(Outcome::Skipped);
                    }
                    Err(failure) => return Err(StoreError::from(failure).into()),
                }
            }
        };
        // Dropped tables first: one with a storage override keeps its files outside the
        // namespace's prefix, and each one's directory claim and grants go with it.
        self.dropped_tables
            .purge_all_of(&ns.row, deleted)
            .await
            .map_err(Failure)?;
        empty_prefix(&self.core, &*objects, &ns.row, deleted).await?;
        self.remove_namespace_leftovers(&ns.row).await?;
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

    /// Removes what the namespace's partition holds besides tables (it holds none): the
    /// claims of the directories its tables ever had, its dropped tables' rows and its grants
    /// with their entries in the grantees' partitions; a batch at a time. The namespace
    /// is fenced or gone, so nothing new can appear meanwhile.
    pub(crate) async fn remove_namespace_leftovers(
        &self,
        ns: &NamespaceRow,
    ) -> Result<(), StoreError> {
        let pk = keys::namespace_partition(&ns.id);
        for prefix in [
            keys::DIRECTORY_PREFIX,
            keys::DROPPED_TABLE_PREFIX,
            keys::MAINTENANCE_STATE_PREFIX,
        ] {
            self.remove_all(&pk, prefix).await?;
        }
        loop {
            let grants = self
                .core
                .store
                .query(&pk, keys::GRANT_PREFIX, None, CLAIMS_PER_WRITE / 2)
                .await?;
            if grants.is_empty() {
                break;
            }
            let mut deletes = Vec::with_capacity(grants.len() * 2);
            for item in grants {
                let grant: GrantRow = rows::decode(&item)?;
                deletes.push(Write::Delete {
                    key: keys::grantee(&ns.org, &grant.principal, &ns.id, grant.table.as_deref()),
                    condition: Condition::Always,
                });
                deletes.push(Write::Delete {
                    key: item.key,
                    condition: Condition::Always,
                });
            }
            self.core
                .changes
                .write_unrecorded(Change::as_read(deletes))
                .await?;
        }
        Ok(())
    }

    /// Deletes every row of partition `pk` under `prefix`, a batch at a time.
    async fn remove_all(&self, pk: &str, prefix: &str) -> Result<(), StoreError> {
        loop {
            let found = self
                .core
                .store
                .query(pk, prefix, None, CLAIMS_PER_WRITE)
                .await?;
            if found.is_empty() {
                return Ok(());
            }
            let deletes = found
                .into_iter()
                .map(|item| Write::Delete {
                    key: item.key,
                    condition: Condition::Always,
                })
                .collect();
            self.core
                .changes
                .write_unrecorded(Change::as_read(deletes))
                .await?;
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
        let mut writes = vec![
            Write::Delete {
                key: keys::namespace(&ns.org, &ns.name),
                condition: Condition::VersionIs(version),
            },
            Write::Delete {
                key: keys::purge_progress(&ns.id),
                condition: Condition::Always,
            },
        ];
        writes.extend(self.name_claim_release(ns).await?);
        let prefix_key = keys::prefix_claim(&bucket.root, &ns.prefix);
        if self.core.store.get(&prefix_key).await?.is_some() {
            writes.push(Write::Delete {
                key: prefix_key,
                condition: Condition::Exists,
            });
        }
        let event = Draft::new(Kind::NamespacePurged, &ns.org, &ns.name, &ns.id, &purger());
        match self
            .core
            .changes
            .write(None, Change::as_read(writes), event)
            .await
        {
            Ok(()) => Ok(true),
            Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => Ok(false),
            Err(ChangeFailure::NotWritten(e) | ChangeFailure::Unknown(e)) => Err(e),
        }
    }

    /// The write that frees the namespace's name, if the namespace still holds it (a claim held
    /// by anything else is left alone; the write fails if the claim changes meanwhile).
    pub(crate) async fn name_claim_release(
        &self,
        ns: &NamespaceRow,
    ) -> Result<Option<Write>, StoreError> {
        let key = keys::name_claim(&ns.org, &ns.name);
        let claim = rows::get::<NameClaimRow>(&*self.core.store, &key).await?;
        Ok(claim
            .filter(|c| c.row.holder == NameHolder::Namespace { id: ns.id.clone() })
            .map(|claim| Write::Delete {
                key,
                condition: Condition::VersionIs(claim.version),
            }))
    }

    /// Counts a failed attempt on the namespace's row and moves its index entry to when it is
    /// due again. Best effort: when this write fails too, the next run simply retries sooner.
    async fn record_failure(&self, key: &Key, cutoff: u64, error: String) {
        let (org, namespace) = org_and_name(key);
        let current = match rows::get::<NamespaceRow>(&*self.core.store, key).await {
            Ok(Some(ns)) if ns.row.deleted_ms.is_some() => ns,
            Ok(_) => {
                tracing::warn!(org, namespace, %error, "purge of namespace failed; it is gone or restored since");
                return;
            }
            Err(e) => {
                tracing::error!(org, namespace, %error, store_error = %e, "purge of namespace failed and could not be recorded");
                return;
            }
        };
        let mut row = current.row;
        row.purge_attempts = row.purge_attempts.saturating_add(1);
        let retry = backoff(row.purge_attempts);
        row.purge_index_ms = Some(cutoff.saturating_add(retry.as_millis() as u64));
        row.purge_last_error = Some(error.clone());
        tracing::warn!(
            org,
            namespace,
            attempts = row.purge_attempts,
            retry_in_secs = retry.as_secs(),
            %error,
            "purge of namespace failed; going on with the next"
        );
        let write = rows::put_indexed(
            key.clone(),
            &row,
            Condition::VersionIs(current.version),
            index_key(&row),
        );
        if let Err(e) = self
            .core
            .changes
            .write_unrecorded(Change::as_read(vec![write]))
            .await
        {
            tracing::error!(org, namespace, store_error = %e, "could not record the failed purge attempt");
        }
    }
}

/// Deletes every object under the namespace's storage root, a batch at a time, recording
/// after each batch how many are gone (what `floe namespace delete --wait` shows).
async fn empty_prefix(
    core: &Core,
    objects: &dyn ObjectStore,
    ns: &NamespaceRow,
    deleted: &mut u64,
) -> Result<(), Failure> {
    let prefix = format!("{}/", ns.location.trim_end_matches('/'));
    loop {
        let batch = objects.list(&prefix, DELETE_BATCH).await?;
        if batch.is_empty() {
            return Ok(());
        }
        objects.delete(&batch).await?;
        *deleted += batch.len() as u64;
        let progress = PurgeProgressRow {
            objects_deleted: *deleted,
            updated_ms: core.clock.now_ms(),
        };
        core.store
            .write(vec![rows::put(
                keys::purge_progress(&ns.id),
                &progress,
                Condition::Always,
            )])
            .await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_maximum() {
        let hours = |n| backoff(n).as_secs() / 3600;
        assert_eq!([1, 2, 3, 4, 5, 6, 100].map(hours), [1, 2, 4, 8, 16, 24, 24]);
    }

    #[test]
    fn failure_messages_are_kept_short() {
        let long = Failure("x".repeat(1000)).message();
        assert_eq!(long.chars().count(), ERROR_MAX_CHARS + 1);
        assert_eq!(Failure("short".into()).message(), "short");
    }
}
