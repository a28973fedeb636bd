//! Manifest lists and manifests, parsed once and kept, bounded by size, so that a warm plan
//! reads no object. Both are immutable once written; a manifest is kept under its path and the
//! length its manifest list records, so a file replaced in place under another length is read
//! again. Only files inside the table's own directory are read: a manifest list or a manifest
//! is written by whoever may write the table, and the catalog's own access must not reach
//! another table's files on their behalf.

use std::sync::Arc;

use iceberg::spec::{FormatVersion, Manifest, ManifestFile, ManifestList, ManifestStatus};

use crate::cache::Cache;
use crate::catalog::storage::is_within;
use crate::error::{CatalogError, Result};
use crate::objects::{ObjectError, ObjectStore};

/// What one parsed manifest entry takes besides its path and metrics: the entry, its data
/// file and their allocations.
const ENTRY_BYTES: u64 = 512;
/// What one metric (a count or a bound of one column) takes in its hash map.
const METRIC_BYTES: u64 = 64;

/// The memory a parsed manifest takes, estimated from its entries.
fn parsed_weight(manifest: &Manifest) -> u64 {
    manifest
        .entries()
        .iter()
        .map(|entry| {
            let file = entry.data_file();
            let metrics = file.column_sizes().len()
                + file.value_counts().len()
                + file.null_value_counts().len()
                + file.nan_value_counts().len()
                + file.lower_bounds().len()
                + file.upper_bounds().len();
            ENTRY_BYTES + file.file_path().len() as u64 + METRIC_BYTES * metrics as u64
        })
        .sum()
}

/// Parsed manifest lists and manifests of every table this process planned.
pub struct ManifestCache {
    lists: Cache<String, Arc<Vec<ManifestFile>>>,
    manifests: Cache<String, Arc<Manifest>>,
}

impl ManifestCache {
    /// At most about `max_bytes` of parsed manifests, and a tenth of it for manifest lists.
    pub fn new(max_bytes: u64) -> Self {
        Self {
            lists: Cache::weighted(max_bytes / 10, |_, list: &Arc<Vec<ManifestFile>>| {
                // A manifest list entry, parsed, with its partition summaries.
                256 * list.len() as u64
            }),
            manifests: Cache::weighted(max_bytes, |_, manifest: &Arc<Manifest>| {
                parsed_weight(manifest)
            }),
        }
    }

    /// The manifests a snapshot's manifest list names.
    pub async fn list(
        &self,
        objects: &dyn ObjectStore,
        directory: &str,
        location: &str,
        version: FormatVersion,
    ) -> Result<Arc<Vec<ManifestFile>>> {
        inside(directory, location)?;
        let load = async {
            let bytes = read(objects, location).await?;
            let list = ManifestList::parse_with_version(&bytes, version)
                .map_err(|e| unreadable(location, &e))?;
            Ok::<_, CatalogError>(Arc::new(list.consume_entries().into_iter().collect()))
        };
        self.lists.get_or_load(location, load).await
    }

    /// One manifest, parsed.
    pub async fn manifest(
        &self,
        objects: &dyn ObjectStore,
        directory: &str,
        file: &ManifestFile,
    ) -> Result<Arc<Manifest>> {
        inside(directory, &file.manifest_path)?;
        let key = format!("{}#{}", file.manifest_path, file.manifest_length);
        let load = async {
            let bytes = read(objects, &file.manifest_path).await?;
            let manifest =
                Manifest::parse_avro(&bytes).map_err(|e| unreadable(&file.manifest_path, &e))?;
            Ok::<_, CatalogError>(Arc::new(inherited(manifest, file)))
        };
        self.manifests.get_or_load(key.as_str(), load).await
    }

    /// Forgets everything, as a newly started instance would.
    pub fn clear(&self) {
        self.lists.clear();
        self.manifests.clear();
    }
}

/// One table's manifest lists and manifests: read through the cache, from the table's own
/// storage, inside its own directory only. Planning reads them; compaction and a moved append
/// also write theirs there (`tables::snapshot_files`).
pub struct TableManifests<'a> {
    pub objects: &'a dyn ObjectStore,
    pub directory: &'a str,
    pub cache: &'a ManifestCache,
}

impl TableManifests<'_> {
    /// The manifests the manifest list at `location` names.
    pub async fn list(
        &self,
        location: &str,
        version: FormatVersion,
    ) -> Result<Arc<Vec<ManifestFile>>> {
        self.cache
            .list(self.objects, self.directory, location, version)
            .await
    }

    /// One manifest, parsed, its entries' inherited values filled in.
    pub async fn manifest(&self, file: &ManifestFile) -> Result<Arc<Manifest>> {
        self.cache
            .manifest(self.objects, self.directory, file)
            .await
    }
}

/// The manifest with what its entries leave to inheritance filled in from the manifest list
/// entry, as the spec says: a null snapshot id is the manifest's `added_snapshot_id`; a null
/// data or file sequence number of an `added` entry (or of any entry of a manifest at the
/// initial sequence number) is the manifest's sequence number. Java and PyIceberg write added
/// entries so; read raw, every such file would have sequence number 0.
fn inherited(manifest: Manifest, file: &ManifestFile) -> Manifest {
    let (entries, metadata) = manifest.into_parts();
    let inherits = |status: ManifestStatus| {
        status == ManifestStatus::Added || file.sequence_number == INITIAL_SEQUENCE_NUMBER
    };
    let entries = entries
        .into_iter()
        .map(|entry| {
            let mut entry = Arc::unwrap_or_clone(entry);
            entry.snapshot_id = entry.snapshot_id.or(Some(file.added_snapshot_id));
            if inherits(entry.status) {
                entry.sequence_number = entry.sequence_number.or(Some(file.sequence_number));
                entry.file_sequence_number =
                    entry.file_sequence_number.or(Some(file.sequence_number));
            }
            entry
        })
        .collect();
    Manifest::new(metadata, entries)
}

/// The sequence number of v1 tables and of a v2 table's first snapshots, whose manifests'
/// entries all inherit it.
const INITIAL_SEQUENCE_NUMBER: i64 = 0;

fn inside(directory: &str, location: &str) -> Result<()> {
    if is_within(location, directory) {
        return Ok(());
    }
    tracing::warn!(
        location,
        directory,
        "planning refused a file outside the table's directory"
    );
    Err(CatalogError::BadRequest(
        "The table's snapshot names a manifest outside the table's directory; the catalog does \
         not plan scans over it"
            .into(),
    ))
}

async fn read(objects: &dyn ObjectStore, location: &str) -> Result<bytes::Bytes> {
    objects.get(location).await.map_err(|e| match e {
        ObjectError::NotFound(_) => {
            tracing::error!(location, "a manifest of the table is missing from storage");
            CatalogError::Internal("A manifest of the table is missing from storage".into())
        }
        other => other.into(),
    })
}

fn unreadable(location: &str, why: &dyn std::fmt::Display) -> CatalogError {
    tracing::error!(location, error = %why, "unreadable manifest");
    CatalogError::Internal("A manifest of the table is unreadable".into())
}
