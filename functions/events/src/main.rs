//! Entry point of the change-event publisher: the catalog table's DynamoDB stream onto the
//! EventBridge bus named by FLOE_EVENT_BUS, numbering the waiting events it sees in the table
//! named by FLOE_DYNAMODB_TABLE.

use std::sync::Arc;

use floe::store::MetaStore;
use floe::store::dynamodb::DynamoStore;
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    floe_lambda::init_logging();
    let bus = std::env::var("FLOE_EVENT_BUS").map_err(|_| "FLOE_EVENT_BUS is not set")?;
    let config = aws_config::load_from_env().await;
    let client = aws_sdk_eventbridge::Client::new(&config);
    let table =
        std::env::var("FLOE_DYNAMODB_TABLE").map_err(|_| "FLOE_DYNAMODB_TABLE is not set")?;
    let store: Arc<dyn MetaStore> = Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&config),
        &table,
    ));
    tracing::info!(function = "events", bus = %bus, "function ready");
    lambda_runtime::run(service_fn(|event: LambdaEvent<_>| {
        let (client, bus, store) = (client.clone(), bus.clone(), store.clone());
        async move {
            floe_events::handle(&client, &*store, &bus, event.payload)
                .await
                .map_err(Error::from)
        }
    }))
    .await
}
