//! New tables as Java's catalog makes them.

use std::collections::HashMap;

use iceberg::TableUpdate;
use iceberg::spec::{Schema, SortOrder, UnboundPartitionSpec};

/// Java persists this default in every new table (`TableMetadata.newTableMetadata`), so engines
/// that read it write zstd-compressed Parquet; a value the client gives wins.
pub const PARQUET_COMPRESSION: (&str, &str) = ("write.parquet.compression-codec", "zstd");

/// Adds Java's persisted defaults for a new table to the client's properties.
pub fn add_java_defaults(properties: &mut HashMap<String, String>) {
    let (key, value) = PARQUET_COMPRESSION;
    properties
        .entry(key.to_owned())
        .or_insert_with(|| value.to_owned());
}

/// The first schema, partition spec and sort order a create transaction adds: what Java's
/// `CatalogHandlers.create` starts from. Java builds the table from empty metadata and applies
/// the updates in order, so the first spec gets id 0 and the first real sort order id 1; seeding
/// the builder with an unpartitioned spec instead would push the client's spec to id 1.
pub struct CreateSeed {
    pub schema: Schema,
    pub spec: UnboundPartitionSpec,
    pub sort_order: SortOrder,
}

impl CreateSeed {
    /// `None` when the updates add no schema.
    pub fn from_updates(updates: &[TableUpdate]) -> Option<Self> {
        let mut schema = None;
        let mut spec = None;
        let mut sort_order = None;
        for update in updates {
            match update {
                TableUpdate::AddSchema { schema: s } if schema.is_none() => {
                    schema = Some(s.clone())
                }
                TableUpdate::AddSpec { spec: s } if spec.is_none() => spec = Some(s.clone()),
                TableUpdate::AddSortOrder { sort_order: o } if sort_order.is_none() => {
                    sort_order = Some(o.clone())
                }
                _ => {}
            }
        }
        Some(Self {
            schema: schema?,
            spec: spec.unwrap_or_else(|| UnboundPartitionSpec::builder().build()),
            sort_order: sort_order.unwrap_or_else(SortOrder::unsorted_order),
        })
    }
}
