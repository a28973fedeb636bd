//! Bringing an existing Iceberg table under the catalog (`registerTable`) and letting the catalog
//! forget one while its files stay (`unregisterTable`).
//!
//! A registered table owns a directory as every table does, so its vended credentials can never
//! reach another's files:
//! - inside the namespace's root, the first directory below the root that holds the metadata
//!   file, claimed as a created table's explicit location is (no live or dropped table of the
//!   namespace holds or overlaps it);
//! - elsewhere in one of the org's bucket configurations, the first directory below that
//!   configuration's root, claimed as a storage override's prefix is (in the store, and by the
//!   marker file in storage, which no namespace or other table of any org may hold there).
//!
//! The metadata file must lie inside that directory, as must the metadata's `location` and its
//! write paths. It is read once, parsed and checked as Iceberg table metadata, and recorded with
//! its digest and uuid as if the catalog had written it: every later load verifies the file
//! against that record, so a file changed afterwards is refused, never served.

use bytes::Bytes;
use iceberg::spec::TableMetadata;
use serde::{Deserialize, Serialize};

use super::placement;
use super::{TableAt, TableRequestOptions, TableService, table_already_exists};
use crate::authz::{Action, Resource, authorize};
use crate::catalog::access::AccessService;
use crate::catalog::parity::format_versions;
use crate::catalog::storage::{self, MarkerOwner};
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names};
use crate::core::{AsRead, Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::events::{Draft, Kind};
use crate::model::{BucketRow, DroppedTableRow, NamespaceRow, TableRow, TableStorage};
use crate::objects::{ObjectError, join};
use crate::store::rows::{self, DirectoryClaimRow, PrefixClaimRow, Versioned, keys};
use crate::store::{Condition, Write};
use crate::types::{LoadTableResult, RegisterTableRequest, UnregisterTableResult};

/// The most objects an override directory may hold at registration: the directory is searched
/// for other owners' marker files, which takes one listing request per thousand objects.
const MAX_LISTED_OBJECTS: usize = 100_000;

/// What each write of a registration guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegisterPart {
    Namespace,
    Name,
    NotAView,
    Directory,
    OverridePrefix,
    /// The dropped table whose directory the registration takes over.
    Dropped,
}

/// Where a registered table's directory is and how it is claimed.
struct Site {
    bucket: BucketRow,
    directory: String,
    claim: SiteClaim,
}

enum SiteClaim {
    /// A directory below the namespace's root: its segment, claimed in the namespace.
    Segment(String),
    /// A directory below a bucket configuration's root: its prefix, claimed in the bucket.
    Prefix(String),
}

/// What a replay of an unregister needs to answer again: the file it answered with.
#[derive(Serialize, Deserialize)]
struct Unregistered {
    bucket: String,
    #[serde(rename = "metadata-location")]
    metadata_location: String,
}

