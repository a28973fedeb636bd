//! The files a table's metadata reaches: its metadata files (the current one and the metadata
//! log), every snapshot's manifest list, the manifests those list, the live data and delete
//! files of each manifest, and statistics files. Manifests are read with the `iceberg` crate.
//!
//! Each manifest list and manifest is read once per run, whatever number of snapshots share
//! it. A file that cannot be read stops the run's deletions for the table: what it references
//! is unknown, so nothing may be taken as unreferenced.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{DataContentType, FormatVersion, Manifest, ManifestList, TableMetadata};
use serde::Serialize;

use crate::objects::{ObjectError, ObjectStore};

/// What a reachable file is to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    Metadata,
    ManifestList,
    Manifest,
    Data,
    Delete,
    Statistics,
}

/// A reference that could not be followed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReachError {
    #[error("cannot read {kind:?} file {location}: {code}")]
    Unreadable {
        kind: FileKind,
        location: String,
        code: String,
    },
    #[error("cannot parse {kind:?} file {location}: {reason}")]
    Unparsable {
        kind: FileKind,
        location: String,
        reason: String,
    },
    #[error("snapshot {0} has no manifest list (v1 inline manifests are not supported)")]
    NoManifestList(i64),
}

/// Files reached, by canonical location.
pub type Reached = HashMap<String, FileKind>;

/// Reads manifest lists and manifests, each once.
pub struct Reader<'a> {
    objects: &'a dyn ObjectStore,
    lists: HashMap<String, Arc<Vec<String>>>,
    manifests: HashMap<String, Arc<Vec<(String, FileKind)>>>,
    /// Bytes read from storage so far (for the run's report).
    pub bytes_read: u64,
}

impl<'a> Reader<'a> {
    pub fn new(objects: &'a dyn ObjectStore) -> Self {
        Self {
            objects,
            lists: HashMap::new(),
            manifests: HashMap::new(),
            bytes_read: 0,
        }
    }

    /// The store it reads through.
    pub fn objects(&self) -> &'a dyn ObjectStore {
        self.objects
    }

    /// Everything `metadata` (read from `metadata_location`) reaches through the snapshots
    /// `keep` accepts.
    pub async fn reach(
        &mut self,
        metadata: &TableMetadata,
        metadata_location: &str,
        keep: impl Fn(i64) -> bool,
    ) -> Result<Reached, ReachError> {
        let mut reached = Reached::new();
        reached.insert(canonical(metadata_location), FileKind::Metadata);
        for entry in metadata.metadata_log() {
            reached.insert(canonical(&entry.metadata_file), FileKind::Metadata);
        }
        for stats in metadata.statistics_iter() {
            if keep(stats.snapshot_id) {
                reached.insert(canonical(&stats.statistics_path), FileKind::Statistics);
            }
        }
        for stats in metadata.partition_statistics_iter() {
            if keep(stats.snapshot_id) {
                reached.insert(canonical(&stats.statistics_path), FileKind::Statistics);
            }
        }
        for snapshot in metadata.snapshots() {
            if !keep(snapshot.snapshot_id()) {
                continue;
            }
            let list = snapshot.manifest_list();
            if list.is_empty() {
                return Err(ReachError::NoManifestList(snapshot.snapshot_id()));
            }
            reached.insert(canonical(list), FileKind::ManifestList);
            let manifests = self.manifest_list(list, metadata.format_version()).await?;
            for manifest in manifests.iter() {
                reached.insert(canonical(manifest), FileKind::Manifest);
                for (file, kind) in self.manifest(manifest).await?.iter() {
                    reached.insert(file.clone(), *kind);
                }
            }
        }
        Ok(reached)
    }

    async fn manifest_list(
        &mut self,
        location: &str,
        version: FormatVersion,
    ) -> Result<Arc<Vec<String>>, ReachError> {
        if let Some(found) = self.lists.get(location) {
            return Ok(found.clone());
        }
        let bytes = self.read(location, FileKind::ManifestList).await?;
        let list = ManifestList::parse_with_version(&bytes, version).map_err(|e| {
            ReachError::Unparsable {
                kind: FileKind::ManifestList,
                location: location.to_owned(),
                reason: e.message().to_owned(),
            }
        })?;
        let paths = Arc::new(
            list.entries()
                .iter()
                .map(|m| m.manifest_path.clone())
                .collect::<Vec<_>>(),
        );
        self.lists.insert(location.to_owned(), paths.clone());
        Ok(paths)
    }

    async fn manifest(
        &mut self,
        location: &str,
    ) -> Result<Arc<Vec<(String, FileKind)>>, ReachError> {
        if let Some(found) = self.manifests.get(location) {
            return Ok(found.clone());
        }
        let bytes = self.read(location, FileKind::Manifest).await?;
        let manifest = Manifest::parse_avro(&bytes).map_err(|e| ReachError::Unparsable {
            kind: FileKind::Manifest,
            location: location.to_owned(),
            reason: e.message().to_owned(),
        })?;
        // Live entries only, as Java's reachability reads them: a file a snapshot deleted is
        // reached through the snapshots that still hold it, if any are kept.
        let files = Arc::new(
            manifest
                .entries()
                .iter()
                .filter(|e| e.is_alive())
                .map(|e| {
                    let kind = match e.data_file().content_type() {
                        DataContentType::Data => FileKind::Data,
                        _ => FileKind::Delete,
                    };
                    (canonical(e.file_path()), kind)
                })
                .collect::<Vec<_>>(),
        );
        self.manifests.insert(location.to_owned(), files.clone());
        Ok(files)
    }

    async fn read(&mut self, location: &str, kind: FileKind) -> Result<bytes::Bytes, ReachError> {
        match self.objects.get(location).await {
            Ok(bytes) => {
                self.bytes_read += bytes.len() as u64;
                Ok(bytes)
            }
            Err(e) => Err(ReachError::Unreadable {
                kind,
                location: location.to_owned(),
                code: match e {
                    ObjectError::NotFound(_) => "NotFound".to_owned(),
                    other => other.code().to_owned(),
                },
            }),
        }
    }
}

/// One spelling per file, so that a listing and a manifest agree on what is the same file:
/// `file:/p`, `file:///p` and a bare `/p` are `file:///p`; `s3a://` and `s3n://` are `s3://`.
pub fn canonical(location: &str) -> String {
    if let Some(rest) = location.strip_prefix("file:") {
        return format!("file:///{}", rest.trim_start_matches('/'));
    }
    if location.starts_with('/') {
        return format!("file:///{}", location.trim_start_matches('/'));
    }
    for alias in ["s3a://", "s3n://"] {
        if let Some(rest) = location.strip_prefix(alias) {
            return format!("s3://{rest}");
        }
    }
    location.to_owned()
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn spellings_of_one_file_agree() {
        for spelling in [
            "file:/w/t/a.parquet",
            "file:///w/t/a.parquet",
            "/w/t/a.parquet",
        ] {
            assert_eq!(canonical(spelling), "file:///w/t/a.parquet");
        }
        assert_eq!(canonical("s3a://b/k"), "s3://b/k");
        assert_eq!(canonical("gs://b/k"), "gs://b/k");
    }
}
