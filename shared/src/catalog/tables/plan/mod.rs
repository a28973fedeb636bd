//! Server-side scan planning (`planTableScan`, `fetchPlanningResult`, `cancelPlanning`,
//! `fetchScanTasks`): the catalog reads a snapshot's manifests (from memory when warm), prunes
//! them by partition and by column metrics, and answers the data files that may hold matching
//! rows with the delete files that apply to each.
//!
//! No plan state is stored. Every plan is answered `completed`: a first run of manifests
//! inline, the rest as plan tasks. A plan id and a plan task are self-describing tokens signed
//! with the catalog's key (the table's uuid, the snapshot or range, the filter, the options,
//! and, for a task, its run of manifests), bound to the principal and the table's name, so any
//! instance can answer them, a caller cannot forge or alter one, and another principal's is
//! refused. `/tasks` and `GET plan/{id}` re-authorise the caller as a reader of the table.

mod evaluate;
mod files;
mod filter;
pub(super) mod manifests;
mod scan;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use manifests::ManifestCache;

use self::filter::Filter;
use self::manifests::TableManifests;
use self::scan::{Range, Selection};
use super::delivery::Delivery;
use super::{TableRequestOptions, TableService};
use crate::authz::Action;
use crate::catalog::OrgContext;
use crate::error::{CatalogError, Result};
use crate::model::TableRow;
use crate::objects::ObjectStore;

/// A `PlanTableScanRequest`. Unknown fields are ignored, as newer clients may send more.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PlanTableScanRequest {
    pub snapshot_id: Option<i64>,
    pub select: Option<Vec<String>>,
    pub filter: Option<Value>,
    /// A hint the spec lets a server exceed: every matching file is planned.
    pub min_rows_requested: Option<i64>,
    pub case_sensitive: Option<bool>,
    pub use_snapshot_schema: Option<bool>,
    pub start_snapshot_id: Option<i64>,
    pub end_snapshot_id: Option<i64>,
    pub stats_fields: Option<Vec<String>>,
}

/// A `FetchScanTasksRequest`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct FetchScanTasksRequest {
    pub plan_task: String,
}

/// What a plan id carries: the scan as resolved against the table when it was planned.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Scan {
    /// The table's uuid: a token of a dropped and re-created table is refused.
    #[serde(rename = "t")]
    table_uuid: String,
    #[serde(rename = "r")]
    range: RangeToken,
    #[serde(rename = "f", default, skip_serializing_if = "Option::is_none")]
    filter: Option<Value>,
    /// The SHA-256 of a filter too large for a plan id to carry (see [`PLAN_ID_FILTER_BYTES`]):
    /// such an id still cancels and opens credentials, but cannot be planned again.
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    filter_digest: Option<String>,
    #[serde(rename = "c")]
    case_sensitive: bool,
    #[serde(rename = "u")]
    use_snapshot_schema: bool,
    #[serde(rename = "s", default, skip_serializing_if = "Vec::is_empty")]
    stats_fields: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
enum RangeToken {
    #[serde(rename = "e")]
    Empty,
    #[serde(rename = "a")]
    At(i64),
    #[serde(rename = "i")]
    Appended(Option<i64>, i64),
}

impl RangeToken {
    fn range(&self) -> Range {
        match self {
            RangeToken::Empty => Range::Empty,
            RangeToken::At(id) => Range::At(*id),
            RangeToken::Appended(from, to) => Range::Appended {
                from: *from,
                to: *to,
            },
        }
    }
}

/// The largest filter, as JSON, a plan id carries whole. Plan ids travel in URLs
/// (`GET`/`DELETE .../plan/{plan-id}`, `?planId=`), which API Gateway and proxies cap at a few
/// KiB; plan tasks travel in bodies and always carry the filter.
const PLAN_ID_FILTER_BYTES: usize = 512;

impl Scan {
    /// The scan a plan id carries: itself, or with a large filter replaced by its digest.
    fn for_plan_id(&self) -> Scan {
        match &self.filter {
            Some(filter) if filter.to_string().len() > PLAN_ID_FILTER_BYTES => Scan {
                filter: None,
                filter_digest: Some(crate::catalog::metadata::sha256_hex(
                    filter.to_string().as_bytes(),
                )),
                ..self.clone()
            },
            _ => self.clone(),
        }
    }
}

