//! Authorization: (principal, resource, action) -> allow or deny.
//!
//! Every catalog operation calls `authorize` with what it touches. Today access comes from org
//! roles, which map onto every namespace in the org; namespace and table grants slot in here
//! through `Access` without changing any caller.

use crate::error::CatalogError;
use crate::model::{NamespaceRow, OrgRole};

/// What a principal wants to do. Each action implies the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    Read,
    Write,
    ManageGrants,
}

/// What an action is about.
#[derive(Debug, Clone, Copy)]
pub enum Resource<'a> {
    /// The org's catalog as a whole (creating namespaces, listing).
    Catalog,
    Namespace(&'a NamespaceRow),
    Table {
        namespace: &'a NamespaceRow,
        table: &'a str,
    },
}

/// A principal's standing in one org, resolved once per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub org_role: Option<OrgRole>,
}

impl Access {
    /// Whether the principal can see anything at all in the org's catalog.
    pub fn sees_catalog(&self) -> bool {
        self.org_role.is_some()
    }
}

fn role_allows(role: OrgRole, action: Action) -> bool {
    match role {
        OrgRole::Read => action == Action::Read,
        OrgRole::Write => action <= Action::Write,
        OrgRole::Admin => true,
    }
}

/// The blanket denial: it reveals nothing about what exists.
pub fn access_denied() -> CatalogError {
    CatalogError::Forbidden("Access denied".into())
}

/// Allows or denies one action on one resource.
pub fn authorize(
    access: &Access,
    resource: Resource<'_>,
    action: Action,
) -> Result<(), CatalogError> {
    let allowed = match (access.org_role, resource) {
        (Some(role), Resource::Catalog | Resource::Namespace(_) | Resource::Table { .. }) => {
            role_allows(role, action)
        }
        (None, _) => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(access_denied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_imply_lower_actions_only() {
        let read = Access {
            org_role: Some(OrgRole::Read),
        };
        let write = Access {
            org_role: Some(OrgRole::Write),
        };
        let admin = Access {
            org_role: Some(OrgRole::Admin),
        };
        let none = Access { org_role: None };
        assert!(authorize(&read, Resource::Catalog, Action::Read).is_ok());
        assert!(authorize(&read, Resource::Catalog, Action::Write).is_err());
        assert!(authorize(&write, Resource::Catalog, Action::Write).is_ok());
        assert!(authorize(&write, Resource::Catalog, Action::ManageGrants).is_err());
        assert!(authorize(&admin, Resource::Catalog, Action::ManageGrants).is_ok());
        assert!(authorize(&none, Resource::Catalog, Action::Read).is_err());
        assert!(!none.sees_catalog());
    }
}
