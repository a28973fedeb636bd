//! A writer's append that lost its race to a compaction, moved onto the compaction instead of
//! refused: the one case where Floe answers a commit whose `assert-ref-snapshot-id` names an
//! older main snapshot. Compaction is the catalog's own work and must never fail a writer
//! (the 409 storms other catalogs' optimizers cause); an append changes no file the
//! compaction replaced, so placing it after the compaction is what the writer's own retry
//! would do, without the round trip. Anything else keeps the spec's 409.
//!
//! Moved only when every snapshot between the one the writer asserted and main is a Floe
//! compaction, the commit is exactly one `append` snapshot on the asserted one plus main's
//! move to it, and its manifest list is the asserted snapshot's manifests plus manifests that
//! only add files of the new snapshot.

use std::collections::HashSet;

use iceberg::spec::{
    FormatVersion, ManifestFile, Operation, Snapshot, SnapshotReference, Summary, TableMetadata,
};
use iceberg::{TableRequirement, TableUpdate};

use crate::catalog::tables::plan::manifests::TableManifests;
use crate::catalog::tables::snapshot_files::write_list;
use crate::error::Result;

/// Summary key marking a Floe compaction's snapshot (value: the strategy), so that an append
/// it raced can be placed after it.
pub const REWRITE_KEY: &str = "floe.rewrite";

/// The totals a moved append carries: what the writer counted on the snapshot it asserted,
/// plus what the compactions since changed.
const TOTALS: [&str; 4] = [
    "total-data-files",
    "total-records",
    "total-files-size",
    "total-delete-files",
];

/// A commit's requirements and updates moved onto `base`'s main when it is an append that
/// lost to compactions only; `None` when it is not (its requirements then answer as they
/// would).
pub async fn append_over_compactions(
    files: &TableManifests<'_>,
    base: &TableMetadata,
    requirements: &[TableRequirement],
    updates: &[TableUpdate],
) -> Result<Option<(Vec<TableRequirement>, Vec<TableUpdate>)>> {
    if base.format_version() != FormatVersion::V2 {
        return Ok(None);
    }
    let Some(asserted) = requirements.iter().find_map(|r| match r {
        TableRequirement::RefSnapshotIdMatch {
            r#ref,
            snapshot_id: Some(id),
        } if r#ref == "main" => Some(*id),
        _ => None,
    }) else {
        return Ok(None);
    };
    let Some(main) = base.snapshot_for_ref("main") else {
        return Ok(None);
    };
    if main.snapshot_id() == asserted || !only_compactions_since(base, asserted) {
        return Ok(None);
    }
    let [
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name,
            reference,
        },
    ] = updates
    else {
        return Ok(None);
    };
    if ref_name != "main"
        || reference.snapshot_id != snapshot.snapshot_id()
        || snapshot.parent_snapshot_id() != Some(asserted)
        || snapshot.summary().operation != Operation::Append
        || base.snapshot_by_id(snapshot.snapshot_id()).is_some()
    {
        return Ok(None);
    }
    let asserted_snapshot = base
        .snapshot_by_id(asserted)
        .expect("checked by only_compactions_since");
    let version = base.format_version();
    // A list outside the table's directory is not read here; the commit's own checks refuse it.
    let Ok(written) = files.list(snapshot.manifest_list(), version).await else {
        return Ok(None);
    };
    let before = files
        .list(asserted_snapshot.manifest_list(), version)
        .await?;
    let before_paths: HashSet<&str> = before.iter().map(|m| m.manifest_path.as_str()).collect();
    let written_paths: HashSet<&str> = written.iter().map(|m| m.manifest_path.as_str()).collect();
    if !before_paths.is_subset(&written_paths) {
        return Ok(None);
    }
    let mut added: Vec<ManifestFile> = Vec::new();
    for m in written
        .iter()
        .filter(|m| !before_paths.contains(m.manifest_path.as_str()))
    {
        if m.added_snapshot_id != snapshot.snapshot_id()
            || m.has_existing_files()
            || m.has_deleted_files()
        {
            return Ok(None);
        }
        added.push(m.clone());
    }
    let now = files.list(main.manifest_list(), version).await?;
    let sequence = base.last_sequence_number() + 1;
    for m in &mut added {
        if m.sequence_number == snapshot.sequence_number() {
            m.sequence_number = sequence;
        }
        if m.min_sequence_number == snapshot.sequence_number() {
            m.min_sequence_number = sequence;
        }
    }

    let location = format!(
        "{}/metadata/snap-{}-rebased-{}.avro",
        files.directory.trim_end_matches('/'),
        snapshot.snapshot_id(),
        uuid::Uuid::new_v4()
    );
    write_list(
        files,
        &location,
        (snapshot.snapshot_id(), main.snapshot_id(), sequence),
        added.into_iter().chain(now.iter().cloned()).collect(),
    )
    .await?;

    let mut properties = snapshot.summary().additional_properties.clone();
    for key in TOTALS {
        let of = |s: &Snapshot| {
            s.summary()
                .additional_properties
                .get(key)
                .and_then(|v| v.parse::<i128>().ok())
        };
        let written = properties.get(key).and_then(|v| v.parse::<i128>().ok());
        if let (Some(written), Some(then), Some(now)) = (written, of(asserted_snapshot), of(main)) {
            properties.insert(key.to_owned(), (written + now - then).max(0).to_string());
        }
    }
    let moved = Snapshot::builder()
        .with_snapshot_id(snapshot.snapshot_id())
        .with_parent_snapshot_id(Some(main.snapshot_id()))
        .with_sequence_number(sequence)
        .with_timestamp_ms(snapshot.timestamp_ms().max(base.last_updated_ms() + 1))
        .with_manifest_list(location)
        .with_summary(Summary {
            operation: Operation::Append,
            additional_properties: properties,
        })
        .schema_id_opt(snapshot.schema_id())
        .build();
    let requirements = requirements
        .iter()
        .map(|r| match r {
            TableRequirement::RefSnapshotIdMatch { r#ref, .. } if r#ref == "main" => {
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: r#ref.clone(),
                    snapshot_id: Some(main.snapshot_id()),
                }
            }
            other => other.clone(),
        })
        .collect();
    tracing::info!(
        snapshot_id = snapshot.snapshot_id(),
        asserted,
        main = main.snapshot_id(),
        "an append that lost to a compaction was placed after it"
    );
    Ok(Some((
        requirements,
        vec![
            TableUpdate::AddSnapshot { snapshot: moved },
            TableUpdate::SetSnapshotRef {
                ref_name: "main".into(),
                reference: SnapshotReference::new(
                    snapshot.snapshot_id(),
                    reference.retention.clone(),
                ),
            },
        ],
    )))
}

/// Whether main reaches `asserted` through Floe compactions only.
fn only_compactions_since(metadata: &TableMetadata, asserted: i64) -> bool {
    let mut current = metadata.snapshot_for_ref("main");
    while let Some(snapshot) = current {
        if snapshot.snapshot_id() == asserted {
            return true;
        }
        let summary = snapshot.summary();
        if summary.operation != Operation::Replace
            || !summary.additional_properties.contains_key(REWRITE_KEY)
        {
            return false;
        }
        current = snapshot
            .parent_snapshot_id()
            .and_then(|id| metadata.snapshot_by_id(id));
    }
    false
}
