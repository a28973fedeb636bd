//! Which small files a run rewrites: Java's bin-pack, with the safety rules compaction's
//! incidents teach. Pure: the live files and delete files of the snapshot in, bins out, and
//! a count of every file left alone by reason.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, DataFileFormat, Struct};
use serde::Serialize;

use crate::catalog::maintenance_policy::Compaction;
use crate::catalog::storage::is_within;

/// A live data file of the snapshot, as its manifest entry records it.
#[derive(Debug, Clone)]
pub struct LiveFile {
    pub file: DataFile,
    pub spec_id: i32,
    pub data_sequence: i64,
    /// When the snapshot that added it was committed; `None` once that snapshot expired.
    pub added_ms: Option<i64>,
}

/// A live delete file of the snapshot.
#[derive(Debug, Clone)]
pub struct LiveDelete {
    pub content: DataContentType,
    pub spec_id: i32,
    pub partition: Struct,
    /// Written with an unpartitioned spec: an equality delete file then applies everywhere.
    pub unpartitioned: bool,
}

/// One partition of one spec.
pub type PartitionKey = (i32, Struct);

/// Files of one partition rewritten into one file.
#[derive(Debug, Clone)]
pub struct Bin {
    pub spec_id: i32,
    pub partition: Struct,
    pub inputs: Vec<LiveFile>,
}

impl Bin {
    pub fn key(&self) -> PartitionKey {
        (self.spec_id, self.partition.clone())
    }

    pub fn input_bytes(&self) -> u64 {
        self.inputs
            .iter()
            .map(|f| f.file.file_size_in_bytes())
            .sum()
    }

    pub fn input_records(&self) -> u64 {
        self.inputs.iter().map(|f| f.file.record_count()).sum()
    }
}

/// Why a data file was not rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeftReason {
    /// At or over three quarters of the target size already.
    LargeEnough,
    /// Younger than `floe.compaction.min-file-age-ms`: its writer may still be at work.
    Young,
    /// A delete file may apply to it: Floe's rewrite does not apply deletes, so it leaves
    /// such files (and their partition) alone.
    HasDeletes,
    /// Not a Parquet file.
    NotParquet,
    /// Outside the table's own directory: the catalog never copies another location's bytes
    /// into this table.
    OutsideDirectory,
    /// Its partition holds fewer small files than `floe.compaction.min-input-files`.
    TooFewInPartition,
    /// Past `floe.compaction.max-bytes-per-run`: the next run takes it.
    NextRun,
}

/// What a run rewrites, and what it leaves.
#[derive(Debug, Default)]
pub struct Selection {
    pub bins: Vec<Bin>,
    pub left: BTreeMap<LeftReason, u64>,
}

/// Bins of small files by partition, each at most the target size of input and at least two
/// files; partitions with fewer than `min_input_files` small files are left as they are.
pub fn select(
    files: Vec<LiveFile>,
    deletes: &[LiveDelete],
    policy: &Compaction,
    now_ms: i64,
    directory: &str,
) -> Selection {
    let mut selection = Selection::default();
    let everywhere = deletes
        .iter()
        .any(|d| d.unpartitioned && d.content == DataContentType::EqualityDeletes);
    let with_deletes: HashSet<PartitionKey> = deletes
        .iter()
        .map(|d| (d.spec_id, d.partition.clone()))
        .collect();
    let small = policy.small_file_bytes();
    let mut by_partition: HashMap<PartitionKey, Vec<LiveFile>> = HashMap::new();
    for live in files {
        let key = (live.spec_id, live.file.partition().clone());
        let reason = if live.file.file_format() != DataFileFormat::Parquet {
            Some(LeftReason::NotParquet)
        } else if !is_within(live.file.file_path(), directory) {
            Some(LeftReason::OutsideDirectory)
        } else if everywhere || with_deletes.contains(&key) {
            Some(LeftReason::HasDeletes)
        } else if live.file.file_size_in_bytes() >= small {
            Some(LeftReason::LargeEnough)
        } else if live
            .added_ms
            .is_some_and(|added| now_ms.saturating_sub(added) < policy.min_file_age_ms as i64)
        {
            Some(LeftReason::Young)
        } else {
            None
        };
        match reason {
            Some(reason) => *selection.left.entry(reason).or_default() += 1,
            None => by_partition.entry(key).or_default().push(live),
        }
    }
    // Partitions in a fixed order, so that a run cut by its byte budget starts the next
    // where it stopped.
    let mut partitions: Vec<(PartitionKey, Vec<LiveFile>)> = by_partition.into_iter().collect();
    partitions.sort_by_key(|((spec, partition), _)| (*spec, format!("{partition:?}")));
    let mut budget = policy.max_bytes_per_run;
    for ((spec_id, partition), mut files) in partitions {
        if files.len() < policy.min_input_files {
            *selection
                .left
                .entry(LeftReason::TooFewInPartition)
                .or_default() += files.len() as u64;
            continue;
        }
        // Oldest first: rows keep roughly the order they were written in.
        files.sort_by(|a, b| {
            (a.data_sequence, a.file.file_path()).cmp(&(b.data_sequence, b.file.file_path()))
        });
        for inputs in pack(files, policy.target_file_size_bytes) {
            let bytes: u64 = inputs.iter().map(|f| f.file.file_size_in_bytes()).sum();
            if inputs.len() < 2 || bytes > budget {
                let reason = if inputs.len() < 2 {
                    LeftReason::TooFewInPartition
                } else {
                    LeftReason::NextRun
                };
                *selection.left.entry(reason).or_default() += inputs.len() as u64;
                continue;
            }
            budget -= bytes;
            selection.bins.push(Bin {
                spec_id,
                partition: partition.clone(),
                inputs,
            });
        }
    }
    selection
}

