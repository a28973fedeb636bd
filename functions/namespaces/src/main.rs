//! Lambda entry point of the namespaces endpoint group.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    floe_lambda::serve_group(
        floe::http::GroupHandlers::NAMESPACES,
        floe::deployment::Storage::BUCKETS,
    )
    .await
}
