//! Lambda entry point of the config endpoint group.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    floe_lambda::serve_group(
        floe::http::GroupHandlers::CONFIG,
        floe::deployment::Storage::NONE,
    )
    .await
}
