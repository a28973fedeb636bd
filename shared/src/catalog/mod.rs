//! The catalog: one service per area over the shared [`Core`].
//!
//! Each operation reads in three steps: validate the input, authorize the principal, act. Inputs
//! and outputs are typed; nothing here knows about HTTP or about which adapters are plugged in.
//! A service holds the core and only what else it uses; `Catalog` is the bundle the edges
//! (HTTP, the web view, the CLI, the scheduled functions) call into, with no logic of its own.

pub mod access;
pub mod browse;
pub mod buckets;
pub mod config;
pub mod events;
pub mod maintenance_policy;
pub mod metadata;
pub mod names;
pub mod namespaces;
pub mod parity;
pub mod sessions;
pub mod storage;
pub mod tables;
pub mod views;

use std::sync::Arc;

pub use access::{
    AccessService, ApiClientView, GrantView, Me, NamespacePatch, NamespaceSettings, TeamView,
    canonical_principal, display_principal, issue_service_admin,
};
pub use browse::{BrowseService, NamespaceSummary};
pub use buckets::{
    AuthRequest, AuthView, BucketRequest, BucketService, BucketView, OWNERSHIP_OBJECT,
    ownership_value,
};
pub use config::{ConfigService, iso_duration, parse_iso_duration};
pub use events::EventService;
pub use namespaces::{DeleteOptions, NamespaceService, NamespaceStatus, purge};
pub use sessions::SessionService;
pub use tables::{
    AUTHOR_EMAIL_KEY, AUTHOR_NAME_KEY, MAX_TRANSACTION_TABLES, TableRequestOptions, TableService,
};
pub use views::ViewService;

pub use crate::cache::DEFAULT_TTL as DEFAULT_AUTH_CACHE_TTL;
pub use crate::core::changes::DEFAULT_EVENT_RETENTION;
pub use crate::core::{
    CommitRetry, Core, OrgContext, idempotency, no_such_namespace, no_such_table, paging,
};

use crate::model::{NamespaceRow, TableRow};
use metadata::{MetadataCache, TableRef};

/// Every area service, sharing one core.
pub struct Catalog {
    pub core: Arc<Core>,
    pub tables: TableService,
    pub views: ViewService,
    pub namespaces: NamespaceService,
    pub access: AccessService,
    pub buckets: BucketService,
    pub events: EventService,
    pub sessions: SessionService,
    pub config: ConfigService,
    pub browse: BrowseService,
    metadata: Arc<MetadataCache>,
}

impl Catalog {
    /// The services over `core`.
    pub fn new(core: Core) -> Self {
        let core = Arc::new(core);
        let metadata = Arc::new(MetadataCache::new(
            metadata::DEFAULT_CACHE_BYTES,
            core.baselines.clone(),
        ));
        Self {
            tables: TableService::new(core.clone(), metadata.clone()),
            views: ViewService::new(core.clone()),
            namespaces: NamespaceService::new(
                core.clone(),
                Arc::new(tables::DroppedTablePurger::new(core.clone())),
            ),
            access: AccessService::new(core.clone()),
            buckets: BucketService::new(core.clone()),
            events: EventService::new(core.clone()),
            sessions: SessionService::new(core.clone()),
            config: ConfigService::new(core.clone()),
            browse: BrowseService::new(core.clone(), metadata.clone()),
            metadata,
            core,
        }
    }

    /// One run of the purge: dropped tables whose recovery period has passed (or asked for
    /// now), then soft-deleted namespaces, each bounded per run. Fails only when candidates
    /// cannot be listed.
    pub async fn purge_due(&self, now_ms: u64) -> crate::error::Result<PurgeRun> {
        let tables = self
            .tables
            .purge_dropped(now_ms, purge::RECOVERY_PERIOD, tables::TABLES_PER_RUN)
            .await?;
        let namespaces = self
            .namespaces
            .purge_expired(now_ms, purge::RECOVERY_PERIOD, purge::NAMESPACES_PER_RUN)
            .await?;
        Ok(PurgeRun { tables, namespaces })
    }

    /// One scheduled maintenance run: every table due at `now_ms`, at most
    /// [`tables::maintenance::TABLES_PER_RUN`].
    pub async fn maintain_due(
        &self,
        now_ms: u64,
        options: tables::MaintainOptions,
    ) -> crate::error::Result<tables::MaintenanceRun> {
        self.tables
            .maintain_due(now_ms, options, tables::maintenance::TABLES_PER_RUN)
            .await
    }

    /// The scheduler's part alone: the sweep, then at most `limit` due tables claimed, for
    /// workers elsewhere (a queue) to maintain with [`Catalog::maintain_claimed`].
    pub async fn schedule_due(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> crate::error::Result<Vec<tables::maintenance::DueTable>> {
        self.tables
            .sweep(now_ms, tables::maintenance::SWEEP_TABLES_PER_RUN)
            .await?;
        self.tables.claim_due(now_ms, limit).await
    }

    /// A worker's part: one claimed table maintained under a lease.
    pub async fn maintain_claimed(
        &self,
        due: &tables::maintenance::DueTable,
        now_ms: u64,
    ) -> crate::error::Result<tables::maintenance::WorkerOutcome> {
        self.tables
            .maintain_claimed(due, now_ms, Default::default())
            .await
    }

    /// Signalled when an admin asks for a purge now: a purger beside the server wakes on it.
    pub fn purge_requested(&self) -> Arc<tokio::sync::Notify> {
        self.core.purge_wanted.clone()
    }

    /// `Idempotency-Key` claims and their recorded answers (spec 1.11), for the edge's
    /// idempotency layer.
    pub fn idempotency(&self) -> &crate::core::IdempotencyKeys {
        &self.core.idempotency
    }

    /// Forgets every remembered token, row and metadata file, as a newly started instance
    /// (another Lambda, say) would: for tests that play two instances with one.
    pub fn forget_cached(&self) {
        self.core.authn.clear();
        self.core.lookups.clear_all();
        self.metadata.clear();
        self.tables.forget_answers();
    }
}

/// What one purge run did, for dropped tables and for namespaces.
#[derive(Debug, Default, Clone, serde::Serialize, PartialEq, Eq)]
pub struct PurgeRun {
    pub tables: tables::DroppedPurgeReport,
    pub namespaces: purge::PurgeReport,
}

impl PurgeRun {
    /// Whether anything was purged or failed.
    pub fn did_anything(&self) -> bool {
        !(self.tables.purged.is_empty()
            && self.tables.failed.is_empty()
            && self.namespaces.purged.is_empty()
            && self.namespaces.failed.is_empty())
    }

    /// Everything that failed, as reports name it.
    pub fn failures(&self) -> Vec<String> {
        self.tables
            .failed
            .iter()
            .chain(&self.namespaces.failed)
            .cloned()
            .collect()
    }
}

/// Who a table's metadata is read for: verification compares against `row`, log lines name the
/// org and namespace.
fn table_ref<'a>(ctx: &'a OrgContext, ns: &'a NamespaceRow, row: &'a TableRow) -> TableRef<'a> {
    TableRef {
        org: &ctx.org.name,
        namespace: &ns.name,
        row,
    }
}

/// How many times an operation re-reads and retries after losing a race on a row it does not
/// own (the namespace row's table counter, say). Pointer swaps are never retried.
const ROW_RACE_RETRIES: usize = 16;
