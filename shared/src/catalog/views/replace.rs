//! Replacing a view (a commit of view updates with requirements) and registering one from an
//! existing metadata file.

use iceberg::ViewUpdate;
use iceberg::spec::{ViewMetadata, ViewMetadataBuilder};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::{ViewService, answer, files, parse_view_metadata, stamp_version};
use crate::authz::{Action, Resource, authorize};
use crate::catalog::metadata::{Codec, metadata_file_location};
use crate::catalog::tables::placement::{check_location, explicit_directory};
use crate::catalog::tables::{read_registered_file, registrable_file};
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names, storage};
use crate::core::{Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::events::{Draft, Kind};
use crate::model::{NamespaceRow, ViewRow};
use crate::objects::join;
use crate::store::Condition;
use crate::store::rows::{self, DirectoryClaimRow, Versioned, keys};
use crate::types::{LoadViewResult, TableIdentifier};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitViewRequest {
    #[serde(default)]
    identifier: Option<TableIdentifier>,
    #[serde(default)]
    requirements: Vec<ViewRequirement>,
    updates: Vec<ViewUpdate>,
}

/// The spec's view requirements: there is one.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum ViewRequirement {
    AssertViewUuid { uuid: Uuid },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RegisterViewRequest {
    name: String,
    metadata_location: String,
}

/// The one write of a replace: the view row's pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Swap;

impl ViewService {
    /// Commits view updates: 200 with the new metadata, 409 when the requirement fails or the
    /// view stays contended, 5xx CommitStateUnknownException when the swap's outcome is unknown.
    /// A swap lost to another writer is rebased as a table commit is.
    pub async fn replace_view(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        view: &str,
        mut body: Value,
    ) -> Result<LoadViewResult> {
        let (ns, mut current) = self
            .authorized_view(ctx, namespace, view, Action::Write)
            .await?;
        if let Some(updates) = body.get_mut("updates").and_then(Value::as_array_mut) {
            for update in updates {
                if update.get("action").and_then(Value::as_str) == Some("add-view-version")
                    && let Some(version) = update.get_mut("view-version")
                {
                    stamp_version(version, &ctx.principal);
                }
            }
        }
        let request: CommitViewRequest = serde_json::from_value(body)
            .map_err(|e| CatalogError::BadRequest(format!("Invalid view commit: {e}")))?;
        if let Some(id) = &request.identifier
            && (names::single_level(&id.namespace).ok() != Some(namespace) || id.name != view)
        {
            return Err(CatalogError::BadRequest(
                "The commit's identifier does not match the view in the path".into(),
            ));
        }
        let view_id = current.row.id.clone();
        let mut delays = self.core.limits.commit_retry.delays();
        loop {
            if let Some(answer) = self.replace_attempt(ctx, &ns, &current, &request).await? {
                return Ok(answer);
            }
            let Some(delay) = delays.next() else {
                return Err(CatalogError::CommitFailed(format!(
                    "View has been updated by another process: {namespace}.{view}"
                )));
            };
            tokio::time::sleep(delay).await;
            let fresh = self.view_row(&ns, view).await?;
            if fresh.row.id != view_id {
                return Err(CatalogError::CommitFailed(format!(
                    "View has been updated by another process: {namespace}.{view}"
                )));
            }
            current = fresh;
        }
    }

    /// One try against the row `current`: `None` when another writer moved it first.
    async fn replace_attempt(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        current: &Versioned<ViewRow>,
        request: &CommitViewRequest,
    ) -> Result<Option<LoadViewResult>> {
        let row = &current.row;
        let file = self.current_file(ctx, row).await?;
        let base = file.parse()?;
        for requirement in &request.requirements {
            match requirement {
                ViewRequirement::AssertViewUuid { uuid } if *uuid != base.uuid() => {
                    return Err(CatalogError::CommitFailed(format!(
                        "Requirement failed: view UUID does not match: expected {} != {uuid}",
                        base.uuid()
                    )));
                }
                ViewRequirement::AssertViewUuid { .. } => {}
            }
        }
        let built = apply(base.clone(), &request.updates)?;
        if built.1 == 0 {
            return Ok(Some(answer(row, file.raw)));
        }
        let metadata = built.0;
        if metadata.location() != base.location() {
            check_location(metadata.location(), &row.directory)?;
        }
        let version = row.metadata_version + 1;
        let location = metadata_file_location(metadata.location(), version, Codec::None);
        let bucket = self
            .core
            .lookups
            .usable_bucket(&ctx.org.name, &row.bucket)
            .await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let written = files::write(&*objects, &location, &metadata).await?;
        let next = ViewRow {
            location: metadata.location().to_owned(),
            metadata_location: location.clone(),
            metadata_version: version,
            metadata_sha256: written.sha256.clone(),
            ..row.clone()
        };
        let swap = rows::put_tokened(
            keys::view(&ns.id, &row.name),
            &next,
            Condition::TokenIs(current.token),
            Some(current.version),
        );
        let event = Draft::new(
            Kind::ViewReplaced,
            &ctx.org.name,
            &ns.name,
            &ns.id,
            &ctx.principal,
        )
        .view(&row.name, &row.id)
        .metadata(Some(&row.metadata_location), Some(&location));
        match self
            .core
            .changes
            .write(ctx.key(), Change::new().with(Swap, swap), event)
            .await
        {
            Ok(()) => Ok(Some(answer(&next, written.raw))),
            Err(ChangeFailure::Refused(Swap) | ChangeFailure::Contended) => Ok(None),
            Err(ChangeFailure::NotWritten(e)) => Err(e.into()),
            Err(ChangeFailure::Unknown(e)) => {
                tracing::error!(error = %e, org = %ctx.org.name, namespace = %ns.name, view = %row.name, "view commit outcome unknown");
                Err(CatalogError::CommitStateUnknown(format!(
                    "Commit state unknown for {}.{}: the catalog could not confirm the metadata pointer swap; reload the view before retrying",
                    ns.name, row.name
                )))
            }
        }
    }

    /// Registers a view whose metadata file lies in a fresh directory of the namespace's
    /// storage: the first directory below the namespace's root, claimed as a created view's is.
    pub async fn register_view(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        body: Value,
    ) -> Result<LoadViewResult> {
        let seen = self.core.lookups.recent_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&seen), Action::Write)?;
        let request: RegisterViewRequest = serde_json::from_value(body)
            .map_err(|e| CatalogError::BadRequest(format!("Invalid view registration: {e}")))?;
        names::validate_table_name(&request.name)?;
        let file = registrable_file(&request.metadata_location)?;
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
            if !storage::is_within(&file, &ns.row.location) {
                return Err(CatalogError::BadRequest(format!(
                    "Metadata file '{file}' is outside the namespace's storage: a view registers from a directory of its own there"
                )));
            }
            let (segment, _) = explicit_directory(&ns.row.location, &file)?;
            let directory = join(&ns.row.location, &segment);
            let claim = keys::directory_claim(&ns.row.id, &segment);
            if rows::get::<DirectoryClaimRow>(&*self.core.store, &claim)
                .await?
                .is_some()
            {
                return Err(directory_taken(&directory));
            }
            let bucket = self
                .core
                .lookups
                .usable_bucket(&ctx.org.name, &ns.row.bucket)
                .await?;
            let objects = self.core.lookups.objects_for(&bucket).await?;
            let registered = read_registered_file(&*objects, &file).await?;
            let metadata = parse_view_metadata(&registered.json)?;
            check_location(metadata.location(), &directory)?;
            let row = ViewRow {
                id: metadata.uuid().to_string(),
                namespace_id: ns.row.id.clone(),
                name: request.name.clone(),
                directory: directory.clone(),
                bucket: bucket.nickname.clone(),
                location: metadata.location().trim_end_matches('/').to_owned(),
                metadata_location: file.clone(),
                metadata_version: crate::catalog::metadata::version_in_name(&file),
                metadata_sha256: registered.sha256.clone(),
                created_ms: self.core.clock.now_ms(),
            };
            if let Some(registered) = self
                .insert_view(
                    ctx,
                    &ns,
                    &row,
                    &segment,
                    Kind::ViewRegistered,
                    registered.json,
                )
                .await?
            {
                return Ok(registered);
            }
        }
        Err(CatalogError::contended("The view"))
    }
}

