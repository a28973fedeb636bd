//! `Idempotency-Key` on the mutating routes (spec 1.11): the first request with a key runs and
//! its answer is recorded; a retry gets that answer without running again. What is stored and
//! how keys are claimed is `core::idempotency`; this layer picks the routes, fingerprints the
//! request, hands the claim to the handler (request extensions, then the `Caller` extractor
//! puts it in the operation's `OrgContext`) and renders replays the owning service builds.

use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use http::StatusCode;
use http::request::Parts;
use sha2::{Digest, Sha256};

use super::AppState;
use super::extract::org_context;
use super::extract::{Authenticated, MAX_BODY_BYTES, Params, QueryMap, body_too_large};
use super::handlers::{table_options, table_response};
use crate::catalog::OrgContext;
use crate::core::idempotency::{Claim, KeyClaim, Recorded, Replay, Replayed};
use crate::error::CatalogError;
use crate::model::Principal;
use crate::routes::{Keying, Operation, ReplayAccess, ReplayAnswer};

/// The request header, as the spec names it.
pub const HEADER: &str = "idempotency-key";

/// The routes that take a key: the spec's mutations that Floe serves ([`Operation::keying`]).
pub fn takes_key(operation: Operation) -> bool {
    matches!(operation.keying(), Keying::Keyed { .. })
}

/// `route` with keys honoured when `operation` takes them.
pub fn keyed(
    route: MethodRouter<AppState>,
    state: &AppState,
    operation: Operation,
) -> MethodRouter<AppState> {
    if !takes_key(operation) {
        return route;
    }
    route.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        move |State(state): State<AppState>, request: Request, next: Next| {
            with_key(state, operation, request, next)
        },
    ))
}

/// Requests without a key (or with keys off) pass as they are.
async fn with_key(state: AppState, operation: Operation, request: Request, next: Next) -> Response {
    if state.catalog.idempotency().lifetime().is_none() || !request.headers().contains_key(HEADER) {
        return next.run(request).await;
    }
    run_keyed(state, operation, request, next)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn run_keyed(
    state: AppState,
    operation: Operation,
    request: Request,
    next: Next,
) -> Result<Response, CatalogError> {
    let (mut parts, body) = request.into_parts();
    let key = parts
        .headers
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    crate::core::idempotency::validate_key(&key)?;
    // Keys belong to their principal: nobody can replay (or block) another's answers.
    let Authenticated(principal) = Authenticated::from_request_parts(&mut parts, &state).await?;
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| body_too_large())?;
    let fingerprint = fingerprint(&parts, &body);
    match state
        .catalog
        .idempotency()
        .claim_key(&key, &principal.id, &fingerprint)
        .await?
    {
        Claim::Replay(replay) => {
            tracing::info!(operation = ?operation, "idempotent replay");
            replay_answer(&state, operation, &mut parts, &principal, &body, replay).await
        }
        Claim::Run(claim) => {
            // The handler's `Caller` hands the claim to the operation in its context.
            parts.extensions.insert(claim.clone());
            let request = Request::from_parts(parts, Body::from(body));
            let response = next.run(request).await;
            Ok(finish(&state, operation, &claim, response).await)
        }
    }
}

/// What a key was used for: method, path with query, and body.
fn fingerprint(parts: &Parts, body: &[u8]) -> String {
    let mut digest = Sha256::new();
    digest.update(parts.method.as_str().as_bytes());
    digest.update([0]);
    let target = parts.uri.path_and_query().map_or("", |p| p.as_str());
    digest.update(target.as_bytes());
    digest.update([0]);
    digest.update(body);
    hex::encode(digest.finalize())
}

/// Whether an answer is final (the spec: 2xx and deterministic 4xx). Authorization answers are
/// not (a grant may come), nor are throttling, timeouts and 5xx.
fn is_final(status: StatusCode) -> bool {
    status.is_success()
        || (status.is_client_error() && !matches!(status.as_u16(), 401 | 403 | 408 | 419 | 429))
}

