//! What every Floe Lambda function does at cold start: JSON logs, one catalog built from
//! settings, then serving exactly its endpoint group's routes from the shared route table.

use floe::routes::Group;

/// Serves one endpoint group through `lambda_http`. State is built once per cold start and reused
/// by every warm invocation.
pub async fn serve_group(group: Group) -> Result<(), lambda_http::Error> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FLOE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_current_span(false)
        .without_time()
        .init();
    let settings = floe::config::Settings::from_env()?;
    let (catalog, _) = floe::local::open_catalog(&settings).await?;
    tracing::info!(group = group.name(), "function ready");
    lambda_http::run(floe::http::router(catalog, &[group])).await
}
