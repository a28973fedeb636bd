//! The route table: every endpoint Floe serves, defined once.
//!
//! `floe serve`, each Lambda function, template.yaml and the `endpoints` list of
//! `GET /v1/config` are all derived from (or tested against) this table.

/// The Lambda function (endpoint group) that owns a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    Config,
    Namespaces,
    Tables,
    Commits,
    Credentials,
    /// Remote signing: the only group that signs with a bucket's static keys.
    Signing,
    /// Server-side scan planning: reads a table's manifests, writes nothing.
    Planning,
}

impl Group {
    pub const ALL: [Group; 7] = [
        Group::Config,
        Group::Namespaces,
        Group::Tables,
        Group::Commits,
        Group::Credentials,
        Group::Signing,
        Group::Planning,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Group::Config => "config",
            Group::Namespaces => "namespaces",
            Group::Tables => "tables",
            Group::Commits => "commits",
            Group::Credentials => "credentials",
            Group::Signing => "signing",
            Group::Planning => "planning",
        }
    }
}

/// The catalog operation behind a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    GetConfig,
    ListNamespaces,
    CreateNamespace,
    LoadNamespace,
    NamespaceExists,
    DropNamespace,
    UpdateNamespaceProperties,
    ListTables,
    CreateTable,
    LoadTable,
    LoadCredentials,
    SignRequest,
    TableExists,
    CommitTable,
    DropTable,
    RenameTable,
    ReportMetrics,
    ListViews,
    RegisterTable,
    UnregisterTable,
    CommitTransaction,
    CreateView,
    LoadView,
    ViewExists,
    ReplaceView,
    DropView,
    RenameView,
    RegisterView,
    PlanTableScan,
    FetchPlanningResult,
    CancelPlanning,
    FetchScanTasks,
}

impl Operation {
    /// What `Idempotency-Key` means for this operation. Written out for every operation, with
    /// no catch-all: a new operation does not compile until it says whether it takes a key,
    /// what a replay re-authorises and how a replay's answer is made again.
    pub const fn keying(self) -> Keying {
        use Keying::{Keyed, Unkeyed};
        use ReplayAccess as On;
        use ReplayAnswer as Answer;
        const fn keyed(on: ReplayAccess, answer: ReplayAnswer) -> Keying {
            Keyed { on, answer }
        }
        match self {
            Operation::GetConfig
            | Operation::ListNamespaces
            | Operation::LoadNamespace
            | Operation::NamespaceExists
            | Operation::ListTables
            | Operation::LoadTable
            | Operation::LoadCredentials
            | Operation::SignRequest
            | Operation::TableExists
            | Operation::ReportMetrics
            | Operation::ListViews
            | Operation::CreateView
            | Operation::LoadView
            | Operation::ViewExists
            // Planning changes nothing and answers the same plan again: a key needs no replay.
            | Operation::PlanTableScan
            | Operation::FetchPlanningResult
            | Operation::CancelPlanning
            | Operation::FetchScanTasks => Unkeyed,
            Operation::CreateNamespace => keyed(On::Catalog, Answer::Namespace),
            Operation::DropNamespace => keyed(On::Namespace, Answer::NoContent),
            Operation::UpdateNamespaceProperties => keyed(On::Namespace, Answer::Recorded),
            Operation::CreateTable => keyed(On::Namespace, Answer::Table),
            Operation::RegisterTable => keyed(On::Namespace, Answer::Table),
            Operation::CommitTable => keyed(On::Table, Answer::Commit),
            Operation::DropTable => keyed(On::Table, Answer::NoContent),
            Operation::UnregisterTable => keyed(On::Table, Answer::Unregistered),
            Operation::RenameTable => keyed(On::RenameSource, Answer::NoContent),
            Operation::CommitTransaction => keyed(On::Transaction, Answer::NoContent),
            Operation::ReplaceView => keyed(On::View, Answer::View),
            Operation::DropView => keyed(On::View, Answer::NoContent),
            Operation::RenameView => keyed(On::RenameSource, Answer::NoContent),
            Operation::RegisterView => keyed(On::Namespace, Answer::RegisteredView),
        }
    }
}

