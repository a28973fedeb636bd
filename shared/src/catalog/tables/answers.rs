//! Warm loadTable answers kept ready. An answer is made of the table's row (its metadata file,
//! location and storage), the bucket configuration its files live on, and the form the caller
//! asked for (delegation, `snapshots=refs`, and where delegation is asked, the caller's write
//! access and the namespace's visibility). While all of those are unchanged, every load answers
//! the bytes the first one made: no decode of the row, no lookup of its file, no entity tag or
//! envelope made again.
//!
//! Nothing here can be stale where a fresh answer would not be: the row is compared byte for byte
//! with the one just read (the one store read every load makes), and the bucket configuration
//! must still be the one the lookups remember (a change on this instance, or the end of its
//! TTL, makes the next load rebuild). Answers with vended credentials are never kept: those
//! come from the vendor's own cache, which renews them.

use std::sync::Arc;
use std::time::Duration;

use crate::cache::Cache;
use crate::model::BucketRow;
use crate::types::{ReadyAnswer, TableAnswer};

/// How long an answer nobody asked for again is kept (its validity is checked on every use;
/// this only frees memory).
const KEPT_FOR: Duration = Duration::from_secs(300);

/// At most this many bytes of answers (their documents counted whole, although most share the
/// metadata cache's bytes).
const MAX_BYTES: u64 = 24 * 1024 * 1024;

/// The table an answer is about and the form it was asked in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct AnswerKey {
    org: String,
    namespace: String,
    table: String,
    form: AnswerForm,
}

impl AnswerKey {
    pub(super) fn new(org: &str, namespace: &str, table: &str, form: AnswerForm) -> Self {
        Self {
            org: org.to_owned(),
            namespace: namespace.to_owned(),
            table: table.to_owned(),
            form,
        }
    }
}

/// What of the request and of the caller's standing shapes an answer beyond the table itself.
/// Without delegation the answer is the same for every caller who may read the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(super) struct AnswerForm {
    pub only_referenced_snapshots: bool,
    pub vend_credentials: bool,
    pub remote_signing: bool,
    /// The caller may write the table (where delegation is asked: it sets the access level).
    pub may_write: bool,
    /// The namespace is public (where delegation is asked: no static keys behind it).
    pub public_namespace: bool,
}

/// An answer and what it was made from.
struct Kept {
    /// The table row's stored bytes.
    row: Vec<u8>,
    /// The namespace's bucket, which a row that records none of its own lives on.
    namespace_bucket: String,
    /// The bucket configuration, as the lookups remembered it.
    bucket: Arc<BucketRow>,
    answer: Arc<ReadyAnswer>,
}

pub(super) struct ReadyAnswers {
    kept: Cache<AnswerKey, Arc<Kept>>,
}

impl ReadyAnswers {
    pub(super) fn new() -> Self {
        let weigh = |_: &AnswerKey, kept: &Arc<Kept>| {
            let (prefix, suffix) = kept.answer.envelope();
            let body = prefix.len() + kept.answer.metadata().len() + suffix.len();
            let whole = kept.answer.whole().map_or(0, |whole| whole.len());
            let bytes = kept.row.len() + body + whole;
            u64::try_from(bytes).unwrap_or(u64::MAX)
        };
        Self {
            kept: Cache::weighted(MAX_BYTES, weigh).expiring_after(KEPT_FOR),
        }
    }

    /// The answer kept for `key` if it was made from exactly `row` in a namespace on
    /// `namespace_bucket`, with the bucket configuration it was made from; the caller checks
    /// that the configuration is still current.
    pub(super) async fn get(
        &self,
        key: &AnswerKey,
        row: &[u8],
        namespace_bucket: &str,
    ) -> Option<(Arc<BucketRow>, Arc<ReadyAnswer>)> {
        let kept = self.kept.get(key)?;
        (kept.row == row && kept.namespace_bucket == namespace_bucket)
            .then(|| (kept.bucket.clone(), kept.answer.clone()))
    }

    /// Keeps `answer`, made from `row` and `bucket`, for the loads that follow.
    pub(super) async fn keep(
        &self,
        key: AnswerKey,
        row: Vec<u8>,
        namespace_bucket: &str,
        bucket: Arc<BucketRow>,
        answer: Arc<ReadyAnswer>,
    ) {
        let kept = Kept {
            row,
            namespace_bucket: namespace_bucket.to_owned(),
            bucket,
            answer,
        };
        self.kept.insert(key, Arc::new(kept));
    }

    /// Forgets every answer, as a newly started instance would.
    pub(super) fn clear(&self) {
        self.kept.clear();
    }
}
