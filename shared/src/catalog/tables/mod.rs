//! Table operations: create, register, load, list, commit (one table, or several in a
//! transaction), drop and recovery, unregister, rename, metrics, storage access.

mod answers;
mod commit;
pub mod maintenance;
pub(crate) mod placement;
mod purge;
mod recovery;
mod register;
mod signing;
mod transaction;

use crate::catalog::metadata::MetadataCache;
use crate::core::{Change, ChangeFailure, Core};
use crate::events::{Draft, Kind, TableName};
pub(crate) use commit::stamp_summary;
pub use commit::{AUTHOR_EMAIL_KEY, AUTHOR_NAME_KEY};
pub use maintenance::{MaintainOptions, MaintenanceReport, MaintenanceRun};
pub use purge::{DroppedPurgeReport, DroppedTablePurger, TABLES_PER_RUN};
pub use recovery::{DroppedTable, RETAIN_DROPPED_DATA_PROPERTY, RestoreRequest, RestoredTable};
pub(crate) use register::{read_registered_file, registrable_file};
use std::collections::HashMap;
use std::sync::Arc;
pub use transaction::MAX_TRANSACTION_TABLES;

use bytes::Bytes;
use iceberg::spec::{
    FormatVersion, SortOrder, TableMetadata, TableProperties, UnboundPartitionSpec,
};

use self::answers::{AnswerForm, AnswerKey, ReadyAnswers};
use self::placement::Placement;
use crate::authz::{Action, Resource, authorize};
use crate::catalog::metadata::{Codec, Written, metadata_file_location};
use crate::catalog::namespaces::BUCKET_PROPERTY;
use crate::catalog::parity::refs_v1::Refs;
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names, paging, parity};
use crate::error::{CatalogError, Result};
use crate::model::{BucketRow, NamespaceRow, TableRow};
use crate::store::rows::{self, DirectoryClaimRow, PrefixClaimRow, Versioned, keys};
use crate::store::{Condition, Token, Write};
use crate::types::{
    CommitTableResponse, CreateTableRequest, ListTablesResponse, LoadCredentialsResponse,
    LoadTableResult, ReadyAnswer, RenameTableRequest, TableIdentifier,
};
use crate::vending::{AccessLevel, Vended};

/// Request options of loadTable and createTable that do not change what is stored.
#[derive(Debug, Clone, Copy, Default)]
pub struct TableRequestOptions {
    /// `X-Iceberg-Access-Delegation: vended-credentials` was sent.
    pub vend_credentials: bool,
    /// `X-Iceberg-Access-Delegation: remote-signing` was sent: the engine signs its storage
    /// requests through the catalog where the bucket's keys cannot be scoped.
    pub remote_signing: bool,
    /// `snapshots=refs`: only snapshots that a branch or tag references.
    pub only_referenced_snapshots: bool,
}

/// A table just inserted: its row, its first metadata file and the bucket it lives on.
pub(super) struct NewTable {
    pub row: TableRow,
    pub metadata: Written,
    pub bucket: BucketRow,
}

/// What each write of a new table guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NewTablePart {
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

/// What each write of a rename guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RenamePart {
    /// The source row, at the token read (no commit landed since).
    Source,
    /// The destination name, not yet taken.
    Destination,
    /// No view holds the destination name.
    NotAView,
    /// The grants carried to the destination name.
    Grants,
}

/// Tables: create, load, list, commit, drop, rename, credentials and signing.
pub struct TableService {
    core: Arc<Core>,
    /// Verified metadata files, shared with the web view; never stale (files are immutable).
    metadata: Arc<MetadataCache>,
    /// Warm loads' answers, made once per table state and form.
    answers: ReadyAnswers,
}

impl TableService {
    pub fn new(core: Arc<Core>, metadata: Arc<MetadataCache>) -> Self {
        Self {
            core,
            metadata,
            answers: ReadyAnswers::new(),
        }
    }

