//! The scheduled maintenance, found through an index rather than a walk: each table's
//! maintenance state row carries when it is next due and sits in the store's sparse index under
//! that time, so a run reads only the tables due (`MAINT_DUE`, oldest first).
//!
//! Three steps, each safe to run anywhere and concurrently:
//! - the **sweep** keeps the index complete: a bounded slice of namespaces per run (a cursor
//!   row remembers where it stopped), giving every table without a state row one that is due
//!   now, following renames and retiring the rows of tables that are gone;
//! - the **claim** takes due tables off the index for one worker each: a conditional write
//!   moves a table's due time [`CLAIM_GRACE`] ahead, so no other scheduler claims it, and a
//!   claim whose worker never comes lapses by itself;
//! - the **worker** takes a lease on the table's state row (a conditional write), maintains
//!   the table, and records the run with its next due time, releasing the lease in the same
//!   write. A worker that dies mid-table leaves the lease to lapse after [`LEASE`]; every
//!   commit of a run is atomic, so nothing is half-committed.
//!
//! `floe serve` and the single scheduled function run the three in one process; the state of
//! a claim travels as a [`DueTable`], so a queue can carry it to workers elsewhere.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::policy::Policy;
use super::{MaintainOptions, MaintenanceReport, TableService};
use crate::core::Change;
use crate::error::Result;
use crate::events::outbox;
use crate::model::{NamespaceRow, OrgRow, TableRow};
use crate::store::Condition;
use crate::store::rows::{self, Versioned, keys};

/// How often a table is maintained.
pub const RUN_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);
/// Tables one scheduled run maintains at most.
pub const TABLES_PER_RUN: usize = 100;
/// Tables the sweep looks at per run at most (it stops at the end of a namespace past it).
pub const SWEEP_TABLES_PER_RUN: usize = 10_000;
/// How long a worker holds a table: past the longest run a function can make (15 minutes).
pub const LEASE: Duration = Duration::from_secs(20 * 60);
/// How far a claim moves a table's due time: its worker has this long to take the lease
/// before another claim may take the table.
pub const CLAIM_GRACE: Duration = Duration::from_secs(25 * 60);
/// The longest a failing table waits before its next try.
const MAX_BACKOFF: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A table's maintenance state, beside its rows: when it was last maintained and how, when
/// it is due, and who holds it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct MaintenanceStateRow {
    pub table_id: String,
    /// `0`: never maintained.
    pub last_run_ms: u64,
    /// Runs in a row that failed.
    #[serde(default)]
    pub failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Where the table was when the sweep or its last run saw it (a rename is followed).
    #[serde(default)]
    pub org: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub namespace_id: String,
    #[serde(default)]
    pub table: String,
    /// When it is next due; `None` for a table that is gone (the row leaves the index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_due_ms: Option<u64>,
    /// Until when a worker holds it (`0`: nobody).
    #[serde(default)]
    pub lease_until_ms: u64,
    /// Scheduled runs completed.
    #[serde(default)]
    pub runs: u64,
    /// What the last run's compaction rewrote, when it rewrote anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction: Option<super::CompactionReport>,
}

impl MaintenanceStateRow {
    /// When the table is due again after a run at `last_run_ms` with `failures` in a row.
    fn due_after(last_run_ms: u64, failures: u32) -> u64 {
        let wait = if failures == 0 {
            RUN_INTERVAL
        } else {
            // A failing table is retried sooner than a day, then backs off to a week.
            (Duration::from_secs(15 * 60) * 2u32.saturating_pow(failures - 1)).min(MAX_BACKOFF)
        };
        last_run_ms.saturating_add(wait.as_millis() as u64)
    }

    /// The write of this row, in the due index while it has a due time.
    fn write(&self, condition: Condition) -> crate::store::Write {
        let key = keys::maintenance_state(&self.namespace_id, &self.table_id);
        let index = self
            .next_due_ms
            .map(|due| keys::maintenance_due(due, &self.namespace_id, &self.table_id));
        rows::put_indexed(key, self, condition, index)
    }
}

/// A claimed table, as a scheduler hands it to a worker (in process, or on a queue).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct DueTable {
    pub org: String,
    pub namespace: String,
    pub namespace_id: String,
    pub table: String,
    pub table_id: String,
    /// The due time the claim wrote: a worker acts only while the row still carries it, so a
    /// message delivered twice, or late, does nothing.
    pub claim_ms: u64,
}

