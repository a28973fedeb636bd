//! Typed catalog rows and where each lives in the single-table key space.
//!
//! Every row is stored as JSON in an item's body; the item's version counts its writes and is
//! what conditional writes compare. Keys follow the design's DynamoDB sketch.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::{Condition, Item, Key, MetaStore, StoreError, Token, Write};
use crate::auth::Principal;

/// An organization: the catalog's warehouse.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OrgRow {
    pub name: String,
    pub iceberg_enabled: bool,
    /// Nickname of the bucket configuration namespaces use unless they name another.
    pub default_bucket: String,
    pub created_ms: u64,
}

/// Which storage platform a bucket configuration points at.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Platform {
    /// A directory on the server's own filesystem (`file://` locations).
    Local,
    /// Amazon S3 or an S3-compatible service.
    S3,
    /// Azure Blob Storage: configurable for repos, refused for Iceberg storage.
    Azure,
}

/// How the catalog reaches a bucket.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BucketAuth {
    /// The server's own access (local filesystem).
    Server,
    /// Public-read without credentials: cannot back Iceberg storage.
    Anonymous,
    /// A customer-managed role the catalog assumes to vend scoped credentials.
    CustomerManagedRole {
        role_arn: String,
        external_id: Option<String>,
    },
    /// Static HMAC keys, handed to engines as they are.
    Hmac {
        access_key_id: String,
        secret_access_key: String,
    },
}

/// A bucket configuration of an org, addressed by its nickname.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BucketRow {
    pub nickname: String,
    pub platform: Platform,
    /// Root URL, e.g. `file:///srv/warehouse` or `s3://bucket/prefix`, without a trailing `/`.
    pub root: String,
    pub auth: BucketAuth,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub path_style: bool,
}

/// Who holds a name in an org: namespaces and repos share one case-insensitive set.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NameClaimRow {
    pub name: String,
    pub holder: NameHolder,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NameHolder {
    Namespace { id: String },
    Repo,
}

/// A storage prefix claimed by a namespace or a table override (the collision guard).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PrefixClaimRow {
    pub bucket_root: String,
    pub prefix: String,
    pub owner: String,
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
    /// Live tables; a namespace can only be dropped at zero.
    pub table_count: u64,
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
}

fn is_zero(n: &u32) -> bool {
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
}

impl TableRow {
    /// The directory the table owns.
    pub fn directory(&self) -> &str {
        self.directory.as_deref().unwrap_or(&self.location)
    }
}

/// A table directory claimed inside a namespace, so that no two tables (live or dropped, whose
/// files stay) ever share one. Kept until the namespace is purged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DirectoryClaimRow {
    pub directory: String,
    pub table_id: String,
}

/// An api-client token, stored by the SHA-256 of its secret only.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenRow {
    pub principal: Principal,
    pub created_ms: u64,
}

/// An org role: what an org member may do with every namespace in the org.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum OrgRole {
    Read,
    Write,
    Admin,
}

/// Membership of a principal in an org.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemberRow {
    pub principal_id: String,
    pub role: OrgRole,
}

/// Key builders: the one place that knows the key layout.
pub mod keys {
    use super::Key;

