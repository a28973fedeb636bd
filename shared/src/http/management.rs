//! The management API: JSON under `/api/v1`, beside the Iceberg routes, with the same
//! ErrorModel. Principals are written `user:<sub>`, `team:<name>` and `api_client:<id>`.
//! `docs/management-api.yaml` documents this surface, and a test keeps the two in step.

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, State};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use http::StatusCode;
use http::request::Parts;
use serde::Deserialize;

use super::AppState;
use super::extract::{Authenticated, JsonBody, Params, QueryMap};
use crate::authz::Action;
use crate::catalog::tables::{MaintainOptions, RestoreRequest};
use crate::catalog::{BucketRequest, DeleteOptions, NamespacePatch, OrgContext, display_principal};
use crate::error::CatalogError;
use crate::model::OrgRole;

/// Base path of every management route.
pub const MANAGEMENT_BASE_PATH: &str = "/api/v1";

/// One management route: method and path relative to the base path, and its handler.
#[derive(Clone, Copy)]
pub struct ManagementRoute {
    pub method: &'static str,
    pub path: &'static str,
    handler: fn() -> MethodRouter<AppState>,
}

impl std::fmt::Debug for ManagementRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// A route, written once: its method, its path and the handler that serves it.
macro_rules! route {
    ($method:ident $path:literal => $handler:ident) => {
        ManagementRoute {
            method: stringify!($method),
            path: $path,
            handler: || axum::routing::on(axum::routing::MethodFilter::$method, $handler),
        }
    };
}

/// Every management route, in the order the API documentation lists them. The router, the
/// management function, template.yaml, the IAM test and the events/ files all come from (or
/// are tested against) this one table.
pub const MANAGEMENT_ROUTES: &[ManagementRoute] = &[
    route!(POST "/orgs" => create_org),
    route!(PATCH "/orgs/{org}" => update_org),
    route!(POST "/orgs/{org}/api-clients" => create_api_client),
    route!(GET "/orgs/{org}/api-clients" => list_api_clients),
    route!(DELETE "/orgs/{org}/api-clients/{id}" => delete_api_client),
    route!(PUT "/orgs/{org}/members/{principal}" => put_member),
    route!(POST "/orgs/{org}/teams" => create_team),
    route!(GET "/orgs/{org}/teams/{team}" => get_team),
    route!(PUT "/orgs/{org}/teams/{team}/members/{principal}" => put_team_member),
    route!(DELETE "/orgs/{org}/teams/{team}/members/{principal}" => delete_team_member),
    route!(GET "/orgs/{org}/namespaces" => list_namespaces),
    route!(GET "/orgs/{org}/namespaces/{namespace}" => get_namespace),
    route!(PATCH "/orgs/{org}/namespaces/{namespace}" => patch_namespace),
    route!(DELETE "/orgs/{org}/namespaces/{namespace}" => delete_namespace),
    route!(POST "/orgs/{org}/namespaces/{namespace}/restore" => restore_namespace),
    route!(GET "/orgs/{org}/namespaces/{namespace}/deleted-tables" => list_dropped_tables),
    route!(POST "/orgs/{org}/namespaces/{namespace}/deleted-tables/{table_uuid}/restore" => restore_dropped_table),
    route!(DELETE "/orgs/{org}/namespaces/{namespace}/deleted-tables/{table_uuid}" => purge_dropped_table),
    route!(POST "/orgs/{org}/namespaces/{namespace}/tables/{table}/maintain" => maintain_table),
    route!(GET "/orgs/{org}/namespaces/{namespace}/tables/{table}/maintenance" => table_maintenance),
    route!(GET "/orgs/{org}/namespaces/{namespace}/grants" => list_grants),
    route!(PUT "/orgs/{org}/namespaces/{namespace}/grants" => put_grant),
    route!(DELETE "/orgs/{org}/namespaces/{namespace}/grants" => delete_grant),
    route!(GET "/me" => me),
    route!(POST "/orgs/{org}/buckets" => create_bucket),
    route!(GET "/orgs/{org}/buckets" => list_buckets),
    route!(GET "/orgs/{org}/buckets/{nickname}" => get_bucket),
    route!(DELETE "/orgs/{org}/buckets/{nickname}" => delete_bucket),
    route!(PUT "/orgs/{org}/default-bucket" => set_default_bucket),
    route!(GET "/orgs/{org}/events" => list_events),
];