/// Consecutive runs of files whose sizes add up to at most `target` (a file is never split).
fn pack(files: Vec<LiveFile>, target: u64) -> Vec<Vec<LiveFile>> {
    let mut bins: Vec<Vec<LiveFile>> = Vec::new();
    let mut size = 0;
    for file in files {
        let bytes = file.file.file_size_in_bytes();
        match bins.last_mut() {
            Some(bin) if size + bytes <= target => {
                size += bytes;
                bin.push(file);
            }
            _ => {
                size = bytes;
                bins.push(vec![file]);
            }
        }
    }
    bins
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, Literal};

    use super::*;

    const MB: u64 = 1024 * 1024;
    const DIR: &str = "s3://b/wh/ns/t";

    fn policy() -> Compaction {
        Compaction {
            enabled: true,
            target_file_size_bytes: 100 * MB,
            min_input_files: 3,
            min_file_age_ms: 1000,
            max_bytes_per_run: 1000 * MB,
        }
    }

    fn file(name: &str, region: &str, size: u64, added_ms: i64) -> LiveFile {
        file_in(DIR, name, region, size, added_ms)
    }

    fn file_in(dir: &str, name: &str, region: &str, size: u64, added_ms: i64) -> LiveFile {
        LiveFile {
            file: DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_format(DataFileFormat::Parquet)
                .file_path(format!("{dir}/data/{name}.parquet"))
                .file_size_in_bytes(size)
                .record_count(10)
                .partition_spec_id(0)
                .partition(Struct::from_iter([Some(Literal::string(region))]))
                .build()
                .unwrap(),
            spec_id: 0,
            data_sequence: 1,
            added_ms: Some(added_ms),
        }
    }

    fn names(bin: &Bin) -> Vec<String> {
        bin.inputs
            .iter()
            .map(|f| f.file.file_path().rsplit('/').next().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn small_old_files_of_a_partition_are_packed_up_to_the_target() {
        let files = (0..5)
            .map(|i| file(&format!("us-{i}"), "us", 40 * MB, 0))
            .chain([file("us-big", "us", 90 * MB, 0)])
            .collect();
        let selected = select(files, &[], &policy(), 10_000, DIR);
        let bins: Vec<Vec<String>> = selected.bins.iter().map(names).collect();
        // 40 + 40 fit in 100, a third does not; the last 40 MB file is alone and stays.
        assert_eq!(
            bins,
            vec![
                vec!["us-0.parquet", "us-1.parquet"],
                vec!["us-2.parquet", "us-3.parquet"]
            ]
        );
        assert_eq!(selected.left[&LeftReason::LargeEnough], 1);
        assert_eq!(selected.left[&LeftReason::TooFewInPartition], 1);
    }

    #[test]
    fn young_files_deleted_partitions_and_foreign_files_are_left_alone() {
        let mut files: Vec<LiveFile> = (0..3)
            .map(|i| file(&format!("eu-{i}"), "eu", MB, 0))
            .collect();
        files.extend((0..3).map(|i| file(&format!("us-{i}"), "us", MB, 9_500)));
        files.extend((0..3).map(|i| file(&format!("ap-{i}"), "ap", MB, 0)));
        files.push(file_in("s3://b/wh/ns/other", "x", "ap", MB, 0));
        let deletes = [LiveDelete {
            content: DataContentType::PositionDeletes,
            spec_id: 0,
            partition: Struct::from_iter([Some(Literal::string("eu"))]),
            unpartitioned: false,
        }];
        let selected = select(files, &deletes, &policy(), 10_000, DIR);
        assert_eq!(selected.bins.len(), 1);
        assert_eq!(
            names(&selected.bins[0]),
            ["ap-0.parquet", "ap-1.parquet", "ap-2.parquet"]
        );
        assert_eq!(selected.left[&LeftReason::HasDeletes], 3);
        assert_eq!(selected.left[&LeftReason::Young], 3);
        assert_eq!(selected.left[&LeftReason::OutsideDirectory], 1);
    }

    #[test]
    fn a_global_equality_delete_leaves_every_file_alone() {
        let files = (0..4)
            .map(|i| file(&format!("us-{i}"), "us", MB, 0))
            .collect();
        let deletes = [LiveDelete {
            content: DataContentType::EqualityDeletes,
            spec_id: 1,
            partition: Struct::empty(),
            unpartitioned: true,
        }];
        let selected = select(files, &deletes, &policy(), 10_000, DIR);
        assert!(selected.bins.is_empty());
        assert_eq!(selected.left[&LeftReason::HasDeletes], 4);
    }

    #[test]
    fn the_byte_budget_leaves_the_rest_to_the_next_run() {
        let mut policy = policy();
        policy.max_bytes_per_run = 3 * MB;
        policy.target_file_size_bytes = 2 * MB;
        let files = (0..6)
            .map(|i| file(&format!("us-{i}"), "us", MB, 0))
            .collect();
        let selected = select(files, &[], &policy, 10_000, DIR);
        assert_eq!(selected.bins.len(), 1);
        assert_eq!(selected.left[&LeftReason::NextRun], 4);
    }
}
