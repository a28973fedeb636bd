//! The sign route: storage requests of engines on tables whose bucket has static keys, checked
//! against the table's directory and the caller's access, then signed with the keys the
//! catalog keeps.

use std::collections::BTreeMap;

use super::TableService;
use crate::authz::{Action, Resource};
use crate::catalog::OrgContext;
use crate::error::{CatalogError, Result};
use crate::model::{BucketAuth, BucketRow, NamespaceRow, S3Defaults, parse_s3_url};
use crate::signing::policy::{self, Access};
use crate::signing::sigv4::{self, Keys};
use crate::signing::{Refusal, RemoteSignRequest, RemoteSignResult, s3};

impl TableService {
    /// Signs one storage request of `namespace.table` (spec `signRequest`): read access signs
    /// GET and HEAD (and listings of the table's directory), write access also PUT, POST
    /// (multipart, batch deletes) and DELETE, on the table's own objects only and never on a
    /// `*.metadata.json`. A refused request is a 403 and an audit log record.
    pub async fn sign_request(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        table: &str,
        request: RemoteSignRequest,
    ) -> Result<RemoteSignResult> {
        let (ns, row) = self
            .core
            .lookups
            .authorized_table(ctx, namespace, table, Action::Read)
            .await?;
        let bucket = self.core.lookups.table_bucket(ctx, &ns, &row.row).await?;
        let BucketAuth::Hmac {
            access_key_id,
            secret_access_key,
        } = &bucket.auth
        else {
            return Err(CatalogError::BadRequest(
                "Remote signing is offered for tables on buckets with static keys; this table's storage vends scoped credentials (X-Iceberg-Access-Delegation: vended-credentials)".into(),
            ));
        };
        let access = if self.may_write(ctx, &ns, table) {
            Access::Write
        } else {
            Access::Read
        };
        let refuse = |refusal: Refusal| {
            tracing::warn!(
                audit = "sign",
                outcome = "refused",
                org = %ctx.org.name,
                principal = %ctx.principal.id,
                namespace,
                table,
                method = %request.method.escape_debug(),
                reason = %refusal,
                "storage request not signed"
            );
            CatalogError::Forbidden(format!("Storage request not signed: {refusal}"))
        };
        let (target, directory) = self.sign_target(&bucket, row.row.directory())?;
        if request.provider.as_deref().is_some_and(|p| p != "s3") {
            return Err(refuse(Refusal::new("only s3 requests are signed")));
        }
        let region = match &target.region {
            Some(region) if *region != request.region => {
                return Err(refuse(Refusal::new(
                    "the request's region is not the table bucket's",
                )));
            }
            Some(region) => region.clone(),
            None => request.region.clone(),
        };
        let method = request.method.to_ascii_uppercase();
        let parsed = s3::parse(&request.uri, &target).map_err(refuse)?;
        let (operation, payload) = policy::check(
            &method,
            &parsed,
            &request.headers,
            request.body.as_deref(),
            &directory,
            access,
        )
        .map_err(refuse)?;
        let headers = sigv4::sign_request(
            &method,
            &request.uri,
            &request.headers,
            &payload,
            &Keys {
                access_key_id,
                secret_access_key,
            },
            &region,
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(self.core.clock.now_ms()),
        )
        .map_err(refuse)?;
        tracing::debug!(
            audit = "sign",
            outcome = "signed",
            org = %ctx.org.name,
            principal = %ctx.principal.id,
            namespace,
            table,
            operation = ?operation,
            "storage request signed"
        );
        Ok(RemoteSignResult {
            uri: request.uri,
            headers,
        })
    }

    /// Whether the caller may write `table` (and so gets write access to its storage).
    pub(super) fn may_write(&self, ctx: &OrgContext, ns: &NamespaceRow, table: &str) -> bool {
        ctx.access.allows(
            Resource::Table {
                namespace: ns,
                table,
            },
            Action::Write,
        )
    }

    /// The bucket requests must go to (as engines are told to reach it) and the table's
    /// directory as a key prefix in it.
    fn sign_target(&self, bucket: &BucketRow, directory: &str) -> Result<(s3::Target, String)> {
        let (name, key) = parse_s3_url(directory).ok_or_else(|| {
            CatalogError::BadRequest("Remote signing is offered for S3 tables only".into())
        })?;
        let config = self.s3_settings(bucket);
        Ok((
            s3::Target {
                bucket: name.to_owned(),
                endpoint: config.get("s3.endpoint").cloned(),
                region: config.get("s3.region").cloned(),
            },
            key.trim_end_matches('/').to_owned(),
        ))
    }
}

impl TableService {
    /// What engines are told to reach a static-key bucket (endpoint, region, addressing): the
    /// vendor's settings, else the configuration's own (a server without S3 vending).
    pub(super) fn s3_settings(&self, bucket: &BucketRow) -> BTreeMap<String, String> {
        let mut config = self.core.vendor.storage_config(bucket);
        let own = crate::model::s3_client_config(bucket, &S3Defaults::default());
        for (key, value) in own {
            config.entry(key).or_insert(value);
        }
        config
    }
}

/// Whether a bucket's storage is reached through remote signing: static keys, which cannot be
/// scoped to a table.
pub(crate) fn signs(bucket: &BucketRow) -> bool {
    matches!(
        bucket.auth,
        BucketAuth::Hmac { .. } | BucketAuth::SealedHmac { .. }
    )
}
