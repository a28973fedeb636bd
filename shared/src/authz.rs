//! Authorization: (principal's access, resource, action) -> allow or deny.
//!
//! One decision function for every route. A principal's access in an org is resolved once per
//! request (and remembered for the auth cache TTL): its org role, whether it is a service
//! administrator, and every grant naming it or one of its teams. The rules, from the catalog
//! reference:
//! - org roles `read`, `write`, `admin` map onto every namespace of the org (read, write,
//!   manage);
//! - a namespace grant covers the namespace and every table in it, now and later;
//! - a table grant covers one table by name and makes its namespace visible (listed, loadable),
//!   nothing else in it; it never gives authority over the container;
//! - an AUTHENTICATED_PUBLIC namespace is readable (with its tables) by any authenticated
//!   principal of any org; nothing more.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::CatalogError;
pub use crate::model::Action;
use crate::model::{GrantRow, NamespaceRow, OrgRole, Visibility};

/// What an action is about.
#[derive(Debug, Clone, Copy)]
pub enum Resource<'a> {
    /// The org's catalog as a whole: reading it is listing, writing it is creating namespaces.
    Catalog,
    Namespace(&'a NamespaceRow),
    Table {
        namespace: &'a NamespaceRow,
        table: &'a str,
    },
}

/// The grants one principal holds in one org, directly or through its teams, by namespace id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    namespaces: HashMap<String, NamespaceGrants>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct NamespaceGrants {
    namespace: Option<Action>,
    tables: HashMap<String, Action>,
}

impl Grants {
    /// Merges grant rows; a principal holding several grants at one grain gets the highest.
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = &'a GrantRow>) -> Self {
        let mut grants = Grants::default();
        for row in rows {
            let entry = grants
                .namespaces
                .entry(row.namespace_id.clone())
                .or_default();
            let slot = match &row.table {
                None => &mut entry.namespace,
                Some(table) => {
                    let held = entry.tables.entry(table.clone()).or_insert(row.action);
                    *held = (*held).max(row.action);
                    continue;
                }
            };
            *slot = Some(slot.map_or(row.action, |held| held.max(row.action)));
        }
        grants
    }

    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
    }

    fn on_namespace(&self, namespace_id: &str) -> Option<Action> {
        self.namespaces.get(namespace_id)?.namespace
    }

    fn on_table(&self, namespace_id: &str, table: &str) -> Option<Action> {
        self.namespaces
            .get(namespace_id)?
            .tables
            .get(table)
            .copied()
    }

    fn any_table_in(&self, namespace_id: &str) -> bool {
        self.namespaces
            .get(namespace_id)
            .is_some_and(|n| !n.tables.is_empty())
    }
}

/// A principal's standing in one org, resolved once per request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Who and where, for the audit event of a denial.
    pub principal: String,
    pub org: String,
    pub org_role: Option<OrgRole>,
    /// Full access everywhere.
    pub service_admin: bool,
    pub grants: Arc<Grants>,
    /// The org has at least one live AUTHENTICATED_PUBLIC namespace.
    pub org_has_public: bool,
}

impl Access {
    /// Access from an org role alone.
    pub fn with_role(org_role: Option<OrgRole>) -> Self {
        Self {
            org_role,
            ..Self::default()
        }
    }

    /// Whether the principal can see anything at all in the org's catalog; if not, every
    /// request is the blanket 403.
    pub fn sees_catalog(&self) -> bool {
        self.service_admin
            || self.org_role.is_some()
            || !self.grants.is_empty()
            || self.org_has_public
    }

    /// Whether the principal is a member of the org (holds an org role); only members are told
    /// that Iceberg is disabled for the org.
    pub fn is_member(&self) -> bool {
        self.service_admin || self.org_role.is_some()
    }

    /// Whether the principal may take `action` on `resource`; for filters (listings), which
    /// leave out what a caller may not see rather than refuse it.
    pub fn allows(&self, resource: Resource<'_>, action: Action) -> bool {
        self.effective(resource).is_some_and(|held| held >= action)
    }

