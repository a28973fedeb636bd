//! The purge of dropped tables whose recovery period has passed (or that an admin asked to
//! purge now), run beside the namespace purge and in the same idempotent steps:
//!
//! 1. Re-read the dropped-table row: it may have been restored, or be waiting out a backoff.
//! 2. Fence it (`purging`, conditioned on the version read): a restore that read it earlier
//!    fails its own conditional write, one that reads it later finds nothing recoverable.
//! 3. Delete every object under the table's own directory (or its override prefix), unless the
//!    namespace keeps dropped tables' data; nothing outside that directory is ever listed.
//! 4. Remove the row with the claim on its directory in one write, with an
//!    `io.floe.table.purged` event. Where the data is kept, the claim stays (the files are
//!    still there, so no other table may take the directory).
//!
//! A failure is recorded on the row (`purge_attempts`, `purge_last_error`) and moves its index
//! entry behind everything due now, with the namespace purge's backoff; the run goes on.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::{TableService, placement};
use crate::catalog::access::AccessService;
use crate::catalog::namespaces::purge::{DELETE_BATCH, DroppedTables, Failure, backoff, purger};
use crate::catalog::storage;
use crate::core::{AsRead, Change, ChangeFailure, Core};
use crate::events::{Draft, Kind};
use crate::model::{BucketRow, DroppedTableRow, NamespaceRow};
use crate::objects::ObjectStore;
use crate::store::rows::{self, keys};
use crate::store::{Condition, Key, StoreError, Write};

use super::recovery::{index_key, index_ms};

/// Dropped tables one purge run attempts at most.
pub const TABLES_PER_RUN: usize = 50;

/// What one run of the dropped-table purge did.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct DroppedPurgeReport {
    /// Tables whose rows this run removed, as `org/namespace/table@uuid`.
    pub purged: Vec<String>,
    /// Tables this run failed to purge; retried after a backoff.
    pub failed: Vec<String>,
    pub objects_deleted: u64,
    /// Index entries whose table was restored, not due, or changed while this run handled it.
    pub skipped: u64,
    /// Dropped tables whose kept table grants (rows of an earlier version) this run put back
    /// on their names.
    #[serde(skip_serializing_if = "is_zero")]
    pub grants_returned: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Dropped-table rows one purge run reads for table grants an earlier version kept on them.
pub const KEPT_GRANTS_PER_RUN: usize = 1_000;

/// How one dropped table ended, short of a failure.
enum Outcome {
    Purged,
    Skipped,
}

fn label(row: &DroppedTableRow) -> String {
    format!(
        "{}/{}/{}@{}",
        row.org, row.namespace, row.table.name, row.table.id
    )
}

impl TableService {
    /// Attempts at most `max_tables` dropped tables due at `now_ms` (dropped before
    /// `now_ms - recovery`, asked for now, or due again after a failure). Fails only when the
    /// candidates cannot be listed.
    pub async fn purge_dropped(
        &self,
        now_ms: u64,
        recovery: Duration,
        max_tables: usize,
    ) -> crate::error::Result<DroppedPurgeReport> {
        let cutoff = now_ms.saturating_sub(recovery.as_millis() as u64);
        let upto = format!("{}~", keys::deleted_sort_key(cutoff));
        let candidates = self
            .core
            .store
            .query_index(keys::DROPPED_TABLES, &upto, max_tables)
            .await?;
        let mut report = DroppedPurgeReport {
            grants_returned: self.return_kept_grants(KEPT_GRANTS_PER_RUN).await?,
            ..DroppedPurgeReport::default()
        };
        for key in candidates {
            let mut deleted = 0;
            let outcome = purge_dropped_table(&self.core, &key, Some(cutoff), &mut deleted).await;
            report.objects_deleted += deleted;
            match outcome {
                Ok((Outcome::Purged, label)) => {
                    tracing::info!(table = %label, objects = deleted, "purged dropped table");
                    report.purged.push(label);
                }
                Ok((Outcome::Skipped, _)) => report.skipped += 1,
                Err((failure, label)) => {
                    record_failure(&self.core, &key, cutoff, failure.message()).await;
                    report.failed.push(label);
                }
            }
        }
        Ok(report)
    }
}