/// What a plan task carries: its scan and its run of the scan's data manifests.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Task {
    #[serde(flatten)]
    scan: Scan,
    /// The run `[start, end)` of the scan's data manifests.
    #[serde(rename = "m")]
    run: (usize, usize),
    /// How many data manifests the scan's filter admitted: a task of another listing is
    /// refused.
    #[serde(rename = "n")]
    manifests: usize,
}

impl TableService {
    /// planTableScan: a `completed` plan with its id, a first run of tasks and the rest as
    /// plan tasks, and storage access as a load of the table would deliver it.
    pub async fn plan_table_scan(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        request: PlanTableScanRequest,
        options: TableRequestOptions,
    ) -> Result<Value> {
        self.planned(ctx, namespace, table, options, |metadata| {
            resolve(&request, metadata)
        })
        .await
    }

    /// fetchPlanningResult: the plan `plan_id` names, planned again from what it carries (the
    /// same snapshot, so the same answer); 404 `NoSuchPlanIdException` for anything else.
    pub async fn fetch_planning_result(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        plan_id: &str,
        options: TableRequestOptions,
    ) -> Result<Value> {
        // Checked once the caller is known to read the table: a caller who may not learns
        // nothing about the id.
        let mut answer = self
            .planned(ctx, namespace, table, options, |metadata| {
                let scan = self.plan_id_scan(ctx, namespace, table, plan_id)?;
                // A plan of another table under this name, or of a snapshot since expired,
                // is no longer a plan.
                let snapshot_kept = match scan.range.range() {
                    Range::At(id) | Range::Appended { to: id, .. } => {
                        metadata.snapshot_by_id(id).is_some()
                    }
                    Range::Empty => true,
                };
                // An id that names its filter by digest cannot be planned again.
                let replannable = scan.filter_digest.is_none();
                (scan.table_uuid == metadata.uuid().to_string() && snapshot_kept && replannable)
                    .then_some(scan)
                    .ok_or_else(|| no_such_plan(plan_id))
            })
            .await?;
        // A fetched `completed` result carries no plan id (`FetchPlanningResult`).
        if let Some(object) = answer.as_object_mut() {
            object.remove("plan-id");
        }
        Ok(answer)
    }

