//! Provisioning: orgs, bucket configurations, members and api-client tokens, plus the
//! first-start bootstrap of a local development catalog.

use std::path::Path;

use crate::auth;
use crate::clock::Clock;
use crate::core::bucket_keys::sealed as sealed_bucket;
use crate::error::{CatalogError, Result};
use crate::model::{BucketAuth, BucketRow, OrgRole, OrgRow, Platform, Principal, PrincipalKind};
use crate::objects::local::file_url;
use crate::secrets::SecretSealer;
use crate::store::rows::{self, ApiClientRow, MemberRow, MembershipRow, TokenRow, keys};
use crate::store::{Condition, MetaStore, StoreError, Write};

/// Creates an org unless it exists. Returns whether it was created.
pub async fn ensure_org(store: &dyn MetaStore, org: &OrgRow) -> Result<bool> {
    // Read first: functions bootstrap at every cold start, and a conditional write that fails
    // still costs a write on DynamoDB.
    if store.get(&keys::org(&org.name)).await?.is_some() {
        return Ok(false);
    }
    match store
        .write(vec![rows::put(
            keys::org(&org.name),
            org,
            Condition::NotExists,
        )])
        .await
    {
        Ok(()) => Ok(true),
        Err(StoreError::ConditionFailed { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Adds or replaces a bucket configuration of an org.
pub async fn put_bucket(store: &dyn MetaStore, org: &str, bucket: &BucketRow) -> Result<()> {
    let key = keys::bucket(org, &bucket.nickname);
    let condition = match store.get(&key).await? {
        Some(item) => Condition::VersionIs(item.version),
        None => Condition::NotExists,
    };
    store
        .write(vec![rows::put(key, bucket, condition)])
        .await
        .map_err(Into::into)
}

/// Sets a principal's org role.
pub async fn put_member(
    store: &dyn MetaStore,
    org: &str,
    principal_id: &str,
    role: OrgRole,
) -> Result<()> {
    let key = keys::member(org, principal_id);
    let condition = match store.get(&key).await? {
        Some(item) => Condition::VersionIs(item.version),
        None => Condition::NotExists,
    };
    let row = MemberRow {
        principal_id: principal_id.to_owned(),
        role,
    };
    let membership = MembershipRow {
        org: org.to_owned(),
        role,
    };
    store
        .write(vec![
            rows::put(key, &row, condition),
            rows::put(
                keys::membership(principal_id, org),
                &membership,
                Condition::Always,
            ),
        ])
        .await
        .map_err(Into::into)
}

/// Ends a principal's membership of an org (role `none`); ending one that does not exist
/// succeeds.
pub async fn remove_member(store: &dyn MetaStore, org: &str, principal_id: &str) -> Result<()> {
    store
        .write(vec![
            Write::Delete {
                key: keys::member(org, principal_id),
                condition: Condition::Always,
            },
            Write::Delete {
                key: keys::membership(principal_id, org),
                condition: Condition::Always,
            },
        ])
        .await
        .map_err(Into::into)
}

/// Registers `token` (stored hashed) for `principal`. Registering the same token twice for the
/// same principal is a no-op; for another principal it is refused.
pub async fn register_token(
    store: &dyn MetaStore,
    clock: &dyn Clock,
    principal: &Principal,
    token: &str,
) -> Result<()> {
    let key = keys::token(&auth::hash_token(token));
    if let Some(existing) = rows::get::<TokenRow>(store, &key).await? {
        return if existing.row.principal.id == principal.id {
            Ok(())
        } else {
            Err(CatalogError::AlreadyExists(
                "This token is registered to another principal".into(),
            ))
        };
    }
    let row = TokenRow {
        principal: principal.clone(),
        created_ms: clock.now_ms(),
    };
    match store
        .write(vec![rows::put(key.clone(), &row, Condition::NotExists)])
        .await
    {
        Ok(()) => Ok(()),
        Err(StoreError::ConditionFailed { .. }) => {
            let existing = rows::get::<TokenRow>(store, &key).await?;
            if existing.is_some_and(|t| t.row.principal.id == principal.id) {
                Ok(())
            } else {
                Err(CatalogError::AlreadyExists(
                    "This token is registered to another principal".into(),
                ))
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Creates an api client with an org role (or, with `None`, with none: it reads only what it is
/// granted) and returns its new token (shown once, stored hashed).
pub async fn issue_api_client(
    store: &dyn MetaStore,
    clock: &dyn Clock,
    org: &str,
    name: &str,
    email: Option<String>,
    role: impl Into<Option<OrgRole>>,
) -> Result<(Principal, String)> {
    let role = role.into();
    let principal = Principal {
        id: format!("api-client:{}", uuid::Uuid::now_v7()),
        kind: PrincipalKind::ApiClient,
        name: name.to_owned(),
        email,
    };
    if let Some(role) = role {
        put_member(store, org, &principal.id, role).await?;
    }
    let token = auth::generate_token();
    register_token(store, clock, &principal, &token).await?;
    let id = principal.id.trim_start_matches("api-client:").to_owned();
    let listed = ApiClientRow {
        id: id.clone(),
        name: principal.name.clone(),
        email: principal.email.clone(),
        role,
        token_hash: auth::hash_token(&token),
        created_ms: clock.now_ms(),
    };
    store
        .write(vec![rows::put(
            keys::api_client(org, &id),
            &listed,
            Condition::NotExists,
        )])
        .await?;
    Ok((principal, token))
}

/// Settings of the development org.
pub struct DevSettings<'a> {
    pub org: &'a str,
    /// The org's default bucket configuration.
    pub bucket: BucketRow,
    /// A fixed admin token; when absent a token is generated on first start.
    pub token: Option<&'a str>,
}

/// A `default` bucket configuration on a local warehouse directory (created if missing).
pub fn local_bucket(warehouse: &Path) -> Result<BucketRow> {
    std::fs::create_dir_all(warehouse).map_err(|e| {
        CatalogError::Internal(format!("cannot create the warehouse directory: {e}"))
    })?;
    let root = warehouse.canonicalize().map_err(|e| {
        CatalogError::Internal(format!("cannot resolve the warehouse directory: {e}"))
    })?;
    Ok(BucketRow {
        nickname: "default".into(),
        platform: Platform::Local,
        root: file_url(&root),
        auth: BucketAuth::Server,
        endpoint: None,
        region: None,
        path_style: false,
        static_keys_to_writers: false,
    })
}

/// A dev bucket whose keys cannot be sealed stops the start, saying what to set.
fn unsealable(e: CatalogError) -> CatalogError {
    match e {
        CatalogError::BadRequest(why) => CatalogError::Internal(format!(
            "the dev bucket's static keys (FLOE_S3_ACCESS_KEY_ID) cannot be stored: {why}"
        )),
        other => other,
    }
}

/// Seals the secret of a bucket row stored in plain text (by a version that did not seal the
/// dev bucket's keys). A concurrent start that sealed it first wins.
async fn seal_plain_bucket(
    store: &dyn MetaStore,
    org: &str,
    nickname: &str,
    sealer: Option<&dyn SecretSealer>,
) -> Result<()> {
    let key = keys::bucket(org, nickname);
    let Some(stored) = rows::get::<BucketRow>(store, &key).await? else {
        return Ok(());
    };
    if !matches!(stored.row.auth, BucketAuth::Hmac { .. }) {
        return Ok(());
    }
    let row = sealed_bucket(sealer, stored.row)
        .await
        .map_err(unsealable)?;
    match store
        .write(vec![rows::put(
            key,
            &row,
            Condition::VersionIs(stored.version),
        )])
        .await
    {
        Ok(()) => {
            tracing::info!(
                org,
                nickname,
                "sealed the secret of a bucket configuration stored in plain text"
            );
            Ok(())
        }
        Err(StoreError::ConditionFailed { .. } | StoreError::Conflict(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// What the bootstrap did.
pub struct DevBootstrap {
    pub created_org: bool,
    /// A token generated by this start, to show once.
    pub generated_token: Option<String>,
}

/// The admin api client of the development org.
pub fn dev_admin(org: &str) -> Principal {
    Principal {
        id: format!("api-client:{org}-admin"),
        kind: PrincipalKind::ApiClient,
        name: format!("{org}-admin"),
        email: Some(format!("{org}-admin@api-clients.floe.local")),
    }
}

/// On an empty store: an org with Iceberg enabled, a `default` bucket on the local warehouse, and
/// an admin api client. On later starts only a fixed token is (re)registered. The bucket's
/// static keys are sealed with `sealer` (a start without one refuses them), and a `default`
/// row that an earlier version stored with its secret in plain text is sealed in place.
pub async fn bootstrap_dev(
    store: &dyn MetaStore,
    clock: &dyn Clock,
    settings: &DevSettings<'_>,
    sealer: Option<&dyn SecretSealer>,
) -> Result<DevBootstrap> {
    let org = OrgRow {
        name: settings.org.to_owned(),
        iceberg_enabled: true,
        default_bucket: "default".into(),
        created_ms: clock.now_ms(),
    };
    let created_org = ensure_org(store, &org).await?;
    let admin = dev_admin(settings.org);
    if created_org {
        let bucket = sealed_bucket(sealer, settings.bucket.clone())
            .await
            .map_err(unsealable)?;
        put_bucket(store, settings.org, &bucket).await?;
        put_member(store, settings.org, &admin.id, OrgRole::Admin).await?;
    } else {
        seal_plain_bucket(store, settings.org, &settings.bucket.nickname, sealer).await?;
    }
    let generated_token = match settings.token {
        Some(token) => {
            register_token(store, clock, &admin, token).await?;
            None
        }
        None if created_org => {
            let token = auth::generate_token();
            register_token(store, clock, &admin, &token).await?;
            Some(token)
        }
        None => None,
    };
    Ok(DevBootstrap {
        created_org,
        generated_token,
    })
}
