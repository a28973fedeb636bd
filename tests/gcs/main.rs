//! GCS: the `ObjectStore` adapter's conformance against the emulator, downscoped-token vending
//! against a loopback fake of Google's STS, and the catalog on GCS bucket configurations.
//! `scripts/test` starts fake-gcs-server on a loopback port and sets FLOE_FAKE_GCS_ENDPOINT.

mod catalog;
mod objects;
mod vending;