/// What `Idempotency-Key` means for one operation (spec 1.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keying {
    /// Reads and operations the spec leaves unkeyed: a key is ignored.
    Unkeyed,
    /// The first request with a key runs; a retry is re-authorised `on` what the request
    /// acted on and answered as `answer` says, without running again.
    Keyed {
        on: ReplayAccess,
        answer: ReplayAnswer,
    },
}

/// What a replay checks the caller may still act on, with the action the request took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayAccess {
    /// The org's catalog (creating a namespace).
    Catalog,
    /// The path's namespace.
    Namespace,
    /// The source namespace a rename's body names.
    RenameSource,
    /// The path's table.
    Table,
    /// The path's view.
    View,
    /// Every table a transaction's body names.
    Transaction,
}

/// How the answer to a replayed request is made again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayAnswer {
    /// No body (204): drops, renames, transactions.
    NoContent,
    /// The answer as recorded with the change (it cannot be made from the catalog's state).
    Recorded,
    /// The namespace as it is now.
    Namespace,
    /// The table the request made or registered, as it is now, with fresh storage access.
    Table,
    /// The committed table as it is now, with fresh storage access.
    Commit,
    /// The path's view as it is now.
    View,
    /// The view the body names, as it is now.
    RegisteredView,
    /// The metadata file the unregister answered with, read again.
    Unregistered,
}

impl ReplayAnswer {
    /// Whether a landed request's answer is made again on replay rather than stored: answers
    /// that carry credentials, or a whole metadata document, are never stored.
    pub const fn is_rebuilt(self) -> bool {
        match self {
            ReplayAnswer::Table
            | ReplayAnswer::Commit
            | ReplayAnswer::View
            | ReplayAnswer::RegisteredView
            | ReplayAnswer::Unregistered => true,
            ReplayAnswer::NoContent | ReplayAnswer::Recorded | ReplayAnswer::Namespace => false,
        }
    }
}

/// One served route; `path` is the spec's template, relative to the base path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub group: Group,
    pub operation: Operation,
}

