//! `floe-bench maintenance`: a table grown by appends to many snapshots (each with its own
//! data file, manifest and manifest list, written with the `iceberg` crate; every 100
//! manifests are merged into one, as Java's default manifest merging keeps lists short), then
//! maintained once with the default policy. Reports the table's files and bytes, its metadata
//! file and the commit latency of a one-snapshot append before and after, what the run did and
//! read, and its AWS cost.
//!
//! Snapshots are dated by the system clock as they are written (metadata files are, and no
//! snapshot may predate its table's last update). The catalog's own clock, which the policy
//! reads, is then moved past the default five days plus `--aged` of the growth, so that the
//! oldest share of the snapshots is past the default age, as on a table appended to for days.
//!
//! In process (embedded store, local warehouse): the commit latency is the catalog's own
//! work, without HTTP framing; compare the before and after figures of one run.

use crate::record::report;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use floe::catalog::OrgContext;
use floe::catalog::tables::MaintainOptions;
use floe::clock::{Clock, ManualClock, SystemClock};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, ManifestFile, ManifestListWriter,
    ManifestWriterBuilder, Struct, TableMetadata,
};
use serde_json::{Value, json};

/// Manifests merged into one, as Java's `commit.manifest.min-count-to-merge` default.
const MERGE_COUNT: usize = 100;
const DATA_FILE_BYTES: usize = 2048;

#[derive(Args)]
pub struct MaintenanceBenchArgs {
    /// Snapshots the table is grown to.
    #[arg(long, default_value_t = 10_000)]
    snapshots: usize,
    /// Snapshots per commit while growing it (unmeasured).
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// The share of the snapshots (oldest first) past the default age when the run starts.
    #[arg(long, default_value_t = 0.5)]
    aged: f64,
    /// One-snapshot appends timed before and after the run.
    #[arg(long, default_value_t = 15)]
    commits: usize,
}

