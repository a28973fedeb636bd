//! Floe: a serverless Apache Iceberg REST catalog.
//!
//! This crate is the catalog itself: the REST surface (`http`), the operations (`catalog`),
//! authentication and authorization, and the ports with their adapters (`store`, `objects`,
//! `vending`, `secrets`). The `floe` command and every Lambda function are thin shells around it.

pub mod auth;
pub mod authz;
pub mod bootstrap;
pub mod cache;
pub mod catalog;
pub mod clock;
pub mod config;
pub mod core;
pub mod deployment;
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
