//! Conformance of every port's adapters, and credential vending, against moto's DynamoDB, S3 and
//! STS. `scripts/test` starts moto on a loopback port and sets FLOE_MOTO_ENDPOINT.

mod objects;
mod store;
mod vending;
