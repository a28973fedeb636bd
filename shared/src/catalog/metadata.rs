//! Table metadata files: names, verified reads through a byte-bounded cache, no-overwrite writes.
//!
//! Anyone holding write credentials for a table directory can replace files in it, so a metadata
//! file is never trusted for what it says: every file read is checked against the table row (the
//! table uuid, its location and the SHA-256 the catalog recorded when it wrote the file) before
//! it is served or used as the base of a commit.

use std::sync::Arc;

use bytes::Bytes;
use iceberg::spec::TableMetadata;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::parity::refs_v1::Refs;
use super::parity::splice::{self, Layout};
use crate::cache::Cache;
use crate::encoding::{Encoding, Segment};
use crate::error::{CatalogError, Result};
use crate::model::TableRow;
use crate::objects::{ObjectError, ObjectStore, join};

/// `<location>/metadata/NNNNN-<uuid>.metadata.json` (`.gz.metadata.json` for gzip, as Java
/// names them); the first file of a table is version 0.
pub fn metadata_file_location(table_location: &str, version: u64, codec: Codec) -> String {
    join(
        table_location,
        &format!(
            "metadata/{version:05}-{}{}",
            uuid::Uuid::new_v4(),
            codec.extension()
        ),
    )
}

/// The table property naming the codec of new metadata files (Java's
/// `TableProperties.METADATA_COMPRESSION`).
pub const COMPRESSION_CODEC_PROPERTY: &str = "write.metadata.compression-codec";

/// The most JSON a compressed metadata file may inflate to: a file anyone with write
/// credentials could replace must not exhaust a function's memory before it is verified.
const MAX_INFLATED_BYTES: u64 = 512 * 1024 * 1024;

/// How a metadata file's bytes are stored (Java's `TableMetadataParser.Codec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
}

impl Codec {
    /// The codec `metadata`'s properties ask new files to be written with; an unknown name is
    /// refused as Java's `Codec.fromName` refuses it.
    pub fn of(metadata: &TableMetadata) -> Result<Codec> {
        Self::from_properties(metadata.properties())
    }

    /// The codec table properties ask for (see [`Codec::of`]).
    pub fn from_properties(
        properties: &std::collections::HashMap<String, String>,
    ) -> Result<Codec> {
        match properties.get(COMPRESSION_CODEC_PROPERTY) {
            None => Ok(Codec::None),
            Some(name) if name.eq_ignore_ascii_case("none") => Ok(Codec::None),
            Some(name) if name.eq_ignore_ascii_case("gzip") => Ok(Codec::Gzip),
            Some(name) => Err(CatalogError::BadRequest(format!(
                "Invalid codec name: {name} ('{COMPRESSION_CODEC_PROPERTY}' is none or gzip)"
            ))),
        }
    }

    /// The codec a file was written with, from its name (Java's `Codec.fromFileName`:
    /// `.gz.metadata.json`, or the older `.metadata.json.gz`).
    pub fn of_file(location: &str) -> Codec {
        if location.ends_with(".gz.metadata.json") || location.ends_with(".metadata.json.gz") {
            Codec::Gzip
        } else {
            Codec::None
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Codec::None => ".metadata.json",
            Codec::Gzip => ".gz.metadata.json",
        }
    }

    /// The stored form of a file's JSON.
    fn encode(self, json: &Bytes) -> Result<Bytes> {
        match self {
            Codec::None => Ok(json.clone()),
            Codec::Gzip => {
                use std::io::Write;
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder
                    .write_all(json)
                    .and_then(|()| encoder.finish())
                    .map(Bytes::from)
                    .map_err(|e| {
                        CatalogError::Internal(format!("Cannot compress table metadata: {e}"))
                    })
            }
        }
    }
}

/// The JSON of a metadata file stored at `location`: its bytes, inflated when its name says
/// gzip. `Err` says why the file is unreadable.
pub fn decode_stored(location: &str, stored: Bytes) -> std::result::Result<Bytes, String> {
    match Codec::of_file(location) {
        Codec::None => Ok(stored),
        Codec::Gzip => inflate(&stored, MAX_INFLATED_BYTES),
    }
}

