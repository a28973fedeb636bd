//! A new table's field ids as Java numbers them (`TypeUtil.assignFreshIds`, applied by
//! `TableMetadata.newTableMetadata`). Both number a struct's fields before descending into them and
//! a list's element before its type, but for a map Java numbers the key and the value first and
//! only then descends into the key's type and the value's; the crate's builder descends into the
//! key before numbering the value. The two differ whenever a map's key is nested, and an engine
//! that computed ids or a name mapping the Java way would then disagree with the table.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    FormatVersion, ListType, MapType, NestedFieldRef, Schema, SortOrder, StructType, TableMetadata,
    TableMetadataBuilder, Type, UnboundPartitionSpec,
};
use iceberg::{Error, ErrorKind};
use serde_json::Value;

/// What a new table starts from, as the client sent it.
pub struct NewTable {
    pub schema: Schema,
    pub spec: UnboundPartitionSpec,
    pub sort_order: SortOrder,
    pub location: String,
    pub format_version: FormatVersion,
    pub properties: HashMap<String, String>,
}

/// The crate's new-table metadata with the schema renumbered in Java's order, and every partition
/// and sort field pointed at its column's new id.
pub fn new_table_metadata(table: NewTable) -> iceberg::Result<TableMetadata> {
    let java = java_fresh_schema(&table.schema)?;
    let built = TableMetadataBuilder::new(
        table.schema,
        table.spec,
        table.sort_order,
        table.location,
        table.format_version,
        table.properties,
    )?
    .build()?
    .metadata;
    let crate_schema = built.current_schema();
    if crate_schema.as_struct() == java.as_struct() {
        return Ok(built);
    }
    let mut renumber = HashMap::new();
    pair_struct(crate_schema.as_struct(), java.as_struct(), &mut renumber)?;
    let mut document = serde_json::to_value(&built).map_err(invalid)?;
    let java_schema = serde_json::to_value(&java).map_err(invalid)?;
    if let Some(schemas) = document.get_mut("schemas").and_then(Value::as_array_mut) {
        *schemas = vec![java_schema.clone()];
    }
    if let Some(schema) = document.get_mut("schema") {
        *schema = java_schema;
    }
    for key in ["partition-specs", "sort-orders"] {
        for entry in document
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            renumber_sources(entry.get_mut("fields"), &renumber)?;
        }
    }
    renumber_sources(document.get_mut("partition-spec"), &renumber)?;
    serde_json::from_value(document).map_err(invalid)
}

/// The schema with id 0 and field ids from 1 in Java's order; identifier fields follow their
/// columns.
pub fn java_fresh_schema(schema: &Schema) -> iceberg::Result<Schema> {
    let mut fresh = FreshIds {
        next: 1,
        renumber: HashMap::new(),
    };
    let fields = fresh.fields(schema.as_struct().fields())?;
    let identifiers = schema
        .identifier_field_ids()
        .map(|id| {
            fresh.renumber.get(&id).copied().ok_or_else(|| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!("Identifier field {id} is not a column of the schema"),
                )
            })
        })
        .collect::<iceberg::Result<Vec<_>>>()?;
    Schema::builder()
        .with_schema_id(0)
        .with_fields(fields)
        .with_identifier_field_ids(identifiers)
        .build()
}

struct FreshIds {
    next: i32,
    renumber: HashMap<i32, i32>,
}

impl FreshIds {
    fn take(&mut self, old: i32) -> iceberg::Result<i32> {
        let id = self.next;
        self.next = id
            .checked_add(1)
            .ok_or_else(|| Error::new(ErrorKind::DataInvalid, "Too many fields"))?;
        if self.renumber.insert(old, id).is_some() {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                format!("Field id {old} is used twice in the schema"),
            ));
        }
        Ok(id)
    }

    fn fields(&mut self, fields: &[NestedFieldRef]) -> iceberg::Result<Vec<NestedFieldRef>> {
        let ids = fields
            .iter()
            .map(|f| self.take(f.id))
            .collect::<iceberg::Result<Vec<_>>>()?;
        fields
            .iter()
            .zip(ids)
            .map(|(field, id)| self.field(field, id))
            .collect()
    }

    fn field(&mut self, field: &NestedFieldRef, id: i32) -> iceberg::Result<NestedFieldRef> {
        let mut renumbered = field.as_ref().clone();
        renumbered.id = id;
        renumbered.field_type = Box::new(self.nested(&field.field_type)?);
        Ok(Arc::new(renumbered))
    }

    fn nested(&mut self, field_type: &Type) -> iceberg::Result<Type> {
        Ok(match field_type {
            Type::Primitive(_) => field_type.clone(),
            Type::Struct(s) => Type::Struct(StructType::new(self.fields(s.fields())?)),
            Type::List(list) => {
                let id = self.take(list.element_field.id)?;
                Type::List(ListType {
                    element_field: self.field(&list.element_field, id)?,
                })
            }
            Type::Map(map) => {
                let key = self.take(map.key_field.id)?;
                let value = self.take(map.value_field.id)?;
                Type::Map(MapType {
                    key_field: self.field(&map.key_field, key)?,
                    value_field: self.field(&map.value_field, value)?,
                })
            }
        })
    }
}

