//! Views: list, create, load, exists, replace, drop, rename and register.
//!
//! A view is a row beside the namespace's tables (`VIEW#<name>`, next to `TABLE#<name>`) pointing
//! at its current metadata file, whose digest the row records, exactly as a table's does. A table
//! and a view never share a name in a namespace: every write that gives a name to one holds the
//! other's key absent in the same atomic write. Each view owns a directory no table or view shares
//! (claimed as a table's is), where its metadata files go. Authorization is by name: a grant on
//! `<namespace>.<name>` covers the table or the view of that name (there is only ever one), and
//! namespace grants cover both.

mod files;
mod replace;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use iceberg::spec::{Schema, ViewFormatVersion, ViewMetadata, ViewMetadataBuilder, ViewVersion};
use serde::Deserialize;
use serde_json::Value;

use crate::authz::{Action, Resource, authorize};
use crate::catalog::metadata::{Codec, metadata_file_location};
use crate::catalog::storage;
use crate::catalog::tables::placement::explicit_directory;
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names, paging};
use crate::core::{AsRead, Change, ChangeFailure, Core};
use crate::error::{CatalogError, Result};
use crate::events::{Draft, Kind, TableName};
use crate::model::{NamespaceRow, Principal, ViewRow};
use crate::objects::join;
use crate::store::rows::{self, DirectoryClaimRow, Versioned, keys};
use crate::store::{Condition, Write};
use crate::types::{ListTablesResponse, LoadViewResult, RenameTableRequest, TableIdentifier};

pub use files::ViewFile;

/// Views of every namespace of an org.
pub struct ViewService {
    core: Arc<Core>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct CreateViewRequest {
    name: String,
    #[serde(default)]
    location: Option<String>,
    schema: Schema,
    view_version: ViewVersion,
    #[serde(default)]
    properties: HashMap<String, String>,
}

/// What each write of a new view guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NewViewPart {
    Namespace,
    Name,
    /// No table holds the name.
    NotATable,
    Directory,
}