impl Route {
    /// The route as the spec's `endpoints` entry, e.g. `GET /v1/{prefix}/namespaces`.
    pub fn endpoint(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

const fn route(
    method: &'static str,
    path: &'static str,
    group: Group,
    operation: Operation,
) -> Route {
    Route {
        method,
        path,
        group,
        operation,
    }
}

/// Every route, in the reference's order.
pub const ROUTES: &[Route] = &[
    route("GET", "/v1/config", Group::Config, Operation::GetConfig),
    route(
        "GET",
        "/v1/{prefix}/namespaces",
        Group::Namespaces,
        Operation::ListNamespaces,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces",
        Group::Namespaces,
        Operation::CreateNamespace,
    ),
    route(
        "GET",
        "/v1/{prefix}/namespaces/{namespace}",
        Group::Namespaces,
        Operation::LoadNamespace,
    ),
    route(
        "HEAD",
        "/v1/{prefix}/namespaces/{namespace}",
        Group::Namespaces,
        Operation::NamespaceExists,
    ),
    route(
        "DELETE",
        "/v1/{prefix}/namespaces/{namespace}",
        Group::Namespaces,
        Operation::DropNamespace,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/properties",
        Group::Namespaces,
        Operation::UpdateNamespaceProperties,
    ),
    route(
        "GET",
        "/v1/{prefix}/namespaces/{namespace}/tables",
        Group::Tables,
        Operation::ListTables,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/tables",
        Group::Tables,
        Operation::CreateTable,
    ),
    route(
        "GET",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
        Group::Tables,
        Operation::LoadTable,
    ),
    route(
        "GET",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
        Group::Credentials,
        Operation::LoadCredentials,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
        Group::Signing,
        Operation::SignRequest,
    ),
    route(
        "HEAD",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
        Group::Tables,
        Operation::TableExists,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
        Group::Commits,
        Operation::CommitTable,
    ),
    route(
        "DELETE",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}",
        Group::Tables,
        Operation::DropTable,
    ),
    route(
        "POST",
        "/v1/{prefix}/tables/rename",
        Group::Tables,
        Operation::RenameTable,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
        Group::Tables,
        Operation::ReportMetrics,
    ),
    route(
        "GET",
        "/v1/{prefix}/namespaces/{namespace}/views",
        Group::Tables,
        Operation::ListViews,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/register",
        Group::Tables,
        Operation::RegisterTable,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister",
        Group::Tables,
        Operation::UnregisterTable,
    ),
    route(
        "POST",
        "/v1/{prefix}/transactions/commit",
        Group::Commits,
        Operation::CommitTransaction,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/views",
        Group::Tables,
        Operation::CreateView,
    ),
    route(
        "GET",
        "/v1/{prefix}/namespaces/{namespace}/views/{view}",
        Group::Tables,
        Operation::LoadView,
    ),
    route(
        "HEAD",
        "/v1/{prefix}/namespaces/{namespace}/views/{view}",
        Group::Tables,
        Operation::ViewExists,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/views/{view}",
        Group::Tables,
        Operation::ReplaceView,
    ),
    route(
        "DELETE",
        "/v1/{prefix}/namespaces/{namespace}/views/{view}",
        Group::Tables,
        Operation::DropView,
    ),
    route(
        "POST",
        "/v1/{prefix}/views/rename",
        Group::Tables,
        Operation::RenameView,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/register-view",
        Group::Tables,
        Operation::RegisterView,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
        Group::Planning,
        Operation::PlanTableScan,
    ),
    route(
        "GET",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        Group::Planning,
        Operation::FetchPlanningResult,
    ),
    route(
        "DELETE",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        Group::Planning,
        Operation::CancelPlanning,
    ),
    route(
        "POST",
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
        Group::Planning,
        Operation::FetchScanTasks,
    ),
];

/// Whether a concrete path (relative to the base path) fits a route template, segment by
/// segment, with `{param}` matching any one non-empty segment.
pub fn matches(template: &str, path: &str) -> bool {
    let mut want = template.split('/');
    let mut have = path.split('/');
    loop {
        match (want.next(), have.next()) {
            (None, None) => return true,
            (Some(w), Some(h)) if w.starts_with('{') && w.ends_with('}') && !h.is_empty() => {}
            (Some(w), Some(h)) if w == h => {}
            _ => return false,
        }
    }
}

/// The route a request would take in a deployment serving every group.
pub fn find(method: &str, path: &str) -> Option<&'static Route> {
    ROUTES
        .iter()
        .find(|r| r.method.eq_ignore_ascii_case(method) && matches(r.path, path))
}

/// The `endpoints` list advertised by `GET /v1/config`.
pub fn advertised_endpoints() -> Vec<String> {
    ROUTES.iter().map(Route::endpoint).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn concrete_paths_find_their_route() {
        let load = find("GET", "/v1/acme/namespaces/ns/tables/t").unwrap();
        assert_eq!(load.operation, Operation::LoadTable);
        assert_eq!(
            find("POST", "/v1/acme/namespaces/ns/tables/t")
                .unwrap()
                .group,
            Group::Commits
        );
        assert_eq!(
            find("POST", "/v1/acme/tables/rename").unwrap().operation,
            Operation::RenameTable
        );
        assert!(find("GET", "/v1/acme/namespaces/ns/tables/t/extra").is_none());
        assert!(find("GET", "/v1/acme/namespaces//tables").is_none());
        assert!(find("PUT", "/v1/acme/namespaces").is_none());
    }

    #[test]
    fn thirty_two_unique_routes_each_in_one_group() {
        assert_eq!(ROUTES.len(), 32);
        let endpoints: HashSet<String> = ROUTES.iter().map(Route::endpoint).collect();
        assert_eq!(endpoints.len(), 32);
        let ops: HashSet<Operation> = ROUTES.iter().map(|r| r.operation).collect();
        assert_eq!(ops.len(), 32);
        for group in Group::ALL {
            assert!(
                ROUTES.iter().any(|r| r.group == group),
                "{group:?} has no route"
            );
        }
    }
}
