//! Table metadata files: names, reads through an immutable-file cache, and no-overwrite writes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use iceberg::spec::TableMetadata;

use crate::error::{CatalogError, Result};
use crate::objects::{ObjectError, ObjectStore, join};

/// `<location>/metadata/NNNNN-<uuid>.metadata.json`; the first file of a table is version 0.
pub fn metadata_file_location(table_location: &str, version: u64) -> String {
    join(
        table_location,
        &format!(
            "metadata/{version:05}-{}.metadata.json",
            uuid::Uuid::new_v4()
        ),
    )
}

/// One metadata file, as stored and as parsed.
pub struct CachedMetadata {
    pub raw: Bytes,
    pub parsed: TableMetadata,
}

/// A bounded cache of metadata files by location. Files are immutable once written, so an entry
/// can never be stale: this makes a warm loadTable one store read and no object read.
pub struct MetadataCache {
    capacity: usize,
    inner: Mutex<Entries>,
}

/// Cached files and their insertion order, for first-in-first-out eviction.
#[derive(Default)]
struct Entries {
    by_location: HashMap<String, Arc<CachedMetadata>>,
    order: VecDeque<String>,
}

impl MetadataCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Entries::default()),
        }
    }

    fn get(&self, location: &str) -> Option<Arc<CachedMetadata>> {
        self.inner
            .lock()
            .expect("cache lock")
            .by_location
            .get(location)
            .cloned()
    }

    fn insert(&self, location: &str, entry: Arc<CachedMetadata>) {
        let mut guard = self.inner.lock().expect("cache lock");
        let Entries {
            by_location: map,
            order,
        } = &mut *guard;
        if map.insert(location.to_owned(), entry).is_none() {
            order.push_back(location.to_owned());
            while order.len() > self.capacity {
                if let Some(old) = order.pop_front() {
                    map.remove(&old);
                }
            }
        }
    }

    /// Reads (or recalls) a metadata file.
    pub async fn load(
        &self,
        objects: &dyn ObjectStore,
        location: &str,
    ) -> Result<Arc<CachedMetadata>> {
        if let Some(hit) = self.get(location) {
            return Ok(hit);
        }
        let raw = objects.get(location).await.map_err(|e| match e {
            ObjectError::NotFound(_) => {
                tracing::error!(location, "current metadata file is missing from storage");
                CatalogError::Internal(
                    "The table's current metadata file is missing from storage".into(),
                )
            }
            other => other.into(),
        })?;
        let parsed: TableMetadata = serde_json::from_slice(&raw).map_err(|e| {
            tracing::error!(location, error = %e, "unreadable metadata file");
            CatalogError::Internal("The table's current metadata file is unreadable".into())
        })?;
        let entry = Arc::new(CachedMetadata { raw, parsed });
        self.insert(location, entry.clone());
        Ok(entry)
    }

    /// Writes a new metadata file, never replacing one, and remembers it.
    pub async fn write(
        &self,
        objects: &dyn ObjectStore,
        location: &str,
        metadata: TableMetadata,
    ) -> Result<Arc<CachedMetadata>> {
        let raw = Bytes::from(serde_json::to_vec(&metadata).map_err(|e| {
            CatalogError::Internal(format!("Cannot serialize table metadata: {e}"))
        })?);
        objects
            .put_if_absent(location, raw.clone())
            .await
            .map_err(|e| match e {
                ObjectError::AlreadyExists(_) => CatalogError::Internal(
                    "A metadata file with this name already exists; retry the request".into(),
                ),
                other => other.into(),
            })?;
        let entry = Arc::new(CachedMetadata {
            raw,
            parsed: metadata,
        });
        self.insert(location, entry.clone());
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_numbered_and_unique() {
        let a = metadata_file_location("file:///w/ns/t/", 0);
        let b = metadata_file_location("file:///w/ns/t", 0);
        assert!(a.starts_with("file:///w/ns/t/metadata/00000-"), "{a}");
        assert!(a.ends_with(".metadata.json"));
        assert_ne!(a, b);
        assert!(metadata_file_location("s3://b/t", 12).starts_with("s3://b/t/metadata/00012-"));
    }
}
