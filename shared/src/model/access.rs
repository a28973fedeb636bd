//! Grants and teams: who may do what beyond their org role.

use serde::{Deserialize, Serialize};

/// What a principal may do with a namespace or table. Each action implies the ones before it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Read,
    Write,
    Manage,
}

/// A grant to one principal (a user, an api client or a team) at namespace grain (`table` is
/// `None`: the namespace and every table in it, now and later) or table grain (one table, by
/// name: it survives drop-and-recreate).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GrantRow {
    pub principal: String,
    pub namespace_id: String,
    pub table: Option<String>,
    pub action: Action,
}

/// A team of an org: a named group of users and api clients that grants can name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TeamRow {
    pub name: String,
    pub created_ms: u64,
}

/// One principal's membership of one team.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TeamMemberRow {
    pub team: String,
    pub principal: String,
}

/// The principal id a team's grants are written to.
pub fn team_principal(team: &str) -> String {
    format!("team:{team}")
}
