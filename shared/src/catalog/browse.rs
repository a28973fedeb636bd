//! Reads for people browsing the catalog (the web view): the namespaces of an org with their
//! visibility and bucket, and a table's parsed metadata. Each is authorized exactly as the
//! Iceberg operation that reads the same thing (listNamespaces, loadTable).

use super::metadata::MetadataCache;
use crate::core::Core;
use std::sync::Arc;

use iceberg::spec::TableMetadata;

use super::OrgContext;
use crate::authz::{Action, Resource, authorize};
use crate::error::Result;
use crate::model::{NamespaceRow, TableRow, Visibility};
use crate::store::rows::{self, keys};

/// A namespace as a reader sees it in a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceSummary {
    pub name: String,
    pub visibility: Visibility,
    /// Nickname of the bucket configuration its tables are stored on.
    pub bucket: String,
    pub description: Option<String>,
    pub table_count: u64,
    pub created_ms: u64,
}

/// What the web view shows beyond the REST API: namespace summaries, table metadata.
pub struct BrowseService {
    core: Arc<Core>,
    metadata: Arc<MetadataCache>,
}

impl BrowseService {
    pub fn new(core: Arc<Core>, metadata: Arc<MetadataCache>) -> Self {
        Self { core, metadata }
    }
}

impl BrowseService {
    /// The live namespaces of the org that the caller may read, by name: the same set that
    /// listNamespaces returns, with what a person browsing wants to see of each.
    pub async fn namespace_summaries(&self, ctx: &OrgContext) -> Result<Vec<NamespaceSummary>> {
        authorize(&ctx.access, Resource::Catalog, Action::Read)?;
        let found: Vec<NamespaceRow> = rows::collect(
            &*self.core.store,
            &keys::org_partition(&ctx.org.name),
            keys::NAMESPACE_PREFIX,
            None,
            usize::MAX,
            |ns: &NamespaceRow| {
                ns.deleted_ms.is_none() && ctx.access.allows(Resource::Namespace(ns), Action::Read)
            },
        )
        .await?;
        let mut summaries = Vec::with_capacity(found.len());
        for ns in found {
            let table_count = self.listed_table_count(ctx, &ns).await?;
            summaries.push(NamespaceSummary {
                name: ns.name,
                visibility: ns.visibility,
                bucket: ns.bucket,
                description: ns.description,
                table_count,
                created_ms: ns.created_ms,
            });
        }
        Ok(summaries)
    }

    /// How many tables listTables shows the caller in `ns`: all of them, or, where it reads
    /// only what table grants give it, those it may read.
    async fn listed_table_count(&self, ctx: &OrgContext, ns: &NamespaceRow) -> Result<u64> {
        if ctx.access.reads_every_table(ns) {
            return Ok(ns.table_count);
        }
        let readable: Vec<TableRow> = rows::collect(
            &*self.core.store,
            &keys::namespace_partition(&ns.id),
            keys::TABLE_PREFIX,
            None,
            usize::MAX,
            |t: &TableRow| {
                ctx.access.allows(
                    Resource::Table {
                        namespace: ns,
                        table: &t.name,
                    },
                    Action::Read,
                )
            },
        )
        .await?;
        Ok(readable.len() as u64)
    }

    /// A table's current metadata, parsed (and cached parsed, as commits use it), for a caller
    /// who may read the table: 404 or 403 exactly as loadTable answers.
    pub async fn table_metadata(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<Arc<TableMetadata>> {
        let open = self
            .metadata
            .open_readable(&self.core.lookups, ctx, namespace, table)
            .await?;
        Ok(open.metadata)
    }
}
