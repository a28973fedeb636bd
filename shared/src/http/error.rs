//! The spec's ErrorModel: every non-2xx answer is `{"error": {message, type, code}}` with the
//! body's code equal to the HTTP status, because Java clients switch on the body's code.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::error::CatalogError;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErrorModel {
    pub message: String,
    #[serde(rename = "type")]
    pub error_type: String,
    pub code: u16,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IcebergErrorResponse {
    pub error: ErrorModel,
}

impl CatalogError {
    pub fn status(&self) -> StatusCode {
        match self {
            CatalogError::BadRequest(_) => StatusCode::BAD_REQUEST,
            CatalogError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            CatalogError::Forbidden(_) | CatalogError::IcebergDisabled(_) => StatusCode::FORBIDDEN,
            CatalogError::NotFound(_)
            | CatalogError::NoSuchNamespace(_)
            | CatalogError::NoSuchTable(_)
            | CatalogError::NoSuchView(_)
            | CatalogError::NoSuchPlanId(_)
            | CatalogError::NoSuchPlanTask(_) => StatusCode::NOT_FOUND,
            CatalogError::AlreadyExists(_)
            | CatalogError::NamespaceNotEmpty(_)
            | CatalogError::CommitFailed(_) => StatusCode::CONFLICT,
            CatalogError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            CatalogError::Gone(_) => StatusCode::GONE,
            CatalogError::Unsupported(_) => StatusCode::NOT_ACCEPTABLE,
            CatalogError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            CatalogError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            CatalogError::ResponseTooLarge(_)
            | CatalogError::CommitStateUnknown(_)
            | CatalogError::Internal(_)
            | CatalogError::Store(_)
            | CatalogError::Objects(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The ErrorModel `type` the reference names for this error.
    pub fn type_name(&self) -> &'static str {
        match self {
            CatalogError::BadRequest(_) => "BadRequestException",
            CatalogError::Unauthenticated(_) | CatalogError::IcebergDisabled(_) => {
                "NotAuthorizedException"
            }
            CatalogError::Forbidden(_) => "ForbiddenException",
            CatalogError::NotFound(_) => "NotFoundException",
            CatalogError::NoSuchNamespace(_) => "NoSuchNamespaceException",
            CatalogError::NoSuchTable(_) => "NoSuchTableException",
            CatalogError::NoSuchView(_) => "NoSuchViewException",
            CatalogError::NoSuchPlanId(_) => "NoSuchPlanIdException",
            CatalogError::NoSuchPlanTask(_) => "NoSuchPlanTaskException",
            CatalogError::AlreadyExists(_) => "AlreadyExistsException",
            CatalogError::NamespaceNotEmpty(_) => "NamespaceNotEmptyException",
            CatalogError::CommitFailed(_) => "CommitFailedException",
            CatalogError::Unprocessable(_) => "UnprocessableEntityException",
            CatalogError::Gone(_) => "GoneException",
            CatalogError::Unsupported(_) => "UnsupportedOperationException",
            CatalogError::PayloadTooLarge(_) => "PayloadTooLargeException",
            CatalogError::Busy(_) => "ServiceUnavailableException",
            CatalogError::ResponseTooLarge(_) => "ResponseTooLargeException",
            CatalogError::CommitStateUnknown(_) => "CommitStateUnknownException",
            CatalogError::Internal(_) | CatalogError::Store(_) | CatalogError::Objects(_) => {
                "InternalServerError"
            }
        }
    }

    pub fn to_model(&self) -> IcebergErrorResponse {
        IcebergErrorResponse {
            error: ErrorModel {
                message: self.to_string(),
                error_type: self.type_name().to_owned(),
                code: self.status().as_u16(),
            },
        }
    }
}

impl IntoResponse for CatalogError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let CatalogError::Busy(_) = &self {
            // Java's HTTP client re-sends a POST on 503 only with Retry-After.
            tracing::info!(message = %self, "request deferred");
            return (
                status,
                [(http::header::RETRY_AFTER, "1")],
                Json(self.to_model()),
            )
                .into_response();
        }
        if status.is_server_error() {
            // The source of a store or storage failure is logged here, never sent.
            let source = std::error::Error::source(&self).map(ToString::to_string);
            tracing::error!(status = status.as_u16(), error_type = self.type_name(), message = %self, source, "request failed");
        } else {
            tracing::debug!(status = status.as_u16(), error_type = self.type_name(), message = %self, "request rejected");
        }
        (status, Json(self.to_model())).into_response()
    }
}
