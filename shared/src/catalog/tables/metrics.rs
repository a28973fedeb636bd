//! reportMetrics: a scan or commit report, accepted and discarded.

use super::TableService;
use crate::catalog::OrgContext;
use crate::error::Result;

impl TableService {
    /// Accepts a scan or commit report and discards it.
    pub async fn report_metrics(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<()> {
        self.table_exists(ctx, namespace, table).await
    }
}
