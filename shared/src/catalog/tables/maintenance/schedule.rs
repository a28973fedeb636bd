//! The scheduled maintenance: every table whose last run is a day old (or that never had one),
//! of every org, each table's outcome recorded on it so that a failing table is retried after
//! a backoff and the rest go on.
//!
//! Orgs are found through the event feed's index of orgs (every org that ever changed
//! anything is there), namespaces and tables by their partitions; a run takes at most
//! `max_tables` due tables, the longest-waiting first across runs since each run records
//! its own.

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
use crate::store::rows::{self, keys};

/// How often a table is maintained.
pub const RUN_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);
/// Tables one scheduled run maintains at most.
pub const TABLES_PER_RUN: usize = 100;
/// The longest a failing table waits before its next try.
const MAX_BACKOFF: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A table's maintenance state, beside its rows: when it was last maintained and how.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct MaintenanceStateRow {
    pub table_id: String,
    pub last_run_ms: u64,
    /// Runs in a row that failed.
    #[serde(default)]
    pub failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl MaintenanceStateRow {
    /// When the table is due again.
    fn due_ms(&self) -> u64 {
        let wait = if self.failures == 0 {
            RUN_INTERVAL
        } else {
            // A failing table is retried sooner than a day, then backs off to a week.
            (Duration::from_secs(15 * 60) * 2u32.saturating_pow(self.failures - 1)).min(MAX_BACKOFF)
        };
        self.last_run_ms.saturating_add(wait.as_millis() as u64)
    }
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
    /// Tables not due, or whose `floe.maintenance.enabled` is false.
    pub tables_skipped: u64,
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

impl TableService {
    /// Maintains every table due at `now_ms`, at most `max_tables`. A dry run plans each and
    /// records nothing. Fails only when orgs, namespaces or tables cannot be listed.
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
        let orgs = outbox::orgs_with_events(&*self.core.store, usize::MAX).await?;
        for org in orgs {
            let Some(org) = rows::get::<OrgRow>(&*self.core.store, &keys::org(&org)).await? else {
                continue;
            };
            let namespaces: Vec<NamespaceRow> = rows::collect(
                &*self.core.store,
                &keys::org_partition(&org.row.name),
                keys::NAMESPACE_PREFIX,
                None,
                usize::MAX,
                |ns: &NamespaceRow| ns.deleted_ms.is_none(),
            )
            .await?;
            for ns in namespaces {
                if run.tables.len() >= max_tables {
                    return Ok(run);
                }
                self.maintain_namespace(&org.row, &ns, now_ms, options, max_tables, &mut run)
                    .await?;
            }
        }
        Ok(run)
    }

    async fn maintain_namespace(
        &self,
        org: &OrgRow,
        ns: &NamespaceRow,
        now_ms: u64,
        options: MaintainOptions,
        max_tables: usize,
        run: &mut MaintenanceRun,
    ) -> Result<()> {
        let partition = keys::namespace_partition(&ns.id);
        let states: HashMap<String, MaintenanceStateRow> = rows::collect(
            &*self.core.store,
            &partition,
            keys::MAINTENANCE_STATE_PREFIX,
            None,
            usize::MAX,
            |_: &MaintenanceStateRow| true,
        )
        .await?
        .into_iter()
        .map(|s| (s.table_id.clone(), s))
        .collect();
        let tables: Vec<TableRow> = rows::collect(
            &*self.core.store,
            &partition,
            keys::TABLE_PREFIX,
            None,
            usize::MAX,
            |_: &TableRow| true,
        )
        .await?;
        for table in tables {
            if run.tables.len() >= max_tables {
                return Ok(());
            }
            let state = states.get(&table.id);
            if state.is_some_and(|s| s.due_ms() > now_ms) {
                run.tables_skipped += 1;
                continue;
            }
            let label = format!("{}/{}/{}", org.name, ns.name, table.name);
            let outcome = self.maintain_scheduled(org, ns, &table, options).await;
            let (report, error) = match outcome {
                Ok(None) => {
                    run.tables_skipped += 1;
                    continue;
                }
                Ok(Some(report)) => {
                    let error = report.error.clone();
                    (Some(report), error)
                }
                Err(e) => (None, Some(e.to_string())),
            };
            if let Some(report) = &report {
                run.snapshots_expired += report.snapshots_expired;
                run.files_deleted += report.files_deleted;
                run.bytes_deleted += report.bytes_deleted;
            }
            if !options.dry_run {
                self.record(ns, &table, state, now_ms, error.as_deref())
                    .await;
                match &error {
                    Some(e) => {
                        tracing::warn!(table = %label, error = %e, "table maintenance failed")
                    }
                    None => {
                        if let Some(r) = &report {
                            tracing::info!(audit = "table", table = %label, by = "floe:maintenance", snapshots_expired = r.snapshots_expired, files_deleted = r.files_deleted, bytes_deleted = r.bytes_deleted, "table maintained");
                        }
                    }
                }
            }
            run.tables.push(TableOutcome {
                table: label,
                report,
                error,
            });
        }
        Ok(())
    }

    /// One table of a scheduled run; `None` when its policy turns scheduled maintenance off.
    async fn maintain_scheduled(
        &self,
        org: &OrgRow,
        ns: &NamespaceRow,
        table: &TableRow,
        options: MaintainOptions,
    ) -> Result<Option<MaintenanceReport>> {
        // Re-read with its token: the listing's copy carries none.
        let current = self.core.lookups.table_row(ns, &table.name).await?;
        let properties = self.table_properties(org, ns, &current.row).await?;
        let policy = Policy::resolve(&properties, &ns.properties)
            .map_err(|e| crate::error::CatalogError::BadRequest(e.to_string()))?;
        if !policy.enabled {
            return Ok(None);
        }
        self.maintain(org, ns, current, options).await.map(Some)
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

    /// Records a table's run on it; a failure to record is logged (the table is then due again
    /// at the next run, which is harmless).
    pub(super) async fn record(
        &self,
        ns: &NamespaceRow,
        table: &TableRow,
        previous: Option<&MaintenanceStateRow>,
        now_ms: u64,
        error: Option<&str>,
    ) {
        let state = MaintenanceStateRow {
            table_id: table.id.clone(),
            last_run_ms: now_ms,
            failures: match error {
                Some(_) => previous.map_or(0, |p| p.failures) + 1,
                None => 0,
            },
            last_error: error.map(|e| e.chars().take(500).collect()),
        };
        // Bookkeeping only: the last writer's record is as good as any.
        let write = rows::put(
            keys::maintenance_state(&ns.id, &table.id),
            &state,
            Condition::Always,
        );
        if let Err(e) = self
            .core
            .changes
            .write_unrecorded(Change::as_read(vec![write]))
            .await
        {
            tracing::warn!(error = ?e, namespace = %ns.name, table = %table.name, "maintenance state not recorded");
        }
    }
}