    /// cancelPlanning: nothing is held for a plan, so a valid id is answered 204 and anything
    /// else 404 `NoSuchPlanIdException`.
    pub async fn cancel_planning(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        plan_id: &str,
    ) -> Result<()> {
        self.core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Read)
            .await?;
        self.plan_id_scan(ctx, namespace, table, plan_id)
            .map(|_| ())
    }

    /// Checks `plan_id` names a plan of this table made for this caller (`/credentials?planId=`).
    pub(super) fn check_plan_id(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        plan_id: &str,
    ) -> Result<()> {
        self.plan_id_scan(ctx, namespace, table, plan_id)
            .map(|_| ())
    }

    /// fetchScanTasks: the tasks of one plan task; 404 `NoSuchPlanTaskException` for a token
    /// this catalog did not make for this caller and table, or of a snapshot since expired.
    pub async fn fetch_scan_tasks(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        request: FetchScanTasksRequest,
    ) -> Result<Value> {
        let open = self
            .metadata
            .open_readable(&self.core.lookups, ctx, namespace, table)
            .await?;
        let task: Task = self
            .core
            .page_tokens
            .verify(&scope("task", ctx, namespace, table), &request.plan_task)
            .and_then(|payload| serde_json::from_str(&payload).ok())
            .ok_or_else(no_such_task)?;
        let (row, objects, metadata) = (&open.row, &*open.objects, &*open.metadata);
        if task.scan.table_uuid != metadata.uuid().to_string() {
            return Err(no_such_task());
        }
        let range = task.scan.range.range();
        if let Range::At(id) | Range::Appended { to: id, .. } = range
            && metadata.snapshot_by_id(id).is_none()
        {
            return Err(no_such_task());
        }
        let selection = selection(&task.scan, &range, metadata)?;
        let source = self.source(objects, row);
        let manifests =
            scan::admitted(&selection, scan::data_manifests(&selection, &source).await?);
        let (start, end) = task.run;
        if manifests.len() != task.manifests || start >= end || end > manifests.len() {
            return Err(no_such_task());
        }
        let residual = residual(&selection);
        let (tasks, deletes) = scan::plan_run(
            &selection,
            &source,
            &manifests[start..end],
            residual.as_ref(),
        )
        .await?;
        Ok(scan_tasks(tasks, deletes, Vec::new()))
    }

    fn source<'a>(&'a self, objects: &'a dyn ObjectStore, row: &'a TableRow) -> TableManifests<'a> {
        TableManifests {
            objects,
            directory: row.directory(),
            cache: &self.manifests,
        }
    }

    fn plan_id_scan(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        plan_id: &str,
    ) -> Result<Scan> {
        self.core
            .page_tokens
            .verify(&scope("plan", ctx, namespace, table), plan_id)
            .and_then(|payload| serde_json::from_str(&payload).ok())
            .ok_or_else(|| no_such_plan(plan_id))
    }

    /// Reads the table, resolves the scan with `scan_of`, and answers its plan.
    async fn planned(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        options: TableRequestOptions,
        scan_of: impl FnOnce(&iceberg::spec::TableMetadata) -> Result<Scan>,
    ) -> Result<Value> {
        let open = self
            .metadata
            .open_readable(&self.core.lookups, ctx, namespace, table)
            .await?;
        let (ns, bucket, row, metadata) = (&open.ns, &open.bucket, &open.row, &*open.metadata);
        let scan = scan_of(metadata)?;
        let range = scan.range.range();
        let selection = selection(&scan, &range, metadata)?;
        let source = self.source(&*open.objects, row);
        let manifests =
            scan::admitted(&selection, scan::data_manifests(&selection, &source).await?);
        let runs = scan::runs(
            &manifests,
            budget(&selection, self.core.limits.plan_entries_per_answer),
        );
        let residual = residual(&selection);
        let (tasks, deletes) = match runs.first() {
            Some(&(start, end)) => {
                scan::plan_run(
                    &selection,
                    &source,
                    &manifests[start..end],
                    residual.as_ref(),
                )
                .await?
            }
            None => (Vec::new(), Vec::new()),
        };
        let tokens = &self.core.page_tokens;
        let task_scope = scope("task", ctx, namespace, table);
        let plan_tasks = runs
            .iter()
            .skip(1)
            .map(|&run| {
                let task = Task {
                    scan: scan.clone(),
                    run,
                    manifests: manifests.len(),
                };
                let payload = serde_json::to_string(&task).expect("plain data serializes");
                tokens.sign(&task_scope, &payload)
            })
            .collect();
        let mut answer = scan_tasks(tasks, deletes, plan_tasks);
        let payload = serde_json::to_string(&scan.for_plan_id()).expect("plain data serializes");
        answer["status"] = json!("completed");
        answer["plan-id"] = json!(tokens.sign(&scope("plan", ctx, namespace, table), &payload));
        if let Delivery::Vended = self.delivery(ctx, ns, bucket, table, options) {
            let (_, vended) = self.vend(ctx, ns, bucket, table, row.directory()).await?;
            answer["storage-credentials"] = serde_json::to_value(&vended.credentials)
                .map_err(|e| CatalogError::Internal(e.to_string()))?;
        }
        Ok(answer)
    }
}

/// Manifest entries per answer (`entries`, the deployment's limit): fewer when the tasks carry
/// metrics, as each then weighs more.
fn budget(selection: &Selection<'_>, entries: u64) -> u64 {
    let columns = selection.stats.len() as u64;
    (entries / (1 + columns / 2)).max(entries.min(500))
}

/// The residual each task carries: the filter itself (correct for every file; Floe does not
/// simplify it per file), absent when there is none.
fn residual(selection: &Selection<'_>) -> Option<Value> {
    (!selection.filter.is_true()).then(|| selection.filter.to_term_json(&selection.schema))
}

/// Signing scope of plan ids (`kind` "plan") and plan tasks ("task"): one org, one principal,
/// one table name.
fn scope(kind: &str, ctx: &OrgContext, namespace: &str, table: &str) -> String {
    format!(
        "scan-{kind}\0{}\0{}\0{namespace}\0{table}",
        ctx.org.name, ctx.principal.id
    )
}

fn no_such_plan(plan_id: &str) -> CatalogError {
    let shown: String = plan_id.chars().take(64).collect();
    CatalogError::NoSuchPlanId(format!("No such plan: {}", shown.escape_debug()))
}

fn no_such_task() -> CatalogError {
    CatalogError::NoSuchPlanTask("No such plan task for this table and caller".into())
}

