//! Thin handlers: parse the request, call one catalog operation, render the answer.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;

use super::AppState;
use super::error::{ErrorModel, IcebergErrorResponse};
use super::extract::{Authenticated, Caller, JsonBody, Params, QueryMap};
use crate::catalog::TableRequestOptions;
use crate::catalog::paging::PageRequest;
use crate::error::CatalogError;
use crate::types::{
    CreateNamespaceRequest, CreateTableRequest, RegisterTableRequest, RenameTableRequest,
    UpdateNamespacePropertiesRequest,
};

type Answer = Result<Response, CatalogError>;

fn page(query: &QueryMap) -> Result<PageRequest, CatalogError> {
    PageRequest::parse(query.get("pageToken"), query.get("pageSize"))
}

pub(super) fn table_options(
    headers: &HeaderMap,
    query: &QueryMap,
) -> Result<TableRequestOptions, CatalogError> {
    let asked = |wanted: &str| {
        headers
            .get_all("x-iceberg-access-delegation")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|mode| mode.trim().eq_ignore_ascii_case(wanted))
    };
    let only_referenced = match query.get("snapshots") {
        None | Some("all") => false,
        Some("refs") => true,
        Some(other) => {
            return Err(CatalogError::BadRequest(format!(
                "Invalid snapshots mode '{}': expected all or refs",
                other.escape_debug()
            )));
        }
    };
    Ok(TableRequestOptions {
        vend_credentials: asked("vended-credentials"),
        remote_signing: asked("remote-signing"),
        only_referenced_snapshots: only_referenced,
    })
}

