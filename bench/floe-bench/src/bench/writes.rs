//! `floe-bench writes`: one org's commit rate by writers × tables, with the change's events
//! numbered on the org's counter in its own write (before) and waiting for the sequencer
//! (now), in one run.
//!
//! Each writer appends one snapshot at a time to its table (writer `i` to table `i mod T`),
//! reading the table again after a 409 from a writer of the same table. Commits go through
//! the catalog in process, on three stores:
//! - the embedded store;
//! - the embedded store under a model of DynamoDB's item limits ([`ItemLimits`]): every read
//!   takes `--model-read-ms`, every transaction `--model-transaction-ms`, during which it holds
//!   its items; a transaction that touches an item another one holds is cancelled (DynamoDB's
//!   `TransactionConflict`), and no item or partition key takes more than 1,000 write units a
//!   second (2 a KB for a transactional write);
//! - with `--dynamodb`, DynamoDB at the SDK's endpoint (`AWS_ENDPOINT_URL`: moto's server
//!   here), in a new table for each run, deleted after it.
//!
//! A sequencer runs beside the writers once a second, as `floe-events` does on AWS on the
//! stream's batches. After each run the feed must hold every change once, gap-free, or the
//! bench fails.

use crate::record::report;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clap::Args;
use floe::catalog::{Catalog, OrgContext};
use floe::error::CatalogError;
use floe::store::observed::{ObservedStore, StoreCounter};
use floe::store::{Item, Key, MetaStore, StoreError, Write};
use serde_json::{Value, json};

#[derive(Args)]
pub struct WritesBenchArgs {
    /// Concurrent writers.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    writers: Vec<usize>,
    /// Tables of the org the writers share.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    tables: Vec<usize>,
    /// Seconds each run lasts.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// The model's read latency (GetItem, Query), in milliseconds.
    #[arg(long, default_value_t = 4)]
    model_read_ms: u64,
    /// The model's TransactWriteItems latency, in milliseconds: how long it holds its items.
    #[arg(long, default_value_t = 12)]
    model_transaction_ms: u64,
    /// Also run on DynamoDB at the SDK's endpoint (AWS_ENDPOINT_URL), in a new table.
    #[arg(long)]
    dynamodb: bool,
}

/// How often the bench's sequencer numbers what waits: the events function's batching window
/// on the stream (template.yaml's `MaximumBatchingWindowInSeconds`).
const SEQUENCER_INTERVAL: Duration = Duration::from_secs(1);
/// One item's, and one partition's, most write units a second on DynamoDB.
const WRITE_UNITS_PER_SECOND: u64 = 1000;

