//! loadCredentials: fresh storage access for a table, as a load delivers it.

use super::{TableService, signing};
use crate::authz::Action;
use crate::catalog::OrgContext;
use crate::error::Result;
use crate::types::LoadCredentialsResponse;

impl TableService {
    /// `plan_id`: the `planId` of a scan plan whose files the credentials are for; they are the
    /// table's (a plan reads only the table's files), once the id is checked.
    pub async fn load_credentials(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        plan_id: Option<&str>,
    ) -> Result<LoadCredentialsResponse> {
        let (ns, row) = self
            .core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Read)
            .await?;
        if let Some(plan_id) = plan_id {
            self.check_plan_id(ctx, namespace, table, plan_id)?;
        }
        let bucket = self.core.lookups.table_bucket(ctx, &ns, &row.row).await?;
        if signing::signs(&bucket) && !self.hands_out_static_keys(ctx, &ns, &bucket, table) {
            // The keys stay with the catalog: no credentials to supply ("none" is the spec's
            // answer too), and the engine signs through the sign route or uses keys of its own.
            return Ok(LoadCredentialsResponse {
                storage_credentials: Vec::new(),
            });
        }
        let (_, vended) = self
            .vend(ctx, &ns, &bucket, table, row.row.directory())
            .await?;
        Ok(LoadCredentialsResponse {
            storage_credentials: vended.credentials,
        })
    }
}
