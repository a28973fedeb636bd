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
    pub config: BTreeMap<String, String>,
    pub storage_credentials: Vec<StorageCredential>,
}

impl LoadTableResult {
    /// The JSON body. The stored metadata is valid JSON written by the catalog itself, so it is
    /// copied in as it is: a loadTable never parses or re-serializes a large metadata file.
    pub fn to_json(&self) -> Vec<u8> {
        let location = serde_json::to_vec(&self.metadata_location).expect("string serializes");
        let config = serde_json::to_vec(&self.config).expect("map serializes");
        let mut out = Vec::with_capacity(self.metadata.len() + location.len() + config.len() + 96);
        out.extend_from_slice(b"{\"metadata-location\":");
        out.extend_from_slice(&location);
        out.extend_from_slice(b",\"metadata\":");
        out.extend_from_slice(&self.metadata);
        out.extend_from_slice(b",\"config\":");
        out.extend_from_slice(&config);
        if !self.storage_credentials.is_empty() {
            out.extend_from_slice(b",\"storage-credentials\":");
            out.extend(
                serde_json::to_vec(&self.storage_credentials).expect("credentials serialize"),
            );
        }
        out.push(b'}');
        out
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
}

impl CommitTableResponse {
    pub fn to_json(&self) -> Vec<u8> {
        let location = serde_json::to_vec(&self.metadata_location).expect("string serializes");
        let mut out = Vec::with_capacity(self.metadata.len() + location.len() + 40);
        out.extend_from_slice(b"{\"metadata-location\":");
        out.extend_from_slice(&location);
        out.extend_from_slice(b",\"metadata\":");
        out.extend_from_slice(&self.metadata);
        out.push(b'}');
        out
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
    fn load_table_result_splices_metadata_into_valid_json() {
        let result = LoadTableResult {
            metadata_location: Some("file:///w/t/metadata/00000-x.metadata.json".into()),
            metadata: bytes::Bytes::from_static(
                br#"{"format-version":2,"location":"file:///w/t"}"#,
            ),
            config: BTreeMap::from([("s3.region".to_owned(), "eu-west-1".to_owned())]),
            storage_credentials: vec![StorageCredential {
                prefix: "s3://b/t".into(),
                config: BTreeMap::new(),
            }],
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