pub async fn run(args: WritesBenchArgs) -> Result<(), String> {
    report!(
        "commits/s of one org, numbered on the org's counter in the change's write (before) \
         and waiting for the sequencer (now); {} s a run",
        args.seconds
    );
    let mut stores = vec![Backend::Embedded, Backend::Modeled];
    if args.dynamodb {
        stores.push(Backend::Dynamodb);
    }
    for backend in stores {
        report!();
        report!("## {}", backend.describe(&args));
        report!();
        let mut header = String::from("| writers \\ tables |");
        let mut rule = String::from("| --- |");
        for tables in &args.tables {
            header.push_str(&format!(" {tables} |"));
            rule.push_str(" --- |");
        }
        report!("{header}");
        report!("{rule}");
        for &writers in &args.writers {
            let mut line = format!("| {writers} |");
            for &tables in &args.tables {
                let before = measure(&args, backend, writers, tables, true).await?;
                let now = measure(&args, backend, writers, tables, false).await?;
                line.push_str(&format!(
                    " {:.0} → {:.0} ({:.1}×) |",
                    before.rate,
                    now.rate,
                    now.rate / before.rate.max(f64::MIN_POSITIVE)
                ));
                eprintln!(
                    "{writers} writers × {tables} tables: before {:.0}/s ({} lost to a writer of the table; {}), busiest partitions {:?}; now {:.0}/s ({}; {}), busiest {:?}",
                    before.rate,
                    before.conflicts,
                    before.per_commit,
                    before.busiest,
                    now.rate,
                    now.conflicts,
                    now.per_commit,
                    now.busiest
                );
            }
            report!("{line}");
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Embedded,
    Modeled,
    Dynamodb,
}

impl Backend {
    fn describe(self, args: &WritesBenchArgs) -> String {
        match self {
            Backend::Embedded => "Embedded store".into(),
            Backend::Modeled => format!(
                "DynamoDB's item limits, modelled: reads {} ms, transactions {} ms holding their items, conflicting ones cancelled, 1,000 write units/s an item and a partition key",
                args.model_read_ms, args.model_transaction_ms
            ),
            Backend::Dynamodb => "DynamoDB at the SDK's endpoint".into(),
        }
    }
}

struct Outcome {
    rate: f64,
    conflicts: u64,
    /// In the model: the busiest kinds of partition, with the write units of each kind's
    /// busiest partition in the last second of the run.
    busiest: Vec<(String, u64)>,
    /// The store requests of the run, a landed commit.
    per_commit: String,
}

/// One run: `writers` writers on `tables` tables for `--seconds`, on a fresh catalog.
async fn measure(
    args: &WritesBenchArgs,
    backend: Backend,
    writers: usize,
    tables: usize,
    numbering_on_write: bool,
) -> Result<Outcome, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (read, transaction) = (
        Duration::from_millis(args.model_read_ms),
        Duration::from_millis(args.model_transaction_ms),
    );
    let dynamodb = match backend {
        Backend::Dynamodb => {
            let sdk = floe::deployment::aws_config().await;
            let table = format!("floe-bench-{}-{}", std::process::id(), now_ms());
            let store = floe::store::dynamodb::DynamoStore::from_sdk(&sdk, table);
            store.create_table().await.map_err(|e| e.to_string())?;
            Some(Arc::new(store))
        }
        _ => None,
    };
    let model: Arc<Mutex<Option<Arc<ItemLimits>>>> = Arc::default();
    let modelled = model.clone();
    let created = dynamodb.clone();
    let counter = Arc::new(StoreCounter::default());
    let observer = counter.observer();
    let wraps = floe::deployment::Wraps::store(move |embedded| {
        let store: Arc<dyn MetaStore> = match (backend, dynamodb) {
            (Backend::Modeled, _) => {
                let limits = Arc::new(ItemLimits::new(embedded, read, transaction));
                *modelled.lock().unwrap_or_else(|p| p.into_inner()) = Some(limits.clone());
                limits
            }
            (Backend::Dynamodb, Some(store)) => store,
            _ => embedded,
        };
        Arc::new(ObservedStore::new(store, observer))
    });
    let (catalog, ctx) = super::open_demo(dir.path(), None, wraps).await?;
    catalog
        .core
        .baselines
        .set_number_on_write(numbering_on_write);
    catalog
        .namespaces
        .create_namespace(
            &ctx,
            serde_json::from_value(json!({"namespace": ["bench"]})).unwrap(),
        )
        .await
        .map_err(|e| e.to_string())?;
    for t in 0..tables {
        catalog
            .tables
            .create_table(
                &ctx,
                "bench",
                serde_json::from_value(json!({"name": format!("t{t}"), "schema": {
                    "type": "struct", "fields": [
                        {"id": 1, "name": "id", "type": "long", "required": false}]}}))
                .unwrap(),
                Default::default(),
            )
            .await
            .map_err(|e| e.to_string())?;
    }
    let ctx = Arc::new(ctx);
    let stop = Arc::new(AtomicBool::new(false));
    // As floe-events on the stream, which gathers records for up to a second.
    let sequencer = {
        let (store, stop) = (catalog.core.store.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = floe::events::sequencer::sequence_org(&*store, "demo").await {
                    tracing::warn!(error = %e, "sequencing failed");
                }
                tokio::time::sleep(SEQUENCER_INTERVAL).await;
            }
        })
    };
    let ids = Arc::new(AtomicI64::new(1));
    let before_run = counter.counts();
    let conflicts = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (catalog, ctx) = (catalog.clone(), ctx.clone());
            let (ids, conflicts) = (ids.clone(), conflicts.clone());
            tokio::spawn(async move {
                write_until(
                    &catalog,
                    &ctx,
                    &format!("t{}", w % tables),
                    deadline,
                    &ids,
                    &conflicts,
                )
                .await
            })
        })
        .collect();
    let mut commits = 0u64;
    for task in tasks {
        commits += task.await.map_err(|e| e.to_string())??;
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = sequencer.await;
    let used = counter.counts().since(&before_run);
    check_feed(&catalog, &ctx, 1 + tables as u64 + commits).await?;
    if let Some(table) = created {
        // Every run on a table of its own, and none left behind: moto slows as it holds more.
        table.delete_table().await.map_err(|e| e.to_string())?;
    }
    let busiest = model
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|m| m.busiest())
        .unwrap_or_default();
    let per = |n: u64| n as f64 / commits.max(1) as f64;
    Ok(Outcome {
        rate: commits as f64 / elapsed.as_secs_f64(),
        conflicts: conflicts.load(Ordering::Relaxed),
        busiest,
        per_commit: format!(
            "{:.1} gets, {:.1} queries, {:.1} writes of {:.1} items a commit, the sequencer's included",
            per(used.gets),
            per(used.queries),
            per(used.writes),
            per(used.items_written)
        ),
    })
}

