//! Table operations: create, register, load, list, commit (one table, or several in a
//! transaction), drop and recovery, unregister, rename, metrics, storage access.

mod answers;
mod commit;
mod create;
mod credentials;
mod delivery;
mod list;
mod load;
pub mod maintenance;
mod metrics;
pub(crate) mod placement;
mod plan;
mod purge;
mod rebase;
mod recovery;
mod register;
mod rename;
mod signing;
mod snapshot_files;
mod transaction;

use std::sync::Arc;

pub(crate) use commit::stamp_summary;
pub use commit::{AUTHOR_EMAIL_KEY, AUTHOR_NAME_KEY};
pub use maintenance::{MaintainOptions, MaintenanceReport, MaintenanceRun};
pub use plan::{FetchScanTasksRequest, ManifestCache, PlanTableScanRequest};
pub use purge::{DroppedPurgeReport, DroppedTablePurger, TABLES_PER_RUN};
pub use recovery::{DroppedTable, RETAIN_DROPPED_DATA_PROPERTY, RestoreRequest, RestoredTable};
pub(crate) use register::{read_registered_file, registrable_file};
pub use transaction::MAX_TRANSACTION_TABLES;

use self::answers::ReadyAnswers;
use self::create::NewTableError;
use self::delivery::{Delivery, TableAt};
use crate::catalog::OrgContext;
use crate::catalog::metadata::MetadataCache;
use crate::core::Core;
use crate::error::{CatalogError, Result};
use crate::model::NamespaceRow;
use crate::store::rows::{self, Versioned, keys};
use crate::store::{Condition, Token, Write};

/// Request options of loadTable and createTable that do not change what is stored.
#[derive(Debug, Clone, Copy, Default)]
pub struct TableRequestOptions {
    /// `X-Iceberg-Access-Delegation: vended-credentials` was sent.
    pub vend_credentials: bool,
    /// `X-Iceberg-Access-Delegation: remote-signing` was sent: the engine signs its storage
    /// requests through the catalog where the bucket's keys cannot be scoped.
    pub remote_signing: bool,
    /// `snapshots=refs`: only snapshots that a branch or tag references.
    pub only_referenced_snapshots: bool,
}

/// Tables: one operation per file of this module (create, load, list, commit, drop and
/// recovery, register, rename, credentials, signing, metrics, maintenance).
pub struct TableService {
    core: Arc<Core>,
    /// Verified metadata files, shared with the web view; never stale (files are immutable).
    metadata: Arc<MetadataCache>,
    /// Warm loads' answers, made once per table state and form.
    answers: ReadyAnswers,
    /// Parsed manifest lists and manifests, for planning scans from memory.
    manifests: ManifestCache,
}

impl TableService {
    pub fn new(core: Arc<Core>, metadata: Arc<MetadataCache>) -> Self {
        let manifests = ManifestCache::new(core.limits.plan_cache_bytes);
        Self {
            core,
            metadata,
            answers: ReadyAnswers::new(),
            manifests,
        }
    }

    /// The replaced code paths this catalog takes (answers compressed per request, in
    /// `floe-bench` only).
    pub fn baselines(&self) -> &crate::core::baselines::Baselines {
        &self.core.baselines
    }

    /// Forgets the answers kept for warm loads and the manifests kept for plans, as a newly
    /// started instance would.
    pub fn forget_answers(&self) {
        self.answers.clear();
        self.manifests.clear();
    }

    /// A table answer's document compressed for splicing, once per document and encoding.
    pub async fn compressed_metadata(
        &self,
        answer: &(dyn crate::types::TableAnswer + Sync),
        encoding: crate::encoding::Encoding,
    ) -> Result<Arc<crate::encoding::Segment>> {
        self.metadata
            .compressed(answer.metadata_id(), answer.metadata(), encoding)
            .await
    }
}

impl TableService {}

/// The writes that take table `name` (its row read with `token`) out of `ns`: the namespace's
/// table count, held to the version read, and the row, held to its token (a drop, an
/// unregister).
pub(super) fn leaving_namespace(
    ctx: &OrgContext,
    ns: &Versioned<NamespaceRow>,
    name: &str,
    token: Option<Token>,
) -> [Write; 2] {
    let mut ns_row = ns.row.clone();
    ns_row.table_count = ns_row.table_count.saturating_sub(1);
    [
        rows::put(
            keys::namespace(&ctx.org.name, &ns.row.name),
            &ns_row,
            Condition::VersionIs(ns.version),
        ),
        Write::Delete {
            key: keys::table(&ns.row.id, name),
            condition: Condition::TokenIs(token),
        },
    ]
}

/// The check that keeps a name a table is given free of views (in the same write).
pub(super) fn no_view_named(namespace_id: &str, name: &str) -> Write {
    Write::Check {
        key: keys::view(namespace_id, name),
        condition: Condition::NotExists,
    }
}

/// A name a view holds, asked for a table (Java's wording).
pub(super) fn view_holds_name(namespace: &str, name: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!(
        "View with same name already exists: {namespace}.{name}"
    ))
}

fn table_already_exists(namespace: &str, table: &str) -> CatalogError {
    CatalogError::AlreadyExists(format!("Table already exists: {namespace}.{table}"))
}
