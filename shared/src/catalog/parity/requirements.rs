//! Commit requirements checked with the wording of Java's `UpdateRequirement`.
//!
//! Clients and people match on these messages ("Requirement failed: default partition spec
//! changed: expected id 0 != 1"), so they follow Java's text, with Java's single prefix; the
//! `iceberg` crate words them differently.

use iceberg::TableRequirement;
use iceberg::spec::TableMetadata;

use super::refs_v1::{self, Refs};

/// Why a requirement does not hold against `base` (`None` when the table does not exist).
/// `v1_refs` are a format-version 1 table's refs, which the crate does not keep (see
/// [`super::refs_v1`]).
pub fn check(
    requirement: &TableRequirement,
    base: Option<&TableMetadata>,
    v1_refs: Option<&Refs>,
) -> Result<(), String> {
    let failed = |detail: String| Err(format!("Requirement failed: {detail}"));
    let Some(base) = base else {
        return match requirement {
            TableRequirement::NotExist => Ok(()),
            _ => failed("table does not exist".into()),
        };
    };
    match requirement {
        TableRequirement::NotExist => failed("table already exists".into()),
        TableRequirement::UuidMatch { uuid } if *uuid != base.uuid() => failed(format!(
            "UUID does not match: expected {} != {uuid}",
            base.uuid()
        )),
        TableRequirement::RefSnapshotIdMatch { r#ref, snapshot_id } => {
            let current = match v1_refs {
                Some(refs) => refs_v1::lookup(refs, r#ref).map(|(id, _)| id),
                None => base.snapshot_for_ref(r#ref).map(|s| s.snapshot_id()),
            };
            let kind = || match v1_refs {
                Some(refs) => match refs_v1::lookup(refs, r#ref) {
                    Some((_, true)) => "tag",
                    _ => "branch",
                },
                None => ref_type(base, r#ref),
            };
            match (current, snapshot_id) {
                (Some(_), None) => failed(format!("{} {ref} was created concurrently", kind())),
                (Some(found), Some(expected)) if found != *expected => failed(format!(
                    "{} {ref} has changed: expected id {expected} != {found}",
                    kind()
                )),
                (None, Some(expected)) => failed(format!(
                    "branch or tag {ref} is missing, expected {expected}"
                )),
                _ => Ok(()),
            }
        }
        TableRequirement::LastAssignedFieldIdMatch {
            last_assigned_field_id: expected,
        } if *expected != base.last_column_id() => failed(format!(
            "last assigned field id changed: expected id {expected} != {}",
            base.last_column_id()
        )),
        TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: expected,
        } if *expected != base.current_schema_id() => failed(format!(
            "current schema changed: expected id {expected} != {}",
            base.current_schema_id()
        )),
        TableRequirement::LastAssignedPartitionIdMatch {
            last_assigned_partition_id: expected,
        } if *expected != base.last_partition_id() => failed(format!(
            "last assigned partition id changed: expected id {expected} != {}",
            base.last_partition_id()
        )),
        TableRequirement::DefaultSpecIdMatch {
            default_spec_id: expected,
        } if *expected != base.default_partition_spec_id() => failed(format!(
            "default partition spec changed: expected id {expected} != {}",
            base.default_partition_spec_id()
        )),
        TableRequirement::DefaultSortOrderIdMatch {
            default_sort_order_id: expected,
        } if *expected != base.default_sort_order_id() => failed(format!(
            "default sort order changed: expected id {expected} != {}",
            base.default_sort_order_id()
        )),
        _ => Ok(()),
    }
}

/// "branch" or "tag"; only needed to word a failure, so the document is re-serialised then (the
/// crate does not expose a ref's type).
fn ref_type(base: &TableMetadata, name: &str) -> &'static str {
    let tag = serde_json::to_value(base).ok().is_some_and(|doc| {
        doc.pointer(&format!(
            "/refs/{}/type",
            name.replace('~', "~0").replace('/', "~1")
        ))
        .and_then(serde_json::Value::as_str)
            == Some("tag")
    });
    if tag { "tag" } else { "branch" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{
        FormatVersion, NestedField, PrimitiveType, Schema, SortOrder, TableMetadataBuilder, Type,
        UnboundPartitionSpec,
    };

    fn table() -> TableMetadata {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        TableMetadataBuilder::new(
            schema,
            UnboundPartitionSpec::builder().build(),
            SortOrder::unsorted_order(),
            "file:///w/t".into(),
            FormatVersion::V2,
            Default::default(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata
    }

    #[test]
    fn failures_read_as_java_words_them_with_one_prefix() {
        let base = table();
        let spec = TableRequirement::DefaultSpecIdMatch { default_spec_id: 1 };
        assert_eq!(
            check(&spec, Some(&base), None).unwrap_err(),
            "Requirement failed: default partition spec changed: expected id 1 != 0"
        );
        assert_eq!(
            check(&TableRequirement::NotExist, Some(&base), None).unwrap_err(),
            "Requirement failed: table already exists"
        );
        let missing = TableRequirement::RefSnapshotIdMatch {
            r#ref: "main".into(),
            snapshot_id: Some(7),
        };
        assert_eq!(
            check(&missing, Some(&base), None).unwrap_err(),
            "Requirement failed: branch or tag main is missing, expected 7"
        );
        let schema = TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: 3,
        };
        assert_eq!(
            check(&schema, Some(&base), None).unwrap_err(),
            "Requirement failed: current schema changed: expected id 3 != 0"
        );
    }

    #[test]
    fn requirements_that_hold_pass() {
        let base = table();
        for requirement in [
            TableRequirement::UuidMatch { uuid: base.uuid() },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: "main".into(),
                snapshot_id: None,
            },
            TableRequirement::LastAssignedFieldIdMatch {
                last_assigned_field_id: 1,
            },
            TableRequirement::DefaultSortOrderIdMatch {
                default_sort_order_id: 0,
            },
        ] {
            assert_eq!(
                check(&requirement, Some(&base), None),
                Ok(()),
                "{requirement:?}"
            );
        }
        assert_eq!(check(&TableRequirement::NotExist, None, None), Ok(()));
    }
}
