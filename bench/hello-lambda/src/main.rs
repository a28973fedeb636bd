//! The least a lambda_http function does: the runtime's loop and one fixed answer. Its size
//! and start-up to first answer are what `scripts/bench-functions` holds each Floe function to.

use lambda_http::{Body, Error, Request, Response, service_fn};

async fn hello(_: Request) -> Result<Response<Body>, Error> {
    Ok(Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from(r#"{"hello":"world"}"#))?)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::run(service_fn(hello)).await
}