/// A LoadTableResult as a JSON response, without re-serializing its metadata.
/// A table answer, compressed as the client asks around its document's cached compressed form
/// (see [`crate::encoding`]); plain answers go through the compression layer as before.
pub(super) async fn table_response(
    s: &AppState,
    headers: &HeaderMap,
    answer: &(dyn crate::types::TableAnswer + Sync),
) -> Response {
    let (prefix, suffix) = answer.envelope();
    let size = prefix.len() + answer.metadata().len() + suffix.len();
    let encoding = crate::encoding::Encoding::negotiate(headers).filter(|_| {
        size >= usize::from(super::MIN_COMPRESSED_BYTES)
            && !s.catalog.tables.baselines().compress_per_request()
    });
    if let Some(encoding) = encoding {
        let compressed = match s.catalog.tables.compressed_metadata(answer, encoding).await {
            Ok(segment) => crate::encoding::assemble(&prefix, &segment, &suffix, encoding)
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match compressed {
            Ok(body) => {
                return (
                    [
                        (http::header::CONTENT_TYPE, "application/json"),
                        (http::header::ETAG, answer.etag()),
                        (http::header::CONTENT_ENCODING, encoding.header_value()),
                        (http::header::VARY, "accept-encoding"),
                    ],
                    body,
                )
                    .into_response();
            }
            // The compression layer still compresses the plain answer.
            Err(error) => tracing::warn!(error, "answer not compressed from the cache"),
        }
    }
    let body = match answer.whole() {
        Some(whole) => axum::body::Body::from(whole),
        None => axum::body::Body::new(super::parts_body::PartsBody::new([
            prefix,
            answer.metadata().clone(),
            suffix,
        ])),
    };
    (
        [
            (http::header::CONTENT_TYPE, "application/json"),
            (http::header::ETAG, answer.etag()),
        ],
        body,
    )
        .into_response()
}

/// Whether `If-None-Match` names the current answer (weak comparison, as RFC 9110 asks of it;
/// `*` names any).
fn client_has(headers: &HeaderMap, etag: &str) -> bool {
    let bare = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    headers
        .get_all(http::header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == "*" || bare(tag) == bare(etag))
}

/// A JSON body built by the catalog (spliced, not serialized here).
pub(super) fn json_bytes(body: Vec<u8>) -> Response {
    ([(http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

pub async fn get_config(
    State(s): State<AppState>,
    Authenticated(p): Authenticated,
    q: QueryMap,
) -> Answer {
    Ok(Json(s.catalog.config.get_config(&p, q.get("warehouse")).await?).into_response())
}

pub async fn list_namespaces(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    q: QueryMap,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let page = page(&q)?;
    Ok(Json(
        s.catalog
            .namespaces
            .list_namespaces(&ctx, q.get("parent"), &page)
            .await?,
    )
    .into_response())
}

pub async fn create_namespace(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<CreateNamespaceRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    Ok(Json(s.catalog.namespaces.create_namespace(&ctx, body).await?).into_response())
}

pub async fn load_namespace(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    Ok(Json(
        s.catalog
            .namespaces
            .load_namespace(&ctx, &params.namespace()?)
            .await?,
    )
    .into_response())
}

pub async fn namespace_exists(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    s.catalog
        .namespaces
        .namespace_exists(&ctx, &params.namespace()?)
        .await?;
    Ok(no_content())
}

pub async fn drop_namespace(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    s.catalog
        .namespaces
        .drop_namespace(&ctx, &params.namespace()?)
        .await?;
    Ok(no_content())
}

pub async fn update_namespace_properties(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<UpdateNamespacePropertiesRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let answer = s
        .catalog
        .namespaces
        .update_namespace_properties(&ctx, &params.namespace()?, body)
        .await?;
    Ok(Json(answer).into_response())
}

pub async fn list_tables(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    q: QueryMap,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let page = page(&q)?;
    Ok(Json(
        s.catalog
            .tables
            .list_tables(&ctx, &params.namespace()?, &page)
            .await?,
    )
    .into_response())
}

pub async fn list_views(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    q: QueryMap,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let page = page(&q)?;
    Ok(Json(
        s.catalog
            .views
            .list_views(&ctx, &params.namespace()?, &page)
            .await?,
    )
    .into_response())
}

pub async fn create_view(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<Value>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let created = s
        .catalog
        .views
        .create_view(&ctx, &params.namespace()?, body)
        .await?;
    Ok(json_bytes(created.to_json()))
}

pub async fn load_view(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, view) = params.view()?;
    let loaded = s.catalog.views.load_view(&ctx, &ns, &view).await?;
    Ok(json_bytes(loaded.to_json()))
}

pub async fn view_exists(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, view) = params.view()?;
    s.catalog.views.view_exists(&ctx, &ns, &view).await?;
    Ok(no_content())
}

pub async fn replace_view(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<Value>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, view) = params.view()?;
    let replaced = s.catalog.views.replace_view(&ctx, &ns, &view, body).await?;
    Ok(json_bytes(replaced.to_json()))
}

pub async fn drop_view(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, view) = params.view()?;
    s.catalog.views.drop_view(&ctx, &ns, &view).await?;
    Ok(no_content())
}

pub async fn rename_view(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<RenameTableRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    s.catalog.views.rename_view(&ctx, body).await?;
    Ok(no_content())
}

pub async fn register_view(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<Value>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let registered = s
        .catalog
        .views
        .register_view(&ctx, &params.namespace()?, body)
        .await?;
    Ok(json_bytes(registered.to_json()))
}

pub async fn create_table(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    headers: HeaderMap,
    q: QueryMap,
    JsonBody(body): JsonBody<CreateTableRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let options = table_options(&headers, &q)?;
    let created = s
        .catalog
        .tables
        .create_table(&ctx, &params.namespace()?, body, options)
        .await?;
    Ok(table_response(&s, &headers, &created).await)
}

pub async fn register_table(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    headers: HeaderMap,
    q: QueryMap,
    JsonBody(body): JsonBody<RegisterTableRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let options = table_options(&headers, &q)?;
    let registered = s
        .catalog
        .tables
        .register_table(&ctx, &params.namespace()?, body, options)
        .await?;
    Ok(table_response(&s, &headers, &registered).await)
}

pub async fn commit_transaction(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<Value>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    s.catalog.tables.commit_transaction(&ctx, body).await?;
    Ok(no_content())
}

pub async fn unregister_table(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let result = s.catalog.tables.unregister_table(&ctx, &ns, &table).await?;
    Ok(json_bytes(result.to_json()))
}

/// The request is taken whole, last, for its headers: a `HeaderMap` argument would copy them.
pub async fn load_table(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    q: QueryMap,
    request: axum::extract::Request,
) -> Answer {
    let headers = request.headers();
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let options = table_options(headers, &q)?;
    let result = s
        .catalog
        .tables
        .load_table(&ctx, &ns, &table, options)
        .await?;
    let etag = &result.result().etag;
    if client_has(headers, etag) {
        // Unchanged: same metadata, same mode, same credentials; nothing to send.
        return Ok((
            StatusCode::NOT_MODIFIED,
            [(http::header::ETAG, etag.as_str())],
        )
            .into_response());
    }
    Ok(table_response(&s, headers, &*result).await)
}

pub async fn table_exists(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    s.catalog.tables.table_exists(&ctx, &ns, &table).await?;
    Ok(no_content())
}

pub async fn load_credentials(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    q: QueryMap,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let plan_id = q.get("planId");
    let answer = s
        .catalog
        .tables
        .load_credentials(&ctx, &ns, &table, plan_id)
        .await?;
    Ok(Json(answer).into_response())
}

pub async fn plan_table_scan(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    headers: HeaderMap,
    JsonBody(body): JsonBody<crate::catalog::tables::PlanTableScanRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let options = table_options(&headers, &QueryMap::default())?;
    let plan = s
        .catalog
        .tables
        .plan_table_scan(&ctx, &ns, &table, body, options)
        .await?;
    Ok(Json(plan).into_response())
}

pub async fn fetch_planning_result(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    headers: HeaderMap,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let plan_id = params.plan_id()?;
    let options = table_options(&headers, &QueryMap::default())?;
    let plan = s
        .catalog
        .tables
        .fetch_planning_result(&ctx, &ns, &table, &plan_id, options)
        .await?;
    Ok(Json(plan).into_response())
}

pub async fn cancel_planning(State(s): State<AppState>, caller: Caller, params: Params) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let plan_id = params.plan_id()?;
    s.catalog
        .tables
        .cancel_planning(&ctx, &ns, &table, &plan_id)
        .await?;
    Ok(no_content())
}

