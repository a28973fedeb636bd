//! `floe-bench planning`: server-side scan planning on tables of many files. For each shape
//! (`--tables files:manifests`), a table partitioned by `day` (100 values, one per manifest in
//! turn) is written with the `iceberg` crate (manifests with partition summaries and column
//! metrics; the data files themselves are not written, planning never reads them), then
//! planned with no filter and with a selective one (`day = 7 AND id < ...`, about 1% of the
//! files):
//!
//! - in process: the first answer cold (manifests read from storage) and warm (from memory),
//!   the whole plan (every plan task fetched), the CPU of a warm first answer, answer sizes,
//!   and dollars per million plans at AWS list prices;
//! - with `--python` (a Python with PyIceberg 0.12, e.g. the test venv's): over loopback HTTP,
//!   PyIceberg's own client-side planning of the same scan (its first plan and its best of the
//!   next ones) beside its time to the first task through Floe (the first `/plan` answer) and to
//!   every task through Floe (`scan-planning-mode=server`).

use crate::record::report;
use std::time::{Duration, Instant};

use clap::Args;
use floe::catalog::OrgContext;
use floe::catalog::tables::PlanTableScanRequest;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, Literal, ManifestFile,
    ManifestListWriter, ManifestWriterBuilder, Struct, TableMetadata,
};
use serde_json::{Value, json};

#[derive(Args)]
pub struct PlanningBenchArgs {
    /// Table shapes, `files:manifests`.
    #[arg(long, value_delimiter = ',', default_value = "10000:100,100000:1000")]
    tables: Vec<String>,
    /// Warm plans timed per table and filter.
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// Cold plans timed per table and filter (manifests forgotten before each).
    #[arg(long, default_value_t = 3)]
    cold: usize,
    /// A Python with PyIceberg 0.12 (the test venv's): also time PyIceberg's own planning.
    #[arg(long)]
    python: Option<std::path::PathBuf>,
}

/// Days the table is partitioned into; manifest `k` holds day `k % DAYS`.
const DAYS: usize = 100;

