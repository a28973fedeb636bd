//! View metadata files: written once under the view's directory, read back only when they match
//! the digest the view's row records.

use bytes::Bytes;
use iceberg::spec::ViewMetadata;
use serde_json::Value;

use crate::catalog::metadata::sha256_hex;
use crate::error::{CatalogError, Result};
use crate::model::ViewRow;
use crate::objects::{ObjectError, ObjectStore};

/// One view metadata file as stored.
pub struct ViewFile {
    pub raw: Bytes,
    pub sha256: String,
}

impl ViewFile {
    pub fn parse(&self) -> Result<ViewMetadata> {
        serde_json::from_slice(&self.raw).map_err(|e| {
            tracing::error!(error = %e, "verified view metadata file does not parse");
            CatalogError::Internal("The view's current metadata file is unreadable".into())
        })
    }
}

/// The document as a file: versions, schemas and the version log in id order (the crate keeps
/// the first two in hash maps), so equal metadata is equal bytes.
pub fn serialize(metadata: &ViewMetadata) -> Result<Bytes> {
    let mut value = serde_json::to_value(metadata)
        .map_err(|e| CatalogError::Internal(format!("Cannot serialize view metadata: {e}")))?;
    for (list, id) in [("versions", "version-id"), ("schemas", "schema-id")] {
        if let Some(items) = value.get_mut(list).and_then(Value::as_array_mut) {
            items.sort_by_key(|item| item.get(id).and_then(Value::as_i64).unwrap_or_default());
        }
    }
    if let Some(Value::Array(schemas)) = value.get_mut("schemas") {
        schemas
            .iter_mut()
            .for_each(crate::catalog::parity::single_values::java_schema);
    }
    serde_json::to_vec(&value)
        .map(Bytes::from)
        .map_err(|e| CatalogError::Internal(format!("Cannot serialize view metadata: {e}")))
}

/// Writes a new file, never replacing one.
pub async fn write(
    objects: &dyn ObjectStore,
    location: &str,
    metadata: &ViewMetadata,
) -> Result<ViewFile> {
    let raw = serialize(metadata)?;
    objects
        .put_if_absent(location, raw.clone())
        .await
        .map_err(|e| match e {
            ObjectError::AlreadyExists(_) => CatalogError::Internal(
                "A view metadata file with this name already exists; retry the request".into(),
            ),
            other => other.into(),
        })?;
    Ok(ViewFile {
        sha256: sha256_hex(&raw),
        raw,
    })
}

/// The view's current file, verified against its row.
pub async fn read(objects: &dyn ObjectStore, row: &ViewRow) -> Result<ViewFile> {
    let raw = objects
        .get(&row.metadata_location)
        .await
        .map_err(|e| match e {
            ObjectError::NotFound(_) => {
                tracing::error!(location = %row.metadata_location, "current view metadata file is missing");
                CatalogError::Internal(
                    "The view's current metadata file is missing from storage".into(),
                )
            }
            other => other.into(),
        })?;
    let sha256 = sha256_hex(&raw);
    if sha256 != row.metadata_sha256 {
        tracing::error!(view = %row.name, "view metadata file does not match the view row; refusing it");
        return Err(CatalogError::Internal(
            "The view's current metadata file does not match the catalog's record of it".into(),
        ));
    }
    // A registered file may be compressed; the catalog writes view files plain.
    let raw =
        crate::catalog::metadata::decode_stored(&row.metadata_location, raw).map_err(|why| {
            tracing::error!(view = %row.name, %why, "unreadable view metadata file");
            CatalogError::Internal("The view's current metadata file is unreadable".into())
        })?;
    Ok(ViewFile { raw, sha256 })
}
