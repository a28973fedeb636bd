//! Where a new table's files go, and the rule that keeps every table inside its own directory.
//!
//! Each table owns one directory that no other table, live or dropped, ever shares: a
//! server-generated `<namespace root>/<sanitized name>-<random>` (so names such as `*` or `a?b`
//! never reach a path or an IAM policy as they are), a client-chosen fresh directory directly
//! under the namespace root, or its storage override's prefix. Directories under a namespace
//! root are claimed in the store in the same write that inserts the table. The metadata's
//! `location` and the location-bearing write properties must stay inside the directory.

use iceberg::spec::TableMetadata;

use super::TableService;
use crate::catalog::OrgContext;
use crate::catalog::storage::{self, MarkerOwner};
use crate::error::{CatalogError, Result};
use crate::model::{BucketRow, NamespaceRow, TableRow, TableStorage};
use crate::objects::join;
use crate::store::rows::{self, DirectoryClaimRow, PrefixClaimRow, keys};
use crate::store::{Condition, MetaStore, Write};

/// Table properties that name where engines write files.
pub const PATH_PROPERTIES: [&str; 3] = [
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
];

/// Where a new table's files go.
pub(super) struct Placement {
    pub bucket: BucketRow,
    /// The directory the table owns.
    pub directory: String,
    /// The metadata's `location`, inside `directory`.
    pub location: String,
    pub storage_override: Option<TableStorage>,
    /// The directory's segment under the namespace root, claimed with the table (`None` for an
    /// override, whose prefix claim guards it).
    pub claim: Option<String>,
}

impl TableService {
    /// Gives up a placement that no table row will hold: an override's marker is removed so
    /// its prefix is free again. Best effort: a marker left behind only keeps a prefix unused.
    pub(super) async fn release(&self, placement: &Placement) {
        if placement.storage_override.is_none() {
            return;
        }
        match self.core.lookups.objects_for(&placement.bucket).await {
            Ok(objects) => storage::remove_marker(&*objects, &placement.directory).await,
            Err(e) => tracing::warn!(error = %e, "could not release an unclaimed override prefix"),
        }
    }

    /// Chooses bucket, directory and location for a new table, claiming an override prefix in
    /// storage when the table names its own bucket.
    pub(super) async fn place_table(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        name: &str,
        requested: Option<&str>,
        override_bucket: Option<&str>,
    ) -> Result<Placement> {
        if let Some(nickname) = override_bucket {
            return self
                .place_on_override(ctx, ns, name, requested, nickname)
                .await;
        }
        let bucket = self
            .core
            .lookups
            .usable_bucket(&ctx.org.name, &ns.bucket)
            .await?;
        let (segment, location) = match requested {
            None => {
                let segment = storage::generate_prefix(name);
                let location = join(&ns.location, &segment);
                (segment, location)
            }
            Some(given) => {
                let (segment, location) = explicit_directory(&ns.location, given)?;
                self.check_directory_free(ns, &segment).await?;
                (segment, location)
            }
        };
        Ok(Placement {
            bucket,
            directory: join(&ns.location, &segment),
            location,
            storage_override: None,
            claim: Some(segment),
        })
    }

    async fn place_on_override(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        name: &str,
        requested: Option<&str>,
        nickname: &str,
    ) -> Result<Placement> {
        let bucket = self
            .core
            .lookups
            .usable_bucket(&ctx.org.name, nickname)
            .await?;
        // The storage rule of public namespaces holds for every table, not only those there
        // when the namespace went public: `ns` is the row this create's write is conditioned
        // on, so a concurrent visibility change either sees this table or makes it retry.
        if crate::authz::is_public(ns)
            && !crate::catalog::access::grants::vends_through_role(&bucket)
        {
            return Err(crate::catalog::access::grants::public_storage_refused(
                &format!("the storage override of table '{name}' (bucket '{nickname}')"),
            ));
        }
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let id = uuid::Uuid::now_v7().to_string();
        let owner = MarkerOwner {
            org: &ctx.org.name,
            kind: "table",
            name,
            id: &id,
            created_ms: self.core.clock.now_ms(),
        };
        let (prefix, root) = storage::reserve_prefix(&*objects, &bucket.root, name, &owner).await?;
        let location = match requested {
            None => root.clone(),
            Some(given) if is_clean_location(given) && storage::is_within(given, &root) => {
                storage::normalize_location(given)
            }
            Some(given) => {
                storage::remove_marker(&*objects, &root).await;
                return Err(outside(given));
            }
        };
        Ok(Placement {
            bucket,
            directory: root,
            location,
            storage_override: Some(TableStorage {
                bucket: nickname.to_owned(),
                prefix,
            }),
            claim: None,
        })
    }

    /// A client-chosen directory must be unclaimed and overlap no table whose row predates
    /// directory claims.
    async fn check_directory_free(&self, ns: &NamespaceRow, segment: &str) -> Result<()> {
        if self
            .core
            .store
            .get(&keys::directory_claim(&ns.id, segment))
            .await?
            .is_some()
        {
            return Err(overlaps(segment));
        }
        if self
            .overlaps_a_row(ns, &join(&ns.location, segment), None)
            .await?
        {
            return Err(overlaps(segment));
        }
        Ok(())
    }

    /// Whether `directory` overlaps the directory of a table row of the namespace (other than
    /// the table `except`): rows older than directory claims carry no claim to find.
    pub(super) async fn overlaps_a_row(
        &self,
        ns: &NamespaceRow,
        directory: &str,
        except: Option<&str>,
    ) -> Result<bool> {
        let overlapping: Vec<TableRow> = rows::collect(
            &*self.core.store,
            &keys::namespace_partition(&ns.id),
            keys::TABLE_PREFIX,
            None,
            1,
            |t: &TableRow| {
                except != Some(t.id.as_str())
                    && (storage::is_within(t.directory(), directory)
                        || storage::is_within(directory, t.directory()))
            },
        )
        .await?;
        Ok(!overlapping.is_empty())
    }
}