/// Maps each id of `from` to the id at the same place in `to`; both come from one schema.
fn pair_struct(
    from: &StructType,
    to: &StructType,
    renumber: &mut HashMap<i32, i32>,
) -> iceberg::Result<()> {
    if from.fields().len() != to.fields().len() {
        return Err(differing_shapes());
    }
    for (a, b) in from.fields().iter().zip(to.fields()) {
        pair_field(a, b, renumber)?;
    }
    Ok(())
}

fn pair_field(
    from: &NestedFieldRef,
    to: &NestedFieldRef,
    renumber: &mut HashMap<i32, i32>,
) -> iceberg::Result<()> {
    renumber.insert(from.id, to.id);
    match (from.field_type.as_ref(), to.field_type.as_ref()) {
        (Type::Primitive(_), Type::Primitive(_)) => Ok(()),
        (Type::Struct(a), Type::Struct(b)) => pair_struct(a, b, renumber),
        (Type::List(a), Type::List(b)) => pair_field(&a.element_field, &b.element_field, renumber),
        (Type::Map(a), Type::Map(b)) => {
            pair_field(&a.key_field, &b.key_field, renumber)?;
            pair_field(&a.value_field, &b.value_field, renumber)
        }
        _ => Err(differing_shapes()),
    }
}

fn renumber_sources(
    fields: Option<&mut Value>,
    renumber: &HashMap<i32, i32>,
) -> iceberg::Result<()> {
    for field in fields.and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(source) = field.get_mut("source-id") else {
            continue;
        };
        let old = source
            .as_i64()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(differing_shapes)?;
        let new = renumber.get(&old).ok_or_else(differing_shapes)?;
        *source = Value::from(*new);
    }
    Ok(())
}

fn differing_shapes() -> Error {
    Error::new(
        ErrorKind::Unexpected,
        "The renumbered schema does not match the built one",
    )
}

