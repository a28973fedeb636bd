//! The management side of an org: orgs themselves (service administrators), api clients and
//! members (org admins), teams, namespace settings, and who the caller is.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::AccessService;
use crate::authz::{Action, Resource, access_denied, authorize};
use crate::catalog::{Catalog, OrgContext, ROW_RACE_RETRIES, names};
use crate::core::{AsRead, Change, ChangeFailure};
use crate::error::{CatalogError, Result};
use crate::model::{
    NamespaceRow, OrgRole, OrgRow, Principal, PrincipalKind, TeamMemberRow, TeamRow, Visibility,
};
use crate::store::rows::{self, ApiClientRow, MembershipRow, ServiceAdminRow, TokenRow, keys};
use crate::store::{Condition, Write};
use crate::{auth, bootstrap};

/// An api client as the management API shows it; `token` only in the answer that created it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ApiClientView {
    pub id: String,
    pub principal: String,
    pub name: String,
    pub email: Option<String>,
    /// The org role it was created with; `none` for a grant-only client.
    #[serde(serialize_with = "role_or_none")]
    pub role: Option<OrgRole>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

fn role_or_none<S: serde::Serializer>(
    role: &Option<OrgRole>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    match role {
        Some(role) => serde::Serialize::serialize(role, serializer),
        None => serializer.serialize_str("none"),
    }
}

/// A namespace's settings as the management API shows them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NamespaceSettings {
    pub name: String,
    pub visibility: Visibility,
    pub bucket: String,
    pub location: String,
    pub description: Option<String>,
    pub metadata: Map<String, Value>,
}

/// A change of namespace settings: visibility needs manage on the namespace, the rest write.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespacePatch {
    pub visibility: Option<Visibility>,
    pub description: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

/// A team and its members.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TeamView {
    pub name: String,
    pub members: Vec<String>,
}

/// Who the caller is: `GET /api/v1/me`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Me {
    pub principal: String,
    pub name: String,
    pub email: Option<String>,
    pub service_admin: bool,
    /// Org → role.
    pub org_roles: BTreeMap<String, OrgRole>,
    /// Org → the teams the caller belongs to there.
    pub teams: BTreeMap<String, Vec<String>>,
}

/// A principal id as the management API writes it: `user:<sub>`, `team:<name>`,
/// `api_client:<id>`.
pub fn display_principal(id: &str) -> String {
    match id.strip_prefix("api-client:") {
        Some(rest) => format!("api_client:{rest}"),
        None => id.to_owned(),
    }
}

impl AccessService {
    async fn require_service_admin(&self, principal: &Principal, what: &str) -> Result<()> {
        if self.core.lookups.is_service_admin(principal).await? {
            return Ok(());
        }
        tracing::info!(audit = "denied", principal = %principal.id, action = what, "service administrators only");
        Err(access_denied())
    }

    /// Creates an org (service administrators). It starts with Iceberg enabled and no bucket
    /// configuration of its own; its namespaces use the bucket nicknamed `default`.
    pub async fn create_org(&self, principal: &Principal, name: &str) -> Result<OrgRow> {
        self.require_service_admin(principal, "create org").await?;
        names::validate_namespace_name(name)
            .map_err(|_| CatalogError::BadRequest(format!("Invalid org name: '{name}'")))?;
        let org = OrgRow {
            name: name.to_owned(),
            iceberg_enabled: true,
            default_bucket: "default".into(),
            created_ms: self.core.clock.now_ms(),
        };
        if !bootstrap::ensure_org(&*self.core.store, &org).await? {
            return Err(CatalogError::AlreadyExists(format!(
                "Org already exists: {name}"
            )));
        }
        tracing::info!(audit = "org", principal = %principal.id, org = name, "org created");
        Ok(org)
    }

