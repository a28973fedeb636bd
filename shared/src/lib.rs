//! Floe: a serverless Apache Iceberg REST catalog.
//!
//! This crate is the catalog itself, in layers that only point down:
//!
//! - the edges, [`http`] (the route table as an axum router, the ErrorModel) and [`ui`];
//! - [`catalog`]: one service per area ([`catalog::TableService`],
//!   [`catalog::NamespaceService`], [`catalog::AccessService`], ...), bundled as
//!   [`catalog::Catalog`], each holding an `Arc<`[`core::Core`]`>`;
//! - [`core`]: the ports, clock, sealer and limits with the shared components (authentication,
//!   lookups with named invalidations, the change writer, idempotency keys), built by one
//!   [`core::Builder`] that [`deployment`] and the tests both use;
//! - [`auth`], [`authz`], [`events`], [`signing`]: who a token is, what it may do, the change
//!   events, remote signing's checks;
//! - the ports and their adapters: [`store`], [`objects`], [`vending`], [`secrets`], [`clock`];
//! - [`model`]: domain types, depending on nothing else.
//!
//! The `floe` command and every Lambda function are thin shells around it.

pub mod auth;
pub mod authz;
pub mod bootstrap;
pub mod cache;
pub mod catalog;
pub mod clock;
pub mod config;
pub mod core;
pub mod deployment;
pub mod encoding;
pub mod error;
pub mod events;
pub mod google;
pub mod http;
pub mod iam;
pub mod model;
pub mod objects;
pub mod outbound;

pub mod routes;
pub mod secrets;
pub mod signing;
pub mod store;
pub mod types;
pub mod ui;
pub mod vending;
