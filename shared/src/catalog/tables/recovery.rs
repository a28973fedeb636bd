//! Dropped tables stay recoverable for the recovery period (seven days): a drop moves the
//! table's row to a dropped-table row keyed by the table's uuid, in the same atomic write that
//! frees its name. Its directory stays claimed, so nothing else can take it, and no file is
//! touched until the purge (`purge.rs`) takes it at the end of the period, or sooner when an
//! admin asks.
//!
//! Table grants are bound to names (the reference: they survive a table being dropped and
//! recreated under the same name): a drop leaves them where they are, and a dropped table holds
//! none of its own. A restore puts the row back under its name or a new one, where that name's
//! grants cover it, unless the name is taken (409) or the purge has fenced it (then nothing
//! recoverable has that uuid: 404). Dropped-table rows written while drops moved the name's
//! grants onto them carry those grants in `grants`: every write that touches such a row puts
//! them back on the name they came from ([`AccessService::return_kept_grants`]), and the
//! purge's run does it for the rest.

use serde::{Deserialize, Serialize};

use super::{TableService, no_view_named, table_already_exists, view_holds_name};
use crate::authz::{Action, Resource, authorize};
use crate::catalog::access::AccessService;
use crate::catalog::namespaces::purge::{IMMEDIATE_INDEX_MS, RECOVERY_PERIOD};
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names};
use crate::core::{AsRead, Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::events::{Draft, Kind, rfc3339};
use crate::model::{DroppedTableRow, NamespaceRow};
use crate::store::rows::{self, Versioned, keys};
use crate::store::{Condition, Key, Write};

/// A namespace property: `true` keeps the files of the namespace's dropped tables when their
/// recovery period ends (the purge then removes only the catalog's rows, claims and grants),
/// unless the drop asked for a purge (`purgeRequested=true`).
pub const RETAIN_DROPPED_DATA_PROPERTY: &str = "floe.dropped-tables.retain-data";

/// A dropped table as the management API lists it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct DroppedTable {
    pub name: String,
    pub table_uuid: String,
    /// RFC 3339, UTC.
    pub dropped_at: String,
    /// When the purge takes it (RFC 3339, UTC): the end of its recovery period, the time an
    /// admin asked for it, or the next attempt after a failed one.
    pub purge_at: String,
    /// `deleted` (recoverable) or `purging` (fenced by the purge: no longer recoverable).
    pub state: &'static str,
    /// Whether the purge deletes its files (see [`RETAIN_DROPPED_DATA_PROPERTY`]).
    pub purges_files: bool,
}

/// The optional body of a restore.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// Restore under this name instead of the one it was dropped under.
    pub name: Option<String>,
}

/// What a restore answers.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct RestoredTable {
    pub name: String,
    pub table_uuid: String,
}

/// Where the purge index orders a dropped table (the purge takes it once `now - recovery`
/// reaches it).
pub(crate) fn index_ms(row: &DroppedTableRow) -> u64 {
    row.purge_index_ms.unwrap_or(row.dropped_ms)
}

/// The purge index entry of a dropped table.
pub(crate) fn index_key(row: &DroppedTableRow) -> Key {
    keys::dropped_table_due(index_ms(row), &row.table.namespace_id, &row.table.id)
}

/// When the purge takes a dropped table.
pub(crate) fn due_ms(row: &DroppedTableRow) -> u64 {
    match (row.purge_index_ms, row.purge_requested_ms) {
        (Some(IMMEDIATE_INDEX_MS), Some(requested)) => requested,
        _ => index_ms(row).saturating_add(RECOVERY_PERIOD.as_millis() as u64),
    }
}

fn listed(row: &DroppedTableRow) -> DroppedTable {
    DroppedTable {
        name: row.table.name.clone(),
        table_uuid: row.table.id.clone(),
        dropped_at: rfc3339(row.dropped_ms),
        purge_at: rfc3339(due_ms(row)),
        state: if row.purging.is_some() {
            "purging"
        } else {
            "deleted"
        },
        purges_files: row.purge_files,
    }
}

