//! Request parsing: bearer auth, path parameters (with the 0x1F separator), queries and JSON
//! bodies. Every failure is a spec ErrorModel, never a bare framework rejection.

use std::collections::HashMap;

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use bytes::Bytes;
use http::request::Parts;
use serde::de::DeserializeOwned;

use super::AppState;
use crate::auth;
use crate::catalog::{OrgContext, names};
use crate::core::idempotency::KeyClaim;
use crate::error::CatalogError;
use crate::model::Principal;

/// The authenticated caller of an Iceberg route, holding the request's `Idempotency-Key` claim
/// when the idempotency layer made one. [`Caller::in_org`] is a handler's only way to its
/// `OrgContext`, and that context carries the claim: a keyed route's change is always written
/// with its key, whichever handler runs it, so a retry after a lost answer never applies twice.
pub struct Caller {
    principal: Principal,
    claim: Option<KeyClaim>,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = CatalogError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Authenticated(principal) = Authenticated::from_request_parts(parts, state).await?;
        Ok(Caller {
            principal,
            claim: parts.extensions.get().cloned(),
        })
    }
}

impl Caller {
    /// The caller inside the org (warehouse) the path's prefix names, its standing resolved,
    /// holding the request's key claim.
    pub async fn in_org(
        &self,
        state: &AppState,
        params: &Params,
    ) -> Result<OrgContext, CatalogError> {
        Ok(org_context(state, &self.principal, params)
            .await?
            .holding(self.claim.clone()))
    }
}

/// `principal` inside the org (warehouse) the path's prefix names, its standing resolved,
/// holding no key (handlers go through [`Caller::in_org`]).
pub(super) async fn org_context(
    state: &AppState,
    principal: &Principal,
    params: &Params,
) -> Result<OrgContext, CatalogError> {
    state
        .catalog
        .sessions
        .org_context(principal, params.prefix()?)
        .await
}

/// The authenticated caller.
pub struct Authenticated(pub Principal);

impl FromRequestParts<AppState> for Authenticated {
    type Rejection = CatalogError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .map(|v| {
                v.to_str().map_err(|_| {
                    CatalogError::Unauthenticated("Malformed Authorization header".into())
                })
            })
            .transpose()?;
        let token = auth::bearer(header)?;
        state
            .catalog
            .sessions
            .authenticate(token)
            .await
            .map(Authenticated)
    }
}

/// Decoded path parameters of the route.
pub struct Params(HashMap<String, String>);

impl FromRequestParts<AppState> for Params {
    type Rejection = CatalogError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map(|Path(map)| Params(map))
            .map_err(|e| CatalogError::BadRequest(format!("Invalid path: {}", e.body_text())))
    }
}

impl Params {
    pub(crate) fn get(&self, name: &str) -> Result<&str, CatalogError> {
        self.0
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| CatalogError::Internal(format!("route has no '{name}' parameter")))
    }

    /// The catalog prefix: the org name.
    pub fn prefix(&self) -> Result<&str, CatalogError> {
        self.get("prefix")
    }

    /// The single namespace level of a namespace route; nested references are 400.
    pub fn namespace(&self) -> Result<String, CatalogError> {
        let levels = names::split_levels(self.get("namespace")?);
        names::single_level(&levels).map(str::to_owned)
    }

    /// Namespace and view of a view route (a nested namespace is 404 NoSuchViewException).
    pub fn view(&self) -> Result<(String, String), CatalogError> {
        let view = self.get("view")?.to_owned();
        let levels = names::split_levels(self.get("namespace")?);
        match names::single_level(&levels) {
            Ok(ns) => Ok((ns.to_owned(), view)),
            Err(_) => Err(CatalogError::NoSuchView(format!(
                "View does not exist: {}.{view}",
                levels.join(".")
            ))),
        }
    }

    /// The plan id of a planning route, as sent.
    pub fn plan_id(&self) -> Result<String, CatalogError> {
        self.get("plan-id").map(str::to_owned)
    }

    /// Namespace and table of a table route. A nested table identifier is 404
    /// NoSuchTableException, so engines probing table-shaped identifiers fall back correctly.
    pub fn table(&self) -> Result<(String, String), CatalogError> {
        let table = self.get("table")?.to_owned();
        let raw = self.get("namespace")?;
        let levels = names::split_levels(raw);
        match names::single_level(&levels) {
            Ok(ns) => Ok((ns.to_owned(), table)),
            Err(_) => Err(CatalogError::NoSuchTable(format!(
                "Table does not exist: {}.{table}",
                levels.join(".")
            ))),
        }
    }
}

/// Decoded query parameters.
#[derive(Default)]
pub struct QueryMap(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for QueryMap {
    type Rejection = CatalogError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map(|Query(map)| QueryMap(map))
            .map_err(|e| {
                CatalogError::BadRequest(format!("Invalid query string: {}", e.body_text()))
            })
    }
}

impl QueryMap {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// A boolean query flag; anything but true/false is 400.
    pub fn flag(&self, name: &str) -> Result<bool, CatalogError> {
        match self.get(name) {
            None => Ok(false),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(CatalogError::BadRequest(format!(
                "Invalid value for {name}: '{}' (expected true or false)",
                v.escape_debug()
            ))),
        }
    }
}

/// Largest accepted request body, here and behind API Gateway: AWS Lambda takes invocations of
/// up to 6 MB, in which the body travels as an escaped JSON string beside the headers, so
/// anything bigger may never reach a function. Refusing at 4 MiB everywhere gives clients the
/// same clear 413 locally and on AWS. Commits carry schemas and updates, far below this.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The 413 of a body over [`MAX_BODY_BYTES`].
pub(crate) fn body_too_large() -> CatalogError {
    CatalogError::PayloadTooLarge(format!(
        "Request body exceeds {MAX_BODY_BYTES} bytes, the most this catalog accepts"
    ))
}

/// A JSON body deserialized into `T`; malformed JSON and wrong types are 400, oversized bodies
/// 413.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = CatalogError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == http::StatusCode::PAYLOAD_TOO_LARGE {
                body_too_large()
            } else {
                CatalogError::BadRequest(format!("Cannot read request body: {}", e.body_text()))
            }
        })?;
        if bytes.is_empty() {
            return Err(CatalogError::BadRequest(
                "Request body must be a JSON document".into(),
            ));
        }
        let malformed =
            |e: serde_json::Error| CatalogError::BadRequest(format!("Malformed request body: {e}"));
        if !crate::catalog::parity::format_versions::mentions_defaults(&bytes) {
            return serde_json::from_slice(&bytes)
                .map(JsonBody)
                .map_err(malformed);
        }
        // A schema with field defaults: refused when the crate would drop one while reading.
        let document: serde_json::Value = serde_json::from_slice(&bytes).map_err(malformed)?;
        crate::catalog::parity::format_versions::check_defaults_readable(&document)
            .map_err(CatalogError::BadRequest)?;
        serde_json::from_value(document)
            .map(JsonBody)
            .map_err(malformed)
    }
}
