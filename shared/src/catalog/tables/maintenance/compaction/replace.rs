//! The `replace` snapshot a compaction commits: its inputs marked deleted in the manifests that
//! held them, its outputs added in new manifests, every other manifest carried as it is, and
//! the summary Java's `RewriteFiles` writes. Nothing is appended then deleted, so no reader
//! ever sees a row twice.

use std::collections::{BTreeMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, FormatVersion, ManifestContentType, ManifestFile, ManifestStatus,
    ManifestWriterBuilder, Operation, Snapshot, SnapshotReference, SnapshotRetention,
    SnapshotSummaryCollector, Summary, TableMetadata,
};
use iceberg::{TableRequirement, TableUpdate};

use super::select::{Bin, PartitionKey};
use crate::catalog::tables::plan::manifests::TableManifests;
use crate::catalog::tables::rebase::REWRITE_KEY;
use crate::catalog::tables::snapshot_files::{put, write_list};
use crate::error::{CatalogError, Result};

/// The summary keys Java derives from the parent's totals.
const TOTALS: [(&str, &str, &str); 4] = [
    ("total-data-files", "added-data-files", "deleted-data-files"),
    ("total-records", "added-records", "deleted-records"),
    ("total-files-size", "added-files-size", "removed-files-size"),
    (
        "total-delete-files",
        "added-delete-files",
        "removed-delete-files",
    ),
];

/// A bin and the file it was rewritten into.
pub struct Rewritten {
    pub bin: Bin,
    pub output: DataFile,
}

/// The commit of a replace snapshot on `metadata`'s main branch.
pub struct Commit {
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
    pub snapshot_id: i64,
    /// The manifests and manifest list written for it: removed again if it never lands.
    pub written: Vec<String>,
}

/// The retention main's reference carries in the metadata file `raw` (the parsed metadata
/// does not show it), kept by the commit that moves main.
pub fn main_retention(raw: &[u8]) -> SnapshotRetention {
    serde_json::from_slice::<serde_json::Value>(raw)
        .ok()
        .and_then(|json| json.get("refs")?.get("main").cloned())
        .and_then(|main| serde_json::from_value::<SnapshotReference>(main).ok())
        .map(|r| r.retention)
        .unwrap_or(SnapshotRetention::Branch {
            min_snapshots_to_keep: None,
            max_snapshot_age_ms: None,
            max_ref_age_ms: None,
        })
}

