//! Metadata files serialised in the order Java's `TableMetadataParser` writes them.
//!
//! The `iceberg` crate keeps schemas, specs, sort orders, snapshots and statistics in hash maps,
//! so its JSON lists them in whatever order the map iterates: engines that show history from the
//! `snapshots` array then list an overwrite before the append it followed. Java keeps every list
//! in the order items were added. Ids grow as items are added (schema, spec and sort-order ids,
//! and snapshot sequence numbers in v2), so sorting by them restores that order; v1 snapshots
//! have no sequence number and fall back to their timestamp. Top-level keys follow Java's
//! field order; map keys (properties, refs) are sorted so that the bytes are deterministic.

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use super::refs_v1::{self, Refs};

/// Top-level fields in the order Java writes them; anything else follows, sorted.
pub(super) const JAVA_FIELD_ORDER: &[&str] = &[
    "format-version",
    "table-uuid",
    "location",
    "last-sequence-number",
    "last-updated-ms",
    "last-column-id",
    "schema",
    "current-schema-id",
    "schemas",
    "partition-spec",
    "default-spec-id",
    "partition-specs",
    "last-partition-id",
    "default-sort-order-id",
    "sort-orders",
    "properties",
    "current-snapshot-id",
    "refs",
    "snapshots",
    "statistics",
    "partition-statistics",
    "snapshot-log",
    "metadata-log",
    "next-row-id",
    "encryption-keys",
];

/// The metadata document's JSON with every list in Java's order. A format-version 1 document
/// gets `refs` as Java writes them: `v1_refs` when the catalog kept them, else `main` alone.
pub fn to_java_json(
    metadata: &iceberg::spec::TableMetadata,
    v1_refs: Option<&Refs>,
) -> serde_json::Result<Vec<u8>> {
    let mut document = serde_json::to_value(metadata)?;
    if let Value::Object(fields) = &mut document {
        super::specs::restore(fields);
        super::single_values::java_document(fields);
        match metadata.format_version() {
            iceberg::spec::FormatVersion::V1 => {
                let refs = v1_refs
                    .cloned()
                    .unwrap_or_else(|| refs_v1::main_only(metadata.current_snapshot_id()));
                fields.insert("refs".into(), Value::Object(refs));
            }
            // Java writes a v3 table's missing current snapshot as null (`TableMetadataParser`'s
            // MIN_NULL_CURRENT_SNAPSHOT_VERSION); the crate leaves the key out.
            iceberg::spec::FormatVersion::V3 => {
                fields.entry("current-snapshot-id").or_insert(Value::Null);
            }
            iceberg::spec::FormatVersion::V2 => {}
        }
        order_lists(fields);
    }
    document_bytes(&document)
}

/// A metadata document's bytes with its top-level fields in Java's order.
pub fn document_bytes(document: &Value) -> serde_json::Result<Vec<u8>> {
    match document {
        Value::Object(fields) => serde_json::to_vec(&JavaFieldOrder(fields)),
        other => serde_json::to_vec(other),
    }
}

pub(super) fn order_lists(fields: &mut Map<String, Value>) {
    sort_by_int(fields, "schemas", "schema-id");
    sort_by_int(fields, "partition-specs", "spec-id");
    sort_by_int(fields, "sort-orders", "order-id");
    if let Some(Value::Array(snapshots)) = fields.get_mut("snapshots") {
        snapshots.sort_by_key(|s| (int(s, "sequence-number"), int(s, "timestamp-ms")));
    }
    let position: Vec<i64> = match fields.get("snapshots") {
        Some(Value::Array(snapshots)) => snapshots.iter().map(|s| int(s, "snapshot-id")).collect(),
        _ => Vec::new(),
    };
    for key in ["statistics", "partition-statistics"] {
        if let Some(Value::Array(files)) = fields.get_mut(key) {
            files.sort_by_key(|f| {
                let id = int(f, "snapshot-id");
                (position.iter().position(|s| *s == id), id)
            });
        }
    }
    if let Some(Value::Array(keys)) = fields.get_mut("encryption-keys") {
        keys.sort_by(|a, b| {
            a.get("key-id")
                .and_then(Value::as_str)
                .cmp(&b.get("key-id").and_then(Value::as_str))
        });
    }
}

