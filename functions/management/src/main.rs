//! Lambda entry point of the management API (`/api/v1`).

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    floe_lambda::serve_management().await
}