/// Inflates gzip bytes to at most `max` bytes.
fn inflate(stored: &[u8], max: u64) -> std::result::Result<Bytes, String> {
    use std::io::Read;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(stored)
        .take(max + 1)
        .read_to_end(&mut json)
        .map_err(|e| format!("not a gzip file: {e}"))?;
    if json.len() as u64 > max {
        return Err(format!("it inflates to more than {max} bytes"));
    }
    Ok(Bytes::from(json))
}

/// The number in a metadata file's name (`00012-<uuid>.metadata.json`, or Hadoop's
/// `v12.metadata.json`), 0 when it has none: the next commit writes the number after it.
pub fn version_in_name(file: &str) -> u64 {
    let name = file.rsplit('/').next().unwrap_or_default();
    let digits = name.strip_prefix('v').unwrap_or(name);
    let number: String = digits.chars().take_while(char::is_ascii_digit).collect();
    number.parse().unwrap_or(0)
}

/// Default bound of each half of the metadata cache (stored documents, parsed documents): the
/// two together stay under 100 MB of a 256 MB function.
pub const DEFAULT_CACHE_BYTES: u64 = 48 * 1024 * 1024;

/// One metadata file, with what verification compares.
pub struct CachedMetadata {
    /// Its JSON (inflated, for a compressed file).
    pub raw: Bytes,
    /// SHA-256 of the bytes as stored.
    pub sha256: String,
    table_uuid: String,
    location: String,
    /// Where its parts lie in `raw`, for files this process wrote: the next commit is spliced
    /// from them.
    layout: Option<Layout>,
}

impl CachedMetadata {
    fn parse(&self) -> Result<Arc<TableMetadata>> {
        serde_json::from_slice(&self.raw)
            .map(Arc::new)
            .map_err(|e| {
                tracing::error!(error = %e, "verified metadata file does not parse");
                CatalogError::Internal("The table's current metadata file is unreadable".into())
            })
    }
}

/// The two fields verification needs, read without building the whole document.
#[derive(Deserialize)]
struct Identity {
    #[serde(rename = "table-uuid")]
    table_uuid: String,
    location: String,
}

/// Which table a file is being read for, for verification and for log lines.
pub struct TableRef<'a> {
    pub org: &'a str,
    pub namespace: &'a str,
    pub row: &'a TableRow,
}

/// Metadata files by location. A location is written once, so an entry never goes stale; it is
/// still re-verified against the row on every use. Loads use the stored bytes only; the parsed
/// documents that commits build on are kept apart, so tables that are only read cost no parse
/// and no memory for one.
pub struct MetadataCache {
    entries: Cache<String, Arc<CachedMetadata>>,
    parsed: Cache<String, Parsed>,
    /// `snapshots=refs` forms, by the SHA-256 of the verified file they were derived from.
    referenced: Cache<String, Bytes>,
    /// Documents compressed for answers, by what identifies their bytes and the encoding.
    compressed: Cache<(String, Encoding), Arc<Segment>>,
    /// Whether commits rewrite whole files instead of splicing (`floe-bench` only).
    baselines: Arc<crate::core::baselines::Baselines>,
}

/// A table opened for reading by [`MetadataCache::open_readable`].
pub struct ReadableTable {
    pub ns: crate::model::NamespaceRow,
    pub bucket: Arc<crate::model::BucketRow>,
    pub row: TableRow,
    pub objects: Arc<dyn ObjectStore>,
    pub metadata: Arc<TableMetadata>,
}

/// A parsed document and the size of the JSON it came from (what its weight is counted from).
#[derive(Clone)]
struct Parsed {
    json_len: usize,
    metadata: Arc<TableMetadata>,
}

/// The file a commit builds on, what it was parsed to and the changes the builder applied to it:
/// what [`MetadataCache::write`] splices the new file from.
pub struct Base<'a> {
    pub file: &'a CachedMetadata,
    pub metadata: &'a TableMetadata,
    pub changes: &'a [iceberg::TableUpdate],
}

