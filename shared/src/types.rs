//! Request and response shapes of the Iceberg REST spec that the catalog speaks.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{Schema, SortOrder, UnboundPartitionSpec};
use serde::{Deserialize, Serialize};

use crate::vending::StorageCredential;

/// `GET /v1/config` response (the spec's CatalogConfig).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CatalogConfig {
    pub defaults: BTreeMap<String, String>,
    pub overrides: BTreeMap<String, String>,
    pub endpoints: Vec<String>,
    /// Advertises `Idempotency-Key` support: how long a client may retry with one key
    /// (ISO-8601, e.g. `PT30M`).
    #[serde(
        rename = "idempotency-key-lifetime",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotency_key_lifetime: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateNamespaceRequest {
    pub namespace: Vec<String>,
    #[serde(default)]
    pub properties: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NamespaceResponse {
    pub namespace: Vec<String>,
    pub properties: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ListNamespacesResponse {
    pub namespaces: Vec<Vec<String>>,
    #[serde(rename = "next-page-token", skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<Option<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateNamespacePropertiesRequest {
    #[serde(default)]
    pub removals: Option<Vec<String>>,
    #[serde(default)]
    pub updates: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UpdateNamespacePropertiesResponse {
    pub updated: Vec<String>,
    pub removed: Vec<String>,
    pub missing: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct TableIdentifier {
    pub namespace: Vec<String>,
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ListTablesResponse {
    pub identifiers: Vec<TableIdentifier>,
    #[serde(rename = "next-page-token", skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<Option<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CreateTableRequest {
    pub name: String,
    #[serde(default)]
    pub location: Option<String>,
    pub schema: Schema,
    #[serde(default)]
    pub partition_spec: Option<UnboundPartitionSpec>,
    #[serde(default)]
    pub write_order: Option<SortOrder>,
    #[serde(default)]
    pub stage_create: Option<bool>,
    #[serde(default)]
    pub properties: Option<HashMap<String, String>>,
}

/// LoadTableResult: the answer of createTable and loadTable.
#[derive(Debug, Clone)]
pub struct LoadTableResult {
    pub metadata_location: Option<String>,
    /// The metadata document exactly as stored: it is spliced into the answer, never re-parsed.
    pub metadata: bytes::Bytes,
    /// What identifies `metadata`'s bytes: the file's SHA-256, and how it was trimmed.
    pub metadata_id: String,
    pub config: BTreeMap<String, String>,
    pub storage_credentials: Vec<StorageCredential>,
    /// The answer's entity tag ([`entity_tag`]).
    pub etag: String,
}

/// A loadTable answer with its envelope serialised once: what the warm loads of an unchanged
/// table share (see `core::answers`), so that each of them only sends bytes already made.
#[derive(Debug)]
pub struct ReadyAnswer {
    result: LoadTableResult,
    prefix: bytes::Bytes,
    suffix: bytes::Bytes,
    /// The body in one buffer, for answers under [`ReadyAnswer::WHOLE_BELOW`]: sent as one
    /// frame, where a large document is sent as the three parts it is made of.
    whole: Option<bytes::Bytes>,
}

impl ReadyAnswer {
    /// Answers under this size are also kept whole (their copy costs little memory).
    pub const WHOLE_BELOW: usize = 64 * 1024;

    pub fn new(result: LoadTableResult) -> Self {
        let (prefix, suffix) = result.envelope();
        let size = prefix.len() + result.metadata.len() + suffix.len();
        let whole = (size < Self::WHOLE_BELOW).then(|| {
            let mut body = Vec::with_capacity(size);
            body.extend_from_slice(&prefix);
            body.extend_from_slice(&result.metadata);
            body.extend_from_slice(&suffix);
            bytes::Bytes::from(body)
        });
        Self {
            result,
            prefix,
            suffix,
            whole,
        }
    }

    /// The answer's parts (read-only: the envelope was made from them).
    pub fn result(&self) -> &LoadTableResult {
        &self.result
    }
}

impl TableAnswer for ReadyAnswer {
    fn envelope(&self) -> (bytes::Bytes, bytes::Bytes) {
        (self.prefix.clone(), self.suffix.clone())
    }

    fn metadata(&self) -> &bytes::Bytes {
        &self.result.metadata
    }

    fn metadata_id(&self) -> &str {
        &self.result.metadata_id
    }

    fn etag(&self) -> &str {
        &self.result.etag
    }

    fn whole(&self) -> Option<bytes::Bytes> {
        self.whole.clone()
    }
}

/// The delegation part of the tag of an answer without vended credentials.
pub const NO_DELEGATION: &str = "none";

/// The delegation part of the tag of an answer that was asked for vended credentials and
/// supplies none (the bucket's static keys stay with the catalog).
pub const UNVENDED: &str = "unvended";

/// The entity tag of a table answer: a digest of everything its body is made of (the org,
/// the metadata file's SHA-256 and how it was trimmed, the delegation and access level, its
/// location, the client config and the vended credentials), computed without hashing the
/// document itself. Vended credentials are
/// reused only while they have most of their hour left, so the tag changes (and a conditional
/// load gets fresh ones) before credentials a client holds from an earlier answer run out.
/// The digest is one-way: the tag reveals nothing of the credentials it covers.
pub fn entity_tag(
    org: &str,
    metadata_id: &str,
    delegation: &str,
    metadata_location: Option<&str>,
    config: &BTreeMap<String, String>,
    credentials: &[StorageCredential],
) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for part in [
        org,
        metadata_id,
        delegation,
        metadata_location.unwrap_or(""),
    ] {
        digest.update(part.as_bytes());
        digest.update([0]);
    }
    digest.update(serde_json::to_vec(config).expect("map serializes"));
    digest.update([0]);
    digest.update(serde_json::to_vec(credentials).expect("credentials serialize"));
    format!("\"{}\"", &hex::encode(digest.finalize())[..32])
}

/// A table answer: a JSON envelope around a metadata document, which is spliced in as it is
/// (and, compressed, from the cache: see [`crate::encoding`]).
pub trait TableAnswer {
    /// The envelope's JSON before and after the document.
    fn envelope(&self) -> (bytes::Bytes, bytes::Bytes);
    fn metadata(&self) -> &bytes::Bytes;
    /// What identifies the document's bytes ([`LoadTableResult::metadata_id`]).
    fn metadata_id(&self) -> &str;
    fn etag(&self) -> &str;

    /// The whole JSON body in one buffer, where one is kept (small answers sent often).
    fn whole(&self) -> Option<bytes::Bytes> {
        None
    }

    /// The JSON body. The stored metadata is valid JSON written by the catalog itself, so it is
    /// copied in as it is: an answer never parses or re-serializes a large metadata file.
    fn to_json(&self) -> Vec<u8> {
        let (prefix, suffix) = self.envelope();
        let metadata = self.metadata();
        let mut out = Vec::with_capacity(prefix.len() + metadata.len() + suffix.len());
        out.extend_from_slice(&prefix);
        out.extend_from_slice(metadata);
        out.extend_from_slice(&suffix);
        out
    }
}

/// `{"metadata-location":<location>,"metadata":`: how every table and view answer opens.
fn answer_prefix(metadata_location: &impl Serialize) -> Vec<u8> {
    let location = serde_json::to_vec(metadata_location).expect("a location serializes");
    let mut prefix = Vec::with_capacity(location.len() + 36);
    prefix.extend_from_slice(b"{\"metadata-location\":");
    prefix.extend_from_slice(&location);
    prefix.extend_from_slice(b",\"metadata\":");
    prefix
}

impl TableAnswer for LoadTableResult {
    fn envelope(&self) -> (bytes::Bytes, bytes::Bytes) {
        let prefix = answer_prefix(&self.metadata_location);
        let mut suffix = b",\"config\":".to_vec();
        suffix.extend(serde_json::to_vec(&self.config).expect("map serializes"));
        if !self.storage_credentials.is_empty() {
            suffix.extend_from_slice(b",\"storage-credentials\":");
            suffix.extend(
                serde_json::to_vec(&self.storage_credentials).expect("credentials serialize"),
            );
        }
        suffix.push(b'}');
        (prefix.into(), suffix.into())
    }

    fn metadata(&self) -> &bytes::Bytes {
        &self.metadata
    }

    fn metadata_id(&self) -> &str {
        &self.metadata_id
    }

    fn etag(&self) -> &str {
        &self.etag
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadCredentialsResponse {
    #[serde(rename = "storage-credentials")]
    pub storage_credentials: Vec<StorageCredential>,
}

/// CommitTableResponse: the new metadata location and the document as the catalog stored it.
#[derive(Debug, Clone)]
pub struct CommitTableResponse {
    pub metadata_location: String,
    /// The stored metadata file's bytes, spliced in as loadTable does.
    pub metadata: bytes::Bytes,
    /// The file's SHA-256 ([`LoadTableResult::metadata_id`]).
    pub metadata_id: String,
    /// The answer's entity tag: that of a plain loadTable of the same file ([`entity_tag`]
    /// with the bucket's non-secret settings and no credentials), so a client that commits
    /// and then loads conditionally gets a 304.
    pub etag: String,
}

impl CommitTableResponse {
    /// The answer for a table whose current file holds `raw` (with digest `sha256`), at
    /// `metadata_location`, on a bucket whose non-secret settings are `storage_config`.
    pub fn new(
        org: &str,
        metadata_location: String,
        (raw, sha256): (&bytes::Bytes, &str),
        storage_config: &BTreeMap<String, String>,
    ) -> Self {
        let etag = entity_tag(
            org,
            sha256,
            NO_DELEGATION,
            Some(&metadata_location),
            storage_config,
            &[],
        );
        Self {
            metadata_location,
            metadata: raw.clone(),
            metadata_id: sha256.to_owned(),
            etag,
        }
    }
}

impl TableAnswer for CommitTableResponse {
    fn envelope(&self) -> (bytes::Bytes, bytes::Bytes) {
        let prefix = answer_prefix(&self.metadata_location);
        (prefix.into(), bytes::Bytes::from_static(b"}"))
    }

    fn metadata(&self) -> &bytes::Bytes {
        &self.metadata
    }

    fn metadata_id(&self) -> &str {
        &self.metadata_id
    }

    fn etag(&self) -> &str {
        &self.etag
    }
}

/// LoadViewResult: the answer of createView, loadView, replaceView and registerView.
#[derive(Debug, Clone)]
pub struct LoadViewResult {
    pub metadata_location: String,
    /// The stored metadata file's bytes, verified against the view's row and spliced in.
    pub metadata: bytes::Bytes,
}

impl LoadViewResult {
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = answer_prefix(&self.metadata_location);
        out.reserve(self.metadata.len() + 16);
        out.extend_from_slice(&self.metadata);
        out.extend_from_slice(b",\"config\":{}}");
        out
    }
}

/// RegisterTableRequest: an existing metadata file to bring under the catalog.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RegisterTableRequest {
    pub name: String,
    pub metadata_location: String,
    #[serde(default)]
    pub overwrite: Option<bool>,
}

/// UnregisterTableResult: the table's last metadata file, which stays in storage.
#[derive(Debug, Clone)]
pub struct UnregisterTableResult {
    pub metadata_location: String,
    /// The file's bytes, verified against the table's record and spliced in as loadTable does.
    pub metadata: bytes::Bytes,
}

impl UnregisterTableResult {
    pub fn to_json(&self) -> Vec<u8> {
        CommitTableResponse {
            metadata_location: self.metadata_location.clone(),
            metadata: self.metadata.clone(),
            metadata_id: String::new(),
            etag: String::new(),
        }
        .to_json()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenameTableRequest {
    pub source: TableIdentifier,
    pub destination: TableIdentifier,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_changes_with_every_part_and_quotes_its_digest() {
        let config = BTreeMap::from([("k".to_owned(), "v".to_owned())]);
        let base = entity_tag("o", "sha", "none", Some("l"), &BTreeMap::new(), &[]);
        assert_eq!(base.len(), 34);
        assert!(base.starts_with('"') && base.ends_with('"'));
        for other in [
            entity_tag("p", "sha", "none", Some("l"), &BTreeMap::new(), &[]),
            entity_tag("o", "sha/refs", "none", Some("l"), &BTreeMap::new(), &[]),
            entity_tag("o", "sha", "vended-read", Some("l"), &BTreeMap::new(), &[]),
            entity_tag("o", "sha", "none", None, &BTreeMap::new(), &[]),
            entity_tag("o", "sha", "none", Some("l"), &config, &[]),
        ] {
            assert_ne!(other, base);
        }
    }

    #[test]
    fn load_table_result_splices_metadata_into_valid_json() {
        let result = LoadTableResult {
            metadata_location: Some("file:///w/t/metadata/00000-x.metadata.json".into()),
            metadata: bytes::Bytes::from_static(
                br#"{"format-version":2,"location":"file:///w/t"}"#,
            ),
            metadata_id: "sha".into(),
            config: BTreeMap::from([("s3.region".to_owned(), "eu-west-1".to_owned())]),
            storage_credentials: vec![StorageCredential {
                prefix: "s3://b/t".into(),
                config: BTreeMap::new(),
            }],
            etag: "\"t\"".into(),
        };
        let value: serde_json::Value = serde_json::from_slice(&result.to_json()).unwrap();
        assert_eq!(value["metadata"]["format-version"], 2);
        assert_eq!(
            value["metadata-location"],
            "file:///w/t/metadata/00000-x.metadata.json"
        );
        assert_eq!(value["config"]["s3.region"], "eu-west-1");
        assert_eq!(value["storage-credentials"][0]["prefix"], "s3://b/t");
        let staged = LoadTableResult {
            metadata_location: None,
            storage_credentials: vec![],
            ..result
        };
        let value: serde_json::Value = serde_json::from_slice(&staged.to_json()).unwrap();
        assert!(value["metadata-location"].is_null());
        assert!(value.get("storage-credentials").is_none());
    }
}