/// One table's part in a scheduled run.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct TableOutcome {
    /// `org/namespace/table`.
    pub table: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<MaintenanceReport>,
    /// Why the table's run failed (recorded on it; retried after a backoff).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What one scheduled run did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct MaintenanceRun {
    pub dry_run: bool,
    pub tables: Vec<TableOutcome>,
    pub snapshots_expired: u64,
    pub files_deleted: u64,
    pub bytes_deleted: u64,
    /// Tables claimed but not maintained: whose `floe.maintenance.enabled` is false, or held
    /// by another worker, or gone.
    pub tables_skipped: u64,
    /// Tables the sweep put in the due index this run.
    pub tables_indexed: u64,
}

impl MaintenanceRun {
    /// The tables that failed.
    pub fn failures(&self) -> Vec<String> {
        self.tables
            .iter()
            .filter(|t| t.error.is_some())
            .map(|t| t.table.clone())
            .collect()
    }
}

/// What a worker did with one claimed table.
#[derive(Debug)]
pub enum WorkerOutcome {
    Maintained(Box<TableOutcome>),
    /// Its policy turns scheduled maintenance off (it is due again in a day).
    Disabled,
    /// The claim is stale, another worker holds the table, or the table is gone.
    Skipped,
}

/// Where the sweep stopped: the last namespace it finished.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SweepCursor {
    org: String,
    namespace: String,
}

impl TableService {
    /// One scheduled run in this process: the sweep, then at most `max_tables` due tables
    /// claimed and maintained one after another. A dry run claims nothing and records
    /// nothing: it plans the tables due. Fails only when the store cannot be read.
    pub async fn maintain_due(
        &self,
        now_ms: u64,
        options: MaintainOptions,
        max_tables: usize,
    ) -> Result<MaintenanceRun> {
        let mut run = MaintenanceRun {
            dry_run: options.dry_run,
            ..MaintenanceRun::default()
        };
        if options.dry_run {
            for due in self.would_be_due(now_ms, max_tables).await? {
                let outcome = self.maintain_claimed(&due, now_ms, options).await?;
                tally(&mut run, outcome);
            }
            return Ok(run);
        }
        run.tables_indexed = self.sweep(now_ms, SWEEP_TABLES_PER_RUN).await?;
        for due in self.claim_due(now_ms, max_tables).await? {
            let outcome = self.maintain_claimed(&due, now_ms, options).await?;
            tally(&mut run, outcome);
        }
        Ok(run)
    }

    /// Keeps the due index complete for a slice of namespaces (from where the last sweep
    /// stopped, at least `budget` tables): a table without a state row gets one due now, a
    /// renamed table's row follows its name, the row of a table that is gone leaves the
    /// index. The number of rows written.
    pub async fn sweep(&self, now_ms: u64, budget: usize) -> Result<u64> {
        let store = &*self.core.store;
        let cursor = rows::get::<SweepCursor>(store, &keys::maintenance_sweep()).await?;
        let (cursor_version, from) = match cursor {
            Some(c) => (Some(c.version), c.row),
            None => (None, SweepCursor::default()),
        };
        // Every live namespace, taken from just after the cursor, round to the start, until
        // the budget is spent.
        let positions = self.live_namespaces().await?;
        let start = positions
            .iter()
            .position(|(org, ns)| (org, &ns.name) > (&from.org, &from.namespace))
            .unwrap_or(0);
        let mut looked = 0usize;
        let mut written = 0u64;
        let mut next = from.clone();
        for i in 0..positions.len() {
            let (org, ns) = &positions[(start + i) % positions.len()];
            let (seen, wrote, _) = self.sweep_namespace(org, ns, now_ms, true).await?;
            looked += seen;
            written += wrote;
            next = SweepCursor {
                org: org.clone(),
                namespace: ns.name.clone(),
            };
            if looked >= budget {
                break;
            }
        }
        let condition = cursor_version.map_or(Condition::NotExists, Condition::VersionIs);
        // Bookkeeping: a concurrent sweep's cursor is as good as this one's.
        let _ = self
            .core
            .changes
            .write_unrecorded(Change::as_read(vec![rows::put(
                keys::maintenance_sweep(),
                &next,
                condition,
            )]))
            .await;
        Ok(written)
    }