    pub fn org(org: &str) -> Key {
        Key::new(format!("ORG#{org}"), "ORG")
    }
    pub fn bucket(org: &str, nickname: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("BUCKET#{nickname}"))
    }
    pub fn name_claim(org: &str, name: &str) -> Key {
        Key::new(
            format!("ORG#{org}"),
            format!("NAME#{}", name.to_lowercase()),
        )
    }
    pub fn namespace(org: &str, name: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("NS#{name}"))
    }
    pub const NAMESPACE_PREFIX: &str = "NS#";
    pub fn org_partition(org: &str) -> String {
        format!("ORG#{org}")
    }
    pub fn prefix_claim(bucket_root: &str, prefix: &str) -> Key {
        Key::new(format!("PREFIX#{bucket_root}#{prefix}"), "PREFIX")
    }
    pub fn table(namespace_id: &str, name: &str) -> Key {
        Key::new(format!("NS#{namespace_id}"), format!("TABLE#{name}"))
    }
    pub const TABLE_PREFIX: &str = "TABLE#";
    /// Claim of a table directory (its last path segment) inside a namespace.
    pub fn directory_claim(namespace_id: &str, segment: &str) -> Key {
        Key::new(format!("NS#{namespace_id}"), format!("DIR#{segment}"))
    }
    pub const DIRECTORY_PREFIX: &str = "DIR#";
    pub fn namespace_partition(namespace_id: &str) -> String {
        format!("NS#{namespace_id}")
    }
    /// Partition of the sparse index entry of every soft-deleted namespace.
    pub const DELETED_NAMESPACES: &str = "DELETED_NS";
    /// Index entry of a soft-deleted namespace, ordered by deletion time.
    pub fn deleted_namespace(deleted_ms: u64, org: &str, name: &str) -> Key {
        Key::new(
            DELETED_NAMESPACES,
            format!("{}#{org}#{name}", deleted_sort_key(deleted_ms)),
        )
    }
    /// The index sort key prefix of a deletion time (zero-padded, so order is time order).
    pub fn deleted_sort_key(deleted_ms: u64) -> String {
        format!("{deleted_ms:020}")
    }
    pub fn token(hash_hex: &str) -> Key {
        Key::new(format!("TOKEN#{hash_hex}"), "TOKEN")
    }
    pub fn member(org: &str, principal_id: &str) -> Key {
        Key::new(format!("ORG#{org}"), format!("MEMBER#{principal_id}"))
    }
}

/// A row read with the version (and write token) it was read at.
#[derive(Debug, Clone)]
pub struct Versioned<T> {
    pub row: T,
    pub version: u64,
    pub token: Option<Token>,
}

/// Decodes an item's body into a row.
pub fn decode<T: DeserializeOwned>(item: &Item) -> Result<T, StoreError> {
    serde_json::from_slice(&item.body).map_err(|e| StoreError::Corrupt {
        key: item.key.clone(),
        reason: e.to_string(),
    })
}

/// Reads and decodes one row.
pub async fn get<T: DeserializeOwned>(
    store: &dyn MetaStore,
    key: &Key,
) -> Result<Option<Versioned<T>>, StoreError> {
    match store.get(key).await? {
        Some(item) => Ok(Some(Versioned {
            row: decode(&item)?,
            version: item.version,
            token: item.token,
        })),
        None => Ok(None),
    }
}

/// A put of `row` at `key`: version 1 when created, `expected + 1` when replacing.
pub fn put<T: Serialize>(key: Key, row: &T, condition: Condition) -> Write {
    put_indexed(key, row, condition, None)
}

/// A put that also places the item in the sparse index under `index`.
pub fn put_indexed<T: Serialize>(
    key: Key,
    row: &T,
    condition: Condition,
    index: Option<Key>,
) -> Write {
    put_item(key, row, condition, index, None)
}

/// A put of a row that carries a write token; `token` must be freshly drawn for this write.
/// `previous_version` is the version read (`None` for a new row).
pub fn put_tokened<T: Serialize>(
    key: Key,
    row: &T,
    condition: Condition,
    previous_version: Option<u64>,
    token: Token,
) -> Write {
    let mut write = put_item(key, row, condition, None, Some(token));
    if let Write::Put { item, .. } = &mut write {
        item.version = previous_version.map_or(1, |v| v + 1);
    }
    write
}

fn put_item<T: Serialize>(
    key: Key,
    row: &T,
    condition: Condition,
    index: Option<Key>,
    token: Option<Token>,
) -> Write {
    let version = match condition {
        Condition::VersionIs(v) => v + 1,
        _ => 1,
    };
    let body = serde_json::to_vec(row).expect("catalog rows always serialize");
    Write::Put {
        item: Item {
            key,
            version,
            token,
            body,
            index,
        },
        condition,
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
