//! Where Floe's metadata differs from the `iceberg` crate's and follows Java's reference
//! implementation instead. Engines were written against Java's catalog; each shim below names the
//! Java behaviour it reproduces and can go once the crate (pinned at 0.10.1) behaves the same.
//!
//! Shims:
//! - [`order`]: metadata files list schemas, specs, sort orders, snapshots and statistics in the
//!   order they were added (Java's `TableMetadataParser`); the crate lists them in hash-map order.
//! - [`requirements`]: requirement failures use Java's `UpdateRequirement` wording with one
//!   "Requirement failed: " prefix.
//! - [`create::add_java_defaults`]: new tables persist `write.parquet.compression-codec=zstd`
//!   (Java's `TableMetadata.newTableMetadata`).
//! - [`create::CreateSeed`]: a create transaction starts from the first schema, spec and sort
//!   order it adds, as Java's `CatalogHandlers.create` builds from empty metadata; the crate's
//!   builder cannot start empty.
//! - [`fresh_ids`]: a new table's field ids follow Java's `TypeUtil.assignFreshIds`, which numbers
//!   a map's key and value before the fields nested in either; the crate descends into the key
//!   first.
//! - [`specs`]: partition specs Java binds without the crate's redundancy check (`day(ts)` beside
//!   `hour(ts)`) and with a partition named after its own source column whatever its transform
//!   (v1 `void` fields) go through the crate's builder disguised, and are restored on write.
//! - [`format_versions`]: nanosecond timestamps, initial defaults and encryption properties only
//!   in format version 3 (Java's `Schema.checkCompatibility` and
//!   `EncryptionUtil.checkCompatibility`); the crate's builder takes them in any version.
//! - [`single_values`]: field defaults of type `float` in their shortest form (Java's
//!   `SingleValueParser` writes `Float.toString`); the crate widens them to `f64` first.
//! - [`refs_v1`]: format-version 1 tables keep their branches and tags (Java writes `refs` for
//!   every version; the crate neither writes nor reads them for v1).
//!
//! Beside them, [`splice`] writes a commit's file from its base file's bytes, identical to what
//! [`order`] writes, so that a commit costs what it changes rather than what the table weighs.
//!
//! The commit retry on a lost swap (Java's `CatalogHandlers.commit`) lives in the commit path.

pub mod create;
pub mod format_versions;
pub mod fresh_ids;
pub mod order;
pub mod refs_v1;
pub mod requirements;
pub mod single_values;
pub mod specs;
pub mod splice;
