//! `floe-bench compaction`: a table of many small Parquet files (real rows, written with the
//! `iceberg` crate's Parquet writer, committed in one snapshot) compacted by Floe (its
//! compaction alone: read, rewrite, manifests, commit), beside a plain arrow-rs read-and-rewrite of the same files in the same bins in the same
//! run (the floor: decode and encode only, no catalog, no metrics, no commit). Reports MB/s per
//! core of each and their ratio, what the run did, and with `--python` the scan time of the
//! table before and after with PyIceberg and DuckDB over loopback HTTP.
//!
//! `--cost` adds dollars per GB compacted on Lambda beside R2's published price, and the
//! scheduled maintenance per table per month at 10,000 and 100,000 tables, from what the
//! scheduler and worker used on `--tables` small tables here (counted through the store and
//! object ports) and the list prices in `cost.rs`'s terms.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use clap::Args;
use floe::catalog::OrgContext;
use floe::catalog::tables::MaintainOptions;
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, ManifestWriterBuilder, TableMetadata};
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde_json::{Value, json};

use crate::record::report;

const MB: f64 = 1024.0 * 1024.0;
/// Files a manifest of the bench table lists.
const PER_MANIFEST: usize = 1000;

#[derive(Args)]
pub struct CompactionBenchArgs {
    /// Small files the table is written with.
    #[arg(long, default_value_t = 2000)]
    files: usize,
    /// Rows per small file.
    #[arg(long, default_value_t = 5000)]
    rows: usize,
    /// `write.target-file-size-bytes`, in MiB.
    #[arg(long, default_value_t = 128)]
    target_mb: u64,
    /// A Python with PyIceberg and DuckDB (the test venv's): scan times before and after.
    #[arg(long)]
    python: Option<std::path::PathBuf>,
    /// Also report dollars per GB compacted and per table-month of scheduled maintenance.
    #[arg(long)]
    cost: bool,
    /// Small tables the scheduler and worker are measured on for `--cost`.
    #[arg(long, default_value_t = 200)]
    tables: usize,
}

pub async fn run(args: CompactionBenchArgs) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let meter = super::Meter::default();
    let token = floe::auth::generate_token();
    let (catalog, ctx) = super::open_demo(dir.path(), Some(&token), meter.wraps(None)).await?;
    eprintln!("writing {} files of {} rows...", args.files, args.rows);
    let (metadata, inputs) = write_table(&catalog, &ctx, &args).await?;
    let input_bytes: u64 = inputs.iter().map(|f| f.file_size_in_bytes()).sum();
    let addr = super::serve_on_loopback(floe::http::full_router(catalog.clone())).await?;
    let uri = format!("http://{addr}/iceberg");
    let before_scan = match &args.python {
        Some(python) => Some(scan(python, &uri, &token)?),
        None => None,
    };

    // The floor: the same bins, decoded and encoded by arrow-rs alone.
    let bins = pack(&inputs, args.target_mb * 1024 * 1024);
    let cpu = super::process_cpu_time();
    let started = Instant::now();
    let mut floor_out = 0usize;
    for bin in &bins {
        floor_out += rewrite_plain(bin)?;
    }
    let floor_wall = started.elapsed().as_secs_f64();
    let floor_cpu = super::process_cpu_time().saturating_sub(cpu).as_secs_f64();

    let cpu = super::process_cpu_time();
    let started = Instant::now();
    let compaction = catalog
        .tables
        .compact_table(&ctx, "bench", "small", MaintainOptions::default())
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the bench table's compaction did not run")?;
    let floe_wall = started.elapsed().as_secs_f64();
    let floe_cpu = super::process_cpu_time().saturating_sub(cpu).as_secs_f64();
    if compaction.files_rewritten as usize != inputs.len() {
        return Err(format!(
            "compaction rewrote {} of {} files: {compaction:?}",
            compaction.files_rewritten,
            inputs.len()
        ));
    }
    let after_scan = match &args.python {
        Some(python) => Some(scan(python, &uri, &token)?),
        None => None,
    };
    let input_mb = input_bytes as f64 / MB;
    let floe_mb_s_core = input_mb / floe_cpu.max(1e-3);
    let floor_mb_s_core = input_mb / floor_cpu.max(1e-3);
    let mut out = json!({
        "files": inputs.len(),
        "rows-per-file": args.rows,
        "input-mb": input_mb,
        "target-mb": args.target_mb,
        "schema-fields": metadata.current_schema().as_struct().fields().len(),
        "floe": {
            "wall-s": floe_wall, "cpu-s": floe_cpu,
            "mb-per-s-per-core": floe_mb_s_core, "mb-per-s-wall": input_mb / floe_wall,
            "files-written": compaction.files_written,
            "output-mb": compaction.bytes_written as f64 / MB,
            "partitions-given-up": compaction.partitions_given_up,
        },
        "arrow-rs-floor": {
            "wall-s": floor_wall, "cpu-s": floor_cpu,
            "mb-per-s-per-core": floor_mb_s_core, "mb-per-s-wall": input_mb / floor_wall,
            "files-written": bins.len(), "output-mb": floor_out as f64 / MB,
        },
        "floe-cpu-over-floor": floe_cpu / floor_cpu.max(1e-3),
    });
    if let (Some(before), Some(after)) = (before_scan, after_scan) {
        out["scan-before"] = before;
        out["scan-after"] = after;
    }
    if args.cost {
        out["cost"] = cost(
            &catalog,
            &ctx,
            &meter,
            &args,
            floe_wall,
            input_mb,
            inputs.len(),
            &compaction,
        )
        .await?;
    }
    report!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Consecutive files whose sizes add up to at most `target`, as the compaction packs them.