/// Records the answer (or releases the key) and passes the answer on.
async fn finish(
    state: &AppState,
    operation: Operation,
    claim: &KeyClaim,
    response: Response,
) -> Response {
    if !is_final(response.status()) {
        state.catalog.idempotency().finish_key(claim, None).await;
        return response;
    }
    // A table answer carries credentials, and an unregister's the whole metadata document: they
    // are never stored, but built again on replay.
    let rebuilt = matches!(operation.keying(), Keying::Keyed { answer, .. } if answer.is_rebuilt());
    if response.status().is_success() && rebuilt {
        state
            .catalog
            .idempotency()
            .finish_key(claim, Some(Recorded::Reload))
            .await;
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => {
            state.catalog.idempotency().finish_key(claim, None).await;
            return CatalogError::Internal(format!("cannot read the answer: {e}")).into_response();
        }
    };
    let recorded = Recorded::Stored {
        status: parts.status.as_u16(),
        body: String::from_utf8_lossy(&bytes).into_owned(),
    };
    state
        .catalog
        .idempotency()
        .finish_key(claim, Some(recorded))
        .await;
    Response::from_parts(parts, Body::from(bytes))
}

/// The caller's standing for a replay, refused as a fresh request would be when it may no
/// longer take the action the request took on what it took it on (`on`).
async fn authorized_replay(
    state: &AppState,
    on: ReplayAccess,
    parts: &mut Parts,
    principal: &Principal,
    body: &[u8],
) -> Result<OrgContext, CatalogError> {
    let params = Params::from_request_parts(parts, state).await?;
    let ctx = org_context(state, principal, &params).await?;
    let keys = &state.catalog.idempotency();
    // A request whose path or body could not be parsed was answered 400 without acting: there
    // is nothing it acted on to check.
    match on {
        ReplayAccess::Catalog => keys.authorize_replay(&ctx, Replayed::Catalog).await?,
        ReplayAccess::Namespace => {
            if let Ok(namespace) = params.namespace() {
                keys.authorize_replay(&ctx, Replayed::Namespace(&namespace))
                    .await?;
            }
        }
        ReplayAccess::RenameSource => {
            let source = serde_json::from_slice::<crate::types::RenameTableRequest>(body)
                .ok()
                .and_then(|r| {
                    crate::catalog::names::single_level(&r.source.namespace)
                        .ok()
                        .map(str::to_owned)
                });
            if let Some(source) = source {
                keys.authorize_replay(&ctx, Replayed::Namespace(&source))
                    .await?;
            }
        }
        ReplayAccess::Table | ReplayAccess::View => {
            let named = match on {
                ReplayAccess::View => params.view(),
                _ => params.table(),
            };
            if let Ok((namespace, table)) = named {
                keys.authorize_replay(
                    &ctx,
                    Replayed::Table {
                        namespace: &namespace,
                        table: &table,
                    },
                )
                .await?;
            }
        }
        ReplayAccess::Transaction => {
            state
                .catalog
                .tables
                .authorize_transaction_replay(&ctx, body)
                .await?;
        }
    }
    Ok(ctx)
}

