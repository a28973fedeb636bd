//! The deletion of a run's judged files, in fenced batches.
//!
//! Each batch:
//! 1. Fences the table: its row takes `deleting_until_ms`, conditioned on the write token the
//!    run last verified. The commit path refuses to publish while the fence stands, so no
//!    commit lands during the batch.
//! 2. When the fence's condition fails, a commit (or another writer) landed since the run
//!    last looked: the run reads the table's new metadata, spares every judged file it
//!    reaches, and fences again on the new token.
//! 3. Deletes the batch, then lifts the fence (the last batch's lift carries the run's
//!    `io.floe.table.maintained` event).
//!
//! A fence the run cannot lift (it crashed, say) lapses by itself after [`FENCE_MS`]; a batch
//! is only started with more than [`FENCE_MARGIN_MS`] of its fence left.

use std::time::Duration;

use super::classify::DeleteReason;
use super::reachable::{Reader, canonical};
use crate::catalog::OrgContext;
use crate::catalog::metadata::MetadataCache;
use crate::core::{Change, ChangeFailure, Core};
use crate::events::{Draft, Kind, MaintenanceCounts};
use crate::model::{NamespaceRow, TableRow};
use crate::objects::{ObjectMeta, ObjectStore};
use crate::store::rows::{self, Versioned, keys};
use crate::store::{Condition, Token, Write};

/// How long one batch's fence stands at most.
pub const FENCE_MS: u64 = 60_000;
/// The fence time a batch must have left to start.
pub const FENCE_MARGIN_MS: u64 = 30_000;
/// Files deleted under one fence: commits wait at most one batch's deletion.
pub const FILES_PER_FENCE: usize = 200;
/// How long a run waits before looking again at a table another run has fenced.
pub const FENCED_WAIT: Duration = Duration::from_millis(50);

/// What the deletion did.
pub struct Outcome {
    pub deleted: Vec<(ObjectMeta, DeleteReason)>,
    /// Judged files a commit came to reference before their batch: kept.
    pub spared: Vec<ObjectMeta>,
    pub error: Option<String>,
}

/// The one write of a fence, or of its lift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fence;

#[allow(clippy::too_many_arguments)]
pub(super) async fn delete_fenced(
    core: &Core,
    cache: &MetadataCache,
    ctx: &OrgContext,
    ns: &NamespaceRow,
    mut verified: Versioned<TableRow>,
    objects: &dyn ObjectStore,
    reader: &mut Reader<'_>,
    mut doomed: Vec<(ObjectMeta, DeleteReason)>,
    snapshots_expired: u64,
) -> Outcome {
    let key = keys::table(&ns.id, &verified.row.name);
    let mut outcome = Outcome {
        deleted: Vec::new(),
        spared: Vec::new(),
        error: None,
    };
    while !doomed.is_empty() {
        let until = core.clock.now_ms() + FENCE_MS;
        let fenced_row = TableRow {
            deleting_until_ms: Some(until),
            ..verified.row.clone()
        };
        let fence = rows::put_tokened(
            key.clone(),
            &fenced_row,
            Condition::TokenIs(verified.token),
            Some(verified.version),
        );
        let fence_token = token_of(&fence);
        match core
            .changes
            .write_unrecorded(Change::new().with(Fence, fence))
            .await
        {
            Ok(()) => {}
            Err(ChangeFailure::Refused(Fence) | ChangeFailure::Contended) => {
                match reverify(core, cache, ctx, ns, &verified, reader, &mut doomed).await {
                    Ok((fresh, spared)) => {
                        outcome.spared.extend(spared);
                        verified = fresh;
                        continue;
                    }
                    Err(e) => {
                        outcome.error = Some(e);
                        break;
                    }
                }
            }
            Err(ChangeFailure::NotWritten(e) | ChangeFailure::Unknown(e)) => {
                outcome.error = Some(format!("Cannot fence the table's commits: {e}"));
                break;
            }
        }
        let fenced = Versioned {
            row: fenced_row,
            version: verified.version + 1,
            token: fence_token,
        };
        let batch: Vec<_> = doomed.drain(..doomed.len().min(FILES_PER_FENCE)).collect();
        if core.clock.now_ms() + FENCE_MARGIN_MS < until {
            let locations: Vec<String> = batch.iter().map(|(o, _)| o.location.clone()).collect();
            match objects.delete(&locations).await {
                Ok(()) => outcome.deleted.extend(batch),
                Err(e) => {
                    outcome.error = Some(format!("Deleting files failed ({})", e.code()));
                    doomed.clear();
                }
            }
        } else {
            // The fence was taken too slowly to be trusted for a whole batch: take it again.
            doomed.splice(0..0, batch);
        }
        let last = doomed.is_empty();
        match lift(
            core,
            ctx,
            ns,
            &key,
            &fenced,
            last,
            &outcome,
            snapshots_expired,
        )
        .await
        {
            Ok(lifted) => verified = lifted,
            Err(()) if last => {}
            Err(()) => match reverify(core, cache, ctx, ns, &fenced, reader, &mut doomed).await {
                Ok((fresh, spared)) => {
                    outcome.spared.extend(spared);
                    verified = fresh;
                }
                Err(e) => {
                    outcome.error = Some(e);
                    break;
                }
            },
        }
    }
    outcome
}

