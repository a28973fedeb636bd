//! Web view failures, each an HTML page with the status the API would answer. A caller who is
//! not signed in gets the sign-in page (401); a resource it may not see answers as the API
//! does (the same 403 or 404, the same words), so a page reveals nothing the API would not.

use askama::Template;
use axum::response::{Html, IntoResponse, Response};
use http::StatusCode;

use super::pages::{ErrorPage, SignInPage};
use crate::error::CatalogError;

#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// No session, or one that has ended.
    #[error("not signed in")]
    SignIn,
    /// The token given at sign-in was refused.
    #[error("sign-in refused")]
    SignInRefused,
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("no such page")]
    NotFound,
    #[error("{0}")]
    BadRequest(String),
    /// A form post another site made the browser send.
    #[error("cross-origin form post refused")]
    CrossOrigin,
    #[error("page rendering failed: {0}")]
    Render(#[from] askama::Error),
}

impl UiError {
    pub fn status(&self) -> StatusCode {
        match self {
            UiError::SignIn | UiError::SignInRefused => StatusCode::UNAUTHORIZED,
            UiError::Catalog(e) => e.status(),
            UiError::NotFound => StatusCode::NOT_FOUND,
            UiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            UiError::CrossOrigin => StatusCode::FORBIDDEN,
            UiError::Render(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A page as an HTML answer; a template that cannot render is a plain 500.
pub fn html(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(body) => (status, Html(body)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "web view page failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, "Internal server error").into_response()
        }
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            UiError::SignIn | UiError::SignInRefused => {
                let message = matches!(self, UiError::SignInRefused)
                    .then(|| "That token was not accepted.".to_owned());
                return html(
                    status,
                    &SignInPage {
                        who: None,
                        crumbs: vec![],
                        message,
                    },
                );
            }
            _ if status.is_server_error() => {
                // Sources (store, storage) are for operators; the page says only this.
                tracing::error!(error = %self, "web view request failed");
            }
            _ => {}
        }
        let message = match &self {
            UiError::Catalog(e) if !status.is_server_error() => e.to_string(),
            UiError::BadRequest(m) => m.clone(),
            UiError::NotFound => "There is no such page.".into(),
            UiError::CrossOrigin => "Forms of this site can only be sent from this site.".into(),
            _ => "Something went wrong on the server; retry in a moment.".into(),
        };
        html(
            status,
            &ErrorPage {
                who: None,
                crumbs: vec![],
                status: status.as_u16(),
                title: status.canonical_reason().unwrap_or("Error").to_owned(),
                message,
            },
        )
    }
}
