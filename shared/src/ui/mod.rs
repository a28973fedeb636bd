//! The web view: a read-only, server-rendered HTML view of the catalog under `/ui/`, served by
//! `floe serve` beside the API and by the `floe-ui` Lambda function behind the same API.
//!
//! People sign in with a token once; the token is exchanged for a session (an HttpOnly,
//! SameSite=Strict cookie holding a random id whose hash only is stored), so no page, header
//! or URL ever carries it. Every page is built from the catalog service with the signed-in
//! principal, so it shows exactly what the API would answer that principal. Pages need no
//! JavaScript (the Content-Security-Policy forbids scripts); templates are askama's,
//! auto-escaped, since every name, property and summary value comes from clients.

mod chart;
mod error;
mod history;
mod links;
mod pages;
mod routes;
mod session;

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::config::Settings;

pub use error::UiError;
pub use routes::{GATEWAY_ROUTES, router, standalone_router};

/// Base path of every web view page.
pub const BASE_PATH: &str = "/ui";

/// How the web view renders what it cannot know from the catalog.
#[derive(Debug, Clone, Default)]
pub struct UiConfig {
    /// Where lineage links of `arraylake.source.repo` point; `None`: shown as text.
    pub repo_url: Option<links::RepoUrl>,
}

/// A web view setting that cannot work; the server refuses to start with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UiConfigError {
    #[error(
        "FLOE_UI_REPO_URL must be an http:// or https:// URL with a {{repo}} placeholder (and optionally {{org}}), got '{0}'"
    )]
    RepoUrl(String),
}

impl UiConfig {
    /// The web view's settings, checked.
    pub fn from_settings(settings: &Settings) -> Result<Self, UiConfigError> {
        Ok(Self {
            repo_url: settings
                .ui_repo_url
                .as_deref()
                .filter(|u| !u.trim().is_empty())
                .map(links::RepoUrl::parse)
                .transpose()?,
        })
    }

    /// With lineage links to `pattern` (`{org}` and `{repo}` placeholders).
    pub fn with_repo_url(pattern: &str) -> Result<Self, UiConfigError> {
        Ok(Self {
            repo_url: Some(links::RepoUrl::parse(pattern)?),
        })
    }
}

/// Shared state of the web view's handlers.
#[derive(Clone)]
pub(crate) struct UiState {
    pub catalog: Arc<Catalog>,
    pub config: Arc<UiConfig>,
}