fn pack(files: &[DataFile], target: u64) -> Vec<Vec<String>> {
    let mut bins: Vec<Vec<String>> = Vec::new();
    let mut size = 0;
    for file in files {
        let bytes = file.file_size_in_bytes();
        match bins.last_mut() {
            Some(bin) if size + bytes <= target => {
                size += bytes;
                bin.push(file.file_path().to_owned());
            }
            _ => {
                size = bytes;
                bins.push(vec![file.file_path().to_owned()]);
            }
        }
    }
    bins
}

/// One bin read and written by arrow-rs alone (zstd, as Floe writes): the output's size.
fn rewrite_plain(bin: &[String]) -> Result<usize, String> {
    let mut writer: Option<ArrowWriter<Vec<u8>>> = None;
    for path in bin {
        let bytes = std::fs::read(local(path)).map_err(|e| e.to_string())?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
            .map_err(|e| e.to_string())?
            .build()
            .map_err(|e| e.to_string())?;
        for batch in reader {
            let batch = batch.map_err(|e| e.to_string())?;
            let writer = match &mut writer {
                Some(w) => w,
                None => writer.insert(
                    ArrowWriter::try_new(
                        Vec::new(),
                        batch.schema(),
                        Some(
                            WriterProperties::builder()
                                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                                .build(),
                        ),
                    )
                    .map_err(|e| e.to_string())?,
                ),
            };
            writer.write(&batch).map_err(|e| e.to_string())?;
        }
    }
    match writer {
        Some(w) => Ok(w.into_inner().map_err(|e| e.to_string())?.len()),
        None => Ok(0),
    }
}

fn local(location: &str) -> &str {
    location.strip_prefix("file://").unwrap_or(location)
}

/// Creates the table (compaction on, no age floor) and writes its files in one snapshot.
async fn write_table(
    catalog: &floe::catalog::Catalog,
    ctx: &OrgContext,
    args: &CompactionBenchArgs,
) -> Result<(TableMetadata, Vec<DataFile>), String> {
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
            serde_json::from_value(json!({"name": "small",
                "schema": {"type": "struct", "fields": [
                    {"id": 1, "name": "id", "type": "long", "required": false},
                    {"id": 2, "name": "name", "type": "string", "required": false},
                    {"id": 3, "name": "value", "type": "double", "required": false}]},
                "properties": {
                    "floe.compaction.enabled": "true",
                    "floe.compaction.min-file-age-ms": "0",
                    "write.target-file-size-bytes": (args.target_mb * 1024 * 1024).to_string()}}))
            .unwrap(),
            Default::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let metadata: TableMetadata =
        serde_json::from_slice(&created.metadata).map_err(|e| e.to_string())?;
    let location = metadata.location().to_owned();
    let schema = metadata.current_schema().clone();
    let io = FileIO::new_with_memory();
    let mut files = Vec::with_capacity(args.files);
    for i in 0..args.files {
        let start = (i * args.rows) as i64;
        let ids: Vec<i64> = (start..start + args.rows as i64).collect();
        let names: Vec<String> = ids.iter().map(|id| format!("name-{}", id % 9973)).collect();
        let values: Vec<f64> = ids.iter().map(|id| (*id as f64) * 0.5).collect();
        let arrow_schema =
            Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).map_err(|e| e.to_string())?);
        let batch = RecordBatch::try_new(
            arrow_schema,
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(names)),
                Arc::new(Float64Array::from(values)),
            ],
        )
        .map_err(|e| e.to_string())?;
        let scratch = format!("memory:///d-{i}.parquet");
        let mut writer = ParquetWriterBuilder::new(
            WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                .build(),
            schema.clone(),
        )
        .build(io.new_output(&scratch).map_err(|e| e.to_string())?)
        .await
        .map_err(|e| e.to_string())?;
        writer.write(&batch).await.map_err(|e| e.to_string())?;
        let mut built = writer.close().await.map_err(|e| e.to_string())?;
        let target = format!("{location}/data/{i:08}.parquet");
        let mut builder = built.pop().ok_or("nothing written")?;
        builder
            .content(iceberg::spec::DataContentType::Data)
            .file_path(target.clone())
            .partition(iceberg::spec::Struct::empty())
            .partition_spec_id(0);
        files.push(builder.build().map_err(|e| e.to_string())?);
        super::planning::flush(&io, &scratch, &target).await?;
    }
    let mut listed = Vec::new();
    for (k, chunk) in files.chunks(PER_MANIFEST).enumerate() {
        let scratch = format!("memory:///m-{k}.avro");
        let mut writer = ManifestWriterBuilder::new(
            io.new_output(&scratch).map_err(|e| e.to_string())?,
            Some(1),
            schema.clone(),
            metadata.default_partition_spec().as_ref().clone(),
        )
        .build_v2_data();
        for file in chunk {
            writer
                .add_file(file.clone(), iceberg::spec::UNASSIGNED_SEQUENCE_NUMBER)
                .map_err(|e| e.to_string())?;
        }
        let mut manifest = writer
            .write_manifest_file()
            .await
            .map_err(|e| e.to_string())?;
        let target = format!("{location}/metadata/m-{k:05}.avro");
        super::planning::flush(&io, &scratch, &target).await?;
        manifest.manifest_path = target;
        listed.push(manifest);
    }
    super::planning::commit_manifests(catalog, ctx, "small", &metadata, &io, listed).await?;
    Ok((metadata, files))
}