    /// The highest action the principal may take on a resource, if any.
    pub fn effective(&self, resource: Resource<'_>) -> Option<Action> {
        match resource {
            Resource::Catalog if self.service_admin => Some(Action::Manage),
            Resource::Catalog => {
                let sees = self.sees_catalog().then_some(Action::Read);
                self.org_role.map(role_action).max(sees)
            }
            Resource::Namespace(ns) => self.effective_by_id(&ns.id, is_public(ns), None),
            Resource::Table { namespace, table } => {
                self.effective_by_id(&namespace.id, is_public(namespace), Some(table))
            }
        }
    }

    /// [`Self::effective`] on a namespace (a table, with `table`) known by id only: what a
    /// record of it (a change event) may be shown to, even after its row is gone. `public`:
    /// the namespace is live and AUTHENTICATED_PUBLIC now.
    pub fn effective_by_id(
        &self,
        namespace_id: &str,
        public: bool,
        table: Option<&str>,
    ) -> Option<Action> {
        if self.service_admin {
            return Some(Action::Manage);
        }
        let role = self.org_role.map(role_action);
        let held = match table {
            None => self.on_namespace_id(namespace_id, public),
            Some(table) => self.on_table_id(namespace_id, public, table),
        };
        role.max(held)
    }

    fn on_namespace_id(&self, namespace_id: &str, public: bool) -> Option<Action> {
        let granted = self.grants.on_namespace(namespace_id);
        let visible = (self.grants.any_table_in(namespace_id) || public).then_some(Action::Read);
        granted.max(visible)
    }

    fn on_table_id(&self, namespace_id: &str, public: bool, table: &str) -> Option<Action> {
        let granted = self
            .grants
            .on_namespace(namespace_id)
            .max(self.grants.on_table(namespace_id, table));
        granted.max(public.then_some(Action::Read))
    }

    /// What the principal may do with every table of a namespace known by id, whichever table
    /// holds which name: service administration, its org role, a namespace grant, public
    /// reading (`public` as in [`Self::effective_by_id`]). Table grants do not count.
    pub fn on_every_table_by_id(&self, namespace_id: &str, public: bool) -> Option<Action> {
        if self.service_admin {
            return Some(Action::Manage);
        }
        let role = self.org_role.map(role_action);
        role.max(self.grants.on_namespace(namespace_id))
            .max(public.then_some(Action::Read))
    }

    /// The table grant the principal holds on a table name: it covers the table that holds
    /// the name while the grant exists, not a table that held it before.
    pub fn table_grant_by_id(&self, namespace_id: &str, table: &str) -> Option<Action> {
        self.grants.on_table(namespace_id, table)
    }

    /// Whether the principal may read every table of the namespace (not only some, through
    /// table grants).
    pub fn reads_every_table(&self, ns: &NamespaceRow) -> bool {
        self.on_every_table_by_id(&ns.id, is_public(ns))
            .is_some_and(|held| held >= Action::Read)
    }
}

fn role_action(role: OrgRole) -> Action {
    match role {
        OrgRole::Read => Action::Read,
        OrgRole::Write => Action::Write,
        OrgRole::Admin => Action::Manage,
    }
}

