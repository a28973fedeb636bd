//! Branches and tags of format-version 1 tables.
//!
//! Java writes `refs` for every format version, and engines create branches and tags on v1
//! tables. The `iceberg` crate neither writes `refs` for v1 nor reads them back (it rebuilds
//! `main` from `current-snapshot-id`), so a v1 table would lose every other branch and tag at its
//! next commit. For v1 the catalog therefore keeps the refs itself: read from the file it wrote,
//! updated by the commit's ref updates, and written into the new file.

use std::collections::HashSet;

use iceberg::TableUpdate;
use iceberg::spec::{MAIN_BRANCH, TableMetadata};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Ref name → the ref as the spec serialises it (`snapshot-id`, `type`, retention).
pub type Refs = Map<String, Value>;

#[derive(Deserialize)]
struct RefsOnly {
    #[serde(default)]
    refs: Option<Refs>,
    #[serde(rename = "current-snapshot-id", default)]
    current_snapshot_id: Option<i64>,
}

/// The refs a v1 metadata file records; a file without `refs` has `main` at its current
/// snapshot, as the spec says.
pub fn read(raw: &[u8]) -> serde_json::Result<Refs> {
    let file: RefsOnly = serde_json::from_slice(raw)?;
    Ok(match file.refs {
        Some(refs) => refs,
        None => main_only(file.current_snapshot_id),
    })
}

/// The refs after a commit: `base` with the commit's ref updates applied, `main` at the
/// result's current snapshot, and no ref to a snapshot the result no longer has.
pub fn after(mut refs: Refs, updates: &[TableUpdate], result: &TableMetadata) -> Refs {
    for update in updates {
        match update {
            TableUpdate::SetSnapshotRef {
                ref_name,
                reference,
            } => {
                if let Ok(value) = serde_json::to_value(reference) {
                    refs.insert(ref_name.clone(), value);
                }
            }
            TableUpdate::RemoveSnapshotRef { ref_name } => {
                refs.remove(ref_name);
            }
            _ => {}
        }
    }
    match result.current_snapshot_id() {
        Some(current) if snapshot_id(refs.get(MAIN_BRANCH)) != Some(current) => {
            refs.insert(
                MAIN_BRANCH.into(),
                json!({"snapshot-id": current, "type": "branch"}),
            );
        }
        None => {
            refs.remove(MAIN_BRANCH);
        }
        _ => {}
    }
    let live: HashSet<i64> = result.snapshots().map(|s| s.snapshot_id()).collect();
    refs.retain(|_, r| snapshot_id(Some(r)).is_some_and(|id| live.contains(&id)));
    refs
}

/// The snapshot a ref points at and whether it is a tag.
pub fn lookup(refs: &Refs, name: &str) -> Option<(i64, bool)> {
    let r = refs.get(name)?;
    Some((
        snapshot_id(Some(r))?,
        r.get("type").and_then(Value::as_str) == Some("tag"),
    ))
}

/// The refs of a document without any: `main` at its current snapshot, if it has one.
pub fn main_only(current_snapshot_id: Option<i64>) -> Refs {
    let mut refs = Refs::new();
    if let Some(current) = current_snapshot_id.filter(|id| *id != -1) {
        refs.insert(
            MAIN_BRANCH.into(),
            json!({"snapshot-id": current, "type": "branch"}),
        );
    }
    refs
}

fn snapshot_id(r: Option<&Value>) -> Option<i64> {
    r?.get("snapshot-id")?.as_i64()
}
