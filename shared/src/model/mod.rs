//! The catalog's domain types: who acts (principals and their roles), where data lives (bucket
//! configurations and their locations) and what the catalog holds (orgs, namespaces, tables).
//!
//! They depend on nothing else in the crate, so authentication, authorization, the store, object
//! storage and vending can all share them without depending on one another.

mod access;
mod bucket;
mod catalog;
mod principal;

pub use access::{Action, GrantRow, TeamMemberRow, TeamRow, team_principal};
pub use bucket::{
    BucketAuth, BucketRow, Platform, S3Defaults, bucket_endpoint, parse_bucket_url, parse_gs_url,
    parse_s3_url, s3_client_config,
};
pub use catalog::{
    DroppedTableRow, NamespaceRow, OrgRow, TableRow, TableStorage, ViewRow, Visibility,
};
pub use principal::{OrgRole, Principal, PrincipalKind};
