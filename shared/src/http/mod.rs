//! The REST surface: the route table turned into an axum `Router`, for one endpoint group or
//! all of them, and the management API. `floe serve` mounts everything; each Lambda function mounts
//! its own group, or the management API.

pub mod error;
pub mod extract;
mod handlers;
pub mod idempotency;
pub mod lambda_limits;
pub mod management;
mod parts_body;
pub(crate) mod request_log;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
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

/// One endpoint group's handlers. Naming one group's (`GroupHandlers::CONFIG`) reaches only
/// that group's handlers and what they call, so a function built for the config group links
/// neither the table and commit paths nor remote signing: a runtime choice of group would keep
/// every handler, and all they call, in every binary.
///
/// The same holds for what a group's answers and requests pass through: the groups whose
/// answers are a kilobyte or two at most (config, credentials, signing) are served without the
/// compression layer, and the groups without mutations without idempotency keys, so their
/// functions link neither zstd and gzip nor the replay of kept answers (floe-config 11.9 to
/// 10.5 MiB).
#[derive(Clone, Copy)]
pub struct GroupHandlers {
    group: Group,
    methods: fn(Operation) -> Option<MethodRouter<AppState>>,
    keys: KeyLayer,
    answers: Answers,
}

/// Whether a group's mutations honour `Idempotency-Key`: a function pointer rather than a flag,
/// so that a function whose group has none links no idempotency code.
type KeyLayer = fn(MethodRouter<AppState>, &AppState, Operation) -> MethodRouter<AppState>;

/// How a group's answers leave the router (compressed on request, or as they are), around the
/// layers every router has; a function pointer for the same reason as [`KeyLayer`].
type Answers = fn(Router) -> Router;

impl GroupHandlers {
    pub const CONFIG: Self = Self::new(Group::Config, config_methods, unkeyed, plain);
    pub const NAMESPACES: Self = Self::new(
        Group::Namespaces,
        namespace_methods,
        idempotency::keyed,
        compressed,
    );
    pub const TABLES: Self =
        Self::new(Group::Tables, table_methods, idempotency::keyed, compressed);
    pub const COMMITS: Self = Self::new(
        Group::Commits,
        commit_methods,
        idempotency::keyed,
        compressed,
    );
    pub const CREDENTIALS: Self = Self::new(Group::Credentials, credential_methods, unkeyed, plain);
    pub const SIGNING: Self = Self::new(Group::Signing, signing_methods, unkeyed, plain);
    pub const PLANNING: Self = Self::new(Group::Planning, planning_methods, unkeyed, compressed);

    const fn new(
        group: Group,
        methods: fn(Operation) -> Option<MethodRouter<AppState>>,
        keys: KeyLayer,
        answers: Answers,
    ) -> Self {
        Self {
            group,
            methods,
            keys,
            answers,
        }
    }

    /// The handlers of `group`; this links every group's.
    pub fn of(group: Group) -> Self {
        match group {
            Group::Config => Self::CONFIG,
            Group::Namespaces => Self::NAMESPACES,
            Group::Tables => Self::TABLES,
            Group::Commits => Self::COMMITS,
            Group::Credentials => Self::CREDENTIALS,
            Group::Signing => Self::SIGNING,
            Group::Planning => Self::PLANNING,
        }
    }

    pub fn group(self) -> Group {
        self.group
    }

    /// The method router of one of this group's operations; `None` for another group's.
    fn methods(self, operation: Operation) -> Option<MethodRouter<AppState>> {
        (self.methods)(operation)
    }
}

fn config_methods(operation: Operation) -> Option<MethodRouter<AppState>> {
    match operation {
        Operation::GetConfig => Some(get(handlers::get_config)),
        _ => None,
    }
}

fn namespace_methods(operation: Operation) -> Option<MethodRouter<AppState>> {
    use handlers::*;
    Some(match operation {
        Operation::ListNamespaces => get(list_namespaces),
        Operation::CreateNamespace => post(create_namespace),
        Operation::LoadNamespace => get(load_namespace),
        Operation::NamespaceExists => head(namespace_exists),
        Operation::DropNamespace => delete(drop_namespace),
        Operation::UpdateNamespaceProperties => post(update_namespace_properties),
        _ => return None,
    })
}

fn table_methods(operation: Operation) -> Option<MethodRouter<AppState>> {
    use handlers::*;
    Some(match operation {
        Operation::ListTables => get(list_tables),
        Operation::CreateTable => post(create_table),
        Operation::LoadTable => get(load_table),
        Operation::TableExists => head(table_exists),
        Operation::DropTable => delete(drop_table),
        Operation::RenameTable => post(rename_table),
        Operation::ReportMetrics => post(report_metrics),
        Operation::ListViews => get(list_views),
        Operation::RegisterTable => post(register_table),
        Operation::UnregisterTable => post(unregister_table),
        Operation::CreateView => post(create_view),
        Operation::LoadView => get(load_view),
        Operation::ViewExists => head(view_exists),
        Operation::DropView => delete(drop_view),
        Operation::RenameView => post(rename_view),
        Operation::RegisterView => post(register_view),
        Operation::ReplaceView => post(replace_view),
        _ => return None,
    })
}

