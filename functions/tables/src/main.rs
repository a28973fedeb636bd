//! Lambda entry point of the tables endpoint group.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    floe_lambda::serve_group(
        floe::http::GroupHandlers::TABLES,
        floe::deployment::Storage::BUCKETS,
    )
    .await
}
