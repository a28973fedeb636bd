//! Authentication: who a bearer token is. Api-client tokens are looked up by their hash in the
//! store, anything else is verified as an OIDC user's JWT; known tokens are remembered for the
//! cache TTL, so a revoked token stops working within it.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::oidc::OidcVerifier;
use crate::cache::Cache;
use crate::error::Result;
use crate::model::Principal;
use crate::store::MetaStore;

const ENTRIES: u64 = 10_000;

pub struct Authenticator {
    store: Arc<dyn MetaStore>,
    /// Token hash -> principal.
    tokens: Cache<String, Principal>,
    /// Verifier of OIDC users' JWTs; `None`: only api-client tokens authenticate.
    oidc: Option<Arc<OidcVerifier>>,
}

impl Authenticator {
    pub fn new(store: Arc<dyn MetaStore>, oidc: Option<Arc<OidcVerifier>>, ttl: Duration) -> Self {
        Self {
            store,
            tokens: Cache::bounded(ENTRIES).expiring_after(ttl),
            oidc,
        }
    }

    /// The principal of a bearer token: an api-client token (`ema_...`) from the store, any
    /// other token as an OIDC user's JWT (refused when OIDC is off). A JWT is never honoured
    /// past its `exp`.
    pub async fn authenticate(&self, token: &str) -> Result<Principal> {
        if !crate::auth::is_api_client_token(token) {
            return crate::auth::oidc::authenticate(self.oidc.as_deref(), token).await;
        }
        self.by_hash(&crate::auth::hash_token(token)).await
    }

    /// The principal of an api-client token known by its hash (a web view session keeps only
    /// the hash).
    pub async fn by_hash(&self, hash: &str) -> Result<Principal> {
        self.tokens
            .get_or_load(hash, crate::auth::authenticate_hash(&*self.store, hash))
            .await
    }

    /// The verifier of OIDC users' JWTs, when OIDC is on.
    pub fn oidc(&self) -> Option<&OidcVerifier> {
        self.oidc.as_deref()
    }

    /// A principal was removed (an api client deleted): its tokens stop working now on this
    /// instance, not only when the cache entry expires.
    pub fn principal_removed(&self, principal_id: &str) {
        let id = principal_id.to_owned();
        self.tokens
            .remove_if(move |_, principal| principal.id == id);
    }

    /// Forgets every remembered token, as a newly started instance would.
    pub fn clear(&self) {
        self.tokens.clear();
    }
}
