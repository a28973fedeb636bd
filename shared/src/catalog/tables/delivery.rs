//! How a table answer lets the engine reach its files: scoped credentials, a static-key bucket's
//! sign route, or none of the requested mechanisms (the spec's "any or none"), per the caller's
//! action and the bucket.

use super::{TableRequestOptions, TableService, signing};
use bytes::Bytes;

use crate::catalog::OrgContext;
use crate::error::Result;
use crate::model::{BucketRow, NamespaceRow};
use crate::types::LoadTableResult;
use crate::vending::{AccessLevel, Vended};

impl TableService {
    /// Vends credentials for the table's directory at the principal's level: write access gets
    /// read-write credentials.
    pub(super) async fn vend(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        bucket: &BucketRow,
        table: &str,
        directory: &str,
    ) -> Result<(AccessLevel, Vended)> {
        let level = if self.may_write(ctx, ns, table) {
            AccessLevel::ReadWrite
        } else {
            AccessLevel::Read
        };
        let vended = self
            .core
            .vendor
            .vend(bucket, directory, level, &ctx.principal)
            .await?;
        Ok((level, vended))
    }

    /// Whether this caller receives the static keys of `bucket` for `table`: only where the
    /// bucket configuration opted in, only with write access, never behind a public namespace.
    pub(super) fn hands_out_static_keys(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        bucket: &BucketRow,
        table: &str,
    ) -> bool {
        bucket.static_keys_to_writers
            && !crate::authz::is_public(ns)
            && self.may_write(ctx, ns, table)
    }

    /// How an answer about `table` lets this caller reach its files, from what the request
    /// asked for and the bucket: static keys are handed out only where [`hands_out_static_keys`]
    /// says so, otherwise such storage is signed when the engine asked for remote signing, and
    /// reached with the engine's own keys when it asked for vended credentials alone (the spec
    /// lets the server supply "any or none of the requested mechanisms").
    ///
    /// [`hands_out_static_keys`]: Self::hands_out_static_keys
    pub(super) fn delivery(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        bucket: &BucketRow,
        table: &str,
        options: TableRequestOptions,
    ) -> Delivery {
        if !options.vend_credentials && !options.remote_signing {
            return Delivery::Plain;
        }
        if !signing::signs(bucket)
            || (options.vend_credentials && self.hands_out_static_keys(ctx, ns, bucket, table))
        {
            return Delivery::Vended;
        }
        if options.remote_signing {
            Delivery::Signed
        } else {
            Delivery::Unvended
        }
    }

    /// `metadata`: the document as answered and what identifies its bytes (the SHA-256 of the
    /// file it is, or was trimmed from, with the trim), from which the answer's entity tag is
    /// made without hashing the document again.
    pub(super) async fn table_result(
        &self,
        ctx: &OrgContext,
        at: TableAt<'_>,
        metadata_location: Option<String>,
        metadata: (Bytes, String),
        options: TableRequestOptions,
    ) -> Result<LoadTableResult> {
        self.answer_and_delivery(ctx, at, metadata_location, metadata, options)
            .await
            .map(|(result, _)| result)
    }

    /// As [`Self::table_result`], with how the answer lets the engine reach the files.
    pub(super) async fn answer_and_delivery(
        &self,
        ctx: &OrgContext,
        at: TableAt<'_>,
        metadata_location: Option<String>,
        metadata: (Bytes, String),
        options: TableRequestOptions,
    ) -> Result<(LoadTableResult, Delivery)> {
        let delivery = self.delivery(ctx, at.ns, at.bucket, at.name, options);
        let (delegation, vended) = match delivery {
            Delivery::Signed => {
                let mut config = self.s3_settings(at.bucket);
                config.extend(crate::signing::client_config(&crate::signing::endpoint(
                    &ctx.org.name,
                    &at.ns.name,
                    at.name,
                )));
                let delegation = if self.may_write(ctx, at.ns, at.name) {
                    "signed-write"
                } else {
                    "signed-read"
                };
                let settings = Vended {
                    config,
                    ..Vended::default()
                };
                (delegation, settings)
            }
            Delivery::Vended => {
                let (level, vended) = self
                    .vend(ctx, at.ns, at.bucket, at.name, at.directory)
                    .await?;
                let delegation = match level {
                    AccessLevel::Read => "vended-read",
                    AccessLevel::ReadWrite => "vended-write",
                };
                (delegation, vended)
            }
            Delivery::Unvended => {
                let settings = Vended {
                    config: self.s3_settings(at.bucket),
                    ..Vended::default()
                };
                (crate::types::UNVENDED, settings)
            }
            Delivery::Plain => {
                let config = self.core.vendor.storage_config(at.bucket);
                let settings = Vended {
                    config,
                    ..Vended::default()
                };
                (crate::types::NO_DELEGATION, settings)
            }
        };
        let (raw_metadata, metadata_id) = metadata;
        let etag = crate::types::entity_tag(
            &ctx.org.name,
            &metadata_id,
            delegation,
            metadata_location.as_deref(),
            &vended.config,
            &vended.credentials,
        );
        let result = LoadTableResult {
            metadata_location,
            metadata: raw_metadata,
            metadata_id,
            config: vended.config,
            storage_credentials: vended.credentials,
            etag,
        };
        Ok((result, delivery))
    }
}

/// How a table answer lets the engine reach the table's files.
#[derive(Clone, Copy)]
pub(super) enum Delivery {
    /// Nothing asked for: the bucket's endpoint and region only.
    Plain,
    /// Credentials: scoped temporary ones, or a bucket's static keys where it opted in.
    Vended,
    /// The table's sign route; the keys stay with the catalog.
    Signed,
    /// Vended credentials were asked for on a bucket whose static keys the catalog keeps: none
    /// are supplied, and the engine reaches the bucket (endpoint, region and addressing given)
    /// with keys of its own.
    Unvended,
}

/// A table and the storage it lives on, for building its LoadTableResult.
pub(super) struct TableAt<'a> {
    pub(super) ns: &'a NamespaceRow,
    pub(super) bucket: &'a BucketRow,
    pub(super) name: &'a str,
    pub(super) directory: &'a str,
}
