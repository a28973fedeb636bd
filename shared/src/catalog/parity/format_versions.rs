//! What a format version may hold, as Java decides it: `Schema.checkCompatibility` when a schema
//! is added (on create and on `add-schema`): nanosecond timestamps and non-null initial defaults
//! need format version 3; `EncryptionUtil.checkCompatibility` on create: so do the encryption
//! properties. The crate's builder accepts them in any version, so a v2 table could be given a
//! column its own readers reject.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use iceberg::spec::{FormatVersion, Literal, PrimitiveType, Schema, Type};
use serde_json::Value;

/// The first format version whose tables may hold initial defaults (Java's
/// `DEFAULT_VALUES_MIN_FORMAT_VERSION`).
const DEFAULT_VALUES_MIN_FORMAT_VERSION: FormatVersion = FormatVersion::V3;

/// `Ok` when `schema` may be a schema of a `format_version` table; otherwise Java's message,
/// one line per offending field in field-id order.
pub fn check_schema(schema: &Schema, format_version: FormatVersion) -> Result<(), String> {
    let mut problems = BTreeMap::new();
    for (id, field) in schema.field_id_to_fields() {
        let name = || {
            schema
                .name_by_field_id(*id)
                .unwrap_or(&field.name)
                .to_owned()
        };
        if let Some(min) = min_format_version(&field.field_type)
            && format_version < min
        {
            problems.insert(
                *id,
                format!(
                    "Invalid type for {}: {} is not supported until {}",
                    name(),
                    field.field_type,
                    number(min)
                ),
            );
        }
        if let Some(default) = &field.initial_default
            && format_version < DEFAULT_VALUES_MIN_FORMAT_VERSION
        {
            let shown = default
                .clone()
                .try_into_json(&field.field_type)
                .map(|json| json.to_string())
                .unwrap_or_else(|_| format!("{default:?}"));
            problems.insert(
                *id,
                format!(
                    "Invalid initial default for {}: non-null default ({shown}) is not supported until {}",
                    name(),
                    number(DEFAULT_VALUES_MIN_FORMAT_VERSION)
                ),
            );
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = problems.into_values().collect();
    Err(format!(
        "Invalid schema for {}:\n- {}",
        number(format_version),
        lines.join("\n- ")
    ))
}

/// Java's `TableProperties` that only a format-version 3 table may be created with.
const ENCRYPTION_PROPERTIES: [&str; 2] = ["encryption.key-id", "encryption.data-key-length"];

/// `Ok` when a `format_version` table may be created with `properties`; otherwise Java's
/// message naming the encryption properties it may not have.
pub fn check_create_properties(
    properties: &HashMap<String, String>,
    format_version: FormatVersion,
) -> Result<(), String> {
    if format_version >= FormatVersion::V3 {
        return Ok(());
    }
    let present: BTreeSet<&str> = ENCRYPTION_PROPERTIES
        .into_iter()
        .filter(|key| properties.contains_key(*key))
        .collect();
    if present.is_empty() {
        return Ok(());
    }
    let listed: Vec<&str> = present.into_iter().collect();
    Err(format!(
        "Invalid properties for {}: [{}]",
        number(format_version),
        listed.join(", ")
    ))
}

/// Whether JSON `bytes` may carry a field default (`initial-default`, `write-default`): only
/// those need [`check_defaults_readable`].
pub fn mentions_defaults(bytes: &[u8]) -> bool {
    bytes.windows(9).any(|w| w == b"-default\"")
}

/// `Ok` when every field default in `document` (a request body, a metadata file) is one the
/// crate can read. The crate reads a default it cannot parse as no default at all
/// (`NestedField`'s deserializer), so a table would silently lose it; Java reads them all. The
/// crate 0.10.1 reads no `timestamp_ns` or `timestamptz_ns` default, and a `timestamptz` one only
/// with the `+00:00` offset Java writes.
pub fn check_defaults_readable(document: &Value) -> Result<(), String> {
    match document {
        Value::Object(fields) => {
            let defaults: Vec<(&str, &Value)> = ["initial-default", "write-default"]
                .into_iter()
                .filter_map(|key| Some((key, fields.get(key).filter(|d| !d.is_null())?)))
                .collect();
            // Only a field with a default needs its type parsed.
            if !defaults.is_empty()
                && let Some(field_type) = fields
                    .get("type")
                    .and_then(|t| serde_json::from_value::<Type>(t.clone()).ok())
            {
                for (key, default) in defaults {
                    let read = Literal::try_from_json(default.clone(), &field_type);
                    if !matches!(read, Ok(Some(_))) {
                        let name = fields.get("name").and_then(Value::as_str).unwrap_or("?");
                        let why = read
                            .err()
                            .map(|e| format!(": {}", e.message()))
                            .unwrap_or_default();
                        return Err(format!(
                            "The {key} {default} of field '{name}' cannot be kept as a {field_type} value{why}"
                        ));
                    }
                }
            }
            fields.values().try_for_each(check_defaults_readable)
        }
        Value::Array(items) => items.iter().try_for_each(check_defaults_readable),
        _ => Ok(()),
    }
}

/// The first format version that has `field_type` (Java's `Schema.MIN_FORMAT_VERSIONS`); the
/// crate cannot represent Java's other v3 types (variant, unknown, geometry, geography) at all.
fn min_format_version(field_type: &Type) -> Option<FormatVersion> {
    match field_type {
        Type::Primitive(PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs) => {
            Some(FormatVersion::V3)
        }
        _ => None,
    }
}

fn number(version: FormatVersion) -> &'static str {
    match version {
        FormatVersion::V1 => "v1",
        FormatVersion::V2 => "v2",
        FormatVersion::V3 => "v3",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{Literal, NestedField, PrimitiveLiteral, StructType};

    use super::*;

    fn schema(fields: Vec<NestedField>) -> Schema {
        Schema::builder()
            .with_fields(fields.into_iter().map(Arc::new))
            .build()
            .unwrap()
    }

    #[test]
    fn nanosecond_timestamps_need_v3_wherever_they_nest() {
        let nested = schema(vec![
            NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)),
            NestedField::optional(
                2,
                "event",
                Type::Struct(StructType::new(vec![Arc::new(NestedField::optional(
                    3,
                    "at",
                    Type::Primitive(PrimitiveType::TimestamptzNs),
                ))])),
            ),
            NestedField::optional(4, "seen", Type::Primitive(PrimitiveType::TimestampNs)),
        ]);
        assert_eq!(
            check_schema(&nested, FormatVersion::V2).unwrap_err(),
            "Invalid schema for v2:\n\
             - Invalid type for event.at: timestamptz_ns is not supported until v3\n\
             - Invalid type for seen: timestamp_ns is not supported until v3"
        );
        assert!(check_schema(&nested, FormatVersion::V1).is_err());
        assert_eq!(check_schema(&nested, FormatVersion::V3), Ok(()));
    }

    #[test]
    fn initial_defaults_need_v3_and_write_defaults_alone_do_not() {
        let with_initial = schema(vec![
            NestedField::optional(1, "qty", Type::Primitive(PrimitiveType::Int))
                .with_initial_default(Literal::Primitive(PrimitiveLiteral::Int(7))),
        ]);
        assert_eq!(
            check_schema(&with_initial, FormatVersion::V2).unwrap_err(),
            "Invalid schema for v2:\n\
             - Invalid initial default for qty: non-null default (7) is not supported until v3"
        );
        assert_eq!(check_schema(&with_initial, FormatVersion::V3), Ok(()));

        let write_only = schema(vec![
            NestedField::optional(1, "qty", Type::Primitive(PrimitiveType::Int))
                .with_write_default(Literal::Primitive(PrimitiveLiteral::Int(7))),
        ]);
        assert_eq!(check_schema(&write_only, FormatVersion::V2), Ok(()));
    }

    #[test]
    fn defaults_the_crate_would_drop_are_named() {
        let body = serde_json::json!({"updates": [{"action": "add-schema", "schema": {"type": "struct", "fields": [
            {"id": 1, "name": "qty", "type": "int", "required": false, "initial-default": 3},
            {"id": 2, "name": "point", "required": false, "type": {"type": "struct", "fields": [
                {"id": 3, "name": "at", "type": "timestamp_ns", "required": false, "write-default": "2025-01-01T00:00:00"}
            ]}}
        ]}}]});
        let refused = check_defaults_readable(&body).unwrap_err();
        assert!(
            refused.starts_with("The write-default \"2025-01-01T00:00:00\" of field 'at' cannot be kept as a timestamp_ns value"),
            "{refused}"
        );
        let wrong_type =
            serde_json::json!({"id": 1, "name": "qty", "type": "int", "initial-default": "three"});
        assert!(check_defaults_readable(&wrong_type).is_err());
        let readable = serde_json::json!({"fields": [
            {"id": 1, "name": "qty", "type": "int", "initial-default": 3, "write-default": null},
            {"id": 2, "name": "at", "type": "timestamptz", "initial-default": "2025-01-01T00:00:00.000001+00:00"},
            {"type": "string", "name": "no default"}
        ]});
        assert_eq!(check_defaults_readable(&readable), Ok(()));
    }

    #[test]
    fn encryption_properties_need_v3() {
        let properties = HashMap::from([
            ("encryption.key-id".to_owned(), "k1".to_owned()),
            ("owner".to_owned(), "me".to_owned()),
        ]);
        assert_eq!(
            check_create_properties(&properties, FormatVersion::V2).unwrap_err(),
            "Invalid properties for v2: [encryption.key-id]"
        );
        assert_eq!(
            check_create_properties(&properties, FormatVersion::V3),
            Ok(())
        );
        assert_eq!(
            check_create_properties(&HashMap::new(), FormatVersion::V1),
            Ok(())
        );
    }
}
