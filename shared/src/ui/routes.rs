//! The web view's routes and handlers. Each page resolves the signed-in principal's org
//! context and calls the same catalog operation the API would, so authorization is the API's.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, Query, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, get, post};
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::error::{UiError, html};
use super::pages::*;
use super::session::{self, SignedIn};
use super::{BASE_PATH, UiConfig, UiState, chart, history, links};
use crate::catalog::paging::PageRequest;
use crate::catalog::{Catalog, OrgContext, display_principal};
use crate::error::CatalogError;
use crate::model::{OrgRole, Principal, Visibility};

/// The routes of the deployed HTTP API (template.yaml) that reach the `floe-ui` function, as
/// (method, path): every page and the stylesheet are `GET /ui` or `GET` under `/ui/`, sign-in
/// and sign-out `POST` under `/ui/`. API Gateway answers other methods itself.
pub const GATEWAY_ROUTES: [(&str, &str); 3] = [
    ("GET", "/ui"),
    ("GET", "/ui/{proxy+}"),
    ("POST", "/ui/{proxy+}"),
];

/// The stylesheet, in the binary: no file to deploy, no build step.
const CSS: &str = include_str!("../../templates/static/floe.css");

/// A sign-in form is one token: anything much larger is no sign-in.
const MAX_FORM_BYTES: usize = 16 * 1024;

/// Scripts of any kind are refused; styles and images only from the web view itself; forms
/// only post to it; no page can be framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

type Answer = Result<Response, UiError>;

/// The web view's routes under `/ui`, with their own logging, security headers and
/// compression; no fallback, so `floe serve` merges it beside the API's router.
pub fn router(catalog: Arc<Catalog>, config: UiConfig) -> Router {
    let state = UiState {
        catalog,
        config: Arc::new(config),
    };
    Router::new()
        .route(BASE_PATH, get(index))
        .route(&format!("{BASE_PATH}/"), get(index))
        .route(&format!("{BASE_PATH}/signin"), post(sign_in))
        .route(&format!("{BASE_PATH}/signout"), post(sign_out))
        .route(&format!("{BASE_PATH}/orgs"), get(open_org))
        .route(&format!("{BASE_PATH}/orgs/{{org}}"), get(org_page))
        .route(
            &format!("{BASE_PATH}/orgs/{{org}}/namespaces/{{namespace}}"),
            get(namespace_page),
        )
        .route(
            &format!("{BASE_PATH}/orgs/{{org}}/namespaces/{{namespace}}/tables/{{table}}"),
            get(table_page),
        )
        .route(&format!("{BASE_PATH}/static/floe.css"), get(css))
        .route(&format!("{BASE_PATH}/{{*rest}}"), any(not_found))
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(middleware::from_fn(security_headers))
        .layer(crate::http::request_log::RequestLogLayer)
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_page))
        .layer(crate::http::compression())
        .with_state(state)
}

/// The web view alone, as its Lambda function serves it: anything outside `/ui` is a 404 page.
pub fn standalone_router(catalog: Arc<Catalog>, config: UiConfig) -> Router {
    router(catalog, config).fallback(not_found)
}

/// Path parameters, percent-decoded; a malformed path is a 400 page.
struct Params(HashMap<String, String>);

impl FromRequestParts<UiState> for Params {
    type Rejection = UiError;

    async fn from_request_parts(parts: &mut Parts, state: &UiState) -> Result<Self, UiError> {
        Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map(|Path(map)| Params(map))
            .map_err(|_| UiError::BadRequest("The address is malformed.".into()))
    }
}

impl Params {
    fn get(&self, name: &str) -> Result<&str, UiError> {
        self.0
            .get(name)
            .map(String::as_str)
            .ok_or(UiError::NotFound)
    }
}

fn who(p: &Principal) -> Option<Who> {
    Some(Who {
        name: p.name.clone(),
        principal: display_principal(&p.id),
    })
}

fn crumb(label: &str, href: String) -> Crumb {
    Crumb {
        label: label.to_owned(),
        href,
    }
}

fn role_name(role: OrgRole) -> &'static str {
    match role {
        OrgRole::Read => "read",
        OrgRole::Write => "write",
        OrgRole::Admin => "admin",
    }
}

fn sign_in_page(message: Option<String>) -> Response {
    html(
        StatusCode::OK,
        &SignInPage {
            who: None,
            crumbs: vec![],
            message,
        },
    )
}

async fn index(State(s): State<UiState>, signed_in: Result<SignedIn, UiError>) -> Answer {
    let p = match signed_in {
        Ok(signed_in) => signed_in.principal,
        Err(UiError::SignIn) => return Ok(sign_in_page(None)),
        Err(e) => return Err(e),
    };
    let me = s.catalog.access.me(&p).await?;
    let orgs = me
        .org_roles
        .iter()
        .map(|(org, role)| OrgEntry {
            name: org.clone(),
            href: links::org(org),
            role: role_name(*role).into(),
        })
        .collect();
    Ok(html(
        StatusCode::OK,
        &OrgsPage {
            who: who(&p),
            crumbs: vec![],
            orgs,
            service_admin: me.service_admin,
        },
    ))
}

