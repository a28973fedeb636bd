//! Planning one part of a scan: which data files of a snapshot may hold matching rows, with
//! the delete files that apply to each, as the spec's `ScanTasks`.
//!
//! A scan's data manifests, in a fixed order, are its units of work: a plan answers a first
//! run of them inline and hands out the rest as plan tasks, each a range of them, so every
//! answer reads a bounded number of manifest entries whatever the table's size.
//!
//! Delete files apply as Java's `DeleteFileIndex` applies them: a deletion vector or a
//! position delete file naming the data file, or a position delete file of the same partition
//! (whose `file_path` bounds do not exclude it), with a data sequence number at least the data
//! file's; an equality delete file of the same partition, or of an unpartitioned spec, with a
//! greater one. Where a deletion vector applies, position delete files do not.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use iceberg::expr::BoundPredicate;
use iceberg::spec::{
    DataContentType, DataFile, ManifestContentType, ManifestFile, ManifestStatus, Operation,
    PrimitiveLiteral, SchemaRef, TableMetadata,
};
use serde_json::{Value, json};

use super::evaluate::{MetricsFilter, PartitionFilter};
use super::files::content_file;
use super::filter::Filter;
use super::manifests::TableManifests;
use crate::error::{CatalogError, Result};

/// Manifests read at once from storage on a cold plan.
const CONCURRENT_READS: usize = 8;

/// The field id of `file_path` in position delete files.
const DELETE_FILE_PATH_ID: i32 = 2_147_483_546;

/// What is scanned: a point in time, or the appends between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Range {
    /// No snapshot (an empty table): nothing to read.
    Empty,
    At(i64),
    /// Files appended after `from` (exclusive; from the first snapshot when `None`) up to
    /// `to` (inclusive), along `to`'s ancestry.
    Appended {
        from: Option<i64>,
        to: i64,
    },
}

/// What a plan selects, as resolved against the table.
pub struct Selection<'a> {
    pub metadata: &'a TableMetadata,
    pub range: &'a Range,
    pub schema: SchemaRef,
    pub filter: Filter,
    pub bound: BoundPredicate,
    /// Field ids whose metrics the tasks carry.
    pub stats: Vec<i32>,
}

/// The scan's data manifests, in the order plan tasks number them.
pub async fn data_manifests(
    selection: &Selection<'_>,
    source: &TableManifests<'_>,
) -> Result<Vec<ManifestFile>> {
    let metadata = selection.metadata;
    let version = metadata.format_version();
    match selection.range {
        Range::Empty => Ok(Vec::new()),
        Range::At(id) => {
            let snapshot = metadata
                .snapshot_by_id(*id)
                .ok_or_else(|| CatalogError::BadRequest(format!("Cannot find snapshot {id}")))?;
            let list = source.list(snapshot.manifest_list(), version).await?;
            Ok(list
                .iter()
                .filter(|m| m.content == ManifestContentType::Data)
                .filter(|m| m.has_added_files() || m.has_existing_files())
                .cloned()
                .collect())
        }
        Range::Appended { .. } => {
            let appended = appended_snapshots(metadata, selection.range)?;
            let mut seen = HashSet::new();
            let mut manifests = Vec::new();
            for id in appended.iter().rev() {
                let snapshot = metadata
                    .snapshot_by_id(*id)
                    .expect("walked from the metadata");
                for m in source.list(snapshot.manifest_list(), version).await?.iter() {
                    if m.content == ManifestContentType::Data
                        && appended.contains(&m.added_snapshot_id)
                        && m.has_added_files()
                        && seen.insert(m.manifest_path.clone())
                    {
                        manifests.push(m.clone());
                    }
                }
            }
            Ok(manifests)
        }
    }
}

/// The append snapshots of an incremental range, newest first.
pub fn appended_snapshots(metadata: &TableMetadata, range: &Range) -> Result<Vec<i64>> {
    let Range::Appended { from, to } = range else {
        return Ok(Vec::new());
    };
    let mut ids = Vec::new();
    let mut current = Some(*to);
    let mut reached_start = from.is_none();
    while let Some(id) = current {
        if Some(id) == *from {
            reached_start = true;
            break;
        }
        let snapshot = metadata.snapshot_by_id(id).ok_or_else(|| {
            CatalogError::BadRequest(format!("Cannot find snapshot {id} in the table's history"))
        })?;
        if snapshot.summary().operation == Operation::Append {
            ids.push(id);
        }
        current = snapshot.parent_snapshot_id();
    }
    if !reached_start {
        return Err(CatalogError::BadRequest(format!(
            "Starting snapshot (exclusive) {} is not an ancestor of end snapshot {to}",
            from.unwrap_or_default()
        )));
    }
    Ok(ids)
}