impl TableService {
    pub async fn register_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        request: RegisterTableRequest,
        options: TableRequestOptions,
    ) -> Result<LoadTableResult> {
        let seen = self.core.lookups.recent_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&seen), Action::Write)?;
        names::validate_table_name(&request.name)?;
        let file = registrable_file(&request.metadata_location)?;
        let overwrite = request.overwrite.unwrap_or(false);
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
            let existing =
                rows::get::<TableRow>(&*self.core.store, &keys::table(&ns.row.id, &request.name))
                    .await?;
            if existing.is_some() && !overwrite {
                return Err(table_already_exists(namespace, &request.name));
            }
            let site = self.registration_site(ctx, &ns.row, &file).await?;
            let objects = self.core.lookups.objects_for(&site.bucket).await?;
            let registered = read_registered_file(&*objects, &file).await?;
            let metadata = parse_metadata(&registered.json)?;
            placement::check_paths(&metadata, &site.directory, None)?;
            let replaced = existing.as_ref().map(|e| &e.row);
            let dropped = self
                .dropped_owner(&ns.row, &site, &file, &registered.sha256)
                .await?;
            let marker = match &site.claim {
                SiteClaim::Prefix(_) => {
                    let holder = replaced.or(dropped.as_ref().map(|d| &d.row.table));
                    self.claim_marker(ctx, &*objects, &site, &request.name, &metadata, holder)
                        .await?
                }
                SiteClaim::Segment(_) => false,
            };
            let sha256 = registered.sha256.clone();
            let row = TableRow {
                id: metadata.uuid().to_string(),
                namespace_id: ns.row.id.clone(),
                name: request.name.clone(),
                directory: Some(site.directory.clone()),
                bucket: Some(site.bucket.nickname.clone()),
                location: metadata.location().trim_end_matches('/').to_owned(),
                metadata_location: file.clone(),
                metadata_version: crate::catalog::metadata::version_in_name(&file),
                metadata_sha256: Some(sha256.clone()),
                storage_override: match &site.claim {
                    SiteClaim::Prefix(prefix) => Some(TableStorage {
                        bucket: site.bucket.nickname.clone(),
                        prefix: prefix.clone(),
                    }),
                    SiteClaim::Segment(_) => None,
                },
                created_ms: self.core.clock.now_ms(),
                deleting_until_ms: None,
            };
            let change = match self
                .registration_change(&ns, &site, &row, existing.as_ref(), dropped.as_ref())
                .await
            {
                Ok(change) => change,
                Err(e) => {
                    if marker {
                        storage::remove_marker(&*objects, &site.directory).await;
                    }
                    return Err(e);
                }
            };
            let event = Draft::new(
                Kind::TableRegistered,
                &ctx.org.name,
                &ns.row.name,
                &ns.row.id,
                &ctx.principal,
            )
            .table(&request.name, &row.id)
            .metadata(replaced.map(|r| r.metadata_location.as_str()), Some(&file));
            let outcome = self.core.changes.write(ctx.key(), change, event).await;
            if marker
                && matches!(
                    outcome,
                    Err(ChangeFailure::Refused(_) | ChangeFailure::Contended)
                )
            {
                storage::remove_marker(&*objects, &site.directory).await;
            }
            match outcome {
                Ok(()) => {
                    tracing::info!(audit = "table", org = %ctx.org.name, namespace, table = %request.name, by = %ctx.principal.id, metadata_location = %file, "table registered");
                    return self
                        .table_result(
                            ctx,
                            TableAt {
                                ns: &ns.row,
                                bucket: &site.bucket,
                                name: &request.name,
                                directory: &site.directory,
                            },
                            Some(file),
                            (registered.json, sha256),
                            options,
                        )
                        .await;
                }
                Err(ChangeFailure::Refused(RegisterPart::Namespace) | ChangeFailure::Contended) => {
                    continue;
                }
                Err(ChangeFailure::Refused(RegisterPart::Name)) if !overwrite => {
                    return Err(table_already_exists(namespace, &request.name));
                }
                // The table was committed, dropped or created meanwhile, or the dropped table
                // taken over was restored or fenced: read it again.
                Err(ChangeFailure::Refused(RegisterPart::Name | RegisterPart::Dropped)) => {
                    continue;
                }
                Err(ChangeFailure::Refused(RegisterPart::NotAView)) => {
                    return Err(super::view_holds_name(namespace, &request.name));
                }
                Err(ChangeFailure::Refused(
                    RegisterPart::Directory | RegisterPart::OverridePrefix,
                )) => return Err(directory_taken(&site.directory)),
                Err(ChangeFailure::NotWritten(e)) => return Err(e.into()),
                Err(ChangeFailure::Unknown(e)) => {
                    tracing::error!(error = %e, org = %ctx.org.name, namespace, table = %request.name, "table registration outcome unknown");
                    return Err(CatalogError::CommitStateUnknown(format!(
                        "Commit state unknown for {namespace}.{}: the catalog could not confirm the table was registered; load it before retrying",
                        request.name
                    )));
                }
            }
        }
        Err(CatalogError::contended("The table"))
    }

    /// Removes the table from the catalog, keeping every file, and gives its directory up: the
    /// table may be registered again, here or in another catalog. Commits that read the table
    /// before fail, as the row they would swap is gone.
    pub async fn unregister_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<UnregisterTableResult> {
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(
                &ctx.access,
                Resource::Table {
                    namespace: &ns.row,
                    table,
                },
                Action::Write,
            )?;
            let row = self.core.lookups.table_row(&ns.row, table).await?;
            let bucket = self
                .core
                .lookups
                .table_bucket(ctx, &ns.row, &row.row)
                .await?;
            let objects = self.core.lookups.objects_for(&bucket).await?;
            let current = self
                .metadata
                .load(
                    &*objects,
                    &crate::catalog::table_ref(ctx, &ns.row, &row.row),
                )
                .await?;
            let mut writes = super::leaving_namespace(ctx, &ns, table, row.token).to_vec();
            writes.extend(
                placement::claim_releases(&*self.core.store, &ns.row, &bucket, &row.row).await?,
            );
            let event = Draft::new(
                Kind::TableUnregistered,
                &ctx.org.name,
                &ns.row.name,
                &ns.row.id,
                &ctx.principal,
            )
            .table(table, &row.row.id)
            .metadata(Some(&row.row.metadata_location), None);
            let answer = serde_json::to_string(&Unregistered {
                bucket: bucket.nickname.clone(),
                metadata_location: row.row.metadata_location.clone(),
            })
            .expect("answer serializes");
            match self
                .core
                .changes
                .write_answering(ctx.key(), Change::as_read(writes), event, Some(answer))
                .await
            {
                Ok(()) => {
                    if row.row.storage_override.is_some() {
                        storage::remove_marker(&*objects, row.row.directory()).await;
                    }
                    tracing::info!(audit = "table", org = %ctx.org.name, namespace, table, by = %ctx.principal.id, "table unregistered");
                    return Ok(UnregisterTableResult {
                        metadata_location: row.row.metadata_location.clone(),
                        metadata: current.raw.clone(),
                    });
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The table"))
    }

    /// The answer to a retried unregister whose change landed: the same file, read again
    /// (the catalog no longer knows the table; `recorded` is what the change recorded).
    pub async fn replay_unregister(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        recorded: &str,
    ) -> Result<UnregisterTableResult> {
        let recorded: Unregistered = serde_json::from_str(recorded)
            .map_err(|e| CatalogError::Internal(format!("unreadable recorded answer: {e}")))?;
        let ns = self.core.lookups.recent_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&ns), Action::Read)?;
        let bucket = self
            .core
            .lookups
            .usable_bucket(&ctx.org.name, &recorded.bucket)
            .await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let file = read_registered_file(&*objects, &recorded.metadata_location).await?;
        Ok(UnregisterTableResult {
            metadata_location: recorded.metadata_location,
            metadata: file.json,
        })
    }

    /// The directory a file at `file` would make its table own.
    async fn registration_site(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        file: &str,
    ) -> Result<Site> {
        if storage::is_within(file, &ns.location) {
            let (segment, _) = placement::explicit_directory(&ns.location, file)?;
            let bucket = self
                .core
                .lookups
                .usable_bucket(&ctx.org.name, &ns.bucket)
                .await?;
            return Ok(Site {
                bucket,
                directory: join(&ns.location, &segment),
                claim: SiteClaim::Segment(segment),
            });
        }
        let buckets: Vec<BucketRow> = rows::collect(
            &*self.core.store,
            &keys::org_partition(&ctx.org.name),
            "BUCKET#",
            None,
            usize::MAX,
            |b: &BucketRow| storage::is_within(file, &b.root),
        )
        .await?;
        let Some(closest) = buckets.into_iter().max_by_key(|b| b.root.len()) else {
            return Err(CatalogError::BadRequest(format!(
                "Metadata file '{file}' is outside the namespace's storage and every bucket configuration of the org"
            )));
        };
        let bucket = self
            .core
            .lookups
            .usable_bucket(&ctx.org.name, &closest.nickname)
            .await?;
        if crate::authz::is_public(ns)
            && !crate::catalog::access::grants::vends_through_role(&bucket)
        {
            return Err(crate::catalog::access::grants::public_storage_refused(
                &format!("a table registered on bucket '{}'", bucket.nickname),
            ));
        }
        let (prefix, _) = placement::explicit_directory(&bucket.root, file)?;
        Ok(Site {
            directory: join(&bucket.root, &prefix),
            bucket,
            claim: SiteClaim::Prefix(prefix),
        })
    }

    /// The recoverable dropped table of `ns` whose directory a registration of `file` would
    /// take, where `file` is verifiably that table's own: the metadata file it recorded last,
    /// with the digest recorded for it. Such a registration takes the dropped table over (the
    /// way Java catalogs are used: drop, then register the file); any other holder of the
    /// directory, another namespace's dropped table included, keeps it.
    async fn dropped_owner(
        &self,
        ns: &NamespaceRow,
        site: &Site,
        file: &str,
        sha256: &str,
    ) -> Result<Option<Versioned<DroppedTableRow>>> {
        let store = &*self.core.store;
        let holder = match &site.claim {
            SiteClaim::Segment(segment) => {
                rows::get::<DirectoryClaimRow>(store, &keys::directory_claim(&ns.id, segment))
                    .await?
                    .map(|claim| claim.row.table_id)
            }
            SiteClaim::Prefix(prefix) => {
                rows::get::<PrefixClaimRow>(store, &keys::prefix_claim(&site.bucket.root, prefix))
                    .await?
                    .map(|claim| claim.row.owner)
            }
        };
        let Some(holder) = holder else {
            return Ok(None);
        };
        let Some(dropped) =
            rows::get::<DroppedTableRow>(store, &keys::dropped_table(&ns.id, &holder)).await?
        else {
            return Ok(None);
        };
        let table = &dropped.row.table;
        let verified = dropped.row.purging.is_none()
            && table.namespace_id == ns.id
            && table.directory().trim_end_matches('/') == site.directory.trim_end_matches('/')
            && table.metadata_location == file
            && table.metadata_sha256.as_deref() == Some(sha256);
        Ok(verified.then_some(dropped))
    }

    /// Claims an override directory in storage: writes its marker (or finds the one of the
    /// table being replaced or taken over) and makes sure no other owner's marker lies below it. True when
    /// this call wrote the marker, which must then be removed if the table is not registered.
    async fn claim_marker(
        &self,
        ctx: &OrgContext,
        objects: &dyn crate::objects::ObjectStore,
        site: &Site,
        name: &str,
        metadata: &TableMetadata,
        replaced: Option<&TableRow>,
    ) -> Result<bool> {
        let ours = replaced.is_some_and(|r| r.directory() == site.directory);
        let owner = MarkerOwner {
            org: &ctx.org.name,
            kind: "table",
            name,
            id: &metadata.uuid().to_string(),
            created_ms: self.core.clock.now_ms(),
        };
        let wrote = storage::write_marker(objects, &site.directory, &owner).await?;
        if !wrote && !ours {
            return Err(directory_taken(&site.directory));
        }
        // Written first, searched second: of two registrations nesting into each other, each
        // finds the other's marker.
        let own_marker = join(&site.directory, storage::MARKER_FILE);
        let listed = objects
            .list(
                &format!("{}/", site.directory),
                MAX_LISTED_OBJECTS.saturating_add(1),
            )
            .await;
        let refusal = match listed {
            Err(e) => Some(CatalogError::from(e)),
            Ok(found) if found.len() > MAX_LISTED_OBJECTS => {
                Some(CatalogError::BadRequest(format!(
                    "Directory '{}' holds more than {MAX_LISTED_OBJECTS} objects: register the table from inside a namespace's storage, or from a bucket configuration whose root is closer to it",
                    site.directory
                )))
            }
            Ok(found) => found
                .iter()
                .any(|l| *l != own_marker && l.ends_with(&format!("/{}", storage::MARKER_FILE)))
                .then(|| directory_taken(&site.directory)),
        };
        match refusal {
            None => Ok(wrote),
            Some(e) => {
                if wrote {
                    storage::remove_marker(objects, &site.directory).await;
                }
                Err(e)
            }
        }
    }

    /// The store write of a registration: the namespace (its table count, and that it is still
    /// live), the name, and the directory's claim.
    async fn registration_change(
        &self,
        ns: &Versioned<NamespaceRow>,
        site: &Site,
        row: &TableRow,
        existing: Option<&Versioned<TableRow>>,
        dropped: Option<&Versioned<DroppedTableRow>>,
    ) -> Result<Change<RegisterPart>> {
        let mut ns_row = ns.row.clone();
        if existing.is_none() {
            ns_row.table_count += 1;
        }
        if existing.is_some_and(|e| e.row.is_fenced(self.core.clock.now_ms())) {
            // A maintenance run is deleting files of the table this would replace.
            return Err(CatalogError::CommitFailed(format!(
                "Table {}.{} is being maintained; retry the registration",
                ns.row.name, row.name
            )));
        }
        let name_condition = match existing {
            Some(e) => Condition::TokenIs(e.token),
            None => Condition::NotExists,
        };
        let mut change = Change::new()
            .with(
                RegisterPart::Namespace,
                rows::put(
                    keys::namespace(&ns.row.org, &ns.row.name),
                    &ns_row,
                    Condition::VersionIs(ns.version),
                ),
            )
            .with(
                RegisterPart::Name,
                rows::put_tokened(
                    keys::table(&ns.row.id, &row.name),
                    row,
                    name_condition,
                    existing.map(|e| e.version),
                ),
            )
            .with(
                RegisterPart::NotAView,
                super::no_view_named(&ns.row.id, &row.name),
            );
        let replaced = existing.map(|e| &e.row);
        // The claim may pass from the table replaced, or from the dropped table taken over.
        let passes_from = |holder: &str| {
            replaced.is_some_and(|r| r.id == holder)
                || dropped.is_some_and(|d| d.row.table.id == holder)
        };
        if let Some(dropped) = dropped {
            // It leaves the recovery list in the same write, with any grants an earlier
            // version kept on it going back to their name.
            change.push(
                RegisterPart::Dropped,
                Write::Delete {
                    key: keys::dropped_table(&ns.row.id, &dropped.row.table.id),
                    condition: Condition::VersionIs(dropped.version),
                },
            );
            for write in
                AccessService::return_kept_grants(&*self.core.store, &ns.row, &dropped.row).await?
            {
                change.push(RegisterPart::Dropped, write);
            }
        }
        match &site.claim {
            SiteClaim::Segment(segment) => {
                let key = keys::directory_claim(&ns.row.id, segment);
                let held = rows::get::<DirectoryClaimRow>(&*self.core.store, &key).await?;
                let condition = match held {
                    None => {
                        // Rows older than directory claims carry no claim to find.
                        if self
                            .overlaps_a_row(
                                &ns.row,
                                &site.directory,
                                replaced.map(|r| r.id.as_str()),
                            )
                            .await?
                        {
                            return Err(directory_taken(&site.directory));
                        }
                        Condition::NotExists
                    }
                    Some(claim) if passes_from(&claim.row.table_id) => {
                        Condition::VersionIs(claim.version)
                    }
                    Some(_) => return Err(directory_taken(&site.directory)),
                };
                let claim = DirectoryClaimRow {
                    directory: site.directory.clone(),
                    table_id: row.id.clone(),
                };
                change.push(RegisterPart::Directory, rows::put(key, &claim, condition));
            }
            SiteClaim::Prefix(prefix) => {
                let key = keys::prefix_claim(&site.bucket.root, prefix);
                let held = rows::get::<PrefixClaimRow>(&*self.core.store, &key).await?;
                let condition = match held {
                    None => Condition::NotExists,
                    Some(claim) if passes_from(&claim.row.owner) => {
                        Condition::VersionIs(claim.version)
                    }
                    Some(_) => return Err(directory_taken(&site.directory)),
                };
                let claim = PrefixClaimRow {
                    bucket_root: site.bucket.root.clone(),
                    prefix: prefix.clone(),
                    owner: row.id.clone(),
                };
                change.push(
                    RegisterPart::OverridePrefix,
                    rows::put(key, &claim, condition),
                );
            }
        }
        Ok(change)
    }
}