/// A metadata file the catalog just wrote, as stored and as built.
pub struct Written {
    pub file: Arc<CachedMetadata>,
    pub metadata: Arc<TableMetadata>,
}

/// The `snapshots=refs` forms get this fraction of the bound: they are small (a big table's
/// refs form is a sliver of it), and only tables loaded that way have one.
const REFERENCED_SHARE: u64 = 4;

/// Files from this size on are hashed on a blocking thread while they are written; below it the
/// hand-off costs more than it overlaps.
const HASH_BESIDE_WRITE_BYTES: usize = 256 * 1024;

/// Compressed documents get this fraction of the bound: a document compresses about tenfold.
const COMPRESSED_SHARE: u64 = 4;

/// A parsed document takes about this many times the memory of its JSON.
const PARSED_WEIGHT_FACTOR: usize = 3;

impl MetadataCache {
    /// At most `max_bytes` of stored documents, and as much again for parsed ones;
    /// `baselines` says whether commits splice (see [`crate::core::baselines`]).
    pub fn new(max_bytes: u64, baselines: Arc<crate::core::baselines::Baselines>) -> Self {
        let weight = |len: usize| u64::try_from(len).unwrap_or(u64::MAX);
        Self {
            baselines,
            entries: Cache::weighted(max_bytes, move |_, entry: &Arc<CachedMetadata>| {
                weight(entry.raw.len() + entry.layout.as_ref().map_or(0, Layout::weight))
            }),
            parsed: Cache::weighted(max_bytes, move |_, parsed: &Parsed| {
                weight(parsed.json_len * PARSED_WEIGHT_FACTOR)
            }),
            referenced: Cache::weighted(max_bytes / REFERENCED_SHARE, move |_, bytes: &Bytes| {
                weight(bytes.len())
            }),
            compressed: Cache::weighted(
                max_bytes / COMPRESSED_SHARE,
                move |_, segment: &Arc<Segment>| weight(segment.weight()),
            ),
        }
    }

    /// `document` (whose bytes `id` identifies: a file's SHA-256, and how it was trimmed)
    /// compressed for answers. Computed once per document and encoding: the files are immutable
    /// and the key is their content's hash.
    pub async fn compressed(
        &self,
        id: &str,
        document: &Bytes,
        encoding: Encoding,
    ) -> Result<Arc<Segment>> {
        let compress = async {
            Segment::compress(document, encoding)
                .map(Arc::new)
                .map_err(|e| CatalogError::Internal(format!("Cannot compress the answer: {e}")))
        };
        self.compressed
            .get_or_load(&(id.to_owned(), encoding), compress)
            .await
    }

    pub fn clear(&self) {
        self.entries.clear();
        self.parsed.clear();
        self.referenced.clear();
        self.compressed.clear();
    }

    /// The verified file with only the snapshots that a branch or tag references
    /// (`snapshots=refs`; `snapshot-log` stays whole, as the spec asks). Derived once per file
    /// and kept as bytes: files are immutable, and the key is the content's own hash, so a
    /// derived form can never outlive or mismatch what it came from.
    pub async fn referenced_only(&self, file: &CachedMetadata) -> Result<Bytes> {
        let derive = async { referenced_snapshots_only(&file.raw) };
        self.referenced
            .get_or_load(file.sha256.as_str(), derive)
            .await
    }

