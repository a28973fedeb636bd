//! A table's snapshot history as the table page shows it: newest first, one page at a time.
//! Only the snapshots of the requested page become rows, so a table with ten thousand
//! snapshots costs a sort of references and fifty rows, not ten thousand.

use iceberg::spec::{SnapshotRef, TableMetadata};

use super::links::RepoUrl;
use crate::catalog::{AUTHOR_EMAIL_KEY, AUTHOR_NAME_KEY};

/// Snapshots on one page of the history.
pub const PAGE_SIZE: usize = 50;

/// The lineage key whose value (`org/repo`) can link to the repo.
pub const SOURCE_REPO_KEY: &str = "arraylake.source.repo";
/// Prefix of the lineage keys, shown apart in an expanded snapshot.
pub const SOURCE_PREFIX: &str = "arraylake.source.";

/// One row of the history.
pub struct SnapshotRow {
    pub id: i64,
    pub parent: Option<i64>,
    pub time: String,
    pub operation: String,
    pub author_name: Option<String>,
    pub author_email: Option<String>,
    pub added_records: String,
    pub deleted_records: String,
    pub added_files: String,
    pub deleted_files: String,
    pub current: bool,
    /// Every summary key, sorted, with the operation first.
    pub summary: Vec<SummaryEntry>,
}

/// One summary key of an expanded snapshot.
pub struct SummaryEntry {
    pub key: String,
    pub value: String,
    /// A link built from the configured repo URL, for `arraylake.source.repo` only.
    pub link: Option<String>,
    pub lineage: bool,
}

/// One page of the history and where it sits among the others.
pub struct HistoryPage {
    pub rows: Vec<SnapshotRow>,
    /// 1-based.
    pub page: usize,
    pub pages: usize,
    pub total: usize,
}

/// A history page that does not exist (beyond the last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSuchPage;

/// Snapshots newest first: by commit time, then by sequence number (ties of one millisecond).
pub fn newest_first(metadata: &TableMetadata) -> Vec<&SnapshotRef> {
    let mut all: Vec<&SnapshotRef> = metadata.snapshots().collect();
    all.sort_unstable_by(|a, b| {
        (b.timestamp_ms(), b.sequence_number(), b.snapshot_id()).cmp(&(
            a.timestamp_ms(),
            a.sequence_number(),
            a.snapshot_id(),
        ))
    });
    all
}

/// Page `page` (1-based) of the history. An empty history has one, empty, page.
/// `all` is the history newest first ([`newest_first`]); `current` the current snapshot's id.
pub fn page(
    all: &[&SnapshotRef],
    current: Option<i64>,
    page: usize,
    repo_url: Option<&RepoUrl>,
) -> Result<HistoryPage, NoSuchPage> {
    let pages = all.len().div_ceil(PAGE_SIZE).max(1);
    if page == 0 || page > pages {
        return Err(NoSuchPage);
    }
    let rows = all
        .iter()
        .skip((page - 1) * PAGE_SIZE)
        .take(PAGE_SIZE)
        .map(|s| row(s, current, repo_url))
        .collect();
    Ok(HistoryPage {
        rows,
        page,
        pages,
        total: all.len(),
    })
}

fn row(snapshot: &SnapshotRef, current: Option<i64>, repo_url: Option<&RepoUrl>) -> SnapshotRow {
    let summary = snapshot.summary();
    let props = &summary.additional_properties;
    let count = |key: &str| props.get(key).cloned().unwrap_or_else(|| "–".into());
    let mut entries: Vec<SummaryEntry> = props
        .iter()
        .map(|(key, value)| SummaryEntry {
            key: key.clone(),
            value: value.clone(),
            link: (key == SOURCE_REPO_KEY)
                .then(|| repo_url.and_then(|u| u.link(value)))
                .flatten(),
            lineage: key.starts_with(SOURCE_PREFIX),
        })
        .collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries.insert(
        0,
        SummaryEntry {
            key: "operation".into(),
            value: summary.operation.as_str().into(),
            link: None,
            lineage: false,
        },
    );
    SnapshotRow {
        id: snapshot.snapshot_id(),
        parent: snapshot.parent_snapshot_id(),
        time: format_ms(snapshot.timestamp_ms()),
        operation: summary.operation.as_str().into(),
        author_name: props.get(AUTHOR_NAME_KEY).cloned(),
        author_email: props.get(AUTHOR_EMAIL_KEY).cloned(),
        added_records: count("added-records"),
        deleted_records: count("deleted-records"),
        added_files: count("added-data-files"),
        deleted_files: count("deleted-data-files"),
        current: current == Some(snapshot.snapshot_id()),
        summary: entries,
    }
}

/// A commit time as people read it, in UTC.
pub fn format_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}
