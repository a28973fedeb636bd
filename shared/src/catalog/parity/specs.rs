//! Partition specs that Java's catalog accepts and the `iceberg` crate's builder refuses.
//!
//! Java binds a spec sent over REST (`PartitionSpecParser` → `Builder.add(sourceId, fieldId,
//! name, transform)`) with two checks fewer than the crate applies to every spec it binds, in
//! `add_partition_spec` and again in every `build()`:
//! - no redundancy check: `day(ts)` and `hour(ts)` may share a spec (PyIceberg's `update_spec`
//!   produces exactly that when an hour partition is added beside a day one);
//! - a partition may take the name of its own source column whatever its transform: a v1 table
//!   keeps a removed field as a `void` transform under the field's name.
//!
//! The crate cannot be told to skip them, so such fields go through its builder in disguise: a
//! self-describing proxy name (the marker, the real transform, the real name) and, where the
//! transform is what trips the check, a `bucket[N]` transform unique to it. The disguise is
//! deterministic, so the crate's spec-id reuse still matches identical specs. [`restore`] puts
//! the real fields back when the document is serialised; nothing disguised is ever stored or
//! answered.

use std::collections::HashSet;

use iceberg::TableUpdate;
use iceberg::spec::{PrimitiveType, Schema, TableMetadata, Transform, Type, UnboundPartitionSpec};
use serde_json::{Map, Value};

use crate::error::{CatalogError, Result};

/// Starts every disguised field name; no client-chosen name starts with a control character
/// that engines would accept as a column path.
const MARK: &str = "\u{1}floe-java\u{1}";

/// The table's metadata as the crate's builder can take it: unchanged unless a spec needs the
/// disguise.
pub fn for_builder(metadata: &TableMetadata) -> Result<Option<TableMetadata>> {
    let schema = metadata.current_schema();
    let needed = metadata.partition_specs_iter().any(|spec| {
        let fields: Vec<Field> = spec
            .fields()
            .iter()
            .map(|f| Field {
                source_id: f.source_id,
                name: f.name.clone(),
                transform: f.transform,
            })
            .collect();
        fields_need_disguise(&fields, schema)
    });
    if !needed {
        return Ok(None);
    }
    let mut document = serde_json::to_value(metadata).map_err(internal)?;
    if let Some(Value::Array(specs)) = document.get_mut("partition-specs") {
        for spec in specs {
            if let Some(Value::Array(fields)) = spec.get_mut("fields") {
                disguise(fields, schema);
            }
        }
    }
    if let Some(Value::Array(fields)) = document.get_mut("partition-spec") {
        disguise(fields, schema);
    }
    serde_json::from_value(document).map(Some).map_err(internal)
}

/// An `add-spec` update as the crate's builder can take it, given the schema the spec binds to.
pub fn update_for_builder(update: TableUpdate, schema: &Schema) -> Result<TableUpdate> {
    match update {
        TableUpdate::AddSpec { spec } => Ok(TableUpdate::AddSpec {
            spec: spec_for_builder(spec, schema)?,
        }),
        other => Ok(other),
    }
}

/// A spec as the crate's builder can take it, given the schema it binds to.
pub fn spec_for_builder(
    spec: UnboundPartitionSpec,
    schema: &Schema,
) -> Result<UnboundPartitionSpec> {
    let fields: Vec<Field> = spec
        .fields()
        .iter()
        .map(|f| Field {
            source_id: f.source_id,
            name: f.name.clone(),
            transform: f.transform,
        })
        .collect();
    if !fields_need_disguise(&fields, schema) {
        return Ok(spec);
    }
    let mut document = serde_json::to_value(&spec).map_err(internal)?;
    if let Some(Value::Array(fields)) = document.get_mut("fields") {
        disguise(fields, schema);
    }
    serde_json::from_value(document).map_err(internal)
}

/// Puts the real name and transform back into every disguised field of a metadata document.
pub fn restore(document: &mut Map<String, Value>) {
    if let Some(Value::Array(specs)) = document.get_mut("partition-specs") {
        for spec in specs {
            if let Some(Value::Array(fields)) = spec.get_mut("fields") {
                fields.iter_mut().for_each(restore_field);
            }
        }
    }
    if let Some(Value::Array(fields)) = document.get_mut("partition-spec") {
        fields.iter_mut().for_each(restore_field);
    }
}

fn restore_field(field: &mut Value) {
    let Some(disguised) = field.get("name").and_then(Value::as_str) else {
        return;
    };
    let Some((transform, name)) = disguised
        .strip_prefix(MARK)
        .and_then(|rest| rest.split_once('\u{1}'))
    else {
        return;
    };
    let (transform, name) = (transform.to_owned(), name.to_owned());
    field["transform"] = Value::String(transform);
    field["name"] = Value::String(name);
}

struct Field {
    source_id: i32,
    name: String,
    transform: Transform,
}

/// What the crate refuses and Java accepts, field by field in spec order.
enum Disguise {
    None,
    /// The name of its own source column, with a non-identity transform.
    Name,
    /// A second field of the same kind (time, void, ...) on one source column.
    NameAndTransform,
}

