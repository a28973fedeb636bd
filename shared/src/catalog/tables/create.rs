//! createTable: a new table placed in a directory of its own, its first metadata file written, its
//! row inserted with the claims that keep names and directories unique; staged creates; replays.

use super::placement::Placement;
use super::{
    TableAt, TableRequestOptions, TableService, maintenance, no_view_named, placement,
    table_already_exists, view_holds_name,
};
use crate::core::{Change, ChangeFailure};
use crate::events::{Draft, Kind};
use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    FormatVersion, SortOrder, TableMetadata, TableProperties, UnboundPartitionSpec,
};

use crate::authz::{Action, Resource, authorize};
use crate::catalog::metadata::{Codec, Written, metadata_file_location};
use crate::catalog::namespaces::BUCKET_PROPERTY;
use crate::catalog::parity::refs_v1::Refs;
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names, parity};
use crate::error::{CatalogError, Result};
use crate::model::{BucketRow, NamespaceRow, TableRow};
use crate::store::Condition;
use crate::store::rows::{self, DirectoryClaimRow, PrefixClaimRow, Versioned, keys};
use crate::types::{CreateTableRequest, LoadTableResult, ReadyAnswer};

impl TableService {
    pub async fn create_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        request: CreateTableRequest,
        options: TableRequestOptions,
    ) -> Result<LoadTableResult> {
        // A caller who may not create tables here learns nothing about its request.
        let seen = self.core.lookups.recent_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&seen), Action::Write)?;
        names::validate_table_name(&request.name)?;
        let stage = request.stage_create.unwrap_or(false);
        let (format_version, properties) =
            creation_properties(request.properties.unwrap_or_default())?;
        maintenance::policy::check(properties.clone())
            .map_err(|e| CatalogError::BadRequest(e.to_string()))?;
        parity::format_versions::check_schema(&request.schema, format_version)
            .and_then(|()| {
                parity::format_versions::check_create_properties(&properties, format_version)
            })
            .map_err(CatalogError::BadRequest)?;
        Codec::from_properties(&properties)?;
        let override_bucket = properties.get(BUCKET_PROPERTY).cloned();
        if stage && override_bucket.is_some() {
            return Err(CatalogError::BadRequest(format!(
                "'{BUCKET_PROPERTY}' cannot be combined with a staged create: a staged table persists nothing to carry the binding"
            )));
        }
        let spec = parity::specs::spec_for_builder(
            request
                .partition_spec
                .clone()
                .unwrap_or_else(|| UnboundPartitionSpec::builder().build()),
            &request.schema,
        )?;
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
            if self
                .core
                .store
                .get(&keys::table(&ns.row.id, &request.name))
                .await?
                .is_some()
            {
                return Err(table_already_exists(namespace, &request.name));
            }
            let placement = self
                .place_table(
                    ctx,
                    &ns.row,
                    &request.name,
                    request.location.as_deref(),
                    override_bucket.as_deref(),
                )
                .await?;
            let built = parity::fresh_ids::new_table_metadata(parity::fresh_ids::NewTable {
                schema: request.schema.clone(),
                spec: spec.clone(),
                sort_order: request
                    .write_order
                    .clone()
                    .unwrap_or_else(SortOrder::unsorted_order),
                location: placement.location.clone(),
                format_version,
                properties: {
                    let mut properties = properties.clone();
                    maintenance::policy::stamp_new_table(&mut properties, &ns.row.properties);
                    properties
                },
            })
            .map_err(|e| {
                CatalogError::BadRequest(format!("Invalid table definition: {}", e.message()))
            })
            .and_then(|metadata| {
                placement::check_paths(&metadata, &placement.directory, None)?;
                Ok(metadata)
            });
            let metadata = match built {
                Ok(metadata) => metadata,
                Err(e) => {
                    self.release(&placement).await;
                    return Err(e);
                }
            };

            if stage {
                let raw = crate::catalog::metadata::serialize(&metadata, None)?;
                let id = crate::catalog::metadata::sha256_hex(&raw);
                return self
                    .table_result(
                        ctx,
                        TableAt {
                            ns: &ns.row,
                            bucket: &placement.bucket,
                            name: &request.name,
                            directory: &placement.directory,
                        },
                        None,
                        (raw, id),
                        options,
                    )
                    .await;
            }
            match self
                .commit_new_table(ctx, &ns, &request.name, placement, metadata, None)
                .await
            {
                Ok(NewTable {
                    row,
                    metadata,
                    bucket,
                }) => {
                    return self
                        .table_result(
                            ctx,
                            TableAt {
                                ns: &ns.row,
                                bucket: &bucket,
                                name: &row.name,
                                directory: row.directory(),
                            },
                            Some(row.metadata_location.clone()),
                            (metadata.file.raw.clone(), metadata.file.sha256.clone()),
                            options,
                        )
                        .await;
                }
                Err(NewTableError::NamespaceChanged) => continue,
                Err(NewTableError::Failed(e)) => return Err(e),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }

    /// Writes metadata version 0 and inserts the table row together with the namespace's table
    /// count, the directory claim (or override prefix claim) in one conditional write.
    /// Shared by createTable and the create commit of a staged table.
    pub(super) async fn commit_new_table(
        &self,
        ctx: &OrgContext,
        ns: &Versioned<NamespaceRow>,
        name: &str,
        placement: Placement,
        metadata: TableMetadata,
        v1_refs: Option<&Refs>,
    ) -> std::result::Result<NewTable, NewTableError> {
        let objects = self.core.lookups.objects_for(&placement.bucket).await?;
        let metadata_location =
            metadata_file_location(metadata.location(), 0, Codec::of(&metadata)?);
        let (id, location) = (metadata.uuid().to_string(), metadata.location().to_owned());
        let written = self
            .metadata
            .write(&*objects, &metadata_location, metadata, v1_refs, None)
            .await?;
        let row = TableRow {
            id,
            namespace_id: ns.row.id.clone(),
            name: name.to_owned(),
            directory: Some(placement.directory.clone()),
            bucket: Some(placement.bucket.nickname.clone()),
            location,
            metadata_location: metadata_location.clone(),
            metadata_version: 0,
            metadata_sha256: Some(written.file.sha256.clone()),
            storage_override: placement.storage_override.clone(),
            created_ms: self.core.clock.now_ms(),
            deleting_until_ms: None,
        };
        let mut ns_row = ns.row.clone();
        ns_row.table_count += 1;
        let mut change = Change::new()
            .with(
                NewTablePart::Namespace,
                rows::put(
                    keys::namespace(&ctx.org.name, &ns.row.name),
                    &ns_row,
                    Condition::VersionIs(ns.version),
                ),
            )
            .with(
                NewTablePart::Name,
                rows::put_tokened(
                    keys::table(&ns.row.id, name),
                    &row,
                    Condition::NotExists,
                    None,
                ),
            )
            .with(NewTablePart::NotAView, no_view_named(&ns.row.id, name));
        if let Some(segment) = &placement.claim {
            let claim = DirectoryClaimRow {
                directory: placement.directory.clone(),
                table_id: row.id.clone(),
            };
            change.push(
                NewTablePart::Directory,
                rows::put(
                    keys::directory_claim(&ns.row.id, segment),
                    &claim,
                    Condition::NotExists,
                ),
            );
        }
        if let Some(o) = &placement.storage_override {
            let claim = PrefixClaimRow {
                bucket_root: placement.bucket.root.clone(),
                prefix: o.prefix.clone(),
                owner: row.id.clone(),
            };
            change.push(
                NewTablePart::OverridePrefix,
                rows::put(
                    keys::prefix_claim(&placement.bucket.root, &o.prefix),
                    &claim,
                    Condition::NotExists,
                ),
            );
        }
        let event = Draft::new(
            Kind::TableCreated,
            &ctx.org.name,
            &ns.row.name,
            &ns.row.id,
            &ctx.principal,
        )
        .table(name, &row.id)
        .metadata(None, Some(&metadata_location));
        let outcome = self.core.changes.write(ctx.key(), change, event).await;
        // A metadata file is never deleted on a failure path: nothing references it unless the
        // write landed, and an orphan is harmless. An override's marker is released only when
        // the write certainly did not land.
        if let Err(ChangeFailure::Refused(_) | ChangeFailure::Contended) = &outcome {
            self.release(&placement).await;
        }
        match outcome {
            Ok(()) => Ok(NewTable {
                row,
                metadata: written,
                bucket: placement.bucket,
            }),
            // The namespace row (its table count) is the contended item: read it again.
            Err(ChangeFailure::Refused(NewTablePart::Namespace) | ChangeFailure::Contended) => {
                Err(NewTableError::NamespaceChanged)
            }
            Err(ChangeFailure::Refused(NewTablePart::Name)) => {
                Err(table_already_exists(&ns.row.name, name).into())
            }
            Err(ChangeFailure::Refused(NewTablePart::NotAView)) => {
                Err(view_holds_name(&ns.row.name, name).into())
            }
            Err(ChangeFailure::Refused(NewTablePart::Directory)) => {
                Err(CatalogError::BadRequest(format!(
                    "Table location '{}' belongs to another table of the namespace: choose another location or let the catalog assign one",
                    placement.location
                ))
                .into())
            }
            Err(ChangeFailure::Refused(NewTablePart::OverridePrefix)) => {
                Err(CatalogError::AlreadyExists(
                    "The generated storage prefix is already claimed; retry the request".into(),
                )
                .into())
            }
            Err(ChangeFailure::NotWritten(e)) => Err(CatalogError::from(e).into()),
            Err(ChangeFailure::Unknown(e)) => {
                tracing::error!(error = %e, org = %ctx.org.name, namespace = %ns.row.name, table = name, "table creation outcome unknown");
                Err(CatalogError::CommitStateUnknown(format!(
                "Commit state unknown for {}.{name}: the catalog could not confirm the table was created; load it before retrying",
                ns.row.name
            ))
            .into())
            }
        }
    }

    /// The answer to a retried createTable or registerTable whose table landed: the table as it
    /// is now, with fresh credentials (a table answer is never stored, since it may carry
    /// credentials).
    pub async fn replay_create(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        options: TableRequestOptions,
    ) -> Result<Arc<ReadyAnswer>> {
        self.load_table(ctx, namespace, table, options).await
    }
}

