//! loadTable and tableExists: a table's answer, kept ready for warm loads while the table, its
//! bucket configuration and the form asked for are unchanged.

use super::answers::{AnswerForm, AnswerKey};
use super::{Delivery, TableAt, TableRequestOptions, TableService};
use std::sync::Arc;

use crate::authz::Action;
use crate::catalog::OrgContext;
use crate::error::Result;
use crate::model::{NamespaceRow, TableRow};
use crate::store::rows::{self};
use crate::types::{CommitTableResponse, ReadyAnswer};

impl TableService {
    /// A table's answer: kept ready from an earlier load while the table, its bucket
    /// configuration and the form asked for are unchanged (`answers`), else made afresh.
    pub async fn load_table(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        options: TableRequestOptions,
    ) -> Result<Arc<ReadyAnswer>> {
        let (ns, item) = self
            .core
            .lookups
            .authorized_table_item(ctx, namespace, table, Action::Read)
            .await?;
        let key = AnswerKey::new(
            &ctx.org.name,
            &ns.name,
            table,
            self.answer_form(ctx, &ns, table, options),
        );
        if let Some((bucket, answer)) = self.answers.get(&key, &item.body, &ns.bucket).await {
            let remembered = self
                .core
                .lookups
                .remembered_bucket(&ctx.org.name, &bucket.nickname);
            if remembered.is_some_and(|current| Arc::ptr_eq(&current, &bucket)) {
                return Ok(answer);
            }
        }
        let row: TableRow = rows::decode(&item)?;
        let bucket = self.core.lookups.table_bucket(ctx, &ns, &row).await?;
        let objects = self.core.lookups.objects_for(&bucket).await?;
        let current = self
            .metadata
            .load(&*objects, &crate::catalog::table_ref(ctx, &ns, &row))
            .await?;
        let (raw, id) = if options.only_referenced_snapshots {
            let trimmed = self.metadata.referenced_only(&current).await?;
            (trimmed, format!("{}/refs", current.sha256))
        } else {
            (current.raw.clone(), current.sha256.clone())
        };
        let (result, delivery) = self
            .answer_and_delivery(
                ctx,
                TableAt {
                    ns: &ns,
                    bucket: &bucket,
                    name: &row.name,
                    directory: row.directory(),
                },
                Some(row.metadata_location.clone()),
                (raw, id),
                options,
            )
            .await?;
        let answer = Arc::new(ReadyAnswer::new(result));
        if !matches!(delivery, Delivery::Vended) {
            self.answers
                .keep(key, item.body, &ns.bucket, bucket, answer.clone())
                .await;
        }
        Ok(answer)
    }

    /// What shapes this caller's answer about `table` beyond the table itself.
    pub(super) fn answer_form(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        table: &str,
        options: TableRequestOptions,
    ) -> AnswerForm {
        let delegated = options.vend_credentials || options.remote_signing;
        AnswerForm {
            only_referenced_snapshots: options.only_referenced_snapshots,
            vend_credentials: options.vend_credentials,
            remote_signing: options.remote_signing,
            may_write: delegated && self.may_write(ctx, ns, table),
            public_namespace: delegated && crate::authz::is_public(ns),
        }
    }

    /// The answer to a retried commit whose change landed: the table's current metadata.
    pub async fn replay_commit(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
    ) -> Result<CommitTableResponse> {
        let loaded = self
            .load_table(ctx, namespace, table, Default::default())
            .await?;
        let loaded = loaded.result();
        Ok(CommitTableResponse {
            metadata_location: loaded.metadata_location.clone().unwrap_or_default(),
            metadata: loaded.metadata.clone(),
            metadata_id: loaded.metadata_id.clone(),
            etag: loaded.etag.clone(),
        })
    }

    pub async fn table_exists(&self, ctx: &OrgContext, namespace: &str, table: &str) -> Result<()> {
        self.core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Read)
            .await
            .map(|_| ())
    }
}
