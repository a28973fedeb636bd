//! `floe-bench requests`: loadTable and commit latency over loopback HTTP at several table sizes (built
//! through the API), what each load variant (full, `snapshots=refs`, gzip, a 304 on an unchanged
//! table) costs in time and bytes, the store and object round trips and CPU time of each
//! operation, and (`--cost`) what a million of each would cost on AWS.
//!
//! By default it starts its own catalog (embedded store, temporary data directory) on a free
//! 127.0.0.1 port, so the figures are reproducible with one command; `--url` and `--token`
//! measure an already running catalog instead.
//!
//! `--ui` measures the web view instead: the table page (the first and the last page of its
//! snapshot history) at each table size, through the web view's router in process with a
//! signed-in session, so the figures are the page's own cost (session check, metadata, render).

pub mod compaction;
mod cost;
pub mod maintenance;
pub mod planning;
mod signing;
pub mod writes;

use crate::record::report;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use floe::objects::observed::{ObjectCounter, ObjectCounts, ObservedObjects};
use floe::store::observed::{ObservedStore, StoreCounter, StoreCounts};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Args)]
pub struct BenchArgs {
    /// Catalog base URL (ending in /iceberg); default: start a private catalog.
    #[arg(long)]
    url: Option<String>,
    /// Bearer token for --url.
    #[arg(long, env = "FLOE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Warehouse (org) for --url.
    #[arg(long, default_value = "demo")]
    warehouse: String,
    /// Measured requests per operation.
    #[arg(long, default_value_t = 500)]
    iterations: usize,
    /// Unmeasured warm-up requests per operation.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Concurrent keep-alive clients of the throughput run (warm loadTable of the new table).
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Seconds the throughput run lasts (0: no throughput run).
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Also run the same load against a minimal HTTP server inside the bench that answers the
    /// same bytes (the two take turns in half-second slices for `--seconds` each), and print
    /// Floe's throughput as a ratio of it.
    #[arg(long)]
    floor: bool,
    /// Table sizes (snapshots, built through the API) at which loads and commits are measured.
    #[arg(long, value_delimiter = ',', default_value = "0,1000")]
    snapshots: Vec<usize>,
    /// Snapshots added per commit while a table grows to the next size (unmeasured).
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Measured commits (single appends) per size; default: --iterations.
    #[arg(long)]
    commits: Option<usize>,
    /// Print dollars per million loads and commits on AWS (needs the private catalog).
    #[arg(long)]
    cost: bool,
    /// Measure the web view's table page (first and last page of the snapshot history) at each
    /// table size instead, in process with a signed-in session (needs the private catalog).
    #[arg(long)]
    ui: bool,
}

struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    token: String,
}