fn plan(fields: &[Field], schema: &Schema) -> Vec<Disguise> {
    let mut seen = HashSet::new();
    fields
        .iter()
        .map(|field| {
            let redundant = !seen.insert((field.source_id, field.transform.dedup_name()));
            let own_name = field.transform != Transform::Identity
                && schema.name_by_field_id(field.source_id) == Some(field.name.as_str());
            if redundant && bucketable(schema, field.source_id) {
                seen.insert((
                    field.source_id,
                    proxy_transform(&field.transform).dedup_name(),
                ));
                Disguise::NameAndTransform
            } else if own_name {
                Disguise::Name
            } else {
                Disguise::None
            }
        })
        .collect()
}

fn fields_need_disguise(fields: &[Field], schema: &Schema) -> bool {
    plan(fields, schema)
        .iter()
        .any(|d| !matches!(d, Disguise::None))
}

/// Disguises the fields of one spec's JSON `fields` list in place.
fn disguise(fields: &mut [Value], schema: &Schema) {
    let parsed: Vec<Option<Field>> = fields.iter().map(parse_field).collect();
    if parsed.iter().any(Option::is_none) {
        return;
    }
    let parsed: Vec<Field> = parsed.into_iter().flatten().collect();
    for ((json, field), disguise) in fields.iter_mut().zip(&parsed).zip(plan(&parsed, schema)) {
        if matches!(disguise, Disguise::None) {
            continue;
        }
        json["name"] = Value::String(format!("{MARK}{}\u{1}{}", field.transform, field.name));
        if matches!(disguise, Disguise::NameAndTransform) {
            json["transform"] = Value::String(proxy_transform(&field.transform).to_string());
        }
    }
}

fn parse_field(json: &Value) -> Option<Field> {
    Some(Field {
        source_id: i32::try_from(json.get("source-id")?.as_i64()?).ok()?,
        name: json.get("name")?.as_str()?.to_owned(),
        transform: json.get("transform")?.as_str()?.parse().ok()?,
    })
}

/// A bucket transform unique to the disguised transform, so that several disguised fields on
/// one column stay distinct to the crate's redundancy check.
fn proxy_transform(transform: &Transform) -> Transform {
    let text = transform.to_string();
    let hash = text.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    Transform::Bucket(1_000_000_000 + hash % 1_000_000_000)
}

fn bucketable(schema: &Schema, source_id: i32) -> bool {
    let Some(field) = schema.field_by_id(source_id) else {
        return false;
    };
    matches!(
        field.field_type.as_ref(),
        Type::Primitive(
            PrimitiveType::Int
                | PrimitiveType::Long
                | PrimitiveType::Decimal { .. }
                | PrimitiveType::Date
                | PrimitiveType::Time
                | PrimitiveType::Timestamp
                | PrimitiveType::Timestamptz
                | PrimitiveType::TimestampNs
                | PrimitiveType::TimestamptzNs
                | PrimitiveType::String
                | PrimitiveType::Uuid
                | PrimitiveType::Fixed(_)
                | PrimitiveType::Binary
        )
    )
}

fn internal(e: serde_json::Error) -> CatalogError {
    CatalogError::Internal(format!("Cannot prepare table metadata: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use iceberg::spec::{NestedField, UnboundPartitionField};

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "ts", Type::Primitive(PrimitiveType::Timestamp)).into(),
                NestedField::optional(2, "flag", Type::Primitive(PrimitiveType::Boolean)).into(),
            ])
            .build()
            .unwrap()
    }

    fn spec(fields: &[(i32, &str, Transform)]) -> UnboundPartitionSpec {
        serde_json::from_value(serde_json::json!({
            "fields": fields.iter().enumerate().map(|(i, (source, name, transform))| {
                serde_json::to_value(UnboundPartitionField {
                    source_id: *source,
                    field_id: Some(1000 + i as i32),
                    name: (*name).into(),
                    transform: *transform,
                }).unwrap()
            }).collect::<Vec<_>>()
        }))
        .unwrap()
    }

    #[test]
    fn specs_the_crate_accepts_pass_unchanged() {
        let plain = spec(&[
            (1, "ts_day", Transform::Day),
            (2, "flag", Transform::Identity),
        ]);
        assert_eq!(spec_for_builder(plain.clone(), &schema()).unwrap(), plain);
    }

    #[test]
    fn disguised_fields_bind_in_the_crate_and_restore_exactly() {
        let java = spec(&[
            (1, "ts_day", Transform::Day),
            (1, "ts_hour", Transform::Hour),
            (1, "ts_month", Transform::Month),
            (2, "flag", Transform::Void),
        ]);
        let disguised = spec_for_builder(java.clone(), &schema()).unwrap();
        assert_ne!(disguised, java);
        // The crate binds what it would have refused.
        disguised.clone().bind(Arc::new(schema())).unwrap();
        assert!(java.clone().bind(Arc::new(schema())).is_err());
        let mut document = Map::new();
        document.insert(
            "partition-specs".into(),
            serde_json::json!([serde_json::to_value(&disguised).unwrap()]),
        );
        restore(&mut document);
        let restored: UnboundPartitionSpec =
            serde_json::from_value(document["partition-specs"][0].clone()).unwrap();
        assert_eq!(restored.fields(), java.fields());
    }
}
