//! HTTP-level tests: the full router, a real embedded store and a real local warehouse.

mod access;
mod buckets;
mod commits;
mod compression;
mod concurrency;
mod config;
mod errors;
mod events;
mod format_v3;
mod freshness;
mod iam;
mod idempotency;
mod integrity;
mod lifecycle;
mod management;
mod namespaces;
mod oidc;
mod parity;
mod persistence;
mod purge;
mod register;
mod signing;
mod tables;
mod transactions;
mod ui;
mod views;