/// A table just inserted: its row, its first metadata file and the bucket it lives on.
pub(super) struct NewTable {
    pub row: TableRow,
    pub metadata: Written,
    pub bucket: BucketRow,
}

/// What each write of a new table guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NewTablePart {
    /// The namespace row, at the version read (its table count moves).
    Namespace,
    /// The table's name, not yet taken.
    Name,
    /// No view holds the name.
    NotAView,
    /// The table's directory, claimed by no other table of the namespace.
    Directory,
    /// An override's storage prefix, claimed by nothing else in its bucket.
    OverridePrefix,
}

pub(super) enum NewTableError {
    NamespaceChanged,
    Failed(CatalogError),
}

impl From<CatalogError> for NewTableError {
    fn from(e: CatalogError) -> Self {
        NewTableError::Failed(e)
    }
}

/// Splits creation properties into the format version and what is stored. Reserved properties
/// are derived from metadata and never stored.
pub(super) fn creation_properties(
    mut properties: HashMap<String, String>,
) -> Result<(FormatVersion, HashMap<String, String>)> {
    let version = match properties
        .remove(TableProperties::PROPERTY_FORMAT_VERSION)
        .as_deref()
    {
        None | Some("2") => FormatVersion::V2,
        Some("1") => FormatVersion::V1,
        Some("3") => FormatVersion::V3,
        Some(other) => {
            return Err(CatalogError::BadRequest(format!(
                "Unsupported format-version '{other}': use 1, 2 or 3"
            )));
        }
    };
    for reserved in TableProperties::RESERVED_PROPERTIES {
        properties.remove(reserved);
    }
    parity::create::add_java_defaults(&mut properties);
    Ok((version, properties))
}
