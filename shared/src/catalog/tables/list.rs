//! listTables: the tables of a namespace the caller may see, a page at a time.

use super::TableService;
use crate::authz::{Action, Resource, authorize};
use crate::catalog::{OrgContext, paging};
use crate::error::Result;
use crate::model::TableRow;
use crate::store::rows::{self, keys};
use crate::types::{ListTablesResponse, TableIdentifier};

impl TableService {
    pub async fn list_tables(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        page: &paging::PageRequest,
    ) -> Result<ListTablesResponse> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Read)?;
        let scope = format!("tables:{}", ns.row.id);
        let after = self
            .core
            .page_tokens
            .resume(&scope, page)?
            .map(|name| format!("{}{name}", keys::TABLE_PREFIX));
        let pk = keys::namespace_partition(&ns.row.id);
        let found: Vec<TableRow> = rows::collect(
            &*self.core.store,
            &pk,
            keys::TABLE_PREFIX,
            after,
            page.read_limit(),
            |t: &TableRow| {
                ctx.access.allows(
                    Resource::Table {
                        namespace: &ns.row,
                        table: &t.name,
                    },
                    Action::Read,
                )
            },
        )
        .await?;
        let (found, token) = self
            .core
            .page_tokens
            .paginate(&scope, found, page, |t| t.name.as_str());
        Ok(ListTablesResponse {
            identifiers: found
                .into_iter()
                .map(|t| TableIdentifier {
                    namespace: vec![ns.row.name.clone()],
                    name: t.name,
                })
                .collect(),
            next_page_token: token,
        })
    }
}
