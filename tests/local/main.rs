//! Conformance of the local adapters: the embedded store (redb) and the local filesystem object
//! store, through the same suites as the cloud adapters (tests/support/conformance). No
//! emulator, no network and no root: plain `cargo test` runs it.

mod objects;
mod store;
