//! Lambda entry point of the remote-signing endpoint group: the one function that signs storage
//! requests with a bucket's static keys.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    floe_lambda::serve_group(
        floe::http::GroupHandlers::SIGNING,
        floe::deployment::Storage::BUCKETS,
    )
    .await
}