fn commit_methods(operation: Operation) -> Option<MethodRouter<AppState>> {
    use handlers::*;
    Some(match operation {
        Operation::CommitTable => post(commit_table),
        Operation::CommitTransaction => post(commit_transaction),
        _ => return None,
    })
}

fn credential_methods(operation: Operation) -> Option<MethodRouter<AppState>> {
    match operation {
        Operation::LoadCredentials => Some(get(handlers::load_credentials)),
        _ => None,
    }
}

fn signing_methods(operation: Operation) -> Option<MethodRouter<AppState>> {
    match operation {
        Operation::SignRequest => Some(post(handlers::sign_request)),
        _ => None,
    }
}

fn planning_methods(operation: Operation) -> Option<MethodRouter<AppState>> {
    use handlers::*;
    Some(match operation {
        Operation::PlanTableScan => post(plan_table_scan),
        Operation::FetchPlanningResult => get(fetch_planning_result),
        Operation::CancelPlanning => delete(cancel_planning),
        Operation::FetchScanTasks => post(fetch_scan_tasks),
        _ => return None,
    })
}

/// One endpoint group's routes under `/iceberg`: what that group's function serves, linking
/// only its handlers.
pub fn group_router(catalog: Arc<Catalog>, handlers: GroupHandlers) -> Router {
    router_with(catalog, &[handlers], false, handlers.answers)
}

/// Every Iceberg route and the management API under `/api/v1`: what `floe serve` answers.
pub fn full_router(catalog: Arc<Catalog>) -> Router {
    let handlers: Vec<GroupHandlers> = Group::ALL.into_iter().map(GroupHandlers::of).collect();
    router_with(catalog, &handlers, true, compressed)
}

/// The management API alone: what the management function serves. Iceberg routes answer a
/// spec 404 there, as another group's routes do in an endpoint group's function.
pub fn management_router(catalog: Arc<Catalog>) -> Router {
    router_with(catalog, &[], true, compressed)
}

/// A router serving the routes of the groups whose `handlers` it is given, and the
/// management API when `management` is set, its answers leaving as `answers` sends them.
fn router_with(
    catalog: Arc<Catalog>,
    handlers: &[GroupHandlers],
    management: bool,
    answers: Answers,
) -> Router {
    let mut by_path: BTreeMap<&str, MethodRouter<AppState>> = BTreeMap::new();
    let state = AppState {
        catalog: catalog.clone(),
    };
    for route in ROUTES.iter() {
        let Some(group) = handlers.iter().find(|h| h.group == route.group) else {
            continue;
        };
        let methods = group
            .methods(route.operation)
            .expect("every route has a handler in its own group");
        let added = (group.keys)(methods, &state, route.operation);
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
    let routes = router
        .fallback(handlers::unknown_route)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .with_state(AppState { catalog });
    answers(routes)
}

/// Routes whose operations take no idempotency key.
fn unkeyed(route: MethodRouter<AppState>, _: &AppState, _: Operation) -> MethodRouter<AppState> {
    route
}

/// `routes` behind the layers every router has, answers compressed as the client accepts.
fn compressed(routes: Router) -> Router {
    Router::new().fallback_service(tower::Layer::layer(&compression(), guarded(routes)))
}

/// `routes` behind the layers every router has, answers as they are.
fn plain(routes: Router) -> Router {
    Router::new().fallback_service(guarded(routes))
}

/// The layers every router has: panics answered as spec 500s, one log line per request, the
/// body limit. They wrap the whole router once, as one service: `Router::layer` boxes each
/// layer around every route, and a request then clones and allocates every box on its way in.
fn guarded(
    routes: Router,
) -> impl tower::Service<
    axum::extract::Request,
    Response = http::Response<
        impl http_body::Body<Data = bytes::Bytes, Error = axum::BoxError> + Send + 'static,
    >,
    Error = std::convert::Infallible,
    Future: Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::ServiceBuilder::new()
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
        .layer(request_log::RequestLogLayer)
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES))
        .service(routes)
}

/// Answers shorter than this go out as they are: compressing them saves less than it costs.
pub const MIN_COMPRESSED_BYTES: u16 = 1024;

/// gzip or zstd, as the client's `Accept-Encoding` prefers, for answers of at least
/// [`MIN_COMPRESSED_BYTES`]; a client that sends no `Accept-Encoding` gets plain JSON.
/// Metadata documents shrink about tenfold, which is what keeps big tables under Lambda's
/// response limit. The fastest level: at the default one, gzip took ten times as long as the
/// rest of a 1,000-snapshot load (`floe-bench requests`); the fastest compresses nearly as well.
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

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("request handler panicked");
    CatalogError::Internal("Internal server error".into()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_has_a_handler_in_its_own_group_alone() {
        for route in ROUTES.iter() {
            for group in Group::ALL {
                let handled = GroupHandlers::of(group).methods(route.operation).is_some();
                assert_eq!(
                    handled,
                    group == route.group,
                    "{} {} in {}",
                    route.method,
                    route.path,
                    group.name()
                );
            }
        }
    }
}