    /// A table `ctx` may read, its storage and its current metadata parsed: what every read
    /// that works on the parsed document (the web view, scan planning) starts from.
    pub async fn open_readable(
        &self,
        lookups: &crate::core::lookups::Lookups,
        ctx: &super::OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<ReadableTable> {
        let (ns, row) = lookups
            .authorized_table(ctx, namespace, table, crate::authz::Action::Read)
            .await?;
        let bucket = lookups.table_bucket(ctx, &ns, &row.row).await?;
        let objects = lookups.objects_for(&bucket).await?;
        let (_, metadata) = self
            .load_parsed(&*objects, &super::table_ref(ctx, &ns, &row.row))
            .await?;
        Ok(ReadableTable {
            ns,
            bucket,
            row: row.row,
            objects,
            metadata,
        })
    }

    /// The table's current metadata file, verified against its row, and the document parsed:
    /// the base of a commit.
    pub async fn load_parsed(
        &self,
        objects: &dyn ObjectStore,
        table: &TableRef<'_>,
    ) -> Result<(Arc<CachedMetadata>, Arc<TableMetadata>)> {
        let current = self.load(objects, table).await?;
        let parse = async {
            Ok::<_, CatalogError>(Parsed {
                json_len: current.raw.len(),
                metadata: current.parse()?,
            })
        };
        let parsed = self
            .parsed
            .get_or_load(table.row.metadata_location.as_str(), parse)
            .await?;
        Ok((current, parsed.metadata))
    }

    /// The table's current metadata file, verified against its row. Concurrent misses for one
    /// file share one storage read.
    pub async fn load(
        &self,
        objects: &dyn ObjectStore,
        table: &TableRef<'_>,
    ) -> Result<Arc<CachedMetadata>> {
        let location = &table.row.metadata_location;
        let entry = self
            .entries
            .get_or_load(location.as_str(), read(objects, location))
            .await?;
        if let Err(mismatch) = verify(&entry, table.row) {
            self.entries.remove(location.as_str());
            tracing::error!(
                org = table.org,
                namespace = table.namespace,
                table = %table.row.name,
                mismatch,
                "metadata file does not match the table row; refusing it"
            );
            return Err(CatalogError::Internal(
                "The table's current metadata file does not match the catalog's record of it"
                    .into(),
            ));
        }
        Ok(entry)
    }

    /// Writes a new metadata file, never replacing one, and remembers it.
    /// `v1_refs`: a format-version 1 table's refs (see [`super::parity::refs_v1`]); `base`: the
    /// file a commit builds on, spliced from when this process wrote it.
    pub async fn write(
        &self,
        objects: &dyn ObjectStore,
        location: &str,
        metadata: TableMetadata,
        v1_refs: Option<&Refs>,
        base: Option<Base<'_>>,
    ) -> Result<Written> {
        let splicing = !self.baselines.full_rewrite();
        let (raw, layout) = serialize_laid_out(&metadata, v1_refs, base, splicing)?;
        let stored = Codec::of_file(location).encode(&raw)?;
        // A big file is hashed while it is written: the two passes over its bytes overlap.
        let (sha256, put) = if stored.len() >= HASH_BESIDE_WRITE_BYTES {
            let hashed = stored.clone();
            let hashing = tokio::task::spawn_blocking(move || sha256_hex(&hashed));
            let (put, sha256) = tokio::join!(objects.put_if_absent(location, stored), hashing);
            let sha256 = sha256.map_err(|e| {
                CatalogError::Internal(format!("Cannot hash the new metadata file: {e}"))
            })?;
            (sha256, put)
        } else {
            let sha256 = sha256_hex(&stored);
            (sha256, objects.put_if_absent(location, stored).await)
        };
        put.map_err(|e| match e {
            ObjectError::AlreadyExists(_) => CatalogError::Internal(
                "A metadata file with this name already exists; retry the request".into(),
            ),
            other => other.into(),
        })?;
        let entry = Arc::new(CachedMetadata {
            sha256,
            table_uuid: metadata.uuid().to_string(),
            location: metadata.location().to_owned(),
            raw,
            layout,
        });
        let metadata = Arc::new(metadata);
        let parsed = Parsed {
            json_len: entry.raw.len(),
            metadata: metadata.clone(),
        };
        self.entries.insert(location.to_owned(), entry.clone());
        self.parsed.insert(location.to_owned(), parsed);
        Ok(Written {
            file: entry,
            metadata,
        })
    }
}

/// The document with only the snapshots that a branch or tag points at.
fn referenced_snapshots_only(raw: &[u8]) -> Result<Bytes> {
    let unreadable = |e: serde_json::Error| {
        tracing::error!(error = %e, "verified metadata file does not parse");
        CatalogError::Internal("The table's current metadata file is unreadable".into())
    };
    let mut value: serde_json::Value = serde_json::from_slice(raw).map_err(unreadable)?;
    let referenced: std::collections::HashSet<i64> = value
        .get("refs")
        .and_then(|r| r.as_object())
        .map(|refs| {
            refs.values()
                .filter_map(|r| r.get("snapshot-id")?.as_i64())
                .collect()
        })
        .unwrap_or_default();
    if let Some(snapshots) = value.get_mut("snapshots").and_then(|s| s.as_array_mut()) {
        snapshots.retain(|s| {
            s.get("snapshot-id")
                .and_then(|id| id.as_i64())
                .is_some_and(|id| referenced.contains(&id))
        });
    }
    super::parity::order::document_bytes(&value)
        .map(Bytes::from)
        .map_err(|e| CatalogError::Internal(format!("Cannot serialize table metadata: {e}")))
}

/// The document as a metadata file: lists in Java's order (see [`super::parity::order`]).
pub fn serialize(metadata: &TableMetadata, v1_refs: Option<&Refs>) -> Result<Bytes> {
    super::parity::order::to_java_json(metadata, v1_refs)
        .map(Bytes::from)
        .map_err(|e| CatalogError::Internal(format!("Cannot serialize table metadata: {e}")))
}

/// The new file's JSON and its layout: spliced from `base` when it can be, else the full
/// document, laid out for the next commit. Debug builds check the splice against the full path
/// on every commit, so that every test that commits compares the two.
fn serialize_laid_out(
    metadata: &TableMetadata,
    v1_refs: Option<&Refs>,
    base: Option<Base<'_>>,
    splicing: bool,
) -> Result<(Bytes, Option<Layout>)> {
    let spliced = base.filter(|_| splicing).and_then(|base| {
        let layout = base.file.layout.as_ref()?;
        splice::splice(
            &base.file.raw,
            layout,
            base.metadata,
            metadata,
            base.changes,
        )
    });
    if let Some((raw, layout)) = spliced {
        #[cfg(debug_assertions)]
        {
            let full = serialize(metadata, v1_refs)?;
            if full[..] != raw[..] {
                let at = full.iter().zip(&raw).position(|(a, b)| a != b).unwrap_or(0);
                let around = |bytes: &[u8]| {
                    String::from_utf8_lossy(
                        &bytes[at.saturating_sub(80)..(at + 80).min(bytes.len())],
                    )
                    .into_owned()
                };
                panic!(
                    "spliced metadata differs from the full path at byte {at}:\n full: {}\n spliced: {}",
                    around(&full),
                    around(&raw)
                );
            }
        }
        return Ok((Bytes::from(raw), Some(layout)));
    }
    let raw = serialize(metadata, v1_refs)?;
    let layout = match metadata.format_version() {
        iceberg::spec::FormatVersion::V1 => None,
        _ if !splicing => None,
        _ => Layout::scan(&raw),
    };
    Ok((raw, layout))
}

async fn read(objects: &dyn ObjectStore, location: &str) -> Result<Arc<CachedMetadata>> {
    let raw = objects.get(location).await.map_err(|e| match e {
        ObjectError::NotFound(_) => {
            tracing::error!(location, "current metadata file is missing from storage");
            CatalogError::Internal(
                "The table's current metadata file is missing from storage".into(),
            )
        }
        other => other.into(),
    })?;
    let sha256 = sha256_hex(&raw);
    let unreadable = |why: &dyn std::fmt::Display| {
        tracing::error!(location, error = %why, "unreadable metadata file");
        CatalogError::Internal("The table's current metadata file is unreadable".into())
    };
    let raw = decode_stored(location, raw).map_err(|e| unreadable(&e))?;
    let identity: Identity = serde_json::from_slice(&raw).map_err(|e| unreadable(&e))?;
    Ok(Arc::new(CachedMetadata {
        sha256,
        table_uuid: identity.table_uuid,
        location: identity.location,
        raw,
        layout: None,
    }))
}

/// What differs between a file and the row that points at it (`Err` names it, never contents).
fn verify(entry: &CachedMetadata, row: &TableRow) -> std::result::Result<(), &'static str> {
    if let Some(expected) = &row.metadata_sha256
        && *expected != entry.sha256
    {
        return Err("sha256");
    }
    if entry.table_uuid != row.id {
        return Err("table-uuid");
    }
    if entry.location.trim_end_matches('/') != row.location.trim_end_matches('/') {
        return Err("location");
    }
    Ok(())
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_numbered_and_unique() {
        let a = metadata_file_location("file:///w/ns/t/", 0, Codec::None);
        let b = metadata_file_location("file:///w/ns/t", 0, Codec::None);
        assert!(a.starts_with("file:///w/ns/t/metadata/00000-"), "{a}");
        assert!(a.ends_with(".metadata.json"));
        assert_ne!(a, b);
        assert!(
            metadata_file_location("s3://b/t", 12, Codec::None)
                .starts_with("s3://b/t/metadata/00012-")
        );
        let gz = metadata_file_location("s3://b/t", 3, Codec::Gzip);
        assert!(gz.ends_with(".gz.metadata.json"), "{gz}");
        assert_eq!(Codec::of_file(&gz), Codec::Gzip);
        assert_eq!(version_in_name(&gz), 3);
        assert_eq!(
            Codec::of_file("s3://b/t/metadata/v3.metadata.json.gz"),
            Codec::Gzip
        );
        assert_eq!(
            Codec::of_file("s3://b/t/metadata/v3.metadata.json"),
            Codec::None
        );
    }