/// The table scanned whole by PyIceberg and by DuckDB, over loopback HTTP.
fn scan(python: &std::path::Path, uri: &str, token: &str) -> Result<Value, String> {
    super::python_json(python, SCAN_SCRIPT, &[uri, token], "the scan")
}

const SCAN_SCRIPT: &str = r#"
import importlib, json, pathlib, sys, time
import duckdb
from pyiceberg.catalog import load_catalog
uri, token = sys.argv[1], sys.argv[2]
def timed(f):
    started = time.perf_counter(); result = f(); return (time.perf_counter() - started) * 1000, result
table = load_catalog("bench", type="rest", uri=uri, warehouse="demo", token=token).load_table("bench.small")
py_ms, rows = timed(lambda: table.scan().to_arrow().num_rows)
con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
for name in ("httpfs", "avro", "iceberg"):
    package = importlib.import_module(f"duckdb_extension_{name}")
    con.execute(f"LOAD '{next(pathlib.Path(package.__file__).parent.glob('extensions/*/*.duckdb_extension'))}'")
con.execute(f"CREATE SECRET s (TYPE iceberg, TOKEN '{token}')")
con.execute(f"ATTACH 'demo' AS floe (TYPE iceberg, ENDPOINT '{uri}', SECRET s)")
duck_ms, duck = timed(lambda: con.execute("SELECT count(*), sum(value) FROM floe.bench.small").fetchone())
print(json.dumps({"pyiceberg-ms": py_ms, "pyiceberg-rows": rows, "duckdb-ms": duck_ms, "duckdb-rows": duck[0]}))
"#;

