//! Table maintenance: snapshot expiry as a catalog commit, then the deletion of the files the
//! table no longer reaches, within its own directory only.
//!
//! One run of one table:
//! 1. Resolve the policy ([`policy`]) from the table's properties and its namespace's.
//! 2. Plan the expiry on the current metadata (`expiry.rs`) and commit it (`remove-snapshot-ref`,
//!    `remove-snapshots`, their statistics) as `floe-maintenance`, through the commit path's
//!    compare-and-swap: a commit that lands first makes the run plan again on the new metadata.
//! 3. Read what the metadata reaches now (`reachable.rs`), list the table's directory and judge
//!    every object (`classify.rs`).
//! 4. Delete the judged files in fenced batches (`deletion.rs`): no commit lands while a batch is
//!    deleted, and one that landed before a batch makes the run re-read what the table reaches
//!    and spare anything it references.
//!
//! A dry run plans the same expiry on a copy of the metadata and judges the listing against
//! it, writing nothing.

pub use crate::catalog::maintenance_policy as policy;

mod classify;
mod compaction;
mod deletion;
mod expiry;
mod reachable;
mod schedule;

use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::TableUpdate;
use iceberg::spec::TableMetadata;
use serde::Serialize;

use self::classify::{DeleteReason, KeepReason, Rules, Verdict};
use self::expiry::ExpiryPlan;
use self::policy::Policy;
use self::reachable::{Reached, Reader};
use super::TableService;
use super::commit::{CommitTableRequest, Prepared, Swap, apply_updates};
use crate::authz::Action;
use crate::catalog::{OrgContext, ROW_RACE_RETRIES};
use crate::core::{Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::events::MaintenanceCounts;
use crate::model::{NamespaceRow, OrgRole, Principal, PrincipalKind, TableRow};
use crate::objects::ObjectMeta;
use crate::store::rows::Versioned;

pub use compaction::CompactionReport;
pub use schedule::{
    CLAIM_GRACE, DueTable, LEASE, MaintenanceRun, MaintenanceStateRow, RUN_INTERVAL,
    SWEEP_TABLES_PER_RUN, TABLES_PER_RUN, TableOutcome, WorkerOutcome,
};

/// Objects of one table's directory a run lists at most; beyond it the run judges what it
/// listed and says the listing was cut.
pub const MAX_LISTED: usize = 1_000_000;

/// How a run is asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct MaintainOptions {
    /// Plan and report, write and delete nothing.
    pub dry_run: bool,
    /// List every file deleted and kept in the report.
    pub verbose: bool,
}

/// What one run did (or, dry, would do) to one table.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct MaintenanceReport {
    pub snapshots_expired: u64,
    pub refs_removed: Vec<String>,
    pub files_deleted: u64,
    pub bytes_deleted: u64,
    pub files_kept: u64,
    pub dry_run: bool,
    /// Files deleted by reason.
    pub deleted_by_reason: BTreeMap<DeleteReason, u64>,
    /// Files kept by reason.
    pub kept_by_reason: BTreeMap<KeepReason, u64>,
    /// The metadata file the expiry commit wrote, when it wrote one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_location: Option<String>,
    /// Why the run did not delete files, or stopped deleting them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the run did nothing at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Whether the directory held more objects than a run lists.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub listing_truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_files: Option<Vec<DeletedFile>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_files: Option<Vec<KeptFile>>,
    /// What compaction did, when the table's policy turns it on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionReport>,
}

/// A table's maintenance settings, as the management API shows them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct MaintenanceSettings {
    pub settings: Vec<Setting>,
    /// The policy in force; `None` while a setting cannot be read (a run then fails with 400).
    pub policy: Option<Policy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<MaintenanceStateRow>,
}

/// One maintenance key.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    pub key: &'static str,
    /// `None`: unset, Floe's default applies.
    pub value: Option<String>,
    pub source: policy::Source,
}

/// One deleted (or, dry, deletable) file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DeletedFile {
    pub location: String,
    pub size: u64,
    pub reason: DeleteReason,
}

/// One kept file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct KeptFile {
    pub location: String,
    pub reason: KeepReason,
}

impl MaintenanceReport {
    /// The counts its change event carries.
    pub fn counts(&self) -> MaintenanceCounts {
        MaintenanceCounts {
            snapshots_expired: self.snapshots_expired,
            files_deleted: self.files_deleted,
            bytes_deleted: self.bytes_deleted,
        }
    }
}