/// Splits a client-given location under the namespace root into the directory segment it names
/// and the normalized location. The root itself, anything outside it, `.`/`..` segments and
/// characters outside `[A-Za-z0-9._-]` in the directory segment are refused.
pub fn explicit_directory(root: &str, given: &str) -> Result<(String, String)> {
    let location = storage::normalize_location(given);
    if !is_clean_location(&location) || !storage::is_within(&location, root) {
        return Err(outside(given));
    }
    let below = location[root.trim_end_matches('/').len()..].trim_start_matches('/');
    let segment = below.split('/').next().unwrap_or_default();
    if segment.is_empty() {
        return Err(CatalogError::BadRequest(format!(
            "Table location '{given}' is the namespace's root: a table needs a directory of its own below it"
        )));
    }
    if !segment
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(CatalogError::BadRequest(format!(
            "Table location '{given}' names a directory with characters other than letters, digits, '.', '_' and '-'"
        )));
    }
    Ok((segment.to_owned(), location))
}

/// The metadata's location and every location-bearing property must lie inside `directory`.
/// With a `base`, only properties that changed are checked (rows older than this rule may carry
/// others).
pub fn check_paths(
    metadata: &TableMetadata,
    directory: &str,
    base: Option<&TableMetadata>,
) -> Result<()> {
    let location = metadata.location();
    let moved = base.is_none_or(|b| b.location() != location);
    if moved && !(is_clean_location(location) && storage::is_within(location, directory)) {
        return Err(outside(location));
    }
    for key in PATH_PROPERTIES {
        let Some(value) = metadata.properties().get(key) else {
            continue;
        };
        if base.is_some_and(|b| b.properties().get(key) == Some(value)) {
            continue;
        }
        if !(is_clean_location(value) && storage::is_within(value, directory)) {
            return Err(CatalogError::BadRequest(format!(
                "Property '{key}' = '{value}' is outside the table's directory"
            )));
        }
    }
    Ok(())
}

/// A location that must lie inside `directory` (a view's `location`, say).
pub fn check_location(location: &str, directory: &str) -> Result<()> {
    if is_clean_location(location) && storage::is_within(location, directory) {
        Ok(())
    } else {
        Err(outside(location))
    }
}

/// No empty, `.` or `..` segments after the scheme, no backslashes or control characters.
pub(super) fn is_clean_location(location: &str) -> bool {
    let Some((_, rest)) = location.split_once("://") else {
        return false;
    };
    let path = rest.trim_end_matches('/');
    !path.contains('\\')
        && !path.chars().any(char::is_control)
        && path
            .split('/')
            .skip(1)
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

fn outside(given: &str) -> CatalogError {
    CatalogError::BadRequest(format!(
        "Table location '{given}' is outside the table's own directory"
    ))
}

fn overlaps(segment: &str) -> CatalogError {
    CatalogError::BadRequest(format!(
        "Table directory '{segment}' belongs to another table of the namespace: choose another location or let the catalog assign one"
    ))
}

/// The deletes that give a table's directory up, where the table still holds it: its override
/// prefix's claim, or the claim of its directory in the namespace (an unregister, a purge).
pub(super) async fn claim_releases(
    store: &dyn MetaStore,
    ns: &NamespaceRow,
    bucket: &BucketRow,
    row: &TableRow,
) -> Result<Vec<Write>> {
    let mut writes = vec![];
    if let Some(o) = &row.storage_override {
        let key = keys::prefix_claim(&bucket.root, &o.prefix);
        if let Some(claim) = rows::get::<PrefixClaimRow>(store, &key).await?
            && claim.row.owner == row.id
        {
            writes.push(Write::Delete {
                key,
                condition: Condition::VersionIs(claim.version),
            });
        }
    } else if let Ok((segment, _)) = explicit_directory(&ns.location, row.directory()) {
        let key = keys::directory_claim(&ns.id, &segment);
        if let Some(claim) = rows::get::<DirectoryClaimRow>(store, &key).await?
            && claim.row.table_id == row.id
        {
            writes.push(Write::Delete {
                key,
                condition: Condition::VersionIs(claim.version),
            });
        }
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "s3://b/ns-abc";

    #[test]
    fn explicit_directories_are_fresh_children_of_the_root() {
        assert_eq!(
            explicit_directory(ROOT, "s3://b/ns-abc/orders/").unwrap(),
            ("orders".to_owned(), "s3://b/ns-abc/orders".to_owned())
        );
        assert_eq!(
            explicit_directory(ROOT, "s3://b/ns-abc/orders/v2").unwrap(),
            ("orders".to_owned(), "s3://b/ns-abc/orders/v2".to_owned())
        );
        for bad in [
            "s3://b/ns-abc",
            "s3://b/ns-abc/",
            "s3://b/ns-abcd/t",
            "s3://b/other/t",
            "s3://b/ns-abc/../other",
            "s3://b/ns-abc/./t",
            "s3://b/ns-abc/a*b",
            "s3://b/ns-abc/a?b",
            "s3://b/ns-abc//t",
            "s3://b/ns-abc/t\\..\\x",
            "ns-abc/t",
        ] {
            assert!(explicit_directory(ROOT, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn clean_locations() {
        assert!(is_clean_location("s3://b/p/t"));
        assert!(is_clean_location("file:///w/p/t"));
        assert!(!is_clean_location("s3://b/p/../t"));
        assert!(!is_clean_location("s3://b/p/./t"));
        assert!(!is_clean_location("s3://b/p//t"));
        assert!(!is_clean_location("/w/p"));
    }
}