/// Whether any authenticated principal may read the namespace: AUTHENTICATED_PUBLIC and live.
pub fn is_public(ns: &NamespaceRow) -> bool {
    ns.visibility == Visibility::AuthenticatedPublic && ns.deleted_ms.is_none()
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
    if access.allows(resource, action) {
        return Ok(());
    }
    let (namespace, table) = match resource {
        Resource::Catalog => (None, None),
        Resource::Namespace(ns) => (Some(ns.name.as_str()), None),
        Resource::Table { namespace, table } => (Some(namespace.name.as_str()), Some(table)),
    };
    tracing::info!(
        audit = "denied",
        principal = %access.principal,
        org = %access.org,
        namespace,
        table,
        ?action,
        "request denied"
    );
    Err(access_denied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(id: &str, visibility: Visibility) -> NamespaceRow {
        NamespaceRow {
            id: id.into(),
            org: "o".into(),
            name: id.into(),
            bucket: "b".into(),
            prefix: String::new(),
            location: String::new(),
            properties: Default::default(),
            visibility,
            description: None,
            metadata: Default::default(),
            table_count: 0,
            view_count: 0,
            created_ms: 0,
            deleted_ms: None,
            purging: None,
            purge_attempts: 0,
            purge_last_error: None,
            purge_index_ms: None,
            purge_requested_ms: None,
        }
    }

    fn grant(ns: &str, table: Option<&str>, action: Action) -> GrantRow {
        GrantRow {
            principal: "user:u".into(),
            namespace_id: ns.into(),
            table: table.map(Into::into),
            action,
        }
    }

    fn with_grants(rows: &[GrantRow]) -> Access {
        Access {
            grants: Arc::new(Grants::from_rows(rows)),
            ..Access::default()
        }
    }

    #[test]
    fn roles_imply_lower_actions_only() {
        let read = Access::with_role(Some(OrgRole::Read));
        let write = Access::with_role(Some(OrgRole::Write));
        let admin = Access::with_role(Some(OrgRole::Admin));
        let none = Access::with_role(None);
        assert!(authorize(&read, Resource::Catalog, Action::Read).is_ok());
        assert!(authorize(&read, Resource::Catalog, Action::Write).is_err());
        assert!(authorize(&write, Resource::Catalog, Action::Write).is_ok());
        assert!(authorize(&write, Resource::Catalog, Action::Manage).is_err());
        assert!(authorize(&admin, Resource::Catalog, Action::Manage).is_ok());
        assert!(authorize(&none, Resource::Catalog, Action::Read).is_err());
        assert!(!none.sees_catalog());
    }

    #[test]
    fn a_table_grant_shows_its_namespace_and_nothing_else_in_it() {
        let ns = namespace("n1", Visibility::Private);
        let access = with_grants(&[grant("n1", Some("t"), Action::Write)]);
        let table = |table| Resource::Table {
            namespace: &ns,
            table,
        };
        assert!(access.sees_catalog());
        assert_eq!(
            access.effective(Resource::Namespace(&ns)),
            Some(Action::Read)
        );
        assert_eq!(access.effective(table("t")), Some(Action::Write));
        assert_eq!(access.effective(table("other")), None);
        assert!(authorize(&access, Resource::Namespace(&ns), Action::Write).is_err());
        assert!(authorize(&access, Resource::Catalog, Action::Write).is_err());
        let elsewhere = namespace("n2", Visibility::Private);
        assert_eq!(access.effective(Resource::Namespace(&elsewhere)), None);
    }

    #[test]
    fn a_namespace_grant_covers_every_table_and_the_highest_grant_wins() {
        let ns = namespace("n1", Visibility::Private);
        let access = with_grants(&[
            grant("n1", None, Action::Read),
            grant("n1", None, Action::Manage),
            grant("n1", Some("t"), Action::Write),
        ]);
        assert_eq!(
            access.effective(Resource::Namespace(&ns)),
            Some(Action::Manage)
        );
        let any = Resource::Table {
            namespace: &ns,
            table: "anything",
        };
        assert_eq!(access.effective(any), Some(Action::Manage));
    }

    #[test]
    fn public_namespaces_are_read_only_to_everyone_until_deleted() {
        let mut ns = namespace("n1", Visibility::AuthenticatedPublic);
        let stranger = Access {
            org_has_public: true,
            ..Access::default()
        };
        assert!(stranger.sees_catalog());
        assert!(!stranger.is_member());
        assert_eq!(
            stranger.effective(Resource::Namespace(&ns)),
            Some(Action::Read)
        );
        let table = Resource::Table {
            namespace: &ns,
            table: "t",
        };
        assert_eq!(stranger.effective(table), Some(Action::Read));
        assert!(authorize(&stranger, table, Action::Write).is_err());
        ns.deleted_ms = Some(1);
        assert_eq!(stranger.effective(Resource::Namespace(&ns)), None);
    }

    #[test]
    fn service_administrators_may_do_anything() {
        let admin = Access {
            service_admin: true,
            ..Access::default()
        };
        let ns = namespace("n1", Visibility::Private);
        assert!(authorize(&admin, Resource::Namespace(&ns), Action::Manage).is_ok());
        assert!(admin.is_member());
    }
}