impl TableService {
    /// Puts the table grants that dropped-table rows of an earlier version kept (a drop then
    /// moved its name's grants onto the dropped table) back on the names they came from,
    /// reading at most `max_rows` rows; answers how many rows gave grants back. A row that
    /// changes meanwhile, or whose namespace is deleted, keeps them for a later run (a restore
    /// or the purge gives them back too). Once no such row is left, this reads and writes
    /// nothing else.
    pub async fn return_kept_grants(&self, max_rows: usize) -> crate::error::Result<u64> {
        let keys = self
            .core
            .store
            .query_index(keys::DROPPED_TABLES, "~", max_rows)
            .await?;
        let mut returned = 0;
        for key in keys {
            let Some(dropped) = rows::get::<DroppedTableRow>(&*self.core.store, &key).await? else {
                continue;
            };
            if dropped.row.grants.is_empty() {
                continue;
            }
            let org = dropped.row.org.clone();
            let Some(ns) = rows::get::<NamespaceRow>(
                &*self.core.store,
                &keys::namespace(&org, &dropped.row.namespace),
            )
            .await?
            .map(|ns| ns.row)
            .filter(|ns| ns.id == dropped.row.table.namespace_id && ns.deleted_ms.is_none()) else {
                continue;
            };
            let mut writes =
                AccessService::return_kept_grants(&*self.core.store, &ns, &dropped.row).await?;
            let mut emptied = dropped.row.clone();
            emptied.grants.clear();
            writes.push(rows::put_indexed(
                key.clone(),
                &emptied,
                Condition::VersionIs(dropped.version),
                Some(index_key(&emptied)),
            ));
            match self
                .core
                .changes
                .write_unrecorded(Change::as_read(writes))
                .await
            {
                Ok(()) => {
                    self.core.lookups.org_access_changed(&org);
                    tracing::info!(table = %label(&dropped.row), grants = dropped.row.grants.len(), "kept table grants returned to their name");
                    returned += 1;
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => {}
                Err(failure) => return Err(failure.into()),
            }
        }
        Ok(returned)
    }
}

/// The dropped-table purge a namespace's purge runs first.
pub struct DroppedTablePurger {
    core: Arc<Core>,
}

impl DroppedTablePurger {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }
}

/// Dropped-table rows read per query.
const ROWS_PER_QUERY: usize = 100;

#[async_trait::async_trait]
impl DroppedTables for DroppedTablePurger {
    async fn purge_all_of(&self, ns: &NamespaceRow, deleted: &mut u64) -> Result<(), String> {
        let pk = keys::namespace_partition(&ns.id);
        let mut after: Option<String> = None;
        loop {
            let batch = self
                .core
                .store
                .query(
                    &pk,
                    keys::DROPPED_TABLE_PREFIX,
                    after.as_deref(),
                    ROWS_PER_QUERY,
                )
                .await
                .map_err(|e| format!("catalog store: {e}"))?;
            let exhausted = batch.len() < ROWS_PER_QUERY;
            after = batch.last().map(|item| item.key.sk.clone());
            for item in batch {
                purge_dropped_table(&self.core, &item.key, None, deleted)
                    .await
                    .map_err(|(failure, table)| format!("dropped table {table}: {}", failure.0))?;
            }
            if exhausted {
                return Ok(());
            }
        }
    }
}

/// Fences, empties and removes one dropped table. With a `cutoff`, only if it is due by then;
/// without, whatever its time (its namespace is being purged). `deleted` counts the objects
/// deleted so far. The label names the table for reports.
async fn purge_dropped_table(
    core: &Core,
    key: &Key,
    cutoff: Option<u64>,
    deleted: &mut u64,
) -> Result<(Outcome, String), (Failure, String)> {
    let unlabelled = |e: StoreError| (Failure::from(e), key.sk.clone());
    let Some(dropped) = rows::get::<DroppedTableRow>(&*core.store, key)
        .await
        .map_err(unlabelled)?
    else {
        return Ok((Outcome::Skipped, key.sk.clone()));
    };
    let label = label(&dropped.row);
    let due = dropped.row.purging.is_some() || cutoff.is_none_or(|c| index_ms(&dropped.row) <= c);
    if !due {
        return Ok((Outcome::Skipped, label));
    }
    purge_fetched(core, key, dropped, deleted)
        .await
        .map(|outcome| (outcome, label.clone()))
        .map_err(|failure| (failure, label))
}