/// Applies view updates in order with the crate's builder: the new metadata and how many
/// changes it holds.
fn apply(base: ViewMetadata, updates: &[ViewUpdate]) -> Result<(ViewMetadata, usize)> {
    let invalid = |e: iceberg::Error| {
        CatalogError::BadRequest(format!("Invalid view update: {}", e.message()))
    };
    let mut builder = ViewMetadataBuilder::new_from_metadata(base);
    for update in updates.iter().cloned() {
        builder = match update {
            ViewUpdate::AssignUuid { uuid } => builder.assign_uuid(uuid),
            ViewUpdate::UpgradeFormatVersion { format_version } => builder
                .upgrade_format_version(format_version)
                .map_err(invalid)?,
            ViewUpdate::AddSchema { schema, .. } => builder.add_schema(schema),
            ViewUpdate::SetLocation { location } => builder.set_location(location),
            ViewUpdate::SetProperties { updates } => {
                builder.set_properties(updates).map_err(invalid)?
            }
            ViewUpdate::RemoveProperties { removals } => builder.remove_properties(&removals),
            ViewUpdate::AddViewVersion { view_version } => {
                builder.add_version(view_version).map_err(invalid)?
            }
            ViewUpdate::SetCurrentViewVersion { view_version_id } => builder
                .set_current_version_id(view_version_id)
                .map_err(invalid)?,
        };
    }
    let built = builder.build().map_err(invalid)?;
    Ok((built.metadata, built.changes.len()))
}

fn directory_taken(directory: &str) -> CatalogError {
    CatalogError::BadRequest(format!(
        "Directory '{directory}' belongs to another table or view: a registered view needs a directory of its own"
    ))
}