    /// Turns Iceberg on or off for an org (service administrators).
    pub async fn set_iceberg_enabled(
        &self,
        principal: &Principal,
        org: &str,
        enabled: bool,
    ) -> Result<OrgRow> {
        self.require_service_admin(principal, "update org").await?;
        for _ in 0..ROW_RACE_RETRIES {
            let current = rows::get::<OrgRow>(&*self.core.store, &keys::org(org))
                .await?
                .ok_or_else(|| CatalogError::NotFound(format!("Org does not exist: {org}")))?;
            let mut row = current.row.clone();
            row.iceberg_enabled = enabled;
            match self
                .core
                .changes
                .write_unrecorded(Change::as_read(vec![rows::put(
                    keys::org(org),
                    &row,
                    Condition::VersionIs(current.version),
                )]))
                .await
            {
                Ok(()) => {
                    self.core.lookups.org_access_changed(org);
                    tracing::info!(audit = "org", principal = %principal.id, org, enabled, "iceberg switched");
                    return Ok(row);
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The org"))
    }

    /// Creates an api client with an org role, or with none (`None`: it reads only what it is
    /// granted, from its first request on), for org admins; its token is in this answer only.
    pub async fn create_api_client(
        &self,
        ctx: &OrgContext,
        name: &str,
        email: Option<String>,
        role: Option<OrgRole>,
    ) -> Result<ApiClientView> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        if name.trim().is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
            return Err(CatalogError::BadRequest(
                "An api client needs a name of 1 to 128 printable characters".into(),
            ));
        }
        let (principal, token) = bootstrap::issue_api_client(
            &*self.core.store,
            &*self.core.clock,
            &ctx.org.name,
            name,
            email,
            role,
        )
        .await?;
        tracing::info!(audit = "api_client", org = %ctx.org.name, by = %ctx.principal.id, client = %principal.id, ?role, "api client created");
        Ok(ApiClientView {
            id: principal.id.trim_start_matches("api-client:").to_owned(),
            principal: display_principal(&principal.id),
            name: principal.name,
            email: principal.email,
            role,
            token: Some(token),
        })
    }

    /// The org's api clients, without tokens (org admins).
    pub async fn list_api_clients(&self, ctx: &OrgContext) -> Result<Vec<ApiClientView>> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        let clients: Vec<ApiClientRow> = rows::collect(
            &*self.core.store,
            &keys::org_partition(&ctx.org.name),
            keys::API_CLIENT_PREFIX,
            None,
            usize::MAX,
            |_| true,
        )
        .await?;
        Ok(clients
            .into_iter()
            .map(|c| ApiClientView {
                principal: format!("api_client:{}", c.id),
                id: c.id,
                name: c.name,
                email: c.email,
                role: c.role,
                token: None,
            })
            .collect())
    }