/// The filter projected through each of the table's partition specs, by spec id.
fn partition_filters(selection: &Selection<'_>) -> HashMap<i32, PartitionFilter> {
    selection
        .metadata
        .partition_specs_iter()
        .map(|spec| {
            let filter = PartitionFilter::new(&selection.bound, spec, &selection.schema);
            (spec.spec_id(), filter)
        })
        .collect()
}

/// The data manifests whose partition summaries admit the filter: what a plan pages over, so
/// that a selective scan of a large table is answered in one answer.
pub fn admitted(selection: &Selection<'_>, manifests: Vec<ManifestFile>) -> Vec<ManifestFile> {
    let filters = partition_filters(selection);
    manifests
        .into_iter()
        .filter(|m| {
            filters
                .get(&m.partition_spec_id)
                .is_none_or(|f| f.may_match_summaries(m.partitions.as_deref()))
        })
        .collect()
}

/// Splits data manifests into runs of at most [`ENTRIES_PER_ANSWER`] estimated entries (at
/// least one manifest each): the first is answered inline, each other one is a plan task.
pub fn runs(manifests: &[ManifestFile], budget: u64) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = 0;
    let mut entries = 0u64;
    for (i, m) in manifests.iter().enumerate() {
        let estimate = u64::from(m.added_files_count.unwrap_or(0))
            + u64::from(m.existing_files_count.unwrap_or(0));
        let estimate = if m.added_files_count.is_none() && m.existing_files_count.is_none() {
            budget / 10
        } else {
            estimate
        };
        if i > start && entries + estimate > budget {
            runs.push((start, i));
            start = i;
            entries = 0;
        }
        entries += estimate;
    }
    if start < manifests.len() {
        runs.push((start, manifests.len()));
    }
    runs
}

/// A data file kept for the plan, with what matching delete files needs of its entry.
struct Kept<'a> {
    file: &'a DataFile,
    spec_id: i32,
    sequence: i64,
    /// Its own first row id, or the one it inherits from its manifest (v3).
    first_row_id: Option<i64>,
}

/// The `ScanTasks` of data manifests `manifests` (the run `[start, end)` of the scan's).
pub async fn plan_run(
    selection: &Selection<'_>,
    source: &TableManifests<'_>,
    manifests: &[ManifestFile],
    residual: Option<&Value>,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let metadata = selection.metadata;
    let partition_filters = partition_filters(selection);
    let filter_of = |spec_id: i32| partition_filters.get(&spec_id);
    let wanted: Vec<&ManifestFile> = manifests
        .iter()
        .filter(|m| {
            filter_of(m.partition_spec_id)
                .is_none_or(|f| f.may_match_summaries(m.partitions.as_deref()))
        })
        .collect();
    let appended: HashSet<i64> = appended_snapshots(metadata, selection.range)?
        .into_iter()
        .collect();
    let incremental = matches!(selection.range, Range::Appended { .. });
    let metrics = MetricsFilter::new(&selection.bound);
    let loaded = read_all(source, &wanted).await?;
    let mut kept = Vec::new();
    for (manifest_file, manifest) in wanted.iter().zip(&loaded) {
        let partitions = filter_of(manifest_file.partition_spec_id);
        // Row lineage (v3): a live data file without its own first row id inherits the
        // manifest's, advanced by the rows of the live files before it that inherited too, as
        // Java's ManifestReader assigns them.
        let mut next_row_id = manifest_file
            .first_row_id
            .and_then(|id| i64::try_from(id).ok());
        for entry in manifest.entries() {
            if entry.status() == ManifestStatus::Deleted {
                continue;
            }
            let file = entry.data_file();
            let first_row_id = file.first_row_id().or_else(|| {
                let assigned = next_row_id?;
                next_row_id = Some(assigned + file.record_count() as i64);
                Some(assigned)
            });
            if incremental
                && (entry.status() != ManifestStatus::Added
                    || !entry.snapshot_id().is_some_and(|id| appended.contains(&id)))
            {
                continue;
            }
            if partitions.is_some_and(|p| !p.matches_partition(file.partition())) {
                continue;
            }
            if !metrics.may_match(file) {
                continue;
            }
            kept.push(Kept {
                file,
                spec_id: manifest_file.partition_spec_id,
                sequence: entry.sequence_number().unwrap_or(0),
                first_row_id,
            });
        }
    }
    let delete_manifests = if kept.is_empty() || incremental {
        Vec::new()
    } else {
        delete_manifests(selection, source, &filter_of).await?
    };
    let deletes = live_deletes(selection, &delete_manifests, &filter_of);
    Ok(tasks(selection, &kept, &deletes, residual))
}