/// The sign-in form's `token` field.
fn form_token(body: &[u8]) -> Option<String> {
    url::form_urlencoded::parse(body)
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.trim().to_owned())
        .filter(|t| !t.is_empty())
}

async fn sign_in(State(s): State<UiState>, headers: HeaderMap, body: Bytes) -> Answer {
    session::check_same_origin(&headers)?;
    let Some(token) = form_token(&body) else {
        return Err(UiError::SignInRefused);
    };
    let opened = match s.catalog.sessions.open_session(&token).await {
        Ok(opened) => opened,
        Err(CatalogError::Unauthenticated(_)) => return Err(UiError::SignInRefused),
        Err(e) => return Err(e.into()),
    };
    let cookie = session::set_cookie(&opened.id, opened.lifetime_secs, &headers);
    Ok(see_other(BASE_PATH, Some(cookie)))
}

async fn sign_out(State(s): State<UiState>, headers: HeaderMap) -> Answer {
    session::check_same_origin(&headers)?;
    if let Some(id) = session::session_id(&headers) {
        s.catalog.sessions.close_session(&id).await?;
    }
    Ok(see_other(BASE_PATH, Some(session::clear_cookie(&headers))))
}

/// A 303 to one of our own pages, setting `cookie` when given.
fn see_other(location: &str, cookie: Option<String>) -> Response {
    let mut response = Redirect::to(location).into_response();
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn open_org(_: SignedIn, Query(query): Query<HashMap<String, String>>) -> Answer {
    match query
        .get("name")
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
    {
        Some(name) => Ok(see_other(&links::org(name), None)),
        None => Ok(see_other(BASE_PATH, None)),
    }
}

fn visibility(v: Visibility) -> &'static str {
    match v {
        Visibility::Private => "private",
        Visibility::AuthenticatedPublic => "authenticated public",
    }
}

/// The signed-in principal inside the org the path names, its standing resolved.
async fn in_org(s: &UiState, p: &Principal, params: &Params) -> Result<OrgContext, UiError> {
    Ok(s.catalog
        .sessions
        .org_context(p, params.get("org")?)
        .await?)
}

async fn org_page(State(s): State<UiState>, signed_in: SignedIn, params: Params) -> Answer {
    let p = signed_in.principal;
    let ctx = in_org(&s, &p, &params).await?;
    let org = ctx.org.name.clone();
    let namespaces = s
        .catalog
        .browse
        .namespace_summaries(&ctx)
        .await?
        .into_iter()
        .map(|ns| NamespaceEntry {
            href: links::namespace(&org, &ns.name),
            visibility: visibility(ns.visibility),
            bucket: ns.bucket,
            description: ns.description.unwrap_or_default(),
            tables: ns.table_count,
            name: ns.name,
        })
        .collect();
    Ok(html(
        StatusCode::OK,
        &OrgPage {
            who: who(&p),
            crumbs: vec![crumb(&org, links::org(&org))],
            org,
            namespaces,
        },
    ))
}

async fn namespace_page(State(s): State<UiState>, signed_in: SignedIn, params: Params) -> Answer {
    let p = signed_in.principal;
    let ctx = in_org(&s, &p, &params).await?;
    let org = ctx.org.name.clone();
    let namespace = params.get("namespace")?;
    let listed = s
        .catalog
        .tables
        .list_tables(&ctx, namespace, &PageRequest::default())
        .await?;
    let tables = listed
        .identifiers
        .into_iter()
        .map(|t| TableEntry {
            href: links::table(&org, namespace, &t.name),
            name: t.name,
        })
        .collect();
    let listed = s
        .catalog
        .views
        .list_views(&ctx, namespace, &PageRequest::default())
        .await?;
    let mut views = Vec::with_capacity(listed.identifiers.len());
    for view in listed.identifiers {
        let loaded = s
            .catalog
            .views
            .load_view(&ctx, namespace, &view.name)
            .await?;
        views.push(ViewEntry {
            representations: current_sql(&loaded.metadata),
            name: view.name,
        });
    }
    Ok(html(
        StatusCode::OK,
        &NamespacePage {
            who: who(&p),
            crumbs: vec![
                crumb(&org, links::org(&org)),
                crumb(namespace, links::namespace(&org, namespace)),
            ],
            namespace: namespace.to_owned(),
            tables,
            views,
        },
    ))
}