impl ViewService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    pub async fn list_views(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        page: &paging::PageRequest,
    ) -> Result<ListTablesResponse> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Read)?;
        let scope = format!("views:{}", ns.row.id);
        let after = self
            .core
            .page_tokens
            .resume(&scope, page)?
            .map(|name| format!("{}{name}", keys::VIEW_PREFIX));
        let found: Vec<ViewRow> = rows::collect(
            &*self.core.store,
            &keys::namespace_partition(&ns.row.id),
            keys::VIEW_PREFIX,
            after,
            page.read_limit(),
            |v: &ViewRow| {
                ctx.access.allows(
                    Resource::Table {
                        namespace: &ns.row,
                        table: &v.name,
                    },
                    Action::Read,
                )
            },
        )
        .await?;
        let (found, token) = self
            .core
            .page_tokens
            .paginate(&scope, found, page, |v| v.name.as_str());
        Ok(ListTablesResponse {
            identifiers: found
                .into_iter()
                .map(|v| TableIdentifier {
                    namespace: vec![ns.row.name.clone()],
                    name: v.name,
                })
                .collect(),
            next_page_token: token,
        })
    }

    pub async fn create_view(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        mut body: Value,
    ) -> Result<LoadViewResult> {
        let seen = self.core.lookups.recent_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&seen), Action::Write)?;
        if let Some(version) = body.get_mut("view-version") {
            stamp_version(version, &ctx.principal);
        }
        let request: CreateViewRequest = serde_json::from_value(body)
            .map_err(|e| CatalogError::BadRequest(format!("Invalid view definition: {e}")))?;
        names::validate_table_name(&request.name)?;
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
            let (segment, location) = match request.location.as_deref() {
                None => {
                    let segment = storage::generate_prefix(&request.name);
                    let location = join(&ns.row.location, &segment);
                    (segment, location)
                }
                Some(given) => explicit_directory(&ns.row.location, given)?,
            };
            let directory = join(&ns.row.location, &segment);
            let metadata = ViewMetadataBuilder::new(
                location.clone(),
                request.schema.clone(),
                request.view_version.clone(),
                ViewFormatVersion::V1,
                request.properties.clone(),
            )
            .and_then(|b| b.build())
            .map_err(|e| {
                CatalogError::BadRequest(format!("Invalid view definition: {}", e.message()))
            })?
            .metadata;
            let bucket = self
                .core
                .lookups
                .usable_bucket(&ctx.org.name, &ns.row.bucket)
                .await?;
            let objects = self.core.lookups.objects_for(&bucket).await?;
            let file_location = metadata_file_location(&location, 0, Codec::None);
            let file = files::write(&*objects, &file_location, &metadata).await?;
            let row = ViewRow {
                id: metadata.uuid().to_string(),
                namespace_id: ns.row.id.clone(),
                name: request.name.clone(),
                directory: directory.clone(),
                bucket: bucket.nickname.clone(),
                location,
                metadata_location: file_location.clone(),
                metadata_version: 0,
                metadata_sha256: file.sha256.clone(),
                created_ms: self.core.clock.now_ms(),
            };
            if let Some(created) = self
                .insert_view(ctx, &ns, &row, &segment, Kind::ViewCreated, file.raw)
                .await?
            {
                return Ok(created);
            }
        }
        Err(CatalogError::contended("The namespace"))
    }

    /// Inserts a new view's row (created or registered) with its event: `None` when the
    /// namespace moved meanwhile and the caller reads it again.
    async fn insert_view(
        &self,
        ctx: &OrgContext,
        ns: &Versioned<NamespaceRow>,
        row: &ViewRow,
        segment: &str,
        kind: Kind,
        raw: Bytes,
    ) -> Result<Option<LoadViewResult>> {
        let change = self.new_view_change(ns, row, segment);
        let event = Draft::new(
            kind,
            &ctx.org.name,
            &ns.row.name,
            &ns.row.id,
            &ctx.principal,
        )
        .view(&row.name, &row.id)
        .metadata(None, Some(&row.metadata_location));
        let namespace = &ns.row.name;
        match self.core.changes.write(ctx.key(), change, event).await {
            Ok(()) => Ok(Some(answer(row, raw))),
            Err(ChangeFailure::Refused(NewViewPart::Namespace) | ChangeFailure::Contended) => {
                Ok(None)
            }
            Err(ChangeFailure::Refused(NewViewPart::Name)) => {
                Err(view_exists(namespace, &row.name))
            }
            Err(ChangeFailure::Refused(NewViewPart::NotATable)) => {
                Err(table_holds_name(namespace, &row.name))
            }
            Err(ChangeFailure::Refused(NewViewPart::Directory)) => {
                Err(CatalogError::BadRequest(format!(
                    "Directory '{}' belongs to another table or view of the namespace: choose another location or let the catalog assign one",
                    row.directory
                )))
            }
            Err(ChangeFailure::NotWritten(e)) => Err(e.into()),
            Err(ChangeFailure::Unknown(e)) => {
                tracing::error!(error = %e, org = %ctx.org.name, namespace = %namespace, view = %row.name, "view creation outcome unknown");
                Err(CatalogError::CommitStateUnknown(format!(
                    "Commit state unknown for {namespace}.{}: the catalog could not confirm the view was created; load it before retrying",
                    row.name
                )))
            }
        }
    }

    /// The write that inserts a view: the namespace's count, the name (free of views and
    /// tables) and the directory's claim.
    fn new_view_change(
        &self,
        ns: &Versioned<NamespaceRow>,
        row: &ViewRow,
        segment: &str,
    ) -> Change<NewViewPart> {
        let mut ns_row = ns.row.clone();
        ns_row.view_count += 1;
        let claim = DirectoryClaimRow {
            directory: row.directory.clone(),
            table_id: row.id.clone(),
        };
        Change::new()
            .with(
                NewViewPart::Namespace,
                rows::put(
                    keys::namespace(&ns.row.org, &ns.row.name),
                    &ns_row,
                    Condition::VersionIs(ns.version),
                ),
            )
            .with(
                NewViewPart::Name,
                rows::put_tokened(
                    keys::view(&ns.row.id, &row.name),
                    row,
                    Condition::NotExists,
                    None,
                ),
            )
            .with(
                NewViewPart::NotATable,
                Write::Check {
                    key: keys::table(&ns.row.id, &row.name),
                    condition: Condition::NotExists,
                },
            )
            .with(
                NewViewPart::Directory,
                rows::put(
                    keys::directory_claim(&ns.row.id, segment),
                    &claim,
                    Condition::NotExists,
                ),
            )
    }

    pub async fn load_view(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        view: &str,
    ) -> Result<LoadViewResult> {
        let (_, row) = self
            .authorized_view(ctx, namespace, view, Action::Read)
            .await?;
        let file = self.current_file(ctx, &row.row).await?;
        Ok(answer(&row.row, file.raw))
    }

    pub async fn view_exists(&self, ctx: &OrgContext, namespace: &str, view: &str) -> Result<()> {
        self.authorized_view(ctx, namespace, view, Action::Read)
            .await
            .map(|_| ())
    }

    /// Removes the view. Its files stay, and its directory stays claimed.
    pub async fn drop_view(&self, ctx: &OrgContext, namespace: &str, view: &str) -> Result<()> {
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(
                &ctx.access,
                Resource::Table {
                    namespace: &ns.row,
                    table: view,
                },
                Action::Write,
            )?;
            let row = self.view_row(&ns.row, view).await?;
            let mut ns_row = ns.row.clone();
            ns_row.view_count = ns_row.view_count.saturating_sub(1);
            let writes = vec![
                rows::put(
                    keys::namespace(&ctx.org.name, namespace),
                    &ns_row,
                    Condition::VersionIs(ns.version),
                ),
                Write::Delete {
                    key: keys::view(&ns.row.id, view),
                    condition: Condition::TokenIs(row.token),
                },
            ];
            let event = Draft::new(
                Kind::ViewDropped,
                &ctx.org.name,
                &ns.row.name,
                &ns.row.id,
                &ctx.principal,
            )
            .view(view, &row.row.id)
            .metadata(Some(&row.row.metadata_location), None);
            match self
                .core
                .changes
                .write(ctx.key(), Change::as_read(writes), event)
                .await
            {
                Ok(()) => return Ok(()),
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }

    /// Renames a view within its namespace; its grants (by name) move with it.
    pub async fn rename_view(&self, ctx: &OrgContext, request: RenameTableRequest) -> Result<()> {
        let source_ns = names::single_level(&request.source.namespace)
            .map_err(|_| no_such_view(&request.source.namespace.join("."), &request.source.name))?;
        let dest_ns = names::single_level(&request.destination.namespace)?;
        if source_ns != dest_ns {
            return Err(CatalogError::BadRequest(
                "Renaming a view across namespaces is not supported: its files live under the source namespace's storage".into(),
            ));
        }
        let ns = self.core.lookups.live_namespace(ctx, source_ns).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
        names::validate_table_name(&request.destination.name)?;
        let source = self.view_row(&ns.row, &request.source.name).await?;
        if request.source.name == request.destination.name {
            return Err(view_exists(source_ns, &request.destination.name));
        }
        let mut moved = source.row.clone();
        moved.name = request.destination.name.clone();
        let mut change = Change::new()
            .with(
                RenamePart::Source,
                Write::Delete {
                    key: keys::view(&ns.row.id, &request.source.name),
                    condition: Condition::TokenIs(source.token),
                },
            )
            .with(
                RenamePart::Destination,
                rows::put_tokened(
                    keys::view(&ns.row.id, &request.destination.name),
                    &moved,
                    Condition::NotExists,
                    None,
                ),
            )
            .with(
                RenamePart::NotATable,
                Write::Check {
                    key: keys::table(&ns.row.id, &request.destination.name),
                    condition: Condition::NotExists,
                },
            );
        let carried = crate::catalog::access::AccessService::carry_grants(
            &*self.core.store,
            ctx,
            &ns.row,
            &request.source.name,
            &request.destination.name,
        )
        .await?;
        let carries_grants = !carried.is_empty();
        for grant in carried {
            change.push(RenamePart::Destination, grant);
        }
        let mut event = Draft::new(
            Kind::ViewRenamed,
            &ctx.org.name,
            &ns.row.name,
            &ns.row.id,
            &ctx.principal,
        )
        .view(&request.source.name, &source.row.id)
        .metadata(
            Some(&source.row.metadata_location),
            Some(&source.row.metadata_location),
        );
        event.data.renamed_to = Some(TableName {
            namespace: ns.row.name.clone(),
            table: request.destination.name.clone(),
        });
        match self.core.changes.write(ctx.key(), change, event).await {
            Ok(()) => {
                if carries_grants {
                    self.core.lookups.org_access_changed(&ctx.org.name);
                }
                Ok(())
            }
            Err(ChangeFailure::Refused(RenamePart::Source)) => {
                Err(CatalogError::CommitFailed(format!(
                    "View has been updated by another process: {source_ns}.{}",
                    request.source.name
                )))
            }
            Err(ChangeFailure::Refused(RenamePart::Destination)) => {
                Err(view_exists(source_ns, &request.destination.name))
            }
            Err(ChangeFailure::Refused(RenamePart::NotATable)) => {
                Err(table_holds_name(source_ns, &request.destination.name))
            }
            Err(failure) => Err(failure.into()),
        }
    }

    /// A view and its namespace, authorized for `action` on the view's name.
    async fn authorized_view(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        view: &str,
        action: Action,
    ) -> Result<(NamespaceRow, Versioned<ViewRow>)> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?.row;
        authorize(
            &ctx.access,
            Resource::Table {
                namespace: &ns,
                table: view,
            },
            action,
        )?;
        let row = self.view_row(&ns, view).await?;
        Ok((ns, row))
    }

    async fn view_row(&self, ns: &NamespaceRow, view: &str) -> Result<Versioned<ViewRow>> {
        rows::get::<ViewRow>(&*self.core.store, &keys::view(&ns.id, view))
            .await?
            .ok_or_else(|| no_such_view(&ns.name, view))
    }

    /// The view's current metadata file, verified against its row.
    async fn current_file(&self, ctx: &OrgContext, row: &ViewRow) -> Result<ViewFile> {
        let bucket = self
            .core
            .lookups
            .usable_bucket(&ctx.org.name, &row.bucket)
            .await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        files::read(&*objects, row).await
    }
}