/// Builds (and writes the manifests and manifest list of) the snapshot replacing each
/// rewritten bin's inputs with its output, on top of `metadata`'s main branch, whose snapshot
/// must still be the one the commit asserts. `data_sequence` is the sequence number of the
/// snapshot the inputs were read from: the outputs keep it, as Java's rewrite does, so that a
/// delete committed after it would still apply to them.
pub async fn build(
    files: &TableManifests<'_>,
    metadata: &TableMetadata,
    rewritten: &[Rewritten],
    data_sequence: i64,
    retention: SnapshotRetention,
    now_ms: i64,
) -> Result<Commit> {
    let main = metadata
        .snapshot_for_ref("main")
        .ok_or_else(|| CatalogError::Internal("The table has no main branch".into()))?;
    let snapshot_id = new_snapshot_id(metadata);
    let sequence = metadata.last_sequence_number() + 1;
    let schema = metadata.current_schema().clone();
    let inputs: HashSet<&str> = rewritten
        .iter()
        .flat_map(|r| r.bin.inputs.iter().map(|f| f.file.file_path()))
        .collect();
    let io = FileIO::new_with_memory();
    let mut written_files = Vec::new();
    let mut summary = SnapshotSummaryCollector::default();
    let mut listed: Vec<ManifestFile> = Vec::new();
    let mut found = 0usize;
    let list = files
        .list(main.manifest_list(), metadata.format_version())
        .await?;
    for manifest_file in list.iter() {
        let holds_inputs = manifest_file.content == ManifestContentType::Data
            && (manifest_file.has_added_files() || manifest_file.has_existing_files());
        if !holds_inputs {
            listed.push(manifest_file.clone());
            continue;
        }
        let manifest = files.manifest(manifest_file).await?;
        let touched = manifest
            .entries()
            .iter()
            .any(|e| e.is_alive() && inputs.contains(e.file_path()));
        if !touched {
            listed.push(manifest_file.clone());
            continue;
        }
        let spec = spec_of(metadata, manifest_file.partition_spec_id)?;
        let scratch = format!("memory:///m-{}.avro", listed.len());
        let mut writer = data_manifest(&io, &scratch, snapshot_id, &schema, &spec)?;
        for entry in manifest.entries() {
            if !entry.is_alive() {
                continue;
            }
            let data_sequence = entry.sequence_number().unwrap_or(0);
            let file_sequence = entry.file_sequence_number.or(Some(data_sequence));
            let file = entry.data_file().clone();
            if inputs.contains(entry.file_path()) {
                found += 1;
                summary.remove_file(&file, schema.clone(), spec.clone());
                writer
                    .add_delete_file(file, data_sequence, file_sequence)
                    .map_err(internal)?;
            } else {
                let added_by = entry
                    .snapshot_id()
                    .unwrap_or(manifest_file.added_snapshot_id);
                writer
                    .add_existing_file(file, added_by, data_sequence, file_sequence)
                    .map_err(internal)?;
            }
        }
        let written = writer.write_manifest_file().await.map_err(internal)?;
        listed.push(store(files, &io, &scratch, written, &mut written_files).await?);
    }
    if found != inputs.len() {
        return Err(CatalogError::CommitFailed(
            "Files to be rewritten are no longer all in the table".into(),
        ));
    }
    // One manifest of outputs per partition spec.
    let mut by_spec: BTreeMap<i32, Vec<&Rewritten>> = BTreeMap::new();
    for r in rewritten {
        by_spec.entry(r.bin.spec_id).or_default().push(r);
    }
    for (spec_id, outputs) in by_spec {
        let spec = spec_of(metadata, spec_id)?;
        let scratch = format!("memory:///added-{spec_id}.avro");
        let mut writer = data_manifest(&io, &scratch, snapshot_id, &schema, &spec)?;
        for r in outputs {
            summary.add_file(&r.output, schema.clone(), spec.clone());
            writer
                .add_file(r.output.clone(), data_sequence)
                .map_err(internal)?;
        }
        let written = writer.write_manifest_file().await.map_err(internal)?;
        // Added manifests first, as Java lists them.
        listed.insert(
            0,
            store(files, &io, &scratch, written, &mut written_files).await?,
        );
    }

    let list_location = format!(
        "{}/metadata/snap-{snapshot_id}-1-{}.avro",
        files.directory.trim_end_matches('/'),
        uuid::Uuid::new_v4()
    );
    write_list(
        files,
        &list_location,
        (snapshot_id, main.snapshot_id(), sequence),
        listed,
    )
    .await?;
    written_files.push(list_location.clone());

    let mut properties = summary.build();
    properties.insert(REWRITE_KEY.to_owned(), "bin-pack".to_owned());
    for (total, added, removed) in TOTALS {
        let previous = main.summary().additional_properties.get(total);
        if let Some(previous) = previous.and_then(|v| v.parse::<u64>().ok()) {
            let count = |key: &str| {
                properties
                    .get(key)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let now = (previous + count(added)).saturating_sub(count(removed));
            properties.insert(total.to_owned(), now.to_string());
        }
    }
    for total in ["total-position-deletes", "total-equality-deletes"] {
        if let Some(value) = main.summary().additional_properties.get(total) {
            properties.insert(total.to_owned(), value.clone());
        }
    }
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(Some(main.snapshot_id()))
        .with_sequence_number(sequence)
        .with_timestamp_ms(now_ms.max(metadata.last_updated_ms() + 1))
        .with_manifest_list(list_location)
        .with_summary(Summary {
            operation: Operation::Replace,
            additional_properties: properties,
        })
        .with_schema_id(metadata.current_schema_id())
        .build();
    Ok(Commit {
        requirements: vec![
            TableRequirement::UuidMatch {
                uuid: metadata.uuid(),
            },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: "main".into(),
                snapshot_id: Some(main.snapshot_id()),
            },
        ],
        updates: vec![
            TableUpdate::AddSnapshot { snapshot },
            TableUpdate::SetSnapshotRef {
                ref_name: "main".into(),
                reference: SnapshotReference::new(snapshot_id, retention),
            },
        ],
        snapshot_id,
        written: written_files,
    })
}