/// One writer: appends to `table` until the deadline; how many of its commits landed.
async fn write_until(
    catalog: &Catalog,
    ctx: &OrgContext,
    table: &str,
    deadline: Instant,
    ids: &AtomicI64,
    conflicts: &AtomicU64,
) -> Result<u64, String> {
    let mut landed = 0;
    let mut parent = current_snapshot(catalog, ctx, table).await?;
    while Instant::now() < deadline {
        let id = ids.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
            "updates": [
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": id, "parent-snapshot-id": parent, "timestamp-ms": now_ms(),
                    "sequence-number": id, "manifest-list": format!("file:///bench/snap-{id}.avro"),
                    "summary": {"operation": "append"}, "schema-id": 0}},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": id}
            ]
        });
        match catalog.tables.commit_table(ctx, "bench", table, body).await {
            Ok(_) => {
                landed += 1;
                parent = Some(id);
            }
            Err(CatalogError::CommitFailed(_)) => {
                conflicts.fetch_add(1, Ordering::Relaxed);
                parent = current_snapshot(catalog, ctx, table).await?;
            }
            Err(e) => return Err(format!("a commit to {table} failed: {e}")),
        }
    }
    Ok(landed)
}

async fn current_snapshot(
    catalog: &Catalog,
    ctx: &OrgContext,
    table: &str,
) -> Result<Option<i64>, String> {
    let loaded = catalog
        .tables
        .load_table(ctx, "bench", table, Default::default())
        .await
        .map_err(|e| e.to_string())?;
    let metadata: Value =
        serde_json::from_slice(&loaded.result().metadata).map_err(|e| e.to_string())?;
    Ok(metadata["current-snapshot-id"]
        .as_i64()
        .filter(|id| *id >= 0))
}

