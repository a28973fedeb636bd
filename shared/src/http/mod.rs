//! The REST surface: the route table turned into an axum `Router`, for any set of endpoint
//! groups, and the management API. `floe serve` mounts everything; each Lambda function mounts
//! its own group, or the management API.

pub mod error;
pub mod extract;
mod handlers;
pub mod idempotency;
pub mod lambda_limits;
pub mod management;
mod parts_body;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, head, post};

use crate::catalog::Catalog;
use crate::error::CatalogError;
use crate::routes::{Group, Operation, ROUTES};

/// Base path of every catalog route.
pub const BASE_PATH: &str = "/iceberg";

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    pub catalog: Arc<Catalog>,
}

fn method_router(operation: Operation) -> MethodRouter<AppState> {
    use handlers::*;
    match operation {
        Operation::GetConfig => get(get_config),
        Operation::ListNamespaces => get(list_namespaces),
        Operation::CreateNamespace => post(create_namespace),
        Operation::LoadNamespace => get(load_namespace),
        Operation::NamespaceExists => head(namespace_exists),
        Operation::DropNamespace => delete(drop_namespace),
        Operation::UpdateNamespaceProperties => post(update_namespace_properties),
        Operation::ListTables => get(list_tables),
        Operation::CreateTable => post(create_table),
        Operation::LoadTable => get(load_table),
        Operation::LoadCredentials => get(load_credentials),
        Operation::SignRequest => post(sign_request),
        Operation::TableExists => head(table_exists),
        Operation::CommitTable => post(commit_table),
        Operation::DropTable => delete(drop_table),
        Operation::RenameTable => post(rename_table),
        Operation::ReportMetrics => post(report_metrics),
        Operation::ListViews => get(list_views),
        Operation::RegisterTable => post(register_table),
        Operation::UnregisterTable => post(unregister_table),
        Operation::CommitTransaction => post(commit_transaction),
        Operation::CreateView => post(create_view),
        Operation::LoadView => get(load_view),
        Operation::ViewExists => head(view_exists),
        Operation::ReplaceView => post(replace_view),
        Operation::DropView => delete(drop_view),
        Operation::RenameView => post(rename_view),
        Operation::RegisterView => post(register_view),
    }
}

/// A router serving the routes of `groups` under `/iceberg`.
pub fn router(catalog: Arc<Catalog>, groups: &[Group]) -> Router {
    router_with(catalog, groups, false)
}

/// Every Iceberg route and the management API under `/api/v1`: what `floe serve` answers.
pub fn full_router(catalog: Arc<Catalog>) -> Router {
    router_with(catalog, &Group::ALL, true)
}

/// The management API alone: what the management function serves. Iceberg routes answer a
/// spec 404 there, as another group's routes do in an endpoint group's function.
pub fn management_router(catalog: Arc<Catalog>) -> Router {
    router_with(catalog, &[], true)
}

/// A router serving the routes of `groups`, and the management API when `management` is set.
pub fn router_with(catalog: Arc<Catalog>, groups: &[Group], management: bool) -> Router {
    let mut by_path: BTreeMap<&str, MethodRouter<AppState>> = BTreeMap::new();
    let state = AppState {
        catalog: catalog.clone(),
    };
    for route in ROUTES.iter().filter(|r| groups.contains(&r.group)) {
        let added = idempotency::keyed(method_router(route.operation), &state, route.operation);
        let merged = match by_path.remove(route.path) {
            Some(existing) => existing.merge(added),
            None => added,
        };
        by_path.insert(route.path, merged);
    }
    let mut router = Router::new();
    for (path, methods) in by_path {
        router = router.route(&format!("{BASE_PATH}{path}"), methods);
    }
    if management {
        router = router.merge(management::routes());
    }
    router
        .fallback(handlers::unknown_route)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES))
        .layer(middleware::from_fn(log_request))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
        .layer(compression())
        .with_state(AppState { catalog })
}

/// Answers shorter than this go out as they are: compressing them saves less than it costs.
pub const MIN_COMPRESSED_BYTES: u16 = 1024;

/// gzip or zstd, as the client's `Accept-Encoding` prefers, for answers of at least
/// [`MIN_COMPRESSED_BYTES`]; a client that sends no `Accept-Encoding` gets plain JSON.
/// Metadata documents shrink about tenfold, which is what keeps big tables under Lambda's
/// response limit. The fastest level: at the default one, gzip took ten times as long as the
/// rest of a 1,000-snapshot load (`floe bench`); the fastest compresses nearly as well.
pub(crate) fn compression()
-> tower_http::compression::CompressionLayer<tower_http::compression::predicate::SizeAbove> {
    tower_http::compression::CompressionLayer::new()
        .gzip(true)
        .zstd(true)
        .quality(tower_http::CompressionLevel::Fastest)
        .compress_when(tower_http::compression::predicate::SizeAbove::new(
            MIN_COMPRESSED_BYTES,
        ))
}

/// One structured line per request. Only method, path and status: never headers or bodies.
pub(crate) async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        elapsed_us = started.elapsed().as_micros() as u64,
        "request"
    );
    response
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("request handler panicked");
    CatalogError::Internal("Internal server error".into()).into_response()
}