/// Lifts a batch's fence; the last one carries the run's event, which is written even when
/// the row moved under the fence (a drop, say): the deletions happened.
#[allow(clippy::too_many_arguments)]
async fn lift(
    core: &Core,
    ctx: &OrgContext,
    ns: &NamespaceRow,
    key: &crate::store::Key,
    fenced: &Versioned<TableRow>,
    last: bool,
    outcome: &Outcome,
    snapshots_expired: u64,
) -> Result<Versioned<TableRow>, ()> {
    let lifted_row = TableRow {
        deleting_until_ms: None,
        ..fenced.row.clone()
    };
    let lift = rows::put_tokened(
        key.clone(),
        &lifted_row,
        Condition::TokenIs(fenced.token),
        Some(fenced.version),
    );
    let lifted = Versioned {
        row: lifted_row,
        version: fenced.version + 1,
        token: token_of(&lift),
    };
    let event = (last && !outcome.deleted.is_empty()).then(|| {
        let mut draft = Draft::new(
            Kind::TableMaintained,
            &ctx.org.name,
            &ns.name,
            &ns.id,
            &ctx.principal,
        )
        .table(&fenced.row.name, &fenced.row.id);
        draft.data.maintenance = Some(MaintenanceCounts {
            snapshots_expired,
            files_deleted: outcome.deleted.len() as u64,
            bytes_deleted: outcome.deleted.iter().map(|(o, _)| o.size).sum(),
        });
        draft
    });
    let change = Change::new().with(Fence, lift);
    let written = match &event {
        Some(event) => core.changes.write(None, change, event.clone()).await,
        None => core.changes.write_unrecorded(change).await,
    };
    match written {
        Ok(()) => Ok(lifted),
        Err(_) => {
            // The row moved under the fence (a drop, say): the deletions happened all the same,
            // so their event goes with the table's maintenance record instead.
            if let Some(event) = event {
                let record = rows::put(
                    keys::maintenance_state(&ns.id, &fenced.row.id),
                    &super::MaintenanceStateRow {
                        table_id: fenced.row.id.clone(),
                        last_run_ms: core.clock.now_ms(),
                        org: ctx.org.name.clone(),
                        namespace: ns.name.clone(),
                        namespace_id: ns.id.clone(),
                        table: fenced.row.name.clone(),
                        // Out of the due index: the sweep places it again if the table is
                        // still there under some name.
                        next_due_ms: None,
                        ..Default::default()
                    },
                    Condition::Always,
                );
                if let Err(e) = core
                    .changes
                    .write(None, Change::as_read(vec![record]), event)
                    .await
                {
                    tracing::error!(error = ?e, org = %ctx.org.name, namespace = %ns.name, table = %fenced.row.name, "maintenance event not written");
                }
            }
            Err(())
        }
    }
}

/// After a write of the table since `verified`: the row now, with every doomed file its
/// metadata reaches moved out of `doomed` (returned, spared). Fails when the table is gone,
/// another run holds it, or what it reaches cannot be read.
async fn reverify(
    core: &Core,
    cache: &MetadataCache,
    ctx: &OrgContext,
    ns: &NamespaceRow,
    verified: &Versioned<TableRow>,
    reader: &mut Reader<'_>,
    doomed: &mut Vec<(ObjectMeta, DeleteReason)>,
) -> Result<(Versioned<TableRow>, Vec<ObjectMeta>), String> {
    let key = keys::table(&ns.id, &verified.row.name);
    let fresh = rows::get::<TableRow>(&*core.store, &key)
        .await
        .map_err(|e| format!("Cannot re-read the table: {e}"))?
        .filter(|fresh| fresh.row.id == verified.row.id)
        .ok_or_else(|| "The table was dropped or renamed during the run".to_owned())?;
    if fresh.row.is_fenced(core.clock.now_ms()) {
        return Err("Another maintenance run is deleting files of this table".into());
    }
    let mut spared = Vec::new();
    if fresh.row.metadata_location != verified.row.metadata_location {
        let (_, metadata) = cache
            .load_parsed(
                reader.objects(),
                &crate::catalog::table_ref(ctx, ns, &fresh.row),
            )
            .await
            .map_err(|e| format!("Cannot read the table's new metadata: {e}"))?;
        let reached = reader
            .reach(&metadata, &fresh.row.metadata_location, |_| true)
            .await
            .map_err(|e| format!("Stopped deleting: {e}"))?;
        doomed.retain(|(object, _)| {
            let referenced = reached.contains_key(&canonical(&object.location));
            if referenced {
                spared.push(object.clone());
            }
            !referenced
        });
    }
    Ok((fresh, spared))
}

/// The write token a put draws.
fn token_of(write: &Write) -> Option<Token> {
    match write {
        Write::Put { item, .. } => item.token,
        _ => None,
    }
}
