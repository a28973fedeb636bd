//! Who is asking, and in which org: resolved once per request, passed to every operation.

use crate::authz::Access;
use crate::model::{OrgRow, Principal};

/// An authenticated principal inside one org, with its standing resolved.
#[derive(Debug, Clone)]
pub struct OrgContext {
    pub principal: Principal,
    pub org: OrgRow,
    pub access: Access,
}