/// `(dialect, sql)` of each representation of a view's current version.
fn current_sql(metadata: &[u8]) -> Vec<(String, String)> {
    let Ok(document) = serde_json::from_slice::<serde_json::Value>(metadata) else {
        return vec![];
    };
    let current = document["current-version-id"].as_i64();
    document["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["version-id"].as_i64() == current)
        .flat_map(|v| v["representations"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["dialect"].as_str().unwrap_or_default().to_owned(),
                r["sql"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn page_number(query: &HashMap<String, String>) -> Result<usize, UiError> {
    match query.get("page") {
        None => Ok(1),
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| UiError::BadRequest("The page must be a number from 1.".into())),
    }
}

async fn table_page(
    State(s): State<UiState>,
    signed_in: SignedIn,
    params: Params,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let p = signed_in.principal;
    let ctx = in_org(&s, &p, &params).await?;
    let org = ctx.org.name.clone();
    let namespace = params.get("namespace")?;
    let table = params.get("table")?;
    let page = page_number(&query)?;
    let metadata = s
        .catalog
        .browse
        .table_metadata(&ctx, namespace, table)
        .await?;

    let all = history::newest_first(&metadata);
    let history = history::page(
        &all,
        metadata.current_snapshot_id(),
        page,
        s.config.repo_url.as_ref(),
    )
    .map_err(|_| UiError::NotFound)?;
    let chart = chart::chart(&all);

    let schema = metadata.current_schema();
    let column = |id: i32| {
        schema
            .field_by_id(id)
            .map_or_else(|| format!("#{id}"), |f| f.name.clone())
    };
    let fields = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| FieldRow {
            id: f.id,
            name: f.name.clone(),
            field_type: f.field_type.to_string(),
            required: f.required,
            doc: f.doc.clone().unwrap_or_default(),
        })
        .collect();
    let spec = metadata.default_partition_spec();
    let partition = spec
        .fields()
        .iter()
        .map(|f| PartitionRow {
            name: f.name.clone(),
            source: column(f.source_id),
            transform: f.transform.to_string(),
        })
        .collect();
    let order = metadata.default_sort_order();
    let sort = order
        .fields
        .iter()
        .map(|f| SortRow {
            source: column(f.source_id),
            transform: f.transform.to_string(),
            direction: f.direction.to_string(),
            null_order: f.null_order.to_string(),
        })
        .collect();
    let mut properties: Vec<(String, String)> = metadata
        .properties()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    properties.sort();

    let maintenance = maintenance_view(
        s.catalog
            .tables
            .maintenance_settings(&ctx, namespace, table)
            .await?,
    );

    let href = |n: usize| links::table_page(&org, namespace, table, n);
    let (current, pages) = (history.page, history.pages);
    let page_view = TablePage {
        who: who(&p),
        crumbs: vec![
            crumb(&org, links::org(&org)),
            crumb(namespace, links::namespace(&org, namespace)),
            crumb(table, links::table(&org, namespace, table)),
        ],
        table: table.to_owned(),
        location: metadata.location().to_owned(),
        format_version: (metadata.format_version() as u8).to_string(),
        uuid: metadata.uuid().to_string(),
        last_updated: history::format_ms(metadata.last_updated_ms()),
        schema_id: schema.schema_id(),
        fields,
        spec_id: spec.spec_id(),
        partition,
        order_id: order.order_id,
        sort,
        properties,
        maintenance,
        chart,
        prev_href: (current > 1).then(|| href(current - 1)),
        next_href: (current < pages).then(|| href(current + 1)),
        first_href: (current > 2).then(|| href(1)),
        last_href: (current + 1 < pages).then(|| href(pages)),
        history,
    };
    Ok(html(StatusCode::OK, &page_view))
}

/// What the page says of a table's maintenance: its compaction policy and its last run.
fn maintenance_view(
    settings: crate::catalog::tables::maintenance::MaintenanceSettings,
) -> MaintenanceView {
    let compaction = match &settings.policy {
        Some(policy) if policy.compaction.enabled => format!(
            "on, towards {} MiB files",
            policy.compaction.target_file_size_bytes / (1024 * 1024)
        ),
        Some(_) => "off".to_owned(),
        None => "a maintenance setting cannot be read".to_owned(),
    };
    let never = || "never".to_owned();
    let state = settings.last_run.as_ref();
    MaintenanceView {
        compaction,
        last_run: state
            .filter(|s| s.last_run_ms > 0)
            .map_or_else(never, |s| history::format_ms(s.last_run_ms as i64)),
        next_due: state.and_then(|s| s.next_due_ms).map_or_else(
            || "when the schedule next finds it".to_owned(),
            |ms| history::format_ms(ms as i64),
        ),
        last_error: state.and_then(|s| s.last_error.clone()),
        last_compaction: state.and_then(|s| s.last_compaction.as_ref()).map(|c| {
            format!(
                "{} files ({:.1} MiB) into {} ({:.1} MiB)",
                c.files_rewritten,
                c.bytes_rewritten as f64 / 1048576.0,
                c.files_written,
                c.bytes_written as f64 / 1048576.0
            )
        }),
    }
}

async fn css() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
        ],
        CSS,
    )
        .into_response()
}

async fn not_found() -> UiError {
    UiError::NotFound
}

/// Headers of every web view answer: the CSP, no sniffing, referrers only to the web view
/// itself (table names stay off other sites' logs), no framing, and no caching of pages (which show what one principal may
/// see).
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

fn panic_page(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("web view handler panicked");
    UiError::Catalog(CatalogError::Internal("panic".into())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_token_is_read_and_trimmed() {
        assert_eq!(form_token(b"token=ema_a%2Bb+").as_deref(), Some("ema_a+b"));
        assert_eq!(form_token(b"other=1"), None);
        assert_eq!(form_token(b"token="), None);
    }
}