pub async fn fetch_scan_tasks(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<crate::catalog::tables::FetchScanTasksRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let tasks = s
        .catalog
        .tables
        .fetch_scan_tasks(&ctx, &ns, &table, body)
        .await?;
    Ok(Json(tasks).into_response())
}

pub async fn sign_request(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<crate::signing::RemoteSignRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let signed = s
        .catalog
        .tables
        .sign_request(&ctx, &ns, &table, body)
        .await?;
    // A signature is for one request at one time: engines must not reuse it.
    Ok(([(http::header::CACHE_CONTROL, "no-cache")], Json(signed)).into_response())
}

pub async fn commit_table(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    headers: HeaderMap,
    JsonBody(body): JsonBody<Value>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    let committed = s
        .catalog
        .tables
        .commit_table(&ctx, &ns, &table, body)
        .await?;
    Ok(table_response(&s, &headers, &committed).await)
}

pub async fn drop_table(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    q: QueryMap,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    // The table stays recoverable either way; purgeRequested has its files deleted when the
    // recovery period ends even where the namespace keeps dropped tables' data.
    let purge = q.flag("purgeRequested")?;
    s.catalog
        .tables
        .drop_table(&ctx, &ns, &table, purge)
        .await?;
    Ok(no_content())
}

pub async fn rename_table(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(body): JsonBody<RenameTableRequest>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    s.catalog.tables.rename_table(&ctx, body).await?;
    Ok(no_content())
}

pub async fn report_metrics(
    State(s): State<AppState>,
    caller: Caller,
    params: Params,
    JsonBody(_report): JsonBody<Value>,
) -> Answer {
    let ctx = caller.in_org(&s, &params).await?;
    let (ns, table) = params.table()?;
    s.catalog.tables.report_metrics(&ctx, &ns, &table).await?;
    Ok(no_content())
}

/// Spec routes Floe does not serve get a precise answer; anything else is 404.
pub async fn unknown_route(method: Method, uri: Uri) -> CatalogError {
    let path = uri.path();
    if let Some(elsewhere) = served_elsewhere(&method, path) {
        return elsewhere;
    }
    if path.ends_with("/v1/oauth/tokens") {
        return CatalogError::BadRequest(
            "The OAuth2 token endpoint is not supported: configure the client with a static bearer token".into(),
        );
    }
    let unsupported = [
        // The legacy catalog-wide signer (`/v1/aws/s3/sign`); tables sign at their own route.
        "/sign",
        "/functions",
    ];
    if path.starts_with(super::BASE_PATH) && unsupported.iter().any(|u| path.contains(u)) {
        return CatalogError::Unsupported(format!(
            "{method} {path} is not supported by this catalog"
        ));
    }
    CatalogError::NotFound(format!("No route for {method} {path}"))
}

/// The 404 of a route of another endpoint group, which this function does not serve.
fn served_elsewhere(method: &Method, path: &str) -> Option<CatalogError> {
    let relative = path.strip_prefix(super::BASE_PATH).unwrap_or(path);
    crate::routes::find(method.as_str(), relative)
        .map(|_| CatalogError::NotFound(format!("No route for {method} {path} in this function")))
}

pub async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let path = uri.path();
    if let Some(elsewhere) = served_elsewhere(&method, path) {
        return elsewhere.into_response();
    }
    if path.contains("/views") {
        return CatalogError::Unsupported(format!(
            "{method} {path} is not supported by this catalog"
        ))
        .into_response();
    }
    let body = IcebergErrorResponse {
        error: ErrorModel {
            message: format!("Method {method} is not allowed on {path}"),
            error_type: "MethodNotAllowedException".into(),
            code: StatusCode::METHOD_NOT_ALLOWED.as_u16(),
        },
    };
    (StatusCode::METHOD_NOT_ALLOWED, Json(body)).into_response()
}
