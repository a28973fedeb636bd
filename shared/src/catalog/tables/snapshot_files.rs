//! The manifest lists and manifests the catalog writes itself (a compaction's `replace`
//! snapshot, an append moved after a compaction): staged in memory with the `iceberg` crate's
//! writers, then put into the table's directory with the catalog's own object store.

use iceberg::io::FileIO;
use iceberg::spec::{ManifestFile, ManifestListWriter};

use crate::catalog::tables::plan::manifests::TableManifests;
use crate::error::{CatalogError, Result};

/// Writes a v2 manifest list of `manifests` at `location` for snapshot `(id, parent,
/// sequence number)`.
pub async fn write_list(
    files: &TableManifests<'_>,
    location: &str,
    (snapshot_id, parent, sequence): (i64, i64, i64),
    manifests: Vec<ManifestFile>,
) -> Result<()> {
    let io = FileIO::new_with_memory();
    let scratch = "memory:///list.avro";
    let output = io
        .new_output(scratch)
        .map_err(internal)?
        .writer()
        .await
        .map_err(internal)?;
    let mut list = ManifestListWriter::v2(output, snapshot_id, Some(parent), sequence);
    list.add_manifests(manifests.into_iter())
        .map_err(internal)?;
    list.close().await.map_err(internal)?;
    put(files, &io, scratch, location).await
}

/// Copies a file staged in `io` to `location`, where nothing may exist yet.
pub async fn put(
    files: &TableManifests<'_>,
    io: &FileIO,
    scratch: &str,
    location: &str,
) -> Result<()> {
    let bytes = io
        .new_input(scratch)
        .map_err(internal)?
        .read()
        .await
        .map_err(internal)?;
    files
        .objects
        .put_if_absent(location, bytes)
        .await
        .map_err(CatalogError::from)
}

fn internal(e: iceberg::Error) -> CatalogError {
    CatalogError::Internal(format!("Cannot write the snapshot's manifests: {e}"))
}
