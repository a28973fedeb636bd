//! The commit path: check requirements, apply updates with the `iceberg` metadata builder,
//! stamp authors, write a new metadata file, then compare-and-swap the table's pointer.

use iceberg::spec::{
    FormatVersion, SortOrder, TableMetadata, TableMetadataBuildResult, UnboundPartitionSpec,
};
use std::sync::Arc;

use iceberg::{ErrorKind, TableRequirement, TableUpdate};
use serde::Deserialize;
use serde_json::Value;

use super::NewTableError;
use super::TableService;
use super::placement;
use crate::authz::{Action, Resource, authorize};
use crate::catalog::metadata::{Codec, metadata_file_location};
use crate::catalog::parity::create::CreateSeed;
use crate::catalog::parity::refs_v1;
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names, parity};
use crate::core::{Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::events::{Draft, Kind};
use crate::model::{NamespaceRow, Principal, PrincipalKind, TableRow};
use crate::store::rows::{self, Versioned, keys};
use crate::store::{Condition, Write};
use crate::types::{CommitTableResponse, TableIdentifier};

/// Snapshot summary key stamped with the committing user's display name.
pub const AUTHOR_NAME_KEY: &str = "arraylake.author-name";
/// Snapshot summary key stamped with the committing principal's email.
pub const AUTHOR_EMAIL_KEY: &str = "arraylake.author-email";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CommitTableRequest {
    #[serde(default)]
    pub identifier: Option<TableIdentifier>,
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

impl TableService {
    /// Commits a CommitTableRequest body. Outcomes: 200 when the pointer moved (or nothing
    /// changed), 409 when a requirement failed or another writer certainly won, 5xx
    /// CommitStateUnknownException when the swap's outcome cannot be known.
    pub async fn commit_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        mut body: Value,
    ) -> Result<CommitTableResponse> {
        // Authorized before the body is looked at: a caller who may not write the table learns
        // nothing about its request. A table that does not exist yet may be a staged create.
        let found = match self
            .core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Write)
            .await
        {
            Err(e) if !matches!(e, CatalogError::NoSuchTable(_)) => return Err(e),
            found => found,
        };
        stamp_authors(&mut body, &ctx.principal);
        let request: CommitTableRequest = serde_json::from_value(body)
            .map_err(|e| CatalogError::BadRequest(format!("Invalid commit request: {e}")))?;
        if let Some(id) = &request.identifier
            && (names::single_level(&id.namespace).ok() != Some(namespace) || id.name != table)
        {
            return Err(CatalogError::BadRequest(
                "The commit's identifier does not match the table in the path".into(),
            ));
        }
        for update in &request.updates {
            if let TableUpdate::SetProperties { updates } = update {
                crate::catalog::maintenance_policy::check(updates.clone())
                    .map_err(|e| CatalogError::BadRequest(e.to_string()))?;
            }
        }
        let is_create = request
            .requirements
            .iter()
            .any(|r| matches!(r, TableRequirement::NotExist));
        match found {
            Ok((ns, row)) => self.commit_existing(ctx, &ns, row, request).await,
            Err(CatalogError::NoSuchTable(_)) if is_create => {
                self.commit_create(ctx, namespace, table, request).await
            }
            Err(e) => Err(e),
        }
    }

    /// Java's `CatalogHandlers.commit`: a commit that loses the swap to another writer is not
    /// refused but rebased. The table is read again, the request's requirements are checked
    /// against that fresh base (a failure there is the 409), the updates are applied again and
    /// the swap retried, a few times with jittered backoff. An unknown outcome is never retried.
    async fn commit_existing(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        read: Versioned<TableRow>,
        request: CommitTableRequest,
    ) -> Result<CommitTableResponse> {
        let table_id = read.row.id.clone();
        let mut current = read;
        let mut delays = self.core.limits.commit_retry.delays();
        loop {
            if let Attempt::Committed(response) =
                self.commit_attempt(ctx, ns, &current, &request).await?
            {
                return Ok(response);
            }
            let Some(delay) = delays.next() else {
                return Err(CommitFailedRace::message(&ns.name, &current.row.name));
            };
            tracing::debug!(org = %ctx.org.name, namespace = %ns.name, table = %current.row.name, ?delay, "commit lost the swap; rebasing");
            tokio::time::sleep(delay).await;
            let fresh = self.core.lookups.table_row(ns, &current.row.name).await?;
            if fresh.row.id != table_id {
                // Dropped and created again under the same name: not the table the client read.
                return Err(CommitFailedRace::message(&ns.name, &current.row.name));
            }
            current = fresh;
        }
    }

    /// One try of a commit against the row `current`.
    async fn commit_attempt(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        current: &Versioned<TableRow>,
        request: &CommitTableRequest,
    ) -> Result<Attempt> {
        let Publish {
            swap,
            event,
            response,
        } = match self.prepare_commit(ctx, ns, current, request).await? {
            Prepared::Unchanged { response } => return Ok(Attempt::Committed(response)),
            // Waits out the run's deletion as a lost swap is waited out: a fresh read later.
            Prepared::Fenced => return Ok(Attempt::LostRace),
            Prepared::Changed(publish) => *publish,
        };
        let change = Change::new().with(Swap, swap);
        match self.core.changes.write(ctx.key(), change, event).await {
            Ok(()) => Ok(Attempt::Committed(response)),
            // The store's writes are idempotent, so a failed condition proves nothing landed.
            // The new file stays: nothing references it, and an orphan is harmless.
            Err(ChangeFailure::Refused(Swap) | ChangeFailure::Contended) => Ok(Attempt::LostRace),
            Err(ChangeFailure::NotWritten(e)) => {
                tracing::warn!(error = %e, org = %ctx.org.name, namespace = %ns.name, table = %current.row.name, "commit not applied");
                Err(not_applied(&e))
            }
            Err(ChangeFailure::Unknown(e)) => {
                tracing::error!(error = %e, org = %ctx.org.name, namespace = %ns.name, table = %current.row.name, metadata = %response.metadata_location, "commit outcome unknown");
                Err(CatalogError::CommitStateUnknown(format!(
                    "Commit state unknown for {}.{}: the catalog could not confirm the metadata pointer swap; reload the table before retrying",
                    ns.name, current.row.name
                )))
            }
        }
    }

    /// Works a commit out against one read of its table: checks the requirements on it,
    /// applies the updates and writes the new metadata file; the pointer swap is the caller's.
    pub(super) async fn prepare_commit(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        current: &Versioned<TableRow>,
        request: &CommitTableRequest,
    ) -> Result<Prepared> {
        let row = &current.row;
        if row.is_fenced(self.core.clock.now_ms()) {
            return Ok(Prepared::Fenced);
        }
        let bucket = self.core.lookups.table_bucket(ctx, ns, row).await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let (file, base) = self
            .metadata
            .load_parsed(&*objects, &crate::catalog::table_ref(ctx, ns, row))
            .await?;
        let base_refs = match base.format_version() {
            FormatVersion::V1 => Some(refs_v1::read(&file.raw).map_err(|e| {
                CatalogError::Internal(format!("Cannot read the table's refs: {e}"))
            })?),
            _ => None,
        };
        // An append that lost its race to a compaction is placed after it, never refused.
        let files = super::plan::manifests::TableManifests {
            objects: &*objects,
            directory: row.directory(),
            cache: &self.manifests,
        };
        let moved = super::rebase::append_over_compactions(
            &files,
            &base,
            &request.requirements,
            &request.updates,
        )
        .await?
        .map(|(requirements, updates)| CommitTableRequest {
            identifier: request.identifier.clone(),
            requirements,
            updates,
        });
        let request = moved.as_ref().unwrap_or(request);
        for requirement in &request.requirements {
            parity::requirements::check(requirement, Some(&base), base_refs.as_ref())
                .map_err(CatalogError::CommitFailed)?;
        }
        let start =
            parity::specs::for_builder(&base)?.unwrap_or_else(|| TableMetadata::clone(&base));
        let built = apply_updates(
            start,
            Some(row.metadata_location.clone()),
            request.updates.iter().cloned(),
        )?;
        if built.changes.is_empty() {
            return Ok(Prepared::Unchanged {
                response: CommitTableResponse::new(
                    &ctx.org.name,
                    row.metadata_location.clone(),
                    (&file.raw, &file.sha256),
                    &self.core.vendor.storage_config(&bucket),
                ),
            });
        }
        placement::check_paths(&built.metadata, row.directory(), Some(&base))?;
        let version = row.metadata_version + 1;
        let location = metadata_file_location(
            built.metadata.location(),
            version,
            Codec::of(&built.metadata)?,
        );
        let next_location = built.metadata.location().to_owned();
        let refs = base_refs.map(|refs| refs_v1::after(refs, &request.updates, &built.metadata));
        let event = Draft::new(
            Kind::TableCommitted,
            &ctx.org.name,
            &ns.name,
            &ns.id,
            &ctx.principal,
        )
        .table(&row.name, &row.id)
        .metadata(Some(&row.metadata_location), Some(&location))
        .commit(&base, &built.metadata, &request.updates);
        let splice_from = crate::catalog::metadata::Base {
            file: &file,
            metadata: &base,
            changes: &built.changes,
        };
        let written = self
            .metadata
            .write(
                &*objects,
                &location,
                built.metadata,
                refs.as_ref(),
                Some(splice_from),
            )
            .await?;
        let next = TableRow {
            location: next_location,
            metadata_location: location.clone(),
            metadata_version: version,
            metadata_sha256: Some(written.file.sha256.clone()),
            directory: Some(row.directory().to_owned()),
            bucket: Some(bucket.nickname.clone()),
            deleting_until_ms: None,
            ..row.clone()
        };
        // Conditioned on the token this commit read: a token is drawn afresh for every write of
        // a table row, so neither a later commit nor a re-created table can satisfy it.
        let swap = rows::put_tokened(
            keys::table(&ns.id, &row.name),
            &next,
            Condition::TokenIs(current.token),
            Some(current.version),
        );
        Ok(Prepared::Changed(Box::new(Publish {
            swap,
            event,
            response: CommitTableResponse::new(
                &ctx.org.name,
                location,
                (&written.file.raw, &written.file.sha256),
                &self.core.vendor.storage_config(&bucket),
            ),
        })))
    }

    /// The commit of a staged create: builds version 0 from the client's updates and inserts the
    /// table only if it still does not exist.
    async fn commit_create(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        request: CommitTableRequest,
    ) -> Result<CommitTableResponse> {
        names::validate_table_name(table)?;
        if request
            .requirements
            .iter()
            .any(|r| !matches!(r, TableRequirement::NotExist))
        {
            return Err(CatalogError::BadRequest(
                "A create commit (assert-create) cannot carry other requirements".into(),
            ));
        }
        let mut location = None;
        let mut format_version = FormatVersion::V2;
        for update in &request.updates {
            match update {
                TableUpdate::SetLocation { location: l } => location = Some(l.clone()),
                TableUpdate::UpgradeFormatVersion { format_version: v } => format_version = *v,
                _ => {}
            }
        }
        let seed = CreateSeed::from_updates(&request.updates).ok_or_else(|| {
            CatalogError::BadRequest("A create commit must add the table's schema".into())
        })?;
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
            let placement = self
                .place_table(ctx, &ns.row, table, location.as_deref(), None)
                .await?;
            let base = seeded_metadata(&seed, &placement.location, format_version)?;
            let metadata = apply_updates(base, None, request.updates.iter().cloned())?.metadata;
            let refs = (metadata.format_version() == FormatVersion::V1)
                .then(|| refs_v1::after(Default::default(), &request.updates, &metadata));
            placement::check_paths(&metadata, &placement.directory, None)?;
            match self
                .commit_new_table(ctx, &ns, table, placement, metadata, refs.as_ref())
                .await
            {
                Ok(created) => {
                    return Ok(CommitTableResponse::new(
                        &ctx.org.name,
                        created.row.metadata_location,
                        (&created.metadata.file.raw, &created.metadata.file.sha256),
                        &self.core.vendor.storage_config(&created.bucket),
                    ));
                }
                Err(NewTableError::NamespaceChanged) => continue,
                Err(NewTableError::Failed(e)) => return Err(e),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }
}

pub(super) struct CommitFailedRace;

impl CommitFailedRace {
    pub(super) fn message(namespace: &str, table: &str) -> CatalogError {
        CatalogError::CommitFailed(format!(
            "Table has been updated by another process: {namespace}.{table}"
        ))
    }
}

/// Overwrites the author keys of every added snapshot with the principal's identity; users get
/// name and email, api clients their email only. Other summary keys pass through.
pub(super) fn stamp_authors(body: &mut Value, principal: &Principal) {
    let Some(updates) = body.get_mut("updates").and_then(Value::as_array_mut) else {
        return;
    };
    for update in updates {
        if update.get("action").and_then(Value::as_str) != Some("add-snapshot") {
            continue;
        }
        if let Some(summary) = update
            .get_mut("snapshot")
            .and_then(|s| s.get_mut("summary"))
            .and_then(Value::as_object_mut)
        {
            stamp_summary(summary, principal);
        }
    }
}

/// Overwrites the author keys of one summary (a snapshot's, a view version's) with the
/// principal's identity.
pub(crate) fn stamp_summary(summary: &mut serde_json::Map<String, Value>, principal: &Principal) {
    summary.remove(AUTHOR_NAME_KEY);
    summary.remove(AUTHOR_EMAIL_KEY);
    if principal.kind == PrincipalKind::User {
        summary.insert(
            AUTHOR_NAME_KEY.into(),
            Value::String(principal.name.clone()),
        );
    }
    if let Some(email) = &principal.email {
        summary.insert(AUTHOR_EMAIL_KEY.into(), Value::String(email.clone()));
    }
}

/// Applies a commit's updates with the crate's builder, in order. `previous` is the location of
/// the file `base` was read from (it joins the metadata log), `None` for a new table.
pub(super) fn apply_updates(
    base: TableMetadata,
    previous: Option<String>,
    updates: impl Iterator<Item = TableUpdate>,
) -> Result<TableMetadataBuildResult> {
    // The schema that an `add-spec` binds to: the last one added before it, else the current.
    let mut schema = base.current_schema().clone();
    let mut format_version = base.format_version();
    let mut builder = base.into_builder(previous);
    for update in updates {
        match &update {
            TableUpdate::AddSchema { schema: added } => {
                parity::format_versions::check_schema(added, format_version)
                    .map_err(CatalogError::BadRequest)?;
                schema = Arc::new(added.clone());
            }
            TableUpdate::UpgradeFormatVersion { format_version: v } => {
                format_version = format_version.max(*v);
            }
            _ => {}
        }
        let update = parity::specs::update_for_builder(update, &schema)?;
        builder = update.apply(builder).map_err(update_failed)?;
    }
    builder.build().map_err(update_failed)
}

/// The one write of a commit: the table row's pointer, swapped if its token is still the one
/// read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Swap;

/// A commit worked out against one read of its table, its new file (if any) written.
pub(super) enum Prepared {
    /// The updates change nothing: the table stays as read.
    Unchanged { response: CommitTableResponse },
    /// The new file, published by its swap.
    Changed(Box<Publish>),
    /// A maintenance run is deleting files of the table: nothing was written, try later.
    Fenced,
}

/// The swap that publishes a commit's new file if the row still holds the token read, the
/// event that describes it and the answer once it landed.
pub(super) struct Publish {
    pub swap: Write,
    pub event: Draft,
    pub response: CommitTableResponse,
}

/// A commit the store declined: nothing landed. Throttling and transient refusals ask for the
/// request again (503); a request the store found invalid is the catalog's fault (500).
pub(super) fn not_applied(e: &crate::store::StoreError) -> CatalogError {
    let message = "The catalog store did not apply the commit; retry the request".to_owned();
    match e {
        crate::store::StoreError::Invalid(_) => CatalogError::Internal(message),
        _ => CatalogError::Busy(message),
    }
}

/// The outcome of one commit attempt that did not fail outright.
enum Attempt {
    Committed(CommitTableResponse),
    /// Another writer moved the pointer first; nothing of this attempt was applied.
    LostRace,
}

/// Java's starting point for a create transaction: the first schema, spec and sort order the
/// client adds, with their ids as the client numbered them. A new table's ids are numbered from 1
/// in Java's order; when that would change the client's ids (a client that numbered its own schema),
/// the seed falls back to an unpartitioned, unsorted start so that the client's ids survive.
fn seeded_metadata(
    seed: &CreateSeed,
    location: &str,
    format_version: FormatVersion,
) -> Result<TableMetadata> {
    let build = |spec: UnboundPartitionSpec, order: SortOrder| {
        parity::fresh_ids::new_table_metadata(parity::fresh_ids::NewTable {
            schema: seed.schema.clone(),
            spec,
            sort_order: order,
            location: location.to_owned(),
            format_version,
            properties: Default::default(),
        })
        .map_err(update_failed)
    };
    let spec = parity::specs::spec_for_builder(seed.spec.clone(), &seed.schema)?;
    let seeded = build(spec, seed.sort_order.clone())?;
    if seeded.current_schema().as_struct() == seed.schema.as_struct() {
        return Ok(seeded);
    }
    build(
        UnboundPartitionSpec::builder().build(),
        SortOrder::unsorted_order(),
    )
}

/// Invalid updates are 400, except stale sequence numbers and row ids, which mean another
/// writer got there first: 409 so that engines rebase and retry.
fn update_failed(e: iceberg::Error) -> CatalogError {
    let message = e.message();
    let stale = message.contains("older than last sequence number")
        || message.contains("first-row-id is behind table next-row-id");
    if stale || e.kind() == ErrorKind::CatalogCommitConflicts {
        CatalogError::CommitFailed(format!(
            "Commit conflicts with the table's current state: {message}"
        ))
    } else {
        CatalogError::BadRequest(format!("Invalid table update: {message}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snapshot_update(summary: Value) -> Value {
        json!({"updates": [{"action": "add-snapshot", "snapshot": {"summary": summary}}, {"action": "set-properties", "updates": {}}]})
    }

    #[test]
    fn users_get_name_and_email_overwriting_client_values() {
        let user = Principal {
            id: "u1".into(),
            kind: PrincipalKind::User,
            name: "Ada".into(),
            email: Some("ada@example.com".into()),
        };
        let mut body = snapshot_update(
            json!({"operation": "append", AUTHOR_NAME_KEY: "spoof", "custom": "kept"}),
        );
        stamp_authors(&mut body, &user);
        let summary = &body["updates"][0]["snapshot"]["summary"];
        assert_eq!(summary[AUTHOR_NAME_KEY], "Ada");
        assert_eq!(summary[AUTHOR_EMAIL_KEY], "ada@example.com");
        assert_eq!(summary["custom"], "kept");
    }

    #[test]
    fn api_clients_get_email_only() {
        let client = Principal {
            id: "c1".into(),
            kind: PrincipalKind::ApiClient,
            name: "etl".into(),
            email: Some("etl@example.com".into()),
        };
        let mut body = snapshot_update(json!({"operation": "append", AUTHOR_NAME_KEY: "spoof"}));
        stamp_authors(&mut body, &client);
        let summary = &body["updates"][0]["snapshot"]["summary"];
        assert!(summary.get(AUTHOR_NAME_KEY).is_none());
        assert_eq!(summary[AUTHOR_EMAIL_KEY], "etl@example.com");
    }
}
