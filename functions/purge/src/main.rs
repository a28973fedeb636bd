//! Scheduled (EventBridge) entry point of the purge of expired soft-deleted namespaces.

use lambda_runtime::{Error, service_fn};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let catalog = floe_lambda::init(floe::deployment::Storage::BUCKETS).await?;
    floe_lambda::until_stopped(lambda_runtime::run(service_fn(|event| {
        let catalog = catalog.clone();
        async move { floe_lambda::purge(&catalog, event).await }
    })))
    .await
}
