//! Data and delete files as the REST spec's `ContentFile` JSON, the way Java's
//! `ContentFileParser` writes them: lower-case `content` and `file-format`, the partition as
//! an array in the spec's field order (each value in the single-value JSON of its transform's
//! result type), and, only for the columns asked for in `stats-fields`, the metrics maps with
//! bounds as the upper-case hex of Iceberg's binary single values (what Java and DuckDB read).

use std::collections::HashMap;

use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, Literal, PartitionSpec, PrimitiveLiteral, Schema,
    Type,
};
use serde_json::{Map, Value, json};

/// The JSON of `file`, written under partition spec `spec_id` (`spec`); metrics for the columns `stats`.
pub fn content_file(
    file: &DataFile,
    spec_id: i32,
    spec: Option<&PartitionSpec>,
    schema: &Schema,
    stats: &[i32],
) -> Value {
    let mut out = Map::new();
    out.insert("spec-id".into(), json!(spec_id));
    out.insert("partition".into(), partition(file, spec, schema));
    out.insert("content".into(), json!(content(file.content_type())));
    out.insert("file-path".into(), json!(file.file_path()));
    out.insert("file-format".into(), json!(format(file.file_format())));
    out.insert(
        "file-size-in-bytes".into(),
        json!(file.file_size_in_bytes()),
    );
    out.insert("record-count".into(), json!(file.record_count()));
    if let Some(key) = file.key_metadata() {
        out.insert("key-metadata".into(), json!(hex::encode_upper(key)));
    }
    if let Some(offsets) = file.split_offsets().filter(|o| !o.is_empty()) {
        out.insert("split-offsets".into(), json!(offsets));
    }
    if let Some(order) = file.sort_order_id() {
        out.insert("sort-order-id".into(), json!(order));
    }
    match file.content_type() {
        DataContentType::Data => {
            if let Some(first) = file.first_row_id() {
                out.insert("first-row-id".into(), json!(first));
            }
            metrics(&mut out, file, stats);
        }
        DataContentType::PositionDeletes => {
            if let Some(referenced) = file.referenced_data_file() {
                out.insert("referenced-data-file".into(), json!(referenced));
            }
            if let Some(offset) = file.content_offset() {
                out.insert("content-offset".into(), json!(offset));
            }
            if let Some(size) = file.content_size_in_bytes() {
                out.insert("content-size-in-bytes".into(), json!(size));
            }
        }
        DataContentType::EqualityDeletes => {
            out.insert(
                "equality-ids".into(),
                json!(file.equality_ids().unwrap_or_default()),
            );
        }
    }
    Value::Object(out)
}

fn content(kind: DataContentType) -> &'static str {
    match kind {
        DataContentType::Data => "data",
        DataContentType::PositionDeletes => "position-deletes",
        DataContentType::EqualityDeletes => "equality-deletes",
    }
}

fn format(format: DataFileFormat) -> &'static str {
    match format {
        DataFileFormat::Avro => "avro",
        DataFileFormat::Orc => "orc",
        DataFileFormat::Parquet => "parquet",
        DataFileFormat::Puffin => "puffin",
    }
}

/// The partition tuple as an array, each value typed by its transform's result type.
fn partition(file: &DataFile, spec: Option<&PartitionSpec>, schema: &Schema) -> Value {
    let types: Vec<Option<Type>> = match spec {
        Some(spec) => spec
            .fields()
            .iter()
            .map(|f| {
                let source = schema.field_by_id(f.source_id)?;
                f.transform.result_type(&source.field_type).ok()
            })
            .collect(),
        None => Vec::new(),
    };
    Value::Array(
        file.partition()
            .iter()
            .enumerate()
            .map(|(i, value)| match value {
                None => Value::Null,
                Some(v) => {
                    let typed = types
                        .get(i)
                        .cloned()
                        .flatten()
                        .and_then(|ty| v.clone().try_into_json(&ty).ok());
                    typed.unwrap_or_else(|| untyped(v))
                }
            })
            .collect(),
    )
}

/// A value whose type is no longer known (its source column dropped): its plain JSON.
fn untyped(value: &Literal) -> Value {
    match value {
        Literal::Primitive(p) => match p {
            PrimitiveLiteral::Boolean(b) => json!(b),
            PrimitiveLiteral::Int(i) => json!(i),
            PrimitiveLiteral::Long(l) => json!(l),
            PrimitiveLiteral::Float(f) => json!(f.0),
            PrimitiveLiteral::Double(d) => json!(d.0),
            PrimitiveLiteral::String(s) => json!(s),
            PrimitiveLiteral::Binary(b) => json!(hex::encode_upper(b)),
            PrimitiveLiteral::Int128(i) => json!(i.to_string()),
            PrimitiveLiteral::UInt128(u) => json!(uuid::Uuid::from_u128(*u).to_string()),
            PrimitiveLiteral::AboveMax | PrimitiveLiteral::BelowMin => Value::Null,
        },
        _ => Value::Null,
    }
}

/// The metrics maps, restricted to the columns `stats` (none when empty).
fn metrics(out: &mut Map<String, Value>, file: &DataFile, stats: &[i32]) {
    if stats.is_empty() {
        return;
    }
    let counts = |map: &HashMap<i32, u64>| {
        let mut keys: Vec<i32> = stats
            .iter()
            .copied()
            .filter(|id| map.contains_key(id))
            .collect();
        keys.sort_unstable();
        (!keys.is_empty()).then(|| {
            let values: Vec<u64> = keys.iter().map(|id| map[id]).collect();
            json!({"keys": keys, "values": values})
        })
    };
    let bounds = |map: &HashMap<i32, iceberg::spec::Datum>| {
        let mut keys: Vec<i32> = stats
            .iter()
            .copied()
            .filter(|id| map.contains_key(id))
            .collect();
        keys.sort_unstable();
        let mut values = Vec::with_capacity(keys.len());
        let mut kept = Vec::with_capacity(keys.len());
        for id in keys {
            if let Ok(bytes) = map[&id].to_bytes() {
                kept.push(id);
                values.push(hex::encode_upper(bytes.as_slice()));
            }
        }
        (!kept.is_empty()).then(|| json!({"keys": kept, "values": values}))
    };
    let maps = [
        ("column-sizes", counts(file.column_sizes())),
        ("value-counts", counts(file.value_counts())),
        ("null-value-counts", counts(file.null_value_counts())),
        ("nan-value-counts", counts(file.nan_value_counts())),
        ("lower-bounds", bounds(file.lower_bounds())),
        ("upper-bounds", bounds(file.upper_bounds())),
    ];
    for (name, map) in maps {
        if let Some(map) = map {
            out.insert(name.into(), map);
        }
    }
}
