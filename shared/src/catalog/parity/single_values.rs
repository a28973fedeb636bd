//! Field defaults (`initial-default`, `write-default`) written as Java's `SingleValueParser`
//! writes them: the shortest form of the value's own type. The crate widens a `float` to `f64`
//! before writing it, so a default of 22.27 came out as 22.270000457763672 where Java writes
//! `Float.toString`'s 22.27; every other primitive type it already writes in Java's form.

use serde_json::{Number, Value};

/// The keys of a field that hold a single value of the field's type.
const DEFAULT_KEYS: [&str; 2] = ["initial-default", "write-default"];

/// Rewrites the defaults of every field of a schema's JSON, nested fields included.
pub fn java_schema(schema: &mut Value) {
    walk_type(schema);
}

/// Rewrites the defaults of every schema in a metadata document's JSON (`schemas`, and the
/// single `schema` of format version 1).
pub fn java_document(fields: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Array(schemas)) = fields.get_mut("schemas") {
        schemas.iter_mut().for_each(java_schema);
    }
    if let Some(schema) = fields.get_mut("schema") {
        java_schema(schema);
    }
}

fn walk_type(ty: &mut Value) {
    let Value::Object(ty) = ty else {
        return;
    };
    match ty.get("type").and_then(Value::as_str) {
        Some("struct") => {
            if let Some(Value::Array(fields)) = ty.get_mut("fields") {
                fields.iter_mut().for_each(walk_field);
            }
        }
        Some("list") => {
            if let Some(element) = ty.get_mut("element") {
                walk_type(element);
            }
        }
        Some("map") => {
            for part in ["key", "value"] {
                if let Some(part) = ty.get_mut(part) {
                    walk_type(part);
                }
            }
        }
        _ => {}
    }
}

fn walk_field(field: &mut Value) {
    let Value::Object(field) = field else {
        return;
    };
    if field.get("type").and_then(Value::as_str) == Some("float") {
        for key in DEFAULT_KEYS {
            if let Some(value) = field.get_mut(key) {
                shorten_float(value);
            }
        }
    }
    if let Some(ty) = field.get_mut("type") {
        walk_type(ty);
    }
}

/// A `float` value as the shortest decimal that reads back as the same 32-bit value.
fn shorten_float(value: &mut Value) {
    let Some(wide) = value.as_f64() else {
        return;
    };
    let narrow = wide as f32;
    if !narrow.is_finite() {
        return;
    }
    if let Some(number) = narrow
        .to_string()
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
    {
        *value = Value::Number(number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn float_defaults_are_written_in_their_shortest_form_at_any_depth() {
        let widened = f64::from(22.27f32);
        let mut schema = json!({"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "f", "required": false, "type": "float",
             "initial-default": widened, "write-default": f64::from(0.1f32)},
            {"id": 2, "name": "d", "required": false, "type": "double",
             "initial-default": widened},
            {"id": 3, "name": "s", "required": false, "type": {"type": "struct", "fields": [
                {"id": 4, "name": "inner", "required": false, "type": "float",
                 "initial-default": f64::from(-3.4028235e38f32)}
            ]}},
            {"id": 5, "name": "l", "required": false, "type": {"type": "list", "element-id": 6,
                "element-required": false, "element": {"type": "struct", "fields": [
                    {"id": 7, "name": "x", "required": false, "type": "float",
                     "write-default": f64::from(1.0e-45f32)}
                ]}}}
        ]});
        java_schema(&mut schema);
        let written = |value: &Value| serde_json::to_string(value).unwrap();
        let fields = &schema["fields"];
        assert_eq!(written(&fields[0]["initial-default"]), "22.27");
        assert_eq!(written(&fields[0]["write-default"]), "0.1");
        // A double is the value it says; only floats were widened.
        assert_eq!(written(&fields[1]["initial-default"]), "22.270000457763672");
        let inner = &fields[2]["type"]["fields"][0]["initial-default"];
        assert_eq!(written(inner), "-3.4028235e+38");
        let element = &fields[3]["type"]["element"]["fields"][0]["write-default"];
        assert_eq!(written(element), "1e-45");
        // Each still reads back as the same 32-bit value.
        let back = schema["fields"][0]["initial-default"].as_f64().unwrap() as f32;
        assert_eq!(back, 22.27f32);
    }

    #[test]
    fn values_that_are_not_finite_numbers_are_left_alone() {
        let mut schema = json!({"type": "struct", "fields": [
            {"id": 1, "name": "f", "required": false, "type": "float", "initial-default": null}
        ]});
        let before = schema.clone();
        java_schema(&mut schema);
        assert_eq!(schema, before);
    }
}
