//! Administering access: grants at namespace and table grain, teams, and namespace visibility.
//!
//! Grants are written twice in one atomic write: in the namespace's partition (what listing a
//! namespace's grants reads) and in the grantee's (what resolving a principal's access reads).
//! Changes reach other instances within the auth cache TTL; this instance forgets its
//! remembered standings at once.

use std::collections::BTreeMap;

use crate::core::{AsRead, Change, ChangeFailure};
use crate::events::{Draft, GrantChange, Kind};
use serde::Serialize;

use super::AccessService;
use crate::authz::{Action, Resource, authorize};
use crate::catalog::{OrgContext, ROW_RACE_RETRIES, names};
use crate::error::{CatalogError, Result};
use crate::model::{
    BucketAuth, GrantRow, NamespaceRow, Platform, TableRow, TeamMemberRow, TeamRow, Visibility,
};
use crate::store::MetaStore;
use crate::store::rows::{self, PublicNamespaceRow, keys};
use crate::store::{Condition, Key, Write};

/// A rename carries a table's grants in its own atomic write; DynamoDB takes 100 items per
/// transaction, of which the rename uses 2 and each grant 4.
const MAX_CARRIED_GRANTS: usize = 24;

/// One grant as the management API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GrantView {
    pub principal: String,
    pub action: Action,
    pub table: Option<String>,
}

