//! Conformance of the AWS adapters of every port (the suites in tests/support/conformance), and
//! credential vending, against moto's DynamoDB, S3, STS and KMS. `scripts/test` starts moto on a loopback port and sets FLOE_MOTO_ENDPOINT.

mod events;
mod maintenance_queue;
mod objects;
mod secrets;
mod store;
mod vending;
