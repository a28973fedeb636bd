//! What a maintenance run does with each object under a table's directory: delete it (and
//! why) or keep it (and why). Pure: the run gives it what it read.

use serde::Serialize;

use super::reachable::{FileKind, Reached, canonical};
use crate::catalog::storage::MARKER_FILE;
use crate::objects::ObjectMeta;

/// Why a file is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteReason {
    /// Only snapshots this run expired reached it.
    Expired,
    /// A metadata file that left the metadata log (`write.metadata.delete-after-commit.enabled`).
    OldMetadata,
    /// Nothing ever referenced it and it is older than the table's threshold.
    Unreferenced,
}

/// Why a file is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeepReason {
    /// A retained snapshot, ref, statistics file or metadata file reaches it.
    Referenced,
    /// The warehouse marker of a directory Floe claimed.
    WarehouseMarker,
    /// A metadata file numbered after the current one: a commit may be about to publish it.
    PendingMetadata,
    /// Unreferenced, but younger than the threshold: a write in flight may still commit it.
    TooYoung,
    /// Unreferenced, and the table does not remove unreferenced files.
    RemovalOff,
}

/// The verdict on one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Delete(DeleteReason),
    Keep(KeepReason),
}

/// What the verdicts depend on.
pub struct Rules<'a> {
    /// Files the table's metadata reaches after the expiry.
    pub reached: &'a Reached,
    /// Files the expired snapshots reached.
    pub expired: &'a Reached,
    /// The number of the table's current metadata file.
    pub current_version: u64,
    pub delete_old_metadata: bool,
    pub unreferenced_age_ms: Option<u64>,
    pub now_ms: u64,
}

impl Rules<'_> {
    pub fn verdict(&self, object: &ObjectMeta) -> Verdict {
        let location = canonical(&object.location);
        if location.ends_with(&format!("/{MARKER_FILE}")) {
            return Verdict::Keep(KeepReason::WarehouseMarker);
        }
        if self.reached.contains_key(&location) {
            return Verdict::Keep(KeepReason::Referenced);
        }
        if let Some(version) = metadata_version(&location) {
            if version > self.current_version {
                return Verdict::Keep(KeepReason::PendingMetadata);
            }
            if self.delete_old_metadata {
                return Verdict::Delete(DeleteReason::OldMetadata);
            }
        } else if self
            .expired
            .get(&location)
            .is_some_and(|kind| *kind != FileKind::Metadata)
        {
            return Verdict::Delete(DeleteReason::Expired);
        }
        match self.unreferenced_age_ms {
            None => Verdict::Keep(KeepReason::RemovalOff),
            Some(age) if self.now_ms.saturating_sub(object.modified_ms) < age => {
                Verdict::Keep(KeepReason::TooYoung)
            }
            Some(_) => Verdict::Delete(DeleteReason::Unreferenced),
        }
    }
}

/// The number of a table metadata file (`NNNNN-<uuid>.metadata.json`, `.gz.metadata.json` or
/// `.metadata.json.gz` in a `metadata/` directory), `None` for any other file.
pub fn metadata_version(location: &str) -> Option<u64> {
    let (dir, name) = location.rsplit_once('/')?;
    if !dir.ends_with("/metadata") {
        return None;
    }
    let is_metadata = name.ends_with(".metadata.json") || name.ends_with(".metadata.json.gz");
    let (number, _) = name.split_once('-')?;
    (is_metadata && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
        .then(|| number.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "file:///w/ns/t";

    fn object(name: &str, modified_ms: u64) -> ObjectMeta {
        ObjectMeta {
            location: format!("{DIR}/{name}"),
            size: 10,
            modified_ms,
        }
    }

    fn reached(names: &[(&str, FileKind)]) -> Reached {
        names
            .iter()
            .map(|(n, k)| (format!("{DIR}/{n}"), *k))
            .collect()
    }

    #[test]
    fn each_kind_of_file_gets_its_verdict() {
        let kept = reached(&[
            ("metadata/00003-c.metadata.json", FileKind::Metadata),
            ("data/live.parquet", FileKind::Data),
        ]);
        let expired = reached(&[
            ("data/old.parquet", FileKind::Data),
            ("metadata/snap-1.avro", FileKind::ManifestList),
            ("metadata/00001-a.metadata.json", FileKind::Metadata),
        ]);
        let rules = Rules {
            reached: &kept,
            expired: &expired,
            current_version: 3,
            delete_old_metadata: false,
            unreferenced_age_ms: Some(1000),
            now_ms: 10_000,
        };
        let verdict = |name: &str, modified| rules.verdict(&object(name, modified));
        assert_eq!(
            verdict("data/live.parquet", 0),
            Verdict::Keep(KeepReason::Referenced)
        );
        assert_eq!(
            verdict("data/old.parquet", 9_999),
            Verdict::Delete(DeleteReason::Expired)
        );
        assert_eq!(
            verdict("metadata/snap-1.avro", 9_999),
            Verdict::Delete(DeleteReason::Expired)
        );
        assert_eq!(
            verdict(MARKER_FILE, 0),
            Verdict::Keep(KeepReason::WarehouseMarker)
        );
        assert_eq!(
            verdict("metadata/00004-d.metadata.json", 0),
            Verdict::Keep(KeepReason::PendingMetadata)
        );
        // Metadata files follow delete-after-commit, else the unreferenced-file rule.
        assert_eq!(
            verdict("metadata/00001-a.metadata.json", 0),
            Verdict::Delete(DeleteReason::Unreferenced)
        );
        assert_eq!(
            verdict("data/stray.parquet", 9_500),
            Verdict::Keep(KeepReason::TooYoung)
        );
        assert_eq!(
            verdict("data/stray.parquet", 8_000),
            Verdict::Delete(DeleteReason::Unreferenced)
        );
        let off = Rules {
            unreferenced_age_ms: None,
            delete_old_metadata: true,
            ..rules
        };
        assert_eq!(
            off.verdict(&object("data/stray.parquet", 0)),
            Verdict::Keep(KeepReason::RemovalOff)
        );
        assert_eq!(
            off.verdict(&object("metadata/00002-b.gz.metadata.json", 0)),
            Verdict::Delete(DeleteReason::OldMetadata)
        );
    }

    #[test]
    fn only_numbered_files_in_metadata_directories_are_metadata_files() {
        assert_eq!(
            metadata_version("s3://b/t/metadata/00012-x.metadata.json"),
            Some(12)
        );
        assert_eq!(
            metadata_version("s3://b/t/metadata/00012-x.metadata.json.gz"),
            Some(12)
        );
        assert_eq!(
            metadata_version("s3://b/t/data/00012-x.metadata.json"),
            None
        );
        assert_eq!(metadata_version("s3://b/t/metadata/snap-12-x.avro"), None);
        assert_eq!(
            metadata_version("s3://b/t/metadata/v12.metadata.json"),
            None
        );
    }
}
