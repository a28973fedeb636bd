//! Lambda entry point of the commits endpoint group.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    floe_lambda::serve_group(
        floe::http::GroupHandlers::COMMITS,
        floe::deployment::Storage::BUCKETS,
    )
    .await
}