    /// Deletes an api client (org admins): its token, its membership and its entry. The token
    /// stops working within the auth cache TTL (at once on this instance).
    pub async fn delete_api_client(&self, ctx: &OrgContext, id: &str) -> Result<()> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        let org = &ctx.org.name;
        let client = rows::get::<ApiClientRow>(&*self.core.store, &keys::api_client(org, id))
            .await?
            .ok_or_else(|| CatalogError::NotFound(format!("Api client does not exist: {id}")))?;
        let principal = format!("api-client:{id}");
        let token =
            rows::get::<TokenRow>(&*self.core.store, &keys::token(&client.row.token_hash)).await?;
        let mut writes = vec![
            Write::Delete {
                key: keys::api_client(org, id),
                condition: Condition::VersionIs(client.version),
            },
            Write::Delete {
                key: keys::member(org, &principal),
                condition: Condition::Always,
            },
            Write::Delete {
                key: keys::membership(&principal, org),
                condition: Condition::Always,
            },
        ];
        if token.is_some_and(|t| t.row.principal.id == principal) {
            writes.push(Write::Delete {
                key: keys::token(&client.row.token_hash),
                condition: Condition::Always,
            });
        }
        self.core
            .changes
            .write_unrecorded(Change::as_read(writes))
            .await?;
        self.core.authn.principal_removed(&principal);
        self.core.lookups.principal_removed(&principal);
        tracing::info!(audit = "api_client", org = %org, by = %ctx.principal.id, client = %principal, "api client deleted");
        Ok(())
    }

    /// Sets a principal's org role, or ends its membership with `None` (org admins).
    pub async fn set_member(
        &self,
        ctx: &OrgContext,
        principal: &str,
        role: Option<OrgRole>,
    ) -> Result<()> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        let principal = crate::catalog::canonical_principal(principal)?;
        if principal.starts_with("team:") {
            return Err(CatalogError::BadRequest(
                "Teams are not org members; grant them access to namespaces instead".into(),
            ));
        }
        let org = &ctx.org.name;
        match role {
            Some(role) => bootstrap::put_member(&*self.core.store, org, &principal, role).await?,
            None => bootstrap::remove_member(&*self.core.store, org, &principal).await?,
        }
        self.core.lookups.org_access_changed(org);
        tracing::info!(audit = "member", org = %org, by = %ctx.principal.id, principal = %principal, ?role, "membership set");
        Ok(())
    }

    /// A team and its members (org members).
    pub async fn team(&self, ctx: &OrgContext, team: &str) -> Result<TeamView> {
        if !ctx.access.is_member() {
            return Err(access_denied());
        }
        rows::get::<TeamRow>(&*self.core.store, &keys::team(&ctx.org.name, team))
            .await?
            .ok_or_else(|| CatalogError::NotFound(format!("Team does not exist: {team}")))?;
        let members: Vec<TeamMemberRow> = rows::collect(
            &*self.core.store,
            &keys::team_members_partition(&ctx.org.name, team),
            "MEMBER#",
            None,
            usize::MAX,
            |_| true,
        )
        .await?;
        Ok(TeamView {
            name: team.to_owned(),
            members: members
                .iter()
                .map(|m| display_principal(&m.principal))
                .collect(),
        })
    }

    /// A namespace's settings (read on the namespace).
    pub async fn namespace_settings(
        &self,
        ctx: &OrgContext,
        namespace: &str,
    ) -> Result<NamespaceSettings> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?.row;
        authorize(&ctx.access, Resource::Namespace(&ns), Action::Read)?;
        Ok(settings(&ns))
    }

    /// Changes a namespace's settings: visibility needs manage, description and metadata
    /// write. All-or-nothing: a refused part changes nothing.
    pub async fn patch_namespace(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        patch: NamespacePatch,
    ) -> Result<NamespaceSettings> {
        let seen = self.core.lookups.live_namespace(ctx, namespace).await?.row;
        let needs = if patch.visibility.is_some() {
            Action::Manage
        } else {
            Action::Write
        };
        authorize(&ctx.access, Resource::Namespace(&seen), needs)?;
        if patch.description.as_ref().is_some_and(|d| d.len() > 4096) {
            return Err(CatalogError::BadRequest(
                "A description has at most 4096 characters".into(),
            ));
        }
        if let Some(visibility) = patch.visibility
            && visibility != seen.visibility
        {
            self.set_visibility(ctx, namespace, visibility).await?;
        }
        if patch.description.is_none() && patch.metadata.is_none() {
            return Ok(settings(
                &self.core.lookups.live_namespace(ctx, namespace).await?.row,
            ));
        }
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            let mut row = ns.row.clone();
            if let Some(description) = &patch.description {
                row.description = Some(description.clone()).filter(|d| !d.is_empty());
            }
            if let Some(metadata) = &patch.metadata {
                row.metadata = metadata.clone();
            }
            match self
                .core
                .changes
                .write_unrecorded(Change::as_read(vec![rows::put(
                    keys::namespace(&ctx.org.name, namespace),
                    &row,
                    Condition::VersionIs(ns.version),
                )]))
                .await
            {
                Ok(()) => {
                    self.core
                        .lookups
                        .namespace_changed(&ctx.org.name, namespace);
                    tracing::info!(audit = "namespace", org = %ctx.org.name, by = %ctx.principal.id, namespace, "namespace settings changed");
                    return Ok(settings(&row));
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }

    /// Who the caller is, with its org roles and teams.
    pub async fn me(&self, principal: &Principal) -> Result<Me> {
        let memberships: Vec<MembershipRow> = rows::collect(
            &*self.core.store,
            &keys::memberships_partition(&principal.id),
            "ORG#",
            None,
            usize::MAX,
            |_| true,
        )
        .await?;
        let mut org_roles = BTreeMap::new();
        let mut teams = BTreeMap::new();
        for membership in memberships {
            let in_org: Vec<TeamMemberRow> = rows::collect(
                &*self.core.store,
                &keys::teams_of_partition(&membership.org, &principal.id),
                keys::TEAM_PREFIX,
                None,
                usize::MAX,
                |_| true,
            )
            .await?;
            if !in_org.is_empty() {
                teams.insert(
                    membership.org.clone(),
                    in_org.into_iter().map(|t| t.team).collect(),
                );
            }
            org_roles.insert(membership.org, membership.role);
        }
        Ok(Me {
            principal: display_principal(&principal.id),
            name: principal.name.clone(),
            email: principal.email.clone(),
            service_admin: self.core.lookups.is_service_admin(principal).await?,
            org_roles,
            teams,
        })
    }

    /// Makes `principal` a service administrator: full access in every org.
    pub async fn make_service_admin(&self, principal: &Principal) -> Result<()> {
        let row = ServiceAdminRow {
            principal_id: principal.id.clone(),
            created_ms: self.core.clock.now_ms(),
        };
        self.core
            .changes
            .write_unrecorded(Change::as_read(vec![rows::put(
                keys::service_admin(&principal.id),
                &row,
                Condition::Always,
            )]))
            .await?;
        Ok(())
    }
}

fn settings(ns: &NamespaceRow) -> NamespaceSettings {
    NamespaceSettings {
        name: ns.name.clone(),
        visibility: ns.visibility,
        bucket: ns.bucket.clone(),
        location: ns.location.clone(),
        description: ns.description.clone(),
        metadata: ns.metadata.clone(),
    }
}

/// A new service administrator's principal and token, for `floe admin create-token
/// --service-admin` on a fresh data dir.
pub async fn issue_service_admin(catalog: &Catalog, name: &str) -> Result<(Principal, String)> {
    let principal = Principal {
        id: format!("api-client:{}", uuid::Uuid::now_v7()),
        kind: PrincipalKind::ApiClient,
        name: name.to_owned(),
        email: None,
    };
    let token = auth::generate_token();
    bootstrap::register_token(
        &*catalog.core.store,
        &*catalog.core.clock,
        &principal,
        &token,
    )
    .await?;
    catalog.access.make_service_admin(&principal).await?;
    Ok((principal, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_clients_are_shown_with_an_underscore() {
        assert_eq!(display_principal("api-client:abc"), "api_client:abc");
        assert_eq!(display_principal("user:sub-1"), "user:sub-1");
        assert_eq!(display_principal("team:data"), "team:data");
    }
}