impl ManagementRoute {
    /// The route as `METHOD /api/v1/...`, the form of an API Gateway route key.
    pub fn endpoint(&self) -> String {
        format!("{} {MANAGEMENT_BASE_PATH}{}", self.method, self.path)
    }
}

/// The management route a request takes; `path` is relative to the base path.
pub fn find(method: &str, path: &str) -> Option<&'static ManagementRoute> {
    MANAGEMENT_ROUTES
        .iter()
        .find(|r| r.method.eq_ignore_ascii_case(method) && crate::routes::matches(r.path, path))
}

/// The management routes, to be merged into a router that carries the state and the layers.
pub fn routes() -> Router<AppState> {
    routes_of(MANAGEMENT_ROUTES)
}

/// A router of `table`'s routes: each entry's handler on its method and path.
fn routes_of<'a>(table: impl IntoIterator<Item = &'a ManagementRoute>) -> Router<AppState> {
    let mut by_path: std::collections::BTreeMap<&str, MethodRouter<AppState>> = Default::default();
    for route in table {
        let added = (route.handler)();
        let merged = match by_path.remove(route.path) {
            Some(existing) => existing.merge(added),
            None => added,
        };
        by_path.insert(route.path, merged);
    }
    by_path
        .into_iter()
        .fold(Router::new(), |router, (path, methods)| {
            router.route(&format!("{MANAGEMENT_BASE_PATH}{path}"), methods)
        })
}

type Answer = Result<Response, CatalogError>;

/// The org a management route names and the caller's access in it: 401 without a valid token,
/// 404 for an unknown org, the blanket 403 for a caller who sees nothing there.
struct InOrg(OrgContext);

impl FromRequestParts<AppState> for InOrg {
    type Rejection = CatalogError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, CatalogError> {
        let Authenticated(principal) = Authenticated::from_request_parts(parts, state).await?;
        let params = Params::from_request_parts(parts, state).await?;
        let ctx = state
            .catalog
            .sessions
            .management_context(&principal, params.get("org")?)
            .await?;
        Ok(InOrg(ctx))
    }
}
type PathMap = Params;

fn param<'a>(path: &'a PathMap, name: &str) -> Result<&'a str, CatalogError> {
    path.get(name)
}

