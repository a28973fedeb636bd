//! What every Floe Lambda function does at cold start: JSON logs (with the invocation's request
//! id from the runtime's span), one catalog built from settings, then serving exactly its
//! endpoint group's routes from the shared route table, or the management API.
//!
//! Every function's `main` runs tokio's current-thread runtime: an instance serves one
//! invocation at a time on a fraction of a vCPU (256 MB is about a seventh of one), so worker
//! threads add nothing but their start. Starting two of them, and their searches for work, cost
//! floe-config's cold start 1.3 ms of its 4.4 ms of CPU. Blocking work (the embedded store's
//! reads, hashing a metadata file) still goes to tokio's blocking pool.

use std::sync::Arc;

use floe::catalog::Catalog;
use floe::deployment::Storage;
use floe::http::GroupHandlers;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Logging and the catalog, built once per cold start and reused by every warm invocation.
/// `storage` is the bucket storage the function's routes reach: a function that reaches none
/// links none of the storage clients.
pub async fn init(storage: Storage) -> Result<Arc<Catalog>, lambda_http::Error> {
    init_with_settings(storage)
        .await
        .map(|(catalog, _)| catalog)
}

/// As [`init`], also handing back the settings (for what the catalog does not hold).
pub async fn init_with_settings(
    storage: Storage,
) -> Result<(Arc<Catalog>, floe::config::Settings), lambda_http::Error> {
    init_logging();
    let settings = floe::config::Settings::from_env()?;
    // On the heap: the opening's state machine is large, and nested in the caller's it was
    // copied through the main thread's stack at every start (13 more stack pages faulted in).
    let (catalog, _) = Box::pin(floe::deployment::open_catalog_for(&settings, storage)).await?;
    Ok((catalog, settings))
}

/// JSON logs to stdout (CloudWatch), with the invocation's request id from the runtime's span.
///
/// `FLOE_LOG` is a list of targets and levels (`warn,floe=debug`), read by tracing's static
/// `Targets` filter rather than `EnvFilter`: a function never needs span or field filters, and
/// `EnvFilter` links a regex engine and its Unicode tables into every function (0.3 MB of code in
/// floe-config) and matches spans at run time. A value that does not parse keeps the default
/// `info`, and says so once logging is up.
pub fn init_logging() {
    let (filter, refused) = log_filter(std::env::var("FLOE_LOG").ok().as_deref());
    tracing_subscriber::fmt()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .without_time()
        .finish()
        .with(filter)
        .init();
    if let Some(reason) = refused {
        tracing::warn!(%reason, "FLOE_LOG is not a list of targets and levels; logging at info");
    }
}

/// The filter `FLOE_LOG` names, or `info` (with why the value was refused).
fn log_filter(value: Option<&str>) -> (Targets, Option<String>) {
    let default = Targets::new().with_default(LevelFilter::INFO);
    match value.map(str::trim) {
        None | Some("") => (default, None),
        Some(value) => match value.parse::<Targets>() {
            Ok(filter) => (filter, None),
            Err(error) => (default, Some(error.to_string())),
        },
    }
}

/// Serves one endpoint group through `lambda_http`; routes of other groups answer a spec 404.
/// Only the named group's handlers are linked into the function.
pub async fn serve_group(
    handlers: GroupHandlers,
    storage: Storage,
) -> Result<(), lambda_http::Error> {
    let catalog = init(storage).await?;
    tracing::info!(group = handlers.group().name(), "function ready");
    until_stopped(lambda_http::run(fit_lambda_limits(
        floe::http::group_router(catalog, handlers),
    )))
    .await
}

/// Serves the management API (`/api/v1`) through `lambda_http`; Iceberg routes answer a spec
/// 404, so it takes only what API Gateway routes to it.
pub async fn serve_management() -> Result<(), lambda_http::Error> {
    let catalog = init(Storage::BUCKETS).await?;
    tracing::info!(function = "management", "function ready");
    until_stopped(lambda_http::run(fit_lambda_limits(
        floe::http::management_router(catalog),
    )))
    .await
}

