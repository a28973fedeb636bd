//! `floe bench`: loadTable and commit latency over loopback HTTP.
//!
//! By default it starts its own catalog (embedded store, temporary data directory) on a free
//! 127.0.0.1 port, so the figures are reproducible with one command; `--url` and `--token`
//! measure an already running catalog instead.

use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
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
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(bytes))
            .map_err(|e| e.to_string())?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, body))
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
    fn print(&mut self, label: &str) {
        self.samples.sort();
        let n = self.samples.len();
        let pick = |q: f64| self.samples[((n as f64 * q) as usize).min(n - 1)];
        let total: Duration = self.samples.iter().sum();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{:<10} {label:<15} n={n:<5} median={:.3}ms p90={:.3}ms p99={:.3}ms mean={:.3}ms throughput={:.0}/s (sequential)",
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
    let _private: Option<tempfile::TempDir>;
    let mut counter: Option<Arc<StoreCounter>> = None;
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
            let (url, token, counting) = start_private_catalog(dir.path()).await?;
            counter = Some(counting);
            _private = Some(dir);
            (url, token, "demo".to_owned())
        }
    };
    let client = Client::builder(TokioExecutor::new()).build_http();
    let http = Http {
        client,
        base,
        token,
    };
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
    let table_path = format!("/v1/{prefix}/namespaces/{ns}/tables/events");
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

    let counts = || counter.as_ref().map(|c| c.counts());
    let before_loads = counts();
    let mut loads_small = measure_loads(&http, &table_path, "loadTable", &args).await?;
    let load_counts = counts().zip(before_loads).map(|(a, b)| a.since(&b));
    let mut parent: Option<i64> = None;
    let mut sequence = 0i64;
    let mut commits = Summary {
        name: "commit",
        samples: Vec::with_capacity(args.iterations),
    };
    let before_commits = counts();
    for i in 0..(args.warmup + args.iterations) {
        sequence += 1;
        let snapshot_id = 1_000 + i as i64;
        let body = json!({
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
            "updates": [
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": snapshot_id, "parent-snapshot-id": parent, "sequence-number": sequence,
                    "timestamp-ms": now_ms(), "manifest-list": format!("file:///bench/snap-{snapshot_id}.avro"),
                    "summary": {"operation": "append"}, "schema-id": 0}},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id}
            ]
        });
        let started = Instant::now();
        http.expect(Method::POST, &table_path, Some(body), StatusCode::OK)
            .await?;
        if i >= args.warmup {
            commits.samples.push(started.elapsed());
        }
        parent = Some(snapshot_id);
    }
    let commit_counts = counts().zip(before_commits).map(|(a, b)| a.since(&b));
    let mut loads_large = measure_loads(&http, &table_path, "loadTable", &args).await?;
    println!(
        "floe bench: {} ({} measured requests per row, {} warm-up)",
        http.base, args.iterations, args.warmup
    );
    loads_small.print("0 snapshots");
    commits.print("appends");
    loads_large.print(&format!("{} snapshots", args.warmup + args.iterations));
    let requests = (args.warmup + args.iterations) as f64;
    if let Some(c) = load_counts {
        print_store_costs("loadTable", &c, requests);
    }
    if let Some(c) = commit_counts {
        print_store_costs("commit", &c, requests);
    }
    Ok(())
}

/// Store requests per operation, averaged over every request of the phase (warm-up included).
fn print_store_costs(name: &str, counts: &StoreCounts, requests: f64) {
    println!(
        "{name:<10} store per request: {:.2} reads ({:.2} get, {:.2} query, {:.2} index), {:.2} writes ({:.2} items)",
        counts.reads() as f64 / requests,
        counts.gets as f64 / requests,
        counts.queries as f64 / requests,
        counts.index_queries as f64 / requests,
        counts.writes as f64 / requests,
        counts.items_written as f64 / requests,
    );
}

async fn measure_loads(
    http: &Http,
    path: &str,
    name: &'static str,
    args: &BenchArgs,
) -> Result<Summary, String> {
    let mut summary = Summary {
        name,
        samples: Vec::with_capacity(args.iterations),
    };
    for i in 0..(args.warmup + args.iterations) {
        let started = Instant::now();
        http.expect(Method::GET, path, None, StatusCode::OK).await?;
        if i >= args.warmup {
            summary.samples.push(started.elapsed());
        }
    }
    Ok(summary)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

async fn start_private_catalog(
    dir: &std::path::Path,
) -> Result<(String, String, Arc<StoreCounter>), String> {
    let token = floe::auth::generate_token();
    let counting = Arc::new(StoreCounter::default());
    let observer = counting.observer();
    let (catalog, _) = floe::deployment::open_wrapped(dir, "demo", Some(&token), |store| {
        Arc::new(ObservedStore::new(store, observer))
    })
    .await
    .map_err(|e| e.to_string())?;
    let app = floe::http::full_router(catalog);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://{addr}/iceberg"), token, counting))
}
