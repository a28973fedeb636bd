//! Web view sessions: a token is exchanged once, at sign-in, for a random session id that the
//! browser keeps in an HttpOnly cookie, so the token itself never has to live in the browser.
//!
//! Only the SHA-256 of a session id is stored (`SESSION#<hash>`), so a copy of the store yields
//! no usable session. A session never outlives what it was opened with: an api-client session
//! re-checks its token's row on use (through the auth cache), so deleting the api client ends
//! it; a JWT session expires with the JWT's `exp`.

use crate::core::{Change, Core, OrgContext};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{CatalogError, Result};
use crate::model::Principal;
use crate::store::rows::{self, SessionRow, keys};
use crate::store::{Condition, Write};

/// How long a session lasts at most from sign-in.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// Length of a session id: 43 letters and digits, over 256 bits of randomness.
const SESSION_ID_LEN: usize = 43;

/// A session just opened: its id (for the cookie only; never logged nor stored) and when it ends.
pub struct OpenedSession {
    pub id: String,
    pub principal: Principal,
    /// Unix seconds.
    pub expires_at: u64,
    /// Seconds from its opening to its end (a cookie's Max-Age).
    pub lifetime_secs: u64,
}

impl std::fmt::Debug for OpenedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedSession")
            .field("principal", &self.principal.id)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

fn session_key(id: &str) -> crate::store::Key {
    keys::session(&crate::auth::hash_token(id))
}

fn refused() -> CatalogError {
    CatalogError::Unauthenticated("Not signed in, or the session has ended".into())
}

/// Whether `id` has the shape of a session id: anything else is refused without a store read.
fn well_formed(id: &str) -> bool {
    id.len() == SESSION_ID_LEN && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Authentication of bearer tokens and the web view's sessions.
pub struct SessionService {
    core: Arc<Core>,
}

impl SessionService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    /// The principal of a bearer token (see [`crate::core::Authenticator`]).
    pub async fn authenticate(&self, token: &str) -> Result<Principal> {
        self.core.authn.authenticate(token).await
    }
}

impl SessionService {
    /// `principal` inside `org` (an Iceberg warehouse, a web view's org), its standing there
    /// resolved (and remembered for the auth cache's lifetime): 404 for an unknown org, 403
    /// when Iceberg is disabled for it or the principal sees nothing in it.
    pub async fn org_context(&self, principal: &Principal, org: &str) -> Result<OrgContext> {
        self.core.lookups.org_context(principal, org).await
    }

    /// `principal` inside the org a management route names, whether or not Iceberg is
    /// enabled for it (the management API administers orgs either way).
    pub async fn management_context(&self, principal: &Principal, org: &str) -> Result<OrgContext> {
        self.core.lookups.management_context(principal, org).await
    }

    /// Authenticates `token` as the API does and opens a session for its principal.
    pub async fn open_session(&self, token: &str) -> Result<OpenedSession> {
        let now_ms = self.core.clock.now_ms();
        let mut expires_at = now_ms / 1000 + SESSION_LIFETIME.as_secs();
        let (principal, token_hash) = if crate::auth::is_api_client_token(token) {
            (
                self.authenticate(token).await?,
                Some(crate::auth::hash_token(token)),
            )
        } else {
            let Some(verifier) = self.core.authn.oidc() else {
                // The same refusal as the API's, for the same reason.
                return Err(self.authenticate(token).await.err().unwrap_or_else(refused));
            };
            let verified = verifier.verified(token).await?;
            expires_at = expires_at.min(verified.expires_at);
            (verified.principal, None)
        };
        let id = crate::auth::random_alphanumeric(SESSION_ID_LEN);
        let row = SessionRow {
            principal: principal.clone(),
            token_hash,
            created_ms: now_ms,
            expires_at,
        };
        self.core
            .changes
            .write_unrecorded(Change::as_read(vec![rows::put_expiring(
                session_key(&id),
                &row,
                Condition::NotExists,
                expires_at,
            )]))
            .await?;
        tracing::info!(audit = "session", principal = %principal.id, "web view session opened");
        Ok(OpenedSession {
            id,
            principal,
            expires_at,
            lifetime_secs: expires_at.saturating_sub(now_ms / 1000),
        })
    }

    /// The principal of a live session; 401 when the session is unknown, expired or its
    /// api-client token was revoked.
    pub async fn session_principal(&self, id: &str) -> Result<Principal> {
        if !well_formed(id) {
            return Err(refused());
        }
        let Some(found) = rows::get::<SessionRow>(&*self.core.store, &session_key(id)).await?
        else {
            return Err(refused());
        };
        // The store's TTL reaps late: the expiry is checked here.
        if found.row.expires_at <= self.core.clock.now_ms() / 1000 {
            return Err(refused());
        }
        match &found.row.token_hash {
            Some(hash) => self.core.authn.by_hash(hash).await.map_err(|e| match e {
                CatalogError::Unauthenticated(_) => refused(),
                other => other,
            }),
            None => Ok(found.row.principal),
        }
    }

    /// Ends a session (sign-out). Ending an unknown or already ended session is no error.
    pub async fn close_session(&self, id: &str) -> Result<()> {
        if !well_formed(id) {
            return Ok(());
        }
        self.core
            .changes
            .write_unrecorded(Change::as_read(vec![Write::Delete {
                key: session_key(id),
                condition: Condition::Always,
            }]))
            .await?;
        tracing::info!(audit = "session", "web view session closed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_ids_reach_the_store() {
        assert!(well_formed(&crate::auth::random_alphanumeric(
            SESSION_ID_LEN
        )));
        assert!(!well_formed(""));
        assert!(!well_formed(&"a".repeat(SESSION_ID_LEN + 1)));
        assert!(!well_formed(&format!(
            "{};",
            "a".repeat(SESSION_ID_LEN - 1)
        )));
    }

    #[test]
    fn the_stored_key_is_a_hash_of_the_id() {
        let id = crate::auth::random_alphanumeric(SESSION_ID_LEN);
        let key = session_key(&id);
        assert!(!key.pk.contains(&id));
        assert_eq!(key.pk, format!("SESSION#{}", crate::auth::hash_token(&id)));
    }
}
