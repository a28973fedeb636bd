//! The catalog's typed errors. Each maps to exactly one spec ErrorModel status and type at the
//! HTTP edge (`http::error`); nothing here knows about HTTP.

use crate::objects::ObjectError;
use crate::store::StoreError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogError {
    /// Malformed or unsupported input (400 BadRequestException).
    #[error("{0}")]
    BadRequest(String),
    /// Missing or unknown token (401 NotAuthorizedException).
    #[error("{0}")]
    Unauthenticated(String),
    /// Authenticated but not allowed (403).
    #[error("{0}")]
    Forbidden(String),
    /// The org has not enabled Iceberg (403 NotAuthorizedException).
    #[error("{0}")]
    IcebergDisabled(String),
    /// Unknown warehouse/org (404 NotFoundException).
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    NoSuchNamespace(String),
    #[error("{0}")]
    NoSuchTable(String),
    #[error("{0}")]
    NoSuchView(String),
    /// A plan id this catalog did not issue for this caller and table (404).
    #[error("{0}")]
    NoSuchPlanId(String),
    /// A plan task this catalog did not issue for this caller and table (404).
    #[error("{0}")]
    NoSuchPlanTask(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    NamespaceNotEmpty(String),
    /// A lost race or failed requirement: nothing was committed (409).
    #[error("{0}")]
    CommitFailed(String),
    /// What the request asks for existed once and was removed for good: an events token past
    /// the retention (410).
    #[error("{0}")]
    Gone(String),
    /// A request that contradicts itself (422).
    #[error("{0}")]
    Unprocessable(String),
    /// A request body over what the catalog (and AWS Lambda behind it) accepts (413).
    #[error("{0}")]
    PayloadTooLarge(String),
    /// An answer over what AWS Lambda can return (500): the client must ask for less.
    #[error("{0}")]
    ResponseTooLarge(String),
    /// Not now: the request was not applied and may be retried as it is (503, Retry-After).
    #[error("{0}")]
    Busy(String),
    /// A spec operation this catalog does not offer (406).
    #[error("{0}")]
    Unsupported(String),
    /// The commit may or may not have landed (500 CommitStateUnknownException).
    #[error("{0}")]
    CommitStateUnknown(String),
    /// A failure of the server or its dependencies (500).
    #[error("{0}")]
    Internal(String),
    /// The catalog store failed (500). Clients see only this message; the edge logs the source.
    #[error("The catalog store failed; retry the request")]
    Store(StoreError),
    /// Table storage failed (500). Clients see only this message and the storage error code;
    /// the edge logs the source, the adapter the detail.
    #[error("Table storage failed (storage error {}); retry the request", .0.code())]
    Objects(#[from] ObjectError),
}

impl From<crate::vending::VendError> for CatalogError {
    fn from(e: crate::vending::VendError) -> Self {
        match e {
            crate::vending::VendError::Unusable(m) => CatalogError::BadRequest(m),
            crate::vending::VendError::Failed(m) => CatalogError::Internal(m),
        }
    }
}

impl From<StoreError> for CatalogError {
    /// Throttling and lost races applied nothing and are worth retrying as they are (503);
    /// everything else is the store's failure (500).
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Throttled(_) => {
                tracing::warn!(error = %e, "catalog store throttled");
                CatalogError::Busy("The catalog store is busy; retry the request".into())
            }
            StoreError::Conflict(_) | StoreError::ConditionFailed { .. } => {
                CatalogError::contended("What the request changes")
            }
            other => CatalogError::Store(other),
        }
    }
}

impl CatalogError {
    /// A change that kept losing to concurrent ones past its retries: nothing of it was applied,
    /// so the same request may be sent again (503 with `Retry-After`).
    pub fn contended(subject: &str) -> Self {
        CatalogError::Busy(format!("{subject} is changing too fast; retry the request"))
    }
}

pub type Result<T, E = CatalogError> = std::result::Result<T, E>;