/// Dollars per GB compacted on Lambda beside R2, and scheduled maintenance per table-month.
#[allow(clippy::too_many_arguments)]
async fn cost(
    catalog: &Arc<floe::catalog::Catalog>,
    ctx: &OrgContext,
    meter: &super::Meter,
    args: &CompactionBenchArgs,
    floe_wall: f64,
    input_mb: f64,
    input_files: usize,
    compaction: &floe::catalog::tables::maintenance::CompactionReport,
) -> Result<Value, String> {
    // Lambda on arm64 at the worker's 3008 MB; S3 Standard requests; R2's published price.
    const GB_SECOND: f64 = 0.000_013_333_4;
    const WORKER_GB: f64 = 3008.0 / 1024.0;
    const S3_GET: f64 = 0.0004 / 1e3;
    const S3_PUT: f64 = 0.005 / 1e3;
    const R2_PER_GB: f64 = 0.005;
    const R2_PER_OBJECT: f64 = 2.0 / 1e6;
    const READ_UNIT: f64 = 0.125 / 1e6;
    const WRITE_UNIT: f64 = 0.625 / 1e6;
    const SQS_REQUEST: f64 = 0.40 / 1e6;
    // Assumed waits per round trip inside a region (as cost.rs assumes), in seconds.
    const DYNAMODB_S: f64 = 0.005;
    const S3_S: f64 = 0.025;
    let per_gb = 1024.0 / input_mb;
    // Wall time here reads local disk; in a region each input is a GET and each output a PUT.
    let lambda_seconds = floe_wall * per_gb
        + (input_files as f64 * per_gb + compaction.files_written as f64 * per_gb) * S3_S;
    let lambda = lambda_seconds * WORKER_GB * GB_SECOND;
    let s3 = input_files as f64 * per_gb * S3_GET
        + (compaction.files_written as f64 + 3.0) * per_gb * S3_PUT;
    let r2 = R2_PER_GB + input_files as f64 * per_gb * R2_PER_OBJECT;

    // Scheduled maintenance of small tables: scheduler and worker, as counted here.
    for i in 0..args.tables {
        catalog
            .tables
            .create_table(
                ctx,
                "bench",
                serde_json::from_value(json!({"name": format!("t{i:05}"),
                    "schema": {"type": "struct", "fields": [
                        {"id": 1, "name": "id", "type": "long", "required": false}]}}))
                .unwrap(),
                Default::default(),
            )
            .await
            .map_err(|e| e.to_string())?;
    }
    let now = floe::clock::Clock::now_ms(&floe::clock::SystemClock);
    let before = meter.read();
    let started = Instant::now();
    let claimed = catalog
        .schedule_due(now, args.tables + 10)
        .await
        .map_err(|e| e.to_string())?;
    let scheduler_wall = started.elapsed().as_secs_f64();
    let scheduled = meter.read();
    let started = Instant::now();
    for due in &claimed {
        catalog
            .maintain_claimed(due, now)
            .await
            .map_err(|e| e.to_string())?;
    }
    let worker_wall = started.elapsed().as_secs_f64();
    let worked = meter.read();
    let n = claimed.len().max(1) as f64;
    let s = scheduled.since(&before, 1, 0);
    let w = worked.since(&scheduled, 1, 0);
    let scheduler_reads = (s.store.gets + s.store.queries + s.store.index_queries) as f64 / n;
    let scheduler_writes = s.store.items_written as f64 / n;
    let worker_reads = (w.store.gets + w.store.queries + w.store.index_queries) as f64 / n;
    let worker_writes = w.store.items_written as f64 / n;
    let worker_objects = (w.objects.gets + w.objects.lists + w.objects.puts) as f64 / n;
    let worker_seconds =
        worker_wall / n + (worker_reads + worker_writes) * DYNAMODB_S + worker_objects * S3_S;
    // One run a day per table; the scheduler every five minutes sweeps up to 10,000 tables.
    let per_table_day = (scheduler_reads + worker_reads) * READ_UNIT
        + (scheduler_writes + worker_writes) * WRITE_UNIT
        + w.objects.gets as f64 / n * S3_GET
        + (w.objects.lists + w.objects.puts) as f64 / n * S3_PUT
        // A send (a tenth of a batch), a receive and a delete.
        + 2.1 * SQS_REQUEST
        + worker_seconds * 1.0 * GB_SECOND * WORKER_GB;
    let sweep_per_table_s = scheduler_wall / n + 2.0 * DYNAMODB_S / 50.0;
    let monthly = |tables: f64| {
        let runs = 30.0 * 24.0 * 12.0;
        let swept = tables.min(floe::catalog::tables::maintenance::SWEEP_TABLES_PER_RUN as f64);
        // Two rows a table (its row and its state), about a kilobyte, read by the queries.
        let sweep_units = swept * 1024.0 / 4096.0;
        let scheduler =
            runs * (sweep_units * READ_UNIT + swept * sweep_per_table_s * 0.25 * GB_SECOND);
        let tables_cost = tables * 30.0 * per_table_day;
        json!({"usd-per-month": scheduler + tables_cost,
               "usd-per-table-month": (scheduler + tables_cost) / tables,
               "scheduler-usd-per-month": scheduler})
    };
    Ok(json!({
        "prices": {"as-of": super::cost::PRICES_AS_OF, "lambda-arm64-gb-second": GB_SECOND,
                   "worker-memory-gb": WORKER_GB, "r2-per-gb": R2_PER_GB, "r2-per-million-objects": 2.0},
        "compaction-usd-per-gb": {"lambda": lambda, "s3-requests": s3, "total": lambda + s3,
                                  "r2-published": r2},
        "maintenance": {
            "tables-measured": claimed.len(),
            "scheduler-store-reads-per-table": scheduler_reads,
            "scheduler-items-written-per-table": scheduler_writes,
            "worker-store-reads-per-table": worker_reads,
            "worker-items-written-per-table": worker_writes,
            "worker-object-requests-per-table": worker_objects,
            "worker-seconds-per-table-modelled": worker_seconds,
            "usd-per-table-day": per_table_day,
            "at-10000-tables": monthly(10_000.0),
            "at-100000-tables": monthly(100_000.0),
        },
    }))
}
