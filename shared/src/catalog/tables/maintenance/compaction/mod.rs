//! Bin-pack compaction, opt-in per table (`floe.compaction.enabled`, a namespace's value the
//! default of its tables): a table's small data files, partition by partition, rewritten into
//! files near `write.target-file-size-bytes` and committed as one `replace` snapshot.
//!
//! The rules it keeps, each taught by another compactor's incident:
//! - one `replace` commit through the catalog's own swap, asserting the main snapshot it read
//!   (never an append then a delete: rows would be seen twice);
//! - a commit that lands meanwhile in a partition it rewrites makes it give that partition up
//!   (its output is removed, never referenced); other partitions commit on the new snapshot;
//! - files a delete may apply to are left alone, as are young files (a streaming writer is not
//!   fought) and files outside the table's directory;
//! - its inputs are never deleted by it: they stay reachable from earlier snapshots until
//!   expiry and unreferenced-file removal take them past their age floors.

mod replace;
mod rewrite;
mod select;

use std::collections::BTreeMap;

use iceberg::spec::{DataContentType, SnapshotRetention, TableMetadata};
use serde::{Deserialize, Serialize};

use self::replace::Rewritten;
use self::select::{LeftReason, LiveDelete, LiveFile};
use super::policy::Policy;
use super::{MaintainOptions, TableService};
use crate::catalog::tables::commit::{CommitTableRequest, Prepared, Swap};
use crate::catalog::tables::plan::manifests::TableManifests;
use crate::catalog::{OrgContext, ROW_RACE_RETRIES};
use crate::core::{Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::model::NamespaceRow;
use crate::objects::ObjectStore;
use crate::store::rows::Versioned;

/// What one run's compaction did (or, dry, would do) to one table.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct CompactionReport {
    /// Why nothing was compacted at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub files_rewritten: u64,
    pub bytes_rewritten: u64,
    pub records_rewritten: u64,
    pub files_written: u64,
    pub bytes_written: u64,
    /// Partitions given up because a commit changed them while they were rewritten.
    pub partitions_given_up: u64,
    /// Data files left as they are, by reason.
    #[serde(default)]
    pub files_left: BTreeMap<LeftReason, u64>,
    /// The `replace` snapshot committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<i64>,
    /// Bins that could not be rewritten (their files stay as they are).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl TableService {
    /// Compacts the table when its policy asks for it; `None` when it does not.
    pub(super) async fn compact(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        name: &str,
        objects: &dyn ObjectStore,
        options: MaintainOptions,
    ) -> Result<Option<CompactionReport>> {
        let mut current = self.core.lookups.table_row(ns, name).await?;
        let (mut retention, mut metadata) = self.parsed(ctx, ns, &current, objects).await?;
        let policy = Policy::resolve(metadata.properties(), &ns.properties)
            .map_err(|e| CatalogError::BadRequest(e.to_string()))?
            .compaction;
        if !policy.enabled {
            return Ok(None);
        }
        let mut report = CompactionReport::default();
        if let Err(why) = replace::supported(&metadata) {
            report.skipped = Some(why);
            return Ok(Some(report));
        }
        let Some(start) = metadata.snapshot_for_ref("main").cloned() else {
            return Ok(Some(report));
        };
        let directory = current.row.directory().to_owned();
        let files = TableManifests {
            objects,
            directory: &directory,
            cache: &self.manifests,
        };
        let (live, deletes) = live_files(&files, &metadata, start.manifest_list()).await?;
        let now_ms = self.core.clock.now_ms() as i64;
        let selection = select::select(live, &deletes, &policy, now_ms, &directory);
        report.files_left = selection.left;
        if options.dry_run {
            for bin in &selection.bins {
                report.files_rewritten += bin.inputs.len() as u64;
                report.bytes_rewritten += bin.input_bytes();
                report.records_rewritten += bin.input_records();
                report.files_written += 1;
            }
            return Ok(Some(report));
        }

        let table = rewrite::Table::new(&metadata);
        let mut rewritten = Vec::new();
        for bin in selection.bins {
            let spec = metadata
                .partition_spec_by_id(bin.spec_id)
                .cloned()
                .ok_or_else(|| CatalogError::Internal("Unknown partition spec".into()))?;
            let location = format!(
                "{}/data/compacted/{}.parquet",
                directory.trim_end_matches('/'),
                uuid::Uuid::now_v7()
            );
            match rewrite::rewrite(objects, &table, spec, &bin, &location).await {
                Ok(output) => rewritten.push(Rewritten { bin, output }),
                Err(e) => {
                    tracing::warn!(table = %name, error = %e, "a compaction bin was not rewritten");
                    report.errors.push(e.to_string());
                }
            }
        }

        for _ in 0..ROW_RACE_RETRIES {
            if rewritten.is_empty() {
                break;
            }
            let commit = replace::build(
                &files,
                &metadata,
                &rewritten,
                start.sequence_number(),
                retention.clone(),
                now_ms,
            )
            .await;
            let commit = match commit {
                Ok(commit) => commit,
                Err(e) => {
                    remove(objects, outputs(&rewritten)).await;
                    return Err(e);
                }
            };
            let request = CommitTableRequest {
                identifier: None,
                requirements: commit.requirements,
                updates: commit.updates,
            };
            let landed = match self.prepare_commit(ctx, ns, &current, &request).await {
                Ok(Prepared::Changed(publish)) => {
                    let change = Change::new().with(Swap, publish.swap);
                    match self.core.changes.write(None, change, publish.event).await {
                        Ok(()) => true,
                        Err(ChangeFailure::Refused(Swap) | ChangeFailure::Contended) => false,
                        Err(ChangeFailure::NotWritten(e)) => {
                            remove(objects, commit.written).await;
                            remove(objects, outputs(&rewritten)).await;
                            return Err(CatalogError::Internal(format!(
                                "The compaction commit did not land: {e}"
                            )));
                        }
                        Err(ChangeFailure::Unknown(e)) => {
                            // It may have landed: nothing it wrote may be removed.
                            return Err(CatalogError::Internal(format!(
                                "The compaction commit's outcome is unknown: {e}"
                            )));
                        }
                    }
                }
                Ok(Prepared::Fenced) => {
                    tokio::time::sleep(super::deletion::FENCED_WAIT).await;
                    false
                }
                Ok(Prepared::Unchanged { .. }) => false,
                Err(e) => {
                    remove(objects, commit.written).await;
                    remove(objects, outputs(&rewritten)).await;
                    return Err(e);
                }
            };
            if landed {
                report.snapshot_id = Some(commit.snapshot_id);
                for r in &rewritten {
                    report.files_rewritten += r.bin.inputs.len() as u64;
                    report.bytes_rewritten += r.bin.input_bytes();
                    report.records_rewritten += r.bin.input_records();
                    report.files_written += 1;
                    report.bytes_written += r.output.file_size_in_bytes();
                }
                tracing::info!(audit = "table", table = %name, snapshot_id = commit.snapshot_id, files_rewritten = report.files_rewritten, bytes_rewritten = report.bytes_rewritten, files_written = report.files_written, "table compacted");
                return Ok(Some(report));
            }
            remove(objects, commit.written).await;
            // Another commit moved main first: give up what it touched, keep the rest.
            let fresh = self.core.lookups.table_row(ns, name).await?;
            if fresh.row.id != current.row.id {
                remove(objects, outputs(&rewritten)).await;
                return Err(crate::catalog::no_such_table(&ns.name, name));
            }
            current = fresh;
            (retention, metadata) = self.parsed(ctx, ns, &current, objects).await?;
            let (kept, given_up): (Vec<Rewritten>, Vec<Rewritten>) =
                match replace::changed_since(&files, &metadata, start.snapshot_id()).await? {
                    None => (Vec::new(), rewritten),
                    Some((changed, everywhere)) => rewritten
                        .into_iter()
                        .partition(|r| !everywhere && !changed.contains(&r.bin.key())),
                };
            report.partitions_given_up += given_up.len() as u64;
            remove(objects, outputs(&given_up)).await;
            rewritten = kept;
        }
        if !rewritten.is_empty() {
            remove(objects, outputs(&rewritten)).await;
            report.partitions_given_up += rewritten.len() as u64;
        }
        Ok(Some(report))
    }

    async fn parsed(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        current: &Versioned<crate::model::TableRow>,
        objects: &dyn ObjectStore,
    ) -> Result<(SnapshotRetention, std::sync::Arc<TableMetadata>)> {
        let (file, metadata) = self
            .metadata
            .load_parsed(objects, &crate::catalog::table_ref(ctx, ns, &current.row))
            .await?;
        Ok((replace::main_retention(&file.raw), metadata))
    }
}