/// What each write of a view rename guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RenamePart {
    Source,
    Destination,
    NotATable,
}

fn answer(row: &ViewRow, metadata: Bytes) -> LoadViewResult {
    LoadViewResult {
        metadata_location: row.metadata_location.clone(),
        metadata,
    }
}

/// Overwrites the author keys of a view version's summary with the principal's identity, as
/// snapshots' are stamped.
fn stamp_version(version: &mut Value, principal: &Principal) {
    let Some(object) = version.as_object_mut() else {
        return;
    };
    let summary = object
        .entry("summary")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(summary) = summary.as_object_mut() {
        crate::catalog::tables::stamp_summary(summary, principal);
    }
}

pub(crate) fn no_such_view(namespace: &str, view: &str) -> CatalogError {
    CatalogError::NoSuchView(format!("View does not exist: {namespace}.{view}"))
}

fn view_exists(namespace: &str, view: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!("View already exists: {namespace}.{view}"))
}

/// A name a table holds, asked for a view.
fn table_holds_name(namespace: &str, name: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!(
        "Table with same name already exists: {namespace}.{name}"
    ))
}

/// Parses a client's view metadata file, refusing anything the crate's parser refuses.
fn parse_view_metadata(raw: &[u8]) -> Result<ViewMetadata> {
    serde_json::from_slice(raw).map_err(|e| {
        CatalogError::BadRequest(format!(
            "The metadata file is not valid Iceberg view metadata: {e}"
        ))
    })
}