    fn row() -> TableRow {
        TableRow {
            id: "u-1".into(),
            namespace_id: "n".into(),
            name: "t".into(),
            directory: Some("s3://b/ns/t-x".into()),
            bucket: None,
            location: "s3://b/ns/t-x".into(),
            metadata_location: "s3://b/ns/t-x/metadata/00000-a.metadata.json".into(),
            metadata_version: 0,
            metadata_sha256: Some("abc".into()),
            storage_override: None,
            created_ms: 0,
            deleting_until_ms: None,
        }
    }

    fn entry(sha: &str, uuid: &str, location: &str) -> CachedMetadata {
        CachedMetadata {
            raw: Bytes::new(),
            sha256: sha.into(),
            table_uuid: uuid.into(),
            location: location.into(),
            layout: None,
        }
    }

    #[test]
    fn gzip_files_inflate_to_what_was_written_and_bombs_are_refused() {
        let json = br#"{"format-version":2}"#;
        let stored = Codec::Gzip.encode(&Bytes::from_static(json)).unwrap();
        assert_eq!(&stored[..2], &[0x1f, 0x8b]);
        let location = "s3://b/t/metadata/00001-a.gz.metadata.json";
        assert_eq!(&decode_stored(location, stored).unwrap()[..], json);
        assert!(decode_stored(location, Bytes::from_static(b"{}")).is_err());
        let plain = "s3://b/t/metadata/00001-a.metadata.json";
        assert_eq!(
            &decode_stored(plain, Bytes::from_static(b"{}")).unwrap()[..],
            b"{}"
        );
        // A file a writer replaced with one that inflates past the bound.
        let bomb = Codec::Gzip
            .encode(&Bytes::from(vec![0u8; 100_000]))
            .unwrap();
        assert!(bomb.len() < 1_000);
        assert!(
            inflate(&bomb, 10_000)
                .unwrap_err()
                .contains("inflates to more")
        );
        assert_eq!(inflate(&bomb, 100_000).unwrap().len(), 100_000);
    }

    #[test]
    fn verification_names_what_differs() {
        let row = row();
        assert_eq!(verify(&entry("abc", "u-1", "s3://b/ns/t-x/"), &row), Ok(()));
        assert_eq!(
            verify(&entry("abd", "u-1", "s3://b/ns/t-x"), &row),
            Err("sha256")
        );
        assert_eq!(
            verify(&entry("abc", "u-2", "s3://b/ns/t-x"), &row),
            Err("table-uuid")
        );
        assert_eq!(
            verify(&entry("abc", "u-1", "s3://b/ns/other"), &row),
            Err("location")
        );
        let legacy = TableRow {
            metadata_sha256: None,
            ..row
        };
        assert_eq!(
            verify(&entry("zzz", "u-1", "s3://b/ns/t-x"), &legacy),
            Ok(())
        );
    }
}