/// A uuid from a path, or 404: anything else names nothing that was dropped.
fn table_uuid<'a>(namespace: &str, uuid: &'a str) -> Result<&'a str> {
    uuid::Uuid::parse_str(uuid)
        .map(|_| uuid)
        .map_err(|_| nothing_recoverable(namespace, uuid))
}

fn nothing_recoverable(namespace: &str, uuid: &str) -> CatalogError {
    CatalogError::NoSuchTable(format!(
        "No dropped table of namespace {namespace} with uuid {uuid} can be restored"
    ))
}

impl TableService {
    /// dropTable: the table leaves the namespace at once (its name is free) and stays
    /// recoverable until the purge. `purge_requested` makes the purge delete its files even
    /// where the namespace keeps dropped tables' data.
    pub async fn drop_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        purge_requested: bool,
    ) -> Result<()> {
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            // Write on the table suffices: a table grant covers dropping its table.
            authorize(
                &ctx.access,
                Resource::Table {
                    namespace: &ns.row,
                    table,
                },
                Action::Write,
            )?;
            let row = self.core.lookups.table_row(&ns.row, table).await?;
            let retains = ns
                .row
                .properties
                .get(RETAIN_DROPPED_DATA_PROPERTY)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
            let dropped = DroppedTableRow {
                org: ctx.org.name.clone(),
                namespace: ns.row.name.clone(),
                table: row.row.clone(),
                dropped_ms: self.core.clock.now_ms(),
                grants: Vec::new(),
                purge_files: purge_requested || !retains,
                purge_requested_ms: None,
                purging: None,
                purge_attempts: 0,
                purge_last_error: None,
                purge_index_ms: None,
            };
            let [count, removal] = super::leaving_namespace(ctx, &ns, table, row.token);
            let writes = vec![
                count,
                removal,
                rows::put_indexed(
                    keys::dropped_table(&ns.row.id, &row.row.id),
                    &dropped,
                    Condition::NotExists,
                    Some(index_key(&dropped)),
                ),
            ];
            let event = Draft::new(
                Kind::TableDropped,
                &ctx.org.name,
                &ns.row.name,
                &ns.row.id,
                &ctx.principal,
            )
            .table(table, &row.row.id)
            .metadata(Some(&row.row.metadata_location), None);
            match self
                .core
                .changes
                .write(ctx.key(), Change::as_read(writes), event)
                .await
            {
                Ok(()) => {
                    tracing::info!(audit = "table", org = %ctx.org.name, namespace, table, uuid = %row.row.id, by = %ctx.principal.id, purge_files = dropped.purge_files, "table dropped; recoverable until its purge");
                    return Ok(());
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The table"))
    }

    /// The namespace's dropped tables, newest first (write on the namespace).
    pub async fn dropped_tables(
        &self,
        ctx: &OrgContext,
        namespace: &str,
    ) -> Result<Vec<DroppedTable>> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
        let mut found = self.dropped_rows(&ns.row).await?;
        found.sort_by(|a, b| (b.dropped_ms, &b.table.id).cmp(&(a.dropped_ms, &a.table.id)));
        Ok(found.iter().map(listed).collect())
    }

    /// Every dropped-table row of a namespace.
    pub(crate) async fn dropped_rows(&self, ns: &NamespaceRow) -> Result<Vec<DroppedTableRow>> {
        Ok(rows::collect(
            &*self.core.store,
            &keys::namespace_partition(&ns.id),
            keys::DROPPED_TABLE_PREFIX,
            None,
            usize::MAX,
            |_: &DroppedTableRow| true,
        )
        .await?)
    }

    /// Brings a dropped table back under its name or `request.name` (write on the namespace),
    /// where that name's table grants cover it. 409 when that name is a table's or a view's;
    /// 404 when nothing recoverable has the uuid (never dropped here, purged, or being purged).
    pub async fn restore_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        uuid: &str,
        request: RestoreRequest,
    ) -> Result<RestoredTable> {
        let uuid = table_uuid(namespace, uuid)?;
        if let Some(name) = &request.name {
            names::validate_table_name(name)?;
        }
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
            let dropped = self.recoverable(&ns.row, namespace, uuid).await?;
            let name = request
                .name
                .clone()
                .unwrap_or_else(|| dropped.row.table.name.clone());
            if self
                .core
                .store
                .get(&keys::table(&ns.row.id, &name))
                .await?
                .is_some()
            {
                return Err(table_already_exists(namespace, &name));
            }
            if self
                .core
                .store
                .get(&keys::view(&ns.row.id, &name))
                .await?
                .is_some()
            {
                return Err(view_holds_name(namespace, &name));
            }
            let mut table = dropped.row.table.clone();
            table.name = name.clone();
            // The directory stays the table's, whatever its name.
            table.directory = Some(dropped.row.table.directory().to_owned());
            let mut ns_row = ns.row.clone();
            ns_row.table_count = ns_row.table_count.saturating_add(1);
            let mut writes = vec![
                rows::put(
                    keys::namespace(&ctx.org.name, namespace),
                    &ns_row,
                    Condition::VersionIs(ns.version),
                ),
                rows::put_tokened(
                    keys::table(&ns.row.id, &name),
                    &table,
                    Condition::NotExists,
                    None,
                ),
                no_view_named(&ns.row.id, &name),
                Write::Delete {
                    key: keys::dropped_table(&ns.row.id, uuid),
                    condition: Condition::VersionIs(dropped.version),
                },
            ];
            writes.extend(
                AccessService::return_kept_grants(&*self.core.store, &ns.row, &dropped.row).await?,
            );
            let event = Draft::new(
                Kind::TableRestored,
                &ctx.org.name,
                &ns.row.name,
                &ns.row.id,
                &ctx.principal,
            )
            .table(&name, &table.id)
            .metadata(None, Some(&table.metadata_location));
            match self
                .core
                .changes
                .write(ctx.key(), Change::as_read(writes), event)
                .await
            {
                Ok(()) => {
                    self.core.lookups.org_access_changed(&ctx.org.name);
                    tracing::info!(audit = "table", org = %ctx.org.name, namespace, table = %name, uuid, by = %ctx.principal.id, "dropped table restored");
                    return Ok(RestoredTable {
                        name,
                        table_uuid: table.id,
                    });
                }
                // The name was taken, or the purge fenced it, since it was read: read again.
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The table"))
    }

    /// Makes a dropped table due for the purge now and fences it at once, so that it can no
    /// longer be restored (manage on the namespace); the purge deletes it on its next run.
    pub async fn purge_dropped_now(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        uuid: &str,
    ) -> Result<()> {
        let uuid = table_uuid(namespace, uuid)?;
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Manage)?;
            let key = keys::dropped_table(&ns.row.id, uuid);
            let Some(dropped) = rows::get::<DroppedTableRow>(&*self.core.store, &key).await? else {
                return Err(nothing_recoverable(namespace, uuid));
            };
            if dropped.row.purging.is_some() {
                // Already on its way.
                self.core.purge_wanted.notify_one();
                return Ok(());
            }
            let now = self.core.clock.now_ms();
            let mut row = dropped.row.clone();
            row.purge_requested_ms = Some(now);
            row.purge_index_ms = Some(IMMEDIATE_INDEX_MS);
            row.purging = Some(now);
            let write = rows::put_indexed(
                key,
                &row,
                Condition::VersionIs(dropped.version),
                Some(index_key(&row)),
            );
            match self
                .core
                .changes
                .write_unrecorded(Change::as_read(vec![write]))
                .await
            {
                Ok(()) => {
                    self.core.purge_wanted.notify_one();
                    tracing::info!(audit = "table", org = %ctx.org.name, namespace, table = %row.table.name, uuid, by = %ctx.principal.id, "dropped table purge requested");
                    return Ok(());
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The table"))
    }

    /// The dropped-table row of `uuid` in `ns`, if it can still be restored.
    async fn recoverable(
        &self,
        ns: &NamespaceRow,
        namespace: &str,
        uuid: &str,
    ) -> Result<Versioned<DroppedTableRow>> {
        match rows::get::<DroppedTableRow>(&*self.core.store, &keys::dropped_table(&ns.id, uuid))
            .await?
        {
            Some(dropped) if dropped.row.purging.is_none() => Ok(dropped),
            _ => Err(nothing_recoverable(namespace, uuid)),
        }
    }
}
