//! The ports' conformance suites, each run against every adapter of its port: the local ones
//! in tests/local (plain `cargo test`), the cloud ones in tests/aws and tests/gcs (against moto
//! and fake-gcs-server).

pub mod objects;
pub mod store;