    /// The replaced code paths this catalog takes (answers compressed per request, in
    /// `floe-bench` only).
    pub fn baselines(&self) -> &crate::core::baselines::Baselines {
        &self.core.baselines
    }

    /// Forgets the answers kept for warm loads, as a newly started instance would.
    pub fn forget_answers(&self) {
        self.answers.clear();
    }

    /// A table answer's document compressed for splicing, once per document and encoding.
    pub async fn compressed_metadata(
        &self,
        answer: &(dyn crate::types::TableAnswer + Sync),
        encoding: crate::encoding::Encoding,
    ) -> Result<Arc<crate::encoding::Segment>> {
        self.metadata
            .compressed(answer.metadata_id(), answer.metadata(), encoding)
            .await
    }
}

impl TableService {
    pub async fn list_tables(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        page: &paging::PageRequest,
    ) -> Result<ListTablesResponse> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Read)?;
        let scope = format!("tables:{}", ns.row.id);
        let after = self
            .core
            .page_tokens
            .resume(&scope, page)?
            .map(|name| format!("{}{name}", keys::TABLE_PREFIX));
        let pk = keys::namespace_partition(&ns.row.id);
        let found: Vec<TableRow> = rows::collect(
            &*self.core.store,
            &pk,
            keys::TABLE_PREFIX,
            after,
            page.read_limit(),
            |t: &TableRow| {
                ctx.access.allows(
                    Resource::Table {
                        namespace: &ns.row,
                        table: &t.name,
                    },
                    Action::Read,
                )
            },
        )
        .await?;
        let (found, token) = self
            .core
            .page_tokens
            .paginate(&scope, found, page, |t| t.name.as_str());
        Ok(ListTablesResponse {
            identifiers: found
                .into_iter()
                .map(|t| TableIdentifier {
                    namespace: vec![ns.row.name.clone()],
                    name: t.name,
                })
                .collect(),
            next_page_token: token,
        })
    }

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
    async fn commit_new_table(
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

    /// The answer to a retried commit whose change landed: the table's current metadata.
    pub async fn replay_commit(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<CommitTableResponse> {
        let loaded = self
            .load_table(ctx, namespace, table, Default::default())
            .await?;
        let loaded = loaded.result();
        Ok(CommitTableResponse {
            metadata_location: loaded.metadata_location.clone().unwrap_or_default(),
            metadata: loaded.metadata.clone(),
            metadata_id: loaded.metadata_id.clone(),
            etag: loaded.etag.clone(),
        })
    }

    /// A table's answer: kept ready from an earlier load while the table, its bucket
    /// configuration and the form asked for are unchanged (`answers`), else made afresh.
    pub async fn load_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        options: TableRequestOptions,
    ) -> Result<Arc<ReadyAnswer>> {
        let (ns, item) = self
            .core
            .lookups
            .authorized_table_item(ctx, namespace, table, Action::Read)
            .await?;
        let key = AnswerKey::new(
            &ctx.org.name,
            &ns.name,
            table,
            self.answer_form(ctx, &ns, table, options),
        );
        if let Some((bucket, answer)) = self.answers.get(&key, &item.body, &ns.bucket).await {
            let remembered = self
                .core
                .lookups
                .remembered_bucket(&ctx.org.name, &bucket.nickname);
            if remembered.is_some_and(|current| Arc::ptr_eq(&current, &bucket)) {
                return Ok(answer);
            }
        }
        let row: TableRow = rows::decode(&item)?;
        let bucket = self.core.lookups.table_bucket(ctx, &ns, &row).await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let current = self
            .metadata
            .load(&*objects, &crate::catalog::table_ref(ctx, &ns, &row))
            .await?;
        let (raw, id) = if options.only_referenced_snapshots {
            let trimmed = self.metadata.referenced_only(&current).await?;
            (trimmed, format!("{}/refs", current.sha256))
        } else {
            (current.raw.clone(), current.sha256.clone())
        };
        let (result, delivery) = self
            .answer_and_delivery(
                ctx,
                TableAt {
                    ns: &ns,
                    bucket: &bucket,
                    name: &row.name,
                    directory: row.directory(),
                },
                Some(row.metadata_location.clone()),
                (raw, id),
                options,
            )
            .await?;
        let answer = Arc::new(ReadyAnswer::new(result));
        if !matches!(delivery, Delivery::Vended) {
            self.answers
                .keep(key, item.body, &ns.bucket, bucket, answer.clone())
                .await;
        }
        Ok(answer)
    }

    /// What shapes this caller's answer about `table` beyond the table itself.
    fn answer_form(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        table: &str,
        options: TableRequestOptions,
    ) -> AnswerForm {
        let delegated = options.vend_credentials || options.remote_signing;
        AnswerForm {
            only_referenced_snapshots: options.only_referenced_snapshots,
            vend_credentials: options.vend_credentials,
            remote_signing: options.remote_signing,
            may_write: delegated && self.may_write(ctx, ns, table),
            public_namespace: delegated && crate::authz::is_public(ns),
        }
    }

    pub async fn table_exists(&self, ctx: &OrgContext, namespace: &str, table: &str) -> Result<()> {
        self.core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Read)
            .await
            .map(|_| ())
    }

    pub async fn load_credentials(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<LoadCredentialsResponse> {
        let (ns, row) = self
            .core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Read)
            .await?;
        let bucket = self.core.lookups.table_bucket(ctx, &ns, &row.row).await?;
        if signing::signs(&bucket) && !self.hands_out_static_keys(ctx, &ns, &bucket, table) {
            // The keys stay with the catalog: no credentials to supply ("none" is the spec's
            // answer too), and the engine signs through the sign route or uses keys of its own.
            return Ok(LoadCredentialsResponse {
                storage_credentials: Vec::new(),
            });
        }
        let (_, vended) = self
            .vend(ctx, &ns, &bucket, table, row.row.directory())
            .await?;
        Ok(LoadCredentialsResponse {
            storage_credentials: vended.credentials,
        })
    }

    /// Accepts a scan or commit report and discards it.
    pub async fn report_metrics(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<()> {
        self.table_exists(ctx, namespace, table).await
    }

    /// Removes the table from the catalog. Its files stay in storage, purge or not.
    pub async fn rename_table(&self, ctx: &OrgContext, request: RenameTableRequest) -> Result<()> {
        let source_ns = names::single_level(&request.source.namespace).map_err(|_| {
            CatalogError::NoSuchTable(format!("Table does not exist: {}", dotted(&request.source)))
        })?;
        let dest_ns = names::single_level(&request.destination.namespace)?;
        if source_ns != dest_ns {
            return Err(CatalogError::BadRequest(
                "Renaming a table across namespaces is not supported: its files live under the source namespace's storage".into(),
            ));
        }
        let ns = self.core.lookups.live_namespace(ctx, source_ns).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
        names::validate_table_name(&request.destination.name)?;
        let source = self
            .core
            .lookups
            .table_row(&ns.row, &request.source.name)
            .await?;
        if request.source.name == request.destination.name {
            return Err(table_already_exists(source_ns, &request.destination.name));
        }
        let mut moved = source.row.clone();
        moved.name = request.destination.name.clone();
        // The directory and bucket stay with the table, whatever its name.
        moved.directory = Some(source.row.directory().to_owned());
        let mut change = Change::new()
            .with(
                RenamePart::Source,
                Write::Delete {
                    key: keys::table(&ns.row.id, &request.source.name),
                    condition: Condition::TokenIs(source.token),
                },
            )
            .with(
                RenamePart::Destination,
                rows::put_tokened(
                    keys::table(&ns.row.id, &request.destination.name),
                    &moved,
                    Condition::NotExists,
                    None,
                ),
            )
            .with(
                RenamePart::NotAView,
                no_view_named(&ns.row.id, &request.destination.name),
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
            change.push(RenamePart::Grants, grant);
        }
        let mut event = Draft::new(
            Kind::TableRenamed,
            &ctx.org.name,
            &ns.row.name,
            &ns.row.id,
            &ctx.principal,
        )
        .table(&request.source.name, &source.row.id)
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
                    "Table has been updated by another process: {}",
                    dotted(&request.source)
                )))
            }
            Err(ChangeFailure::Refused(RenamePart::Destination | RenamePart::Grants)) => {
                Err(table_already_exists(source_ns, &request.destination.name))
            }
            Err(ChangeFailure::Refused(RenamePart::NotAView)) => {
                Err(view_holds_name(source_ns, &request.destination.name))
            }
            // A concurrent change or the store's failure: the store's 500.
            Err(failure) => Err(failure.into()),
        }
    }

    /// Vends credentials for the table's directory at the principal's level: write access gets
    /// read-write credentials.
    async fn vend(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        bucket: &BucketRow,
        table: &str,
        directory: &str,
    ) -> Result<(AccessLevel, Vended)> {
        let level = if self.may_write(ctx, ns, table) {
            AccessLevel::ReadWrite
        } else {
            AccessLevel::Read
        };
        let vended = self
            .core
            .vendor
            .vend(bucket, directory, level, &ctx.principal)
            .await?;
        Ok((level, vended))
    }

    /// Whether this caller receives the static keys of `bucket` for `table`: only where the
    /// bucket configuration opted in, only with write access, never behind a public namespace.
    fn hands_out_static_keys(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        bucket: &BucketRow,
        table: &str,
    ) -> bool {
        bucket.static_keys_to_writers
            && !crate::authz::is_public(ns)
            && self.may_write(ctx, ns, table)
    }

    /// How an answer about `table` lets this caller reach its files, from what the request
    /// asked for and the bucket: static keys are handed out only where [`hands_out_static_keys`]
    /// says so, otherwise such storage is signed when the engine asked for remote signing, and
    /// reached with the engine's own keys when it asked for vended credentials alone (the spec
    /// lets the server supply "any or none of the requested mechanisms").
    ///
    /// [`hands_out_static_keys`]: Self::hands_out_static_keys
    fn delivery(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        bucket: &BucketRow,
        table: &str,
        options: TableRequestOptions,
    ) -> Delivery {
        if !options.vend_credentials && !options.remote_signing {
            return Delivery::Plain;
        }
        if !signing::signs(bucket)
            || (options.vend_credentials && self.hands_out_static_keys(ctx, ns, bucket, table))
        {
            return Delivery::Vended;
        }
        if options.remote_signing {
            Delivery::Signed
        } else {
            Delivery::Unvended
        }
    }

    /// `metadata`: the document as answered and what identifies its bytes (the SHA-256 of the
    /// file it is, or was trimmed from, with the trim), from which the answer's entity tag is
    /// made without hashing the document again.
    async fn table_result(
        &self,
        ctx: &OrgContext,
        at: TableAt<'_>,
        metadata_location: Option<String>,
        metadata: (Bytes, String),
        options: TableRequestOptions,
    ) -> Result<LoadTableResult> {
        self.answer_and_delivery(ctx, at, metadata_location, metadata, options)
            .await
            .map(|(result, _)| result)
    }

    /// As [`Self::table_result`], with how the answer lets the engine reach the files.
    async fn answer_and_delivery(
        &self,
        ctx: &OrgContext,
        at: TableAt<'_>,
        metadata_location: Option<String>,
        metadata: (Bytes, String),
        options: TableRequestOptions,
    ) -> Result<(LoadTableResult, Delivery)> {
        let delivery = self.delivery(ctx, at.ns, at.bucket, at.name, options);
        let (delegation, vended) = match delivery {
            Delivery::Signed => {
                let mut config = self.s3_settings(at.bucket);
                config.extend(crate::signing::client_config(&crate::signing::endpoint(
                    &ctx.org.name,
                    &at.ns.name,
                    at.name,
                )));
                let delegation = if self.may_write(ctx, at.ns, at.name) {
                    "signed-write"
                } else {
                    "signed-read"
                };
                let settings = Vended {
                    config,
                    ..Vended::default()
                };
                (delegation, settings)
            }
            Delivery::Vended => {
                let (level, vended) = self
                    .vend(ctx, at.ns, at.bucket, at.name, at.directory)
                    .await?;
                let delegation = match level {
                    AccessLevel::Read => "vended-read",
                    AccessLevel::ReadWrite => "vended-write",
                };
                (delegation, vended)
            }
            Delivery::Unvended => {
                let settings = Vended {
                    config: self.s3_settings(at.bucket),
                    ..Vended::default()
                };
                (crate::types::UNVENDED, settings)
            }
            Delivery::Plain => {
                let config = self.core.vendor.storage_config(at.bucket);
                let settings = Vended {
                    config,
                    ..Vended::default()
                };
                (crate::types::NO_DELEGATION, settings)
            }
        };
        let (raw_metadata, metadata_id) = metadata;
        let etag = crate::types::entity_tag(
            &ctx.org.name,
            &metadata_id,
            delegation,
            metadata_location.as_deref(),
            &vended.config,
            &vended.credentials,
        );
        let result = LoadTableResult {
            metadata_location,
            metadata: raw_metadata,
            metadata_id,
            config: vended.config,
            storage_credentials: vended.credentials,
            etag,
        };
        Ok((result, delivery))
    }
}