impl AccessService {
    /// The grants on a namespace and its tables. Manage on the namespace sees them all; manage
    /// on one table sees that table's only.
    pub async fn list_grants(&self, ctx: &OrgContext, namespace: &str) -> Result<Vec<GrantView>> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?.row;
        let manages_namespace = ctx.access.allows(Resource::Namespace(&ns), Action::Manage);
        let rows: Vec<GrantRow> = rows::collect(
            &*self.core.store,
            &keys::namespace_partition(&ns.id),
            keys::GRANT_PREFIX,
            None,
            usize::MAX,
            |_| true,
        )
        .await?;
        let visible: Vec<GrantView> = rows
            .into_iter()
            .filter(|g| {
                manages_namespace
                    || g.table.as_deref().is_some_and(|table| {
                        ctx.access.allows(
                            Resource::Table {
                                namespace: &ns,
                                table,
                            },
                            Action::Manage,
                        )
                    })
            })
            .map(|g| GrantView {
                principal: g.principal,
                action: g.action,
                table: g.table,
            })
            .collect();
        if !manages_namespace && visible.is_empty() {
            authorize(&ctx.access, Resource::Namespace(&ns), Action::Manage)?;
        }
        Ok(visible)
    }

    /// Grants `action` to `principal` on the namespace (`table` `None`) or one of its tables,
    /// replacing that principal's grant at that grain.
    pub async fn put_grant(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        principal: &str,
        table: Option<&str>,
        action: Action,
    ) -> Result<()> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?.row;
        self.authorize_grant_admin(ctx, &ns, table)?;
        if let Some(table) = table {
            names::validate_table_name(table)?;
        }
        let principal = self.grantee(ctx, principal).await?;
        let row = GrantRow {
            principal: principal.clone(),
            namespace_id: ns.id.clone(),
            table: table.map(str::to_owned),
            action,
        };
        let mut writes = vec![
            rows::put(
                keys::grant(&ns.id, table, &principal),
                &row,
                Condition::Always,
            ),
            rows::put(
                keys::grantee(&ctx.org.name, &principal, &ns.id, table),
                &row,
                Condition::Always,
            ),
        ];
        writes.extend(self.legacy_grant_row(&ns, table, &principal).await?);
        let event = grant_event(ctx, &ns, &principal, table, Some(action));
        self.core
            .changes
            .write(ctx.key(), Change::as_read(writes), event)
            .await?;
        self.core.lookups.org_access_changed(&ctx.org.name);
        tracing::info!(audit = "grant", org = %ctx.org.name, by = %ctx.principal.id, namespace = %ns.name, table, principal = %principal, ?action, "grant set");
        Ok(())
    }

    /// Removes `principal`'s grant at one grain; removing one that does not exist succeeds.
    pub async fn delete_grant(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        principal: &str,
        table: Option<&str>,
    ) -> Result<()> {
        let ns = self.core.lookups.live_namespace(ctx, namespace).await?.row;
        self.authorize_grant_admin(ctx, &ns, table)?;
        let principal = canonical_principal(principal)?;
        let mut writes = vec![
            Write::Delete {
                key: keys::grant(&ns.id, table, &principal),
                condition: Condition::Always,
            },
            Write::Delete {
                key: keys::grantee(&ctx.org.name, &principal, &ns.id, table),
                condition: Condition::Always,
            },
        ];
        writes.extend(self.legacy_grant_row(&ns, table, &principal).await?);
        let event = grant_event(ctx, &ns, &principal, table, None);
        self.core
            .changes
            .write(ctx.key(), Change::as_read(writes), event)
            .await?;
        self.core.lookups.org_access_changed(&ctx.org.name);
        tracing::info!(audit = "revoke", org = %ctx.org.name, by = %ctx.principal.id, namespace = %ns.name, table, principal = %principal, "grant removed");
        Ok(())
    }

    /// Makes a namespace AUTHENTICATED_PUBLIC or PRIVATE. Public needs manage on the namespace,
    /// and storage that vends through a customer-managed role for the namespace and every table
    /// override in it: static keys never back a public namespace.
    pub async fn set_visibility(
        &self,
        ctx: &OrgContext,
        namespace: &str,
        visibility: Visibility,
    ) -> Result<()> {
        for _ in 0..ROW_RACE_RETRIES {
            let ns = self.core.lookups.live_namespace(ctx, namespace).await?;
            authorize(&ctx.access, Resource::Namespace(&ns.row), Action::Manage)?;
            if visibility == Visibility::AuthenticatedPublic {
                self.check_public_storage(ctx, &ns.row).await?;
            }
            let mut row = ns.row.clone();
            row.visibility = visibility;
            let index = keys::public_namespace(&ctx.org.name, &row.name);
            let index_write = match visibility {
                Visibility::AuthenticatedPublic => rows::put(
                    index,
                    &PublicNamespaceRow {
                        namespace_id: row.id.clone(),
                        name: row.name.clone(),
                    },
                    Condition::Always,
                ),
                Visibility::Private => Write::Delete {
                    key: index,
                    condition: Condition::Always,
                },
            };
            let write = rows::put(
                keys::namespace(&ctx.org.name, &row.name),
                &row,
                Condition::VersionIs(ns.version),
            );
            let mut event = Draft::new(
                Kind::VisibilityChanged,
                &ctx.org.name,
                &row.name,
                &row.id,
                &ctx.principal,
            );
            event.data.visibility = Some(visibility);
            match self
                .core
                .changes
                .write(ctx.key(), Change::as_read(vec![write, index_write]), event)
                .await
            {
                Ok(()) => {
                    self.core
                        .lookups
                        .namespace_changed(&ctx.org.name, &row.name);
                    self.core.lookups.org_access_changed(&ctx.org.name);
                    tracing::info!(audit = "visibility", org = %ctx.org.name, by = %ctx.principal.id, namespace = %row.name, ?visibility, "namespace visibility set");
                    return Ok(());
                }
                Err(ChangeFailure::Refused(AsRead) | ChangeFailure::Contended) => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
        Err(CatalogError::contended("The namespace"))
    }

    /// Creates a team in the org (org admin).
    pub async fn create_team(&self, ctx: &OrgContext, team: &str) -> Result<()> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        names::validate_namespace_name(team)
            .map_err(|_| CatalogError::BadRequest(format!("Invalid team name: '{team}'")))?;
        let row = TeamRow {
            name: team.to_owned(),
            created_ms: self.core.clock.now_ms(),
        };
        match self
            .core
            .changes
            .write_unrecorded(Change::as_read(vec![rows::put(
                keys::team(&ctx.org.name, team),
                &row,
                Condition::NotExists,
            )]))
            .await
        {
            Ok(()) => Ok(()),
            Err(ChangeFailure::Refused(AsRead)) => Err(CatalogError::AlreadyExists(format!(
                "Team already exists: {team}"
            ))),
            Err(failure) => Err(failure.into()),
        }
    }

    /// Adds (`member` true) or removes a principal to or from a team (org admin).
    pub async fn set_team_member(
        &self,
        ctx: &OrgContext,
        team: &str,
        principal: &str,
        member: bool,
    ) -> Result<()> {
        authorize(&ctx.access, Resource::Catalog, Action::Manage)?;
        if rows::get::<TeamRow>(&*self.core.store, &keys::team(&ctx.org.name, team))
            .await?
            .is_none()
        {
            return Err(CatalogError::NotFound(format!(
                "Team does not exist: {team}"
            )));
        }
        let principal = canonical_principal(principal)?;
        if principal.starts_with("team:") {
            return Err(CatalogError::BadRequest(
                "Teams hold users and api clients, not other teams".into(),
            ));
        }
        let row = TeamMemberRow {
            team: team.to_owned(),
            principal: principal.clone(),
        };
        let org = &ctx.org.name;
        let writes = if member {
            vec![
                rows::put(
                    keys::team_member(org, team, &principal),
                    &row,
                    Condition::Always,
                ),
                rows::put(
                    keys::teams_of(org, &principal, team),
                    &row,
                    Condition::Always,
                ),
            ]
        } else {
            vec![
                Write::Delete {
                    key: keys::team_member(org, team, &principal),
                    condition: Condition::Always,
                },
                Write::Delete {
                    key: keys::teams_of(org, &principal, team),
                    condition: Condition::Always,
                },
            ]
        };
        self.core
            .changes
            .write_unrecorded(Change::as_read(writes))
            .await?;
        self.core.lookups.org_access_changed(org);
        tracing::info!(audit = "team", org = %org, by = %ctx.principal.id, team, principal = %principal, member, "team membership set");
        Ok(())
    }

    /// The writes that move every grant on table `from` to table `to` (a rename carries them),
    /// merged with grants already on `to`: a principal holding both keeps the higher action.
    /// They join the rename's own atomic write, so there is a bound on how many fit.
    pub(crate) async fn carry_grants(
        store: &dyn MetaStore,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        from: &str,
        to: &str,
    ) -> Result<Vec<Write>> {
        let moving = Self::grants_on(store, ns, from).await?;
        if moving.len() > MAX_CARRIED_GRANTS {
            return Err(CatalogError::CommitFailed(format!(
                "Table {}.{from} has {} grants; a rename carries at most {MAX_CARRIED_GRANTS} atomically: remove some first",
                ns.name,
                moving.len()
            )));
        }
        let existing = Self::grants_on(store, ns, to).await?;
        let org = &ctx.org.name;
        // Per principal: the listing rows to remove (on `from`, and on `to` where one lies under
        // a key of an earlier format) and the action it ends up with.
        let mut carried: BTreeMap<String, (Vec<Key>, Action)> = BTreeMap::new();
        for (listed_at, grant) in moving {
            let (stale, action) = carried
                .entry(grant.principal.clone())
                .or_insert_with(|| (Vec::new(), grant.action));
            stale.push(listed_at);
            *action = grant.action.max(*action);
        }
        for (listed_at, grant) in existing {
            if let Some((stale, action)) = carried.get_mut(&grant.principal) {
                *action = grant.action.max(*action);
                if listed_at != keys::grant(&ns.id, Some(to), &grant.principal) {
                    stale.push(listed_at);
                }
            }
        }
        let mut writes = Vec::with_capacity(carried.len() * 4);
        for (principal, (listed_at, action)) in carried {
            let row = GrantRow {
                principal: principal.clone(),
                namespace_id: ns.id.clone(),
                table: Some(to.to_owned()),
                action,
            };
            let stale =
                listed_at
                    .into_iter()
                    .chain([keys::grantee(org, &principal, &ns.id, Some(from))]);
            writes.extend(stale.map(|key| Write::Delete {
                key,
                condition: Condition::Always,
            }));
            for key in [
                keys::grant(&ns.id, Some(to), &principal),
                keys::grantee(org, &principal, &ns.id, Some(to)),
            ] {
                writes.push(rows::put(key, &row, Condition::Always));
            }
        }
        if writes.len() > MAX_CARRIED_GRANTS * 4 {
            return Err(CatalogError::CommitFailed(format!(
                "Table {}.{from} has grants written in an earlier key format; a rename carries at most {MAX_CARRIED_GRANTS} atomically: remove some first",
                ns.name
            )));
        }
        Ok(writes)
    }

    /// The writes that put the grants a dropped-table row kept (rows written while a drop
    /// moved its name's table grants onto the dropped table) back on the name they came from,
    /// merged with the grants on it now: a principal holding both keeps the higher action.
    /// Nothing for a row that kept none. They join the write that changes or removes the row.
    pub(crate) async fn return_kept_grants(
        store: &dyn MetaStore,
        ns: &NamespaceRow,
        dropped: &crate::model::DroppedTableRow,
    ) -> Result<Vec<Write>> {
        if dropped.grants.is_empty() {
            return Ok(Vec::new());
        }
        let name = dropped.table.name.as_str();
        let mut returned: BTreeMap<&str, Action> = BTreeMap::new();
        for grant in &dropped.grants {
            let held = returned
                .entry(grant.principal.as_str())
                .or_insert(grant.action);
            *held = (*held).max(grant.action);
        }
        let present: BTreeMap<String, Action> = Self::grants_on(store, ns, name)
            .await?
            .into_iter()
            .map(|(_, grant)| (grant.principal, grant.action))
            .collect();
        let mut writes = Vec::with_capacity(returned.len() * 2);
        for (principal, action) in returned {
            if present.get(principal).is_some_and(|held| *held >= action) {
                continue;
            }
            let row = GrantRow {
                principal: principal.to_owned(),
                namespace_id: ns.id.clone(),
                table: Some(name.to_owned()),
                action,
            };
            for key in [
                keys::grant(&ns.id, Some(name), principal),
                keys::grantee(&dropped.org, principal, &ns.id, Some(name)),
            ] {
                writes.push(rows::put(key, &row, Condition::Always));
            }
        }
        Ok(writes)
    }

    /// The listing rows of the grants on one table, each with the key it lies at: under
    /// [`keys::grants_on`] and, for rows written before components were escaped, under
    /// [`keys::legacy_grants_on`]. A row is taken by the table its body names, never by where
    /// its key starts (there, an earlier row of a grant on `t#x` also starts `GRANT#t#`).
    async fn grants_on(
        store: &dyn MetaStore,
        ns: &NamespaceRow,
        table: &str,
    ) -> Result<Vec<(Key, GrantRow)>> {
        const BATCH: usize = 256;
        let partition = keys::namespace_partition(&ns.id);
        let current = keys::grants_on(Some(table));
        let legacy = keys::legacy_grants_on(Some(table));
        let mut prefixes = vec![current];
        if !prefixes.contains(&legacy) {
            prefixes.push(legacy);
        }
        let mut out = Vec::new();
        for prefix in prefixes {
            let mut after: Option<String> = None;
            loop {
                let batch = store
                    .query(&partition, &prefix, after.as_deref(), BATCH)
                    .await?;
                let exhausted = batch.len() < BATCH;
                after = batch.last().map(|item| item.key.sk.clone());
                for item in batch {
                    let row: GrantRow = rows::decode(&item)?;
                    if row.table.as_deref() == Some(table) {
                        out.push((item.key, row));
                    }
                }
                if exhausted {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// The delete of a grant's listing row written before components were escaped, when its
    /// grant now lies under another key; only if the row there is this grant's (the same old
    /// key may hold another grant's row, which stays).
    async fn legacy_grant_row(
        &self,
        ns: &NamespaceRow,
        table: Option<&str>,
        principal: &str,
    ) -> Result<Option<Write>> {
        let legacy = keys::legacy_grant(&ns.id, table, principal);
        if legacy == keys::grant(&ns.id, table, principal) {
            return Ok(None);
        }
        let Some(found) = rows::get::<GrantRow>(&*self.core.store, &legacy).await? else {
            return Ok(None);
        };
        let same = found.row.principal == principal && found.row.table.as_deref() == table;
        // No grant is written under an old key that differs from its current one: the row
        // found stays this grant's until deleted.
        Ok(same.then_some(Write::Delete {
            key: legacy,
            condition: Condition::Always,
        }))
    }

    /// Grant administration: manage on the namespace for namespace grants, manage on the table
    /// (which a namespace manager also has) for table grants.
    fn authorize_grant_admin(
        &self,
        ctx: &OrgContext,
        ns: &NamespaceRow,
        table: Option<&str>,
    ) -> Result<()> {
        let resource = match table {
            None => Resource::Namespace(ns),
            Some(table) => Resource::Table {
                namespace: ns,
                table,
            },
        };
        authorize(&ctx.access, resource, Action::Manage)
    }

    /// The principal a grant names, checked: a team must exist in the org.
    async fn grantee(&self, ctx: &OrgContext, principal: &str) -> Result<String> {
        let principal = canonical_principal(principal)?;
        if let Some(team) = principal.strip_prefix("team:")
            && rows::get::<TeamRow>(&*self.core.store, &keys::team(&ctx.org.name, team))
                .await?
                .is_none()
        {
            return Err(CatalogError::BadRequest(format!(
                "Team does not exist: {team}"
            )));
        }
        Ok(principal)
    }

    async fn check_public_storage(&self, ctx: &OrgContext, ns: &NamespaceRow) -> Result<()> {
        let refuse = public_storage_refused;
        let bucket = self
            .core
            .lookups
            .usable_bucket(&ctx.org.name, &ns.bucket)
            .await?;
        if !vends_through_role(&bucket) {
            return Err(refuse(&format!("bucket '{}'", ns.bucket)));
        }
        let tables: Vec<TableRow> = rows::collect(
            &*self.core.store,
            &keys::namespace_partition(&ns.id),
            keys::TABLE_PREFIX,
            None,
            usize::MAX,
            |t: &TableRow| t.storage_override.is_some(),
        )
        .await?;
        for table in tables {
            let Some(storage) = &table.storage_override else {
                continue;
            };
            let bucket = self
                .core
                .lookups
                .usable_bucket(&ctx.org.name, &storage.bucket)
                .await?;
            if !vends_through_role(&bucket) {
                return Err(refuse(&format!(
                    "the storage override of table '{}' (bucket '{}')",
                    table.name, storage.bucket
                )));
            }
        }
        Ok(())
    }
}

/// The refusal of storage a public namespace may not use; `what` names it.
pub(crate) fn public_storage_refused(what: &str) -> CatalogError {
    CatalogError::BadRequest(format!(
        "A public namespace needs storage that vends credentials through a customer-managed role; {what} does not"
    ))
}

/// Storage a public namespace may use: credentials vended through a customer-managed role or
/// downscoped from the catalog's service account (GCS), or a local directory of `floe serve`,
/// which vends nothing.
pub(crate) fn vends_through_role(bucket: &crate::model::BucketRow) -> bool {
    match bucket.auth {
        // Downscoped tokens, as a role's session policy scopes S3 credentials.
        BucketAuth::CustomerManagedRole { .. } | BucketAuth::ServiceAccount => true,
        BucketAuth::Server => bucket.platform == Platform::Local,
        BucketAuth::Anonymous | BucketAuth::Hmac { .. } | BucketAuth::SealedHmac { .. } => false,
    }
}

/// A principal as grants and teams name it: `user:<sub>`, `team:<name>` or
/// `api_client:<id>` (stored as the api client's principal id, `api-client:<id>`).
pub fn canonical_principal(principal: &str) -> Result<String> {
    let invalid = || {
        CatalogError::BadRequest(format!(
            "Invalid principal '{principal}': use user:<sub>, team:<name> or api_client:<id>"
        ))
    };
    let (kind, id) = principal.split_once(':').ok_or_else(invalid)?;
    if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
        return Err(invalid());
    }
    match kind {
        "user" | "team" => Ok(principal.to_owned()),
        "api_client" | "api-client" => Ok(format!("api-client:{id}")),
        _ => Err(invalid()),
    }
}

/// The event of a grant set (`action`) or removed (`None`).
fn grant_event(
    ctx: &OrgContext,
    ns: &NamespaceRow,
    principal: &str,
    table: Option<&str>,
    action: Option<Action>,
) -> Draft {
    let mut event = Draft::new(
        Kind::GrantChanged,
        &ctx.org.name,
        &ns.name,
        &ns.id,
        &ctx.principal,
    );
    event.data.grant = Some(GrantChange {
        principal: principal.to_owned(),
        table: table.map(str::to_owned),
        action,
    });
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::team_principal;

    #[test]
    fn principals_are_checked_and_api_clients_named_one_way() {
        assert_eq!(canonical_principal("user:abc").unwrap(), "user:abc");
        assert_eq!(canonical_principal("team:data").unwrap(), "team:data");
        assert_eq!(
            canonical_principal("api_client:x1").unwrap(),
            "api-client:x1"
        );
        assert_eq!(
            canonical_principal("api-client:x1").unwrap(),
            "api-client:x1"
        );
        for bad in ["abc", "group:x", "user:", "user:a\u{0}b"] {
            assert!(canonical_principal(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn team_principals_are_prefixed() {
        assert_eq!(team_principal("data"), "team:data");
    }
}
