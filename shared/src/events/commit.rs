//! What a commit's event says about it: the snapshots it added and the refs it moved.

use iceberg::TableUpdate;
use iceberg::spec::TableMetadata;

use super::{AddedSnapshot, Draft, MAX_DESCRIBED_SNAPSHOTS, RefChange};

impl Draft {
    /// Describes a commit from `base` to `next` made of `updates`: each added snapshot as
    /// written (authors stamped), each ref set or removed with where it pointed before.
    pub fn commit(
        mut self,
        base: &TableMetadata,
        next: &TableMetadata,
        updates: &[TableUpdate],
    ) -> Self {
        let mut added = 0u64;
        for update in updates {
            match update {
                TableUpdate::AddSnapshot { snapshot } => {
                    added += 1;
                    if self.data.added_snapshots.len() >= MAX_DESCRIBED_SNAPSHOTS {
                        continue;
                    }
                    let written = next.snapshot_by_id(snapshot.snapshot_id());
                    let snapshot = written.map_or(snapshot, |s| s.as_ref());
                    let summary = snapshot.summary();
                    self.data.added_snapshots.push(AddedSnapshot {
                        snapshot_id: snapshot.snapshot_id(),
                        parent_snapshot_id: snapshot.parent_snapshot_id(),
                        timestamp_ms: snapshot.timestamp_ms(),
                        operation: summary.operation.as_str().to_owned(),
                        summary: summary
                            .additional_properties
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    });
                }
                TableUpdate::SetSnapshotRef {
                    ref_name,
                    reference,
                } => {
                    self.data.ref_changes.push(RefChange {
                        name: ref_name.clone(),
                        previous_snapshot_id: previous(base, ref_name),
                        snapshot_id: Some(reference.snapshot_id),
                    });
                }
                TableUpdate::RemoveSnapshotRef { ref_name } => {
                    self.data.ref_changes.push(RefChange {
                        name: ref_name.clone(),
                        previous_snapshot_id: previous(base, ref_name),
                        snapshot_id: None,
                    });
                }
                _ => {}
            }
        }
        if added > 0 {
            self.data.added_snapshot_count = Some(added);
        }
        self
    }
}

fn previous(base: &TableMetadata, ref_name: &str) -> Option<i64> {
    base.snapshot_for_ref(ref_name).map(|s| s.snapshot_id())
}