async fn purge_fetched(
    core: &Core,
    key: &Key,
    dropped: rows::Versioned<DroppedTableRow>,
    deleted: &mut u64,
) -> Result<Outcome, Failure> {
    let row = &dropped.row;
    let ns = rows::get::<NamespaceRow>(&*core.store, &keys::namespace(&row.org, &row.namespace))
        .await?
        .map(|ns| ns.row)
        .filter(|ns| ns.id == row.table.namespace_id)
        .ok_or_else(|| {
            Failure(format!(
                "namespace {} of the dropped table is gone",
                row.namespace
            ))
        })?;
    let nickname = row
        .table
        .bucket
        .as_ref()
        .or(row.table.storage_override.as_ref().map(|o| &o.bucket))
        .unwrap_or(&ns.bucket);
    let bucket = rows::get::<BucketRow>(&*core.store, &keys::bucket(&row.org, nickname))
        .await?
        .ok_or_else(|| Failure(format!("bucket configuration '{nickname}' is gone")))?
        .row;
    let bucket = core.lookups.opened(bucket).await?;
    let version = match row.purging {
        Some(_) => dropped.version,
        None => {
            let mut fenced = row.clone();
            fenced.purging = Some(core.clock.now_ms());
            let write = rows::put_indexed(
                key.clone(),
                &fenced,
                Condition::VersionIs(dropped.version),
                Some(index_key(&fenced)),
            );
            match core
                .changes
                .write_unrecorded(Change::as_read(vec![write]))
                .await
            {
                Ok(()) => dropped.version + 1,
                // Restored (or taken by a concurrent run) since it was read.
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => {
                    return Ok(Outcome::Skipped);
                }
                Err(failure) => return Err(StoreError::from(failure).into()),
            }
        }
    };
    let mut writes = vec![
        Write::Delete {
            key: key.clone(),
            condition: Condition::VersionIs(version),
        },
        // Its maintenance bookkeeping, if it was ever maintained.
        Write::Delete {
            key: keys::maintenance_state(&ns.id, &row.table.id),
            condition: Condition::Always,
        },
    ];
    if ns.deleted_ms.is_none() {
        // Grants an earlier version kept on the row go back to their name.
        writes.extend(AccessService::return_kept_grants(&*core.store, &ns, row).await?);
    }
    if row.purge_files {
        let directory = purgeable_directory(&ns, &bucket, row)?;
        let objects = core.lookups.objects_for(&bucket).await?;
        empty_directory(&*objects, &directory, deleted).await?;
        writes.extend(placement::claim_releases(&*core.store, &ns, &bucket, &row.table).await?);
    }
    let event = Draft::new(Kind::TablePurged, &row.org, &ns.name, &ns.id, &purger())
        .table(&row.table.name, &row.table.id)
        .metadata(Some(&row.table.metadata_location), None);
    match core
        .changes
        .write(None, Change::as_read(writes), event)
        .await
    {
        Ok(()) => Ok(Outcome::Purged),
        Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => Ok(Outcome::Skipped),
        Err(ChangeFailure::NotWritten(e) | ChangeFailure::Unknown(e)) => Err(e.into()),
    }
}

/// The directory whose objects the purge deletes, checked to be the table's own: strictly
/// inside its namespace's location, or (an override) strictly inside the bucket's root.
fn purgeable_directory(
    ns: &NamespaceRow,
    bucket: &BucketRow,
    row: &DroppedTableRow,
) -> Result<String, Failure> {
    let directory = storage::normalize_location(row.table.directory());
    let within = match &row.table.storage_override {
        Some(_) => &bucket.root,
        None => &ns.location,
    };
    let inside = storage::is_within(&directory, within)
        && directory.trim_end_matches('/') != within.trim_end_matches('/');
    if inside {
        Ok(directory)
    } else {
        Err(Failure(format!(
            "refusing to purge '{directory}': it is not a directory of its own inside '{within}'"
        )))
    }
}

/// Deletes every object under `directory`, a batch at a time.
async fn empty_directory(
    objects: &dyn ObjectStore,
    directory: &str,
    deleted: &mut u64,
) -> Result<(), Failure> {
    let prefix = format!("{}/", directory.trim_end_matches('/'));
    loop {
        let batch = objects.list(&prefix, DELETE_BATCH).await?;
        if batch.is_empty() {
            return Ok(());
        }
        objects.delete(&batch).await?;
        *deleted += batch.len() as u64;
    }
}

/// Counts a failed attempt on the row and moves its index entry to when it is due again. Best
/// effort: when this write fails too, the next run retries sooner.
async fn record_failure(core: &Core, key: &Key, cutoff: u64, error: String) {
    let current = match rows::get::<DroppedTableRow>(&*core.store, key).await {
        Ok(Some(current)) => current,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(%error, store_error = %e, "purge of a dropped table failed and could not be recorded");
            return;
        }
    };
    let mut row = current.row;
    row.purge_attempts = row.purge_attempts.saturating_add(1);
    let retry = backoff(row.purge_attempts);
    row.purge_index_ms = Some(cutoff.saturating_add(retry.as_millis() as u64));
    row.purge_last_error = Some(error.clone());
    tracing::warn!(table = %label(&row), attempts = row.purge_attempts, retry_in_secs = retry.as_secs(), %error, "purge of a dropped table failed; going on with the next");
    let write = rows::put_indexed(
        key.clone(),
        &row,
        Condition::VersionIs(current.version),
        Some(index_key(&row)),
    );
    if let Err(e) = core
        .changes
        .write_unrecorded(Change::as_read(vec![write]))
        .await
    {
        tracing::error!(store_error = %e, "could not record the failed purge attempt of a dropped table");
    }
}
