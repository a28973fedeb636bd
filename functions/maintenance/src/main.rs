//! The scheduled (EventBridge) maintenance scheduler: keeps the due index complete, claims the
//! tables due and puts one message per table on the maintenance queue (FLOE_MAINTENANCE_QUEUE_URL),
//! which the worker function drains.

use floe::clock::{Clock, SystemClock};
use lambda_runtime::{Error, service_fn};

/// Tables one run claims at most: a run every five minutes puts up to 60,000 an hour on the
/// queue, more than 100,000 tables a day need.
const CLAIMS_PER_RUN: usize = 5_000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let catalog = floe_lambda::init(floe::deployment::Storage::BUCKETS).await?;
    let url = std::env::var("FLOE_MAINTENANCE_QUEUE_URL")
        .map_err(|_| "FLOE_MAINTENANCE_QUEUE_URL is not set")?;
    let sdk = floe::deployment::aws_config().await;
    let queue = floe_queue::SqsQueue::new(aws_sdk_sqs::Client::new(&sdk), url);
    floe_lambda::until_stopped(lambda_runtime::run(service_fn(|event: lambda_runtime::LambdaEvent<serde_json::Value>| {
        let (catalog, queue) = (catalog.clone(), queue.clone());
        async move {
            tracing::info!(request_id = %event.context.request_id, "maintenance scheduling started");
            floe_queue::schedule(&catalog, &queue, SystemClock.now_ms(), CLAIMS_PER_RUN).await
        }
    })))
    .await
}