pub async fn run(args: MaintenanceBenchArgs) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let meter = super::Meter::default();
    let token = floe::auth::generate_token();
    let (catalog, ctx) =
        super::open_demo(dir.path(), Some(&token), meter.wraps(Some(clock.clone()))).await?;
    let mut table = Grower::create(&catalog, &ctx).await?;
    eprintln!("growing the table to {} snapshots...", args.snapshots);
    let first = SystemClock.now_ms();
    while table.snapshots < args.snapshots {
        let count = args.batch.min(args.snapshots - table.snapshots);
        table.append(&catalog, &ctx, count).await?;
    }
    let span = SystemClock.now_ms() - first;
    let before = Measured::take(&mut table, &catalog, &ctx, &args).await?;
    // Five days (the default age) and the oldest `aged` of the growth have passed.
    let default_age =
        floe::catalog::maintenance_policy::Policy::default().max_snapshot_age_ms as u64;
    clock.advance_ms(
        (SystemClock.now_ms() - clock.now_ms()) + default_age
            - (span as f64 * (1.0 - args.aged)) as u64,
    );

    let store_before = meter.store.counts();
    let objects_before = meter.objects.counts();
    let started = Instant::now();
    let report = catalog
        .tables
        .maintain_table(&ctx, "bench", "events", MaintainOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let run_time = started.elapsed();
    let store_used = meter.store.counts().since(&store_before);
    let objects_used = meter.objects.counts().since(&objects_before);

    let after = Measured::take(&mut table, &catalog, &ctx, &args).await?;
    let run_seconds = run_time.as_secs_f64();
    // The scheduled function: 512 MB on arm64, billed for the run's wall time here, plus its
    // requests at list prices (DELETE is free; a transactional write item costs 2 units).
    let lambda = run_seconds * 0.5 * 0.000_013_333_4 + 0.20 / 1e6;
    let s3 = objects_used.gets as f64 * 0.0004 / 1e3
        + (objects_used.puts + objects_used.lists) as f64 * 0.005 / 1e3;
    let dynamodb = store_used.reads() as f64 * 0.125 / 1e6
        + store_used.items_written as f64 * 2.0 * 0.625 / 1e6;
    let out = json!({
        "snapshots": args.snapshots,
        "aged": args.aged,
        "before": before.json(),
        "after": after.json(),
        "run": {
            "seconds": run_seconds,
            "snapshots-expired": report.snapshots_expired,
            "files-deleted": report.files_deleted,
            "bytes-deleted": report.bytes_deleted,
            "files-kept": report.files_kept,
            "object-gets": objects_used.gets,
            "object-puts": objects_used.puts,
            "object-lists": objects_used.lists,
            "object-delete-requests": objects_used.deletes,
            "store-reads": store_used.reads(),
            "store-items-written": store_used.items_written,
            "cost-usd": {"lambda": lambda, "s3": s3, "dynamodb": dynamodb, "total": lambda + s3 + dynamodb},
        },
    });
    report!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Grows the bench table.
struct Grower {
    location: String,
    io: FileIO,
    snapshots: usize,
    /// Merged manifests, then this block's own.
    merged: Vec<ManifestFile>,
    pending: Vec<(ManifestFile, DataFile)>,
}

impl Grower {
    async fn create(catalog: &floe::catalog::Catalog, ctx: &OrgContext) -> Result<Self, String> {
        catalog
            .namespaces
            .create_namespace(
                ctx,
                serde_json::from_value(json!({"namespace": ["bench"]})).unwrap(),
            )
            .await
            .map_err(|e| e.to_string())?;
        let created = catalog
            .tables
            .create_table(
                ctx,
                "bench",
                serde_json::from_value(
                    json!({"name": "events", "schema": {"type": "struct", "fields": [
                    {"id": 1, "name": "id", "type": "long", "required": false}]}}),
                )
                .unwrap(),
                Default::default(),
            )
            .await
            .map_err(|e| e.to_string())?;
        let metadata: TableMetadata =
            serde_json::from_slice(&created.metadata).map_err(|e| e.to_string())?;
        Ok(Self {
            location: metadata.location().to_owned(),
            io: FileIO::new_with_memory(),
            snapshots: 0,
            merged: Vec::new(),
            pending: Vec::new(),
        })
    }

    async fn metadata(
        catalog: &floe::catalog::Catalog,
        ctx: &OrgContext,
    ) -> Result<(TableMetadata, String), String> {
        let loaded = catalog
            .tables
            .load_table(ctx, "bench", "events", Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let loaded = loaded.result();
        Ok((
            serde_json::from_slice(&loaded.metadata).map_err(|e| e.to_string())?,
            loaded.metadata_location.clone().unwrap_or_default(),
        ))
    }

    /// Commits `count` appended snapshots in one commit.
    async fn append(
        &mut self,
        catalog: &floe::catalog::Catalog,
        ctx: &OrgContext,
        count: usize,
    ) -> Result<Duration, String> {
        let (metadata, _) = Self::metadata(catalog, ctx).await?;
        let mut parent = metadata.current_snapshot().map(|s| s.snapshot_id());
        let mut sequence = metadata.last_sequence_number();
        let mut updates = Vec::new();
        let base = parent;
        for _ in 0..count {
            self.snapshots += 1;
            sequence += 1;
            let id = self.snapshots as i64;
            let list = self.write_snapshot(&metadata, id, parent, sequence).await?;
            updates.push(json!({"action": "add-snapshot", "snapshot": {
                "snapshot-id": id, "parent-snapshot-id": parent, "sequence-number": sequence,
                "timestamp-ms": SystemClock.now_ms(), "manifest-list": list,
                "summary": {"operation": "append", "added-data-files": "1", "added-records": "1"},
                "schema-id": 0}}));
            parent = Some(id);
        }
        updates.push(json!({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": parent}));
        let body = json!({
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": base}],
            "updates": updates,
        });
        let started = Instant::now();
        catalog
            .tables
            .commit_table(ctx, "bench", "events", body)
            .await
            .map_err(|e| e.to_string())?;
        Ok(started.elapsed())
    }

    /// Writes snapshot `id`'s data file, manifest and manifest list (merging manifests every
    /// [`MERGE_COUNT`]); its manifest list's location.
    async fn write_snapshot(
        &mut self,
        metadata: &TableMetadata,
        id: i64,
        parent: Option<i64>,
        sequence: i64,
    ) -> Result<String, String> {
        let data_path = format!("{}/data/{id:08}.parquet", self.location);
        write_local(&data_path, &vec![1u8; DATA_FILE_BYTES])?;
        let data = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_format(DataFileFormat::Parquet)
            .file_path(data_path)
            .file_size_in_bytes(DATA_FILE_BYTES as u64)
            .record_count(1)
            .partition_spec_id(metadata.default_partition_spec_id())
            .partition(Struct::empty())
            .build()
            .map_err(|e| e.to_string())?;
        let mut manifest = self
            .manifest(metadata, id, &format!("m-{id:08}"), |w| {
                w.add_file(data.clone(), sequence)
            })
            .await?;
        if self.pending.len() + 1 >= MERGE_COUNT {
            // Merged: the block's files as existing entries of one manifest.
            let block: Vec<(ManifestFile, DataFile)> = self.pending.drain(..).collect();
            let mut merged = self
                .manifest(metadata, id, &format!("merged-{id:08}"), |w| {
                    for (m, file) in &block {
                        w.add_existing_file(
                            file.clone(),
                            m.added_snapshot_id,
                            m.sequence_number,
                            Some(m.sequence_number),
                        )?;
                    }
                    w.add_file(data.clone(), sequence)
                })
                .await?;
            merged.sequence_number = sequence;
            merged.min_sequence_number = block
                .first()
                .map_or(sequence, |(m, _)| m.min_sequence_number);
            self.merged.push(merged);
        } else {
            manifest.sequence_number = sequence;
            manifest.min_sequence_number = sequence;
            self.pending.push((manifest, data));
        }
        let scratch = format!("memory:///snap-{id}.avro");
        let mut list = ManifestListWriter::v2(
            self.io
                .new_output(&scratch)
                .map_err(|e| e.to_string())?
                .writer()
                .await
                .map_err(|e| e.to_string())?,
            id,
            parent,
            sequence,
        );
        let listed: Vec<ManifestFile> = self
            .merged
            .iter()
            .cloned()
            .chain(self.pending.iter().map(|(m, _)| m.clone()))
            .collect();
        list.add_manifests(listed.into_iter())
            .map_err(|e| e.to_string())?;
        list.close().await.map_err(|e| e.to_string())?;
        let location = format!("{}/metadata/snap-{id:08}.avro", self.location);
        self.flush(&scratch, &location).await?;
        Ok(location)
    }

    async fn manifest(
        &self,
        metadata: &TableMetadata,
        id: i64,
        name: &str,
        fill: impl FnOnce(&mut iceberg::spec::ManifestWriter) -> iceberg::Result<()>,
    ) -> Result<ManifestFile, String> {
        let scratch = format!("memory:///{name}.avro");
        let mut writer = ManifestWriterBuilder::new(
            self.io.new_output(&scratch).map_err(|e| e.to_string())?,
            Some(id),
            metadata.current_schema().clone(),
            metadata.default_partition_spec().as_ref().clone(),
        )
        .build_v2_data();
        fill(&mut writer).map_err(|e| e.to_string())?;
        let mut manifest = writer
            .write_manifest_file()
            .await
            .map_err(|e| e.to_string())?;
        let location = format!("{}/metadata/{name}.avro", self.location);
        self.flush(&scratch, &location).await?;
        manifest.manifest_path = location;
        Ok(manifest)
    }

    /// Moves a file written in memory to its place in the warehouse.
    async fn flush(&self, scratch: &str, location: &str) -> Result<(), String> {
        let bytes = self
            .io
            .new_input(scratch)
            .map_err(|e| e.to_string())?
            .read()
            .await
            .map_err(|e| e.to_string())?;
        self.io.delete(scratch).await.map_err(|e| e.to_string())?;
        write_local(location, &bytes)
    }
}

fn write_local(location: &str, bytes: &[u8]) -> Result<(), String> {
    let path = Path::new(location.strip_prefix("file://").unwrap_or(location));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, bytes).map_err(|e| e.to_string())
}

/// The table's size and commit latency at one moment.
struct Measured {
    files: u64,
    bytes: u64,
    metadata_bytes: u64,
    commit_ms: Vec<f64>,
}

impl Measured {
    async fn take(
        table: &mut Grower,
        catalog: &floe::catalog::Catalog,
        ctx: &OrgContext,
        args: &MaintenanceBenchArgs,
    ) -> Result<Self, String> {
        let (files, bytes) = tree_size(Path::new(
            table
                .location
                .strip_prefix("file://")
                .unwrap_or(&table.location),
        ));
        let (_, metadata_location) = Grower::metadata(catalog, ctx).await?;
        let metadata_bytes = std::fs::metadata(
            metadata_location
                .strip_prefix("file://")
                .unwrap_or(&metadata_location),
        )
        .map(|m| m.len())
        .unwrap_or(0);
        let mut commit_ms = Vec::new();
        for _ in 0..args.commits {
            let took = table.append(catalog, ctx, 1).await?;
            commit_ms.push(took.as_secs_f64() * 1000.0);
        }
        commit_ms.sort_by(f64::total_cmp);
        Ok(Self {
            files,
            bytes,
            metadata_bytes,
            commit_ms,
        })
    }

    fn json(&self) -> Value {
        let median = self
            .commit_ms
            .get(self.commit_ms.len() / 2)
            .copied()
            .unwrap_or(0.0);
        json!({
            "files": self.files,
            "bytes": self.bytes,
            "metadata-file-bytes": self.metadata_bytes,
            "commit-median-ms": median,
        })
    }
}

fn tree_size(root: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(meta) = entry.metadata() {
                files += 1;
                bytes += meta.len();
            }
        }
    }
    (files, bytes)
}
