//! What every catalog operation shares: the ports, the clock, the sealer and the limits, with
//! the components built over them (authentication, lookups, the change writer, idempotency
//! keys), made once by one [`Builder`] that the deployment and the tests both use.
//!
//! Nothing here knows an area's rules (tables, namespaces, grants, ...): those live in the
//! area services of `catalog`, each holding an `Arc<Core>`. Nothing here imports `catalog`.

pub mod authn;
pub mod baselines;
pub mod bucket_keys;
pub mod changes;
mod context;
pub mod idempotency;
pub mod limits;
pub mod lookups;
pub mod paging;

use std::sync::Arc;
use std::time::Duration;

pub use authn::Authenticator;
pub use changes::{AsRead, Change, ChangeFailure, ChangeWriter};
pub use context::OrgContext;
pub use idempotency::IdempotencyKeys;
pub use limits::{CommitRetry, Limits};
pub use lookups::Lookups;

use crate::auth::oidc::OidcVerifier;
use crate::clock::{Clock, SystemClock};
use crate::error::CatalogError;
use crate::objects::ObjectStores;
use crate::secrets::SecretSealer;
use crate::store::MetaStore;
use crate::vending::CredentialVendor;

/// The ports and the shared components; one per process, shared by every request.
pub struct Core {
    pub store: Arc<dyn MetaStore>,
    pub objects: Arc<dyn ObjectStores>,
    pub vendor: Arc<dyn CredentialVendor>,
    pub clock: Arc<dyn Clock>,
    /// Seals secrets kept in rows (bucket HMAC keys); `None`: this deployment cannot seal.
    pub sealer: Option<Arc<dyn SecretSealer>>,
    pub limits: Limits,
    pub authn: Authenticator,
    pub lookups: Lookups,
    pub changes: ChangeWriter,
    pub idempotency: IdempotencyKeys,
    pub page_tokens: paging::PageTokens,
    /// Signalled when an admin asks for a purge now (an immediate delete): a purger running
    /// beside the server (`floe serve`) wakes on it.
    pub purge_wanted: Arc<tokio::sync::Notify>,
    /// The replaced code paths this catalog takes (none but in `floe-bench`).
    pub baselines: Arc<baselines::Baselines>,
}

impl Core {
    /// The sealer of secrets kept in rows; `None` when the deployment has none
    /// (`secrets::required` turns that into the error that says how to configure one).
    pub fn sealer(&self) -> Option<&dyn SecretSealer> {
        self.sealer.as_deref()
    }
}

/// Turns an adapter into another (a wrapper around it: to inject faults or observe calls).
pub type Wrap<T> = Box<dyn FnOnce(Arc<T>) -> Arc<T> + Send>;

/// The one way a [`Core`] is made: the adapters, then the settings that differ from the
/// defaults, then [`Builder::build`].
pub struct Builder {
    store: Arc<dyn MetaStore>,
    objects: Arc<dyn ObjectStores>,
    vendor: Arc<dyn CredentialVendor>,
    clock: Arc<dyn Clock>,
    sealer: Option<Arc<dyn SecretSealer>>,
    oidc: Option<Arc<OidcVerifier>>,
    limits: Limits,
    page_token_key: Option<Vec<u8>>,
}

impl Builder {
    pub fn new(
        store: Arc<dyn MetaStore>,
        objects: Arc<dyn ObjectStores>,
        vendor: Arc<dyn CredentialVendor>,
    ) -> Self {
        Self {
            store,
            objects,
            vendor,
            clock: Arc::new(SystemClock),
            sealer: None,
            oidc: None,
            limits: Limits::default(),
            page_token_key: None,
        }
    }

    /// The clock every operation reads (a manual one in tests about time).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Seals secrets kept in rows with `sealer`.
    pub fn sealer(mut self, sealer: Arc<dyn SecretSealer>) -> Self {
        self.sealer = Some(sealer);
        self
    }

    /// Authenticates OIDC users by their JWTs with `verifier`.
    pub fn oidc(mut self, verifier: Arc<OidcVerifier>) -> Self {
        self.oidc = Some(verifier);
        self
    }

