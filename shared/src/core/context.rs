//! Who is asking, and in which org: resolved once per request, passed to every operation.

use std::sync::Arc;

use super::idempotency::KeyClaim;
use crate::authz::Access;
use crate::model::{OrgRow, Principal};

/// An authenticated principal inside one org, with its standing resolved, and the
/// `Idempotency-Key` its request holds, if any: the change the request makes carries the key.
/// The org and the access are shared with the lookups' cache: a request does not copy them.
#[derive(Debug, Clone)]
pub struct OrgContext {
    pub principal: Principal,
    pub org: Arc<OrgRow>,
    pub access: Arc<Access>,
    pub idempotency: Option<KeyClaim>,
}

impl OrgContext {
    /// This context for a request holding `claim` (the idempotency middleware's).
    pub fn holding(mut self, claim: Option<KeyClaim>) -> Self {
        self.idempotency = claim;
        self
    }

    /// The key claim the request's change is written with.
    pub fn key(&self) -> Option<&KeyClaim> {
        self.idempotency.as_ref()
    }
}