pub async fn run(args: PlanningBenchArgs) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let meter = super::Meter::default();
    let token = floe::auth::generate_token();
    let (catalog, ctx) = super::open_demo(dir.path(), Some(&token), meter.wraps(None)).await?;
    catalog
        .namespaces
        .create_namespace(
            &ctx,
            serde_json::from_value(json!({"namespace": ["bench"]})).unwrap(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let addr = super::serve_on_loopback(floe::http::full_router(catalog.clone())).await?;
    let uri = format!("http://{addr}/iceberg");
    let mut results = Vec::new();
    for shape in &args.tables {
        let (files, manifests) = shape
            .split_once(':')
            .and_then(|(f, m)| Some((f.parse::<usize>().ok()?, m.parse::<usize>().ok()?)))
            .filter(|(f, m)| *m > 0 && f >= m)
            .ok_or_else(|| format!("--tables takes files:manifests, not {shape}"))?;
        let table = format!("t{files}");
        eprintln!("writing {files} files in {manifests} manifests...");
        write_table(&catalog, &ctx, &table, files, manifests).await?;
        let selective = json!({"type": "and",
            "left": {"type": "eq", "term": "day", "value": 7},
            "right": {"type": "lt", "term": "id", "value": (files as i64) * 10}});
        for (label, filter) in [
            ("all files", Value::Bool(true)),
            ("day = 7 (1%)", selective),
        ] {
            let measured = measure(&catalog, &ctx, &meter, &table, &filter, &args).await?;
            let pyiceberg = match &args.python {
                Some(python) => pyiceberg(python, &uri, &token, &table, label, &args)?,
                None => Value::Null,
            };
            results.push(json!({
                "table": {"files": files, "manifests": manifests},
                "filter": label,
                "floe": measured,
                "pyiceberg": pyiceberg,
            }));
        }
    }
    report!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "plans": results,
            "cost-assumptions": super::cost::assumptions(),
        }))
        .map_err(|e| e.to_string())?
    );
    Ok(())
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times
        .get(times.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

async fn plan(
    catalog: &floe::catalog::Catalog,
    ctx: &OrgContext,
    table: &str,
    filter: &Value,
) -> Result<Value, String> {
    let request: PlanTableScanRequest =
        serde_json::from_value(json!({"filter": filter})).map_err(|e| e.to_string())?;
    catalog
        .tables
        .plan_table_scan(ctx, "bench", table, request, Default::default())
        .await
        .map_err(|e| e.to_string())
}

/// The whole plan: the first answer and every task; its tasks and bytes.
async fn whole_plan(
    catalog: &floe::catalog::Catalog,
    ctx: &OrgContext,
    table: &str,
    filter: &Value,
) -> Result<(usize, usize, usize), String> {
    let first = plan(catalog, ctx, table, filter).await?;
    let mut files = first["file-scan-tasks"].as_array().map_or(0, Vec::len);
    let mut bytes = first.to_string().len();
    let tasks = first["plan-tasks"].as_array().cloned().unwrap_or_default();
    for task in &tasks {
        let request =
            serde_json::from_value(json!({"plan-task": task})).map_err(|e| e.to_string())?;
        let answer = catalog
            .tables
            .fetch_scan_tasks(ctx, "bench", table, request)
            .await
            .map_err(|e| e.to_string())?;
        files += answer["file-scan-tasks"].as_array().map_or(0, Vec::len);
        bytes += answer.to_string().len();
    }
    Ok((files, tasks.len(), bytes))
}

async fn measure(
    catalog: &floe::catalog::Catalog,
    ctx: &OrgContext,
    meter: &super::Meter,
    table: &str,
    filter: &Value,
    args: &PlanningBenchArgs,
) -> Result<Value, String> {
    let mut cold = Vec::new();
    let mut cold_gets = 0;
    for _ in 0..args.cold.max(1) {
        catalog.tables.forget_answers();
        let before = meter.objects.counts();
        let started = Instant::now();
        plan(catalog, ctx, table, filter).await?;
        cold.push(started.elapsed());
        cold_gets = meter.objects.counts().since(&before).gets;
    }
    let first = plan(catalog, ctx, table, filter).await?;
    let first_bytes = first.to_string().len();
    let before = meter.read();
    let mut warm = Vec::new();
    for _ in 0..args.iterations.max(1) {
        let started = Instant::now();
        plan(catalog, ctx, table, filter).await?;
        warm.push(started.elapsed());
    }
    let usage = meter
        .read()
        .since(&before, args.iterations.max(1), first_bytes);
    let mut whole = Vec::new();
    let mut shape = (0, 0, 0);
    for _ in 0..args.iterations.clamp(1, 5) {
        let started = Instant::now();
        shape = whole_plan(catalog, ctx, table, filter).await?;
        whole.push(started.elapsed());
    }
    let cpu_ms = usage.cpu.as_secs_f64() * 1000.0;
    let op = super::cost::PerOperation::new(
        &usage.store,
        &usage.objects,
        cpu_ms,
        usage.requests as f64,
        first_bytes,
    );
    let per_million = super::cost::per_million(&op);
    Ok(json!({
        "first-answer-cold-ms": median(cold),
        "cold-object-gets": cold_gets,
        "first-answer-warm-ms": median(warm),
        "first-answer-warm-cpu-ms": op.cpu_ms,
        "first-answer-bytes": first_bytes,
        "first-answer-files": first["file-scan-tasks"].as_array().map_or(0, Vec::len),
        "whole-plan-warm-ms": median(whole),
        "whole-plan-files": shape.0,
        "plan-tasks": shape.1,
        "whole-plan-bytes": shape.2,
        "warm-store-reads-per-plan": op.gets + op.queries,
        "warm-object-gets-per-plan": op.object_gets,
        "usd-per-million-first-answers": per_million.total(),
    }))
}

/// PyIceberg's own planning of the same scan, and its planning through Floe, over HTTP.
fn pyiceberg(
    python: &std::path::Path,
    uri: &str,
    token: &str,
    table: &str,
    label: &str,
    args: &PlanningBenchArgs,
) -> Result<Value, String> {
    let selective = label != "all files";
    let runs = args.iterations.clamp(1, 5).to_string();
    super::python_json(
        python,
        PYICEBERG_SCRIPT,
        &[
            uri,
            token,
            table,
            if selective { "selective" } else { "all" },
            &runs,
        ],
        "PyIceberg's planning",
    )
}

const PYICEBERG_SCRIPT: &str = r#"
import json, statistics, sys, time, urllib.request
from pyiceberg.catalog import load_catalog
from pyiceberg.expressions import AlwaysTrue, And, EqualTo, LessThan
uri, token, table, kind, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
files = int(table[1:])
row_filter = And(EqualTo("day", 7), LessThan("id", files * 10)) if kind == "selective" else AlwaysTrue()
wire = ({"type": "and", "left": {"type": "eq", "term": "day", "value": 7},
         "right": {"type": "lt", "term": "id", "value": files * 10}} if kind == "selective" else True)
def timed(f):
    started = time.perf_counter(); result = f(); return (time.perf_counter() - started) * 1000, result
client = load_catalog("client", type="rest", uri=uri, warehouse="demo", token=token).load_table(f"bench.{table}")
cold, planned = timed(lambda: list(client.scan(row_filter=row_filter).plan_files()))
warm = min(timed(lambda: list(client.scan(row_filter=row_filter).plan_files()))[0] for _ in range(runs))
def first_task():
    request = urllib.request.Request(f"{uri}/v1/demo/namespaces/bench/tables/{table}/plan", method="POST",
        data=json.dumps({"filter": wire}).encode(), headers={"Authorization": f"Bearer {token}",
        "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return json.loads(answer.read())
first = statistics.median(timed(first_task)[0] for _ in range(runs))
server = load_catalog("server", type="rest", uri=uri, warehouse="demo", token=token,
                      **{"scan-planning-mode": "server"}).load_table(f"bench.{table}")
through, served = timed(lambda: list(server.scan(row_filter=row_filter).plan_files()))
assert len(served) == len(planned), (len(served), len(planned))
print(json.dumps({"files": len(planned), "own-planning-first-ms": cold, "own-planning-best-ms": warm,
                  "first-task-through-floe-ms": first, "every-task-through-floe-ms": through,
                  "first-task-speedup-vs-own-first": cold / first, "first-task-speedup-vs-own-best": warm / first}))
"#;

/// Writes the table: `manifests` manifests of `files / manifests` files each, manifest `k` in
/// day `k % DAYS`, file `i` holding ids `10 i ..= 10 i + 9`; then commits it as one snapshot.
async fn write_table(
    catalog: &floe::catalog::Catalog,
    ctx: &OrgContext,
    table: &str,
    files: usize,
    manifests: usize,
) -> Result<(), String> {
    let created = catalog
        .tables
        .create_table(
            ctx,
            "bench",
            serde_json::from_value(json!({"name": table,
                "schema": {"type": "struct", "fields": [
                    {"id": 1, "name": "id", "type": "long", "required": false},
                    {"id": 2, "name": "day", "type": "int", "required": false}]},
                "partition-spec": {"spec-id": 0, "fields": [
                    {"name": "day", "transform": "identity", "source-id": 2, "field-id": 1000}]}}))
            .unwrap(),
            Default::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let metadata: TableMetadata =
        serde_json::from_slice(&created.metadata).map_err(|e| e.to_string())?;
    let location = metadata.location().to_owned();
    let io = FileIO::new_with_memory();
    let snapshot_id = 1;
    let per_manifest = files / manifests;
    let mut listed: Vec<ManifestFile> = Vec::with_capacity(manifests);
    for k in 0..manifests {
        let day = (k % DAYS) as i32;
        let scratch = format!("memory:///m-{k}.avro");
        let mut writer = ManifestWriterBuilder::new(
            io.new_output(&scratch).map_err(|e| e.to_string())?,
            Some(snapshot_id),
            metadata.current_schema().clone(),
            metadata.default_partition_spec().as_ref().clone(),
        )
        .build_v2_data();
        for j in 0..per_manifest {
            let i = (k * per_manifest + j) as i64;
            let file = DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_format(DataFileFormat::Parquet)
                .file_path(format!("{location}/data/day={day}/{i:08}.parquet"))
                .file_size_in_bytes(4 << 20)
                .record_count(10)
                .partition_spec_id(0)
                .partition(Struct::from_iter([Some(Literal::int(day))]))
                .value_counts([(1, 10), (2, 10)].into())
                .null_value_counts([(1, 0), (2, 0)].into())
                .lower_bounds([(1, Datum::long(i * 10)), (2, Datum::int(day))].into())
                .upper_bounds([(1, Datum::long(i * 10 + 9)), (2, Datum::int(day))].into())
                .build()
                .map_err(|e| e.to_string())?;
            writer.add_file(file, 1).map_err(|e| e.to_string())?;
        }
        let mut manifest = writer
            .write_manifest_file()
            .await
            .map_err(|e| e.to_string())?;
        let target = format!("{location}/metadata/m-{k:05}.avro");
        flush(&io, &scratch, &target).await?;
        manifest.manifest_path = target;
        listed.push(manifest);
    }
    commit_manifests(catalog, ctx, table, &metadata, &io, listed).await
}

/// Commits `listed` as the table's first snapshot (id 1): its manifest list written and moved
/// into the warehouse, then an `append` through the catalog's commit path.
pub(super) async fn commit_manifests(
    catalog: &floe::catalog::Catalog,
    ctx: &OrgContext,
    table: &str,
    metadata: &TableMetadata,
    io: &FileIO,
    listed: Vec<ManifestFile>,
) -> Result<(), String> {
    let location = metadata.location();
    let snapshot_id = 1;
    let scratch = "memory:///snap.avro";
    let mut list = ManifestListWriter::v2(
        io.new_output(scratch)
            .map_err(|e| e.to_string())?
            .writer()
            .await
            .map_err(|e| e.to_string())?,
        snapshot_id,
        None,
        1,
    );
    list.add_manifests(listed.into_iter())
        .map_err(|e| e.to_string())?;
    list.close().await.map_err(|e| e.to_string())?;
    let list_location = format!("{location}/metadata/snap-1.avro");
    flush(io, scratch, &list_location).await?;
    let body = json!({
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": null}],
        "updates": [
            {"action": "add-snapshot", "snapshot": {
                "snapshot-id": snapshot_id, "sequence-number": 1,
                "timestamp-ms": metadata.last_updated_ms() + 1, "manifest-list": list_location,
                "summary": {"operation": "append"}, "schema-id": 0}},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id}
        ]
    });
    catalog
        .tables
        .commit_table(ctx, "bench", table, body)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Moves a file written in memory to its place in the local warehouse.
pub(super) async fn flush(io: &FileIO, scratch: &str, location: &str) -> Result<(), String> {
    let bytes = io
        .new_input(scratch)
        .map_err(|e| e.to_string())?
        .read()
        .await
        .map_err(|e| e.to_string())?;
    let path = std::path::Path::new(location.strip_prefix("file://").unwrap_or(location));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, &bytes).map_err(|e| e.to_string())?;
    Ok(())
}
