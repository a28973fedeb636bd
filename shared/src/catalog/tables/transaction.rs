//! Multi-table transactions (`POST /v1/{prefix}/transactions/commit`): every table of the org
//! named in the request moves, or none does.
//!
//! Each table's commit is worked out as a single commit is (requirements checked against its
//! current metadata, updates applied, a new metadata file written); then one atomic store write
//! swaps every changed table's pointer on the token read, holds every unchanged table to the token
//! read (its requirements held there), and records one change event per changed table, numbered
//! consecutively. A swap lost to another writer rebases the whole transaction: every table is read
//! again and its requirements checked against that fresh state, as single commits do. An unknown
//! outcome is a 5xx and is never retried.

use serde::Deserialize;
use serde_json::Value;

use super::TableService;
use super::commit::{CommitFailedRace, CommitTableRequest, Prepared, not_applied, stamp_authors};
use crate::authz::Action;
use crate::catalog::{OrgContext, names};
use crate::core::{Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::model::{NamespaceRow, TableRow};
use crate::store::rows::{Versioned, keys};
use crate::store::{Condition, MAX_WRITES, Write};
use crate::types::TableIdentifier;

/// The most tables one transaction may commit to. On DynamoDB it is one TransactWriteItems of
/// at most [`MAX_WRITES`] items: per table its row, its event counter and its waiting event,
/// plus the request's idempotency key. The sequencer numbers the change's events in one write
/// too (per event: the waiting item's delete, the numbered event and one check; plus the org's
/// counter), which fits the same bound.
pub const MAX_TRANSACTION_TABLES: usize = (MAX_WRITES - 2) / 3;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitTransactionRequest {
    #[serde(rename = "table-changes")]
    table_changes: Vec<Value>,
}

/// One table of a transaction, as last read.
struct Member {
    ns: NamespaceRow,
    current: Versioned<TableRow>,
    request: CommitTableRequest,
}

/// Which table a failed condition belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MemberPart;

impl TableService {
    /// Commits a CommitTransactionRequest body: 204 when every table moved (or needed no
    /// change), 409 when any requirement fails or the tables stay contended (nothing landed),
    /// 5xx CommitStateUnknownException when the write's outcome cannot be known.
    pub async fn commit_transaction(&self, ctx: &OrgContext, body: Value) -> Result<()> {
        let request: CommitTransactionRequest = serde_json::from_value(body)
            .map_err(|e| CatalogError::BadRequest(format!("Invalid transaction request: {e}")))?;
        if request.table_changes.is_empty() {
            return Err(CatalogError::BadRequest(
                "A transaction must change at least one table".into(),
            ));
        }
        if request.table_changes.len() > MAX_TRANSACTION_TABLES {
            return Err(CatalogError::BadRequest(format!(
                "A transaction may change at most {MAX_TRANSACTION_TABLES} tables (one atomic store write of at most {MAX_WRITES} items); this one names {}",
                request.table_changes.len()
            )));
        }
        let mut members: Vec<Member> = Vec::with_capacity(request.table_changes.len());
        for mut change in request.table_changes {
            let identifier = identifier_of(&change)?;
            let table = identifier.name.as_str();
            let namespace = names::single_level(&identifier.namespace).map_err(|_| {
                CatalogError::NoSuchTable(format!(
                    "Table does not exist: {}.{table}",
                    identifier.namespace.join(".")
                ))
            })?;
            // Authorized before the change is looked at, as a single commit is.
            let (ns, current) = self
                .core
                .lookups
                .authorized_table(ctx, namespace, table, Action::Write)
                .await?;
            if members
                .iter()
                .any(|m| m.ns.id == ns.id && m.current.row.name == table)
            {
                return Err(CatalogError::BadRequest(format!(
                    "Table {namespace}.{table} appears twice in the transaction: send its updates as one change"
                )));
            }
            stamp_authors(&mut change, &ctx.principal);
            let request: CommitTableRequest = serde_json::from_value(change).map_err(|e| {
                CatalogError::BadRequest(format!(
                    "Invalid table change for {namespace}.{table}: {e}"
                ))
            })?;
            if request
                .requirements
                .iter()
                .any(|r| matches!(r, iceberg::TableRequirement::NotExist))
            {
                return Err(CatalogError::BadRequest(format!(
                    "Table {namespace}.{table} already exists: a transaction commits to existing tables only"
                )));
            }
            members.push(Member {
                ns,
                current,
                request,
            });
        }
        let mut delays = self.core.limits.commit_retry.delays();
        loop {
            if self.transaction_attempt(ctx, &members).await? {
                return Ok(());
            }
            let Some(delay) = delays.next() else {
                let first = &members[0];
                return Err(CommitFailedRace::message(
                    &first.ns.name,
                    &first.current.row.name,
                ));
            };
            tracing::debug!(org = %ctx.org.name, tables = members.len(), ?delay, "transaction lost a swap; rebasing");
            tokio::time::sleep(delay).await;
            for member in &mut members {
                let fresh = self
                    .core
                    .lookups
                    .table_row(&member.ns, &member.current.row.name)
                    .await?;
                if fresh.row.id != member.current.row.id {
                    // Dropped and created again under the same name: not the table the client read.
                    return Err(CommitFailedRace::message(
                        &member.ns.name,
                        &member.current.row.name,
                    ));
                }
                member.current = fresh;
            }
        }
    }

    /// One try of the transaction against the rows as last read: true when it landed, false
    /// when another writer moved one of its tables first (nothing of it was applied).
    async fn transaction_attempt(&self, ctx: &OrgContext, members: &[Member]) -> Result<bool> {
        let prepared = futures::future::try_join_all(
            members
                .iter()
                .map(|m| self.prepare_commit(ctx, &m.ns, &m.current, &m.request)),
        )
        .await?;
        let mut change = Change::new();
        let mut events = Vec::new();
        for (member, prepared) in members.iter().zip(prepared) {
            match prepared {
                // Its requirements held on the row read: the write holds it there.
                Prepared::Unchanged { .. } => change.push(
                    MemberPart,
                    Write::Check {
                        key: keys::table(&member.ns.id, &member.current.row.name),
                        condition: Condition::TokenIs(member.current.token),
                    },
                ),
                Prepared::Changed(publish) => {
                    change.push(MemberPart, publish.swap);
                    events.push(publish.event);
                }
                Prepared::Fenced => {
                    return Err(CatalogError::CommitFailed(format!(
                        "Table {}.{} is being maintained; retry the transaction",
                        member.ns.name, member.current.row.name
                    )));
                }
            }
        }
        match self
            .core
            .changes
            .write_described(ctx.key(), change, events)
            .await
        {
            Ok(()) => {
                tracing::info!(org = %ctx.org.name, tables = members.len(), by = %ctx.principal.id, "transaction committed");
                Ok(true)
            }
            Err(ChangeFailure::Refused(MemberPart) | ChangeFailure::Contended) => Ok(false),
            Err(ChangeFailure::NotWritten(e)) => {
                tracing::warn!(error = %e, org = %ctx.org.name, "transaction not applied");
                Err(not_applied(&e))
            }
            Err(ChangeFailure::Unknown(e)) => {
                tracing::error!(error = %e, org = %ctx.org.name, tables = members.len(), "transaction outcome unknown");
                Err(CatalogError::CommitStateUnknown(
                    "Commit state unknown for the transaction: the catalog could not confirm its write; reload the tables before retrying".into(),
                ))
            }
        }
    }

    /// What a replay of a transaction needs: write on every table it names, as now.
    pub async fn authorize_transaction_replay(&self, ctx: &OrgContext, body: &[u8]) -> Result<()> {
        let Ok(request) = serde_json::from_slice::<CommitTransactionRequest>(body) else {
            return Ok(());
        };
        for change in &request.table_changes {
            let Ok(identifier) = identifier_of(change) else {
                continue;
            };
            let Ok(namespace) = names::single_level(&identifier.namespace) else {
                continue;
            };
            self.core
                .idempotency
                .authorize_replay(
                    ctx,
                    crate::core::idempotency::Replayed::Table {
                        namespace,
                        table: &identifier.name,
                    },
                )
                .await?;
        }
        Ok(())
    }
}

fn identifier_of(change: &Value) -> Result<TableIdentifier> {
    let identifier = change.get("identifier").ok_or_else(|| {
        CatalogError::BadRequest("Every table change of a transaction needs its identifier".into())
    })?;
    serde_json::from_value(identifier.clone())
        .map_err(|e| CatalogError::BadRequest(format!("Invalid table identifier: {e}")))
}