async fn read_all(
    source: &TableManifests<'_>,
    manifests: &[&ManifestFile],
) -> Result<Vec<Arc<iceberg::spec::Manifest>>> {
    let reads: Vec<_> = manifests.iter().map(|m| source.manifest(m)).collect();
    futures::stream::iter(reads)
        .buffered(CONCURRENT_READS)
        .try_collect()
        .await
}

/// A live delete file and the sequence number it applies from.
struct Delete<'a> {
    file: &'a DataFile,
    spec_id: i32,
    sequence: i64,
    global: bool,
}

/// The snapshot's delete manifests whose partition summaries admit the filter, read, with the
/// partition spec each was written with.
async fn delete_manifests<'f>(
    selection: &Selection<'_>,
    source: &TableManifests<'_>,
    filter_of: &impl Fn(i32) -> Option<&'f PartitionFilter>,
) -> Result<Vec<(i32, Arc<iceberg::spec::Manifest>)>> {
    let Range::At(id) = selection.range else {
        return Ok(Vec::new());
    };
    let metadata = selection.metadata;
    let snapshot = metadata.snapshot_by_id(*id).expect("resolved before");
    let list = source
        .list(snapshot.manifest_list(), metadata.format_version())
        .await?;
    let wanted: Vec<&ManifestFile> = list
        .iter()
        .filter(|m| m.content == ManifestContentType::Deletes)
        .filter(|m| m.has_added_files() || m.has_existing_files())
        .filter(|m| {
            filter_of(m.partition_spec_id)
                .is_none_or(|f| f.may_match_summaries(m.partitions.as_deref()))
        })
        .collect();
    let loaded = read_all(source, &wanted).await?;
    Ok(wanted
        .iter()
        .map(|m| m.partition_spec_id)
        .zip(loaded)
        .collect())
}

/// The live delete files of `manifests` in partitions the filter admits.
fn live_deletes<'a, 'f>(
    selection: &Selection<'_>,
    manifests: &'a [(i32, Arc<iceberg::spec::Manifest>)],
    filter_of: &impl Fn(i32) -> Option<&'f PartitionFilter>,
) -> Vec<Delete<'a>> {
    let mut deletes = Vec::new();
    for (spec_id, manifest) in manifests {
        let unpartitioned = selection
            .metadata
            .partition_spec_by_id(*spec_id)
            .is_none_or(|s| s.fields().is_empty());
        let partitions = filter_of(*spec_id);
        for entry in manifest.entries() {
            if entry.status() == ManifestStatus::Deleted {
                continue;
            }
            let file = entry.data_file();
            if partitions.is_some_and(|p| !p.matches_partition(file.partition())) {
                continue;
            }
            deletes.push(Delete {
                file,
                spec_id: *spec_id,
                sequence: entry.sequence_number().unwrap_or(0),
                global: unpartitioned && file.content_type() == DataContentType::EqualityDeletes,
            });
        }
    }
    deletes
}

/// Whether a position delete file's `file_path` bounds leave room for `path`.
fn may_name(delete: &DataFile, path: &str) -> bool {
    let text = |map: &HashMap<i32, iceberg::spec::Datum>| match map
        .get(&DELETE_FILE_PATH_ID)
        .map(|d| d.literal())
    {
        Some(PrimitiveLiteral::String(s)) => Some(s.clone()),
        _ => None,
    };
    let lower = text(delete.lower_bounds());
    let upper = text(delete.upper_bounds());
    lower.is_none_or(|l| l.as_str() <= path) && upper.is_none_or(|u| u.as_str() >= path)
}

