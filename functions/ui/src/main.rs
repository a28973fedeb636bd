//! Lambda entry point of the read-only web view (`/ui`).

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    floe_lambda::serve_ui().await
}
