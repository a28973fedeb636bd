//! renameTable: a table moves to another name of its namespace, carrying the name's table grants.

use super::{TableService, no_view_named, table_already_exists, view_holds_name};
use crate::authz::{Action, Resource, authorize};
use crate::catalog::{OrgContext, names};
use crate::core::{Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::events::{Draft, Kind, TableName};
use crate::store::rows::{self, keys};
use crate::store::{Condition, Write};
use crate::types::{RenameTableRequest, TableIdentifier};

impl TableService {
    /// Renames a table within its namespace, carrying the name's table grants to the new
    /// name (merged with grants already there).
    pub async fn rename_table(&self, ctx: &OrgContext, request: RenameTableRequest) -> Result<()> {
        let source_ns = names::single_level(&request.source.namespace).map_err(|_| {
            CatalogError::NoSuchTable(format!("Table does not exist: {}", dotted(&request.source)))
        })?;
        let dest_ns = names::single_level(&request.destination.namespace)?;
        if source_ns != dest_ns {
            return Err(CatalogError::BadRequest(
                "Renaming a table across namespaces is not supported: its files live under the source namespace's storage".into(),
            ));
        }
        let ns = self.core.lookups.live_namespace(ctx, source_ns).await?;
        authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Write)?;
        names::validate_table_name(&request.destination.name)?;
        let source = self
            .core
            .lookups
            .table_row(&ns.row, &request.source.name)
            .await?;
        if request.source.name == request.destination.name {
            return Err(table_already_exists(source_ns, &request.destination.name));
        }
        let mut moved = source.row.clone();
        moved.name = request.destination.name.clone();
        // The directory and bucket stay with the table, whatever its name.
        moved.directory = Some(source.row.directory().to_owned());
        let mut change = Change::new()
            .with(
                RenamePart::Source,
                Write::Delete {
                    key: keys::table(&ns.row.id, &request.source.name),
                    condition: Condition::TokenIs(source.token),
                },
            )
            .with(
                RenamePart::Destination,
                rows::put_tokened(
                    keys::table(&ns.row.id, &request.destination.name),
                    &moved,
                    Condition::NotExists,
                    None,
                ),
            )
            .with(
                RenamePart::NotAView,
                no_view_named(&ns.row.id, &request.destination.name),
            );
        let carried = crate::catalog::access::AccessService::carry_grants(
            &*self.core.store,
            ctx,
            &ns.row,
            &request.source.name,
            &request.destination.name,
        )
        .await?;
        let carries_grants = !carried.is_empty();
        for grant in carried {
            change.push(RenamePart::Grants, grant);
        }
        let mut event = Draft::new(
            Kind::TableRenamed,
            &ctx.org.name,
            &ns.row.name,
            &ns.row.id,
            &ctx.principal,
        )
        .table(&request.source.name, &source.row.id)
        .metadata(
            Some(&source.row.metadata_location),
            Some(&source.row.metadata_location),
        );
        event.data.renamed_to = Some(TableName {
            namespace: ns.row.name.clone(),
            table: request.destination.name.clone(),
        });
        match self.core.changes.write(ctx.key(), change, event).await {
            Ok(()) => {
                if carries_grants {
                    self.core.lookups.org_access_changed(&ctx.org.name);
                }
                Ok(())
            }
            Err(ChangeFailure::Refused(RenamePart::Source)) => {
                Err(CatalogError::CommitFailed(format!(
                    "Table has been updated by another process: {}",
                    dotted(&request.source)
                )))
            }
            Err(ChangeFailure::Refused(RenamePart::Destination | RenamePart::Grants)) => {
                Err(table_already_exists(source_ns, &request.destination.name))
            }
            Err(ChangeFailure::Refused(RenamePart::NotAView)) => {
                Err(view_holds_name(source_ns, &request.destination.name))
            }
            // A concurrent change (503, retry) or the store's failure (500).
            Err(failure) => Err(failure.into()),
        }
    }
}

/// What each write of a rename guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RenamePart {
    /// The source row, at the token read (no commit landed since).
    Source,
    /// The destination name, not yet taken.
    Destination,
    /// No view holds the destination name.
    NotAView,
    /// The grants carried to the destination name.
    Grants,
}

pub(super) fn dotted(id: &TableIdentifier) -> String {
    format!("{}.{}", id.namespace.join("."), id.name)
}
