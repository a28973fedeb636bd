//! Which snapshots and refs a maintenance run expires: Java's `RemoveSnapshots` rules, planned
//! from one read of the table's metadata.
//!
//! - `main` is never removed; another branch or tag is when its snapshot is older than its
//!   `max-ref-age-ms` (else the table's `history.expire.max-ref-age-ms`).
//! - Each kept branch keeps its newest ancestors while fewer than its `min-snapshots-to-keep`
//!   are kept or while they are younger than its `max-snapshot-age-ms` (else the table's); each
//!   kept tag keeps its snapshot.
//! - A snapshot no kept ref reaches through its ancestry stays while younger than the table's
//!   `history.expire.max-snapshot-age-ms`.
//! - Everything else is expired.

use std::collections::{BTreeSet, HashMap, HashSet};

use iceberg::spec::{SnapshotReference, SnapshotRetention, TableMetadata};
use serde_json::Value;

use super::policy::Policy;

/// The branch that is never removed.
pub const MAIN: &str = "main";

/// One snapshot as expiry sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub id: i64,
    pub parent: Option<i64>,
    pub timestamp_ms: i64,
}

/// What one run removes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpiryPlan {
    /// Ascending.
    pub snapshots: Vec<i64>,
    /// Branches and tags removed, by name, ascending.
    pub refs: Vec<String>,
}

impl ExpiryPlan {
    pub fn is_empty(&self) -> bool {
        self.snapshots.is_empty() && self.refs.is_empty()
    }
}

/// The table's refs as its metadata file holds them. A v1 file may have none: its current
/// snapshot is then `main`'s.
pub fn refs_of(raw: &Value) -> Result<HashMap<String, SnapshotReference>, String> {
    match raw.get("refs") {
        Some(refs) if !refs.is_null() => serde_json::from_value(refs.clone())
            .map_err(|e| format!("Cannot read the table's refs: {e}")),
        _ => Ok(raw
            .get("current-snapshot-id")
            .and_then(Value::as_i64)
            .filter(|id| *id != -1)
            .map(|id| {
                let main = SnapshotReference::new(
                    id,
                    SnapshotRetention::Branch {
                        min_snapshots_to_keep: None,
                        max_snapshot_age_ms: None,
                        max_ref_age_ms: None,
                    },
                );
                HashMap::from([(MAIN.to_owned(), main)])
            })
            .unwrap_or_default()),
    }
}

/// The snapshots of `metadata`, as expiry sees them.
pub fn snapshots_of(metadata: &TableMetadata) -> Vec<SnapshotEntry> {
    metadata
        .snapshots()
        .map(|s| SnapshotEntry {
            id: s.snapshot_id(),
            parent: s.parent_snapshot_id(),
            timestamp_ms: s.timestamp_ms(),
        })
        .collect()
}