/// The context runs act in: `floe-maintenance`, with an admin's access to the org.
fn maintainer_context(org: &crate::model::OrgRow) -> OrgContext {
    OrgContext {
        principal: maintainer(),
        org: std::sync::Arc::new(org.clone()),
        access: std::sync::Arc::new(crate::authz::Access::with_role(Some(OrgRole::Admin))),
        idempotency: None,
    }
}

/// The principal maintenance commits and events are made by.
pub fn maintainer() -> Principal {
    Principal {
        id: "floe:maintenance".into(),
        kind: PrincipalKind::ApiClient,
        name: "floe-maintenance".into(),
        email: None,
    }
}

impl TableService {
    /// Maintains one table now, for a caller who may manage it (the management API's
    /// `.../maintain`). An unreadable maintenance setting is 400.
    pub async fn maintain_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        options: MaintainOptions,
    ) -> Result<MaintenanceReport> {
        let (ns, row) = self
            .core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Manage)
            .await?;
        let table_row = row.row.clone();
        let report = self.maintain(&ctx.org, &ns, row, options).await?;
        if !options.dry_run {
            // Counts as the table's run for the schedule too.
            self.record(
                &ctx.org.name,
                &ns,
                &table_row,
                self.core.clock.now_ms(),
                &report,
            )
            .await;
            tracing::info!(audit = "table", org = %ctx.org.name, namespace, table, by = %ctx.principal.id, snapshots_expired = report.snapshots_expired, files_deleted = report.files_deleted, bytes_deleted = report.bytes_deleted, "table maintained");
        }
        Ok(report)
    }

    /// Compacts one table now, and nothing else of its maintenance, for a caller who may
    /// manage it: `None` when its policy leaves compaction off. What `floe-bench compaction`
    /// times against a plain rewrite.
    pub async fn compact_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        options: MaintainOptions,
    ) -> Result<Option<CompactionReport>> {
        let (ns, row) = self
            .core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Manage)
            .await?;
        let maintainer = maintainer_context(&ctx.org);
        let bucket = self
            .core
            .lookups
            .table_bucket(&maintainer, &ns, &row.row)
            .await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        self.compact(&maintainer, &ns, &row.row.name, &*objects, options)
            .await
    }

    /// A table's maintenance settings: each key's value in force and where it comes from
    /// (the table, its namespace, Floe's default), the policy they make, and the table's last
    /// scheduled run. Readable by whoever may read the table.
    pub async fn maintenance_settings(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<MaintenanceSettings> {
        let (ns, row) = self
            .core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Read)
            .await?;
        let metadata = self.current_metadata(ctx, &ns, &row.row).await?;
        let settings = Policy::explain(metadata.properties(), &ns.properties)
            .into_iter()
            .map(|(key, value, source)| Setting { key, value, source })
            .collect();
        let last_run = crate::store::rows::get::<MaintenanceStateRow>(
            &*self.core.store,
            &crate::store::rows::keys::maintenance_state(&ns.id, &row.row.id),
        )
        .await?
        .map(|state| state.row);
        Ok(MaintenanceSettings {
            settings,
            policy: Policy::resolve(metadata.properties(), &ns.properties).ok(),
            last_run,
        })
    }

    /// The table's current metadata, parsed (from the cache when it holds the file).
    async fn current_metadata(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        row: &TableRow,
    ) -> Result<Arc<TableMetadata>> {
        let bucket = self.core.lookups.table_bucket(ctx, ns, row).await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let (_, metadata) = self
            .metadata
            .load_parsed(&*objects, &crate::catalog::table_ref(ctx, ns, row))
            .await?;
        Ok(metadata)
    }

    /// One run over one table, as `floe-maintenance`.
    async fn maintain(
        &self,
        org: &crate::model::OrgRow,
        ns: &NamespaceRow,
        read: Versioned<TableRow>,
        options: MaintainOptions,
    ) -> Result<MaintenanceReport> {
        let ctx = maintainer_context(org);
        let bucket = self.core.lookups.table_bucket(&ctx, ns, &read.row).await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let mut report = MaintenanceReport {
            dry_run: options.dry_run,
            ..MaintenanceReport::default()
        };
        // Compaction first: it deletes nothing, so it runs whatever `gc.enabled` says, and the
        // files it replaces stay reachable from earlier snapshots until expiry takes those.
        // A failed compaction does not stop the rest of the run.
        match self
            .compact(&ctx, ns, &read.row.name, &*objects, options)
            .await
        {
            Ok(compaction) => report.compaction = compaction,
            Err(e) => {
                report.compaction = Some(CompactionReport {
                    errors: vec![e.to_string()],
                    ..CompactionReport::default()
                })
            }
        }
        let read = self.core.lookups.table_row(ns, &read.row.name).await?;
        let mut reader = Reader::new(&*objects);
        let Some(expired) = self
            .expire(&ctx, ns, read, &mut reader, &mut report, options)
            .await?
        else {
            return Ok(report);
        };
        let Expired {
            current,
            metadata,
            reached_by_expired,
            policy,
        } = expired;
        let reached = match reader
            .reach(&metadata, &current.row.metadata_location, |_| true)
            .await
        {
            Ok(reached) => reached,
            Err(e) => {
                report.error = Some(format!("No file was deleted: {e}"));
                return Ok(report);
            }
        };
        let directory = format!("{}/", current.row.directory().trim_end_matches('/'));
        let listed = objects
            .list_detailed(&directory, MAX_LISTED)
            .await
            .map_err(|e| {
                CatalogError::Internal(format!("Cannot list the table's directory ({})", e.code()))
            })?;
        report.listing_truncated = listed.len() >= MAX_LISTED;
        let rules = Rules {
            reached: &reached,
            expired: &reached_by_expired,
            current_version: current.row.metadata_version,
            delete_old_metadata: policy.delete_after_commit,
            unreferenced_age_ms: policy.unreferenced_file_age_ms,
            now_ms: self.core.clock.now_ms(),
        };
        let mut doomed = Vec::new();
        let mut kept = Vec::new();
        for object in listed {
            match rules.verdict(&object) {
                Verdict::Delete(reason) => doomed.push((object, reason)),
                Verdict::Keep(reason) => kept.push((object, reason)),
            }
        }
        let deleted = if options.dry_run {
            deletion::Outcome {
                deleted: doomed,
                spared: Vec::new(),
                error: None,
            }
        } else {
            deletion::delete_fenced(
                &self.core,
                &self.metadata,
                &ctx,
                ns,
                current,
                &*objects,
                &mut reader,
                doomed,
                report.snapshots_expired,
            )
            .await
        };
        kept.extend(
            deleted
                .spared
                .into_iter()
                .map(|o| (o, KeepReason::Referenced)),
        );
        report.error = deleted.error;
        tally(&mut report, &deleted.deleted, &kept, options.verbose);
        Ok(report)
    }

    /// Step 2: plans and commits the expiry (dry: plans it on a copy). `None` when the run
    /// stops here (the table does not allow deletions), with the report saying why.
    async fn expire(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        mut current: Versioned<TableRow>,
        reader: &mut Reader<'_>,
        report: &mut MaintenanceReport,
        options: MaintainOptions,
    ) -> Result<Option<Expired>> {
        let mut reached_by_expired = Reached::new();
        for _ in 0..ROW_RACE_RETRIES {
            let objects = reader.objects();
            let (file, metadata) = self
                .metadata
                .load_parsed(objects, &crate::catalog::table_ref(ctx, ns, &current.row))
                .await?;
            let policy = Policy::resolve(metadata.properties(), &ns.properties)
                .map_err(|e| CatalogError::BadRequest(e.to_string()))?;
            if !policy.gc_enabled {
                report.skipped = Some(
                    "gc.enabled is false: Floe neither expires snapshots of this table nor deletes its files"
                        .into(),
                );
                return Ok(None);
            }
            let raw: serde_json::Value = serde_json::from_slice(&file.raw)
                .map_err(|e| CatalogError::Internal(format!("Unreadable table metadata: {e}")))?;
            let plan = expiry::plan(
                &expiry::snapshots_of(&metadata),
                &expiry::refs_of(&raw).map_err(CatalogError::Internal)?,
                &policy,
                self.core.clock.now_ms() as i64,
            );
            if plan.is_empty() {
                return Ok(Some(Expired {
                    current,
                    metadata,
                    reached_by_expired,
                    policy,
                }));
            }
            // What the expired snapshots reach, read before the commit forgets them. A file
            // that is already gone reaches nothing.
            let expiring: std::collections::HashSet<i64> = plan.snapshots.iter().copied().collect();
            if let Ok(found) = reader
                .reach(&metadata, &current.row.metadata_location, |id| {
                    expiring.contains(&id)
                })
                .await
            {
                reached_by_expired.extend(found);
            }
            let request = CommitTableRequest {
                identifier: None,
                requirements: vec![iceberg::TableRequirement::UuidMatch {
                    uuid: metadata.uuid(),
                }],
                updates: expiry_updates(&metadata, &plan),
            };
            report.snapshots_expired = plan.snapshots.len() as u64;
            report.refs_removed = plan.refs.clone();
            if options.dry_run {
                let after = apply_updates(
                    TableMetadata::clone(&metadata),
                    Some(current.row.metadata_location.clone()),
                    request.updates.into_iter(),
                )?;
                return Ok(Some(Expired {
                    current,
                    metadata: Arc::new(after.metadata),
                    reached_by_expired,
                    policy,
                }));
            }
            match self.prepare_commit(ctx, ns, &current, &request).await? {
                Prepared::Unchanged { .. } => {
                    return Ok(Some(Expired {
                        current,
                        metadata,
                        reached_by_expired,
                        policy,
                    }));
                }
                Prepared::Fenced => tokio::time::sleep(deletion::FENCED_WAIT).await,
                Prepared::Changed(publish) => {
                    let change = Change::new().with(Swap, publish.swap);
                    match self.core.changes.write(None, change, publish.event).await {
                        Ok(()) => {
                            report.metadata_location = Some(publish.response.metadata_location);
                            let fresh = self.core.lookups.table_row(ns, &current.row.name).await?;
                            let (_, metadata) = self
                                .metadata
                                .load_parsed(
                                    reader.objects(),
                                    &crate::catalog::table_ref(ctx, ns, &fresh.row),
                                )
                                .await?;
                            return Ok(Some(Expired {
                                current: fresh,
                                metadata,
                                reached_by_expired,
                                policy,
                            }));
                        }
                        Err(ChangeFailure::Refused(Swap) | ChangeFailure::Contended) => {}
                        Err(ChangeFailure::NotWritten(e) | ChangeFailure::Unknown(e)) => {
                            return Err(CatalogError::Internal(format!(
                                "The expiry commit did not land: {e}"
                            )));
                        }
                    }
                }
            }
            // Another commit (or run) moved the table first: plan again on what it wrote.
            let fresh = self.core.lookups.table_row(ns, &current.row.name).await?;
            if fresh.row.id != current.row.id {
                return Err(crate::catalog::no_such_table(&ns.name, &current.row.name));
            }
            current = fresh;
        }
        Err(CatalogError::CommitFailed(format!(
            "Table {}.{} kept changing; the expiry was not committed",
            ns.name, current.row.name
        )))
    }
}

