//! Entry point of the change-event publisher: the catalog table's DynamoDB stream onto the
//! EventBridge bus named by FLOE_EVENT_BUS.

use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    floe_lambda::init_logging();
    let bus = std::env::var("FLOE_EVENT_BUS").map_err(|_| "FLOE_EVENT_BUS is not set")?;
    let config = aws_config::load_from_env().await;
    let client = aws_sdk_eventbridge::Client::new(&config);
    tracing::info!(function = "events", bus = %bus, "function ready");
    lambda_runtime::run(service_fn(|event: LambdaEvent<_>| {
        let (client, bus) = (client.clone(), bus.clone());
        async move {
            floe_events::publish(&client, &bus, event.payload)
                .await
                .map_err(Error::from)
        }
    }))
    .await
}