/// A metadata file location a registration (of a table or a view) may name: a clean, absolute
/// `.metadata.json` path (`.gz.metadata.json` or `.metadata.json.gz` for gzip).
pub(crate) fn registrable_file(location: &str) -> Result<String> {
    let file = location.trim();
    if !placement::is_clean_location(file) || file.ends_with('/') {
        return Err(CatalogError::BadRequest(format!(
            "Metadata location '{location}' is not a clean absolute location"
        )));
    }
    if !file.ends_with(".metadata.json") && !file.ends_with(".metadata.json.gz") {
        return Err(CatalogError::BadRequest(format!(
            "Metadata location '{location}' does not name a metadata file (*.metadata.json, *.gz.metadata.json or *.metadata.json.gz)"
        )));
    }
    Ok(file.to_owned())
}

/// A file a registration names, as stored (what its recorded SHA-256 is of) and as JSON
/// (inflated when its name says gzip).
pub(crate) struct RegisteredFile {
    pub sha256: String,
    pub json: Bytes,
}

/// A file a registration names, or 400 when it is not there or cannot be read.
pub(crate) async fn read_registered_file(
    objects: &dyn crate::objects::ObjectStore,
    file: &str,
) -> Result<RegisteredFile> {
    let stored = objects.get(file).await.map_err(|e| match e {
        ObjectError::NotFound(_) => {
            CatalogError::BadRequest(format!("Metadata file '{file}' does not exist"))
        }
        other => other.into(),
    })?;
    let sha256 = crate::catalog::metadata::sha256_hex(&stored);
    let json = crate::catalog::metadata::decode_stored(file, stored).map_err(|why| {
        CatalogError::BadRequest(format!("Metadata file '{file}' cannot be read: {why}"))
    })?;
    if format_versions::mentions_defaults(&json)
        && let Ok(document) = serde_json::from_slice::<serde_json::Value>(&json)
    {
        format_versions::check_defaults_readable(&document).map_err(CatalogError::BadRequest)?;
    }
    Ok(RegisteredFile { sha256, json })
}