impl Http {
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Bytes), String> {
        self.call_with(method, path, body, &[])
            .await
            .map(|(status, _, body)| (status, body))
    }

    /// A request with extra headers; answers status, ETag and body (as received: compressed
    /// bodies are not decoded, so their size is what travelled).
    async fn call_with(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Result<(StatusCode, Option<String>, Bytes), String> {
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(bytes)).map_err(|e| e.to_string())?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let etag = response
            .headers()
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, etag, body))
    }

    async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        want: StatusCode,
    ) -> Result<Bytes, String> {
        // Answers are not parsed here: a client-side parse of large metadata would be measured
        // as server latency.
        let (status, answer) = self.call(method.clone(), path, body).await?;
        if status != want {
            return Err(format!(
                "{method} {path}: expected {want}, got {status}: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        Ok(answer)
    }
}

struct Summary {
    name: &'static str,
    samples: Vec<Duration>,
}

impl Summary {
    fn median(&self) -> Duration {
        let mut sorted = self.samples.clone();
        sorted.sort();
        sorted.get(sorted.len() / 2).copied().unwrap_or_default()
    }

    fn print(&mut self, label: &str) {
        self.samples.sort();
        let n = self.samples.len();
        let pick = |q: f64| self.samples[((n as f64 * q) as usize).min(n - 1)];
        let total: Duration = self.samples.iter().sum();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        report!(
            "{:<10} {label:<32} n={n:<5} median={:.3}ms p90={:.3}ms p99={:.3}ms mean={:.3}ms throughput={:.0}/s (sequential)",
            self.name,
            ms(pick(0.5)),
            ms(pick(0.9)),
            ms(pick(0.99)),
            ms(total / n as u32),
            n as f64 / total.as_secs_f64()
        );
    }
}

pub async fn run(args: BenchArgs) -> Result<(), String> {
    if args.ui {
        return run_ui(&args).await;
    }
    let _private: Option<tempfile::TempDir>;
    let mut meter: Option<Meter> = None;
    let mut private_catalog = None;
    let (base, token, warehouse) = match (&args.url, &args.token) {
        (Some(url), Some(token)) => {
            _private = None;
            (
                url.trim_end_matches('/').to_owned(),
                token.clone(),
                args.warehouse.clone(),
            )
        }
        (Some(_), None) => return Err("--url needs --token (or FLOE_TOKEN)".into()),
        (None, _) => {
            let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
            let (url, token, counting, catalog) = start_private_catalog(dir.path()).await?;
            meter = Some(counting);
            private_catalog = Some(catalog);
            _private = Some(dir);
            (url, token, "demo".to_owned())
        }
    };
    if args.cost && meter.is_none() {
        return Err("--cost counts requests inside the private catalog: leave out --url".into());
    }
    let client = Client::builder(TokioExecutor::new()).build_http();
    let http = Http {
        client,
        base,
        token,
    };
    let table_path = create_table(&http, &warehouse).await?;
    let throughput = if args.seconds > 0 {
        Some(match args.url {
            Some(_) => measure_throughput(&http, &table_path, &args).await?,
            None => {
                // The counting wrappers cost a boxed future per store and storage call: the
                // throughput run measures a catalog as `floe serve` runs it, without them.
                let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
                let (base, token) = start_plain_catalog(dir.path()).await?;
                let plain = Http {
                    client: http.client.clone(),
                    base,
                    token,
                };
                let path = create_table(&plain, "demo").await?;
                measure_throughput(&plain, &path, &args).await?
            }
        })
    } else {
        None
    };
    let mut sizes = args.snapshots.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut table = Growth::default();
    let mut results = Vec::with_capacity(sizes.len());
    for size in sizes {
        table
            .grow_to(&http, &table_path, size, args.batch.max(1))
            .await?;
        let loads = measure_variants(
            &http,
            &table_path,
            &args,
            meter.as_ref(),
            private_catalog.as_deref(),
        )
        .await?;
        let commits =
            measure_commits(&http, &table_path, &args, &mut table, meter.as_ref()).await?;
        let compared = match (&_private, &private_catalog) {
            (Some(dir), Some(catalog)) if args.floor => Some(
                compare_commit_paths(
                    catalog,
                    &http,
                    &table_path,
                    &args,
                    &mut table,
                    meter.as_ref(),
                    dir.path(),
                )
                .await?,
            ),
            _ => None,
        };
        results.push((size, loads, commits, compared));
    }
    let mut signed = match &private_catalog {
        Some(catalog) => {
            Some(measure_signing(&http, catalog, &table_path, &args, meter.as_ref()).await?)
        }
        None => None,
    };
    report!(
        "floe-bench requests: {} ({} measured requests per row, {} warm-up)",
        http.base,
        args.iterations,
        args.warmup
    );
    for (size, loads, commits, compared) in &mut results {
        for variant in loads.iter_mut() {
            let label = format!("{size} snapshots, {}", variant.label);
            variant.summary.print(&label);
            report!("{:<10} {:<32} {} bytes per answer", "", "", variant.bytes);
            if let Some(usage) = &variant.usage {
                print_usage(usage);
            }
        }
        let label = format!("{size} snapshots, append");
        commits.summary.print(&label);
        if let Some(usage) = &commits.usage {
            print_usage(usage);
        }
        if let Some(compared) = compared {
            compared.print(*size, &commits.summary);
        }
    }
    if let Some(signed) = &mut signed {
        signed.summary.print("signRequest, one storage GET");
        if let Some(usage) = &signed.usage {
            print_usage(usage);
        }
    }
    if let Some(throughput) = throughput {
        throughput.print(&args);
    }
    if args.cost {
        print_costs(&results, signed.as_ref());
    }
    Ok(())
}

/// A namespace and an empty table to measure; answers the table's path.
async fn create_table(http: &Http, warehouse: &str) -> Result<String, String> {
    let config = http
        .expect(
            Method::GET,
            &format!("/v1/config?warehouse={warehouse}"),
            None,
            StatusCode::OK,
        )
        .await?;
    let config: Value = serde_json::from_slice(&config).map_err(|e| e.to_string())?;
    let prefix = config["overrides"]["prefix"]
        .as_str()
        .ok_or("config has no prefix")?
        .to_owned();
    let ns = format!("bench_{}", std::process::id());
    http.expect(
        Method::POST,
        &format!("/v1/{prefix}/namespaces"),
        Some(json!({"namespace": [ns]})),
        StatusCode::OK,
    )
    .await?;
    http.expect(
        Method::POST,
        &format!("/v1/{prefix}/namespaces/{ns}/tables"),
        Some(
            json!({"name": "events", "schema": {"type": "struct", "fields": [
                {"id": 1, "name": "id", "type": "long", "required": true},
                {"id": 2, "name": "payload", "type": "string", "required": false}
            ]}}),
        ),
        StatusCode::OK,
    )
    .await?;
    Ok(format!("/v1/{prefix}/namespaces/{ns}/tables/events"))
}

/// The measured table's snapshot chain, as the bench has built it.
#[derive(Default)]
struct Growth {
    parent: Option<i64>,
    snapshots: usize,
    /// Snapshot summaries as engines write them (file and record counts and totals), which the
    /// web view shows and charts; otherwise the operation only.
    full_summaries: bool,
}

impl Growth {
    /// A commit adding `count` snapshots on `main`, each the parent of the next.
    fn append(&mut self, count: usize) -> Value {
        let mut updates = Vec::with_capacity(count + 1);
        let requirement =
            json!([{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": self.parent}]);
        for _ in 0..count {
            self.snapshots += 1;
            let id = 1_000 + self.snapshots as i64;
            let mut summary = json!({"operation": "append"});
            if self.full_summaries {
                let n = self.snapshots;
                summary = json!({"operation": "append",
                    "added-data-files": "1", "added-records": "1000",
                    "added-files-size": "65536", "changed-partition-count": "1",
                    "total-data-files": n.to_string(), "total-records": (n * 1000).to_string(),
                    "total-files-size": (n * 65536).to_string(), "total-delete-files": "0",
                    "total-position-deletes": "0", "total-equality-deletes": "0",
                    "engine-name": "bench", "engine-version": "1"});
            }
            updates.push(json!({"action": "add-snapshot", "snapshot": {
                "snapshot-id": id, "parent-snapshot-id": self.parent,
                "sequence-number": self.snapshots, "timestamp-ms": now_ms(),
                "manifest-list": format!("file:///bench/snap-{id}.avro"),
                "summary": summary, "schema-id": 0}}));
            self.parent = Some(id);
        }
        updates.push(json!({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": self.parent}));
        json!({"requirements": requirement, "updates": updates})
    }

    /// Commits `batch` snapshots at a time until the table has `size` (unmeasured).
    async fn grow_to(
        &mut self,
        http: &Http,
        path: &str,
        size: usize,
        batch: usize,
    ) -> Result<(), String> {
        while self.snapshots < size {
            let body = self.append(batch.min(size - self.snapshots));
            http.expect(Method::POST, path, Some(body), StatusCode::OK)
                .await?;
        }
        Ok(())
    }
}

/// Latencies of one kind of request and, in the private catalog, what they used.
struct Measured {
    summary: Summary,
    usage: Option<Usage>,
}

async fn measure_commits(
    http: &Http,
    path: &str,
    args: &BenchArgs,
    table: &mut Growth,
    meter: Option<&Meter>,
) -> Result<Measured, String> {
    let count = args.commits.unwrap_or(args.iterations);
    measure_posts(http, "commit", path, args.warmup, count, meter, || {
        table.append(1)
    })
    .await
}

/// The same one-snapshot appends through the full rewrite (the path before commits were
/// spliced), and the floor under any commit: hashing and writing the table's current file,
/// timed in turns with spliced appends (the disk's pace drifts, and both should meet it alike).
struct Compared {
    full: Measured,
    floor: Summary,
    /// The spliced appends timed in turns with the floor.
    beside_floor: Summary,
}

impl Compared {
    fn print(&mut self, size: usize, spliced: &Summary) {
        self.full
            .summary
            .print(&format!("{size} snapshots, append, full rewrite (old)"));
        if let Some(usage) = &self.full.usage {
            print_usage(usage);
        }
        self.floor
            .print(&format!("{size} snapshots, hash + write the file"));
        self.beside_floor
            .print(&format!("{size} snapshots, append, in turns with it"));
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
        report!(
            "{:<10} {:<32} medians: append / floor {:.2}x (in turns), full rewrite / append {:.2}x",
            "",
            "",
            ratio(self.beside_floor.median(), self.floor.median()),
            ratio(self.full.summary.median(), spliced.median()),
        );
    }
}

async fn compare_commit_paths(
    catalog: &floe::catalog::Catalog,
    http: &Http,
    path: &str,
    args: &BenchArgs,
    table: &mut Growth,
    meter: Option<&Meter>,
    scratch: &std::path::Path,
) -> Result<Compared, String> {
    catalog.core.baselines.set_full_rewrite(true);
    let full = measure_commits(http, path, args, table, meter).await;
    catalog.core.baselines.set_full_rewrite(false);
    let full = full?;
    let (beside_floor, floor) = measure_beside_floor(http, path, args, table, scratch).await?;
    Ok(Compared {
        full,
        floor,
        beside_floor,
    })
}

/// One-snapshot appends and the floor under them, in turns: hashing the table's current
/// metadata file and writing it as a new file of the same store, as a commit writes its file,
/// what no commit can go under.
async fn measure_beside_floor(
    http: &Http,
    path: &str,
    args: &BenchArgs,
    table: &mut Growth,
    scratch: &std::path::Path,
) -> Result<(Summary, Summary), String> {
    use floe::objects::ObjectStore;
    use sha2::Digest;
    let loaded = http.expect(Method::GET, path, None, StatusCode::OK).await?;
    let loaded: Value = serde_json::from_slice(&loaded).map_err(|e| e.to_string())?;
    let location = loaded["metadata-location"]
        .as_str()
        .ok_or("loadTable answered no metadata-location")?;
    let file = location
        .strip_prefix("file://")
        .ok_or("the floor needs the private catalog's local warehouse")?;
    let bytes = Bytes::from(std::fs::read(file).map_err(|e| e.to_string())?);
    let root = scratch.join("floor");
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    let store = floe::objects::local::LocalObjectStore::new(root.clone());
    let url = floe::objects::local::file_url(&root);
    let count = args.commits.unwrap_or(args.iterations);
    // A directory per measured file: each size writes its own.
    let run = location.rsplit('/').next().unwrap_or("file");
    let mut floor = Summary {
        name: "floor",
        samples: Vec::with_capacity(count),
    };
    let mut commits = Summary {
        name: "commit",
        samples: Vec::with_capacity(count),
    };
    for i in 0..(args.warmup + count) {
        let body = table.append(1);
        let started = Instant::now();
        http.expect(Method::POST, path, Some(body), StatusCode::OK)
            .await?;
        let committed = started.elapsed();
        let started = Instant::now();
        let digest = sha2::Sha256::digest(&bytes);
        std::hint::black_box(digest);
        store
            .put_if_absent(&format!("{url}/{run}/{i:05}.metadata.json"), bytes.clone())
            .await
            .map_err(|e| e.to_string())?;
        if i >= args.warmup {
            floor.samples.push(started.elapsed());
            commits.samples.push(committed);
        }
    }
    Ok((commits, floor))
}

/// Times `count` POSTs of `path` after `warmup` unmeasured ones, each with the body `next`
/// makes, and counts what the measured ones used.
async fn measure_posts(
    http: &Http,
    name: &'static str,
    path: &str,
    warmup: usize,
    count: usize,
    meter: Option<&Meter>,
    mut next: impl FnMut() -> Value,
) -> Result<Measured, String> {
    let mut summary = Summary {
        name,
        samples: Vec::with_capacity(count),
    };
    let mut bytes = 0;
    let mut used = None;
    for i in 0..(warmup + count) {
        if i == warmup {
            used = meter.map(Meter::read);
        }
        let body = next();
        let started = Instant::now();
        let answer = http
            .expect(Method::POST, path, Some(body), StatusCode::OK)
            .await?;
        if i >= warmup {
            summary.samples.push(started.elapsed());
        }
        bytes = answer.len();
    }
    let usage = meter
        .zip(used)
        .map(|(m, before)| m.read().since(&before, count, bytes));
    Ok(Measured { summary, usage })
}

/// Signing of one storage request (a data file GET) on a second table of the bench's
/// namespace, moved onto a bucket with static keys.
async fn measure_signing(
    http: &Http,
    catalog: &floe::catalog::Catalog,
    table_path: &str,
    args: &BenchArgs,
    meter: Option<&Meter>,
) -> Result<Measured, String> {
    let tables = table_path.rsplit_once('/').ok_or("no table path")?.0;
    http.expect(
        Method::POST,
        tables,
        Some(
            json!({"name": "signed", "schema": {"type": "struct", "fields": [
            {"id": 1, "name": "id", "type": "long", "required": true}]}}),
        ),
        StatusCode::OK,
    )
    .await?;
    let (path, request) =
        signing::move_onto_static_keys(catalog, &format!("{tables}/signed")).await?;
    measure_posts(
        http,
        "signRequest",
        &path,
        args.warmup,
        args.iterations,
        meter,
        || request.clone(),
    )
    .await
}

fn print_usage(usage: &Usage) {
    let n = usage.requests as f64;
    report!(
        "{:<10} {:<32} per request: {:.2} store reads, {:.2} store writes ({:.2} items), {:.2} object GETs, {:.2} PUTs, {:.2} LISTs, {:.3} ms CPU",
        "",
        "",
        usage.store.reads() as f64 / n,
        usage.store.writes as f64 / n,
        usage.store.items_written as f64 / n,
        usage.objects.gets as f64 / n,
        usage.objects.puts as f64 / n,
        usage.objects.lists as f64 / n,
        usage.cpu.as_secs_f64() * 1000.0 / n,
    );
}

/// What one size measured: its load variants, its appends, and (`--floor`) the comparison.
type SizeResult = (usize, Vec<Variant>, Measured, Option<Compared>);

fn print_costs(results: &[SizeResult], signed: Option<&Measured>) {
    report!("cost per million operations on AWS (floe-bench requests --cost):");
    report!(
        "{:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "operation",
        "billed",
        "lambda",
        "api-gw",
        "dynamodb",
        "s3",
        "total"
    );
    let row = |label: String, usage: &Usage| {
        let op = cost::PerOperation::new(
            &usage.store,
            &usage.objects,
            usage.cpu.as_secs_f64() * 1000.0,
            usage.requests as f64,
            usage.response_bytes,
        );
        let c = cost::per_million(&op);
        report!(
            "{label:<34} {:>7.0}ms {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
            cost::billed_ms(&op),
            c.lambda,
            c.http_api,
            c.dynamodb,
            c.s3,
            c.total()
        );
    };
    for (size, loads, commits, compared) in results {
        for variant in loads {
            if let Some(usage) = &variant.usage {
                row(format!("loadTable {}, {size}", variant.label), usage);
            }
        }
        if let Some(usage) = &commits.usage {
            row(format!("commit, {size}"), usage);
        }
        if let Some(usage) = compared.as_ref().and_then(|c| c.full.usage.as_ref()) {
            row(format!("commit, full rewrite (old), {size}"), usage);
        }
    }
    if let Some(usage) = signed.and_then(|s| s.usage.as_ref()) {
        row("signRequest (per storage request)".into(), usage);
    }
    report!("{}", cost::assumptions());
}

/// Warm loadTable throughput with concurrent clients, and the floor's when asked.
struct Throughput {
    floe: f64,
    floor: Option<f64>,
}

impl Throughput {
    fn print(&self, args: &BenchArgs) {
        report!(
            "loadTable  throughput, {} clients, {} s: {:.0} requests/s",
            args.clients,
            args.seconds,
            self.floe
        );
        if let Some(floor) = self.floor {
            report!(
                "floor      the same answer from a minimal server: {floor:.0} requests/s; Floe reaches {:.2} of it",
                self.floe / floor
            );
        }
    }
}

async fn measure_throughput(
    http: &Http,
    path: &str,
    args: &BenchArgs,
) -> Result<Throughput, String> {
    let url = format!("{}{path}", http.base);
    let whole = Duration::from_secs(args.seconds);
    if !args.floor {
        let floe = requests(&url, &http.token, args.clients, whole).await?;
        return Ok(Throughput {
            floe: floe as f64 / whole.as_secs_f64(),
            floor: None,
        });
    }
    // Floe and the floor take turns in short slices, so that a slower or busier moment of the
    // machine falls on both alike and the ratio compares like with like.
    let (_, _, body) = http.call_with(Method::GET, path, None, &[]).await?;
    let floor_url = start_floor_server(body, path).await?;
    let slices = (args.seconds * 2).max(1);
    let slice = whole / u32::try_from(slices).unwrap_or(u32::MAX);
    let (mut floe, mut floor) = (0, 0);
    for _ in 0..slices {
        floe += requests(&url, &http.token, args.clients, slice).await?;
        floor += requests(&floor_url, &http.token, args.clients, slice).await?;
    }
    let seconds = (slice * u32::try_from(slices).unwrap_or(u32::MAX)).as_secs_f64();
    Ok(Throughput {
        floe: floe as f64 / seconds,
        floor: Some(floor as f64 / seconds),
    })
}

/// Requests answered to `clients` keep-alive clients loading `url` for `duration`.
async fn requests(
    url: &str,
    token: &str,
    clients: usize,
    duration: Duration,
) -> Result<u64, String> {
    let deadline = Instant::now() + duration;
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let url = url.to_owned();
        let token = token.to_owned();
        tasks.push(tokio::spawn(async move {
            let client: Client<HttpConnector, Full<Bytes>> =
                Client::builder(TokioExecutor::new()).build_http();
            let mut done = 0u64;
            while Instant::now() < deadline {
                let request = Request::get(&url)
                    .header("authorization", format!("Bearer {token}"))
                    .body(Full::new(Bytes::new()))
                    .map_err(|e| e.to_string())?;
                let response = client.request(request).await.map_err(|e| e.to_string())?;
                if response.status() != StatusCode::OK {
                    return Err(format!("GET {url}: {}", response.status()));
                }
                response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?;
                done += 1;
            }
            Ok::<u64, String>(done)
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.map_err(|e| e.to_string())??;
    }
    Ok(total)
}

/// The floor: a server that does nothing but answer `body` as JSON on `path`, over the same
/// HTTP stack (axum on hyper) as Floe, on a free loopback port.
async fn start_floor_server(body: Bytes, path: &str) -> Result<String, String> {
    let route = format!("/iceberg{}", path);
    let app = axum::Router::new().route(
        &route,
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([(http::header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    let addr = serve_on_loopback(app).await?;
    Ok(format!("http://{addr}{route}"))
}

/// One way of loading a table.
struct LoadVariant {
    label: &'static str,
    query: &'static str,
    headers: &'static [(&'static str, &'static str)],
    /// The client sends the ETag of the previous answer, and gets a 304.
    conditional: bool,
    /// Measures the path before compressed answers came from the cache (the private catalog's
    /// compression per request), with `--floor`.
    old_path: bool,
}

/// The load variants measured on each table.
const LOAD_VARIANTS: [LoadVariant; 6] = [
    LoadVariant {
        label: "full",
        query: "",
        headers: &[],
        conditional: false,
        old_path: false,
    },
    LoadVariant {
        label: "snapshots=refs",
        query: "?snapshots=refs",
        headers: &[],
        conditional: false,
        old_path: false,
    },
    LoadVariant {
        label: "gzip",
        query: "",
        headers: &[("accept-encoding", "gzip")],
        conditional: false,
        old_path: false,
    },
    LoadVariant {
        label: "gzip, per request (old)",
        query: "",
        headers: &[("accept-encoding", "gzip")],
        conditional: false,
        old_path: true,
    },
    LoadVariant {
        label: "zstd",
        query: "",
        headers: &[("accept-encoding", "zstd")],
        conditional: false,
        old_path: false,
    },
    LoadVariant {
        label: "304 unchanged",
        query: "",
        headers: &[],
        conditional: true,
        old_path: false,
    },
];

struct Variant {
    label: &'static str,
    summary: Summary,
    /// Size of the answer's body as sent.
    bytes: usize,
    usage: Option<Usage>,
}

/// `catalog`: the private catalog, whose compression path the old-path variants switch (they
/// run only beside the floors, on a private catalog).
async fn measure_variants(
    http: &Http,
    path: &str,
    args: &BenchArgs,
    meter: Option<&Meter>,
    catalog: Option<&floe::catalog::Catalog>,
) -> Result<Vec<Variant>, String> {
    let mut out = Vec::with_capacity(LOAD_VARIANTS.len());
    for LoadVariant {
        label,
        query,
        headers,
        conditional,
        old_path,
    } in LOAD_VARIANTS
    {
        // The path before answers were compressed from the cache: only beside the floors.
        let baselines = match catalog {
            Some(catalog) if args.floor => Some(&catalog.core.baselines),
            _ => None,
        };
        if old_path && baselines.is_none() {
            continue;
        }
        if let Some(baselines) = baselines {
            baselines.set_compress_per_request(old_path);
        }
        let uri = format!("{path}{query}");
        let tag = if conditional {
            let (_, tag, _) = http.call_with(Method::GET, &uri, None, &[]).await?;
            Some(tag.ok_or("loadTable answered no ETag")?)
        } else {
            None
        };
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        if let Some(tag) = &tag {
            all.push(("if-none-match", tag.as_str()));
        }
        let want = if conditional {
            StatusCode::NOT_MODIFIED
        } else {
            StatusCode::OK
        };
        let mut summary = Summary {
            name: "loadTable",
            samples: Vec::with_capacity(args.iterations),
        };
        let mut bytes = 0;
        let mut used = None;
        for i in 0..(args.warmup + args.iterations) {
            if i == args.warmup {
                used = meter.map(Meter::read);
            }
            let started = Instant::now();
            let (status, _, body) = http.call_with(Method::GET, &uri, None, &all).await?;
            if status != want {
                return Err(format!(
                    "GET {uri} ({label}): expected {want}, got {status}"
                ));
            }
            if i >= args.warmup {
                summary.samples.push(started.elapsed());
            }
            bytes = body.len();
        }
        let usage = meter
            .zip(used)
            .map(|(m, before)| m.read().since(&before, args.iterations, bytes));
        out.push(Variant {
            label,
            summary,
            bytes,
            usage,
        });
    }
    if let Some(catalog) = catalog {
        catalog.core.baselines.set_compress_per_request(false);
    }
    Ok(out)
}

/// What the private catalog has used so far: store and object requests, and CPU time.
#[derive(Default)]
struct Meter {
    store: Arc<StoreCounter>,
    objects: Arc<ObjectCounter>,
}

impl Meter {
    /// Wraps that count every store and object request of a catalog into this meter.
    fn wraps(&self, clock: Option<Arc<dyn floe::clock::Clock>>) -> floe::deployment::Wraps {
        let observer = self.store.observer();
        let objects = self.objects.clone();
        floe::deployment::Wraps {
            store: Box::new(move |store| Arc::new(ObservedStore::new(store, observer))),
            objects: Box::new(move |inner| {
                Arc::new(ObservedObjects {
                    inner,
                    counter: objects,
                })
            }),
            clock,
        }
    }
}

/// One reading of a [`Meter`].
struct Reading {
    store: StoreCounts,
    objects: ObjectCounts,
    cpu: Duration,
}

/// What `requests` requests used between two readings.
struct Usage {
    store: StoreCounts,
    objects: ObjectCounts,
    /// CPU time of the whole bench process (catalog and client).
    cpu: Duration,
    requests: usize,
    /// Size of one answer's body as sent.
    response_bytes: usize,
}

impl Meter {
    fn read(&self) -> Reading {
        Reading {
            store: self.store.counts(),
            objects: self.objects.counts(),
            cpu: process_cpu_time(),
        }
    }
}

impl Reading {
    fn since(&self, earlier: &Reading, requests: usize, response_bytes: usize) -> Usage {
        Usage {
            store: self.store.since(&earlier.store),
            objects: self.objects.since(&earlier.objects),
            cpu: self.cpu.saturating_sub(earlier.cpu),
            requests: requests.max(1),
            response_bytes,
        }
    }
}

/// Runs a Python `script` (with PyIceberg and DuckDB, the test venv's) with `args` and reads
/// the JSON it prints; `what` names it in the error.
fn python_json(
    python: &std::path::Path,
    script: &str,
    args: &[&str],
    what: &str,
) -> Result<serde_json::Value, String> {
    let output = std::process::Command::new(python)
        .args(["-c", script])
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())
}

/// User and system CPU time of this process (Linux `/proc/self/stat`, in clock ticks of 10 ms;
/// zero elsewhere).
fn process_cpu_time() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15: indexes 11 and 12 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `floe-bench requests --ui`: the table page of the web view, first and last page of the history, at
/// each table size. The table grows through the API over loopback as for the other modes; pages
/// are requested from the web view's router in process, with a session signed in once.
async fn run_ui(args: &BenchArgs) -> Result<(), String> {
    if args.url.is_some() || args.cost {
        return Err(
            "--ui measures the web view of a private catalog: leave out --url and --cost".into(),
        );
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let token = floe::auth::generate_token();
    let (catalog, _) = floe::deployment::open(dir.path(), "demo", Some(&token))
        .await
        .map_err(|e| e.to_string())?;
    let addr = serve_on_loopback(floe::http::full_router(catalog.clone())).await?;
    let http = Http {
        client: Client::builder(TokioExecutor::new()).build_http(),
        base: format!("http://{addr}/iceberg"),
        token: token.clone(),
    };
    let table_path = create_table(&http, "demo").await?;
    // `/v1/{prefix}/namespaces/{ns}/tables/{table}` -> the web view's table page.
    let page_path = table_path
        .strip_prefix("/v1/demo/")
        .map(|rest| format!("/ui/orgs/demo/{rest}"))
        .ok_or("unexpected table path")?;
    let ui = floe::ui::router(catalog, floe::ui::UiConfig::default());
    let cookie = ui_sign_in(&ui, &token).await?;

    let mut sizes = args.snapshots.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut table = Growth {
        full_summaries: true,
        ..Growth::default()
    };
    let mut results = Vec::new();
    for size in sizes {
        table
            .grow_to(&http, &table_path, size, args.batch.max(1))
            .await?;
        let pages = size.div_ceil(50).max(1);
        let mut variants = vec![("table page, history page 1".to_owned(), page_path.clone())];
        if pages > 1 {
            variants.push((
                format!("table page, history page {pages} (last)"),
                format!("{page_path}?page={pages}"),
            ));
        }
        for (label, path) in variants {
            let mut summary = Summary {
                name: "ui",
                samples: Vec::with_capacity(args.iterations),
            };
            let mut bytes = 0;
            for i in 0..(args.warmup + args.iterations) {
                let started = Instant::now();
                bytes = ui_get(&ui, &path, &cookie).await?;
                if i >= args.warmup {
                    summary.samples.push(started.elapsed());
                }
            }
            results.push((format!("{size} snapshots, {label}"), summary, bytes));
        }
    }
    report!(
        "floe-bench requests --ui: the web view's table page in process ({} measured requests per row, {} warm-up)",
        args.iterations,
        args.warmup
    );
    for (label, summary, bytes) in &mut results {
        summary.print(label);
        report!(
            "{:<10} {:<32} {bytes} bytes per page (HTML, uncompressed)",
            "",
            ""
        );
    }
    Ok(())
}

/// Signs in to the web view with `token`; answers the session cookie (`name=value`).
async fn ui_sign_in(ui: &axum::Router, token: &str) -> Result<String, String> {
    let form: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("token", token)
        .finish();
    let request = Request::post("/ui/signin")
        .header("host", "127.0.0.1")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(axum::body::Body::from(form))
        .map_err(|e| e.to_string())?;
    let response = tower::ServiceExt::oneshot(ui.clone(), request)
        .await
        .map_err(|e| e.to_string())?;
    if response.status() != StatusCode::SEE_OTHER {
        return Err(format!("web view sign-in: got {}", response.status()));
    }
    response
        .headers()
        .get(http::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|c| c.split(';').next())
        .map(str::to_owned)
        .ok_or_else(|| "web view sign-in set no cookie".into())
}

/// One page of the web view, whole; answers its size in bytes.
async fn ui_get(ui: &axum::Router, path: &str, cookie: &str) -> Result<usize, String> {
    let request = Request::get(path)
        .header("host", "127.0.0.1")
        .header("cookie", cookie)
        .body(axum::body::Body::empty())
        .map_err(|e| e.to_string())?;
    let response = tower::ServiceExt::oneshot(ui.clone(), request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if status != StatusCode::OK {
        return Err(format!(
            "GET {path}: expected 200, got {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(body.len())
}

/// A private catalog without counting wrappers; answers its URL and token.
async fn start_plain_catalog(dir: &std::path::Path) -> Result<(String, String), String> {
    let token = floe::auth::generate_token();
    let (catalog, _) = floe::deployment::open(dir, "demo", Some(&token))
        .await
        .map_err(|e| e.to_string())?;
    let addr = serve_on_loopback(floe::http::full_router(catalog)).await?;
    Ok((format!("http://{addr}/iceberg"), token))
}

async fn start_private_catalog(
    dir: &std::path::Path,
) -> Result<(String, String, Meter, Arc<floe::catalog::Catalog>), String> {
    let token = floe::auth::generate_token();
    let meter = Meter::default();
    let (catalog, _) = open_demo(dir, Some(&token), meter.wraps(None)).await?;
    let addr = serve_on_loopback(floe::http::full_router(catalog.clone())).await?;
    Ok((format!("http://{addr}/iceberg"), token, meter, catalog))
}

/// A private catalog in `dir` with its development org `demo`, and that org's admin context:
/// where the in-process benches start.
async fn open_demo(
    dir: &std::path::Path,
    token: Option<&str>,
    wraps: floe::deployment::Wraps,
) -> Result<(Arc<floe::catalog::Catalog>, floe::catalog::OrgContext), String> {
    let (catalog, _) = floe::deployment::open_wrapped(dir, "demo", token, wraps)
        .await
        .map_err(|e| e.to_string())?;
    let ctx = catalog
        .core
        .lookups
        .org_context(&floe::bootstrap::dev_admin("demo"), "demo")
        .await
        .map_err(|e| e.to_string())?;
    Ok((catalog, ctx))
}

/// Serves `app` on a free 127.0.0.1 port for the rest of the run.
async fn serve_on_loopback(app: axum::Router) -> Result<std::net::SocketAddr, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}
