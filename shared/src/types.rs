//! Request and response shapes of the Iceberg REST spec that the catalog speaks.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{Schema, SortOrder, TableMetadata, UnboundPartitionSpec};
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
#[derive(Debug, Clone, Serialize)]
pub struct LoadTableResult {
    #[serde(rename = "metadata-location")]
    pub metadata_location: Option<String>,
    /// The metadata document exactly as stored, spliced in without re-serializing.
    pub metadata: Box<serde_json::value::RawValue>,
    pub config: BTreeMap<String, String>,
    #[serde(rename = "storage-credentials", skip_serializing_if = "Vec::is_empty")]
    pub storage_credentials: Vec<StorageCredential>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadCredentialsResponse {
    #[serde(rename = "storage-credentials")]
    pub storage_credentials: Vec<StorageCredential>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommitTableResponse {
    #[serde(rename = "metadata-location")]
    pub metadata_location: String,
    pub metadata: TableMetadata,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenameTableRequest {
    pub source: TableIdentifier,
    pub destination: TableIdentifier,
}