/// The table after step 2.
struct Expired {
    current: Versioned<TableRow>,
    metadata: Arc<TableMetadata>,
    reached_by_expired: Reached,
    policy: Policy,
}

/// The commit of an expiry: refs first (a removed branch may hold expired snapshots), then the
/// snapshots, then their statistics files.
fn expiry_updates(metadata: &TableMetadata, plan: &ExpiryPlan) -> Vec<TableUpdate> {
    let mut updates: Vec<TableUpdate> = plan
        .refs
        .iter()
        .map(|name| TableUpdate::RemoveSnapshotRef {
            ref_name: name.clone(),
        })
        .collect();
    if !plan.snapshots.is_empty() {
        updates.push(TableUpdate::RemoveSnapshots {
            snapshot_ids: plan.snapshots.clone(),
        });
    }
    for &id in &plan.snapshots {
        if metadata.statistics_for_snapshot(id).is_some() {
            updates.push(TableUpdate::RemoveStatistics { snapshot_id: id });
        }
        if metadata.partition_statistics_for_snapshot(id).is_some() {
            updates.push(TableUpdate::RemovePartitionStatistics { snapshot_id: id });
        }
    }
    updates
}

/// Fills the report's counts (and, verbose, its lists).
fn tally(
    report: &mut MaintenanceReport,
    deleted: &[(ObjectMeta, DeleteReason)],
    kept: &[(ObjectMeta, KeepReason)],
    verbose: bool,
) {
    report.files_deleted = deleted.len() as u64;
    report.bytes_deleted = deleted.iter().map(|(o, _)| o.size).sum();
    report.files_kept = kept.len() as u64;
    for (_, reason) in deleted {
        *report.deleted_by_reason.entry(*reason).or_default() += 1;
    }
    for (_, reason) in kept {
        *report.kept_by_reason.entry(*reason).or_default() += 1;
    }
    if verbose {
        let mut deleted_files: Vec<DeletedFile> = deleted
            .iter()
            .map(|(o, reason)| DeletedFile {
                location: o.location.clone(),
                size: o.size,
                reason: *reason,
            })
            .collect();
        deleted_files.sort_by(|a, b| a.location.cmp(&b.location));
        let mut kept_files: Vec<KeptFile> = kept
            .iter()
            .map(|(o, reason)| KeptFile {
                location: o.location.clone(),
                reason: *reason,
            })
            .collect();
        kept_files.sort_by(|a, b| a.location.cmp(&b.location));
        report.deleted_files = Some(deleted_files);
        report.kept_files = Some(kept_files);
    }
}