    /// Every live namespace of every org, in (org, name) order: namespaces are few beside
    /// tables, and the sweep's cursor is a position in this order.
    async fn live_namespaces(&self) -> Result<Vec<(String, NamespaceRow)>> {
        let store = &*self.core.store;
        let mut positions: Vec<(String, NamespaceRow)> = Vec::new();
        for org in outbox::orgs_with_events(store, usize::MAX).await? {
            let namespaces: Vec<NamespaceRow> = rows::collect(
                store,
                &keys::org_partition(&org),
                keys::NAMESPACE_PREFIX,
                None,
                usize::MAX,
                |ns: &NamespaceRow| ns.deleted_ms.is_none(),
            )
            .await?;
            positions.extend(namespaces.into_iter().map(|ns| (org.clone(), ns)));
        }
        positions.sort_by(|a, b| (&a.0, &a.1.name).cmp(&(&b.0, &b.1.name)));
        Ok(positions)
    }

    /// Sweeps one namespace; with `write` false only says which tables the sweep would make
    /// due now (what a dry run plans). The tables looked at, the rows written, and the rows
    /// (written or not) that are due at `now_ms`.
    async fn sweep_namespace(
        &self,
        org: &str,
        ns: &NamespaceRow,
        now_ms: u64,
        write: bool,
    ) -> Result<(usize, u64, Vec<MaintenanceStateRow>)> {
        let store = &*self.core.store;
        let partition = keys::namespace_partition(&ns.id);
        let mut states: HashMap<String, Versioned<MaintenanceStateRow>> = HashMap::new();
        let mut after = None;
        loop {
            let batch = store
                .query(
                    &partition,
                    keys::MAINTENANCE_STATE_PREFIX,
                    after.as_deref(),
                    256,
                )
                .await?;
            after = batch.last().map(|item| item.key.sk.clone());
            for item in &batch {
                let state: Versioned<MaintenanceStateRow> = rows::versioned(item)?;
                states.insert(state.row.table_id.clone(), state);
            }
            if batch.len() < 256 {
                break;
            }
        }
        let tables: Vec<TableRow> = rows::collect(
            store,
            &partition,
            keys::TABLE_PREFIX,
            None,
            usize::MAX,
            |_: &TableRow| true,
        )
        .await?;
        let mut writes = Vec::new();
        for table in &tables {
            let state = states.remove(&table.id);
            let placed = |s: &MaintenanceStateRow| {
                s.org == org
                    && s.namespace == ns.name
                    && s.namespace_id == ns.id
                    && s.table == table.name
                    && s.next_due_ms.is_some()
            };
            match state {
                Some(s) if placed(&s.row) => {}
                Some(s) => {
                    let mut row = s.row.clone();
                    row.org = org.to_owned();
                    row.namespace = ns.name.clone();
                    row.namespace_id = ns.id.clone();
                    row.table = table.name.clone();
                    row.next_due_ms = Some(if row.last_run_ms == 0 {
                        now_ms
                    } else {
                        MaintenanceStateRow::due_after(row.last_run_ms, row.failures)
                    });
                    writes.push((row, Condition::VersionIs(s.version)));
                }
                None => {
                    let row = MaintenanceStateRow {
                        table_id: table.id.clone(),
                        last_run_ms: 0,
                        failures: 0,
                        last_error: None,
                        org: org.to_owned(),
                        namespace: ns.name.clone(),
                        namespace_id: ns.id.clone(),
                        table: table.name.clone(),
                        next_due_ms: Some(now_ms),
                        lease_until_ms: 0,
                        runs: 0,
                        last_compaction: None,
                    };
                    writes.push((row, Condition::NotExists));
                }
            }
        }
        // Rows of tables no longer in the namespace (dropped, or renamed away) leave the index.
        for (_, s) in states {
            if s.row.next_due_ms.is_some() {
                let mut row = s.row.clone();
                row.next_due_ms = None;
                writes.push((row, Condition::VersionIs(s.version)));
            }
        }
        let due: Vec<MaintenanceStateRow> = writes
            .iter()
            .map(|(row, _)| row.clone())
            .filter(|row| row.next_due_ms.is_some_and(|d| d <= now_ms))
            .collect();
        if !write {
            return Ok((tables.len(), 0, due));
        }
        let written = writes.len() as u64;
        for (row, condition) in writes {
            // One row at a time: a row a worker moved meanwhile is the worker's to keep.
            let _ = self
                .core
                .changes
                .write_unrecorded(Change::as_read(vec![row.write(condition)]))
                .await;
        }
        Ok((tables.len(), written, due))
    }

