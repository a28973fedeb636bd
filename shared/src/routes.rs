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
}

impl Group {
    pub const ALL: [Group; 6] = [
        Group::Config,
        Group::Namespaces,
        Group::Tables,
        Group::Commits,
        Group::Credentials,
        Group::Signing,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Group::Config => "config",
            Group::Namespaces => "namespaces",
            Group::Tables => "tables",
            Group::Commits => "commits",
            Group::Credentials => "credentials",
            Group::Signing => "signing",
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
    fn twenty_eight_unique_routes_each_in_one_group() {
        assert_eq!(ROUTES.len(), 28);
        let endpoints: HashSet<String> = ROUTES.iter().map(Route::endpoint).collect();
        assert_eq!(endpoints.len(), 28);
        let ops: HashSet<Operation> = ROUTES.iter().map(|r| r.operation).collect();
        assert_eq!(ops.len(), 28);
        for group in Group::ALL {
            assert!(
                ROUTES.iter().any(|r| r.group == group),
                "{group:?} has no route"
            );
        }
    }
}
