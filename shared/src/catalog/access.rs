//! Resolving what a principal may do in an org: its org role, its teams, every grant naming it
//! or one of its teams, and whether the org shows anything to outsiders. Resolved once per
//! (org, principal) and remembered for the auth cache TTL, so a warm request reads nothing more.

use std::sync::Arc;

use super::Catalog;
use crate::authz::{Access, Grants};
use crate::error::Result;
use crate::model::{GrantRow, Principal, TeamMemberRow, team_principal};
use crate::store::rows::{self, MemberRow, keys};

impl Catalog {
    /// The principal's access in `org`, read from the store.
    pub(super) async fn resolve_access(&self, org: &str, principal: &Principal) -> Result<Access> {
        let store = &*self.store;
        let org_role = rows::get::<MemberRow>(store, &keys::member(org, &principal.id))
            .await?
            .map(|m| m.row.role);
        let service_admin = self.is_service_admin(principal).await?;
        let teams: Vec<TeamMemberRow> = self
            .collect_rows(
                &keys::teams_of_partition(org, &principal.id),
                keys::TEAM_PREFIX,
                None,
                usize::MAX,
                |_| true,
            )
            .await?;
        let mut grantees = vec![principal.id.clone()];
        grantees.extend(teams.iter().map(|t| team_principal(&t.team)));
        let mut grants: Vec<GrantRow> = Vec::new();
        for grantee in &grantees {
            grants.extend(
                self.collect_rows::<GrantRow>(
                    &keys::grantee_partition(org, grantee),
                    keys::GRANT_PREFIX,
                    None,
                    usize::MAX,
                    |_| true,
                )
                .await?,
            );
        }
        let org_has_public = !store
            .query(
                &keys::public_partition(org),
                keys::NAMESPACE_PREFIX,
                None,
                1,
            )
            .await?
            .is_empty();
        Ok(Access {
            principal: principal.id.clone(),
            org: org.to_owned(),
            org_role,
            service_admin,
            grants: Arc::new(Grants::from_rows(&grants)),
            org_has_public,
        })
    }
}