/// The feed holds `expected` events, numbered 1, 2, 3, ... (the sequencer's drain included).
async fn check_feed(catalog: &Catalog, ctx: &OrgContext, expected: u64) -> Result<(), String> {
    let mut after: Option<String> = None;
    let mut next = 1;
    loop {
        let page = catalog
            .events
            .list_events(ctx, after.as_deref(), 1000)
            .await
            .map_err(|e| e.to_string())?;
        if page.events.is_empty() {
            break;
        }
        for event in &page.events {
            if event.data.sequence != next {
                return Err(format!(
                    "the feed skipped from {} to {}",
                    next - 1,
                    event.data.sequence
                ));
            }
            next += 1;
        }
        after = Some(page.next_token);
    }
    if next - 1 != expected {
        return Err(format!(
            "the feed holds {} events for {expected} changes",
            next - 1
        ));
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// A store under DynamoDB's item limits, modelled: reads take `read`; a write (one
/// TransactWriteItems) takes `transaction` and holds its items meanwhile, and is cancelled at
/// once when another holds one of them (as DynamoDB cancels a transaction that conflicts with
/// one in flight); and no item nor partition key takes more than 1,000 write units a second
/// (a transactional write costs 2 a KB), past which a write waits for the next second, as the
/// SDK's retries of a throttled write do. Partitions are not split for heat: a conservative
/// model, since DynamoDB may split a hot partition key by sort-key range (not an increasing one).
pub struct ItemLimits {
    inner: Arc<dyn MetaStore>,
    read: Duration,
    transaction: Duration,
    state: Mutex<LimitState>,
}

#[derive(Default)]
struct LimitState {
    held: HashSet<Key>,
    /// Write units spent in the current second, by item and by partition key.
    items: HashMap<Key, (u64, u64)>,
    partitions: HashMap<String, (u64, u64)>,
}

/// Spends `units` of a key's budget in `second`; whether the budget held them.
fn spend<K: std::hash::Hash + Eq>(
    budgets: &mut HashMap<K, (u64, u64)>,
    key: K,
    second: u64,
    units: u64,
) -> bool {
    let slot = budgets.entry(key).or_insert((second, 0));
    if slot.0 < second {
        *slot = (second, 0);
    }
    slot.1 += units;
    slot.1 <= WRITE_UNITS_PER_SECOND
}

/// What one part of a transaction costs in write units: 2 a KB (rounded up) of what it writes.
fn write_units(write: &Write) -> u64 {
    match write {
        Write::Put { item, .. } => 2 * (item.body.len() as u64).div_ceil(1024).max(1),
        Write::Delete { .. } | Write::Check { .. } => 2,
    }
}

impl ItemLimits {
    pub fn new(inner: Arc<dyn MetaStore>, read: Duration, transaction: Duration) -> Self {
        Self {
            inner,
            read,
            transaction,
            state: Mutex::default(),
        }
    }

    /// Takes the items for a transaction; `Err` when one is held, else how long it must wait
    /// for its write units.
    fn take(&self, writes: &[Write]) -> Result<Duration, StoreError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if writes.iter().any(|w| state.held.contains(w.key())) {
            return Err(StoreError::Conflict(
                "TransactionConflict: another transaction holds an item".into(),
            ));
        }
        let now = now_ms();
        let second = now / 1000;
        let mut throttled = false;
        for write in writes {
            let units = write_units(write);
            let key = write.key().clone();
            state.held.insert(key.clone());
            throttled |= !spend(&mut state.partitions, key.pk.clone(), second, units);
            throttled |= !spend(&mut state.items, key, second, units);
        }
        Ok(if throttled {
            Duration::from_millis(1000 - now % 1000)
        } else {
            Duration::ZERO
        })
    }

    /// The kinds of partition (the key before its first `#`) whose busiest partition took the
    /// most write units in the last second it was written, busiest first.
    fn busiest(&self) -> Vec<(String, u64)> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut peaks: HashMap<String, u64> = HashMap::new();
        for (pk, (_, units)) in &state.partitions {
            let kind = pk.split('#').next().unwrap_or(pk).to_owned();
            let peak = peaks.entry(kind).or_default();
            *peak = (*peak).max(*units);
        }
        let mut peaks: Vec<_> = peaks.into_iter().collect();
        peaks.sort_by_key(|p| std::cmp::Reverse(p.1));
        peaks.truncate(3);
        peaks
    }

    fn release(&self, writes: &[Write]) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for write in writes {
            state.held.remove(write.key());
        }
    }
}

#[async_trait]
impl MetaStore for ItemLimits {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        tokio::time::sleep(self.read).await;
        self.inner.get(key).await
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        tokio::time::sleep(self.read).await;
        self.inner.query(pk, sk_prefix, start_after, limit).await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        let wait = self.take(&writes)?;
        tokio::time::sleep(self.transaction + wait).await;
        let parts = writes.clone();
        let written = self.inner.write(writes).await;
        self.release(&parts);
        written
    }

    async fn query_index(
        &self,
        index_pk: &str,
        upto_sk: &str,
        limit: usize,
    ) -> Result<Vec<Key>, StoreError> {
        tokio::time::sleep(self.read).await;
        self.inner.query_index(index_pk, upto_sk, limit).await
    }
}