    /// How long tokens, orgs and memberships are remembered (0 disables the caches).
    pub fn auth_cache_ttl(mut self, ttl: Duration) -> Self {
        self.limits.auth_cache_ttl = ttl;
        self
    }

    /// How long clients may retry with one `Idempotency-Key` (`None` turns keys off).
    pub fn idempotency_lifetime(mut self, lifetime: Option<Duration>) -> Self {
        self.limits.idempotency_lifetime = lifetime.filter(|l| !l.is_zero());
        self
    }

    /// How often and how patiently a commit that lost the swap is rebased and retried.
    pub fn commit_retry(mut self, retry: CommitRetry) -> Self {
        self.limits.commit_retry = retry;
        self
    }

    /// Keeps change events for `retention`.
    pub fn event_retention(mut self, retention: Duration) -> Self {
        self.limits.event_retention = retention;
        self
    }

    /// Manifest entries a scan plan reads per answer: smaller pages the plan into more tasks.
    pub fn plan_entries_per_answer(mut self, entries: u64) -> Self {
        self.limits.plan_entries_per_answer = entries.max(1);
        self
    }

    /// Memory for parsed manifests kept for scan planning.
    pub fn plan_cache_bytes(mut self, bytes: u64) -> Self {
        self.limits.plan_cache_bytes = bytes;
        self
    }

    /// Allows bucket endpoints that are plain http or private, loopback or link-local
    /// addresses: S3-compatible stores on a private network, and tests.
    pub fn private_endpoints(mut self, allowed: bool) -> Self {
        self.limits.private_endpoints = allowed;
        self
    }

    /// Signs page tokens with `key`, so every instance behind one endpoint accepts them.
    pub fn page_token_key(mut self, key: &[u8]) -> Self {
        self.page_token_key = Some(key.to_vec());
        self
    }

    /// Wraps the object stores.
    pub fn wrap_objects(mut self, wrap: Wrap<dyn ObjectStores>) -> Self {
        self.objects = wrap(self.objects);
        self
    }

    /// Wraps the credential vendor.
    pub fn wrap_vendor(mut self, wrap: Wrap<dyn CredentialVendor>) -> Self {
        self.vendor = wrap(self.vendor);
        self
    }

    /// Wraps the sealer, when there is one.
    pub fn wrap_sealer(mut self, wrap: Wrap<dyn SecretSealer>) -> Self {
        self.sealer = self.sealer.map(wrap);
        self
    }

    pub fn build(self) -> Core {
        let limits = self.limits;
        let ttl = limits.auth_cache_ttl;
        let baselines = Arc::new(baselines::Baselines::default());
        Core {
            authn: Authenticator::new(self.store.clone(), self.oidc, ttl),
            lookups: Lookups::new(
                self.store.clone(),
                self.objects.clone(),
                self.sealer.clone(),
                ttl,
            ),
            changes: ChangeWriter::new(
                self.store.clone(),
                self.clock.clone(),
                limits.event_retention,
                baselines.clone(),
            ),
            idempotency: IdempotencyKeys::new(
                self.store.clone(),
                self.clock.clone(),
                limits.idempotency_lifetime,
            ),
            page_tokens: match &self.page_token_key {
                Some(key) => paging::PageTokens::new(key),
                None => paging::PageTokens::random(),
            },
            purge_wanted: Arc::default(),
            baselines,
            store: self.store,
            objects: self.objects,
            vendor: self.vendor,
            clock: self.clock,
            sealer: self.sealer,
            limits,
        }
    }
}

/// 404 for a namespace the caller may know of.
pub fn no_such_namespace(name: &str) -> CatalogError {
    CatalogError::NoSuchNamespace(format!("Namespace does not exist: {name}"))
}

/// 404 for a table the caller may know of.
pub fn no_such_table(namespace: &str, table: &str) -> CatalogError {
    CatalogError::NoSuchTable(format!("Table does not exist: {namespace}.{table}"))
}