fn scan_tasks(tasks: Vec<Value>, deletes: Vec<Value>, plan_tasks: Vec<String>) -> Value {
    let mut answer = json!({ "file-scan-tasks": tasks });
    if !deletes.is_empty() {
        answer["delete-files"] = json!(deletes);
    }
    if !plan_tasks.is_empty() {
        answer["plan-tasks"] = json!(plan_tasks);
    }
    answer
}

/// The scan a request asks for, as the spec defines it: `snapshot-id` alone is a point in
/// time, `start-snapshot-id` (exclusive) and `end-snapshot-id` the appends between, neither the
/// main branch's current snapshot.
fn resolve(
    request: &PlanTableScanRequest,
    metadata: &iceberg::spec::TableMetadata,
) -> Result<Scan> {
    let bad = |m: String| CatalogError::BadRequest(m);
    let incremental = request.start_snapshot_id.is_some() || request.end_snapshot_id.is_some();
    let range = match (request.snapshot_id, incremental) {
        (Some(_), true) => {
            return Err(bad(
                "Invalid scan: snapshot-id cannot be combined with start-snapshot-id or \
                 end-snapshot-id"
                    .into(),
            ));
        }
        (Some(id), false) => {
            metadata
                .snapshot_by_id(id)
                .ok_or_else(|| bad(format!("Cannot find snapshot with id {id}")))?;
            RangeToken::At(id)
        }
        (None, true) => {
            let Some(to) = request.end_snapshot_id else {
                return Err(bad(
                    "Invalid incremental scan: start-snapshot-id requires end-snapshot-id".into(),
                ));
            };
            for id in request.start_snapshot_id.into_iter().chain([to]) {
                metadata
                    .snapshot_by_id(id)
                    .ok_or_else(|| bad(format!("Cannot find snapshot with id {id}")))?;
            }
            let range = RangeToken::Appended(request.start_snapshot_id, to);
            scan::appended_snapshots(metadata, &range.range())?;
            range
        }
        (None, false) => metadata
            .snapshot_for_ref("main")
            .map_or(RangeToken::Empty, |s| RangeToken::At(s.snapshot_id())),
    };
    let scan = Scan {
        table_uuid: metadata.uuid().to_string(),
        range,
        filter: request.filter.clone().filter(|f| f != &Value::Bool(true)),
        filter_digest: None,
        case_sensitive: request.case_sensitive.unwrap_or(true),
        use_snapshot_schema: request.use_snapshot_schema.unwrap_or(false),
        stats_fields: request.stats_fields.clone().unwrap_or_default(),
    };
    // Checked now, so a bad filter, column or stats field is the plan's 400, not a task's.
    let range = scan.range.range();
    let selection = selection(&scan, &range, metadata)?;
    for name in request.select.iter().flatten() {
        field_id(&selection.schema, name, scan.case_sensitive)?;
    }
    Ok(scan)
}

/// The scan's schema, bound filter and stats columns.
fn selection<'a>(
    scan: &'a Scan,
    range: &'a Range,
    metadata: &'a iceberg::spec::TableMetadata,
) -> Result<Selection<'a>> {
    let schema = match (scan.use_snapshot_schema, range) {
        (true, Range::At(id)) => metadata
            .snapshot_by_id(*id)
            .and_then(|s| s.schema_id())
            .and_then(|id| metadata.schema_by_id(id))
            .unwrap_or_else(|| metadata.current_schema())
            .clone(),
        _ => metadata.current_schema().clone(),
    };
    let filter = Filter::parse(scan.filter.as_ref())?;
    let bound = filter.bind(&schema, scan.case_sensitive)?;
    let stats = scan
        .stats_fields
        .iter()
        .map(|name| field_id(&schema, name, scan.case_sensitive))
        .collect::<Result<Vec<_>>>()?;
    Ok(Selection {
        metadata,
        range,
        schema,
        filter,
        bound,
        stats,
    })
}

fn field_id(schema: &iceberg::spec::Schema, name: &str, case_sensitive: bool) -> Result<i32> {
    let field = if case_sensitive {
        schema.field_by_name(name)
    } else {
        schema.field_by_name_case_insensitive(name)
    };
    field.map(|f| f.id).ok_or_else(|| {
        CatalogError::BadRequest(format!(
            "Cannot find field '{}' in the table's schema",
            name.escape_debug()
        ))
    })
}