/// The delete files of a plan, indexed the way they are looked up: by the data file they name
/// (deletion vectors, position delete files that record it), by partition (other position and
/// equality delete files), and global (equality delete files of an unpartitioned spec).
struct DeleteIndex<'a> {
    deletes: &'a [Delete<'a>],
    by_path: HashMap<String, Vec<usize>>,
    by_partition: HashMap<(i32, &'a iceberg::spec::Struct), Vec<usize>>,
    global: Vec<usize>,
}

fn is_vector(file: &DataFile) -> bool {
    file.file_format() == iceberg::spec::DataFileFormat::Puffin
}

impl<'a> DeleteIndex<'a> {
    fn new(deletes: &'a [Delete<'a>]) -> Self {
        let mut index = DeleteIndex {
            deletes,
            by_path: HashMap::new(),
            by_partition: HashMap::new(),
            global: Vec::new(),
        };
        for (i, d) in deletes.iter().enumerate() {
            let referenced = (d.file.content_type() == DataContentType::PositionDeletes)
                .then(|| d.file.referenced_data_file())
                .flatten();
            match referenced {
                Some(path) => index.by_path.entry(path).or_default().push(i),
                None if d.global => index.global.push(i),
                None => index
                    .by_partition
                    .entry((d.spec_id, d.file.partition()))
                    .or_default()
                    .push(i),
            }
        }
        index
    }

    /// The delete files that apply to `kept`, as indices into the plan's deletes.
    fn applying(&self, kept: &Kept) -> Vec<usize> {
        let (path, sequence) = (kept.file.file_path(), kept.sequence);
        let named = self.by_path.get(path).map_or(&[][..], Vec::as_slice);
        let in_partition = self
            .by_partition
            .get(&(kept.spec_id, kept.file.partition()))
            .map_or(&[][..], Vec::as_slice);
        let vector = named.iter().copied().find(|&i| {
            let d = &self.deletes[i];
            is_vector(d.file) && d.sequence >= sequence
        });
        let mut found: Vec<usize> = Vec::new();
        for &i in named.iter().chain(in_partition).chain(&self.global) {
            let d = &self.deletes[i];
            let applies = match d.file.content_type() {
                DataContentType::PositionDeletes => {
                    vector.is_none()
                        && !is_vector(d.file)
                        && d.sequence >= sequence
                        && (d.file.referenced_data_file().is_some() || may_name(d.file, path))
                }
                DataContentType::EqualityDeletes => d.sequence > sequence,
                DataContentType::Data => false,
            };
            if applies {
                found.push(i);
            }
        }
        found.extend(vector);
        found.sort_unstable();
        found.dedup();
        found
    }
}

/// The tasks and the delete files they reference (each listed once, referenced by index).
fn tasks(
    selection: &Selection<'_>,
    kept: &[Kept],
    deletes: &[Delete],
    residual: Option<&Value>,
) -> (Vec<Value>, Vec<Value>) {
    let metadata = selection.metadata;
    let spec = |id: i32| metadata.partition_spec_by_id(id).map(|s| s.as_ref());
    let index = DeleteIndex::new(deletes);
    let mut listed: HashMap<usize, usize> = HashMap::new();
    let mut delete_json = Vec::new();
    let mut tasks = Vec::with_capacity(kept.len());
    for k in kept {
        let mut references = BTreeSet::new();
        for i in index.applying(k) {
            let index = *listed.entry(i).or_insert_with(|| {
                let d = &deletes[i];
                delete_json.push(content_file(
                    d.file,
                    d.spec_id,
                    spec(d.spec_id),
                    &selection.schema,
                    &[],
                ));
                delete_json.len() - 1
            });
            references.insert(index);
        }
        let mut data_file = content_file(
            k.file,
            k.spec_id,
            spec(k.spec_id),
            &selection.schema,
            &selection.stats,
        );
        if let Some(first) = k.first_row_id {
            data_file["first-row-id"] = json!(first);
        }
        let mut task = json!({ "data-file": data_file });
        if !references.is_empty() {
            task["delete-file-references"] = json!(references);
        }
        if let Some(residual) = residual {
            task["residual-filter"] = residual.clone();
        }
        tasks.push(task);
    }
    (tasks, delete_json)
}