fn created(body: impl serde::Serialize) -> Answer {
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

fn ok(body: impl serde::Serialize) -> Answer {
    Ok(Json(body).into_response())
}

fn no_content() -> Answer {
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A role as the API writes it; `none` ends a membership.
fn role(name: &str) -> Result<Option<OrgRole>, CatalogError> {
    match name {
        "read" => Ok(Some(OrgRole::Read)),
        "write" => Ok(Some(OrgRole::Write)),
        "admin" => Ok(Some(OrgRole::Admin)),
        "none" => Ok(None),
        other => Err(CatalogError::BadRequest(format!(
            "Unknown role '{other}': use read, write, admin or none"
        ))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameBody {
    name: String,
}

async fn create_org(
    State(s): State<AppState>,
    Authenticated(p): Authenticated,
    JsonBody(body): JsonBody<NameBody>,
) -> Answer {
    let org = s.catalog.access.create_org(&p, &body.name).await?;
    created(serde_json::json!({"name": org.name, "iceberg_enabled": org.iceberg_enabled}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrgPatch {
    iceberg_enabled: bool,
}

async fn update_org(
    State(s): State<AppState>,
    Authenticated(p): Authenticated,
    path: PathMap,
    JsonBody(body): JsonBody<OrgPatch>,
) -> Answer {
    let org = s
        .catalog
        .access
        .set_iceberg_enabled(&p, param(&path, "org")?, body.iceberg_enabled)
        .await?;
    ok(serde_json::json!({"name": org.name, "iceberg_enabled": org.iceberg_enabled}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApiClientBody {
    name: String,
    #[serde(default)]
    email: Option<String>,
    role: String,
}

async fn create_api_client(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    JsonBody(body): JsonBody<ApiClientBody>,
) -> Answer {
    // `none`: a grant-only client, made without an org role in one call.
    let role = role(&body.role)?;
    created(
        s.catalog
            .access
            .create_api_client(&ctx, &body.name, body.email, role)
            .await?,
    )
}

async fn list_api_clients(State(s): State<AppState>, InOrg(ctx): InOrg) -> Answer {
    ok(serde_json::json!({"api_clients": s.catalog.access.list_api_clients(&ctx).await?}))
}

async fn delete_api_client(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    s.catalog
        .access
        .delete_api_client(&ctx, param(&path, "id")?)
        .await?;
    no_content()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleBody {
    role: String,
}

async fn put_member(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
    JsonBody(body): JsonBody<RoleBody>,
) -> Answer {
    let role = role(&body.role)?;
    s.catalog
        .access
        .set_member(&ctx, param(&path, "principal")?, role)
        .await?;
    no_content()
}

async fn create_team(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    JsonBody(body): JsonBody<NameBody>,
) -> Answer {
    s.catalog.access.create_team(&ctx, &body.name).await?;
    created(serde_json::json!({"name": body.name, "members": []}))
}

async fn get_team(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    ok(s.catalog.access.team(&ctx, param(&path, "team")?).await?)
}

async fn set_team_member(s: AppState, ctx: OrgContext, path: PathMap, member: bool) -> Answer {
    s.catalog
        .access
        .set_team_member(
            &ctx,
            param(&path, "team")?,
            param(&path, "principal")?,
            member,
        )
        .await?;
    no_content()
}

async fn put_team_member(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    set_team_member(s, ctx, path, true).await
}

async fn delete_team_member(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    set_team_member(s, ctx, path, false).await
}

async fn list_namespaces(State(s): State<AppState>, InOrg(ctx): InOrg, query: QueryMap) -> Answer {
    let deleted = query.flag("deleted")?;
    ok(serde_json::json!({
        "namespaces": s.catalog.namespaces.namespace_statuses(&ctx, deleted).await?
    }))
}

async fn delete_namespace(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
    query: QueryMap,
) -> Answer {
    let options = DeleteOptions {
        immediate: query.flag("immediate")?,
        retain_data: query.flag("retain_data")?,
    };
    s.catalog
        .namespaces
        .delete_namespace(&ctx, param(&path, "namespace")?, options)
        .await?;
    no_content()
}

async fn restore_namespace(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    ok(s.catalog
        .namespaces
        .restore_namespace(&ctx, param(&path, "namespace")?)
        .await?)
}

async fn list_dropped_tables(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
) -> Answer {
    ok(serde_json::json!({
        "tables": s.catalog.tables.dropped_tables(&ctx, param(&path, "namespace")?).await?
    }))
}

async fn restore_dropped_table(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
    body: Bytes,
) -> Answer {
    // The body is optional: none (or an empty one) restores under the dropped name.
    let request: RestoreRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RestoreRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| CatalogError::BadRequest(format!("Malformed request body: {e}")))?
    };
    ok(s.catalog
        .tables
        .restore_table(
            &ctx,
            param(&path, "namespace")?,
            param(&path, "table_uuid")?,
            request,
        )
        .await?)
}

async fn purge_dropped_table(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
) -> Answer {
    s.catalog
        .tables
        .purge_dropped_now(
            &ctx,
            param(&path, "namespace")?,
            param(&path, "table_uuid")?,
        )
        .await?;
    no_content()
}

async fn maintain_table(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
    query: QueryMap,
) -> Answer {
    let options = MaintainOptions {
        dry_run: query.flag("dry_run")?,
        verbose: query.flag("verbose")?,
    };
    ok(s.catalog
        .tables
        .maintain_table(
            &ctx,
            param(&path, "namespace")?,
            param(&path, "table")?,
            options,
        )
        .await?)
}

async fn table_maintenance(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    ok(s.catalog
        .tables
        .maintenance_settings(&ctx, param(&path, "namespace")?, param(&path, "table")?)
        .await?)
}

async fn get_namespace(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    ok(s.catalog
        .access
        .namespace_settings(&ctx, param(&path, "namespace")?)
        .await?)
}

async fn patch_namespace(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
    JsonBody(body): JsonBody<NamespacePatch>,
) -> Answer {
    ok(s.catalog
        .access
        .patch_namespace(&ctx, param(&path, "namespace")?, body)
        .await?)
}

async fn list_grants(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    let grants: Vec<serde_json::Value> = s
        .catalog
        .access
        .list_grants(&ctx, param(&path, "namespace")?)
        .await?
        .into_iter()
        .map(|g| {
            serde_json::json!({
                "principal": display_principal(&g.principal),
                "action": g.action,
                "table": g.table,
            })
        })
        .collect();
    ok(serde_json::json!({ "grants": grants }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    principal: String,
    action: Action,
    #[serde(default)]
    table: Option<String>,
}

async fn put_grant(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
    JsonBody(body): JsonBody<GrantBody>,
) -> Answer {
    s.catalog
        .access
        .put_grant(
            &ctx,
            param(&path, "namespace")?,
            &body.principal,
            body.table.as_deref(),
            body.action,
        )
        .await?;
    no_content()
}

async fn delete_grant(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    path: PathMap,
    query: QueryMap,
) -> Answer {
    let principal = query.get("principal").ok_or_else(|| {
        CatalogError::BadRequest("Name the grant's principal: ?principal=...".into())
    })?;
    s.catalog
        .access
        .delete_grant(
            &ctx,
            param(&path, "namespace")?,
            principal,
            query.get("table"),
        )
        .await?;
    no_content()
}

async fn me(State(s): State<AppState>, Authenticated(p): Authenticated) -> Answer {
    ok(s.catalog.access.me(&p).await?)
}

async fn create_bucket(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    JsonBody(body): JsonBody<BucketRequest>,
) -> Answer {
    created(s.catalog.buckets.create_bucket(&ctx, body).await?)
}

async fn list_buckets(State(s): State<AppState>, InOrg(ctx): InOrg) -> Answer {
    ok(serde_json::json!({"buckets": s.catalog.buckets.list_buckets(&ctx).await?}))
}

async fn get_bucket(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    ok(s.catalog
        .buckets
        .get_bucket(&ctx, param(&path, "nickname")?)
        .await?)
}

async fn delete_bucket(State(s): State<AppState>, InOrg(ctx): InOrg, path: PathMap) -> Answer {
    s.catalog
        .buckets
        .delete_bucket(&ctx, param(&path, "nickname")?)
        .await?;
    no_content()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NicknameBody {
    nickname: String,
}

async fn set_default_bucket(
    State(s): State<AppState>,
    InOrg(ctx): InOrg,
    JsonBody(body): JsonBody<NicknameBody>,
) -> Answer {
    s.catalog
        .buckets
        .set_default_bucket(&ctx, &body.nickname)
        .await?;
    no_content()
}

async fn list_events(State(s): State<AppState>, InOrg(ctx): InOrg, query: QueryMap) -> Answer {
    let limit = match query.get("limit") {
        None => crate::catalog::events::DEFAULT_LIMIT,
        Some(text) => text
            .parse()
            .map_err(|_| CatalogError::BadRequest(format!("Invalid limit: '{text}'")))?,
    };
    ok(s.catalog
        .events
        .list_events(&ctx, query.get("after"), limit)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// Adding a management route is one entry in the table and its handler: nothing else to
    /// write, nothing to keep in step.
    #[tokio::test]
    async fn a_route_is_one_table_entry_and_its_handler() {
        async fn ping(InOrg(ctx): InOrg) -> Answer {
            ok(serde_json::json!({"org": ctx.org.name}))
        }
        const ADDED: ManagementRoute = route!(GET "/orgs/{org}/ping" => ping);

        let dir = tempfile::tempdir().unwrap();
        let token = crate::auth::generate_token();
        let (catalog, _) = crate::deployment::open(dir.path(), "demo", Some(&token))
            .await
            .unwrap();
        let state = AppState { catalog };
        let router = routes_of(MANAGEMENT_ROUTES.iter().chain([&ADDED])).with_state(state);
        let request = http::Request::get(format!("{MANAGEMENT_BASE_PATH}/orgs/demo/ping"))
            .header("authorization", format!("Bearer {token}"))
            .body(axum::body::Body::empty())
            .unwrap();
        let answer = router.clone().oneshot(request).await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        let body = axum::body::to_bytes(answer.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], br#"{"org":"demo"}"#);
        // The table's own routes are served beside it.
        let me = http::Request::get(format!("{MANAGEMENT_BASE_PATH}/me"))
            .header("authorization", format!("Bearer {token}"))
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(router.oneshot(me).await.unwrap().status(), StatusCode::OK);
    }

    #[test]
    fn every_route_is_written_once() {
        let mut seen = std::collections::BTreeSet::new();
        for route in MANAGEMENT_ROUTES {
            assert!(
                seen.insert((route.method, route.path)),
                "{route:?} is in the table twice"
            );
        }
    }
}