/// The answer to a retry of a request that already happened, for a caller that may still
/// take the action the request took.
async fn replay_answer(
    state: &AppState,
    operation: Operation,
    parts: &mut Parts,
    principal: &Principal,
    body: &[u8],
    replay: Replay,
) -> Result<Response, CatalogError> {
    let Keying::Keyed { on, answer: made } = operation.keying() else {
        return Err(CatalogError::Internal(format!(
            "{operation:?} takes no Idempotency-Key"
        )));
    };
    let ctx = authorized_replay(state, on, parts, principal, body).await?;
    let stored = |status: u16, body: String| -> Response {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
        if body.is_empty() {
            return status.into_response();
        }
        (
            status,
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    };
    match replay {
        Replay::Recorded(Recorded::Stored { status, body }) => Ok(stored(status, body)),
        // An unregister recorded the file it answered with, not the answer itself.
        Replay::Applied {
            answer: Some(recorded),
        } if made == ReplayAnswer::Unregistered => {
            let params = Params::from_request_parts(parts, state).await?;
            let (namespace, _) = params.table()?;
            let answer = state
                .catalog
                .tables
                .replay_unregister(&ctx, &namespace, &recorded)
                .await?;
            Ok(super::handlers::json_bytes(answer.to_json()))
        }
        Replay::Applied {
            answer: Some(answer),
        } => Ok(stored(200, answer)),
        Replay::Recorded(Recorded::Reload) | Replay::Applied { answer: None } => {
            rebuild(state, made, parts, &ctx, body).await
        }
    }
}

/// The answer of an operation that landed, built by its service from the catalog as it is now
/// (the spec lets a replay reflect newer state); this layer only parses the request again.
async fn rebuild(
    state: &AppState,
    answer: ReplayAnswer,
    parts: &mut Parts,
    ctx: &OrgContext,
    body: &[u8],
) -> Result<Response, CatalogError> {
    let params = Params::from_request_parts(parts, state).await?;
    let catalog = &state.catalog;
    match answer {
        ReplayAnswer::NoContent => Ok(StatusCode::NO_CONTENT.into_response()),
        ReplayAnswer::Namespace => {
            let request: crate::types::CreateNamespaceRequest = serde_json::from_slice(body)
                .map_err(|e| CatalogError::BadRequest(e.to_string()))?;
            Ok(Json(catalog.namespaces.replay_create(ctx, &request).await?).into_response())
        }
        // A create or a registration answers with the table it made, as it is now.
        ReplayAnswer::Table => {
            let query = QueryMap::from_request_parts(parts, state).await?;
            let options = table_options(&parts.headers, &query)?;
            let loaded = catalog
                .tables
                .replay_create(ctx, &params.namespace()?, &named(body)?, options)
                .await?;
            Ok(table_response(state, &parts.headers, &*loaded).await)
        }
        ReplayAnswer::Commit => {
            let (namespace, table) = params.table()?;
            let answer = catalog
                .tables
                .replay_commit(ctx, &namespace, &table)
                .await?;
            Ok(table_response(state, &parts.headers, &answer).await)
        }
        // A view answer holds no credentials; the view as it is now.
        ReplayAnswer::View | ReplayAnswer::RegisteredView => {
            let (namespace, view) = match answer {
                ReplayAnswer::View => params.view()?,
                _ => (params.namespace()?, named(body)?),
            };
            let loaded = catalog.views.load_view(ctx, &namespace, &view).await?;
            Ok(super::handlers::json_bytes(loaded.to_json()))
        }
        // Their changes record what the replay needs; a key without it did not land.
        ReplayAnswer::Recorded | ReplayAnswer::Unregistered => Err(CatalogError::Internal(
            "The first request with this key left no answer to repeat; retry with a new key".into(),
        )),
    }
}

/// The `name` a create or registration body gave what it made.
fn named(body: &[u8]) -> Result<String, CatalogError> {
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    serde_json::from_slice::<Named>(body)
        .map(|n| n.name)
        .map_err(|e| CatalogError::BadRequest(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::ROUTES;

    #[test]
    fn final_answers_are_success_and_deterministic_client_errors() {
        for final_status in [200, 204, 400, 404, 406, 409, 422] {
            assert!(is_final(StatusCode::from_u16(final_status).unwrap()));
        }
        for retried in [401, 403, 408, 419, 429, 500, 502, 503, 504] {
            assert!(!is_final(StatusCode::from_u16(retried).unwrap()));
        }
    }

    #[test]
    fn every_keyed_route_is_a_mutation() {
        for route in ROUTES.iter().filter(|r| takes_key(r.operation)) {
            assert!(matches!(route.method, "POST" | "DELETE"), "{route:?}");
        }
        assert_eq!(ROUTES.iter().filter(|r| takes_key(r.operation)).count(), 14);
    }
}