/// The partitions the snapshots after `since` on main's ancestry changed (files added or
/// removed, data or deletes), and whether one of them changed every partition (an equality
/// delete of an unpartitioned spec). `None` when `since` is no longer an ancestor of main.
pub async fn changed_since(
    files: &TableManifests<'_>,
    metadata: &TableMetadata,
    since: i64,
) -> Result<Option<(HashSet<PartitionKey>, bool)>> {
    let mut changed = HashSet::new();
    let mut everywhere = false;
    let mut current = metadata.snapshot_for_ref("main").map(|s| s.snapshot_id());
    while let Some(id) = current {
        if id == since {
            return Ok(Some((changed, everywhere)));
        }
        let Some(snapshot) = metadata.snapshot_by_id(id) else {
            return Ok(None);
        };
        let list = files
            .list(snapshot.manifest_list(), metadata.format_version())
            .await?;
        for manifest_file in list.iter().filter(|m| m.added_snapshot_id == id) {
            let manifest = files.manifest(manifest_file).await?;
            let unpartitioned = metadata
                .partition_spec_by_id(manifest_file.partition_spec_id)
                .is_none_or(|s| s.is_unpartitioned());
            for entry in manifest.entries() {
                let own = entry.snapshot_id() == Some(id);
                if !own || entry.status() == ManifestStatus::Existing {
                    continue;
                }
                if unpartitioned && manifest_file.content == ManifestContentType::Deletes {
                    everywhere = true;
                }
                changed.insert((
                    manifest_file.partition_spec_id,
                    entry.data_file().partition().clone(),
                ));
            }
        }
        current = snapshot.parent_snapshot_id();
    }
    Ok(None)
}

/// Whether Floe's rewrite keeps what this table's format needs: v3 tables carry row lineage
/// (`_row_id`, `_last_updated_sequence_number`) that the rewrite does not write yet, and v1
/// manifests have no sequence numbers to keep.
pub fn supported(metadata: &TableMetadata) -> std::result::Result<(), String> {
    match metadata.format_version() {
        FormatVersion::V2 => Ok(()),
        FormatVersion::V1 => Err("format version 1: Floe compacts v2 tables".into()),
        _ => Err(
            "format version 3: Floe's rewrite does not carry row lineage yet, so v3 tables are \
             left as they are"
                .into(),
        ),
    }
}

/// A v2 data manifest of snapshot `snapshot_id`, staged in `io` at `scratch`.
fn data_manifest(
    io: &FileIO,
    scratch: &str,
    snapshot_id: i64,
    schema: &iceberg::spec::SchemaRef,
    spec: &iceberg::spec::PartitionSpecRef,
) -> Result<iceberg::spec::ManifestWriter> {
    Ok(ManifestWriterBuilder::new(
        io.new_output(scratch).map_err(internal)?,
        Some(snapshot_id),
        schema.clone(),
        spec.as_ref().clone(),
    )
    .build_v2_data())
}

fn spec_of(metadata: &TableMetadata, spec_id: i32) -> Result<iceberg::spec::PartitionSpecRef> {
    metadata
        .partition_spec_by_id(spec_id)
        .cloned()
        .ok_or_else(|| CatalogError::Internal(format!("Unknown partition spec {spec_id}")))
}

/// Copies a manifest written in memory to the table's metadata directory.
async fn store(
    files: &TableManifests<'_>,
    io: &FileIO,
    scratch: &str,
    mut written: ManifestFile,
    written_files: &mut Vec<String>,
) -> Result<ManifestFile> {
    let location = format!(
        "{}/metadata/{}-m0.avro",
        files.directory.trim_end_matches('/'),
        uuid::Uuid::new_v4()
    );
    put(files, io, scratch, &location).await?;
    written_files.push(location.clone());
    written.manifest_path = location;
    Ok(written)
}

/// A positive id no snapshot of the table has.
fn new_snapshot_id(metadata: &TableMetadata) -> i64 {
    loop {
        let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((high ^ low) & (i64::MAX as u64)) as i64;
        if id != 0 && metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

fn internal(e: iceberg::Error) -> CatalogError {
    CatalogError::Internal(format!("Cannot write the compaction's manifests: {e}"))
}
