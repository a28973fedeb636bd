//! Who may do what: orgs, their members and api clients, teams, grants and namespace
//! visibility (the management API's access side).

mod admin;
pub(crate) mod grants;

use std::sync::Arc;

pub use admin::{
    ApiClientView, Me, NamespacePatch, NamespaceSettings, TeamView, display_principal,
    issue_service_admin,
};
pub use grants::{GrantView, canonical_principal};

use crate::core::Core;

/// Orgs, members, api clients, teams and grants.
pub struct AccessService {
    core: Arc<Core>,
}

impl AccessService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }
}
