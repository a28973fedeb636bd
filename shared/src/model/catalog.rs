//! What the catalog holds: orgs, namespaces and tables, each with its storage binding.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// An organization: the catalog's warehouse.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OrgRow {
    pub name: String,
    pub iceberg_enabled: bool,
    /// Nickname of the bucket configuration namespaces use unless they name another.
    pub default_bucket: String,
    pub created_ms: u64,
}

/// Namespace visibility.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Visibility {
    #[default]
    Private,
    AuthenticatedPublic,
}

/// A namespace and its storage binding.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NamespaceRow {
    pub id: String,
    pub org: String,
    pub name: String,
    pub bucket: String,
    /// Server-generated prefix inside the bucket.
    pub prefix: String,
    /// Storage root URL of the namespace: `<bucket root>/<prefix>`.
    pub location: String,
    pub properties: BTreeMap<String, String>,
    #[serde(default)]
    pub visibility: Visibility,
    /// Free text shown to people browsing the catalog (management API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Arbitrary JSON the org attaches to the namespace (management API).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Live tables; a namespace can only be dropped at zero.
    pub table_count: u64,
    /// Live views; a namespace can only be dropped at zero.
    #[serde(default, skip_serializing_if = "is_no_view")]
    pub view_count: u64,
    pub created_ms: u64,
    /// Set while soft-deleted: the name and prefix stay claimed until the purge.
    #[serde(default)]
    pub deleted_ms: Option<u64>,
    /// When the purge fenced the namespace before touching its files: it can no longer be
    /// restored, only finished by the purge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purging: Option<u64>,
    /// Purge attempts that failed so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub purge_attempts: u32,
    /// Why the last failed purge attempt failed (a short message, for operators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_last_error: Option<String>,
    /// Where the purge index orders the namespace when not at `deleted_ms`: after a failed
    /// attempt it is moved behind the namespaces due, by a backoff (see `purge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_index_ms: Option<u64>,
    /// When an admin asked for the namespace to be purged now (`immediate=true`) instead of
    /// after the recovery period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_requested_ms: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_no_view(n: &u64) -> bool {
    *n == 0
}

/// A storage override bound to one table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableStorage {
    pub bucket: String,
    pub prefix: String,
}

/// A table: the single source of truth for its identity, where it lives and its current
/// metadata. Nothing read from storage may change these fields except through a verified commit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableRow {
    /// The table uuid; every metadata file of the table must carry it.
    pub id: String,
    pub namespace_id: String,
    pub name: String,
    /// The server-assigned directory that holds every file of the table, immutable and shared
    /// with no other table; vended credentials are scoped to it. Rows written before directories
    /// were recorded use their `location`.
    #[serde(default)]
    pub directory: Option<String>,
    /// Bucket configuration of the directory (the namespace's, or the override's). Rows written
    /// before it was recorded use the override's or the namespace's.
    #[serde(default)]
    pub bucket: Option<String>,
    /// The metadata's `location` (inside `directory`).
    pub location: String,
    pub metadata_location: String,
    /// Number of the current metadata file (`NNNNN-` in its name).
    pub metadata_version: u64,
    /// SHA-256 (hex) of the current metadata file as the catalog wrote it.
    #[serde(default)]
    pub metadata_sha256: Option<String>,
    #[serde(default)]
    pub storage_override: Option<TableStorage>,
    pub created_ms: u64,
    /// Until when (Unix ms) a maintenance run is deleting files the table no longer
    /// references: no commit lands before it passes or the run lifts it, so nothing a commit
    /// references can be among the files being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting_until_ms: Option<u64>,
}

impl TableRow {
    /// The bucket configuration the table's files live on: as the row binds it, or for rows
    /// written before the binding was recorded, its override's, else its namespace's.
    pub fn bucket_nickname<'a>(&'a self, namespace: &'a NamespaceRow) -> &'a str {
        self.bucket
            .as_ref()
            .or(self.storage_override.as_ref().map(|o| &o.bucket))
            .unwrap_or(&namespace.bucket)
    }
}

/// A view: its identity, its directory and its current metadata file, as a table row records
/// them (views have no storage overrides).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ViewRow {
    /// The view uuid.
    pub id: String,
    pub namespace_id: String,
    pub name: String,
    /// The directory the view owns (claimed like a table's); its metadata files go there.
    pub directory: String,
    /// Bucket configuration of the directory (the namespace's).
    pub bucket: String,
    /// The metadata's `location`.
    pub location: String,
    pub metadata_location: String,
    /// Number of the current metadata file (`NNNNN-` in its name).
    pub metadata_version: u64,
    /// SHA-256 (hex) of the current metadata file.
    pub metadata_sha256: String,
    pub created_ms: u64,
}

/// A dropped table, recoverable until its purge: its row as it was when dropped and the purge's
/// bookkeeping. Its directory stays claimed until the purge. It holds no grants: table grants
/// stay on their names.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DroppedTableRow {
    pub org: String,
    /// The namespace's name when the table was dropped (`table.namespace_id` is its id).
    pub namespace: String,
    pub table: TableRow,
    pub dropped_ms: u64,
    /// Table grants an earlier version moved here from the name on a drop; put back on the name
    /// by the next write of this row or the purge's run (`return_kept_grants`). Never written
    /// non-empty now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<super::GrantRow>,
    /// Whether the purge deletes the table's files (else it removes only what the catalog
    /// keeps: rows, claims, grants). True unless the namespace's policy keeps dropped tables'
    /// data and the drop did not ask for a purge.
    pub purge_files: bool,
    /// An admin asked for the purge now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_requested_ms: Option<u64>,
    /// Set when the purge fenced the table: from then on it cannot be restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purging: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub purge_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_last_error: Option<String>,
    /// Where the purge index orders it, when not by `dropped_ms` (an immediate request, or
    /// the next attempt after a failed one), as for namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_index_ms: Option<u64>,
}

impl TableRow {
    /// The directory the table owns.
    pub fn directory(&self) -> &str {
        self.directory.as_deref().unwrap_or(&self.location)
    }

    /// Whether a maintenance run holds the table's commits off at `now_ms`.
    pub fn is_fenced(&self, now_ms: u64) -> bool {
        self.deleting_until_ms.is_some_and(|until| until > now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_rows_written_before_the_purge_fence_still_decode() {
        let old = br#"{"id":"n1","org":"acme","name":"ns","bucket":"default","prefix":"ns-abc",
            "location":"file:///w/ns-abc","properties":{},"table_count":0,"created_ms":1,
            "deleted_ms":2}"#;
        let row: NamespaceRow = serde_json::from_slice(old).unwrap();
        assert_eq!(row.deleted_ms, Some(2));
        assert_eq!(
            (
                row.purging,
                row.purge_attempts,
                row.purge_last_error.as_deref()
            ),
            (None, 0, None)
        );
        assert_eq!(row.purge_index_ms, None);
        // Rows without purge bookkeeping are written as before.
        let written = serde_json::to_value(&row).unwrap();
        assert!(
            written
                .as_object()
                .unwrap()
                .keys()
                .all(|k| !k.starts_with("purg")),
            "{written}"
        );
    }
}