fn sort_by_int(fields: &mut Map<String, Value>, list: &str, id: &str) {
    if let Some(Value::Array(items)) = fields.get_mut(list) {
        items.sort_by_key(|item| int(item, id));
    }
}

fn int(value: &Value, key: &str) -> i64 {
    value.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// Serialises a top-level object with Java's field order first.
struct JavaFieldOrder<'a>(&'a Map<String, Value>);

impl Serialize for JavaFieldOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for key in JAVA_FIELD_ORDER {
            if let Some(value) = self.0.get(*key) {
                map.serialize_entry(key, value)?;
            }
        }
        for (key, value) in self.0 {
            if !JAVA_FIELD_ORDER.contains(&key.as_str()) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{
        FormatVersion, MAIN_BRANCH, NestedField, Operation, PrimitiveType, Schema, Snapshot,
        SortOrder, Summary, TableMetadata, TableMetadataBuilder, Type, UnboundPartitionSpec,
    };

    fn schema(columns: i32) -> Schema {
        Schema::builder()
            .with_fields((1..=columns).map(|id| {
                NestedField::optional(id, format!("c{id}"), Type::Primitive(PrimitiveType::Long))
                    .into()
            }))
            .build()
            .unwrap()
    }

    /// A table with `commits` appends and as many schemas, built the way commits build it.
    fn table(commits: i64) -> TableMetadata {
        let mut metadata = TableMetadataBuilder::new(
            schema(1),
            UnboundPartitionSpec::builder().build(),
            SortOrder::unsorted_order(),
            "file:///w/t".into(),
            FormatVersion::V2,
            Default::default(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata;
        let start = 2 * metadata.last_updated_ms();
        for n in 1..=commits {
            let snapshot = Snapshot::builder()
                .with_snapshot_id(1_000 + n)
                .with_parent_snapshot_id((n > 1).then_some(999 + n))
                .with_sequence_number(n)
                .with_timestamp_ms(start + n)
                .with_manifest_list(format!("file:///w/t/metadata/snap-{n}.avro"))
                .with_summary(Summary {
                    operation: Operation::Append,
                    additional_properties: Default::default(),
                })
                .build();
            metadata = metadata
                .into_builder(None)
                .add_current_schema(schema(n as i32 + 1))
                .unwrap()
                .set_branch_snapshot(snapshot, MAIN_BRANCH)
                .unwrap()
                .build()
                .unwrap()
                .metadata;
        }
        metadata
    }

    fn ids(document: &Value, list: &str, id: &str) -> Vec<i64> {
        document[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item[id].as_i64().unwrap())
            .collect()
    }

    #[test]
    fn lists_come_out_in_the_order_they_were_added() {
        let written = to_java_json(&table(40), None).unwrap();
        let document: Value = serde_json::from_slice(&written).unwrap();
        assert_eq!(
            ids(&document, "snapshots", "sequence-number"),
            (1..=40).collect::<Vec<_>>()
        );
        assert_eq!(
            ids(&document, "schemas", "schema-id"),
            (0..=40).collect::<Vec<_>>()
        );
        // The document still reads back as the metadata it was written from.
        let back: TableMetadata = serde_json::from_slice(&written).unwrap();
        assert_eq!(to_java_json(&back, None).unwrap(), written);
    }

    #[test]
    fn top_level_fields_follow_java_and_bytes_are_deterministic() {
        let metadata = table(3);
        let written = to_java_json(&metadata, None).unwrap();
        let text = String::from_utf8(written.clone()).unwrap();
        assert!(
            text.starts_with("{\"format-version\":2,\"table-uuid\":"),
            "{text}"
        );
        let position = |key: &str| text.find(&format!("\"{key}\":")).unwrap();
        assert!(position("schemas") < position("partition-specs"));
        assert!(position("refs") < position("snapshots"));
        assert!(position("default-sort-order-id") < position("sort-orders"));
        assert!(position("snapshots") < position("snapshot-log"));
        assert_eq!(to_java_json(&metadata, None).unwrap(), written);
    }
}
