//! The least a function on Floe's stack does: the lambda_http loop, the AWS SDK's configuration
//! and one DynamoDB GetItem per request (the table from `FLOE_DYNAMODB_TABLE`), answered as its
//! item count. Every Floe function reads DynamoDB through this same client, so its size is the
//! floor `scripts/bench-functions` reports beside each function's.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::{Body, Error, Request, Response, service_fn};

async fn get(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<Response<Body>, Error> {
    let item = client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S("hello".into()))
        .key("sk", AttributeValue::S("hello".into()))
        .send()
        .await?;
    let found = usize::from(item.item.is_some());
    Ok(Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from(format!(r#"{{"items":{found}}}"#)))?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let table = std::env::var("FLOE_DYNAMODB_TABLE").unwrap_or_else(|_| "floe".into());
    lambda_http::run(service_fn(|_: Request| get(&client, &table))).await
}