/// How a table answer lets the engine reach the table's files.
#[derive(Clone, Copy)]
enum Delivery {
    /// Nothing asked for: the bucket's endpoint and region only.
    Plain,
    /// Credentials: scoped temporary ones, or a bucket's static keys where it opted in.
    Vended,
    /// The table's sign route; the keys stay with the catalog.
    Signed,
    /// Vended credentials were asked for on a bucket whose static keys the catalog keeps: none
    /// are supplied, and the engine reaches the bucket (endpoint, region and addressing given)
    /// with keys of its own.
    Unvended,
}

/// A table and the storage it lives on, for building its LoadTableResult.
struct TableAt<'a> {
    ns: &'a NamespaceRow,
    bucket: &'a BucketRow,
    name: &'a str,
    directory: &'a str,
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
fn creation_properties(
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

/// The writes that take table `name` (its row read with `token`) out of `ns`: the namespace's
/// table count, held to the version read, and the row, held to its token (a drop, an
/// unregister).
pub(super) fn leaving_namespace(
    ctx: &OrgContext,
    ns: &Versioned<NamespaceRow>,
    name: &str,
    token: Option<Token>,
) -> [Write; 2] {
    let mut ns_row = ns.row.clone();
    ns_row.table_count = ns_row.table_count.saturating_sub(1);
    [
        rows::put(
            keys::namespace(&ctx.org.name, &ns.row.name),
            &ns_row,
            Condition::VersionIs(ns.version),
        ),
        Write::Delete {
            key: keys::table(&ns.row.id, name),
            condition: Condition::TokenIs(token),
        },
    ]
}

/// The check that keeps a name a table is given free of views (in the same write).
pub(super) fn no_view_named(namespace_id: &str, name: &str) -> Write {
    Write::Check {
        key: keys::view(namespace_id, name),
        condition: Condition::NotExists,
    }
}

/// A name a view holds, asked for a table (Java's wording).
pub(super) fn view_holds_name(namespace: &str, name: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!(
        "View with same name already exists: {namespace}.{name}"
    ))
}

fn table_already_exists(namespace: &str, table: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!("Table already exists: {namespace}.{table}"))
}

fn dotted(id: &TableIdentifier) -> String {
    format!("{}.{}", id.namespace.join("."), id.name)
}