/// The live data files and delete files of the snapshot whose manifest list is `list`.
async fn live_files(
    files: &TableManifests<'_>,
    metadata: &TableMetadata,
    list: &str,
) -> Result<(Vec<LiveFile>, Vec<LiveDelete>)> {
    let manifests = files.list(list, metadata.format_version()).await?;
    let mut live = Vec::new();
    let mut deletes = Vec::new();
    for manifest_file in manifests.iter() {
        let manifest = files.manifest(manifest_file).await?;
        let unpartitioned = metadata
            .partition_spec_by_id(manifest_file.partition_spec_id)
            .is_none_or(|s| s.is_unpartitioned());
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let file = entry.data_file();
            if file.content_type() == DataContentType::Data {
                let snapshot_id = entry
                    .snapshot_id()
                    .unwrap_or(manifest_file.added_snapshot_id);
                let data_sequence = entry.sequence_number().unwrap_or(0);
                live.push(LiveFile {
                    file: file.clone(),
                    spec_id: manifest_file.partition_spec_id,
                    data_sequence,
                    added_ms: metadata
                        .snapshot_by_id(snapshot_id)
                        .map(|s| s.timestamp_ms()),
                });
            } else {
                deletes.push(LiveDelete {
                    content: file.content_type(),
                    spec_id: manifest_file.partition_spec_id,
                    partition: file.partition().clone(),
                    unpartitioned,
                });
            }
        }
    }
    Ok((live, deletes))
}

fn outputs(rewritten: &[Rewritten]) -> Vec<String> {
    rewritten
        .iter()
        .map(|r| r.output.file_path().to_owned())
        .collect()
}

/// Removes files this run wrote and no commit references; a failure leaves them to
/// unreferenced-file removal.
async fn remove(objects: &dyn ObjectStore, locations: Vec<String>) {
    if locations.is_empty() {
        return;
    }
    if let Err(e) = objects.delete(&locations).await {
        tracing::warn!(error = %e, files = locations.len(), "files of a compaction that did not land were not removed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report is kept on the table's maintenance state row: it must read back as written,
    /// with its optional parts absent.
    #[test]
    fn a_report_reads_back_as_it_was_written() {
        let report = CompactionReport {
            files_rewritten: 3,
            files_left: BTreeMap::from([(LeftReason::Young, 2)]),
            ..CompactionReport::default()
        };
        let json = serde_json::to_string(&report).unwrap();
        assert!(
            !json.contains("errors") && !json.contains("snapshot-id"),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<CompactionReport>(&json).unwrap(),
            report
        );
    }
}