/// Plans the expiry of `snapshots` and `refs` at `now_ms` under `policy`.
pub fn plan(
    snapshots: &[SnapshotEntry],
    refs: &HashMap<String, SnapshotReference>,
    policy: &Policy,
    now_ms: i64,
) -> ExpiryPlan {
    let by_id: HashMap<i64, &SnapshotEntry> = snapshots.iter().map(|s| (s.id, s)).collect();
    let age = |id: i64| {
        by_id
            .get(&id)
            .map(|s| now_ms.saturating_sub(s.timestamp_ms))
    };

    let mut removed_refs = BTreeSet::new();
    let mut kept_refs = Vec::new();
    for (name, reference) in refs {
        let max_ref_age = match reference.retention {
            SnapshotRetention::Branch { max_ref_age_ms, .. }
            | SnapshotRetention::Tag { max_ref_age_ms } => max_ref_age_ms,
        }
        .unwrap_or(policy.max_ref_age_ms);
        let too_old = age(reference.snapshot_id).is_none_or(|a| a > max_ref_age);
        if name != MAIN && too_old {
            removed_refs.insert(name.clone());
        } else {
            kept_refs.push(reference);
        }
    }

    let mut retained = HashSet::new();
    let mut reachable = HashSet::new();
    for reference in &kept_refs {
        match reference.retention {
            SnapshotRetention::Tag { .. } => {
                retained.insert(reference.snapshot_id);
                reachable.insert(reference.snapshot_id);
            }
            SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                ..
            } => {
                let min_keep = min_snapshots_to_keep
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(policy.min_snapshots_to_keep);
                let max_age = max_snapshot_age_ms.unwrap_or(policy.max_snapshot_age_ms);
                let mut kept = 0usize;
                let mut keeping = true;
                let mut next = Some(reference.snapshot_id);
                let mut seen = HashSet::new();
                while let Some(id) = next {
                    let Some(snapshot) = by_id.get(&id) else {
                        break;
                    };
                    if !seen.insert(id) {
                        break; // a parent cycle in a hostile file: stop walking
                    }
                    reachable.insert(id);
                    if keeping
                        && (kept < min_keep
                            || now_ms.saturating_sub(snapshot.timestamp_ms) <= max_age)
                    {
                        retained.insert(id);
                        kept += 1;
                    } else {
                        keeping = false;
                    }
                    next = snapshot.parent;
                }
            }
        }
    }

    let mut expired: Vec<i64> = snapshots
        .iter()
        .filter(|s| !retained.contains(&s.id))
        .filter(|s| {
            // Not reached by a kept ref: kept while young, as Java keeps unreferenced ones.
            reachable.contains(&s.id)
                || now_ms.saturating_sub(s.timestamp_ms) > policy.max_snapshot_age_ms
        })
        .map(|s| s.id)
        .collect();
    expired.sort_unstable();
    ExpiryPlan {
        snapshots: expired,
        refs: removed_refs.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 60 * 60 * 1000;

    fn chain(count: i64, first_ts: i64, step: i64) -> Vec<SnapshotEntry> {
        (1..=count)
            .map(|id| SnapshotEntry {
                id,
                parent: (id > 1).then_some(id - 1),
                timestamp_ms: first_ts + (id - 1) * step,
            })
            .collect()
    }

    fn branch(id: i64) -> SnapshotReference {
        SnapshotReference::new(
            id,
            SnapshotRetention::Branch {
                min_snapshots_to_keep: None,
                max_snapshot_age_ms: None,
                max_ref_age_ms: None,
            },
        )
    }

    fn tag(id: i64, max_ref_age_ms: Option<i64>) -> SnapshotReference {
        SnapshotReference::new(id, SnapshotRetention::Tag { max_ref_age_ms })
    }

    #[test]
    fn old_ancestors_of_main_expire_and_the_newest_stays() {
        // Ten snapshots a day apart: snapshot n is 11 - n days old at `now`.
        let snapshots = chain(10, 0, DAY);
        let now = 10 * DAY;
        let refs = HashMap::from([(MAIN.to_owned(), branch(10))]);
        let plan = plan(&snapshots, &refs, &Policy::default(), now);
        // 5-day default: snapshots 6..=10 are at most 5 days old.
        assert_eq!(plan.snapshots, vec![1, 2, 3, 4, 5]);
        assert!(plan.refs.is_empty());
    }

    #[test]
    fn min_snapshots_to_keep_holds_old_ones() {
        let snapshots = chain(10, 0, DAY);
        let refs = HashMap::from([(MAIN.to_owned(), branch(10))]);
        let policy = Policy {
            min_snapshots_to_keep: 8,
            ..Policy::default()
        };
        let plan = plan(&snapshots, &refs, &policy, 100 * DAY);
        assert_eq!(plan.snapshots, vec![1, 2]);
    }

    #[test]
    fn tags_keep_their_snapshot_until_they_age_out_and_main_never_does() {
        let snapshots = chain(10, 0, DAY);
        let refs = HashMap::from([
            (MAIN.to_owned(), branch(10)),
            ("v1".to_owned(), tag(2, None)),
            ("short".to_owned(), tag(3, Some(DAY))),
        ]);
        let policy = Policy {
            max_ref_age_ms: 365 * DAY,
            ..Policy::default()
        };
        let plan = plan(&snapshots, &refs, &policy, 30 * DAY);
        assert_eq!(plan.refs, vec!["short".to_owned()]);
        assert!(!plan.snapshots.contains(&2));
        assert!(plan.snapshots.contains(&3));
        assert!(!plan.snapshots.contains(&10));
        // main's own age never removes it.
        let aged = Policy {
            max_ref_age_ms: 1,
            ..Policy::default()
        };
        let plan = super::plan(&snapshots, &refs, &aged, 30 * DAY);
        assert_eq!(plan.refs, vec!["short".to_owned(), "v1".to_owned()]);
        assert_eq!(plan.snapshots, (1..=9).collect::<Vec<_>>());
    }

    #[test]
    fn a_branch_keeps_its_own_history_and_young_orphans_stay() {
        let mut snapshots = chain(4, 0, DAY);
        // A branch forked from 2 with two snapshots of its own, and an unreferenced young one.
        snapshots.push(SnapshotEntry {
            id: 20,
            parent: Some(2),
            timestamp_ms: 20 * DAY,
        });
        snapshots.push(SnapshotEntry {
            id: 21,
            parent: Some(20),
            timestamp_ms: 21 * DAY,
        });
        snapshots.push(SnapshotEntry {
            id: 30,
            parent: Some(4),
            timestamp_ms: 21 * DAY,
        });
        let refs = HashMap::from([(MAIN.to_owned(), branch(4)), ("dev".to_owned(), branch(21))]);
        let plan = plan(&snapshots, &refs, &Policy::default(), 22 * DAY);
        // main keeps 4 (its newest); dev keeps 21 and 20 (young); 30 is young and unreferenced.
        assert_eq!(plan.snapshots, vec![1, 2, 3]);
    }

    #[test]
    fn v1_files_without_refs_have_main_at_the_current_snapshot() {
        let raw = serde_json::json!({"current-snapshot-id": 7});
        let refs = refs_of(&raw).unwrap();
        assert_eq!(refs[MAIN].snapshot_id, 7);
        assert!(
            refs_of(&serde_json::json!({"current-snapshot-id": -1}))
                .unwrap()
                .is_empty()
        );
    }
}