/// Serves the read-only web view (`/ui`) through `lambda_http`; anything else is a 404 page.
pub async fn serve_ui() -> Result<(), lambda_http::Error> {
    let (catalog, settings) = init_with_settings(Storage::BUCKETS).await?;
    let config = floe::ui::UiConfig::from_settings(&settings)?;
    tracing::info!(function = "ui", "function ready");
    until_stopped(lambda_http::run(fit_lambda_limits(
        floe::ui::standalone_router(catalog, config),
    )))
    .await
}

/// Serves until the runtime loop ends or the process is asked to stop (SIGTERM: Lambda shutting
/// an instance down where an extension is registered, `cargo lambda watch` restarting a
/// function), so that the catalog is dropped in order: an embedded store closes its file
/// cleanly, and the next start opens it without a repair. The signal is listened for from this
/// call on (inside the runtime), not from the first poll. The serving future is boxed here,
/// before the returned one captures it, so that the function's main future stays small.
pub fn until_stopped<E>(
    serving: impl Future<Output = Result<(), E>>,
) -> impl Future<Output = Result<(), E>> {
    use tokio::signal::unix::{SignalKind, signal};
    let serving = Box::pin(serving);
    let terminate = signal(SignalKind::terminate()).ok();
    async move {
        let Some(mut terminate) = terminate else {
            return serving.await;
        };
        tokio::select! {
            served = serving => served,
            _ = terminate.recv() => {
                tracing::info!("stopping on SIGTERM");
                Ok(())
            }
        }
    }
}

/// A router as deployed behind API Gateway: answers over what Lambda can return become a spec
/// ErrorModel (`floe::http::lambda_limits`).
pub fn fit_lambda_limits(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::from_fn(
        floe::http::lambda_limits::fit_lambda_response,
    ))
}

/// The scheduled purge: one bounded run over dropped tables and namespaces; a run cut short is
/// finished by the next.
pub async fn purge(
    catalog: &Catalog,
    event: lambda_runtime::LambdaEvent<serde_json::Value>,
) -> Result<floe::catalog::PurgeRun, lambda_runtime::Error> {
    use floe::clock::{Clock, SystemClock};
    tracing::info!(request_id = %event.context.request_id, "purge run started");
    let run = catalog.purge_due(SystemClock.now_ms()).await?;
    tracing::info!(
        tables_purged = run.tables.purged.len(),
        namespaces_purged = run.namespaces.purged.len(),
        failed = run.failures().len(),
        objects_deleted = run.tables.objects_deleted + run.namespaces.objects_deleted,
        skipped = run.tables.skipped + run.namespaces.skipped,
        "purge run finished"
    );
    Ok(run)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tracing::Level;

    #[test]
    fn floe_log_names_targets_and_levels() {
        let (filter, refused) = super::log_filter(Some("warn,floe=debug"));
        assert_eq!(refused, None);
        assert!(filter.would_enable("floe::auth", &Level::DEBUG));
        assert!(!filter.would_enable("floe::auth", &Level::TRACE));
        assert!(filter.would_enable("aws_smithy_runtime", &Level::WARN));
        assert!(!filter.would_enable("aws_smithy_runtime", &Level::INFO));
    }

    #[test]
    fn floe_log_unset_or_unreadable_logs_at_info() {
        for value in [None, Some(""), Some("  ")] {
            let (filter, refused) = super::log_filter(value);
            assert_eq!(refused, None, "{value:?}");
            assert!(filter.would_enable("floe", &Level::INFO));
            assert!(!filter.would_enable("floe", &Level::DEBUG));
        }
        let (filter, refused) = super::log_filter(Some("floe=loud"));
        assert!(refused.is_some(), "an unknown level is refused");
        assert!(filter.would_enable("lambda_runtime", &Level::INFO));
        assert!(!filter.would_enable("lambda_runtime", &Level::DEBUG));
    }

    #[tokio::test]
    async fn sigterm_ends_serving_and_drops_what_it_held() {
        let held = Arc::new(());
        let serving = {
            let held = held.clone();
            async move {
                let _held = held;
                std::future::pending::<Result<(), String>>().await
            }
        };
        // Listening from the call on: the signal cannot come before the handler.
        let stopping = tokio::spawn(super::until_stopped(serving));
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        assert_eq!(stopping.await.unwrap(), Ok(()));
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "the serving future was dropped"
        );
    }
}