fn invalid(e: serde_json::Error) -> Error {
    Error::new(
        ErrorKind::Unexpected,
        format!("Table metadata round trip: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{
        NestedField, NullOrder, PrimitiveType, SortDirection, SortField, Transform,
    };

    fn optional(id: i32, name: &str, t: Type) -> NestedFieldRef {
        NestedField::optional(id, name, t).into()
    }

    fn string() -> Type {
        Type::Primitive(PrimitiveType::String)
    }

    fn int() -> Type {
        Type::Primitive(PrimitiveType::Int)
    }

    fn strukt(fields: Vec<NestedFieldRef>) -> Type {
        Type::Struct(StructType::new(fields))
    }

    fn map(key_id: i32, key: Type, value_id: i32, value: Type) -> Type {
        Type::Map(MapType {
            key_field: NestedField::map_key_element(key_id, key).into(),
            value_field: NestedField::map_value_element(value_id, value, false).into(),
        })
    }

    fn list(id: i32, element: Type) -> Type {
        Type::List(ListType {
            element_field: NestedField::list_element(id, element, false).into(),
        })
    }

    /// `(name, id)` of every field, depth first, in the order a reader meets them.
    fn ids(schema: &Schema) -> Vec<(String, i32)> {
        fn walk(t: &Type, out: &mut Vec<(String, i32)>) {
            match t {
                Type::Primitive(_) => {}
                Type::Struct(s) => {
                    for f in s.fields() {
                        out.push((f.name.clone(), f.id));
                        walk(&f.field_type, out);
                    }
                }
                Type::List(l) => {
                    out.push(("element".into(), l.element_field.id));
                    walk(&l.element_field.field_type, out);
                }
                Type::Map(m) => {
                    out.push(("key".into(), m.key_field.id));
                    walk(&m.key_field.field_type, out);
                    out.push(("value".into(), m.value_field.id));
                    walk(&m.value_field.field_type, out);
                }
            }
        }
        let mut out = vec![];
        walk(&Type::Struct(schema.as_struct().clone()), &mut out);
        out
    }

    fn named(pairs: &[(&str, i32)]) -> Vec<(String, i32)> {
        pairs.iter().map(|(n, i)| (n.to_string(), *i)).collect()
    }

    /// The shape, numbered as Java's `TypeUtil.assignFreshIds` numbers it: nine top-level
    /// columns, then the map's key and value (10, 11), then the key's fields, then the value's.
    #[test]
    fn a_map_numbers_its_key_and_value_before_their_fields() {
        let mut fields: Vec<NestedFieldRef> = (1..=8)
            .map(|i| optional(i, &format!("c{i}"), int()))
            .collect();
        fields.push(optional(
            9,
            "m",
            map(
                100,
                strukt(vec![
                    optional(101, "k1", int()),
                    optional(102, "k2", string()),
                    optional(103, "k3", int()),
                    optional(104, "k4", string()),
                ]),
                105,
                strukt(vec![
                    optional(106, "v1", int()),
                    optional(107, "v2", string()),
                ]),
            ),
        ));
        let schema = Schema::builder().with_fields(fields).build().unwrap();
        let fresh = java_fresh_schema(&schema).unwrap();
        let got = ids(&fresh);
        assert_eq!(
            got[8..],
            named(&[
                ("m", 9),
                ("key", 10),
                ("k1", 12),
                ("k2", 13),
                ("k3", 14),
                ("k4", 15),
                ("value", 11),
                ("v1", 16),
                ("v2", 17),
            ])[..]
        );
    }

    #[test]
    fn lists_of_maps_and_maps_of_lists_follow_java() {
        let schema = Schema::builder()
            .with_fields(vec![
                optional(
                    50,
                    "lm",
                    list(
                        51,
                        map(52, strukt(vec![optional(53, "a", int())]), 54, int()),
                    ),
                ),
                optional(
                    60,
                    "ml",
                    map(
                        61,
                        list(62, int()),
                        63,
                        list(64, strukt(vec![optional(65, "b", string())])),
                    ),
                ),
                optional(
                    70,
                    "s",
                    strukt(vec![optional(71, "m", map(72, string(), 73, int()))]),
                ),
            ])
            .build()
            .unwrap();
        let got = ids(&java_fresh_schema(&schema).unwrap());
        assert_eq!(
            got,
            named(&[
                ("lm", 1),
                ("element", 4),
                ("key", 5),
                ("a", 7),
                ("value", 6),
                ("ml", 2),
                ("key", 8),
                ("element", 10),
                ("value", 9),
                ("element", 11),
                ("b", 12),
                ("s", 3),
                ("m", 13),
                ("key", 14),
                ("value", 15),
            ])
        );
    }

    #[test]
    fn partition_and_sort_fields_follow_their_columns() {
        let schema = Schema::builder()
            .with_fields(vec![
                optional(
                    1,
                    "m",
                    map(2, strukt(vec![optional(3, "k", int())]), 4, int()),
                ),
                NestedField::required(5, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .with_identifier_field_ids(vec![5])
            .build()
            .unwrap();
        let spec = UnboundPartitionSpec::builder()
            .add_partition_field(5, "id_bucket", Transform::Bucket(4))
            .unwrap()
            .build();
        let order = SortOrder::builder()
            .with_order_id(1)
            .with_sort_field(SortField {
                source_id: 5,
                transform: Transform::Identity,
                direction: SortDirection::Ascending,
                null_order: NullOrder::First,
            })
            .build(&schema)
            .unwrap();
        for format_version in [FormatVersion::V1, FormatVersion::V2] {
            let metadata = new_table_metadata(NewTable {
                schema: schema.clone(),
                spec: spec.clone(),
                sort_order: order.clone(),
                location: "s3://b/t".into(),
                format_version,
                properties: HashMap::new(),
            })
            .unwrap();
            let current = metadata.current_schema();
            let id = current.field_by_name("id").unwrap().id;
            assert_eq!(id, 2, "top-level columns come first");
            assert_eq!(current.field_by_name("m.key.k").unwrap().id, 5);
            assert_eq!(current.identifier_field_ids().collect::<Vec<_>>(), vec![id]);
            assert_eq!(metadata.default_partition_spec().fields()[0].source_id, id);
            assert_eq!(
                metadata.default_sort_order().fields[0].source_id,
                id,
                "{format_version:?}"
            );
            assert_eq!(metadata.last_column_id(), 5);
            assert_eq!(metadata.schemas_iter().count(), 1);
        }
    }
}
