//! Principals and their standing in an org.

use serde::{Deserialize, Serialize};

/// What kind of principal made a request; attribution rules differ.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    User,
    ApiClient,
}

/// The authenticated caller.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Principal {
    pub id: String,
    pub kind: PrincipalKind,
    /// Display name; stamped as snapshot author for users only.
    pub name: String,
    pub email: Option<String>,
}

/// An org role: what an org member may do with every namespace in the org.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum OrgRole {
    Read,
    Write,
    Admin,
}