/// The file as table metadata, checked by the `iceberg` crate's own parser (references,
/// ids, versions).
fn parse_metadata(raw: &[u8]) -> Result<TableMetadata> {
    serde_json::from_slice(raw).map_err(|e| {
        CatalogError::BadRequest(format!(
            "The metadata file is not valid Iceberg table metadata: {e}"
        ))
    })
}

fn directory_taken(directory: &str) -> CatalogError {
    CatalogError::BadRequest(format!(
        "Directory '{directory}' belongs to another table or namespace: a registered table needs a directory of its own"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_files_are_clean_json_plain_or_gzip() {
        for good in [
            "s3://b/ns/t/metadata/00001-a.metadata.json",
            "s3://b/ns/t/metadata/00001-a.gz.metadata.json",
            "s3://b/ns/t/metadata/v3.metadata.json.gz",
        ] {
            assert!(registrable_file(good).is_ok(), "{good}");
        }
        for bad in [
            "s3://b/ns/t/metadata/00001-a.json.gz",
            "s3://b/ns/t/metadata/",
            "s3://b/ns/../t/metadata/v1.metadata.json",
            "s3://b/ns/t/data/part.parquet",
            "ns/t/metadata/v1.metadata.json",
        ] {
            assert!(registrable_file(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_come_from_the_file_name() {
        use crate::catalog::metadata::version_in_name;
        assert_eq!(
            version_in_name("s3://b/t/metadata/00012-x.metadata.json"),
            12
        );
        assert_eq!(version_in_name("s3://b/t/metadata/v7.metadata.json"), 7);
        assert_eq!(
            version_in_name("s3://b/t/metadata/current.metadata.json"),
            0
        );
    }
}
