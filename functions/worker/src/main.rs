//! The maintenance worker: fed by the maintenance queue's event source mapping, one table per
//! message, each maintained under a lease on its state row (`floe_queue::work`).

use aws_lambda_events::event::sqs::SqsEvent;
use floe::clock::{Clock, SystemClock};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let catalog = floe_lambda::init(floe::deployment::Storage::BUCKETS).await?;
    floe_lambda::until_stopped(lambda_runtime::run(service_fn(
        |event: LambdaEvent<SqsEvent>| {
            let catalog = catalog.clone();
            async move {
                Ok::<_, Error>(
                    floe_queue::work(&catalog, event.payload, SystemClock.now_ms()).await,
                )
            }
        },
    )))
    .await
}
