//! Lambda entry point of the scan-planning endpoint group.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    floe_lambda::serve_group(
        floe::http::GroupHandlers::PLANNING,
        floe::deployment::Storage::BUCKETS,
    )
    .await
}