    /// The tables due at `now_ms`, oldest first, at most `limit`, read without claiming.
    pub async fn due_tables(&self, now_ms: u64, limit: usize) -> Result<Vec<DueTable>> {
        Ok(self
            .due_rows(now_ms, limit)
            .await?
            .into_iter()
            .map(|(state, _)| due_table(&state, state.next_due_ms.unwrap_or(now_ms)))
            .collect())
    }

    /// What a run at `now_ms` would take, without writing: the tables the index has due, then
    /// those the sweep would index due now (never maintained, or renamed), at most `limit`.
    async fn would_be_due(&self, now_ms: u64, limit: usize) -> Result<Vec<DueTable>> {
        let mut due = self.due_tables(now_ms, limit).await?;
        let mut seen: std::collections::HashSet<String> =
            due.iter().map(|d| d.table_id.clone()).collect();
        'namespaces: for (org, ns) in self.live_namespaces().await? {
            let (_, _, rows) = self.sweep_namespace(&org, &ns, now_ms, false).await?;
            for row in rows {
                if due.len() >= limit {
                    break 'namespaces;
                }
                if seen.insert(row.table_id.clone()) {
                    due.push(due_table(&row, now_ms));
                }
            }
        }
        Ok(due)
    }

    /// Claims at most `limit` tables due at `now_ms` for one worker each (see the module).
    pub async fn claim_due(&self, now_ms: u64, limit: usize) -> Result<Vec<DueTable>> {
        let claim_ms = now_ms + CLAIM_GRACE.as_millis() as u64;
        let mut claimed = Vec::new();
        for (mut state, version) in self.due_rows(now_ms, limit).await? {
            state.next_due_ms = Some(claim_ms);
            let write = state.write(Condition::VersionIs(version));
            if self
                .core
                .changes
                .write_unrecorded(Change::as_read(vec![write]))
                .await
                .is_ok()
            {
                claimed.push(due_table(&state, claim_ms));
            }
        }
        Ok(claimed)
    }

    /// State rows due at `now_ms` (re-read: the index may lag), with their versions.
    async fn due_rows(&self, now_ms: u64, limit: usize) -> Result<Vec<(MaintenanceStateRow, u64)>> {
        let store = &*self.core.store;
        let upto = format!("{}\u{7f}", keys::deleted_sort_key(now_ms));
        let mut due = Vec::new();
        for key in store
            .query_index(keys::MAINTENANCE_DUE, &upto, limit)
            .await?
        {
            let Some(state) = rows::get::<MaintenanceStateRow>(store, &key).await? else {
                continue;
            };
            if state.row.next_due_ms.is_some_and(|d| d <= now_ms) {
                due.push((state.row, state.version));
            }
        }
        Ok(due)
    }

    /// A worker's part: maintains one claimed table under a lease (see the module). A dry run
    /// neither takes the lease nor records anything.
    pub async fn maintain_claimed(
        &self,
        due: &DueTable,
        now_ms: u64,
        options: MaintainOptions,
    ) -> Result<WorkerOutcome> {
        let store = &*self.core.store;
        let key = keys::maintenance_state(&due.namespace_id, &due.table_id);
        let state = rows::get::<MaintenanceStateRow>(store, &key).await?;
        // A dry run plans what it is given (a table the sweep has not indexed has no row yet).
        let state = match (state, options.dry_run) {
            (Some(state), _) => state,
            (None, true) => Versioned {
                row: MaintenanceStateRow::default(),
                version: 0,
                token: None,
            },
            (None, false) => return Ok(WorkerOutcome::Skipped),
        };
        if !options.dry_run
            && (state.row.next_due_ms != Some(due.claim_ms) || state.row.lease_until_ms > now_ms)
        {
            return Ok(WorkerOutcome::Skipped);
        }
        let mut version = state.version;
        if !options.dry_run {
            let mut leased = state.row.clone();
            leased.lease_until_ms = now_ms + LEASE.as_millis() as u64;
            let write = leased.write(Condition::VersionIs(version));
            if self
                .core
                .changes
                .write_unrecorded(Change::as_read(vec![write]))
                .await
                .is_err()
            {
                return Ok(WorkerOutcome::Skipped);
            }
            version += 1;
        }
        let place = self.locate(due).await?;
        let Some((org, ns, table)) = place else {
            // Gone (dropped, or renamed: the sweep places the row again under its new name).
            if !options.dry_run {
                let mut gone = state.row.clone();
                gone.next_due_ms = None;
                gone.lease_until_ms = 0;
                let _ = self
                    .core
                    .changes
                    .write_unrecorded(Change::as_read(vec![
                        gone.write(Condition::VersionIs(version)),
                    ]))
                    .await;
            }
            return Ok(WorkerOutcome::Skipped);
        };
        let label = format!("{}/{}/{}", org.name, ns.name, table.row.name);
        let outcome = self.maintain_scheduled(&org, &ns, table, options).await;
        let (report, error) = match outcome {
            Ok(None) => {
                if !options.dry_run {
                    self.record_run(&state.row, version, now_ms, None, None, false)
                        .await;
                }
                return Ok(WorkerOutcome::Disabled);
            }
            Ok(Some(report)) => {
                let error = report.error.clone();
                (Some(report), error)
            }
            Err(e) => (None, Some(e.to_string())),
        };
        if !options.dry_run {
            let compaction = report
                .as_ref()
                .and_then(|r| r.compaction.clone())
                .filter(|c| c.files_rewritten > 0);
            self.record_run(
                &state.row,
                version,
                now_ms,
                error.as_deref(),
                compaction,
                true,
            )
            .await;
            match &error {
                Some(e) => tracing::warn!(table = %label, error = %e, "table maintenance failed"),
                None => {
                    if let Some(r) = &report {
                        tracing::info!(audit = "table", table = %label, by = "floe:maintenance", snapshots_expired = r.snapshots_expired, files_deleted = r.files_deleted, bytes_deleted = r.bytes_deleted, "table maintained");
                    }
                }
            }
        }
        Ok(WorkerOutcome::Maintained(Box::new(TableOutcome {
            table: label,
            report,
            error,
        })))
    }

    /// The org, namespace and table a claim names, while they are still the ones it named.
    async fn locate(
        &self,
        due: &DueTable,
    ) -> Result<Option<(OrgRow, NamespaceRow, Versioned<TableRow>)>> {
        let store = &*self.core.store;
        let Some(org) = rows::get::<OrgRow>(store, &keys::org(&due.org)).await? else {
            return Ok(None);
        };
        let Some(ns) =
            rows::get::<NamespaceRow>(store, &keys::namespace(&due.org, &due.namespace)).await?
        else {
            return Ok(None);
        };
        if ns.row.id != due.namespace_id || ns.row.deleted_ms.is_some() {
            return Ok(None);
        }
        let Some(table) =
            rows::get::<TableRow>(store, &keys::table(&ns.row.id, &due.table)).await?
        else {
            return Ok(None);
        };
        if table.row.id != due.table_id {
            return Ok(None);
        }
        Ok(Some((org.row, ns.row, table)))
    }

    /// One table of a scheduled run; `None` when its policy turns scheduled maintenance off.
    async fn maintain_scheduled(
        &self,
        org: &OrgRow,
        ns: &NamespaceRow,
        table: Versioned<TableRow>,
        options: MaintainOptions,
    ) -> Result<Option<MaintenanceReport>> {
        let properties = self.table_properties(org, ns, &table.row).await?;
        let policy = Policy::resolve(&properties, &ns.properties)
            .map_err(|e| crate::error::CatalogError::BadRequest(e.to_string()))?;
        if !policy.enabled {
            return Ok(None);
        }
        self.maintain(org, ns, table, options).await.map(Some)
    }

    async fn table_properties(
        &self,
        org: &OrgRow,
        ns: &NamespaceRow,
        table: &TableRow,
    ) -> Result<HashMap<String, String>> {
        let metadata = self
            .current_metadata(&super::maintainer_context(org), ns, table)
            .await?;
        Ok(metadata.properties().clone())
    }

    /// Records a worker's run and releases its lease, in one write conditioned on the lease's
    /// version: a worker whose lease lapsed and was taken records nothing.
    async fn record_run(
        &self,
        claimed: &MaintenanceStateRow,
        version: u64,
        now_ms: u64,
        error: Option<&str>,
        compaction: Option<super::CompactionReport>,
        ran: bool,
    ) {
        let failures = match error {
            Some(_) => claimed.failures + 1,
            None => 0,
        };
        let row = MaintenanceStateRow {
            last_run_ms: if ran { now_ms } else { claimed.last_run_ms },
            failures,
            last_error: error.map(|e| e.chars().take(500).collect()),
            next_due_ms: Some(MaintenanceStateRow::due_after(now_ms, failures)),
            lease_until_ms: 0,
            runs: claimed.runs + u64::from(ran),
            last_compaction: compaction.or_else(|| claimed.last_compaction.clone()),
            ..claimed.clone()
        };
        if let Err(e) = self
            .core
            .changes
            .write_unrecorded(Change::as_read(vec![
                row.write(Condition::VersionIs(version)),
            ]))
            .await
        {
            tracing::warn!(error = ?e, namespace = %claimed.namespace, table = %claimed.table, "maintenance run not recorded (its lease lapsed?)");
        }
    }

    /// Records a run made on request (the management API's `.../maintain`) on the table, as
    /// the schedule's own: it is due again a day later. Bookkeeping: a failure is logged.
    pub(super) async fn record(
        &self,
        org: &str,
        ns: &NamespaceRow,
        table: &TableRow,
        now_ms: u64,
        report: &MaintenanceReport,
    ) {
        let key = keys::maintenance_state(&ns.id, &table.id);
        let previous = rows::get::<MaintenanceStateRow>(&*self.core.store, &key)
            .await
            .ok()
            .flatten();
        let error = report.error.as_deref();
        let failures = match error {
            Some(_) => previous.as_ref().map_or(0, |p| p.row.failures) + 1,
            None => 0,
        };
        let compaction = report.compaction.clone().filter(|c| c.files_rewritten > 0);
        let row = MaintenanceStateRow {
            table_id: table.id.clone(),
            last_run_ms: now_ms,
            failures,
            last_error: error.map(|e| e.chars().take(500).collect()),
            org: org.to_owned(),
            namespace: ns.name.clone(),
            namespace_id: ns.id.clone(),
            table: table.name.clone(),
            next_due_ms: Some(MaintenanceStateRow::due_after(now_ms, failures)),
            // A scheduled worker's lease stands: this run does not take it over.
            lease_until_ms: previous.as_ref().map_or(0, |p| p.row.lease_until_ms),
            runs: previous.as_ref().map_or(0, |p| p.row.runs),
            last_compaction: compaction.or_else(|| {
                previous
                    .as_ref()
                    .and_then(|p| p.row.last_compaction.clone())
            }),
        };
        let condition = previous
            .as_ref()
            .map_or(Condition::NotExists, |p| Condition::VersionIs(p.version));
        if let Err(e) = self
            .core
            .changes
            .write_unrecorded(Change::as_read(vec![row.write(condition)]))
            .await
        {
            tracing::warn!(error = ?e, namespace = %ns.name, table = %table.name, "maintenance state not recorded");
        }
    }
}

fn due_table(state: &MaintenanceStateRow, claim_ms: u64) -> DueTable {
    DueTable {
        org: state.org.clone(),
        namespace: state.namespace.clone(),
        namespace_id: state.namespace_id.clone(),
        table: state.table.clone(),
        table_id: state.table_id.clone(),
        claim_ms,
    }
}

fn tally(run: &mut MaintenanceRun, outcome: WorkerOutcome) {
    match outcome {
        WorkerOutcome::Maintained(outcome) => {
            if let Some(report) = &outcome.report {
                run.snapshots_expired += report.snapshots_expired;
                run.files_deleted += report.files_deleted;
                run.bytes_deleted += report.bytes_deleted;
            }
            run.tables.push(*outcome);
        }
        WorkerOutcome::Disabled | WorkerOutcome::Skipped => run.tables_skipped += 1,
    }
}
